"""Stream raw JSON records out of ticket files (contract 1, 1c).

Nothing here ever holds a whole file: ``.jsonl`` is read line by line and a
``.json`` list, or the list of a whole-export object (``{"tickets": [...]}``,
:mod:`envelopes`), is streamed item by item with ijson.  A record that cannot be
read becomes an error record whose reason names what went wrong but never
quotes the input (parser messages that echo the text are cut down to their
fixed first line).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import IO, Any

import ijson

from cirrus.ingest.readers._common import NotJSON, loads
from cirrus.ingest.readers.envelopes import SIDELOADS, attach_sideloads, envelope_of
from cirrus.schema import SourceRef

try:  # the C backend is the fast one and the one whose messages we know
    _ijson = ijson.get_backend("yajl2_c")
except ImportError:  # pragma: no cover - depends on the installed wheel
    _ijson = ijson

EXTENSIONS = (".jsonl.gz", ".json.gz", ".jsonl", ".json")
_JSON_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
# Errors that mean "this file stops being readable here".
_READ_ERRORS = (OSError, EOFError, zlib.error)
# yajl messages: a fixed first line, then the offending text (never kept).
_YAJL_FIRST_LINE = re.compile(r"(?:lexical|parse) error: [^\n]{1,80}")
# Deepest array/object nesting read from a .json file.  ijson keeps a prefix
# string per open level, so memory grows with the square of the depth (a
# 200 kB file of brackets takes gigabytes); json.loads stops near 1000 levels.
MAX_DEPTH = 512
# Bytes handed to the parser per read.  yajl's time on a string that spans
# many reads grows with (string length)^2 / read size for non-ASCII text: a
# 1M-character string takes 0.45 s at ijson's default 64 KiB, 0.01 s at 4 MiB
# (benchmarks/README.md, "Long strings in .json files").
READ_SIZE = 4 << 20
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes


@dataclass(slots=True, frozen=True)
class RawRecord:
    """One raw record: a parsed JSON value, or ``error`` (a one-line reason,
    never quoting the input).  ``payload`` is only meaningful when ``error``
    is None (a JSON ``null`` is a valid payload)."""

    origin: SourceRef
    payload: Any = None
    error: str | None = None


def is_ticket_file(name: str) -> bool:
    return name.lower().endswith(EXTENSIONS)


@dataclass(slots=True, frozen=True)
class UnreadablePath:
    """A folder that cannot be listed, or a ticket-named entry that cannot be
    opened as a file (a symbolic-link loop, a broken link): skipped, and
    reported in the manifest's quarantine list, never the end of the run.
    ``source`` is relative to the input root, as for ticket files."""

    source: str
    reason: str

    def record(self) -> RawRecord:
        return RawRecord(SourceRef(self.source), error=self.reason)


class NoTicketFiles(ValueError):
    """The raw input holds no file the readers read (a usage error: nothing
    would be read, so nothing is started).  The message names what is there
    instead; it never quotes file contents."""


_WANTED = ".json, .jsonl, .json.gz or .jsonl.gz"


def check_input(path: Path) -> None:
    """Raise :class:`NoTicketFiles` when ``path`` is a file with another
    extension, or a folder tree without a single ticket file; raise
    ``FileNotFoundError`` when it does not exist.  Stops at the first ticket
    file found, so a normal input costs one short walk."""
    path = Path(path)
    if path.is_file():
        if not is_ticket_file(path.name):
            ext = _extension(path.name)
            raise NoTicketFiles(f"{path} is not a {_WANTED} file ({f'a {ext} file' if ext else 'it has no extension'})")
        return
    # raises FileNotFoundError for a missing path
    if any(not isinstance(item, UnreadablePath) for item in iter_files(path)):
        return
    found: Counter[str] = Counter()
    folders = skipped_links = other = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                entries = list(listing)
        except OSError:
            other += 1  # an unreadable folder
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders += 1
                    stack.append(Path(entry.path))
                elif entry.is_dir():  # a symlinked folder: never followed (no cycles)
                    skipped_links += 1
                elif entry.is_file():
                    found[_extension(entry.name)] += 1
                else:
                    other += 1  # a broken link, a socket, a pipe
            except OSError:  # a symbolic-link loop
                other += 1
    shown = f"{str(path).rstrip(os.sep)}{os.sep}"
    if not (found or skipped_links or other):
        subfolders = f" (only {folders} empty folder{'s' if folders != 1 else ''})" if folders else ""
        raise NoTicketFiles(f"{shown} is empty{subfolders}: nothing to ingest; "
                            f"cirrus ingest reads {_WANTED} files")
    parts = [f"{n} {ext}" if ext else f"{n} without extension"
             for ext, n in sorted(found.items(), key=lambda kv: (-kv[1], not kv[0], kv[0]))]
    if skipped_links:
        parts.append(f"{skipped_links} symlinked folder{'s' if skipped_links != 1 else ''} (not followed)")
    if other:
        parts.append(f"{other} other entr{'ies' if other != 1 else 'y'} "
                     "(unreadable folders, broken or looping links, special files)")
    raise NoTicketFiles(f"no {_WANTED} files under {shown} (found {', '.join(parts)})")


def _extension(name: str) -> str:
    """How a file name ends, for messages: ``.txt``, ``.csv.gz``, or ``""``
    for none (dot files like ``.DS_Store`` included)."""
    suffixes = [s.lower() for s in Path(name.lstrip(".")).suffixes]
    if not suffixes:
        return ""
    if suffixes[-1] == ".gz" and len(suffixes) > 1:
        return "".join(suffixes[-2:])
    return suffixes[-1]


def iter_files(path: Path) -> Iterator[tuple[Path, str] | UnreadablePath]:
    """Ticket files under ``path`` as ``(file, source)``, sorted by name at
    every level (files and folders interleaved, like a sorted listing of
    relative paths); ``source`` is relative to ``path`` (the file name for a
    single file).  Symlinked folders are not followed (no cycles); a folder
    that cannot be listed and a ticket-named entry that is no readable file
    (a link loop, a broken link) come as :class:`UnreadablePath`, in their
    place in the order."""
    if path.is_file():
        if is_ticket_file(path.name):
            yield path, path.name
        return
    if not path.is_dir():
        raise FileNotFoundError(f"no such file or directory: {path}")
    yield from _walk(path, "")


def _walk(folder: Path, prefix: str) -> Iterator[tuple[Path, str] | UnreadablePath]:
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        yield UnreadablePath(prefix or ".", f"unreadable folder ({type(exc).__name__}: {exc.strerror}); skipped")
        return
    for entry in entries:
        source = prefix + entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path), f"{source}/")
            elif is_ticket_file(entry.name):
                if entry.is_file():
                    yield Path(entry.path), source
                elif entry.is_symlink() and not entry.is_dir():
                    yield UnreadablePath(source, "broken symbolic link; skipped")
        except OSError as exc:  # ELOOP: a link that points at itself, in a circle
            yield UnreadablePath(source, f"unreadable entry ({exc.strerror or type(exc).__name__}); skipped")


def iter_raw_records(path: Path) -> Iterator[RawRecord]:
    """Every record of every ticket file under ``path``, streamed; an
    unreadable path is one error record (quarantined, the run goes on)."""
    for item in iter_files(Path(path)):
        if isinstance(item, UnreadablePath):
            yield item.record()
        else:
            yield from read_file_records(*item)


def read_file_records(file: Path, source: str) -> Iterator[RawRecord]:
    """Every record of one ticket file (``source``: its name in manifests)."""
    if file.name.lower().endswith((".jsonl", ".jsonl.gz")):
        return _read_jsonl(file, source)
    return _read_json(file, source)


def _open(file: Path) -> IO[bytes]:
    if file.name.lower().endswith(".gz"):
        return gzip.open(file, "rb")
    return open(file, "rb")


def _read_jsonl(file: Path, source: str) -> Iterator[RawRecord]:
    line_no = 0
    try:
        with _open(file) as stream:
            for line_no, raw in enumerate(stream, start=1):
                if line_no == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                if not raw.strip(_JSON_WS):
                    continue
                yield _parse_line(raw, SourceRef(source, line=line_no))
    except _READ_ERRORS as exc:
        origin = SourceRef(source, line=line_no + 1)
        yield RawRecord(origin, error=f"unreadable file ({type(exc).__name__}); rest of file skipped")


def _parse_line(raw: bytes, origin: SourceRef) -> RawRecord:
    try:
        text = raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError:
        return RawRecord(origin, error="invalid UTF-8")
    try:
        return RawRecord(origin, payload=loads(text))
    except json.JSONDecodeError as exc:
        return RawRecord(origin, error=f"invalid JSON ({exc.msg} at column {exc.colno})")
    except NotJSON as exc:  # NaN, 1e400, a lone surrogate: Python reads them, JSON has none
        return RawRecord(origin, error=f"invalid JSON ({exc})")
    except RecursionError:
        return RawRecord(origin, error="invalid JSON (nested too deeply)")


def _read_json(file: Path, source: str) -> Iterator[RawRecord]:
    """A top-level list yields one record per element (``item`` = 1-based
    position); so does the list of a whole-export object (:mod:`envelopes`);
    anything else is one record.  After a syntax error the parser cannot
    find the next item again, so the rest of the file is skipped."""
    item = 0
    is_list = False
    try:
        with _open(file) as stream:
            first = _skip_leading_whitespace(stream)
            if first is None:
                yield RawRecord(SourceRef(source), error="empty file")
                return
            is_list = first == b"["
            if is_list:
                for item, record in enumerate(_list_records(_DepthGuard(stream), "item", source, None), start=1):
                    yield record
                return
            top, broken = _top_level_shape(_DepthGuard(stream))
        envelope = envelope_of(top)
        if broken is not None and envelope is None:
            raise broken
        if envelope is None:  # one record: parsed again, now into a value (a second pass, not a second copy)
            with _open(file) as stream:
                _skip_leading_whitespace(stream)
                values = _ijson.items(_DepthGuard(stream), "", use_float=True, buf_size=READ_SIZE)
                payload = next(values)
                for _ in values:  # raises on trailing content
                    pass
            yield RawRecord(SourceRef(source), payload=payload)
            return
        sideloads = {key: _sideload(file, key) for key in SIDELOADS.get(envelope, ()) if top.get(key) == "start_array"}
        is_list = True
        with _open(file) as stream:
            _skip_leading_whitespace(stream)
            for item, record in enumerate(_list_records(_DepthGuard(stream), f"{envelope}.item", source,
                                                        lambda payload: attach_sideloads(payload, envelope, sideloads)),
                                          start=1):
                yield record
        if item == 0:
            yield RawRecord(SourceRef(source), error=f"the export's {envelope!r} list is empty")
    except (ijson.JSONError, UnicodeDecodeError, ValueError, RecursionError, *_READ_ERRORS) as exc:
        origin = SourceRef(source, item=item + 1) if is_list else SourceRef(source)
        reason = _describe_error(exc)
        if is_list:
            reason += "; rest of file skipped (cannot resync)"
        yield RawRecord(origin, error=reason)


def _list_records(stream: Any, prefix: str, source: str, wrap: Callable[[Any], Any] | None) -> Iterator[RawRecord]:
    """The items of the list at ``prefix``, numbered from 1, each passed
    through ``wrap`` when one is given."""
    for item, payload in enumerate(_ijson.items(stream, prefix, use_float=True, buf_size=READ_SIZE), start=1):
        yield RawRecord(SourceRef(source, item=item), payload=payload if wrap is None else wrap(payload))


def _sideload(file: Path, key: str) -> list[Any]:
    """The items of the top-level list ``key`` (a whole export's ``users``),
    as many as can be read: a break in the file is reported once, with the
    records."""
    found: list[Any] = []
    try:
        with _open(file) as stream:
            _skip_leading_whitespace(stream)
            found.extend(_ijson.items(_DepthGuard(stream), f"{key}.item", use_float=True, buf_size=READ_SIZE))
    except (ijson.JSONError, UnicodeDecodeError, ValueError, RecursionError, *_READ_ERRORS):
        pass
    return found


def _top_level_shape(stream: Any) -> tuple[dict[str, str], Exception | None]:
    """Each top-level key of the JSON object in ``stream`` with the first
    parser event of its value (``start_array``, ``start_map``, ``string``,
    ...), and the error that stopped the parser, if one did.  A broken
    whole-export file is still an export: its records before the break are
    read, as those of a broken list are."""
    shape: dict[str, str] = {}
    pending: str | None = None
    try:
        for prefix, event, value in _ijson.parse(stream, use_float=True, buf_size=READ_SIZE):
            if pending is not None:
                shape[pending] = event
                pending = None
            if event == "map_key" and prefix == "":
                pending = value
    except (ijson.JSONError, UnicodeDecodeError, ValueError, RecursionError, *_READ_ERRORS) as exc:
        return shape, exc
    return shape, None


def _skip_leading_whitespace(stream: IO[bytes]) -> bytes | None:
    """Position ``stream`` on its first significant byte (after a UTF-8 BOM and
    whitespace, which yajl rejects / does not need) and return that byte."""
    offset = 0
    at_start = True
    while chunk := stream.read(4096):
        if at_start and chunk.startswith(_BOM):
            chunk, offset = chunk[len(_BOM) :], len(_BOM)
        at_start = False
        stripped = chunk.lstrip(_JSON_WS)
        if stripped:
            offset += len(chunk) - len(stripped)
            stream.seek(offset)
            return stripped[:1]
        offset += len(chunk)
    return None


class _TooDeep(ValueError):
    pass


class _DepthGuard:
    """A byte stream that fails with :class:`_TooDeep` once the JSON read
    through it nests deeper than :data:`MAX_DEPTH`.  Brackets inside strings
    do not count; a string or an escape may span reads, so both states are
    carried from read to read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def read(self, size: int = -1) -> bytes:
        chunk = self._stream.read(size)
        if chunk:
            self._scan(chunk)
        return chunk

    def _scan(self, chunk: bytes) -> None:
        # Only C-level bytes operations: a per-byte loop would be slower than
        # the parser itself.  Outside strings, valid JSON has no backslash.
        if self._escaped:  # a backslash ended the last read
            chunk, self._escaped = chunk[1:], False
        chunk = chunk.replace(b"\\\\", b"")  # escaped backslashes
        if chunk.endswith(b"\\"):
            chunk, self._escaped = chunk[:-1], True
        # Without escaped quotes, every quote left opens or closes a string.
        pieces = chunk.replace(b'\\"', b"").translate(None, _NOT_STRUCTURE).split(b'"')
        outside = b"".join(pieces[1 if self._in_string else 0 :: 2])
        if len(pieces) % 2 == 0:
            self._in_string = not self._in_string
        if outside:
            levels = list(accumulate(memoryview(outside.translate(_BRACKET_STEPS)).cast("b"), initial=self._depth))
            if max(levels) > MAX_DEPTH:
                raise _TooDeep
            self._depth = levels[-1]


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, ijson.JSONError):
        message = exc.args[0] if exc.args else ""
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        match = _YAJL_FIRST_LINE.match(str(message))
        detail = match.group(0).rstrip(". ") if match else "syntax error"
        if "UTF8" in detail:
            return "invalid UTF-8"
        return f"invalid JSON ({detail})"
    if isinstance(exc, UnicodeDecodeError):
        return "invalid UTF-8"
    if isinstance(exc, (RecursionError, _TooDeep)):
        return "invalid JSON (nested too deeply)"
    if isinstance(exc, _READ_ERRORS):
        return f"unreadable file ({type(exc).__name__})"
    return f"invalid JSON ({type(exc).__name__})"
