"""The native ticket format (contract 1a).

Decisions beyond the contract:

- ``ticket_id`` (and ``call_id``, ``doc_id``) may be an integer; it is
  converted to its decimal string.  Booleans, floats and empty strings are
  errors.
- ``text`` may be missing or null (an empty string); ``ts``, when present,
  must parse with :func:`datetime.fromisoformat`.
- Attachment OCR text is kept for customer events only (the contract merges
  it with its customer message); attachments of other events are ignored.
- A ``tool_call`` without ``call_id`` gets ``auto-<event index>``.  A reused
  ``call_id`` is renamed ``<id>~<n>`` and a result answers the latest call
  with its id (see :class:`CallIds`), so call ids are unique per ticket.
- ``arguments`` defaults to ``{}``, ``content`` to null.
- Roles are matched case-insensitively, surrounding whitespace ignored
  (``"Agent"``, ``" TOOL_CALL "``); an unknown role is still an error.
- The customer context a helpdesk shows its agent (docs/customer-context.md)
  may be given as the ticket's ``context`` (a string, a list of strings or an
  object of fields) or as ``"context": true`` on a system event.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from cirrus.ingest.readers._common import (
    CallIds,
    as_dict,
    as_list,
    id_str,
    opt_str,
    parse_knowledge,
    role_name,
    show,
    ticket_id_of,
)
from cirrus.schema import EVENT_ROLES, Event, SourceRef, Ticket, TicketError, openai_function_name

NAME = "native"


def detect(payload: Any) -> bool:
    """An object with ``events``, or with ``ticket_id`` and no transcript
    fields (so that a native ticket missing its events is reported as such)."""
    if not isinstance(payload, dict):
        return False
    if "events" in payload:
        return True
    return "ticket_id" in payload and not ({"messages", "traj", "original"} & payload.keys())


def parse(payload: Any, origin: SourceRef) -> Ticket:
    ticket = as_dict(payload, "ticket", None)
    ticket_id = ticket_id_of(ticket, "ticket_id")
    raw_events = ticket.get("events")
    if raw_events is None:
        raise TicketError("missing events", ticket_id)
    if not as_list(raw_events, "events", ticket_id):
        raise TicketError("events is empty", ticket_id)
    return Ticket(
        ticket_id=ticket_id,
        events=context_events(ticket.get("context"), ticket_id) + parse_events(raw_events, ticket_id),
        origin=origin,
        category=opt_str(ticket, "category", ticket_id),
        channel=opt_str(ticket, "channel", ticket_id),
        language=opt_str(ticket, "language", ticket_id, "en") or "en",
        language_given=bool(opt_str(ticket, "language", ticket_id, "")),
        status=opt_str(ticket, "status", ticket_id, "resolved") or "resolved",
        knowledge=parse_knowledge(ticket.get("knowledge"), ticket_id),
    )


def parse_events(raw_events: list[Any], ticket_id: str) -> list[Event]:
    events: list[Event] = []
    calls = CallIds()
    for i, raw in enumerate(raw_events):
        where = f"events[{i}]"
        event = as_dict(raw, where, ticket_id)
        raw_role = event.get("role")
        if raw_role is None:
            raise TicketError(f"{where}: missing role", ticket_id)
        role = role_name(raw_role)
        if role not in EVENT_ROLES:
            raise TicketError(f"{where}: unknown role {show(raw_role)}", ticket_id)
        ts = _timestamp(event.get("ts"), where, ticket_id)
        if role == "tool_call":
            call_id = calls.call(_call_id(event, where, ticket_id) or f"auto-{i}")
            name = event.get("name")
            if not isinstance(name, str) or not name:
                raise TicketError(f"{where}: tool_call needs a name", ticket_id)
            arguments = event.get("arguments")
            events.append(
                Event(
                    role,
                    ts=ts,
                    call_id=call_id,
                    name=openai_function_name(name),
                    arguments={} if arguments is None else arguments,
                )
            )
        elif role == "tool_result":
            raw_id = _call_id(event, where, ticket_id)
            if raw_id is None:
                raise TicketError(f"{where}: tool_result needs a call_id", ticket_id)
            call_id = calls.result(raw_id)
            if call_id is None:
                raise TicketError(f"{where}: tool_result call_id does not match an earlier tool_call", ticket_id)
            events.append(Event(role, ts=ts, call_id=call_id, content=event.get("content")))
        else:
            text = event.get("text")
            if text is not None and not isinstance(text, str):
                raise TicketError(f"{where}: text must be a string", ticket_id)
            ocr = _ocr(event.get("attachments"), where, ticket_id) if role == "customer" else []
            context = event.get("context", False)
            if not isinstance(context, bool) or (context and role != "system"):
                raise TicketError(f"{where}: context must be true or false, and only on a system event", ticket_id)
            events.append(Event(role, text=text or "", ts=ts, ocr=ocr, context=context))
    return events


def context_events(value: Any, ticket_id: str) -> list[Event]:
    """The ticket's ``context`` (a string, a list of strings, or an object
    of fields written ``key: value``, nested values as JSON) as system events
    marked as context, placed before the conversation."""
    if value is None:
        return []
    if isinstance(value, str):
        lines = [value]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        lines = list(value)
    elif isinstance(value, dict):
        lines = [f"{key}: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}"
                 for key, item in value.items()]
    else:
        raise TicketError("context must be a string, a list of strings or an object", ticket_id)
    return [Event("system", text=line, context=True) for line in lines if line.strip()]


def _call_id(event: dict[str, Any], where: str, ticket_id: str) -> str | None:
    value = event.get("call_id")
    return None if value is None else id_str(value, f"{where}.call_id", ticket_id)


def _timestamp(value: Any, where: str, ticket_id: str) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise TicketError(f"{where}: ts is not an ISO-8601 string", ticket_id) from None
    return str(value)


def _ocr(value: Any, where: str, ticket_id: str) -> list[str]:
    if value is None:
        return []
    texts = []
    for j, raw in enumerate(as_list(value, f"{where}.attachments", ticket_id)):
        attachment = as_dict(raw, f"{where}.attachments[{j}]", ticket_id)
        ocr_text = attachment.get("ocr_text")
        if ocr_text is not None and not isinstance(ocr_text, str):
            raise TicketError(f"{where}.attachments[{j}]: ocr_text must be a string", ticket_id)
        if ocr_text:
            texts.append(ocr_text)
    return texts
