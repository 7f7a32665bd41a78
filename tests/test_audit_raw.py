"""``cirrus audit WORKSPACE --raw RAW``: the leak check against the source.

The committed sample workspace is clean against its raw input; values of the
raw input planted back into a copy of it, in other letter cases, digit
layouts, separators, URL and JSON escapes, and in a file name, are each
found, reported masked, with their file and line."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from cirrus.audit import AllowList
from cirrus.cli import app
from cirrus.leak_check import Needle, find_leaks, raw_values
from tests.conftest import REPO, SAMPLE_RAW


@pytest.fixture(scope="module")
def found():
    return raw_values(SAMPLE_RAW)


def _one(found, entity: str, test=lambda value: True) -> str:
    return sorted(v for v, e in found.values.items() if e == entity and test(v))[0]


def test_the_committed_sample_is_clean_against_its_raw_input(found):
    assert len(found.values) > 50 and {"EMAIL_ADDRESS", "PHONE_NUMBER", "PERSON"} <= set(found.values.values())
    hits, read = find_leaks(REPO, found.values, AllowList.for_workspace(REPO), is_word=found.is_word)
    assert read > 20 and hits == []


def _plant(workspace: Path, found) -> dict[str, str]:
    """One planted text per leak class; returns {class: planted text}."""
    email = _one(found, "EMAIL_ADDRESS")
    phone = _one(found, "PHONE_NUMBER", lambda v: sum(c.isdigit() for c in v) >= 10)
    name = _one(found, "PERSON", lambda v: " " in v and v.replace(" ", "").isalpha())
    key = _one(found, "CLOUD_ACCESS_KEY", lambda v: len(v) >= 16)
    ip = _one(found, "IP_ADDRESS", lambda v: v.count(".") == 3 and Needle.of(v, "IP_ADDRESS") is not None)
    digits = "".join(c for c in phone if c.isdigit())
    planted = {
        "email-upper": f"contact {email.upper()} today",
        "email-url": f"https://x.test/?to={quote(email)}",
        "email-json": json.dumps({"to": email.replace("@", "\\u0040")}).replace("\\\\u", "\\u"),
        "email-separators": f"mail {email.replace('.', '_')} now",
        "phone-dots": "call " + ".".join((digits[:3], digits[3:6], digits[6:])),
        "phone-plain": f"number {digits}",
        "name-lower": f"the owner is {name.lower()} indeed",
        "key": f"the key {key} was used",
        "ip": f"from {ip} at night",
    }
    notes = workspace / "reports" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for kind, text in planted.items():
        (notes / f"{kind}.txt").write_text(f"line one\n{text}\n", encoding="utf-8")
    (notes / f"export-{email}.txt").write_text("nothing here\n", encoding="utf-8")
    return planted


def test_every_planted_leak_is_found_with_its_file_and_line(found, sample_ingest_copy):
    planted = _plant(sample_ingest_copy, found)
    hits, _ = find_leaks(sample_ingest_copy, found.values, is_word=found.is_word)
    by_file = {h.file: h for h in hits if h.file.startswith("reports/notes/")}
    for kind in planted:
        hit = by_file.get(f"reports/notes/{kind}.txt")
        assert hit is not None, f"{kind}: not found"
        assert hit.line == 2
    name_hits = [h for h in hits if h.line == 0 and h.file.startswith("reports/notes/ex***")]
    assert name_hits and {h.kind for h in name_hits} == {"email_address"}
    assert all(h.file == "reports/notes/ex***.txt" for h in name_hits)  # the name is not repeated


def test_the_command_exits_1_and_shows_only_masked_values(found, sample_ingest_copy):
    planted = _plant(sample_ingest_copy, found)
    result = CliRunner().invoke(app, ["audit", str(sample_ingest_copy), "--raw", str(SAMPLE_RAW), "--json"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    reported = json.loads(result.stdout)
    assert {h["file"] for h in reported} >= {f"reports/notes/{k}.txt" for k in planted}
    for value in found.values:
        if len(value) >= 6:
            assert value not in result.stdout, "a raw value was printed unmasked"


def test_needles_ignore_what_is_not_personal_and_keep_case_for_ordinary_words(found):
    assert Needle.of("0.0.0.0/0", "IP_ADDRESS") is None and Needle.of("203.0.113.10", "IP_ADDRESS") is None
    grace = Needle.of("Grace", "PERSON", found.is_word)
    assert grace is not None and grace.exact_case
    laura = Needle.of("Laura", "PERSON", found.is_word)
    assert laura is not None and not laura.exact_case and laura.text == "laura"
    assert Needle.of("Li", "PERSON") is None


def test_a_missing_raw_path_is_a_usage_error(tmp_path, sample_ingest_copy):
    result = CliRunner().invoke(app, ["audit", str(sample_ingest_copy), "--raw", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_a_raw_folder_without_ticket_files_is_a_usage_error(tmp_path, sample_ingest_copy):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "notes.txt").write_text("x")
    result = CliRunner().invoke(app, ["audit", str(sample_ingest_copy), "--raw", str(tmp_path / "raw")])
    assert result.exit_code == 2 and "no .json, .jsonl" in result.output
