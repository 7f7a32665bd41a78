"""Zendesk Support tickets with their comments (or audits).

Field names follow Zendesk's public API reference:

- Tickets, https://developer.zendesk.com/api-reference/ticketing/tickets/tickets/ :
  ``id``, ``subject``/``raw_subject``, ``description``, ``status``
  (new, open, pending, hold, solved, closed), ``type``, ``tags``,
  ``requester_id``, ``via.channel``.
- Ticket Comments, https://developer.zendesk.com/api-reference/ticketing/tickets/ticket_comments/ :
  ``author_id``, ``body``, ``html_body``, ``plain_body``, ``public``,
  ``created_at``, ``attachments``, ``type`` (Comment, VoiceComment), ``via``.
- Ticket Audits, https://developer.zendesk.com/api-reference/ticketing/tickets/ticket_audits/
  and the Ticket Audit events reference
  (https://developer.zendesk.com/documentation/ticketing/reference-guides/ticket-audit-events-reference):
  an audit's ``author_id``, ``created_at``, ``via`` and ``events``, of which
  the ``Comment`` and ``VoiceComment`` events carry the comments.
- Users, https://developer.zendesk.com/api-reference/ticketing/users/users/ :
  ``id`` and ``role`` (``end-user``, ``agent``, ``admin``), sideloaded with
  ``?include=users``.

A record is a ticket object with its ``comments`` and/or ``audits`` (and
optionally ``users``) embedded, or Zendesk's own answer shape ``{"ticket":
{...}, "comments": [...], "audits": [...], "users": [...]}``; a whole export
``{"tickets": [...], "users": [...]}`` is split into such records by
:mod:`files`.

Roles: a private comment (``public: false``) is an internal note and a
``system`` event, never an agent reply.  Comments made by business rules or
bots (``via.channel`` ``rule``, ``system``, ``answer_bot...``; author ``-1``,
Zendesk's system user) are ``system`` too.  Otherwise the author's user role
decides (end-user: ``customer``; agent or admin: ``agent``); without users,
the requester is the customer and anyone else an agent (with no requester
either, the author of the first comment is taken for the requester).
Comments win over audits (audits repeat them); with neither, the ticket's
``description`` is the requester's one message.  Category: ``type``, else
the first tag.
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

NAME = "zendesk"

_SYSTEM_CHANNELS = ("rule", "system", "answer_bot")
_COMMENT_EVENTS = ("Comment", "VoiceComment")
# the last sideloaded users list and its id -> role index (every ticket of
# a whole export shares one list: index it once, not once per ticket)
_users_seen: tuple[list[Any], dict[str, str]] | None = None


def detect(payload: Any) -> bool:
    return vendor_of(payload) == NAME


def parse(payload: Any, origin: SourceRef) -> Ticket:
    record = as_dict(payload, "ticket", None)
    ticket = as_dict(record["ticket"], "ticket", None) if "ticket" in record else record
    ticket_id = record_id(ticket, "id", NAME)
    roles = _user_roles(record.get("users", ticket.get("users")), ticket_id)
    requester = id_key(ticket.get("requester_id"))

    comments = record.get("comments", ticket.get("comments"))
    audits = record.get("audits", ticket.get("audits"))
    if comments is not None:
        raw = [(c, f"comments[{i}]") for i, c in enumerate(as_list(comments, "comments", ticket_id))]
    elif audits is not None:
        raw = _audit_comments(audits, ticket_id)
    else:
        raw = []
    if requester is None and not roles and raw:
        requester = id_key(raw[0][0].get("author_id")) if isinstance(raw[0][0], dict) else None

    events = [_comment_event(comment, where, ticket_id, roles, requester) for comment, where in raw]
    if not raw:
        description = opt_text(ticket, "description", ticket_id)
        if description is None:
            raise TicketError("no comments, audits or description", ticket_id)
        events = [Event("customer", text=description, ts=timestamp(ticket.get("created_at"), "created_at", ticket_id))]

    via = ticket.get("via")
    channel = via.get("channel") if isinstance(via, dict) else None
    tags = ticket.get("tags")
    category = opt_text(ticket, "type", ticket_id)
    if category is None and isinstance(tags, list) and tags and isinstance(tags[0], str):
        category = tags[0]
    return export_ticket(
        ticket_id, events, origin,
        status=status_word(ticket.get("status"), "status", ticket_id),
        channel=channel if isinstance(channel, str) and channel else None,
        category=category,
        subject=opt_text(ticket, "subject", ticket_id) or opt_text(ticket, "raw_subject", ticket_id),
    )


def _audit_comments(audits: Any, ticket_id: str) -> list[tuple[Any, str]]:
    """The comment events of the audits, each completed with its audit's
    author, time and channel where the event itself does not say."""
    found: list[tuple[Any, str]] = []
    for i, raw_audit in enumerate(as_list(audits, "audits", ticket_id)):
        audit = as_dict(raw_audit, f"audits[{i}]", ticket_id)
        for j, raw_event in enumerate(as_list(audit.get("events") or [], f"audits[{i}].events", ticket_id)):
            event = as_dict(raw_event, f"audits[{i}].events[{j}]", ticket_id)
            if event.get("type") in _COMMENT_EVENTS:
                merged = {key: audit.get(key) for key in ("author_id", "created_at", "via")}
                merged.update({key: value for key, value in event.items() if value is not None})
                found.append((merged, f"audits[{i}].events[{j}]"))
    return found


def _comment_event(raw: Any, where: str, ticket_id: str, roles: dict[str, str], requester: str | None) -> Event:
    comment = as_dict(raw, where, ticket_id)
    text = body_text(comment, ("plain_body", "body"), ("html_body",), where, ticket_id)
    if not text and comment.get("type") == "VoiceComment":
        data = comment.get("data")
        transcript = data.get("transcription_text") if isinstance(data, dict) else None
        text = transcript if isinstance(transcript, str) else ""
    public = flag(comment, "public", where, ticket_id, True)
    role = _role(comment, public, roles, requester)
    ocr = ocr_texts(comment.get("attachments"), where, ticket_id) if role == "customer" else []
    return Event(role, text=text, ts=timestamp(comment.get("created_at"), f"{where}.created_at", ticket_id), ocr=ocr)


def _role(comment: dict[str, Any], public: bool | None, roles: dict[str, str], requester: str | None) -> str:
    if not public:
        return "system"  # an internal note: never an agent's reply
    via = comment.get("via")
    channel = via.get("channel") if isinstance(via, dict) else None
    author = id_key(comment.get("author_id"))
    if (isinstance(channel, str) and channel.startswith(_SYSTEM_CHANNELS)) or author == "-1":
        return "system"
    role = roles.get(author) if author is not None else None
    if role == "end-user":
        return "customer"
    if role in ("agent", "admin"):
        return "agent"
    return "customer" if author is not None and author == requester else "agent"


def _user_roles(users: Any, ticket_id: str) -> dict[str, str]:
    """User id -> role from a sideloaded users list; users without an id or
    a role are left out (the list is shared by a whole export: one odd user
    must not quarantine every ticket)."""
    global _users_seen
    if users is None:
        return {}
    listed = as_list(users, "users", ticket_id)
    if _users_seen is not None and _users_seen[0] is listed:
        return _users_seen[1]
    roles: dict[str, str] = {}
    for user in listed:
        key = id_key(user.get("id")) if isinstance(user, dict) else None
        if key is not None and isinstance(user.get("role"), str):
            roles[key] = user["role"].strip().lower()
    _users_seen = (listed, roles)
    return roles
