"""Raw ticket readers (contract section 1): files, formats, bad input."""

from __future__ import annotations

import ast
import functools
import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cirrus.ingest import readers
from cirrus.ingest.readers import FORMATS, READERS, abcd, native, openai_chat, read_tickets
from cirrus.ingest.readers.files import READ_SIZE, RawRecord, iter_raw_records
from cirrus.schema import Quarantined, SourceRef, Ticket

SHARED = Path(__file__).parents[2] / "shared" / "data"
TAU = SHARED / "tau-bench-airline" / "gpt-4o-airline.json"
ABCD = SHARED / "abcd-sample" / "abcd_sample.json"


def needs(path: Path) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not path.exists(), reason=f"shared data not found at {path} (../shared absent)")


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ticket(ticket_id: Any = "T-1", **extra: Any) -> dict[str, Any]:
    return {"ticket_id": ticket_id, "events": [{"role": "customer", "text": "hello"}], **extra}


def one(payload: Any, tmp_path: Path, fmt: str = "auto") -> Ticket | Quarantined:
    path = write_jsonl(tmp_path / "one.jsonl", [json.dumps(payload)])
    [result] = list(read_tickets(path, fmt))
    return result


def reason_of(payload: Any, tmp_path: Path) -> str:
    result = one(payload, tmp_path)
    assert isinstance(result, Quarantined), result
    return result.reason


# --- files -------------------------------------------------------------------


def test_jsonl_blank_lines_and_bad_line_keep_line_numbers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", ['{"a": 1}', "", "   \t", '{"a": ', '{"a": 2}'])
    records = list(iter_raw_records(path))
    assert [r.origin for r in records] == [SourceRef("t.jsonl", line=n) for n in (1, 4, 5)]
    assert records[0].payload == {"a": 1} and records[0].error is None
    assert records[1].error is not None and records[1].error.startswith("invalid JSON")
    assert records[2].payload == {"a": 2}


def test_jsonl_bom_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "w.jsonl").write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n{"a": 2}\r\n[1,\r\n')
    records = list(iter_raw_records(tmp_path))
    assert [(r.origin.line, r.payload, r.error) for r in records] == [
        (1, {"a": 1}, None),
        (3, {"a": 2}, None),
        (4, None, "invalid JSON (Expecting value at column 4)"),
    ]


def test_json_list_items_are_numbered_and_a_broken_item_stops_the_file(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text('[{"a": 1}, {"a": 2.5}, {"a": oops}, {"a": 4}]')
    records = list(iter_raw_records(path))
    assert [r.origin.item for r in records] == [1, 2, 3]
    assert records[1].payload == {"a": 2.5} and type(records[1].payload["a"]) is float
    assert records[2].error is not None and "rest of file skipped" in records[2].error
    assert "oops" not in records[2].error


def test_single_object_json_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text('\ufeff  {"ticket_id": "T-1", "n": 3}\n', encoding="utf-8")
    [record] = list(iter_raw_records(path))
    assert record == RawRecord(SourceRef("one.json"), payload={"ticket_id": "T-1", "n": 3})
    assert type(record.payload["n"]) is int


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "empty file"), (b'{"a": 1} {"b": 2}', "trailing garbage"), (b'{"a": NaN}', "invalid JSON")],
)
def test_bad_single_json(tmp_path: Path, content: bytes, expected: str) -> None:
    (tmp_path / "bad.json").write_bytes(content)
    [record] = list(iter_raw_records(tmp_path))
    assert record.origin == SourceRef("bad.json") and record.error is not None and expected in record.error


