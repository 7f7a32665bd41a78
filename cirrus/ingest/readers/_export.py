"""What the helpdesk export readers share: which vendor a record comes from,
timestamps, status words, attachment OCR text, event order.

Like :mod:`_common`, every error is a :class:`TicketError` that names the
field, never its text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list, id_str
from cirrus.ingest.readers.html_text import html_to_text
from cirrus.schema import Event, SourceRef, Ticket, TicketError

# Keys by which native, OpenAI and ABCD records are recognised: a record
# holding one of them belongs to those readers, never to a vendor's.
_OLDER_FORMAT_KEYS = frozenset({"events", "ticket_id", "messages", "traj", "original", "convo_id"})
# Status words that mean the case is done (contract: "resolved").
_DONE = frozenset({"solved", "closed", "resolved"})
# Channels whose "subject" is a label the helpdesk made up ("Chat with
# Visitor 88213"), not words the customer wrote.
_LIVE_CHANNELS = frozenset({"chat", "native_messaging", "messaging", "sms", "whatsapp", "facebook", "twitter",
                            "instagram", "line", "wechat", "voice", "phone"})


def vendor_of(payload: Any) -> str | None:
    """The export reader whose records look like ``payload``, or None.

    One function decides for all vendors, in a fixed order, so that the
    readers' ``detect`` functions exclude each other by construction.  Each
    rule rests on keys only that vendor's API writes (docs/input-formats.md).
    """
    if not isinstance(payload, dict) or _OLDER_FORMAT_KEYS & payload.keys():
        return None
    if "conv_content" in payload or ("conv_id" in payload and "conv_start_tm" in payload):
        return "meiqia"
    attributes = payload.get("attributes")
    if (isinstance(attributes, dict) and attributes.get("type") == "Case") or "CaseNumber" in payload:
        return "salesforce"
    if payload.get("type") == "conversation" or "conversation_parts" in payload or "conversation_message" in payload:
        return "intercom"
    if "conversations" in payload or "description_text" in payload:
        return "freshdesk"
    if ("comments" in payload or "audits" in payload or isinstance(payload.get("ticket"), dict)
            or (isinstance(payload.get("via"), dict) and "requester_id" in payload)):
        return "zendesk"
    return None


def record_id(record: dict[str, Any], key: str, prefix: str) -> str:
    """``<prefix>-<id>``: vendor ids are numbers that repeat across
    helpdesks, so the prefix keeps a mixed input's ids apart."""
    if record.get(key) is None:
        raise TicketError(f"missing {key}")
    return f"{prefix}-{id_str(record[key], key)}"


def timestamp(value: Any, where: str, ticket_id: str) -> str | None:
    """A vendor time as ISO-8601: ISO strings (``Z``, ``+0000``, a space for
    the ``T`` as Chinese platforms write it) are normalised; numbers are Unix
    seconds, or milliseconds when too large for seconds (Intercom writes
    seconds); a naive time stays naive (the export's own clock)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, str):
            return datetime.fromisoformat(value.strip()).isoformat()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            seconds = value / 1000 if abs(value) >= 1e11 else value
            return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    except (ValueError, OverflowError, OSError):
        pass
    raise TicketError(f"{where} is not a timestamp", ticket_id)


def status_word(value: Any, where: str, ticket_id: str) -> str | None:
    """A vendor status as Cirrus counts it: solved/closed/resolved (any
    case) become ``resolved``; other words are kept, lowercased."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TicketError(f"{where} must be a string", ticket_id)
    word = " ".join(value.split()).lower()
    if not word:
        return None
    return "resolved" if word in _DONE else word


def opt_text(record: dict[str, Any], key: str, ticket_id: str) -> str | None:
    """A string field, or None when missing, null or blank."""
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TicketError(f"{key} must be a string", ticket_id)
    return value if value.strip() else None


def body_text(record: dict[str, Any], plain_keys: Iterable[str], html_keys: Iterable[str], where: str,
              ticket_id: str) -> str:
    """A message body: the first present plain-text field, else the first
    HTML field as text, else ``""``."""
    for key in plain_keys:
        value = record.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise TicketError(f"{where}.{key} must be a string", ticket_id)
            return value.strip()
    for key in html_keys:
        value = record.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise TicketError(f"{where}.{key} must be a string", ticket_id)
            return html_to_text(value)
    return ""


def ocr_texts(value: Any, where: str, ticket_id: str) -> list[str]:
    """The ``ocr_text`` of a message's attachments, where an export (or a
    step before Cirrus) added one; attachments without it carry nothing a
    replayed agent could read."""
    if value is None:
        return []
    texts = []
    for j, raw in enumerate(as_list(value, f"{where}.attachments", ticket_id)):
        attachment = as_dict(raw, f"{where}.attachments[{j}]", ticket_id)
        text = attachment.get("ocr_text")
        if text is not None and not isinstance(text, str):
            raise TicketError(f"{where}.attachments[{j}]: ocr_text must be a string", ticket_id)
        if text and text.strip():
            texts.append(text)
    return texts


def flag(record: dict[str, Any], key: str, where: str, ticket_id: str, default: bool | None) -> bool | None:
    """A true/false field; ``default`` when missing or null."""
    value = record.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TicketError(f"{where}.{key} must be true or false", ticket_id)
    return value


def id_key(value: Any) -> str | None:
    """A user or author id as a comparable key (``35436`` and ``"35436"``
    are the same user); None for anything that is no id."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def chronological(events: list[Event]) -> list[Event]:
    """``events`` sorted by time when every one has a time (stable, so equal
    times keep the export's order); as they are otherwise.  Exports that
    merge several lists (Salesforce's emails, comments and feed) need it."""
    keys = []
    for event in events:
        if event.ts is None:
            return events
        moment = datetime.fromisoformat(event.ts)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        try:
            keys.append(moment.timestamp())
        except (OverflowError, ValueError, OSError):
            return events
    order = sorted(range(len(events)), key=keys.__getitem__)
    return [events[i] for i in order]


def with_subject(events: list[Event], subject: str | None) -> list[Event]:
    """The subject line heads the first customer message when that message
    opens the ticket and does not already carry it: an emailed request is
    its subject and its body, and "see subject" bodies are common."""
    if not subject or not subject.strip() or not events or events[0].role != "customer":
        return events
    first = events[0]
    subject = subject.strip()
    if subject.lower() in first.text.lower():
        return events
    first.text = f"{subject}\n\n{first.text}" if first.text else subject
    return events


def export_ticket(ticket_id: str, events: list[Event], origin: SourceRef, *, status: str | None,
                  channel: str | None, category: str | None, subject: str | None = None) -> Ticket:
    """The :class:`Ticket` of a vendor record: events without text dropped,
    the rest in time order, the subject merged in (not on live channels:
    chat, phone, messaging), a missing status counted as resolved (contract
    1a)."""
    events = [e for e in events if e.text.strip() or e.ocr]
    if not events:
        raise TicketError("no message with text", ticket_id)
    return Ticket(
        ticket_id=ticket_id,
        events=with_subject(chronological(events), None if (channel or "").lower() in _LIVE_CHANNELS else subject),
        origin=origin,
        category=category,
        channel=channel,
        status=status or "resolved",
    )
