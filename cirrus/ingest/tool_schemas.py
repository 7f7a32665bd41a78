"""OpenAI function schemas for a task's ``tools`` (contract section 2).

Schemas are inferred from the recorded calls (:func:`infer_tool_schemas`) or
given by the user with ``--tool-schemas FILE`` (:func:`load_tool_schemas`);
given ones win (:func:`merge_schemas`).

Arguments are read through :func:`cirrus.ingest.cassettes.normalize_arguments`,
the rule the cassettes use: a call whose arguments are not a JSON object (a
bare string, a list, a number) is modelled as one property ``input`` holding
that value, so a model following the schema sends what the cassette matches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cirrus.ingest.cassettes import normalize_arguments
from cirrus.schema import ToolExchange, openai_function_name
from cirrus.tool_matching import MatchingError, matching_from_schemas

# The order types are listed in when a value was seen with several.
_TYPE_ORDER = ("string", "integer", "number", "boolean", "array", "object", "null")


class ToolSchemaError(ValueError):
    """A user-provided tool schema file is unreadable or invalid."""


@dataclass(slots=True)
class _Shape:
    """Everything seen at one place of the arguments, merged over all calls."""

    types: set[str] = field(default_factory=set)
    objects: int = 0  # how many objects were seen here (for ``required``)
    properties: dict[str, _Shape] = field(default_factory=dict)
    presence: dict[str, int] = field(default_factory=dict)
    items: _Shape | None = None

    def add(self, value: Any) -> None:
        self.types.add(_json_type(value))
        if isinstance(value, dict):
            self.objects += 1
            for key, item in value.items():
                key = str(key)
                self.properties.setdefault(key, _Shape()).add(item)
                self.presence[key] = self.presence.get(key, 0) + 1
        elif isinstance(value, list):
            if self.items is None:
                self.items = _Shape()
            for item in value:
                self.items.add(item)

    def schema(self, *, top: bool = False) -> dict[str, Any]:
        types = set(self.types)
        if {"integer", "number"} <= types:
            types.discard("integer")  # an int and a float seen: a number
        ordered = [t for t in _TYPE_ORDER if t in types]
        result: dict[str, Any] = {}
        if ordered:
            result["type"] = ordered[0] if len(ordered) == 1 else ordered
        if "array" in types:
            result["items"] = self.items.schema() if self.items is not None and self.items.types else {}
        if "object" in types:
            result["properties"] = {key: self.properties[key].schema() for key in sorted(self.properties)}
            required = sorted(key for key, seen in self.presence.items() if seen == self.objects)
            if required or top:
                result["required"] = required
        return result


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _description(name: str, calls: int) -> str:
    plural = "call" if calls == 1 else "calls"
    return f"Tool `{name}` recorded in the ticket logs; arguments inferred from {calls} {plural}."


def infer_tool_schemas(exchanges: Iterable[ToolExchange]) -> list[dict[str, Any]]:
    """One OpenAI tool object per tool name, inferred from every call of it.

    ``required`` holds the arguments present in every call; a value seen with
    several JSON types gets a ``type`` list.  Sorted by name; properties are
    sorted too, so the result does not depend on the order of the calls.
    """
    shapes: dict[str, _Shape] = {}
    calls: dict[str, int] = {}
    for exchange in exchanges:
        name = openai_function_name(exchange.name)
        shapes.setdefault(name, _Shape()).add(normalize_arguments(exchange.arguments))
        calls[name] = calls.get(name, 0) + 1
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": _description(name, calls[name]),
                "parameters": {"type": "object", **shapes[name].schema(top=True)},
            },
        }
        for name in sorted(shapes)
    ]


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolSchemaError(f"{path}: cannot read the tool schema file: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        raise ToolSchemaError(f"{path}: not valid {kind}: {exc}") from exc


def _function(entry: Any, where: str) -> dict[str, Any]:
    """The validated function object of one entry, with its name made a
    valid OpenAI function name (the way ingest renames recorded tools)."""
    if not isinstance(entry, dict):
        raise ToolSchemaError(f"{where}: expected an object, got {type(entry).__name__}")
    if "function" in entry or "type" in entry:
        if entry.get("type") != "function" or not isinstance(entry.get("function"), dict):
            raise ToolSchemaError(f'{where}: a tool object needs "type": "function" and a "function" object')
        function = dict(entry["function"])
    else:
        function = dict(entry)
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolSchemaError(f'{where}: "name" is missing or not a non-empty string')
    where = f"{where} ({name!r})"
    if "description" in function and not isinstance(function["description"], str):
        raise ToolSchemaError(f'{where}: "description" must be a string')
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise ToolSchemaError(f'{where}: "parameters" must be a JSON schema with "type": "object"')
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        raise ToolSchemaError(f'{where}: "parameters.properties" must map argument names to schemas')
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ToolSchemaError(f'{where}: "parameters.required" must be a list of argument names')
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise ToolSchemaError(f'{where}: "parameters.required" names unknown arguments: {", ".join(unknown)}')
    function["name"] = openai_function_name(name)
    function["parameters"] = parameters
    return function


def load_tool_schemas(path: Path) -> dict[str, dict[str, Any]]:
    """Read a ``--tool-schemas`` file: JSON (``.json``) or YAML (anything else),
    holding a list of OpenAI tool objects or of bare function objects.

    Returns OpenAI tool objects by (OpenAI-valid) function name.  Raises
    :class:`ToolSchemaError` naming the file and the entry on bad input.
    """
    path = Path(path)
    data = _read(path)
    if not isinstance(data, list):
        raise ToolSchemaError(f"{path}: expected a list of tool schemas, got {type(data).__name__}")
    tools: dict[str, dict[str, Any]] = {}
    first_entry: dict[str, int] = {}
    for number, entry in enumerate(data, start=1):
        function = _function(entry, f"{path}: entry {number}")
        name = function["name"]
        if name in tools:
            raise ToolSchemaError(
                f"{path}: entry {number}: tool {name!r} is already defined by entry {first_entry[name]}"
            )
        tools[name] = {"type": "function", "function": function}
        first_entry[name] = number
        try:  # x-cirrus-match rules (cirrus.tool_matching): checked here, not at the first replay
            matching_from_schemas([tools[name]])
        except MatchingError as exc:
            raise ToolSchemaError(f"{path}: entry {number}: {exc}") from None
    return tools


def merge_schemas(
    inferred: Iterable[dict[str, Any]],
    provided: Mapping[str, dict[str, Any]],
    *,
    include_unused: bool = False,
) -> list[dict[str, Any]]:
    """The inferred tools, each replaced by the provided schema of the same
    name; with ``include_unused`` the provided tools never called are added
    too.  Sorted by name."""
    tools = {tool["function"]["name"]: tool for tool in inferred}
    for name, tool in provided.items():
        if name in tools or include_unused:
            tools[name] = tool
    return [tools[name] for name in sorted(tools)]
