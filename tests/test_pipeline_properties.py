"""Property tests: whatever a readable ticket holds (odd Unicode, huge or
deeply nested tool payloads, empty texts), the stage chain returns a task or
a skip, never raises, and what it returns is valid workspace JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cirrus.ingest.pipeline import Processed, Skipped, TicketProcessor
from cirrus.ingest.readers import read_record
from cirrus.ingest.readers.files import RawRecord
from cirrus.schema import SourceRef, Task, Ticket

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**15, 10**15), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=40))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                               st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=25)
text = st.one_of(st.text(max_size=200), st.sampled_from(["", " ", "ok", "thanks!", "My IP is 10.0.0.1 and I'm Ann Lee",
                                                        "我的手机号13912345678", "a" * 5000]))


@st.composite
def native_tickets(draw):
    events = []
    calls = 0
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["customer", "agent", "system", "tool"]))
        if kind == "tool":
            calls += 1
            events.append({"role": "tool_call", "call_id": f"c{calls}", "name": draw(st.text(min_size=1, max_size=20)),
                           "arguments": draw(json_value)})
            events.append({"role": "tool_result", "call_id": f"c{calls}", "content": draw(json_value)})
        else:
            events.append({"role": kind, "text": draw(text)})
    return {"ticket_id": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ./_-]{0,29}", fullmatch=True)), "events": events}


@pytest.fixture(scope="module")
def processor(pipeline_config):
    return TicketProcessor(pipeline_config)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(native_tickets())
def test_stage_chain_never_raises_and_writes_valid_tasks(processor, raw):
    ticket = read_record(RawRecord(SourceRef("p.jsonl", line=1), payload=raw))
    assert isinstance(ticket, Ticket), ticket
    result = processor(ticket)
    assert isinstance(result, (Processed, Skipped))
    if isinstance(result, Processed):
        Task.model_validate(json.loads(json.dumps(result.task)))
        assert len(result.task["knowledge"]) <= 5
        assert all(c["reply"] or c["tool_calls"] for c in result.task["checkpoints"])