def test_gzipped_files(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write('{"x": 1}\n\n{"x": 2}\n')
    with gzip.open(tmp_path / "b.json.gz", "wt", encoding="utf-8") as f:
        f.write('[{"y": 1}, {"y": 2}]')
    records = list(iter_raw_records(tmp_path))
    assert [(r.origin, r.payload) for r in records] == [
        (SourceRef("a.jsonl.gz", line=1), {"x": 1}),
        (SourceRef("a.jsonl.gz", line=3), {"x": 2}),
        (SourceRef("b.json.gz", item=1), {"y": 1}),
        (SourceRef("b.json.gz", item=2), {"y": 2}),
    ]


def test_corrupt_gzip_is_an_error_record(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl.gz").write_bytes(b"not gzip at all")
    [record] = list(iter_raw_records(tmp_path))
    assert record.error is not None and "unreadable file" in record.error


def test_other_extensions_are_ignored(tmp_path: Path) -> None:
    for name in ("notes.txt", "t.json.bak", "t.csv", "t.gz", "jsonl"):
        (tmp_path / name).write_text('{"ticket_id": "x"}\n')
    write_jsonl(tmp_path / "real.jsonl", ['{"a": 1}'])
    assert [r.origin.source for r in iter_raw_records(tmp_path)] == ["real.jsonl"]
    assert list(iter_raw_records(tmp_path / "notes.txt")) == []


def test_nested_directories_sorted_with_relative_sources(tmp_path: Path) -> None:
    for rel in ("b/z.jsonl", "a/y/x.jsonl", "a/b.jsonl", "c.jsonl"):
        write_jsonl(tmp_path / rel, ['{"a": 1}'])
    assert [r.origin.source for r in iter_raw_records(tmp_path)] == ["a/b.jsonl", "a/y/x.jsonl", "b/z.jsonl", "c.jsonl"]
    assert [r.origin.source for r in iter_raw_records(tmp_path / "a" / "y" / "x.jsonl")] == ["x.jsonl"]


def test_missing_input_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(iter_raw_records(tmp_path / "nope"))


def test_invalid_utf8_is_an_error_record_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b'{"t": "ok"}\n{"t": "\xff\xfe"}\n{"t": "fine"}\n')
    (tmp_path / "b.json").write_bytes(b'[{"t": "ok"}, {"t": "\xc3\x28"}, {"t": "never"}]')
    records = list(iter_raw_records(tmp_path))
    assert [(r.origin.describe(), r.error) for r in records] == [
        ("a.jsonl:1", None),
        ("a.jsonl:2", "invalid UTF-8"),
        ("a.jsonl:3", None),
        ("b.json item 1", None),
        ("b.json item 2", "invalid UTF-8; rest of file skipped (cannot resync)"),
    ]


def test_json_list_is_streamed_not_loaded_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    item = json.dumps({"ticket_id": "x", "pad": "p" * 4000})
    with path.open("w") as f:
        f.write("[" + ",".join([item] * 5000) + "]")  # ~20 MB
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_raw_records(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 5000
    # the parser's read buffer and a copy of it, far below the file's 20 MB
    assert peak < 3 * READ_SIZE < path.stat().st_size, peak


# --- read_tickets: dispatch, quarantine, duplicates ---------------------------


def test_registry() -> None:
    assert FORMATS == ("auto", "native", "openai", "abcd", "zendesk", "intercom", "freshdesk", "salesforce", "meiqia")
    assert set(READERS) == set(FORMATS) - {"auto"}
    assert all(reader.NAME == name for name, reader in READERS.items())


def test_detection_is_mutually_exclusive() -> None:
    samples = [
        ticket(),
        {"ticket_id": "x"},
        {"task_id": 1, "traj": []},
        {"ticket_id": "x", "messages": []},
        {"convo_id": 1, "original": []},
    ]
    for payload in samples:
        assert sum(r.detect(payload) for r in READERS.values()) == 1, payload
    assert not any(r.detect(p) for r in READERS.values() for p in ([], "x", 3, None, {"foo": 1}))


def test_unknown_format_name_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        list(read_tickets(tmp_path, "helpscout"))


def test_error_records_and_unrecognised_payloads_are_quarantined(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", ["{bad", "[1, 2]", json.dumps({"foo": "bar"}), json.dumps(ticket())])
    results = list(read_tickets(path))
    assert [type(r).__name__ for r in results] == ["Quarantined"] * 3 + ["Ticket"]
    assert results[0].reason.startswith("invalid JSON")
    assert results[1].reason == results[2].reason == readers.UNRECOGNISED
    assert results[1].reason.startswith("unrecognised ticket format")
    assert results[0].to_manifest() == {"source": "t.jsonl", "line": 1, "reason": results[0].reason}


def test_forced_format_uses_that_adapter(tmp_path: Path) -> None:
    result = one(ticket(), tmp_path, fmt="openai")
    assert isinstance(result, Quarantined) and result.ticket_id == "T-1"
    assert isinstance(one(ticket(), tmp_path, fmt="native"), Ticket)


def test_unexpected_adapter_exception_is_quarantined_by_class_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(payload: Any, origin: SourceRef) -> Ticket:
        raise KeyError(payload["events"][0]["text"])

    monkeypatch.setattr(native, "parse", broken)
    result = one(ticket(), tmp_path)
    assert isinstance(result, Quarantined)
    assert "KeyError" in result.reason and "hello" not in result.reason


def test_duplicate_ticket_ids_are_quarantined(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [json.dumps(ticket("T-1")), json.dumps(ticket("T-2"))])
    (tmp_path / "b.json").write_text(json.dumps([ticket("T-3"), ticket("T-1")]))
    results = list(read_tickets(tmp_path))
    assert [type(r).__name__ for r in results] == ["Ticket", "Ticket", "Ticket", "Quarantined"]
    dup = results[3]
    assert dup.ticket_id == "T-1" and dup.reason == "duplicate ticket_id (first seen at a.jsonl:1)"
    assert dup.to_manifest() == {"source": "b.json", "item": 2, "ticket_id": "T-1", "reason": dup.reason}


def test_a_quarantined_ticket_does_not_claim_its_id(tmp_path: Path) -> None:
    bad = {"ticket_id": "T-1", "events": []}
    path = write_jsonl(tmp_path / "t.jsonl", [json.dumps(bad), json.dumps(ticket("T-1"))])
    assert [type(r).__name__ for r in read_tickets(path)] == ["Quarantined", "Ticket"]


# --- native format (1a) ------------------------------------------------------

CONTRACT_EXAMPLE = {
    "ticket_id": "T-1001",
    "category": "ECS",
    "channel": "online-chat",
    "language": "en",
    "status": "resolved",
    "knowledge": [{"doc_id": "kb-17", "title": "Reset an instance password", "text": "..."}, {"text": "no id"}],
    "events": [
        {
            "role": "customer",
            "text": "My server 47.98.12.3 is unreachable",
            "ts": "2025-03-01T10:00:00Z",
            "attachments": [{"kind": "image", "ocr_text": "Connection timed out 10:02 ..."}],
        },
        {"role": "customer", "text": "account 1234567890123456"},
        {"role": "agent", "text": "Let me check the instance."},
        {"role": "tool_call", "call_id": "c1", "name": "Describe.Instance Status", "arguments": {"instance_id": "i-1"}},
        {"role": "tool_result", "call_id": "c1", "content": {"status": "Stopped"}},
        {"role": "agent", "text": "The instance i-bp1abc is stopped; start it from the console ..."},
        {"role": "system", "text": "Customer rated 5 stars"},
    ],
}


def test_native_contract_example(tmp_path: Path) -> None:
    t = one(CONTRACT_EXAMPLE, tmp_path)
    assert isinstance(t, Ticket)
    fields = (t.ticket_id, t.category, t.channel, t.language, t.status)
    assert fields == ("T-1001", "ECS", "online-chat", "en", "resolved")
    roles = [e.role for e in t.events]
    assert roles == ["customer", "customer", "agent", "tool_call", "tool_result", "agent", "system"]
    first = t.events[0]
    assert first.ocr == ["Connection timed out 10:02 ..."] and first.ts == "2025-03-01T10:00:00Z"
    call, result = t.events[3], t.events[4]
    assert (call.name, call.call_id, call.arguments) == ("Describe_Instance_Status", "c1", {"instance_id": "i-1"})
    assert (result.call_id, result.content) == ("c1", {"status": "Stopped"})
    assert [(d.doc_id, d.title) for d in t.knowledge] == [("kb-17", "Reset an instance password"), ("T-1001-kb-2", "")]
    assert t.origin == SourceRef("one.jsonl", line=1)


def test_native_defaults_and_integer_id(tmp_path: Path) -> None:
    events = [{"role": "agent"}, {"role": "tool_call", "name": "x", "arguments": None}]
    t = one({"ticket_id": 42, "events": events, "status": None}, tmp_path)
    assert isinstance(t, Ticket)
    assert (t.ticket_id, t.status, t.language, t.knowledge) == ("42", "resolved", "en", [])
    assert t.events[0].text == "" and t.events[1].call_id == "auto-1" and t.events[1].arguments == {}


def test_native_reused_call_id_answers_the_latest_call(tmp_path: Path) -> None:
    events = [
        {"role": "tool_call", "call_id": "c", "name": "a"},
        {"role": "tool_result", "call_id": "c", "content": 1},
        {"role": "tool_call", "call_id": "c", "name": "b"},
        {"role": "tool_result", "call_id": "c", "content": 2},
    ]
    t = one({"ticket_id": "T", "events": events}, tmp_path)
    assert isinstance(t, Ticket)
    assert [e.call_id for e in t.events] == ["c", "c", "c~2", "c~2"]


def _events(*events: dict[str, Any]) -> dict[str, Any]:
    return {"ticket_id": "T-9", "events": list(events)}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"events": [{"role": "customer"}]}, "missing ticket_id"),
        ({"ticket_id": "T-9"}, "missing events"),
        ({"ticket_id": None, "events": [{"role": "agent"}]}, "missing ticket_id"),
        ({"ticket_id": ["x"], "events": [{"role": "agent"}]}, "ticket_id must be a string"),
        ({"ticket_id": True, "events": [{"role": "agent"}]}, "ticket_id must be a string"),
        ({"ticket_id": " ", "events": [{"role": "agent"}]}, "ticket_id is empty"),
        ({"ticket_id": "T-9", "events": []}, "events is empty"),
        ({"ticket_id": "T-9", "events": {"role": "agent"}}, "events must be a list"),
        (_events("hi"), "events[0] is not an object"),
        (_events({"role": "agent"}, {"text": "hi"}), "events[1]: missing role"),
        (_events({"role": "agent"}, {"role": "bot"}), "events[1]: unknown role 'bot'"),
        (_events({"role": "a customer who is very angry"}), "events[0]: unknown role (a str, not shown)"),
        (_events({"role": "tool_result", "call_id": "c1"}), "events[0]: tool_result call_id does not match"),
        (
            _events({"role": "tool_call", "call_id": "c1", "name": "f"}, {"role": "tool_result", "call_id": "c2"}),
            "events[1]: tool_result call_id does not match an earlier tool_call",
        ),
        (_events({"role": "tool_result"}), "events[0]: tool_result needs a call_id"),
        (_events({"role": "tool_call", "call_id": "c1"}), "events[0]: tool_call needs a name"),
        (_events({"role": "tool_call", "call_id": "c1", "name": 7}), "events[0]: tool_call needs a name"),
        (_events({"role": "tool_call", "call_id": 1.5, "name": "f"}), "events[0].call_id must be a string"),
        (_events({"role": "agent", "text": ["hi"]}), "events[0]: text must be a string"),
        (_events({"role": "customer", "attachments": "x"}), "events[0].attachments must be a list"),
        (_events({"role": "customer", "attachments": [3]}), "events[0].attachments[0] is not an object"),
        (_events({"role": "customer", "attachments": [{"ocr_text": 3}]}), "events[0].attachments[0]: ocr_text must"),
        (_events({"role": "agent", "ts": "yesterday"}), "events[0]: ts is not an ISO-8601 string"),
        (_events({"role": "agent", "ts": 1700000000}), "events[0]: ts is not an ISO-8601 string"),
        ({**_events({"role": "agent"}), "status": 1}, "status must be a string"),
        ({**_events({"role": "agent"}), "knowledge": {"text": "x"}}, "knowledge must be a list"),
        ({**_events({"role": "agent"}), "knowledge": [{"title": "t"}]}, "knowledge[0]: text must be a string"),
    ],
)
def test_native_validation_errors(tmp_path: Path, payload: dict[str, Any], reason: str) -> None:
    result = one(payload, tmp_path)
    assert isinstance(result, Quarantined)
    assert result.reason.startswith(reason), result.reason
    assert "\n" not in result.reason
    if isinstance(payload.get("ticket_id"), str) and payload["ticket_id"].strip():
        assert result.ticket_id == payload["ticket_id"]


