"""``cirrus view`` (issue 27 item 1, docs/view.md): the pages over the sample
workspace's two baseline runs with Starlette's TestClient (routes, filters,
search, deep links, the side-by-side's first divergence, 404s, no path
traversal, escaping, a run still writing), the command (binds 127.0.0.1,
prints its URL, Ctrl-C stops it), and a click-through in a real headless
browser (Debian's chromium over the DevTools protocol; skipped when it is not
installed, failed then in CI)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from cirrus.report.diff import first_divergence
from cirrus.view import DEFAULT_HOST, ViewServer, create_app
from tests.conftest import REPO, copy_workspace, skip_or_fail

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)">'
FAILED_TASK = "NC-2024-0311"  # retrieval fails it at checkpoint 1, oracle covers every checkpoint


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, sample_runs) -> Path:
    """The sample workspace's ``oracle`` and ``retrieval`` runs, plus
    ``oracle-b``: the oracle run with one attempt's second turn rejected (so
    its walk parts from oracle's at checkpoint 2), and a hostile customer
    message in retrieval's first transcript."""
    ws = copy_workspace(sample_runs, tmp_path_factory.mktemp("view") / "ws")
    shutil.copytree(ws / "reports/oracle", ws / "reports/oracle-b")
    path = ws / "reports/oracle-b/transcripts.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    target = next(t for t in lines if len(t["turns"]) >= 2 and t["turns"][1]["covered_through"] == t["turns"][1]["checkpoint"])
    target["turns"][1]["accepted"], target["turns"][1]["covered_through"] = False, None
    path.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    (ws / "reports/oracle-b/run.json").write_text(
        (ws / "reports/oracle-b/run.json").read_text().replace('"run_id": "oracle"', '"run_id": "oracle-b"'))
    hostile = ws / "reports/retrieval/transcripts.jsonl"
    lines = hostile.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["turns"][0]["query"] = HOSTILE + first["turns"][0]["query"]
    lines[0] = json.dumps(first)
    hostile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ws_target = (target["task_id"], target["attempt"])
    (ws / "divergent.json").write_text(json.dumps(ws_target))
    return ws


@pytest.fixture(scope="module")
def client(workspace: Path) -> TestClient:
    return TestClient(create_app(workspace))


def _rows(html: str) -> list[tuple[str, str, str]]:
    """(task, attempt, outcome) of the tasks table."""
    return [(task, attempt, outcome) for outcome, task, attempt in
            re.findall(r'<tr class="(\w+)" data-task="([^"]+)" data-attempt="(\d+)"', html)]


# --------------------------------------------------------------------------
# pages


def test_leaderboard_lists_runs_with_intervals_and_filters(client: TestClient):
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    for run in ("oracle", "oracle-b", "retrieval"):
        assert f'href="/runs/{run}"' in page.text
    assert "[1.00, 1.00]" in page.text  # the oracle's SR pass@1 interval
    # oracle and oracle-b score within each other's noise: the ≈ mark of the report (docs/noise.md)
    assert 'class="noise"' in page.text
    only = client.get("/", params={"model": "baseline:retrieval"}).text
    assert 'href="/runs/retrieval"' in only and 'href="/runs/oracle"' not in only
    assert 'href="/runs/oracle"' not in client.get("/", params={"date": "1999"}).text
    assert 'href="/runs/oracle"' in client.get("/", params={"judge": "local-heuristic"}).text
    assert 'href="/runs/oracle"' not in client.get("/", params={"dataset": "nope"}).text


