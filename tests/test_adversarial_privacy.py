"""The adversarial corpus (tests/adversarial_corpus.py) through the whole
product: ingest, an offline evaluation and a report, then every file under
the workspace, and every file name, is searched for every planted value in
all its forms (letter case, digit layouts, separators, URL and JSON
escapes).  Structured values and secrets: zero leaks.  Names: at most 2%.
Then ``cirrus audit --raw`` must find each class planted back on purpose,
and nothing in the clean workspace.  Last, property tests: de-identifying
twice changes nothing more, and never makes JSON invalid."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.leak_check import find_leaks, raw_values
from cirrus.schema import Event, SourceRef, Ticket
from tests.adversarial_corpus import MUST_SURVIVE, build
from tests.conftest import evaluate_baselines


@pytest.fixture(scope="module")
def corpus():
    return build()


@pytest.fixture(scope="module")
def adversarial_workspace(tmp_path_factory, corpus, pipeline_config):
    from cirrus.ingest.run import IngestOptions, run_ingest

    root = tmp_path_factory.mktemp("adversarial")
    raw, workspace = root / "raw", root / "ws"
    raw.mkdir()
    (raw / "tickets.jsonl").write_text("".join(json.dumps(t) + "\n" for t in corpus.tickets), encoding="utf-8")
    manifest = run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config,
                                        progress=False)).manifest
    evaluate_baselines(workspace)
    result = CliRunner().invoke(app, ["report", "oracle", "retrieval", "-w", str(workspace)])
    assert result.exit_code == 0, result.output
    return raw, workspace, manifest


def _planted(corpus, kind: str) -> dict[str, str]:
    return {value: kind for value, k in corpus.planted.items() if k == kind}


def test_the_corpus_plants_every_class_several_times(corpus):
    counts = {kind: len(_planted(corpus, kind)) for kind in ("structured", "secret", "name")}
    assert counts["structured"] >= 60 and counts["secret"] >= 40 and counts["name"] >= 30, counts


def test_the_whole_workspace_was_written(adversarial_workspace):
    _, workspace, manifest = adversarial_workspace
    assert len(manifest["quarantined"]) == 4  # the broken tickets, by pseudonymous id
    assert any((workspace / "tool_mocks").iterdir())
    assert list((workspace / "reports").rglob("*.html")) and list((workspace / "reports").rglob("*.parquet"))


@pytest.mark.parametrize("kind", ["structured", "secret"])
def test_no_structured_value_and_no_secret_survives_anywhere(corpus, adversarial_workspace, kind):
    _, workspace, _ = adversarial_workspace
    hits, read = find_leaks(workspace, _planted(corpus, kind))
    assert read > 20
    assert hits == [], [str(h) for h in hits]


def test_names_survive_at_most_two_percent(corpus, adversarial_workspace, deidentifier):
    _, workspace, _ = adversarial_workspace
    names = _planted(corpus, "name")
    hits, _ = find_leaks(workspace, names, is_word=deidentifier.is_word)
    leaked = {h.value for h in hits}
    assert len(leaked) <= 0.02 * len(names), sorted(h.masked for h in hits)


def test_ordinary_sentences_survive_unmasked(adversarial_workspace):
    _, workspace, _ = adversarial_workspace
    tasks = (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8")
    missing = [s for s in MUST_SURVIVE if s not in tasks]
    assert missing == []


def test_quarantine_entries_and_file_names_hold_no_ticket_id_with_personal_data(corpus, adversarial_workspace):
    _, workspace, manifest = adversarial_workspace
    emails = [v for v, k in corpus.planted.items() if k == "structured" and "@" in v]
    shown = json.dumps(manifest["quarantined"]) + "\n".join(p.as_posix() for p in workspace.rglob("*"))
    assert not [e for e in emails if e.lower() in shown.lower()]


# -- cirrus audit --raw on the same corpus ---------------------------------------------------

@pytest.fixture(scope="module")
def raw_found(adversarial_workspace, pipeline_config):
    raw, _, _ = adversarial_workspace
    return raw_values(raw, pipeline_config)


def test_the_audit_finds_nothing_in_the_clean_workspace(adversarial_workspace, raw_found):
    _, workspace, _ = adversarial_workspace
    hits, _ = find_leaks(workspace, raw_found.values, is_word=raw_found.is_word)
    assert hits == [], [str(h) for h in hits]


def test_the_audit_finds_every_class_planted_back(corpus, adversarial_workspace, raw_found, tmp_path):
    import shutil

    _, clean, _ = adversarial_workspace
    workspace = shutil.copytree(clean, tmp_path / "ws")
    by_kind = {kind: sorted(_planted(corpus, kind)) for kind in ("structured", "secret", "name")}
    card = next(v for v in by_kind["structured"] if v.isdigit() and len(v) == 16)
    planted = {
        "email-upper": next(v for v in by_kind["structured"] if "@" in v).upper(),
        "card-dots": ".".join(card[i:i + 4] for i in range(0, 16, 4)),
        "secret": by_kind["secret"][0],
        "jwt-in-json": json.dumps({"auth": next(v for v in by_kind["secret"] if v.startswith("eyJ"))}),
        "name-lower": by_kind["name"][0].lower(),
        "ip": next(v for v in by_kind["structured"] if v.startswith("47.")),
    }
    notes = workspace / "reports" / "notes"
    notes.mkdir()
    for kind, text in planted.items():
        (notes / f"{kind}.txt").write_text(f"first line\nsaw {text} here\n", encoding="utf-8")
    (notes / f"for-{by_kind['structured'][1]}.txt").write_text("nothing\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["audit", str(workspace), "--raw", str(adversarial_workspace[0]), "--json"])
    assert result.exit_code == 1, result.output
    hits = json.loads(result.stdout)
    files = {h["file"] for h in hits}
    for kind in planted:
        assert f"reports/notes/{kind}.txt" in files, kind
    assert any(h["file"].startswith("reports/notes/fo***") and h["line"] == 0 for h in hits)
    for value in planted.values():
        assert value not in result.output


# -- properties of de-identification ---------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "Jane Roe", "jane roe", "JANE ROE", "Mia Li", "jane.roe@gmail.com", "JROE77 [at] outlook [dot] com",
    "+1 415 555 0142", "415.555.0142", "13912345678", "4111.1111.1111.1111", "4111 1111 1111 1111",
    "47.98.12.3", "2408:4002::1f", "LTAI5tQx8R2mN4vP7kW9zY3b", "password: hunter22", "Bearer abcDEF123456ghiJKL789",
    "ya29.a0AfH6SMBxyzXYZ0123456789abcdef", "https://u:pw@host.example-corp.io/x", "hello", "thanks!", "Atlanta (ATL)",
    "order 12345", "Ja***", "ja***@g***.com", "157****3190", "<PERSON_1>", "身份证号110105199003071234", " ", "\n",
    "devs", "Nginx", "{", "}", "\"", "\\u0040", "%40",
])
# Values are separated the way sentences separate them (", "): detection at
# a value's edge depends on its neighbour ("415 555 0142 415.555.0142" is two
# numbers, but once masked "0142 415" looks like one), a known limit.  Words
# that are names only sometimes ("Grace") are left out for the same reason:
# spaCy's verdict on them changes with the words around them.
_TEXT = st.lists(_FRAGMENTS, max_size=8).map(", ".join)
_KEYS = st.one_of(st.sampled_from(["email", "name", "jane.roe@gmail.com", "Jane Roe", "password", "id", "note"]),
                  st.text(max_size=6))
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), _TEXT),
                     lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
                     max_leaves=12)


@st.composite
def _tickets(draw) -> Ticket:
    events = [Event(role="customer", text=draw(_TEXT))]
    for n in range(draw(st.integers(0, 2))):
        events.append(Event(role="tool_call", call_id=f"c{n}", name=draw(st.sampled_from(["lookup", "callback__14155550142"])),
                            arguments=draw(st.dictionaries(_KEYS, _JSON, max_size=3))))
        events.append(Event(role="tool_result", call_id=f"c{n}", content=draw(_JSON)))
    events.append(Event(role="agent", text=draw(_TEXT)))
    return Ticket(ticket_id=draw(st.sampled_from(["T-1", "jane.roe@gmail.com", "ticket 13912345678"])), events=events,
                  origin=SourceRef("p.jsonl", line=1))


def _dump(ticket: Ticket) -> str:
    return json.dumps(dataclasses.asdict(ticket), sort_keys=True, allow_nan=False, ensure_ascii=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(_tickets())
def test_deidentification_is_idempotent_and_keeps_json_valid(deidentifier, ticket):
    once, _ = deidentifier.deidentify(ticket)
    twice, _ = deidentifier.deidentify(once)
    first = _dump(once)  # raises on NaN/Infinity or a non-JSON value
    assert json.loads(first) == json.loads(_dump(once))
    assert _dump(twice) == first
    for original, masked in zip(ticket.events, once.events):
        if isinstance(original.content, dict):
            assert isinstance(masked.content, dict) and len(masked.content) == len(original.content)
        if isinstance(original.arguments, dict):
            assert isinstance(masked.arguments, dict) and len(masked.arguments) == len(original.arguments)