# --- OpenAI transcripts (1b) -------------------------------------------------


def transcript(**extra: Any) -> dict[str, Any]:
    return {
        "task_id": 12,
        "messages": [
            {"role": "system", "content": "Policy: be nice."},
            {"role": "user", "content": "I need help with booking ABC123."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get.booking", "arguments": '{"id": "ABC123"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "ok", "seats": [1]}'},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Your booking is fine."}, {"type": "image_url"}],
            },
            {"role": "system", "content": "Transferred."},
        ],
        **extra,
    }


def test_openai_transcript_mapping(tmp_path: Path) -> None:
    t = one(transcript(), tmp_path)
    assert isinstance(t, Ticket)
    assert (t.ticket_id, t.status) == ("12", "resolved")
    assert [(d.doc_id, d.title, d.text) for d in t.knowledge] == [("12-system", "System prompt", "Policy: be nice.")]
    assert [e.role for e in t.events] == ["customer", "tool_call", "tool_result", "agent", "system"]
    call, result = t.events[1], t.events[2]
    assert (call.name, call.call_id, call.arguments) == ("get_booking", "call_1", {"id": "ABC123"})
    assert (result.call_id, result.content) == ("call_1", {"status": "ok", "seats": [1]})
    assert t.events[3].text == "Your booking is fine." and t.events[4].text == "Transferred."


