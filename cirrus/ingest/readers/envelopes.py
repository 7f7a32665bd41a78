"""Whole-export files: one top-level object whose list holds the tickets.

Helpdesk APIs and export tools wrap their records: Zendesk's list endpoints
answer ``{"tickets": [...], "users": [...], "next_page": ...}``, Intercom's
``{"type": "conversation.list", "conversations": [...]}``, a Salesforce SOQL
query ``{"totalSize": 2, "done": true, "records": [...]}``, Meiqia's saved
conversation lists ``{"result": [...]}``.  :mod:`files` streams the items of
such a list one by one, as it streams a top-level JSON list, and numbers
them the same way (``item`` = 1-based position in the list).

A *sideload* is a sibling list that the records refer to (Zendesk's
``users``: who is an end user and who is an agent).  It is read first, kept
in memory once, and handed to every record as ``{"ticket": item, "users":
[...]}``, the shape of Zendesk's single-ticket answer with ``?include=users``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ENVELOPES", "SIDELOADS", "attach_sideloads", "envelope_of"]

# list key -> the key one record of it has in its own API answer
ENVELOPES: dict[str, str] = {
    "tickets": "ticket",  # Zendesk list/search/incremental export; Freshdesk tickets wrapped by an exporter
    "conversations": "conversation",  # Intercom conversation.list
    "records": "record",  # Salesforce SOQL query result (Case records with their child relationships)
    "result": "conversation",  # Meiqia (美洽) conversation lists as saved from its API
}
# list key -> sibling lists handed to each of its records
SIDELOADS: dict[str, tuple[str, ...]] = {"tickets": ("users",)}
# An object holding one of these is a record itself, not an export around
# records (a native ticket with a "records" field stays one ticket).
_RECORD_KEYS = frozenset({"id", "Id", "ticket_id", "events", "messages", "traj", "original", "convo_id", "conv_id",
                          "conv_content", "attributes", "ticket"})


def envelope_of(top: Mapping[str, str]) -> str | None:
    """The list key of a whole-export object, or None for a single record.

    ``top`` maps each top-level key to the first parser event of its value
    (``start_array`` for a list).  An export has exactly one of
    :data:`ENVELOPES` holding a list and no key of a single record."""
    if _RECORD_KEYS & top.keys():
        return None
    keys = [key for key in ENVELOPES if top.get(key) == "start_array"]
    return keys[0] if len(keys) == 1 else None


def attach_sideloads(item: Any, envelope: str, sideloads: Mapping[str, list[Any]]) -> Any:
    """``item`` as a record: unchanged without sideloads, else wrapped with
    them under its singular key.  The sideload lists are shared, not copied."""
    if not sideloads or not isinstance(item, dict):
        return item
    return {ENVELOPES[envelope]: item, **sideloads}