def test_run_page_and_task_filters(client: TestClient):
    page = client.get("/runs/retrieval")
    assert page.status_code == 200 and "baseline:retrieval" in page.text
    assert 'href="/runs/retrieval/tasks?outcome=failed"' in page.text
    every = _rows(client.get("/runs/retrieval/tasks").text)
    assert len(every) == 62  # 31 tasks, K = 2
    failed = _rows(client.get("/runs/retrieval/tasks", params={"outcome": "failed"}).text)
    assert failed and {o for *_, o in failed} == {"failed"}
    assert _rows(client.get("/runs/oracle/tasks", params={"outcome": "failed"}).text) == []
    by_failure = client.get("/runs/retrieval/tasks", params={"failure": "missed_tool_call"}).text
    assert 0 < len(_rows(by_failure)) < 62 and "missed_tool_call" in by_failure
    assert len(_rows(client.get("/runs/retrieval/tasks", params={"end": "rejected"}).text)) > 0
    assert _rows(client.get("/runs/retrieval/tasks", params={"language": "zh"}).text) == []
    assert len(_rows(client.get("/runs/retrieval/tasks", params={"language": "en"}).text)) == 62
    category = client.get("/runs/retrieval/tasks", params={"category": "ECS"}).text
    assert 0 < len(_rows(category)) < 62


def test_text_search_reads_ids_and_transcripts(client: TestClient):
    by_id = _rows(client.get("/runs/retrieval/tasks", params={"q": FAILED_TASK.lower()}).text)
    assert {t for t, *_ in by_id} == {FAILED_TASK}
    # a word of the customer's first message, in another letter case
    by_text = _rows(client.get("/runs/retrieval/tasks", params={"q": "LOCKED MYSELF OUT"}).text)
    assert (FAILED_TASK, "0", "failed") in by_text and len(by_text) < 62
    assert _rows(client.get("/runs/retrieval/tasks", params={"q": "no such words anywhere"}).text) == []


def test_attempt_page_shows_the_walk_like_show(client: TestClient):
    page = client.get(f"/runs/retrieval/tasks/{FAILED_TASK}/attempts/0")
    assert page.status_code == 200
    text = page.text
    for part in ('id="checkpoint-1"', "checkpoint 1: REJECTED", "customer", "reference", "agent",
                 "accepts 1?", "problem: <b>missing</b>", "missed_tool_call", "rejected at checkpoint 1",
                 "DescribeInstanceStatus"):
        assert part in text, part
    assert f'href="/runs/retrieval/tasks/{FAILED_TASK}/attempts/0/compare/oracle"' in text
    oracle = client.get(f"/runs/oracle/tasks/{FAILED_TASK}/attempts/0").text
    assert "replayed result" in oracle and "&#34;status&#34;: &#34;Running&#34;" in oracle
    assert "ACCEPTED" in oracle and "fluent -&gt; 2?" in oracle


def test_compare_marks_the_first_divergence_as_diff_finds_it(client: TestClient, workspace: Path):
    page = client.get(f"/runs/retrieval/tasks/{FAILED_TASK}/attempts/0/compare/oracle")
    assert page.status_code == 200
    assert 'id="first-divergence"' in page.text and "checkpoint 1</a>: run B&#39;s turn was accepted" in page.text
    assert '<tr id="checkpoint-1" class="diverges">' in page.text
    task, attempt = json.loads((workspace / "divergent.json").read_text())
    page = client.get(f"/runs/oracle/tasks/{task}/attempts/{attempt}/compare/oracle-b").text
    turns = {run: next(json.loads(line) for line in (workspace / f"reports/{run}/transcripts.jsonl").open()
                       if json.loads(line)["task_id"] == task and json.loads(line)["attempt"] == attempt)["turns"]
             for run in ("oracle", "oracle-b")}
    where = first_divergence(turns["oracle"], turns["oracle-b"])
    assert where is not None and where.checkpoint == 2
    assert f'<tr id="checkpoint-{where.checkpoint}" class="diverges">' in page
    assert page.count('class="diverges"') == 1 and '<tr id="checkpoint-1" class="">' in page
    assert where.how.replace("'", "&#39;") in page
    same = client.get(f"/runs/oracle/tasks/{task}/attempts/{1 - attempt}/compare/oracle-b").text  # untouched
    assert 'id="no-divergence"' in same