@pytest.mark.parametrize(
    ("extra", "ticket_id", "status"),
    [
        ({"trial": 3, "reward": 0.0}, "12-3", "unresolved"),
        ({"trial": 0, "reward": 1.0}, "12-0", "resolved"),
        ({"reward": 0.5}, "12", "unresolved"),
        ({"reward": 1}, "12", "resolved"),
        ({"status": "pending"}, "12", "pending"),
    ],
)
def test_openai_trial_ids_and_reward_status(tmp_path: Path, extra: dict[str, Any], ticket_id: str, status: str) -> None:
    t = one(transcript(**extra), tmp_path)
    assert isinstance(t, Ticket)
    assert (t.ticket_id, t.status) == (ticket_id, status)


def test_openai_empty_system_prompt_gives_no_knowledge(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": None}, {"role": "user", "content": "hi"}, {"role": "system", "content": "x"}]
    t = one({"id": "e", "messages": msgs}, tmp_path)
    assert isinstance(t, Ticket)
    assert t.knowledge == [] and [e.role for e in t.events] == ["customer", "system"]


def test_openai_id_fields_and_traj(tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    assert one({"id": "conv-1", "traj": msgs}, tmp_path).ticket_id == "conv-1"  # type: ignore[union-attr]
    result = one({"ticket_id": "T-5", "task_id": 1, "messages": msgs}, tmp_path)
    assert isinstance(result, Ticket) and result.ticket_id == "T-5"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[{"a": 1}]', [{"a": 1}]),
        (' {"a": "b"}', {"a": "b"}),
        ("42", "42"),
        ('"quoted"', '"quoted"'),
        ("{not json", "{not json"),
        ("Error: not found", "Error: not found"),
        (None, ""),
        ([{"type": "text", "text": '{"x": 1}'}], {"x": 1}),
    ],
)
def test_openai_tool_content_json_parsing(tmp_path: Path, content: Any, expected: Any) -> None:
    payload = transcript()
    payload["messages"][3]["content"] = content
    t = one(payload, tmp_path)
    assert isinstance(t, Ticket)
    assert t.events[2].content == expected


