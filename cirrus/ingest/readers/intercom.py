"""Intercom conversations with their conversation parts.

Field names follow Intercom's public REST API reference:

- The conversation model,
  https://developers.intercom.com/docs/references/2.2/rest-api/conversations/conversation-model/ :
  ``id``, ``created_at`` (Unix seconds), ``source`` (the opening message:
  ``type``, ``subject``, ``body`` in HTML, ``author.type``/``author.id``,
  ``attachments``), ``state`` (open, closed, snoozed) and ``open``, ``tags``
  (``{"type": "tag.list", "tags": [{"name": ...}]}``), ``title``,
  ``conversation_parts.conversation_parts``.  API 1.x wrote the opening
  message as ``conversation_message``
  (https://developers.intercom.com/docs/references/1.0/rest-api/conversations/conversation-model);
  both are read.
- Conversation parts (the official client's ``ConversationPart`` and
  ``ConversationPartAuthor`` types, generated from Intercom's API
  definition, intercom-client on npm): ``part_type`` (comment, note,
  assignment, open, close, ...), ``body`` (HTML, may be null),
  ``created_at``, ``author.type`` (user, lead, contact, admin, team, bot),
  ``author.from_ai_agent``, ``author.is_ai_answer``, ``attachments``.

Roles: parts by a user, lead or contact are the ``customer``'s; parts by an
admin (or a team) are the ``agent``'s, except notes (``part_type`` note,
note_and_reopen), which are internal and become ``system`` events.  Parts by
a bot, or marked as written by Intercom's AI agent, are ``system``: the
benchmark's references are human agents' replies.  Parts without text
(assignments, state changes) are dropped.  Whole exports ``{"type":
"conversation.list", "conversations": [...]}`` are split by :mod:`files`.
Channel: the source ``type`` (``conversation``, Intercom's Messenger chat,
is written ``chat``); category: the first tag.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list, show
from cirrus.ingest.readers._export import (
    body_text,
    export_ticket,
    ocr_texts,
    opt_text,
    record_id,
    status_word,
    timestamp,
    vendor_of,
)
from cirrus.schema import Event, SourceRef, Ticket, TicketError

NAME = "intercom"

_CUSTOMERS = frozenset({"user", "lead", "contact"})
_AGENTS = frozenset({"admin", "team"})
_NOTES = frozenset({"note", "note_and_reopen"})


def detect(payload: Any) -> bool:
    return vendor_of(payload) == NAME


def parse(payload: Any, origin: SourceRef) -> Ticket:
    conversation = as_dict(payload, "conversation", None)
    ticket_id = record_id(conversation, "id", NAME)
    source_key = "source" if conversation.get("source") is not None else "conversation_message"
    source = conversation.get(source_key)
    events = []
    subject = None
    if source is not None:
        opening = as_dict(source, source_key, ticket_id)
        created = opening.get("created_at", conversation.get("created_at"))
        events.append(_part_event(opening, created, "comment", source_key, ticket_id))
        subject = opt_text(opening, "subject", ticket_id)
    for i, raw in enumerate(_parts(conversation.get("conversation_parts"), ticket_id)):
        where = f"conversation_parts[{i}]"
        part = as_dict(raw, where, ticket_id)
        part_type = part.get("part_type")
        if part_type is not None and not isinstance(part_type, str):
            raise TicketError(f"{where}.part_type must be a string", ticket_id)
        events.append(_part_event(part, part.get("created_at"), part_type or "comment", where, ticket_id))
    if not events:
        raise TicketError("no source message and no conversation parts", ticket_id)

    return export_ticket(
        ticket_id, events, origin,
        status=_status(conversation, ticket_id),
        channel=_channel(source),
        category=_first_tag(conversation.get("tags")),
        subject=subject,
    )


def _parts(value: Any, ticket_id: str) -> list[Any]:
    """``conversation_parts`` as Intercom writes it (an object holding the
    list under the same name) or as a plain list."""
    if value is None:
        return []
    if isinstance(value, dict):
        value = value.get("conversation_parts") or []
    return as_list(value, "conversation_parts", ticket_id)


def _part_event(part: dict[str, Any], created: Any, part_type: str, where: str, ticket_id: str) -> Event:
    author = part.get("author")
    if author is not None and not isinstance(author, dict):
        raise TicketError(f"{where}.author is not an object", ticket_id)
    author_type = (author or {}).get("type")
    if author_type is not None and not isinstance(author_type, str):
        raise TicketError(f"{where}.author.type must be a string", ticket_id)
    kind = (author_type or "").strip().lower()
    if kind in _CUSTOMERS:
        role = "customer"
    elif kind == "bot" or (author or {}).get("from_ai_agent") is True or (author or {}).get("is_ai_answer") is True:
        role = "system"
    elif kind in _AGENTS:
        role = "system" if part_type.strip().lower() in _NOTES else "agent"
    elif author_type is None:
        role = "system"  # no author: Intercom's own notice
    else:
        raise TicketError(f"{where}: unknown author type {show(author_type)}", ticket_id)
    text = body_text(part, (), ("body",), where, ticket_id)
    ocr = ocr_texts(part.get("attachments"), where, ticket_id) if role == "customer" else []
    return Event(role, text=text, ts=timestamp(created, f"{where}.created_at", ticket_id), ocr=ocr)


def _status(conversation: dict[str, Any], ticket_id: str) -> str | None:
    state = status_word(conversation.get("state"), "state", ticket_id)
    if state is not None:
        return state
    is_open = conversation.get("open")
    if isinstance(is_open, bool):
        return "open" if is_open else "resolved"
    return None


def _channel(source: Any) -> str | None:
    kind = source.get("type") if isinstance(source, dict) else None
    if not isinstance(kind, str) or not kind.strip() or kind == "conversation_message":  # API 1.x: no channel
        return None
    return "chat" if kind == "conversation" else kind


def _first_tag(tags: Any) -> str | None:
    listed = tags.get("tags") if isinstance(tags, dict) else tags
    if isinstance(listed, list) and listed:
        first = listed[0]
        name = first.get("name") if isinstance(first, dict) else first
        if isinstance(name, str) and name.strip():
            return name
    return None
