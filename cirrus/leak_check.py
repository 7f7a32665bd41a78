"""``cirrus audit WORKSPACE --raw RAW``: the leak check against the source.

The pattern scan of :mod:`cirrus.audit` finds what looks personal; this
check finds what *was* personal.  The raw tickets are read with the ingest
readers and every personal value and secret in them is detected with the
ingest's own engine (:meth:`~cirrus.ingest.deid.deidentify.Deidentifier.found_values`,
the same recognizers that de-identify).  Then every file the audit reads, and
every file's name, is searched for each value in all its forms:

* its text in any letter case (``Crystal Minh`` as ``crystal minh``);
* for a number (7 digits or more: phones, cards, accounts), its digits in any
  layout (``415.555.0142``, ``(415) 555-0142``, ``4155550142``);
* for a value holding digits or symbols (an e-mail address, a handle, a key),
  its letters and digits with every separator removed (``jane_roe@x`` as
  ``jane.roe@x``);
* in the file's text as written, with URL escapes decoded (``%40``) and with
  JSON ``\\u`` escapes decoded.

Values shorter than 4 characters are searched only as numbers or
structured values (``Li``, ``Ann`` occur inside ordinary words); a name that
is also an ordinary word (``Grace``) is searched in its own letter case, as
the ingest replaces it; IP addresses the pattern scan calls not personal
(``0.0.0.0/0``, documentation ranges) are left out.  Hits are reported masked, with
their entity type, file and line (0 for a file name).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from cirrus.audit import AllowList, Hit, _is_binary, scan_text, workspace_files

_DIGIT_GAP = re.compile(r"(?<=\d)[ .\-/()]{1,3}(?=\d)")
_NOT_DIGIT = re.compile(r"\D+")
_NOT_ALNUM = re.compile(r"[^0-9a-z@]+")
_U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_MIN_PLAIN = 4  # characters of a single-word value searched as text
_MIN_DIGITS = 7


@dataclass(frozen=True, slots=True)
class Needle:
    """One source value and the forms it is searched in."""

    value: str
    entity: str
    text: str | None  # lower case, searched with word edges
    digits: str | None  # the digits of a number
    squeezed: str | None  # lower-case letters, digits and @ of a structured value
    exact_case: bool = False  # a name that is also a word ("Grace"): its own case only

    @classmethod
    def of(cls, value: str, entity: str, is_word: Callable[[str], bool] = lambda _: False) -> Needle | None:
        stripped = value.strip()
        if entity == "IP_ADDRESS" and not any(h.kind == "ip" for h in scan_text(stripped)):
            return None  # 0.0.0.0/0, documentation ranges: what the pattern scan calls not personal
        digits = "".join(c for c in stripped if c.isdigit())
        is_number = len(digits) >= _MIN_DIGITS and not re.search(r"[A-Za-z]", stripped)
        structured = any(not c.isalpha() and not c.isspace() for c in stripped)
        long_enough = len(stripped) >= _MIN_PLAIN or (" " in stripped and len(stripped) >= 5)
        squeezed = _NOT_ALNUM.sub("", stripped.lower()) if structured and not is_number else None
        exact = entity == "PERSON" and stripped.isalpha() and is_word(stripped.lower())
        needle = cls(stripped, entity,
                     (stripped if exact else stripped.lower()) if long_enough else None,
                     digits if is_number else None,
                     squeezed if squeezed and len(squeezed) >= 6 else None, exact)
        return needle if (needle.text or needle.digits or needle.squeezed) else None


class _Views:
    """The forms a file's text is searched in (see the module doc)."""

    def __init__(self, text: str) -> None:
        decoded = _U_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), unquote(text)) if ("%" in text or "\\u" in text) \
            else text
        self.originals = [text] if decoded == text else [text, decoded]
        self.texts = [t.lower() for t in self.originals]
        self.digits = "|".join(_NOT_DIGIT.sub("|", _DIGIT_GAP.sub("", t)) for t in self.texts)
        self.squeezed = "|".join(_NOT_ALNUM.sub("", t) for t in self.texts)

    def holds(self, needle: Needle) -> bool:
        if needle.digits and needle.digits in self.digits:
            return True
        if needle.squeezed and needle.squeezed in self.squeezed:
            return True
        if needle.text:
            return any(_word_in(needle.text, t) for t in (self.originals if needle.exact_case else self.texts))
        return False