def test_openai_reused_tool_call_ids(tmp_path: Path) -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": ""}}]}
    msgs = [call, {"role": "tool", "tool_call_id": "c", "content": "1"}]
    msgs += [call, {"role": "tool", "tool_call_id": "c", "content": "2"}]
    t = one({"id": "x", "messages": msgs}, tmp_path)
    assert isinstance(t, Ticket)
    assert [(e.role, e.call_id) for e in t.events] == [
        ("tool_call", "c"), ("tool_result", "c"), ("tool_call", "c~2"), ("tool_result", "c~2")
    ]
    assert t.events[0].arguments == {}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda p: p["messages"][2]["tool_calls"][0]["function"].update(arguments='{"id": '),
            "messages[2].tool_calls[0]: arguments are not valid JSON",
        ),
        (lambda p: p["messages"][3].update(tool_call_id="call_9"), "messages[3]: tool_call_id does not match"),
        (lambda p: p["messages"][3].pop("tool_call_id"), "messages[3]: tool message needs a tool_call_id"),
        (lambda p: p["messages"][1].update(role="function"), "messages[1]: unknown role 'function'"),
        (lambda p: p["messages"][1].update(content={"x": 1}), "messages[1]: content must be a string"),
        (lambda p: p["messages"][2]["tool_calls"][0].pop("function"), "messages[2].tool_calls[0].function is not an"),
        (lambda p: p.update(reward="high"), "reward must be a finite number"),
        (lambda p: p.update(messages=p["messages"][:1]), "messages holds no messages besides the system prompt"),
        (lambda p: p.pop("task_id"), "missing ticket_id"),
    ],
)
def test_openai_errors(tmp_path: Path, change: Any, reason: str) -> None:
    payload = transcript()
    change(payload)
    result = one(payload, tmp_path)
    assert isinstance(result, Quarantined)
    assert result.reason.startswith(reason), result.reason
    assert "ABC123" not in result.reason


