"""Byte-level fuzzing of the raw ticket readers (contract 1, 1c).

tests/test_readers.py checks the adapters on well-formed JSON lines.  Here the
files themselves are hostile: arbitrary bytes, invalid UTF-8, cut-off sample
files, deep nesting, multi-megabyte strings, lone surrogates, BOMs and CRLF.
Whatever the input, ``read_tickets`` must not raise, must give one outcome
per record (per non-blank line of a ``.jsonl``; per item of a ``.json`` list,
the item where a syntax error stops the file included; one for any other
``.json``), and must never hand back a ticket it could not read whole, or
one holding text that cannot be written out as UTF-8 JSON.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gzip
import json
import math
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cirrus.ingest.readers import FORMATS, files, read_tickets
from cirrus.ingest.readers.files import MAX_DEPTH
from cirrus.schema import EVENT_ROLES, Event, Quarantined, SourceRef, Ticket

SAMPLE_RAW = Path(__file__).resolve().parents[1] / "tickets" / "raw"
SAMPLE_FILES = sorted(p for p in SAMPLE_RAW.rglob("*") if p.is_file())
BOM = b"\xef\xbb\xbf"

Outcome = Ticket | Quarantined


def fuzz_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


@pytest.fixture(scope="module")
def scratch_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reader-fuzz")


@contextmanager
def scratch(root: Path) -> Iterator[Path]:
    """An empty folder per hypothesis example (tmp_path is per test, not per
    example), emptied afterwards so multi-megabyte inputs do not pile up.

    One folder under ``root``, emptied after each example, rather than a new
    temporary folder each time: making and removing a folder per example (some
    2,700 of them) cost more CPU than the files written into it.  The examples
    of a test run one after another, and write files only."""
    folder = root / "example"
    folder.mkdir(exist_ok=True)
    assert not any(folder.iterdir()), "the previous example left files behind"
    try:
        yield folder
    finally:
        for path in folder.iterdir():
            path.unlink()


def read_all(path: Path, fmt: str = "auto") -> list[Outcome]:
    results = list(read_tickets(path, fmt))
    assert all(isinstance(r, (Ticket, Quarantined)) for r in results)
    return results


# --- invariants ----------------------------------------------------------------


def _leaves(value: Any) -> Iterator[Any]:
    """Every scalar inside a ticket (field values, JSON arguments and tool
    results included, dict keys too), walked without recursion: a payload
    may be nested as deep as the parser allowed."""
    stack = [value]
    while stack:
        item = stack.pop()
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            yield item


def check_outcomes(results: list[Outcome], source: str, kind: str) -> None:
    """What holds for any input: outcomes point into the file the way the
    manifest expects; reasons are one non-empty line from a reader that saw
    the problem coming (``unexpected error`` means an adapter crashed and
    ``read_record``'s safety net caught it); tickets are whole and writable."""
    for r in results:
        assert r.origin.source == source
        if kind == "jsonl":
            assert r.origin.item is None and isinstance(r.origin.line, int) and r.origin.line >= 1
        else:
            assert r.origin.line is None and (r.origin.item is None or r.origin.item >= 1)
        if isinstance(r, Quarantined):
            assert r.reason and r.reason.strip() and "\n" not in r.reason, r
            assert "unexpected error" not in r.reason, r
            continue
        assert isinstance(r.ticket_id, str) and r.ticket_id.strip()
        assert r.events and all(isinstance(e, Event) and e.role in EVENT_ROLES for e in r.events)
        for leaf in _leaves(r):
            if isinstance(leaf, str):
                leaf.encode("utf-8")  # a lone surrogate would fail here, and later in tasks.jsonl
            elif isinstance(leaf, float):
                assert math.isfinite(leaf), "JSON output cannot hold NaN/Infinity"


def jsonl_record_lines(data: bytes) -> list[int]:
    """1-based numbers of the lines the reader must answer for: all but blank
    ones (JSON whitespace only), after a BOM on line 1."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if lines and lines[0].startswith(BOM):
        lines[0] = lines[0][len(BOM) :]
    return [n for n, line in enumerate(lines, start=1) if line.strip(b" \t\r\n")]


def check_counts(results: list[Outcome], data: bytes, kind: str) -> None:
    """One outcome per record of ``data`` (section 1c), as the module
    docstring says."""
    if kind == "jsonl":
        assert [r.origin.line for r in results] == jsonl_record_lines(data)
        return
    body = data[len(BOM) :] if data.startswith(BOM) else data
    body = body.lstrip(b" \t\r\n")
    if not body:
        assert len(results) == 1 and reason(results[0]) == "empty file"
    elif body.startswith(b"["):
        assert [r.origin.item for r in results] == list(range(1, len(results) + 1))
        stopped = [n for n, r in enumerate(results) if "rest of file skipped" in (reason(r) or "")]
        assert stopped in ([], [len(results) - 1]), "a syntax error ends the file, so it comes last"
    else:
        assert len(results) == 1 and results[0].origin == SourceRef(results[0].origin.source)


def check_file(
    folder: Path,
    name: str,
    data: bytes,
    content: bytes | None = None,
    counts: bool = True,
    formats: tuple[str, ...] = FORMATS,
) -> dict[str, list[Outcome]]:
    """Write ``data`` as ``name`` and read it with each of ``formats``; the
    checks that hold for any bytes at all, and (unless not ``counts``) one
    outcome per record of ``content``, what a .gz file holds (default:
    ``data``).  Returns the outcomes by format."""
    path = folder / name
    path.write_bytes(data)
    kind = "jsonl" if ".jsonl" in name.lower() else "json"
    by_format = {}
    for fmt in formats:
        results = read_all(path, fmt)
        check_outcomes(results, name, kind)
        if counts:
            check_counts(results, data if content is None else content, kind)
        by_format[fmt] = results
    return by_format


def reason(result: Outcome) -> str | None:
    return result.reason if isinstance(result, Quarantined) else None


def without_origin(result: Outcome) -> Outcome:
    """``result`` as if read from elsewhere (a duplicate's reason names where
    the id was first seen)."""
    if isinstance(result, Quarantined) and result.reason.startswith("duplicate ticket_id"):
        result = dataclasses.replace(result, reason="duplicate ticket_id")
    return dataclasses.replace(result, origin=SourceRef("-"))


# --- strategies ----------------------------------------------------------------

# Characters that have tripped JSON tooling before: NUL and other controls,
# BOM / zero-width / bidi marks, line and paragraph separators, astral emoji.
ODD_CHARS = (
    "\x00\x01\x1f\x7f\x85\u00a0\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2066\u2069"
    "\u2028\u2029\ufeff\ufffd\ufffe\U0001f600\U0010ffff"
)
odd_text = st.text(st.sampled_from(ODD_CHARS) | st.characters(codec="utf-8"), max_size=12)
# yajl (the .json parser) stops at signed 64-bit integers and rejects -2**63;
# json.loads (.jsonl) takes any size up to 4300 digits.  Both-format checks
# stay inside the range both read.
safe_ints = st.integers(-(2**63) + 1, 2**63 - 1)
scalars = st.none() | st.booleans() | safe_ints | st.floats(allow_nan=False, allow_infinity=False) | odd_text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=15,
)
# Timestamps that look ISO-8601 but are not, or only barely (fromisoformat
# takes week dates, 13 fraction digits, a trailing NUL).
odd_timestamps = st.sampled_from([
    "2025-02-30T00:00:00", "2025-03-01T25:00:00Z", "2025-03-01T10:00:00+24:00", "9999-12-31T23:59:59.999999+23:59",
    "0001-01-01T00:00:00-23:59", "2025-W01-1", "\uff12\uff10\uff12\uff15-03-01", "2025-03-01T10:00:00\x00", "",
])
wrong_values = (
    st.sampled_from([None, True, False, 0, -1, 2**63 - 1, 1.5, -0.0, "", " ", "\x00", "x", [], {}, [None], {"": None}])
    | odd_timestamps
    | json_values
)

NATIVE = {
    "ticket_id": "T-1001",
    "category": "ECS",
    "channel": "online-chat",
    "language": "en",
    "status": "resolved",
    "knowledge": [{"doc_id": "kb-17", "title": "Reset a password", "text": "Open the console."}],
    "events": [
        {"role": "customer", "text": "My server is unreachable", "ts": "2025-03-01T10:00:00Z",
         "attachments": [{"kind": "image", "ocr_text": "Connection timed out"}]},
        {"role": "agent", "text": "Let me check the instance."},
        {"role": "tool_call", "call_id": "c1", "name": "DescribeInstanceStatus", "arguments": {"instance_id": "i-1"}},
        {"role": "tool_result", "call_id": "c1", "content": {"status": "Stopped"}},
        {"role": "agent", "text": "It is stopped; start it from the console."},
        {"role": "system", "text": "Customer rated 5 stars"},
    ],
}
OPENAI = {
    "task_id": 12,
    "trial": 3,
    "reward": 1.0,
    "traj": [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": [{"type": "text", "text": "Cancel my booking"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_booking", "arguments": '{"id": "B7"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"status\": \"active\"}"},
        {"role": "assistant", "content": "Done, it is cancelled."},
    ],
}
ABCD = {
    "convo_id": 4321,
    "scenario": {"flow": "account_access"},
    "original": [["customer", "I forgot my password"], ["agent", "Your name?"], ["customer", "Ann Lee"],
                 ["action", "Account has been pulled up for Ann Lee."], ["agent", "Done."]],
    "delexed": [{"speaker": "customer"}, {"speaker": "agent"}, {"speaker": "customer"},
                {"speaker": "action", "targets": ["recover_password", "take_action", "pull-up-account", ["Ann Lee"]]},
                {"speaker": "agent"}],
}
TEMPLATES = (NATIVE, OPENAI, ABCD)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*path, index))


@st.composite
def ticket_shaped(draw: st.DrawFn) -> Any:
    """A valid ticket of one of the formats with a few fields deleted or
    replaced by values of the wrong type (the record may stay valid)."""
    record = copy.deepcopy(draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(record))
        if not paths:
            break
        *parents, key = draw(st.sampled_from(paths))
        parent = record
        for step in parents:
            parent = parent[step]
        if draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = draw(wrong_values)
    return record


records = ticket_shaped() | json_values


# --- properties ----------------------------------------------------------------


@fuzz_settings(600)
@given(
    st.binary(max_size=300), st.sampled_from(["f.json", "f.jsonl", "f.JSON"]), st.sampled_from(["", "gzip", "gz name"])
)
@example(b"", "f.json", "")
@example(b"", "f.jsonl", "")
@example(BOM, "f.json", "")
@example(BOM + b"\r\n\r\n", "f.jsonl", "")
@example(b"\xef\xbb", "f.json", "")
@example(b"]", "f.json", "")
@example(b"[", "f.json", "")
@example(b"\\", "f.json", "")
@example(b'"\\', "f.json", "")
@example(b"\x00", "f.jsonl", "")
@example(b"\x1f\x8b", "f.json", "gz name")
def test_arbitrary_bytes(scratch_root: Path, data: bytes, name: str, gz: str) -> None:
    """Any bytes at all, plain, gzipped, or not gzip under a .gz name."""
    with scratch(scratch_root) as folder:
        if gz == "gzip":
            check_file(folder, name + ".gz", gzip.compress(data), content=data)
        elif gz == "gz name":
            check_file(folder, name + ".gz", data, counts=False)
        else:
            check_file(folder, name, data)


@fuzz_settings(400)
@given(st.lists(records, min_size=1, max_size=4))
def test_json_list_and_jsonl_agree(scratch_root: Path, values: list[Any]) -> None:
    """The same records as the lines of a .jsonl and the items of a .json
    list come out the same (two parsers: json.loads and ijson/yajl)."""
    jsonl = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode()
    listed = json.dumps(values, ensure_ascii=False, indent=1).encode()
    with scratch(scratch_root) as folder:
        by_line = check_file(folder, "r.jsonl", jsonl)
        by_item = check_file(folder, "r.json", listed)
    for fmt in FORMATS:
        assert len(by_line[fmt]) == len(by_item[fmt]) == len(values)
        assert [without_origin(r) for r in by_line[fmt]] == [without_origin(r) for r in by_item[fmt]]


@fuzz_settings(150)
@given(ticket_shaped(), st.booleans(), st.booleans())
def test_bom_and_crlf_change_nothing(scratch_root: Path, value: Any, bom: bool, crlf: bool) -> None:
    """A UTF-8 BOM and CRLF line ends (Windows exports) read like plain
    UTF-8 with LF, blank lines (spaces, tabs, lone CRs) included."""
    lines = [json.dumps(value), "", "  \t", "\r", json.dumps(NATIVE), ""]
    plain = "\n".join(lines).encode()
    pretty = json.dumps([value, NATIVE], indent=2).encode()
    newline = b"\r\n" if crlf else b"\n"
    prefix = BOM if bom else b""
    with scratch(scratch_root) as folder:
        expected = check_file(folder, "a.jsonl", plain), check_file(folder, "a.json", pretty)
        got = (
            check_file(folder, "a.jsonl", prefix + plain.replace(b"\n", newline)),
            check_file(folder, "a.json", prefix + pretty.replace(b"\n", newline)),
        )
    assert got == expected
    assert [r.origin.line for r in got[0]["auto"]] == [1, 5]


@pytest.mark.parametrize("name", ["e.json", "e.jsonl", "e.json.gz", "e.jsonl.gz"])
@pytest.mark.parametrize("content", [b"", b" \n\t\r\n", BOM, BOM + b"\n\n"])
def test_empty_files(tmp_path: Path, name: str, content: bytes) -> None:
    """An empty .jsonl has no records; an empty .json is one bad record."""
    path = tmp_path / name
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    for fmt in FORMATS:
        results = read_all(path, fmt)
        if ".jsonl" in name:
            assert results == []
        else:
            assert results == [Quarantined(SourceRef(name), "empty file")]


def _nest(depth: int, inner: str, shape: str) -> str:
    if shape == "list":
        return "[" * depth + inner + "]" * depth
    return '{"k": ' * depth + inner + "}" * depth


@fuzz_settings(40)
@given(
    st.integers(0, 3 * MAX_DEPTH) | st.integers(MAX_DEPTH - 2, MAX_DEPTH + 2) | st.integers(1, 200_000),
    st.sampled_from(["list", "dict"]),
    st.sampled_from(["bare", "arguments", "unclosed"]),
)
@example(100_000, "list", "bare")  # a 200 kB file that took ~25 GB before the depth guard
@example(5_000, "list", "bare")  # past json.loads' recursion limit on a .jsonl line
@example(MAX_DEPTH, "dict", "arguments")
def test_deep_nesting(scratch_root: Path, depth: int, shape: str, where: str) -> None:
    """Deep nesting is a clean quarantine, in bounded memory and time, never a
    RecursionError or an out-of-memory kill; .json accepts MAX_DEPTH levels
    (the file's own list counts)."""
    nested = _nest(depth, "1", shape)
    if where == "unclosed":
        nested = nested[: len(nested) // 2 + 1]
    if where == "arguments":
        call = {"role": "tool_call", "call_id": "c1", "name": "f", "arguments": "@"}
        text = json.dumps({"ticket_id": "D-1", "events": [call]}).replace('"@"', nested)
        levels = depth + 3  # the ticket, its events, the call
    else:
        text, levels = nested, depth
    with scratch(scratch_root) as folder:
        line = check_file(folder, "d.jsonl", text.encode() + b"\n")["auto"]
        single = check_file(folder, "d.json", text.encode())["auto"]
        listed = check_file(folder, "l.json", b"[" + text.encode() + b"]")["auto"]
    if where == "unclosed":
        assert all(isinstance(r, Quarantined) for r in line + single + listed)
        return
    too_deep = "invalid JSON (nested too deeply)"
    assert (reason(single[0]) or "").startswith(too_deep) == (levels > MAX_DEPTH)
    assert (reason(listed[0]) or "").startswith(too_deep) == (levels + 1 > MAX_DEPTH)
    if levels <= MAX_DEPTH // 2:
        assert reason(line[0]) != too_deep
    if levels > 2000:  # json.loads stops near the recursion limit
        assert reason(line[0]) == too_deep
    if where == "arguments" and levels <= MAX_DEPTH:
        assert isinstance(single[0], Ticket) and isinstance(line[0], Ticket)


def test_deep_nesting_memory_is_not_quadratic(tmp_path: Path) -> None:
    """ijson keeps a prefix string per open level: 10,000 levels used to take
    some 250 MB, 100,000 levels some 25 GB.  The depth guard stops early."""
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 10_000 + b"]" * 10_000)
    tracemalloc.start()
    try:
        [result] = read_all(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, Quarantined) and "nested too deeply" in result.reason
    assert peak < 10 * 2**20


class _Chunked:
    """A byte stream that answers reads in the given sizes, in turn."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.reads = data, sizes, 0

    def read(self, size: int = -1) -> bytes:
        n = min(size, self.sizes[self.reads % len(self.sizes)])
        self.reads += 1
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


def _nesting(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


bracket_chars = st.text(st.sampled_from('[]{}\\"x\u00e9\n'), max_size=8)
bracket_json = st.recursive(
    st.none() | st.integers() | bracket_chars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(bracket_chars, inner, max_size=3),
    max_leaves=30,
)


@fuzz_settings(300)
@given(bracket_json, st.booleans(), st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_depth_guard_counts_only_structure(value: Any, ascii_only: bool, sizes: list[int]) -> None:
    """The guard behind .json files finds the exact nesting depth of any
    document read in any pieces (a string, an escape or a \\\\ pair cut
    between two reads), not counting brackets inside strings."""
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    depth = _nesting(value)
    for limit in (depth, depth - 1) if depth else (0,):
        guard = files._DepthGuard(_Chunked(data, sizes))  # type: ignore[arg-type]
        with mock.patch.object(files, "MAX_DEPTH", limit):
            try:
                while guard.read(64):
                    pass
                too_deep = False
            except files._TooDeep:
                too_deep = True
        assert too_deep == (depth > limit)


# Strings that mix brackets with escapes (\\ and \") so that the depth guard,
# which skips string contents in 64 KiB reads, sees escapes and string ends
# fall on every position of a read boundary.
bracket_text = st.builds(
    lambda unit, n, tail: unit * n + tail,
    st.text(st.sampled_from('[{]}\\"x\n'), min_size=1, max_size=7),
    st.integers(10_000, 60_000),
    st.text(st.sampled_from('[{\\"'), max_size=5),
)


# Up to a million characters of odd text: up to 4 MB of UTF-8.
huge_text = st.builds(
    lambda unit, n: (unit * (n // len(unit) + 1))[:n], odd_text.filter(bool), st.integers(200_000, 10**6)
)


@fuzz_settings(12)
@given(bracket_text | huge_text, st.integers(0, 70_000))
@example("\u202e\u200b\x00\u00e9\U0001f600" * 150_000, 3)  # 2.7 MB of JSON
@example('[\\"{' * 100_000 + "\\", 65_530)
def test_huge_strings(scratch_root: Path, text: str, pad: int) -> None:
    """Multi-megabyte strings (and brackets inside strings, however many)
    come back whole from both parsers; cut short they are a quarantine.
    (yajl takes time quadratic in the length of a non-ASCII string, about
    2 s for 6 MB: hence one format and few examples.)"""
    value = {"ticket_id": "H-1", "pad": " " * pad, "events": [{"role": "customer", "text": text}, {"role": "agent"}]}
    raw = json.dumps(value, ensure_ascii=False).encode()
    with scratch(scratch_root) as folder:
        for name, data in (("h.jsonl", raw + b"\n"), ("h.json", raw), ("l.json", b"[" + raw + b"]")):
            [whole] = check_file(folder, name, data, formats=("auto",))["auto"]
            assert isinstance(whole, Ticket) and whole.events[0].text == text
            [cut] = check_file(folder, name, data[: len(data) // 2], formats=("auto",))["auto"]
            assert isinstance(cut, Quarantined)


SURROGATES = {
    "\\ud800": False,  # lone high surrogate
    "\\udfff": False,  # lone low surrogate
    "\\udc00\\ud800": False,  # a pair in the wrong order
    "\\ud83d\\ude00": True,  # a valid pair: U+1F600
    "\\\\ud800": True,  # an escaped backslash, then plain text
    "\\u0000": True,
    "\\u202e\\u200b": True,
}


@fuzz_settings(80)
@given(st.sampled_from(sorted(SURROGATES)), st.sampled_from(["text", "key", "ticket_id", "arguments"]), odd_text)
def test_unicode_escapes(scratch_root: Path, escape: str, field: str, around: str) -> None:
    """``\\ud800`` escapes decode to str that no UTF-8 file can hold:
    .jsonl quarantines them (yajl, behind .json, turns a lone high surrogate
    into '?' and rejects a lone low one as bad UTF-8).  Valid pairs, NUL and
    bidi marks are ordinary text."""
    marker = "\u2603MARK\u2603"
    event = {"role": "customer", "text": "hi"}
    value: dict[str, Any] = {"ticket_id": "U-1", "events": [event]}
    if field == "text":
        event["text"] = around + marker + around
    elif field == "key":
        event[marker] = 1
    elif field == "ticket_id":
        value["ticket_id"] = marker
    else:
        value["events"] = [{"role": "tool_call", "name": "f", "arguments": {"q": [marker]}}]
    raw = json.dumps(value, ensure_ascii=False).replace(marker, escape).encode()
    with scratch(scratch_root) as folder:
        [line] = check_file(folder, "u.jsonl", raw + b"\n")["auto"]
        [single] = check_file(folder, "u.json", raw)["auto"]
    assert isinstance(line, Ticket) == SURROGATES[escape]
    if not SURROGATES[escape]:
        assert reason(line) == "invalid JSON (lone surrogate in a \\u escape)"
    else:
        assert without_origin(line) == without_origin(single)


# JSON number literals, and what json.loads also takes (NaN, Infinity).
number_literals = (
    st.sampled_from([
        "1e400", "-1e400", "1.8e308", "1.7976931348623157e308", "1e-400", "5e-324", "-0", "-0.0", "0e99999",
        "9223372036854775807", "9223372036854775808", "-9223372036854775807", "-9223372036854775808",
        "NaN", "Infinity", "-Infinity",
    ])
    | st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,5})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)
    | st.integers(300, 6000).map(lambda n: "9" * n)
)


def _read_by_yajl(literal: str) -> bool:
    """yajl reads signed 64-bit integers, bar -2**63; json.loads any up to
    4300 digits.  The one way the two parsers may disagree on a number."""
    if any(c in literal for c in ".eEIN"):
        return True
    return len(literal) <= 20 and -(2**63) < int(literal) < 2**63


@fuzz_settings(200)
@given(number_literals, st.sampled_from(["arguments", "content", "ticket_id", "reward", "text"]))
def test_number_literals(scratch_root: Path, literal: str, field: str) -> None:
    """Numbers too large for a float (1e400 reads as inf in Python) or an
    integer, NaN and Infinity never reach a ticket; .json and .jsonl agree."""
    value: dict[str, Any]
    if field == "reward":
        value = {"task_id": 1, "reward": "@N@", "messages": [{"role": "user", "content": "hi"}]}
    elif field == "text":  # JSON inside a string: tool-call arguments and tool content of a transcript
        call = {"id": "c", "function": {"name": "f", "arguments": " @N@"}}
        value = {"id": 7, "messages": [
            {"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c", "content": "[@N@]"},
        ]}
    else:
        call = {"role": "tool_call", "call_id": "c", "name": "f", "arguments": {"n": ["@N@"]}}
        result = {"role": "tool_result", "call_id": "c", "content": "@N@"}
        value = {"ticket_id": "@N@" if field == "ticket_id" else "N-1", "events": [call, result]}
    # a bare placeholder becomes the number; inside a string it stays text
    raw = json.dumps(value).replace('"@N@"', literal).replace("@N@", literal).encode()
    with scratch(scratch_root) as folder:
        [line] = check_file(folder, "n.jsonl", raw + b"\n")["auto"]
        [single] = check_file(folder, "n.json", raw)["auto"]
    is_float = any(c in literal for c in ".eEIN")  # ints are exact in Python, however long
    if is_float and not math.isfinite(float(literal)):
        assert isinstance(line, Quarantined) and isinstance(single, Quarantined)
    if _read_by_yajl(literal):
        assert type(line) is type(single)
        if isinstance(line, Ticket):
            assert without_origin(line) == without_origin(single)


@fuzz_settings(200)
@given(
    st.lists(ticket_shaped(), min_size=1, max_size=3),
    # a stray byte, an overlong '/', a UTF-8-encoded surrogate, a cut 3-byte
    # sequence, a stray continuation, a 5-byte form, a code point past U+10FFFF
    st.sampled_from(
        [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80", b"\xf4\x90\x80\x80"]
    ),
    st.data(),
)
def test_invalid_utf8(scratch_root: Path, values: list[Any], bad: bytes, data: st.DataObject) -> None:
    """Invalid UTF-8 anywhere in a line quarantines that line only; in a
    .json file it ends the file, and what came before it stays whole."""
    jsonl = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode()
    listed = json.dumps(values, ensure_ascii=False).encode()
    with scratch(scratch_root) as folder:
        for name, clean in (("b.jsonl", jsonl), ("b.json", listed)):
            at = data.draw(st.sampled_from(range(len(clean))), label="at")
            broken = clean[:at] + bad + clean[at:]
            full = {r.origin: r for r in check_file(folder, name, clean)["auto"]}
            results = check_file(folder, name, broken)["auto"]
            assert any(isinstance(r, Quarantined) for r in results)
            for r in results:
                if isinstance(r, Ticket):  # or it had the id of a record the bad bytes broke
                    same = full[r.origin]
                    duplicate = (reason(same) or "").startswith("duplicate ticket_id")
                    assert r == same or (duplicate and same.ticket_id == r.ticket_id), (
                        "a ticket read around bad bytes must be the one without them"
                    )
            if name.endswith(".jsonl"):
                bad_line = clean[:at].count(b"\n") + 1
                [hit] = [r for r in results if r.origin.line == bad_line]
                assert isinstance(hit, Quarantined) and hit.reason == "invalid UTF-8"


@functools.cache
def sample_outcomes(sample: Path) -> dict[SourceRef, Outcome]:
    return {r.origin: r for r in read_all(sample)}


@functools.cache
def sample_cuts(sample: Path) -> tuple[bytes, st.SearchStrategy[int]]:
    """A sample file's bytes and where to cut it: ``sampled_from`` draws
    evenly (st.integers leans to 0); half the cuts land next to a record or
    line end, where a cut record looks most complete.  The same for every
    example of a file, so worked out once per file, not once per example
    (the set of record ends alone took a third of the test's time)."""
    content = sample.read_bytes()
    ends = {i + d for i, b in enumerate(content) if b in b"}\n" for d in (-1, 0, 1, 2)} & set(range(len(content)))
    return content, st.sampled_from(range(len(content))) | st.sampled_from(sorted(ends))


@pytest.mark.skipif(not SAMPLE_FILES, reason="no sample files under tickets/raw")
@fuzz_settings(400)
@given(st.sampled_from(SAMPLE_FILES), st.data())
def test_truncated_sample_files(scratch_root: Path, sample: Path, data: st.DataObject) -> None:
    """A file cut at any byte (a copy that was interrupted) gives no ticket
    that differs from the whole file's at the same place: a record is a
    ticket only if the reader saw all of it."""
    content, cuts = sample_cuts(sample)
    cut = data.draw(cuts, label="cut")
    full = sample_outcomes(sample)
    with scratch(scratch_root) as folder:
        path = folder / sample.name
        path.write_bytes(content[:cut])
        results = read_all(path)
    kind = "jsonl" if ".jsonl" in sample.name else "json"
    check_outcomes(results, sample.name, kind)
    tickets = [r for r in results if isinstance(r, Ticket)]
    for r in tickets:
        assert r == full[r.origin], f"{r.origin.describe()} came back different from a cut file"
    if sample.name.endswith(".gz"):  # cut anywhere, gzip misses its end marker
        if cut == 0:  # gzip reads an empty file as empty
            assert results == []
            return
        assert isinstance(results[-1], Quarantined) and results[-1].reason.startswith("unreadable file")
        return
    check_counts(results, content[:cut], kind)
    if kind == "jsonl":
        head, tail = content[:cut].split(b"\n")[-1], content[cut:].split(b"\n")[0]
        cut_mid_record = bool(head.strip() and tail.strip())
    else:
        cut_mid_record = bool(content[cut:].strip())
    if cut_mid_record:
        assert isinstance(results[-1], Quarantined), "the cut-off record is reported"


# Keys the adapters look up, and the values they switch on (roles, speakers,
# content part types), thrown together with values of any type: unlike
# ticket_shaped, which breaks valid templates, these mix the formats' keys
# (events with messages, tool_calls on a native event, ...).
VOCAB_KEYS = (
    "ticket_id", "task_id", "id", "convo_id", "trial", "reward", "events", "messages", "traj", "original",
    "delexed", "scenario", "knowledge", "role", "speaker", "text", "content", "tool_calls", "tool_call_id",
    "call_id", "function", "name", "arguments", "type", "targets", "attachments", "ocr_text", "ts", "doc_id",
    "title", "category", "channel", "language", "status", "flow",
)
VOCAB_WORDS = (
    "customer", "agent", "system", "tool_call", "tool_result", "user", "assistant", "tool", "developer",
    "action", "function", "text", "input_text", "output_text", "image", "resolved",
)
vocab_scalars = scalars | st.sampled_from(VOCAB_WORDS) | odd_timestamps
vocab_values = st.recursive(
    vocab_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(VOCAB_KEYS) | odd_text, inner, max_size=6),
    max_leaves=25,
)
vocab_records = st.dictionaries(st.sampled_from(VOCAB_KEYS), vocab_values, max_size=8)


@fuzz_settings(300)
@given(st.lists(vocab_records | ticket_shaped(), min_size=1, max_size=4), st.booleans(), st.booleans())
def test_ticket_vocabulary_with_random_values(scratch_root: Path, values: list[Any], bom: bool, crlf: bool) -> None:
    """Records made of the adapters' own keys with values of any type are a
    ticket or a quarantine with a reason the adapter gave (no crash caught by
    the safety net), one per line or item, under every format."""
    newline = "\r\n" if crlf else "\n"
    prefix = BOM if bom else b""
    jsonl = prefix + "".join(json.dumps(v, ensure_ascii=False) + newline for v in values).encode()
    listed = prefix + json.dumps(values, ensure_ascii=False).encode()
    with scratch(scratch_root) as folder:
        for name, data in (("v.jsonl", jsonl), ("v.json", listed)):
            for fmt, results in check_file(folder, name, data).items():
                assert len(results) == len(values), (name, fmt)