def _word_in(word: str, text: str) -> bool:
    start = text.find(word)
    while start >= 0:
        before = text[start - 1] if start else " "
        end = start + len(word)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() and word[0].isalnum()) and not (after.isalnum() and word[-1].isalnum()):
            return True
        start = text.find(word, start + 1)
    return False


def needles(values: Mapping[str, str], is_word: Callable[[str], bool] = lambda _: False) -> list[Needle]:
    """The searchable forms of ``{value: entity}`` (values too short to
    search without noise are left out); ``is_word``: whether a lower-case
    word is an ordinary word (a name that is one is searched in its own case,
    as the ingest replaces it)."""
    found = (Needle.of(value, entity, is_word) for value, entity in values.items())
    return sorted((n for n in found if n is not None), key=lambda n: n.value)


@dataclass(frozen=True, slots=True)
class RawFindings:
    values: dict[str, str]  # value -> entity
    is_word: Callable[[str], bool]  # the ingest's dictionary check


def raw_values(raw: Path, pipeline: object | None = None) -> RawFindings:
    """Every personal value and secret the ingest engine detects in the raw
    tickets under ``raw`` (unreadable tickets are skipped: ingest quarantines
    them, and writes nothing of them but a pseudonymous id)."""
    from cirrus.config import load_pipeline
    from cirrus.ingest.deid.deidentify import Deidentifiers
    from cirrus.ingest.language import ticket_language
    from cirrus.ingest.readers import read_tickets
    from cirrus.schema import Ticket

    config = pipeline or load_pipeline()
    deids = Deidentifiers(config)  # type: ignore[arg-type]
    deid = deids.base
    found: dict[str, str] = {}
    for item in read_tickets(raw):
        if isinstance(item, Ticket):
            language = ticket_language(item, item.language_given)
            for value, entity in deids.for_language(language).found_values(item).items():
                found.setdefault(value, entity)
                for piece in _pieces(value):
                    found.setdefault(piece, entity)
                if item.ticket_id and value in item.ticket_id:
                    found.setdefault(item.ticket_id, "TICKET_ID")
    return RawFindings(found, deid.is_word)


def _pieces(value: str) -> list[str]:
    """The long runs inside a multi-line value (the body lines of a PEM
    key): each can leak alone, without the header around it."""
    if "\n" not in value:
        return []
    return [line.strip() for line in value.splitlines()
            if len(line.strip()) >= 16 and not line.strip().startswith("-----")]


def _lines(text: str, needle: Needle) -> Iterator[int]:
    for number, line in enumerate(text.splitlines() or [text], 1):
        if _Views(line).holds(needle):
            yield number


def find_leaks(workspace: Path, values: Mapping[str, str], allow: AllowList | None = None,
               files: Iterable[Path] | None = None,
               is_word: Callable[[str], bool] = lambda _: False) -> tuple[list[Hit], int]:
    """Hits of ``values`` in the workspace's files (content and names) and
    how many files were read.  A value the allow list allows is no hit."""
    searched = [n for n in needles(values, is_word) if allow is None or not allow.allows(n.value)]
    hits: list[Hit] = []
    read = 0
    for path in files if files is not None else workspace_files(workspace):
        shown = path.relative_to(workspace).as_posix()
        name_views = _Views(shown)
        in_name = [n for n in searched if name_views.holds(n)]
        if in_name:  # the report must not print the name that leaks
            shown = _masked_name(path.relative_to(workspace))
        hits += [Hit(n.entity.lower(), n.value, file=shown, line=0) for n in in_name]
        if _is_binary(path) and path.suffix != ".parquet":
            continue
        text = _file_text(path)
        read += 1
        views = _Views(text)
        for needle in searched:
            if views.holds(needle):
                first = next(_lines(text, needle), None)
                hits.append(Hit(needle.entity.lower(), needle.value, file=shown, line=first))
    return hits, read


def _masked_name(relative: Path) -> str:
    """A file name that holds a personal value, shown as its folder, its
    first two characters and ``***``, and its suffix."""
    name = relative.name
    suffix = "".join(relative.suffixes[-1:])
    return (relative.parent / f"{name[:2]}***{suffix}").as_posix()


def _file_text(path: Path) -> str:
    if path.suffix == ".parquet":
        import polars as pl

        frame = pl.read_parquet(path)
        return "\n".join(json.dumps(row, ensure_ascii=False, default=str) for row in frame.iter_rows())
    return path.read_text(encoding="utf-8", errors="replace")