@needs(TAU)
def test_tau_bench_end_to_end() -> None:
    results = list(read_tickets(TAU))
    assert len(results) == 200
    assert all(isinstance(r, Ticket) for r in results)
    tickets = [r for r in results if isinstance(r, Ticket)]
    # 50 tasks x 4 trials; reward 1.0 on 84 transcripts (counted from the data).
    assert {t.ticket_id for t in tickets} == {f"{task}-{trial}" for task in range(50) for trial in range(4)}
    assert tickets[0].ticket_id == "0-0" and tickets[0].origin == SourceRef("gpt-4o-airline.json", item=1)
    assert sum(t.status == "resolved" for t in tickets) == 84
    assert sum(t.status == "unresolved" for t in tickets) == 116
    for t in tickets:
        assert [d.doc_id for d in t.knowledge] == [f"{t.ticket_id}-system"]
        assert t.knowledge[0].text.startswith("# Airline Agent Policy")
        calls = [e.call_id for e in t.events if e.role == "tool_call"]
        assert len(calls) == len(set(calls))
        assert {e.call_id for e in t.events if e.role == "tool_result"} <= set(calls)
    first = tickets[0]
    assert first.events[5].name == "get_user_details" and first.events[5].arguments == {"user_id": "mia_li_3668"}
    assert isinstance(first.events[6].content, dict)


# --- ABCD ----------------------------------------------------------------------


@needs(ABCD)
def test_abcd_sample() -> None:
    tickets = list(read_tickets(ABCD))
    assert all(isinstance(t, Ticket) for t in tickets)
    assert [(t.ticket_id, t.category) for t in tickets] == [  # type: ignore[union-attr]
        ("abcd-3592", "product_defect"),
        ("abcd-9489", "product_defect"),
        ("abcd-3695", "storewide_query"),
    ]
    first = tickets[0]
    assert isinstance(first, Ticket)
    calls = [(e.name, e.arguments) for e in first.events if e.role == "tool_call"]
    assert calls == [
        ("pull-up-account", {"name_or_account_id": "crystal minh"}),
        ("validate-purchase", {"username": "cminh730", "email": "cminh730@email.com", "order_id": "3348917502"}),
        ("enter-details", {"details": "(977) 625-2661"}),
        ("notify-team", {"company_team": "manager"}),
    ]
    for i, event in enumerate(first.events):
        if event.role == "tool_call":
            result = first.events[i + 1]
            assert result.role == "tool_result" and result.call_id == event.call_id
    assert first.events[7].content == "Account has been pulled up for Crystal Minh."
    assert {e.role for e in first.events} == {"agent", "customer", "tool_call", "tool_result"}


def test_abcd_inline_and_errors(tmp_path: Path) -> None:
    convo = {
        "convo_id": 7,
        "scenario": {"flow": "shipping"},
        "original": [["customer", "where is it"], ["action", "Done."], ["agent", "ok"]],
        "delexed": [
            {"speaker": "customer", "targets": []},
            {"speaker": "action", "targets": ["s", "take_action", "brand new.action", ["a", "b"]]},
            {"speaker": "agent", "targets": []},
        ],
    }
    t = one(convo, tmp_path)
    assert isinstance(t, Ticket)
    assert t.events[1].name == "brand_new_action" and t.events[1].arguments == {"values": ["a", "b"]}
    assert abcd.arguments_for("validate-purchase", ["u"]) == {"values": ["u"]}
    convo["original"][1] = ["robot", "x"]
    assert one(convo, tmp_path).reason == "original[1]: unknown speaker 'robot'"  # type: ignore[union-attr]
    convo["original"][1] = ["action", "x"]
    convo["delexed"] = []
    assert "no matching delexed turn" in one(convo, tmp_path).reason  # type: ignore[union-attr]


