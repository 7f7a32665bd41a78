"""The customer context a ticket carries (docs/customer-context.md).

Helpdesks put what they know about the customer into the conversation as
system events before the agent's first word: the signed-in account, the
plan, the order on screen.  A production agent sees it; the agent under test
should too.  Other system events are notices about the chat itself ("Customer
joined the chat", "Chat transferred", "Customer rated 5 stars") and stay
filler.

A system event is context when the input says so (the ticket's ``context``
field, or ``"context": true`` on the event; :mod:`cirrus.ingest.readers.native`)
or when both hold:

* it comes before the agent's first message (after it, the agent has already
  answered without it: a later event is a notice or an action of the helpdesk);
* it is written as fields: at least one ``label: value`` (``label=value``,
  full-width ``：`` too) whose label is a short name (at most four words, or
  eight Han characters), not a time (``10:02``) nor a URL scheme.

Notices are sentences, context is fields: the rule reads the shape of the
line, not a list of phrases, so it holds in any language that writes fields
this way.
"""

from __future__ import annotations

import re
from dataclasses import replace

from cirrus.schema import Event, Ticket

# "label: value", at the start or after a separator; the label is captured
_FIELD = re.compile(r"(?:^|[;；,，|\n]|\s{2,})\s*([^\s:：=;；,，|\n][^:：=;；,，|\n]{0,40}?)\s*[:：=]\s*(?!//)(\S)")
_HAN = re.compile(r"[\u3400-\u9fff]")


def _short_label(label: str) -> bool:
    label = label.strip()
    if not label or label[-1].isdigit():
        return False  # a time ("at 10:02"), a list number ("3: ...")
    han = len(_HAN.findall(label))
    if han:
        return han <= 8 and len(re.findall(r"[A-Za-z]+", label)) <= 2
    return len(label.split()) <= 4


def is_field_shaped(text: str) -> bool:
    """Whether ``text`` states at least one ``label: value`` field."""
    return any(_short_label(match.group(1)) for match in _FIELD.finditer(text))


def mark_context(ticket: Ticket) -> Ticket:
    """``ticket`` with its context events marked (``Event.context``); the
    events are not moved or changed otherwise."""
    first_agent = next((i for i, e in enumerate(ticket.events) if e.role == "agent"), len(ticket.events))
    marked: list[Event] = []
    changed = False
    for i, event in enumerate(ticket.events):
        if event.role == "system" and not event.context and i < first_agent and is_field_shaped(event.text):
            event = replace(event, context=True)
            changed = True
        marked.append(event)
    return replace(ticket, events=marked) if changed else ticket


def context_lines(ticket: Ticket) -> list[str]:
    """The text of ``ticket``'s context events, in order, one entry per
    non-empty line (call it on the de-identified ticket)."""
    lines: list[str] = []
    for event in ticket.events:
        if event.role == "system" and event.context:
            lines += [line.strip() for line in event.text.splitlines() if line.strip()]
    return lines


__all__ = ["context_lines", "is_field_shaped", "mark_context"]
