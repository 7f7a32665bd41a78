"""Freshdesk tickets with their conversations.

Field names follow Freshdesk's public API v2 reference,
https://developers.freshdesk.com/api/ (sections "Tickets", "View a Ticket"
with ``include=conversations``, "List all Conversations of a Ticket"), and
the Conversation model of Freshworks' Freshdesk SDK documentation
(https://developers.freshworks.com/freshdesk-sdk/docs/Conversation.html):

- ticket: ``id``, ``subject``, ``description`` (HTML) and
  ``description_text``, ``status`` (2 Open, 3 Pending, 4 Resolved,
  5 Closed), ``source`` (1 Email, 2 Portal, 3 Phone, 7 Chat, 9 Feedback
  Widget, 10 Outbound Email), ``type``, ``tags``, ``requester_id``,
  ``created_at``, ``attachments``, ``conversations``;
- conversation: ``body`` (HTML) and ``body_text``, ``incoming``,
  ``private``, ``user_id``, ``created_at``, ``attachments``.

The ticket's description opens the conversation, written by the requester
(by the agent for an outbound email, source 10).  A private conversation is
an internal note and a ``system`` event, never an agent reply; an incoming
one, or one by the requester, is the ``customer``'s; any other public one
(a reply, a public note) is the ``agent``'s.  Custom statuses (numbers past
5) are kept as ``status-<n>``.  Category: ``type``, else the first tag.
A JSON list or JSONL of tickets (the list endpoint answers a bare list) is
read as it is; ``{"tickets": [...]}`` is split by :mod:`files`.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list
from cirrus.ingest.readers._export import (
    body_text,
    export_ticket,
    flag,
    id_key,
    ocr_texts,
    opt_text,
    record_id,
    status_word,
    timestamp,
    vendor_of,
)
from cirrus.schema import Event, SourceRef, Ticket, TicketError

NAME = "freshdesk"

STATUSES = {2: "open", 3: "pending", 4: "resolved", 5: "closed"}
SOURCES = {1: "email", 2: "portal", 3: "phone", 7: "chat", 9: "feedback_widget", 10: "outbound_email"}
_OUTBOUND_EMAIL = 10


def detect(payload: Any) -> bool:
    return vendor_of(payload) == NAME


def parse(payload: Any, origin: SourceRef) -> Ticket:
    ticket = as_dict(payload, "ticket", None)
    ticket_id = record_id(ticket, "id", NAME)
    requester = id_key(ticket.get("requester_id"))
    source = ticket.get("source")

    events = []
    description = body_text(ticket, ("description_text",), ("description",), "ticket", ticket_id)
    if description:
        opener = "agent" if source == _OUTBOUND_EMAIL else "customer"
        ocr = ocr_texts(ticket.get("attachments"), "ticket", ticket_id) if opener == "customer" else []
        events.append(Event(opener, text=description, ts=timestamp(ticket.get("created_at"), "created_at", ticket_id),
                            ocr=ocr))
    for i, raw in enumerate(as_list(ticket.get("conversations") or [], "conversations", ticket_id)):
        where = f"conversations[{i}]"
        note = as_dict(raw, where, ticket_id)
        if flag(note, "private", where, ticket_id, False):
            role = "system"  # a private note: never an agent's reply
        elif flag(note, "incoming", where, ticket_id, False) or (
                requester is not None and id_key(note.get("user_id")) == requester):
            role = "customer"
        else:
            role = "agent"
        events.append(Event(
            role,
            text=body_text(note, ("body_text",), ("body",), where, ticket_id),
            ts=timestamp(note.get("created_at"), f"{where}.created_at", ticket_id),
            ocr=ocr_texts(note.get("attachments"), where, ticket_id) if role == "customer" else [],
        ))
    if not events:
        raise TicketError("no description and no conversations", ticket_id)

    tags = ticket.get("tags")
    category = opt_text(ticket, "type", ticket_id)
    if category is None and isinstance(tags, list) and tags and isinstance(tags[0], str):
        category = tags[0]
    return export_ticket(
        ticket_id, events, origin,
        status=_coded(ticket.get("status"), STATUSES, "status", ticket_id),
        channel=_coded(source, SOURCES, "source", ticket_id),
        category=category,
        subject=opt_text(ticket, "subject", ticket_id),
    )


def _coded(value: Any, names: dict[int, str], field: str, ticket_id: str) -> str | None:
    """A Freshdesk code (a number) as its word; a word (an exporter that
    already translated it) as a status word."""
    if isinstance(value, int) and not isinstance(value, bool):
        word = names.get(value, f"{field}-{value}")
        return status_word(word, field, ticket_id) if field == "status" else word
    if value is None:
        return None
    if isinstance(value, str):
        return status_word(value, field, ticket_id) if field == "status" else (value.strip().lower() or None)
    raise TicketError(f"{field} must be a number or a string", ticket_id)