# --- properties ----------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_long_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=13, max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
# Mostly well-formed tickets with junk sprinkled in, so that parsing gets deep
# before it fails (and long strings sit where a reason might quote them).
_small_id = st.sampled_from(["c1", "c2", 1])
_id = st.integers(0, 3) | st.integers(0, 3).map(str) | _long_text | _json
_value = _small_id | _long_text | _json
_event = st.fixed_dictionaries(
    {"role": st.sampled_from(["customer", "agent", "system", "tool_call", "tool_result"]) | _long_text | _json},
    optional={
        "text": _long_text | _json,
        "call_id": _small_id | _json,
        "name": _long_text | _json,
        "arguments": _value,
        "content": _value,
        "ts": st.just("2025-03-01T10:00:00Z") | _long_text,
        "attachments": st.lists(st.fixed_dictionaries({}, optional={"ocr_text": _value}), max_size=2) | _json,
    },
)
_native = st.fixed_dictionaries(
    {"ticket_id": _id, "events": st.lists(_event, min_size=1, max_size=5) | _json},
    optional={
        "knowledge": st.lists(st.fixed_dictionaries({}, optional={"doc_id": _value, "text": _value, "title": _value}))
        | _json,
        "status": _value,
        "language": _value,
        "category": _value,
    },
)
_tool_call = st.fixed_dictionaries(
    {"function": st.fixed_dictionaries({"name": _long_text | _json, "arguments": st.just('{"a": 1}') | _value})},
    optional={"id": _small_id | _json},
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]) | _long_text | _json},
    optional={
        "content": _long_text | _json | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _value})),
        "tool_calls": st.lists(_tool_call, max_size=2) | _json,
        "tool_call_id": _small_id | _json,
    },
)
_openai = st.fixed_dictionaries(
    {"task_id": _id, "traj": st.lists(_message, min_size=1, max_size=5) | _json},
    optional={"trial": _id, "reward": st.sampled_from([0.0, 1.0]) | _value},
)
_abcd_turn = st.tuples(st.sampled_from(["agent", "customer", "action"]) | _long_text, _value).map(list)
_abcd = st.fixed_dictionaries(
    {"convo_id": _id, "original": st.lists(_abcd_turn, min_size=1, max_size=4) | _json},
    optional={
        "delexed": st.lists(
            st.fixed_dictionaries(
                {"speaker": st.just("action") | _value, "targets": st.tuples(_value, _value, _value, _value).map(list)}
            ),
            max_size=4,
        )
        | _json,
        "scenario": st.fixed_dictionaries({"flow": _value}) | _json,
    },
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


@functools.cache
def _code_literals() -> tuple[str, ...]:
    """String constants of the readers and of this test module: hypothesis
    draws strings from them, and finding ``"missing event"`` in the reason
    ``"missing events"`` is a coincidence, not a leak of ticket text."""
    files = [*Path(readers.__file__).parent.glob("*.py"), Path(__file__)]
    return tuple(
        node.value
        for file in files
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_code_text(s: str) -> bool:
    return any(s in literal for literal in _code_literals())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_json | _native | _openai | _abcd | st.just("\n"), max_size=6))
def test_any_jsonl_yields_one_result_per_line_and_never_leaks(tmp_path: Path, values: list[Any]) -> None:
    lines = ["" if v == "\n" else json.dumps(v, ensure_ascii=False) for v in values]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = list(read_tickets(path))
    assert [r.origin.line for r in results] == [n for n, line in enumerate(lines, start=1) if line]
    assert all(isinstance(r, (Ticket, Quarantined)) for r in results)
    secrets = [s for v in values for s in _strings(v) if len(s) > 12 and not _is_code_text(s)]
    for r in results:
        if isinstance(r, Quarantined):
            assert "\n" not in r.reason
            assert "unexpected error" not in r.reason  # adapters reject bad input with TicketError
            assert not any(s in r.reason for s in secrets), r.reason


def test_module_exports() -> None:
    assert readers.read_tickets is read_tickets
    assert openai_chat.NAME == "openai" and native.NAME == "native" and abcd.NAME == "abcd"
