"""OpenAI chat transcripts (contract 1b), e.g. tau-bench trajectories.

Mapping: ``user`` -> customer, ``assistant`` -> agent (its text first, then
one tool_call event per ``tool_calls`` entry), ``tool`` -> tool_result.  The
first ``system`` (or ``developer``) message becomes the knowledge document
``<ticket_id>-system`` (none when it is empty); later ones become system
events.

Decisions beyond the contract:

- The id is the first present of ``ticket_id``, ``task_id``, ``id`` (string
  or integer); a present ``trial`` is appended as ``<id>-<trial>``.
- ``reward`` decides the status (below 1: ``unresolved``); without a reward a
  string ``status`` field is used, else ``resolved``.
- An assistant message with neither text nor tool calls adds no event.
- A tool call without ``id`` gets ``auto-<message>-<call>``; a reused id is
  renamed ``<id>~<n>`` and a tool message answers the latest call with its
  id (tau-bench reuses ids within a transcript); ``arguments``
  may be a JSON string (parsed; empty means ``{}``) or already a value.
- Roles are matched case-insensitively, surrounding whitespace ignored
  (``"User"``, ``"Assistant"``, ``"System"``, ``"Tool"``); an unknown role is
  still an error.
- Tool content that is a string holding a JSON object or array is parsed, so
  that de-identification can work field by field.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import (
    CallIds,
    as_dict,
    as_list,
    finite_number,
    id_str,
    loads,
    opt_str,
    parse_knowledge,
    role_name,
    show,
    ticket_id_of,
)
from cirrus.schema import Event, KnowledgeDoc, SourceRef, Ticket, TicketError, openai_function_name

NAME = "openai"

_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def detect(payload: Any) -> bool:
    return isinstance(payload, dict) and "events" not in payload and ("messages" in payload or "traj" in payload)


def parse(payload: Any, origin: SourceRef) -> Ticket:
    record = as_dict(payload, "ticket", None)
    ticket_id = ticket_id_of(record, "ticket_id", "task_id", "id")
    if record.get("trial") is not None:
        ticket_id = f"{ticket_id}-{id_str(record['trial'], 'trial', ticket_id)}"
    key = "messages" if "messages" in record else "traj"
    messages = as_list(record.get(key), key, ticket_id)

    if record.get("reward") is not None:
        reward = finite_number(record["reward"], "reward", ticket_id)
        status = "unresolved" if reward < 1 else "resolved"
    else:
        status = opt_str(record, "status", ticket_id, "resolved") or "resolved"

    knowledge: list[KnowledgeDoc] = []
    seen_system = False
    events: list[Event] = []
    calls = CallIds()
    for i, raw in enumerate(messages):
        where = f"{key}[{i}]"
        message = as_dict(raw, where, ticket_id)
        raw_role = message.get("role")
        role = role_name(raw_role)
        if role in ("system", "developer"):
            text = _text(message.get("content"), where, ticket_id)
            if seen_system:
                events.append(Event("system", text=text))
            elif text:
                knowledge.append(KnowledgeDoc(f"{ticket_id}-system", "System prompt", text))
            seen_system = True
        elif role == "user":
            events.append(Event("customer", text=_text(message.get("content"), where, ticket_id)))
        elif role == "assistant":
            text = _text(message.get("content"), where, ticket_id)
            tool_calls = as_list(message.get("tool_calls") or [], f"{where}.tool_calls", ticket_id)
            if text:
                events.append(Event("agent", text=text))
            for j, call in enumerate(tool_calls):
                events.append(_tool_call(call, f"{where}.tool_calls[{j}]", ticket_id, calls, f"auto-{i}-{j}"))
        elif role == "tool":
            raw_id = message.get("tool_call_id")
            if raw_id is None:
                raise TicketError(f"{where}: tool message needs a tool_call_id", ticket_id)
            call_id = calls.result(id_str(raw_id, f"{where}.tool_call_id", ticket_id))
            if call_id is None:
                raise TicketError(f"{where}: tool_call_id does not match an earlier tool call", ticket_id)
            content = message.get("content")
            if content is None or isinstance(content, list):
                content = _text(content, where, ticket_id)
            events.append(Event("tool_result", call_id=call_id, content=_maybe_json(content)))
        elif role is None:
            raise TicketError(f"{where}: missing role", ticket_id)
        else:
            raise TicketError(f"{where}: unknown role {show(raw_role)}", ticket_id)

    if not events:
        raise TicketError(f"{key} holds no messages besides the system prompt", ticket_id)
    return Ticket(
        ticket_id=ticket_id,
        events=events,
        origin=origin,
        category=opt_str(record, "category", ticket_id),
        channel=opt_str(record, "channel", ticket_id),
        language=opt_str(record, "language", ticket_id, "en") or "en",
        language_given=bool(opt_str(record, "language", ticket_id, "")),
        status=status,
        knowledge=knowledge + parse_knowledge(record.get("knowledge"), ticket_id),
    )


def _text(content: Any, where: str, ticket_id: str) -> str:
    """Message content as text: a string, null (empty), or a list of content
    parts of which the text parts are joined (images etc. are dropped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    raise TicketError(f"{where}: content must be a string, null or a list of parts", ticket_id)


def _tool_call(raw: Any, where: str, ticket_id: str, calls: CallIds, default_id: str) -> Event:
    call = as_dict(raw, where, ticket_id)
    function = as_dict(call.get("function"), f"{where}.function", ticket_id)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise TicketError(f"{where}: tool call needs a function name", ticket_id)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise TicketError(f"{where}: arguments are not valid JSON", ticket_id) from None
    elif arguments is None:
        arguments = {}
    raw_id = default_id if call.get("id") is None else id_str(call["id"], f"{where}.id", ticket_id)
    return Event("tool_call", call_id=calls.call(raw_id), name=openai_function_name(name), arguments=arguments)


def _maybe_json(content: Any) -> Any:
    if isinstance(content, str) and content.lstrip()[:1] in ("{", "["):
        try:
            parsed = loads(content)
        except (ValueError, RecursionError):
            return content
        if isinstance(parsed, (dict, list)):
            return parsed
    return content