def test_deep_links_and_404s(client: TestClient):
    page = client.get(f"/runs/oracle/tasks/{FAILED_TASK}/attempts/1")
    assert page.status_code == 200 and 'id="checkpoint-2"' in page.text
    assert f'href="/runs/oracle/tasks/{FAILED_TASK}/attempts/1#checkpoint-2"' in page.text
    for url in ("/runs/nope", "/runs/nope/tasks", f"/runs/nope/tasks/{FAILED_TASK}/attempts/0",
                "/runs/oracle/tasks/NO-SUCH-TASK/attempts/0", f"/runs/oracle/tasks/{FAILED_TASK}/attempts/9",
                f"/runs/oracle/tasks/{FAILED_TASK}/attempts/x", f"/runs/oracle/tasks/{FAILED_TASK}/attempts/0/compare/nope",
                f"/runs/oracle/tasks/{FAILED_TASK}/attempts/0/compare/oracle", "/no/such/page"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert 'id="error"' in response.text


def test_no_path_traversal(client: TestClient, workspace: Path):
    (workspace / "reports/_secret").mkdir(exist_ok=True)
    (workspace / "reports/_secret/run.jsonx").write_text("{}")
    for url in ("/runs/..%2F..%2Fetc/tasks", "/runs/%2E%2E/tasks", "/runs/%2E%2E", "/runs/_secret", "/runs/_diff",
                "/runs/oracle%2F..%2Fretrieval/tasks", f"/runs/oracle/tasks/..%2F..%2Frun.json/attempts/0",
                "/runs/oracle/tasks/%2E%2E/attempts/0", f"/runs/oracle/tasks/{FAILED_TASK}/attempts/0/compare/..%2Foracle",
                "/static/..%2F..%2Fapp.py", "/static/../app.py", "/static/%2E%2E/data.py"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "def create_app" not in response.text and "import" not in response.text
    assert client.get("/static/view.css").status_code == 200


def test_everything_is_escaped(client: TestClient, workspace: Path):
    first = json.loads((workspace / "reports/retrieval/transcripts.jsonl").open().readline())
    text = client.get(f"/runs/retrieval/tasks/{first['task_id']}/attempts/{first['attempt']}").text
    assert HOSTILE not in text and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in text
    assert "<script>" not in text  # the one script is the shipped file, by src
    echoed = client.get("/runs/retrieval/tasks", params={"q": '"><script>x</script>'}).text
    assert "<script>x" not in echoed and "&lt;script&gt;x" in echoed
    missing = client.get("/runs/%3Cscript%3Ex")
    assert missing.status_code == 404 and "<script>x" not in missing.text


def test_a_run_still_writing_is_shown_in_progress_and_live(sample_runs, tmp_path: Path):
    ws = copy_workspace(sample_runs, tmp_path / "ws")
    run = ws / "reports/retrieval"
    (run / "summary.json").unlink()
    attempts = run / "attempts.jsonl"
    lines = attempts.read_text(encoding="utf-8").splitlines()
    attempts.write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    client = TestClient(create_app(ws))
    board = client.get("/").text
    assert "in progress: 10 attempts committed" in board
    assert 'id="in-progress"' in client.get("/runs/retrieval").text
    assert len(_rows(client.get("/runs/retrieval/tasks").text)) == 10
    # the run writes more attempts: the next request sees them (no cache)
    attempts.write_text("\n".join(lines[:20]) + "\n", encoding="utf-8")
    assert len(_rows(client.get("/runs/retrieval/tasks").text)) == 20
    assert "in progress: 20 attempts committed" in client.get("/").text
    (run / "summary.json").write_text((sample_runs / "reports/retrieval/summary.json").read_text())
    attempts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "in progress" not in client.get("/").text


def test_empty_workspace(tmp_path: Path):
    page = TestClient(create_app(tmp_path)).get("/")
    assert page.status_code == 200 and "No run in this workspace yet" in page.text


def test_views_nothing_written(client: TestClient, workspace: Path):
    before = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*"))
    client.get(f"/runs/retrieval/tasks/{FAILED_TASK}/attempts/0/compare/oracle")
    client.get("/")
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*")) == before  # no diff.parquet


# --------------------------------------------------------------------------
# serving


def test_binds_loopback_by_default(workspace: Path):
    from cirrus.commands.view import view

    assert DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(view).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(view).parameters["port"].default == 0
    with ViewServer(workspace) as server:
        assert server.host == "127.0.0.1" and server._socket.getsockname()[0] == "127.0.0.1"
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        with httpx.Client(trust_env=False, timeout=10) as http:
            assert http.get(server.url + "/").status_code == 200


def test_command_prints_its_url_and_stops_on_ctrl_c(workspace: Path):
    process = subprocess.Popen([sys.executable, "-m", "cirrus.cli", "view", str(workspace)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), (url, process.stderr.read() if process.poll() else "")
        with httpx.Client(trust_env=False, timeout=10) as http:
            for _ in range(100):
                try:
                    assert http.get(url + "/runs/oracle").status_code == 200
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        code = process.wait(20)
        errors = process.stderr.read()
        # stopped cleanly: the Ctrl-C status of every command (130) or 0, and no traceback
        assert code in (0, 130) and "Traceback" not in errors, (code, errors)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# --------------------------------------------------------------------------
# in a real browser


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found is None:
        skip_or_fail("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
    return found


def test_browser_clicks_from_leaderboard_to_side_by_side_and_deep_link(workspace: Path, tmp_path: Path):
    from tests.cdp_browser import Browser

    chromium = _chromium()
    with ViewServer(workspace) as server, Browser(chromium, tmp_path / "profile") as page:
        assert page.goto(server.url + "/") == server.url + "/"
        assert page.evaluate("document.querySelectorAll('#leaderboard tbody tr').length") == 3
        assert page.click('a.run-link[href="/runs/retrieval"]') == server.url + "/runs/retrieval"
        assert page.click("#all-tasks") == server.url + "/runs/retrieval/tasks"
        assert page.evaluate("document.querySelectorAll('#tasks tbody tr').length") == 62
        # filter: choosing "failed" submits the form (the page's script)
        assert page.choose('select[name="outcome"]', "failed").endswith("/runs/retrieval/tasks?outcome=failed&end=&failure=&category=&language=&channel=&q=")
        outcomes = page.evaluate("[...document.querySelectorAll('#tasks td.outcome')].map(e => e.textContent)")
        assert outcomes and set(outcomes) == {"failed"}
        # search by text too, then open the failed attempt
        page.evaluate("document.querySelector('input[name=q]').value = 'locked myself out'")
        page.click("#apply-filters")
        assert page.evaluate("document.querySelectorAll('#tasks tbody tr').length") >= 1
        url = page.click(f'tr[data-task="{FAILED_TASK}"][data-attempt="0"] a.attempt-link')
        assert url == f"{server.url}/runs/retrieval/tasks/{FAILED_TASK}/attempts/0"
        assert "rejected at checkpoint 1" in page.evaluate("document.getElementById('ended').textContent")
        # the same attempt of the other run, side by side
        url = page.click('a.compare-link[href$="/compare/oracle"]')
        assert url == f"{server.url}/runs/retrieval/tasks/{FAILED_TASK}/attempts/0/compare/oracle"
        assert "checkpoint 1" in page.evaluate("document.getElementById('first-divergence').textContent")
        assert page.evaluate("document.querySelectorAll('tr.diverges').length") == 1
        # a deep link straight to a checkpoint: the page opens there, the checkpoint targeted
        deep = f"{server.url}/runs/oracle/tasks/{FAILED_TASK}/attempts/1#checkpoint-2"
        page.goto(deep)
        assert page.evaluate("location.hash") == "#checkpoint-2"
        assert page.evaluate("document.querySelector(':target').id") == "checkpoint-2"
        assert "checkpoint 2" in page.evaluate("document.querySelector(':target h3').textContent")
        # scrolled to it: in view, below where the page starts
        top, scrolled, height = page.evaluate(
            "[document.getElementById('checkpoint-2').getBoundingClientRect().top, scrollY, innerHeight]")
        assert scrolled > 0 and 0 <= top < height / 2
        assert page.problems() == []
