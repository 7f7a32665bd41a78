"""``cirrus audit``: what it finds, what it must not flag, and the command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.audit import scan_text
from cirrus.cli import app
from tests.conftest import REPO, sample_with_baseline_runs

FOUND = [
    ("email", "laura.chen@brightleaf.io"),
    ("email", "ops+alerts@mail.example-corp.co.uk"),
    ("phone", "+1 415 555 0199"),
    ("phone", "+44 20 7946 0958"),
    ("phone", "13912345678"),
    ("phone", "(415) 555-0199"),
    ("card", "4111 1111 1111 1111"),
    ("card", "5500-0000-0000-0004"),
    ("key", "AKIAIOSFODNN7EXAMPLE"),
    ("key", "LTAI5tB8qR3mXw9KfZ2pLs7d"),
    ("key", "sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A"),
    ("key", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
    ("ip", "10.24.8.17"),
    ("ip", "47.96.12.201"),
    ("ip", "2400:3200:baba::1"),
]

NOT_FOUND = [
    "ja***@g***.com",  # masked by ingest
    "157****3190",
    "**** **** **** 1111",
    "i-bp***c",
    "2024-05-01", "2024-05-01T10:30:00Z", "10:30:00", "at 09:15:27.123", "2025-03-05 11:02:15", "20250305",
    "amtl 84.05537634408603",
    "version 1.2.3", "build 10.0.19045.3693",
    "$1,234.56", "ORD-20240501-0012",
    "4111 1111 1111 1112",  # fails the Luhn check
    "0000 0000 0000 0000",
    "127.0.0.1", "0.0.0.0", "255.255.255.0", "::1",
    "203.0.113.10", "198.51.100.7", "2001:db8::/64",  # documentation ranges
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
]


@pytest.mark.parametrize("kind, value", FOUND)
def test_personal_values_and_secrets_are_found(kind, value):
    assert (kind, value) in scan_text(f"note: {value}, see above")


@pytest.mark.parametrize("text", NOT_FOUND)
def test_masks_dates_versions_and_reserved_addresses_are_not_hits(text):
    assert scan_text(f"value {text} here") == []


def _workspace(tmp_path: Path) -> Path:
    """The committed sample workspace's written files, copied."""
    workspace = tmp_path / "ws"
    (workspace / "tickets").mkdir(parents=True)
    for name in ("tasks.jsonl", "manifest.json"):
        shutil.copy(REPO / "tickets" / name, workspace / "tickets" / name)
    shutil.copytree(REPO / "tool_mocks", workspace / "tool_mocks")
    shutil.copy(REPO / ".cirrus-audit-allow", workspace / ".cirrus-audit-allow")
    return workspace


def _audit(*args: str):
    return CliRunner().invoke(app, ["audit", *args])


def test_the_committed_sample_workspace_is_clean(tmp_path):
    result = _audit(str(_workspace(tmp_path)))
    assert result.exit_code == 0, result.output


def test_a_planted_value_fails_the_audit_and_is_shown_masked(tmp_path):
    workspace = _workspace(tmp_path)
    tasks = workspace / "tickets" / "tasks.jsonl"
    lines = tasks.read_text(encoding="utf-8").splitlines()
    task = json.loads(lines[3])
    task["checkpoints"][0]["reply"] += " Write to me at noah.peterson@gmail.com."
    lines[3] = json.dumps(task)
    tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _audit(str(workspace))
    assert result.exit_code == 1
    assert "tickets/tasks.jsonl:4: email" in result.output
    assert "noah.peterson@gmail.com" not in result.output


def test_json_escapes_do_not_hide_a_value(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "reports" / "r").mkdir(parents=True)
    (workspace / "reports" / "r" / "attempts.jsonl").write_text('{"reply": "mail noah\\u0040gmail.com"}\n')
    result = _audit(str(workspace), "--json")
    assert result.exit_code == 1
    hits = json.loads(result.stdout)["hits"]
    assert [(h["file"], h["line"], h["kind"]) for h in hits] == [("reports/r/attempts.jsonl", 1, "email")]


def test_parquet_string_columns_are_read(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "reports" / "r").mkdir(parents=True)
    pl.DataFrame({"task_id": ["a", "b", "c"], "attempt": [0, 1, 2],
                  "reply": ["fine", "call +44 20 7946 0958", None]}).write_parquet(workspace / "reports/r/x.parquet")
    result = _audit(str(workspace), "--json")
    assert result.exit_code == 1
    hits = json.loads(result.stdout)["hits"]
    assert [(h["file"], h["line"], h["column"], h["kind"]) for h in hits] == [
        ("reports/r/x.parquet", 2, "reply", "phone")]
    assert "7946" not in result.stdout


def test_inputs_and_hidden_folders_are_not_read_and_the_allow_list_works(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "tickets" / "raw").mkdir()
    (workspace / "tickets" / "raw" / "t.jsonl").write_text('{"text": "laura.chen@brightleaf.io"}\n')
    (workspace / "tickets" / "kb").mkdir()
    (workspace / "tickets" / "kb" / "a.md").write_text("laura.chen@brightleaf.io\n")
    (workspace / "reports" / ".cache").mkdir(parents=True)
    (workspace / "reports" / ".cache" / "c.json").write_text('"laura.chen@brightleaf.io"\n')
    assert _audit(str(workspace)).exit_code == 0
    (workspace / "reports" / "notes.md").write_text("support: help@nimbus-cloud.example\n")
    assert _audit(str(workspace)).exit_code == 1
    assert _audit(str(workspace), "--allow", r"@nimbus-cloud\.example$").exit_code == 0


def test_usage_errors_exit_2(tmp_path):
    assert _audit(str(tmp_path / "missing")).exit_code == 2
    assert _audit(str(_workspace(tmp_path)), "--allow", "(").exit_code == 2


def test_a_workspace_with_evaluation_reports_is_clean(tmp_path, pipeline_config):
    workspace = sample_with_baseline_runs(tmp_path / "ws", pipeline_config)
    shutil.copy(REPO / ".cirrus-audit-allow", workspace / ".cirrus-audit-allow")
    assert CliRunner().invoke(app, ["report", "oracle", "retrieval", "-w", str(workspace), "--bootstrap", "50"]).exit_code == 0
    written = sorted(p.suffix for p in (workspace / "reports").rglob("*") if p.is_file())
    assert {".parquet", ".jsonl", ".json", ".html"} <= set(written)
    result = _audit(str(workspace))
    assert result.exit_code == 0, result.output
