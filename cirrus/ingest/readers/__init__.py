"""Raw ticket readers: files -> raw JSON records -> :class:`Ticket` (contract 1).

A format is a small adapter module with ``NAME``, ``detect(payload)`` and
``parse(payload, origin)``; adding a format means adding a module, an entry
in :data:`READERS` and a section in docs/input-formats.md.  The adapters'
``detect`` functions are mutually exclusive (the helpdesk exports' through
one rule, :func:`_export.vendor_of`), so the order of :data:`READERS` does
not decide anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from cirrus.ingest.readers import abcd, freshdesk, intercom, meiqia, native, openai_chat, salesforce, zendesk
from cirrus.ingest.readers.files import RawRecord, iter_raw_records
from cirrus.schema import Quarantined, SourceRef, Ticket, TicketError


class Reader(Protocol):
    NAME: str

    def detect(self, payload: Any) -> bool: ...

    def parse(self, payload: Any, origin: SourceRef) -> Ticket: ...


READERS: dict[str, Reader] = {
    reader.NAME: reader
    for reader in (native, openai_chat, abcd, zendesk, intercom, freshdesk, salesforce, meiqia)
}
FORMATS = ("auto", *READERS)
FORMATS_DOC = "docs/input-formats.md"
# The quarantine reason of a record no reader recognises: it names what
# Cirrus reads and where that is written down, never the record.
UNRECOGNISED = f"unrecognised ticket format (Cirrus reads {', '.join(READERS)}; see {FORMATS_DOC})"

__all__ = ["FORMATS", "FORMATS_DOC", "READERS", "UNRECOGNISED", "RawRecord", "Reader", "iter_raw_records",
           "read_record", "read_tickets"]


def read_tickets(path: Path, fmt: str = "auto") -> Iterator[Ticket | Quarantined]:
    """One :class:`Ticket` or :class:`Quarantined` per raw record under
    ``path``, in file order.  Never raises for bad input (only for an unknown
    ``fmt`` or a missing ``path``).  A ticket id that an earlier *readable*
    ticket of this input already had is quarantined as a duplicate."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown ticket format {fmt!r}; expected one of {', '.join(FORMATS)} (see {FORMATS_DOC})")
    first_seen: dict[str, str] = {}
    for record in iter_raw_records(path):
        result = read_record(record, fmt)
        if isinstance(result, Ticket):
            first = first_seen.get(result.ticket_id)
            if first is None:
                first_seen[result.ticket_id] = result.origin.describe()
            else:
                result = Quarantined(result.origin, f"duplicate ticket_id (first seen at {first})", result.ticket_id)
        yield result


def read_record(record: RawRecord, fmt: str = "auto") -> Ticket | Quarantined:
    """Turn one raw record into a ticket with the ``fmt`` adapter (``auto``:
    the one whose ``detect`` accepts it)."""
    if record.error is not None:
        return Quarantined(record.origin, record.error)
    try:
        if fmt == "auto":
            reader = next((r for r in READERS.values() if r.detect(record.payload)), None)
            if reader is None:
                return Quarantined(record.origin, UNRECOGNISED)
        else:
            reader = READERS[fmt]
        return reader.parse(record.payload, record.origin)
    except TicketError as exc:
        return Quarantined(record.origin, exc.reason, exc.ticket_id)
    except Exception as exc:  # a reader bug must not stop the run, nor leak text
        return Quarantined(record.origin, f"unexpected error while reading ({type(exc).__name__})")
