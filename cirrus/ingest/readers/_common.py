"""Validation helpers shared by the format adapters.

Every error raised here is a :class:`TicketError` whose reason names *where*
the problem is (field, index) but never repeats ticket text: the only input
value ever shown is a short identifier-like token (a role name, say).
"""

from __future__ import annotations

import math
import re
from typing import Any

from cirrus.schema import KnowledgeDoc, TicketError
from cirrus.strict_json import NotJSON, loads

__all__ = ["NotJSON", "loads"]  # re-exported for the readers

_SHOWABLE = re.compile(r"[A-Za-z0-9_.-]{1,12}")


def show(value: object) -> str:
    """``'value'`` when it is a short identifier-like string, else a neutral
    description: quarantine reasons must not leak ticket text."""
    if isinstance(value, str) and _SHOWABLE.fullmatch(value):
        return repr(value)
    return f"(a {type(value).__name__}, not shown)"


def role_name(value: Any) -> Any:
    """A role (or speaker) as the readers compare it: a string lowercased,
    with surrounding whitespace dropped (real exports write ``"Agent"``,
    ``"TOOL_CALL"``, ``" user"``); anything else unchanged, so that the
    caller reports it with the original value."""
    return value.strip().lower() if isinstance(value, str) else value


def id_str(value: Any, field: str, ticket_id: str | None = None) -> str:
    """An identifier as a string: strings as they are, integers converted
    (task ids are often numbers); anything else, or empty, is an error."""
    if isinstance(value, bool) or value is None:
        raise TicketError(f"{field} must be a string", ticket_id)
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TicketError(f"{field} must be a string", ticket_id)
    if not value.strip():
        raise TicketError(f"{field} is empty", ticket_id)
    return value


def ticket_id_of(payload: dict[str, Any], *keys: str) -> str:
    for key in keys:
        if payload.get(key) is not None:
            return id_str(payload[key], key)
    raise TicketError(f"missing {keys[0]}")


def opt_str(payload: dict[str, Any], key: str, ticket_id: str, default: str | None = None) -> str | None:
    value = payload.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise TicketError(f"{key} must be a string", ticket_id)
    return value


def as_dict(value: Any, where: str, ticket_id: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TicketError(f"{where} is not an object", ticket_id)
    return value


def as_list(value: Any, where: str, ticket_id: str | None) -> list[Any]:
    if not isinstance(value, list):
        raise TicketError(f"{where} must be a list", ticket_id)
    return value


def finite_number(value: Any, field: str, ticket_id: str) -> float:
    number = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past the float range (JSON sets no limit)
            pass
    if not math.isfinite(number):
        raise TicketError(f"{field} must be a finite number", ticket_id)
    return number


class CallIds:
    """Tool-call ids of one ticket, made unique.

    Real logs reuse ids (tau-bench repeats ``call_...`` ids within one
    transcript), so a reused id is renamed ``<id>~<n>`` and a result is
    matched to the latest call that carried its id.  Downstream code can then
    pair calls and results by ``call_id`` alone.
    """

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}
        self._used: set[str] = set()

    def call(self, raw_id: str) -> str:
        unique, n = raw_id, 1
        while unique in self._used:
            n += 1
            unique = f"{raw_id}~{n}"
        self._used.add(unique)
        self._latest[raw_id] = unique
        return unique

    def result(self, raw_id: str) -> str | None:
        return self._latest.get(raw_id)


def parse_knowledge(value: Any, ticket_id: str) -> list[KnowledgeDoc]:
    """``knowledge``: a list of ``{doc_id, title, text}``; a missing doc_id
    becomes ``<ticket_id>-kb-<n>`` (n = 1-based position), a missing title
    ``""``; ``text`` is required."""
    if value is None:
        return []
    docs = []
    for n, raw in enumerate(as_list(value, "knowledge", ticket_id), start=1):
        where = f"knowledge[{n - 1}]"
        doc = as_dict(raw, where, ticket_id)
        doc_id = doc.get("doc_id")
        text = doc.get("text")
        title = doc.get("title")
        if not isinstance(text, str):
            raise TicketError(f"{where}: text must be a string", ticket_id)
        if title is not None and not isinstance(title, str):
            raise TicketError(f"{where}: title must be a string", ticket_id)
        docs.append(
            KnowledgeDoc(
                doc_id=f"{ticket_id}-kb-{n}" if doc_id is None else id_str(doc_id, f"{where}.doc_id", ticket_id),
                title=title or "",
                text=text,
            )
        )
    return docs
