"""Ticket ids fit to write.

A ticket id is written as it is unless it holds personal data (an e-mail
address, a phone number, a name: support systems build ids from them), in
which case it is replaced by its pseudonym, :func:`pseudonymous_id`.  A
processed ticket's id is checked with the same detection as its text
(:meth:`cirrus.ingest.deid.deidentify.Deidentifier.safe_ticket_id`).  A
ticket that could not be read has no de-identified text to check against,
so its id is shown only when it looks like a code (:func:`looks_like_code`),
and is pseudonymized otherwise: no model is loaded for a quarantine entry.

A ticket's status is counted and printed for tickets that are not processed
(unresolved ones), whose text is never de-identified; helpdesks write values
into it ("pending jane@example.com", "escalated to Jane Roe", "callback +1
415 ..."), so it is shown as its leading status words only
(:func:`status_label`).

File and folder names are shown in quarantine entries (terminal and
manifest); a raw file named after a person, an e-mail or a phone is shown
with that component replaced (:func:`safe_path`).
"""

from __future__ import annotations

import hashlib
import os
import re

ID_SALT_ENV = "CIRRUS_ID_SALT"

# letters, digits and - _ . : / # between them; at most 64 characters
_CODE = re.compile(r"[A-Za-z0-9]+(?:[-_.:/#][A-Za-z0-9]+)*")
_LONG_DIGITS = re.compile(r"\d{7,}")  # a phone, account or card number
_LETTERS = re.compile(r"[A-Za-z]+")


def pseudonymous_id(ticket_id: str) -> str:
    """``t-`` and 16 hex digits of SHA-256 over ``ticket_id`` (and the secret
    in ``CIRRUS_ID_SALT`` when it is set): stable, so duplicates are still
    found and runs on re-ingested data line up.  Without the salt, anyone
    holding a candidate id can confirm it: set the salt (and keep it the
    same across ingests) when ids carry e-mail addresses or phone numbers."""
    salt = os.environ.get(ID_SALT_ENV, "")
    digest = hashlib.sha256("\0".join(("cirrus-ticket-id", salt, ticket_id)).encode("utf-8")).hexdigest()
    return f"t-{digest[:16]}"


def looks_like_code(ticket_id: str) -> bool:
    """Whether an id reads as a code and nothing else: letters and digits
    joined by ``- _ . : / #``, no run of 7 or more digits, and no run of
    more than 2 letters but a prefix of at most 8 (``NC-2025-0001``,
    ``conv-81``, ``12-3``, hex such as ``3f2a-9c1e``; not ``jane.roe-17``
    nor ``case-14155550142``)."""
    if len(ticket_id) > 64 or not _CODE.fullmatch(ticket_id) or _LONG_DIGITS.search(ticket_id):
        return False
    runs = list(_LETTERS.finditer(ticket_id))
    return all(len(run.group()) <= 2 or (run.start() == 0 and len(run.group()) <= 8) for run in runs)


def quarantine_id(ticket_id: str | None) -> str | None:
    """The id a quarantine entry shows: the id when it looks like a code,
    else its pseudonym."""
    if ticket_id is None or looks_like_code(ticket_id):
        return ticket_id
    return pseudonymous_id(ticket_id)


_FIRST_WORD = re.compile(r"[A-Za-z][A-Za-z_-]*")
_STATUS_WORD = re.compile(r"[a-z][a-z_-]*")
_HAN_STATUS = re.compile(r"[\u3400-\u9fff]{1,8}")
STATUS_CUT = "(…)"


def _a_name(word: str) -> bool:
    """A lower-case word that is also a given name or a surname ("escalated
    to jane"), unless it is a function word ("to", "on", "may")."""
    from cirrus.ingest.deid.gazetteer import common_words, name_lists

    given, surnames = name_lists()
    title = word.title()
    return (title in given or title in surnames) and word not in common_words()


def status_label(status: str) -> str:
    """``status`` as it may be counted and printed: its leading words while
    they read as a status (a first word, then lower-case words: ``pending``,
    ``on hold``, ``Waiting on customer``; or up to eight Han characters), and
    ``(…)`` in place of the rest (a name, an address, a number)."""
    words = status.split()
    if not words:
        return status.strip()
    kept: list[str] = []
    for index, word in enumerate(words[:4]):
        pattern = _FIRST_WORD if index == 0 else _STATUS_WORD
        if (pattern.fullmatch(word) and (index == 0 or not _a_name(word))) or \
                (_HAN_STATUS.fullmatch(word) and index == 0):
            kept.append(word)
        else:
            break
    if len(kept) == len(words):
        return " ".join(kept)
    return " ".join([*kept, STATUS_CUT])


_EMAIL_IN_NAME = re.compile(r"[^\s@/]+@[^\s@/]+\.[A-Za-z]{2,}")
_NAME_WORDS = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")
_FIRST_SEEN = re.compile(r"(first seen at )([^()]+?)((?::\d+| item \d+)?\))")


def _personal_component(component: str) -> bool:
    """Whether a file or folder name holds an e-mail, a phone or account
    number (7 digits or more), or a name: a given name and another word, or
    "SURNAME GIVEN"."""
    if _EMAIL_IN_NAME.search(component) or _LONG_DIGITS.search(component):
        return True
    from cirrus.ingest.deid.gazetteer import name_lists

    given, family = name_lists()
    words = [w.title() for w in _NAME_WORDS.findall(component.rsplit(".", 1)[0])]
    # a given name, then any word: a rare family name is in no list ("Priya Raghunathan"); a folder
    # name that only looks like one ("Grace Period") is masked too, which costs nothing but its name
    return any(a in given and len(b) >= 2 for a, b in zip(words, words[1:])) or \
        any(a in family and b in given for a, b in zip(words, words[1:]))


def safe_path(path: str) -> str:
    """``path`` (relative, ``/``-separated) with each component that holds
    personal data replaced by ``p-`` and 10 hex digits of its hash (the
    file's extension kept, so the reader it was given to stays visible)."""
    parts = []
    for component in path.split("/"):
        if component and _personal_component(component):
            suffix = "".join(s for s in ("." + ext for ext in component.split(".")[1:][-2:])
                             if s in (".json", ".jsonl", ".gz", ".md", ".txt", ".yaml", ".csv"))
            digest = hashlib.sha256(("cirrus-path\0" + os.environ.get(ID_SALT_ENV, "") + component)
                                    .encode("utf-8")).hexdigest()[:10]
            component = f"p-{digest}{suffix}"
        parts.append(component)
    return "/".join(parts)


def safe_reason(reason: str) -> str:
    """A quarantine reason with the path it names (``first seen at ...``)
    made safe."""
    return _FIRST_SEEN.sub(lambda m: m.group(1) + safe_path(m.group(2)) + m.group(3), reason)
