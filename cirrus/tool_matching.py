"""How a tool call's arguments are compared with the recorded ones: per tool
and per argument, ``exact`` (the default), ``normalized`` or ``ignored``.

The contract replays a call when its arguments equal a recorded call's as
canonical JSON.  That is right for identifiers and amounts, and wrong for
free text: a correct paraphrase of a ``reason``, ``note`` or ``title`` gets
"no recorded result".  A tool schema may say, per argument, how it is
compared, with the JSON Schema extension keyword ``x-cirrus-match`` on the
argument's property (nested objects and arrays of objects too)::

    {"type": "function", "function": {"name": "CreateRefund", "parameters": {
        "type": "object", "properties": {
            "order_id": {"type": "string"},
            "amount": {"type": "number", "x-cirrus-match": "normalized"},
            "reason": {"type": "string", "x-cirrus-match": "ignored"}}}}}

* ``exact``: equal as canonical JSON (today's rule for every argument);
* ``normalized``: text compared after Unicode NFKC, case folding and
  whitespace collapsing; numbers (and text that is a number, thousands
  separators allowed: ``"1,500.00"``) as numbers (``1500 == 1500.0``);
* ``ignored``: left out of the comparison (present or absent, any value).

The keyword is taken out of the schemas the agent is sent
(:func:`without_rules`).  Both the replay (:class:`cirrus.replay.ToolReplayer`) and TEV
(:func:`cirrus.evaluate.walk.judge_checkpoint`) compare through
:func:`match_key`, so a call the cassette answers under these rules also
counts as the reference call it matched.  A tool without rules keeps the
exact comparison, so workspaces without them replay as before.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from cirrus.ingest.cassettes import canonical_json, normalize_arguments

MATCH_KEYWORD = "x-cirrus-match"
Rule = Literal["exact", "normalized", "ignored"]
RULES: tuple[str, ...] = ("exact", "normalized", "ignored")
# tool name -> argument path -> rule; a path is a property name, "a.b" inside
# an object, "a[].b" inside the objects of an array
ToolMatching = Mapping[str, Mapping[str, str]]

_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:[, ]\d{3})+|\d+)(?:\.\d+)?")


class MatchingError(ValueError):
    """A schema's ``x-cirrus-match`` is not one of :data:`RULES`."""


def _rules_of(schema: Any, prefix: str, tool: str, out: dict[str, str]) -> None:
    if not isinstance(schema, Mapping):
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            path = f"{prefix}{name}"
            if isinstance(sub, Mapping) and MATCH_KEYWORD in sub:
                rule = sub[MATCH_KEYWORD]
                if rule not in RULES:
                    raise MatchingError(f"tool {tool}: argument {path}: {MATCH_KEYWORD} is {rule!r}; use one of "
                                        f"{', '.join(RULES)}")
                out[path] = str(rule)
            _rules_of(sub, f"{path}.", tool, out)
    items = schema.get("items")
    if isinstance(items, Mapping) and prefix:
        _rules_of(items, f"{prefix[:-1]}[].", tool, out)


def matching_from_schemas(tools: Iterable[Mapping[str, Any]] | None) -> dict[str, dict[str, str]]:
    """The non-exact rules declared in OpenAI function schemas (a task's
    ``tools``): ``{tool: {path: rule}}``, tools without rules left out."""
    matching: dict[str, dict[str, str]] = {}
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        rules: dict[str, str] = {}
        _rules_of(function.get("parameters"), "", function["name"], rules)
        rules = {path: rule for path, rule in rules.items() if rule != "exact"}
        if rules:
            matching[function["name"]] = rules
    return matching


def without_rules(schema: Any) -> Any:
    """``schema`` (a tool schema, or a list of them) without the
    ``x-cirrus-match`` keywords: what the agent under test is sent (a
    provider that checks schemas strictly may refuse unknown keywords)."""
    if isinstance(schema, Mapping):
        return {key: without_rules(value) for key, value in schema.items() if key != MATCH_KEYWORD}
    if isinstance(schema, list):
        return [without_rules(item) for item in schema]
    return schema


def normalized_value(value: Any) -> Any:
    """A value as ``normalized`` compares it (see the module doc)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        number = float(value)
        return int(number) if number.is_integer() else number
    if isinstance(value, str):
        text = " ".join(unicodedata.normalize("NFKC", value).casefold().split())
        if _NUMBER.fullmatch(text):
            return normalized_value(float(text.replace(",", "").replace(" ", "")))
        return text
    if isinstance(value, list):
        return [normalized_value(item) for item in value]
    if isinstance(value, Mapping):
        return {key: normalized_value(item) for key, item in value.items()}
    return value


def _apply(value: Any, path: list[str], rule: str) -> Any:
    """``value`` with ``rule`` applied at ``path`` (a list of keys, ``"[]"``
    meaning every item of an array)."""
    if not path:
        return normalized_value(value) if rule == "normalized" else value
    head, rest = path[0], path[1:]
    if head.endswith("[]"):
        key = head[:-2]
        if isinstance(value, Mapping) and isinstance(value.get(key), list):
            return {**value, key: [_apply(item, rest, rule) for item in value[key]]}
        return value
    if not isinstance(value, Mapping) or head not in value:
        return value
    if not rest and rule == "ignored":
        return {k: v for k, v in value.items() if k != head}
    return {**value, head: _apply(value[head], rest, rule)}


def match_key(name: str, arguments: Any, matching: ToolMatching | None = None) -> str:
    """The canonical JSON a call of tool ``name`` is compared by: its
    arguments (a JSON value or a JSON string) with the tool's rules applied
    (ignored arguments left out, normalized ones normalized)."""
    value: Any = normalize_arguments(arguments)
    rules = (matching or {}).get(name)
    if rules and isinstance(value, Mapping):
        for path, rule in sorted(rules.items()):
            if rule != "exact":
                value = _apply(value, path.split("."), rule)
    return canonical_json(value)


__all__ = ["MATCH_KEYWORD", "MatchingError", "RULES", "Rule", "ToolMatching", "match_key", "matching_from_schemas",
           "normalized_value", "without_rules"]
