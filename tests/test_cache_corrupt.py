"""A damaged response cache (``.cirrus-cache/llm-cache.sqlite3``, issue 22):
a file of garbage bytes, or a real cache cut short, is found when the cache
opens; it is moved aside to ``<name>.corrupt-<time>`` with a warning naming
both paths, and the run goes on with an empty cache (``cirrus eval`` says so
on one warning line).  Another database error names the file (a usage error),
never a traceback at every attempt."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.roles import RoleError, _open_cache
from cirrus.llm.cache import ResponseCache
from tests.chat_server import ChatServer
from tests.test_disk_full import sample_workspace

KEY_ENV = "CIRRUS_CORRUPT_CACHE_KEY"


def _garbage(directory: Path) -> bytes:
    directory.mkdir(parents=True)
    data = os.urandom(8192)
    (directory / ResponseCache.FILENAME).write_bytes(data)
    return data


def _cut_short(directory: Path) -> bytes:
    """A real cache with a few hundred answers, cut to 40% of its length."""
    with ResponseCache(directory) as cache:
        for n in range(300):
            cache.put(f"key-{n}", {"content": f"answer {n} " + "x" * 2000})
    path = directory / ResponseCache.FILENAME
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()  # every page in the file
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    data = path.read_bytes()[: int(path.stat().st_size * 0.4)]
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("damage", [_garbage, _cut_short], ids=["garbage", "cut-short"])
def test_a_damaged_cache_is_moved_aside_and_a_fresh_one_used(tmp_path, damage):
    directory = tmp_path / ".cirrus-cache"
    data = damage(directory)
    path = directory / ResponseCache.FILENAME
    with pytest.warns(RuntimeWarning) as seen:
        cache = ResponseCache(directory)
    moved = cache.set_aside
    assert moved is not None and moved.name.startswith(f"{ResponseCache.FILENAME}.corrupt-")
    assert moved.read_bytes() == data  # kept as it was, for whoever wants to look
    message = str(seen[0].message)
    assert f"the response cache {path} is damaged" in message and f"moved it aside to {moved}" in message
    with cache:  # the fresh cache works
        assert len(cache) == 0
        cache.put("k", {"content": "v"})
        assert cache.get("k") == {"content": "v"}
    with ResponseCache(directory) as again:  # and opens without a word next time
        assert again.set_aside is None and len(again) == 1


def test_a_sound_cache_is_left_alone(tmp_path, recwarn):
    with ResponseCache(tmp_path) as cache:
        cache.put("k", {"content": "v"})
    with ResponseCache(tmp_path) as cache:
        assert cache.set_aside is None and cache.get("k") == {"content": "v"}
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert sorted(p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name) == []


def test_a_cache_that_cannot_be_opened_names_the_file(tmp_path):
    path = tmp_path / ResponseCache.FILENAME
    path.mkdir()  # not a file at all: SQLite cannot open it
    with pytest.raises(RoleError) as info:
        _open_cache(ResponseCache, tmp_path)
    assert f"could not open the response cache {path}" in str(info.value)
    assert f"mv {path} {path}.old" in str(info.value)


def test_eval_with_a_damaged_cache_warns_once_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-corrupt-cache-test-0123456789")
    workspace = sample_workspace(tmp_path / "ws")
    data = _garbage(workspace / ".cirrus-cache")
    verdict = json.dumps({"reason": "rule", "verdict": "Included"})
    with ChatServer(rule=lambda body: verdict) as server:
        result = CliRunner().invoke(app, [
            "eval", "--model", "baseline:oracle", "--judge-model", "judge", "--judge-base-url", server.base_url,
            "--judge-api-key-env", KEY_ENV, "--fluency-model", "local", "--limit", "2", "-w", str(workspace),
            "--run-id", "r", "-q"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    path = workspace / ".cirrus-cache" / ResponseCache.FILENAME
    assert f"warning: the response cache {path} is damaged" in output and "moved it aside to" in output
    assert "Traceback" not in output
    moved = [p for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1 and moved[0].read_bytes() == data
    summary = json.loads((workspace / "reports/r/summary.json").read_text())
    assert summary["errors"] == 0 and summary["attempts"] == 2
