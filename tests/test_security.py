"""Security: the API key never reaches a file or the terminal, path
characters in ids cannot make Cirrus write (or read) outside the workspace,
and every YAML Cirrus reads is read with a safe loader."""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.replay import CassetteError, ToolReplayer
from tests._cli_here import cli_from
from tests.chat_server import ChatServer, Reply, tool_calls
from tests.conftest import REPO, SAMPLE_KB, SAMPLE_RAW
from tests.scripted_models import between

KEY_ENV = "CIRRUS_SECURITY_TEST_KEY"
KEY = f"sk-cirrus-test-{secrets.token_hex(16)}"


def _cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cirrus.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"})


def _cli_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``args`` run by typer's CliRunner in this process, from ``cwd``, as
    :func:`_cli` runs them in a child process (for tests about what a command
    writes where, not about what a process prints: no ~1 s of imports first);
    an exception the command let out is appended to stderr as a traceback."""
    return cli_from(args, cwd=cwd, env={KEY_ENV: KEY})


# -- the API key ---------------------------------------------------------------------------


def _needles(key: str) -> list[bytes]:
    """The key, its random part, and its base64 at every alignment (a key
    inside a longer base64 text, e.g. a Basic auth header)."""
    raw = key.encode()
    found = [raw, key.rsplit("-", 1)[-1].encode()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        found.append(encoded[4 if shift else 0:-4])
    return found


def _leaks(root: Path, needles: list[bytes]) -> list[str]:
    """Files under ``root`` holding a needle, in their bytes or, for Parquet
    (compressed), in their decoded values."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".parquet":
            data += pl.read_parquet(path).write_ndjson().encode()
        if any(needle in data for needle in needles):
            found.append(path.relative_to(root).as_posix())
    return found


class _Models:
    """The annotator, agent, judge, fluency checker (and a second judge for
    rescore) of the sample workspace, played by rule.  Some requests are
    answered with an error whose text repeats the request's Authorization
    header, as some gateways do, so the key lands in an exception."""

    def __init__(self, server: ChatServer) -> None:
        self.server = server
        self.by_query: dict[str, dict] = {}
        self.echo: dict[str, str] = {}  # model -> the text that makes its request fail with the echo
        self.echoes: dict[str, int] = {}
        self.annotator_errors = 5  # the first ticket: 1 try + 4 SDK retries, then the rules

    def learn(self, tasks: list[dict]) -> None:
        for task in tasks:
            for checkpoint in task["checkpoints"]:
                self.by_query.setdefault(checkpoint["query"], checkpoint)

    def _echo(self, model: str, status: int = 400, pad: int = 0) -> Reply:
        with self.server._lock:
            auth = self.server.headers[-1].get("authorization", "")
        self.echoes[model] = self.echoes.get(model, 0) + 1
        return Reply(status=status, headers={"retry-after-ms": "1"},
                     error_message=f"{'x' * pad}rejected; you sent {auth}")

    def __call__(self, body: dict) -> Reply | str:
        model, messages = body["model"], body["messages"]
        prompt = messages[-1]["content"] or ""
        if model == "annotator":
            if self.annotator_errors > 0:
                self.annotator_errors -= 1
                return self._echo(model, status=500)
            return json.dumps({"labels": ["Solution"] * prompt.count("### Reply ")})
        if model in ("judge", "judge2"):
            reference = between(prompt, "reference_reply")
            if reference == self.echo.get(model):
                return self._echo(model)
            included = reference in between(prompt, "candidate_reply")
            return json.dumps({"reason": "rule", "verdict": "Included" if included else "Not Included"})
        if model == "fluency":
            if between(prompt, "next_customer_message") == self.echo.get(model):
                return self._echo(model, status=500)  # retried, then an error row
            return json.dumps({"reason": "rule", "answer": "Yes"})
        # the agent: the reference tool calls, then the reference reply
        query = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        if query == self.echo.get("agent"):
            return self._echo("agent")
        checkpoint = self.by_query.get(query)
        if checkpoint is None:
            return Reply(content="Could you tell me more?")
        if checkpoint["tool_calls"] and messages[-1]["role"] == "user":
            return tool_calls(*[(c["name"], c["arguments"]) for c in checkpoint["tool_calls"]])
        return Reply(content=checkpoint["reply"] or "Done.")


RAW_FILES = ("billing.json", "chat_export.json")
KB_FILES = ("kb-billing-invoices.md", "kb-billing-refund-policy.md")


def test_the_api_key_is_never_written_nor_printed(tmp_path):
    """ingest (LLM annotator), eval (agent, judge, fluency), rescore, report
    and show, all with the key in the environment; errors echo the key."""
    workspace, cwd, raw, kb = tmp_path / "ws", tmp_path / "cwd", tmp_path / "raw", tmp_path / "kb"
    cwd.mkdir()
    # two of the sample's raw files (two readers, 7 tickets, tool calls): every ticket goes through the same
    # annotator client and de-identification, so the whole sample would only repeat them
    raw.mkdir()
    for name in RAW_FILES:
        shutil.copy2(SAMPLE_RAW / name, raw / name)
    # and two of its knowledge documents: every document is de-identified alike (~0.1 s each), and the key
    # reaches none of them
    kb.mkdir()
    for name in KB_FILES:
        shutil.copy2(SAMPLE_KB / name, kb / name)
    server = ChatServer()
    models = _Models(server)
    server.rule = models
    outputs = []
    with server:
        url = server.base_url
        ingest = _cli("ingest", str(raw), "--kb", str(kb), "-w", str(workspace), "-j", "1", "-q",
                      "--annotator-model", "annotator", "--annotator-base-url", url,
                      "--annotator-api-key-env", KEY_ENV, cwd=cwd)
        outputs.append(ingest)
        assert ingest.returncode == 0, ingest.stderr
        tasks = [json.loads(line) for line in (workspace / "tickets/tasks.jsonl").read_text().splitlines()][:6]
        models.learn(tasks)
        models.echo = {"agent": tasks[2]["checkpoints"][0]["query"],
                       "judge": tasks[1]["checkpoints"][0]["reply"],
                       "judge2": tasks[3]["checkpoints"][0]["reply"],
                       "fluency": next(t["checkpoints"][1]["query"] for t in tasks[4:] if len(t["checkpoints"]) > 1)}
        evaluated = _cli("eval", "--model", "agent", "--base-url", url, "--api-key-env", KEY_ENV,
                         "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "r", "--limit", "6",
                         "--runs", "2", "--pass-k", "2", "--concurrency", "2", "-w", str(workspace), cwd=cwd)
        outputs.append(evaluated)
        assert evaluated.returncode == 0, evaluated.stderr
        rescored = _cli("rescore", "r", "--judge-model", "judge2", "--judge-base-url", url, "--judge-api-key-env",
                        KEY_ENV, "--run-id", "r2", "-w", str(workspace), "-q", cwd=cwd)
        outputs.append(rescored)
        assert rescored.returncode == 0, rescored.stderr
        for command in (("report", "r", "--bootstrap", "20"), ("report", "r", "r2", "--bootstrap", "20"),
                        ("show", "r", "--failed"), ("show", "r", "--task", tasks[1]["task_id"], "--full")):
            done = _cli(*command, "-w", str(workspace), cwd=cwd)
            outputs.append(done)
            assert done.returncode == 0, done.stderr
    needles = _needles(KEY)
    assert _leaks(tmp_path, needles) == []
    for done in outputs:
        for stream in (done.stdout, done.stderr):
            assert not any(needle.decode() in stream for needle in needles)
    # the key reached the server, every role's echo happened, and the errors were kept without the key
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers)
    assert set(models.echoes) == {"annotator", "agent", "judge", "judge2", "fluency"}
    manifest = json.loads((workspace / "tickets/manifest.json").read_text())
    assert manifest["annotator_fallbacks"] == 1
    errors = pl.read_parquet(workspace / "reports/r/tasks.parquet").filter(pl.col("status") == "error")["error"]
    assert errors.len() >= 3 and all("rejected; you sent Bearer ***" in e for e in errors)
    rescore_errors = pl.read_parquet(workspace / "reports/r2/tasks.parquet")["error"].drop_nulls().to_list()
    assert any("judge2" in e and "Bearer ***" in e for e in rescore_errors)
    assert (workspace / ".cirrus-cache").is_dir() and list((workspace / "reports").rglob("*.html"))


def test_an_error_text_cut_across_the_key_keeps_no_part_of_it(tmp_path):
    from tests.scripted_models import make_task, write_workspace

    write_workspace(tmp_path, [make_task(f"T{i}", False) for i in range(3)])
    server = ChatServer()
    models = _Models(server)
    # the error text is "Error code: 400 - " + the message, cut at 300 characters: this pad puts
    # the cut 12 characters into the key's random part
    pad = 300 - len("Error code: 400 - ") - len("rejected; you sent Bearer ") - len("sk-cirrus-test-") - 12
    args = ("eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
            "--judge-model", "local", "--fluency-model", "local", "--run-id", "cut", "-w", str(tmp_path))
    random_part = KEY.rsplit("-", 1)[-1]
    # the endpoint check meets the echo first: the run stops, printing the cut text
    server.rule = lambda body: models._echo("agent", pad=pad)
    with server:
        stopped = _cli(*args, cwd=tmp_path)
    assert stopped.returncode == 1 and "rejected; you sent Bearer" in stopped.stderr, stopped.stderr
    assert KEY not in stopped.stderr + stopped.stdout and random_part[:8] not in stopped.stderr + stopped.stdout
    # the check answered (one output token asked for), every attempt meets the echo: error rows
    server = ChatServer()
    server.rule = lambda body: "OK" if body.get("max_tokens") == 1 else models._echo("agent", pad=pad)
    with server:
        done = _cli(*args[:4], server.base_url, *args[5:], cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # every attempt ended in an error
    errors = pl.read_parquet(tmp_path / "reports/cut/tasks.parquet")["error"].to_list()
    assert all("rejected; you sent Bearer" in e and KEY not in e for e in errors)
    assert not any(random_part[:8] in e for e in errors), errors[0]


# -- path characters -------------------------------------------------------------------------

HOSTILE_IDS = ["../../evil", "/abs/path", "a/b", "a_b", "..\\x", "..", ".", ".hidden", "con", "nul\u0000byte",
               "~/.ssh", "tool_mocks/../../x", "-rf", "line\nbreak", " ", "\u202eexe.yaml", "A" * 300]


def _snapshot_outside(tmp_path: Path) -> list[str]:
    return sorted(p.as_posix() for p in tmp_path.parent.rglob("*") if tmp_path not in p.parents and p != tmp_path)


def test_ids_and_tool_names_with_path_characters_stay_inside_the_workspace(tmp_path):
    import gzip

    raw = tmp_path / "raw" / "t.json.gz"
    raw.parent.mkdir()
    tickets = [{"ticket_id": ticket_id, "events": [
        {"role": "customer", "text": "status?"},
        {"role": "tool_call", "call_id": "c1", "name": "../../../tmp/evil", "arguments": {"x": 1}},
        {"role": "tool_result", "call_id": "c1", "content": "fine"},
        {"role": "agent", "text": "All systems fine."}]} for ticket_id in HOSTILE_IDS]
    with gzip.open(raw, "wt") as handle:
        json.dump(tickets, handle)
    outside_before = _snapshot_outside(tmp_path)
    workspace = tmp_path / "ws"
    cwd = tmp_path / "cwd" / "deeper"  # relative paths that escape land under tmp_path, where they are seen
    cwd.mkdir(parents=True)
    ingest = _cli_here("ingest", str(raw), "-w", str(workspace), "-q", "-j", "1", cwd=cwd)
    assert ingest.returncode == 0, ingest.stderr

    # every id is a task under a safe, distinct cassette name, or quarantined with a reason
    tasks = [json.loads(line) for line in (workspace / "tickets/tasks.jsonl").read_text().splitlines()]
    manifest = json.loads((workspace / "tickets/manifest.json").read_text())
    quarantined = {entry["item"]: entry["reason"] for entry in manifest["quarantined"]}
    assert all(reason.strip() and "\n" not in reason for reason in quarantined.values())
    task_ids = [task["task_id"] for task in tasks]
    for item, ticket_id in enumerate(HOSTILE_IDS, 1):
        assert (ticket_id in task_ids) != (item in quarantined), ticket_id
    cassettes = [task["cassette"] for task in tasks]
    assert len(set(cassettes)) == len(cassettes)
    assert all(re.fullmatch(r"tool_mocks/[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}\.yaml", c) for c in cassettes), cassettes
    for task in tasks:  # the cassettes still replay, whatever the id
        name = task["checkpoints"][0]["tool_calls"][0]["name"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
        assert ToolReplayer.for_task(workspace, task).call(name, {"x": 1}) == "fine"

    # eval, report and show of those tasks write inside reports/ only
    for command in (("eval", "--model", "baseline:oracle", "--run-id", "paths", "-q"),
                    ("report", "paths", "--bootstrap", "20"),
                    ("show", "paths", "--task", next(t for t in task_ids if "/" in t))):
        done = _cli_here(*command, "-w", str(workspace), cwd=cwd)
        assert done.returncode == 0, done.stderr
    assert pl.read_parquet(workspace / "reports/paths/tasks.parquet")["status"].to_list() == ["ok"] * len(tasks)

    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != raw]
    allowed = (workspace / "tickets", workspace / "tool_mocks", workspace / "reports" / "paths")
    assert written and all(any(folder == p.parent or folder in p.parents for folder in allowed) for p in written)
    assert _snapshot_outside(tmp_path) == outside_before
    for path in ("/abs/path", "/abs", "/tmp/evil", "/tmp/evil.yaml"):
        assert not Path(path).exists()


@pytest.mark.parametrize("cassette", ["../outside.yaml", "/etc/hostname", "tool_mocks/../../outside.yaml",
                                      "tickets/tasks.jsonl", "tool_mocks"])
def test_a_task_cannot_point_the_replayer_at_a_file_outside_tool_mocks(tmp_path, cassette):
    workspace = tmp_path / "ws"
    (workspace / "tool_mocks").mkdir(parents=True)
    (tmp_path / "outside.yaml").write_text("interactions: []\nversion: 1\n")
    with pytest.raises(CassetteError, match="not inside"):
        ToolReplayer.for_task(workspace, {"task_id": "T", "cassette": cassette})


def _finished_run(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({"fingerprint": {}, "tasks": 0}))
    (directory / "summary.json").write_text("{}")


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "a/b", "..", ".", ".hidden", "a\\b", "x\u0000y"])
def test_a_run_id_with_path_characters_is_refused_by_every_command(tmp_path, run_id):
    workspace = tmp_path / "ws"
    (workspace / "tickets").mkdir(parents=True)
    (workspace / "tickets/tasks.jsonl").write_text("")
    _finished_run(workspace / "reports" / "ok")
    _finished_run(workspace / "x")  # what reports/../x would reach
    before = sorted(p.as_posix() for p in tmp_path.rglob("*"))
    outside_run = Path(run_id) / "run.json" if run_id.startswith("/") else None
    existed = outside_run is not None and outside_run.exists()
    runner = CliRunner()
    commands = [
        ["eval", "--model", "baseline:oracle", "--run-id", run_id, "-q"],
        ["rescore", "ok", "--judge-model", "local", "--run-id", run_id, "-q"],
        ["rescore", run_id, "--judge-model", "local", "--run-id", "fine", "-q"],
        ["report", run_id],
        ["show", run_id],
    ]
    for command in commands:
        result = runner.invoke(app, [*command, "-w", str(workspace)])
        assert result.exit_code == 2, (command, result.output)
        assert "error" in result.output and re.search(r"run[ -]id|no run", result.output), result.output
    assert sorted(p.as_posix() for p in tmp_path.rglob("*")) == before
    assert outside_run is None or outside_run.exists() == existed


# -- YAML ----------------------------------------------------------------------------------------

UNSAFE_CALLS = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
UNSAFE_NAMES = {"Loader", "UnsafeLoader", "FullLoader", "CLoader", "CUnsafeLoader", "CFullLoader", "unsafe_load",
                "unsafe_load_all", "full_load", "full_load_all"}
SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}


def _yaml_problems(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    aliases = {"yaml"}  # names the yaml module is bound to
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "yaml"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "yaml":
            for alias in node.names:
                if alias.name in UNSAFE_NAMES | UNSAFE_CALLS:
                    problems.append(f"{name}:{node.lineno} from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr in UNSAFE_NAMES:
                problems.append(f"{name}:{node.lineno} yaml.{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in UNSAFE_CALLS:
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in aliases:
                loader = next((k.value for k in node.keywords if k.arg == "Loader"),
                              node.args[1] if len(node.args) > 1 else None)
                if not (isinstance(loader, ast.Attribute) and loader.attr in SAFE_LOADERS):
                    problems.append(f"{name}:{node.lineno} yaml.{node.func.attr} without a safe Loader")
    return problems


def test_the_yaml_check_catches_unsafe_forms():
    unsafe = ["import yaml\nyaml.load(t)", "import yaml\nyaml.load(t, yaml.Loader)", "import yaml as y\ny.load(t)",
              "import yaml\nyaml.load(t, Loader=yaml.FullLoader)", "import yaml\nyaml.unsafe_load(t)",
              "import yaml\nyaml.load_all(t, Loader=L)", "from yaml import Loader", "from yaml import unsafe_load",
              "import yaml\nyaml.full_load(t)"]
    safe = ["import yaml\nyaml.safe_load(t)", "import yaml\nyaml.load(t, Loader=yaml.CSafeLoader)",
            "import yaml\nyaml.load(t, yaml.SafeLoader)", "import yaml\nyaml.safe_load_all(t)"]
    assert all(_yaml_problems(code, "x") for code in unsafe)
    assert not any(_yaml_problems(code, "x") for code in safe)


def test_cirrus_reads_yaml_with_safe_loaders_only():
    problems = []
    for path in sorted((REPO / "cirrus").rglob("*.py")):
        problems += _yaml_problems(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())
    assert problems == []


PYTHON_TAGS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/object/apply:subprocess.check_call [['touch', '{marker}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    # tags vcrpy's own loader constructs; Cirrus never writes them and reads none
    "!!python/object/apply:builtins.iter [[1]]",
    "!!python/tuple [1, 2]",
]


@pytest.mark.parametrize("tag", PYTHON_TAGS)
def test_a_cassette_with_a_python_tag_is_refused_and_runs_nothing(tmp_path, tag):
    marker = tmp_path / "PWNED"
    (tmp_path / "tool_mocks").mkdir()
    (tmp_path / "tool_mocks" / "T-1.yaml").write_text(f"interactions: {tag.format(marker=marker)}\nversion: 1\n")
    task = {"task_id": "T-1", "cassette": "tool_mocks/T-1.yaml", "checkpoints": []}
    with pytest.raises(CassetteError) as failure:
        ToolReplayer.for_task(tmp_path, task)
    assert "tool_mocks/T-1.yaml" in str(failure.value) and "python/" in str(failure.value)
    assert not marker.exists()


def test_a_python_tag_in_a_cassette_makes_an_error_row_not_a_command(tmp_path):
    from tests.scripted_models import make_task, write_workspace

    marker = tmp_path / "PWNED"
    write_workspace(tmp_path, [make_task("T1", True), make_task("T2", False)])
    (tmp_path / "tool_mocks/T1.yaml").write_text(f"!!python/object/apply:os.system ['touch {marker}']\n")
    result = CliRunner().invoke(app, ["eval", "--model", "baseline:oracle", "--run-id", "y", "-q", "-w", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "reports/y/tasks.parquet").sort("task_id")
    assert rows["status"].to_list() == ["error", "ok"]
    assert "CassetteError" in rows["error"][0] and "tool_mocks/T1.yaml" in rows["error"][0]
    assert not marker.exists()


def test_config_files_with_a_python_tag_are_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    payload = f"!!python/object/apply:os.system ['touch {marker}']"
    raw = tmp_path / "t.jsonl"
    raw.write_text(json.dumps({"ticket_id": "T", "events": [{"role": "customer", "text": "hi"},
                                                             {"role": "agent", "text": "hello"}]}) + "\n")
    schemas = tmp_path / "schemas.yaml"
    schemas.write_text(f"- {payload}\n")
    listed = tmp_path / "listed.yaml"
    listed.write_text(f"- type: function\n  function: {payload}\n")
    pipeline = tmp_path / "evil.toml"
    pipeline.write_text(f"name = {payload}\n")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "cirrus.toml").write_text(f"[roles.agent]\ntemperature = {payload}\n")
    runner = CliRunner()
    for args, said in (
        (["ingest", str(raw), "-w", str(tmp_path / "a"), "--tool-schemas", str(schemas), "-q"], "schemas.yaml"),
        (["ingest", str(raw), "-w", str(tmp_path / "b"), "--tool-schemas", str(listed), "-q"], "listed.yaml"),
        (["ingest", str(raw), "-w", str(tmp_path / "c"), "--pipeline", str(pipeline), "-q"], "evil.toml"),
        (["eval", "--model", "baseline:oracle", "-w", str(tmp_path / "ws"), "-q"], "cirrus.toml"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert said in result.output, result.output
    assert not marker.exists()
    assert not (tmp_path / "a" / "tickets" / "tasks.jsonl").exists()


def test_credentials_in_a_base_url_are_never_shown_or_stored(tmp_path, monkeypatch):
    from cirrus.evaluate.roles import RoleOptions, build_roles
    from cirrus.ingest.pipeline import AnnotatorSpec
    from cirrus.llm.client import RoleConfig
    from cirrus.llm.providers import resolve_endpoint

    url = "https://alice:pw-0f9e8d7c@llm.example.internal:8443/v1"
    monkeypatch.setenv("CIRRUS_URL_TEST_KEY", "sk-url-test-not-a-secret-123")
    described = RoleConfig.from_options("m", url, "CIRRUS_URL_TEST_KEY", name="agent").describe()
    label = AnnotatorSpec(resolve_endpoint("m", url, "CIRRUS_URL_TEST_KEY")).label
    roles = build_roles(RoleOptions("m", url, "CIRRUS_URL_TEST_KEY"), None, None, [], tmp_path)
    for shown in (described, label, json.dumps(roles.details)):
        assert "pw-0f9e8d7c" not in shown and "alice" not in shown
        assert "***@llm.example.internal:8443" in shown


@pytest.mark.parametrize(("url", "shown"), [
    ("https://gw.example.internal/v1?api-key=k-5e6f7a8b9c&api-version=2024-02-01",
     "https://gw.example.internal/v1?api-key=***&api-version=2024-02-01"),
    ("https://gw.example.internal/v1?token=t-1a2b3c4d5e#k-9f8e7d", "https://gw.example.internal/v1?token=***"),
    ("https://bob:pw-77aa88bb@gw.example.internal/v1?key=k-5e6f7a8b9c",
     "https://***@gw.example.internal/v1?key=***"),
    ("https://gw.example.internal/v1", "https://gw.example.internal/v1"),
])
def test_a_key_in_a_base_url_query_string_is_masked_where_the_url_is_shown_or_stored(tmp_path, monkeypatch, url,
                                                                                         shown):
    from cirrus.evaluate.roles import RoleOptions, build_roles
    from cirrus.llm.client import RoleConfig
    from cirrus.llm.providers import shown_url

    assert shown_url(url) == shown
    monkeypatch.setenv("CIRRUS_URL_TEST_KEY", "sk-url-test-not-a-secret-123")
    described = RoleConfig.from_options("m", url, "CIRRUS_URL_TEST_KEY", name="agent").describe()
    roles = build_roles(RoleOptions("m", url, "CIRRUS_URL_TEST_KEY"), None, None, [], tmp_path)
    for text in (described, json.dumps(roles.details)):
        for secret in ("k-5e6f7a8b9c", "t-1a2b3c4d5e", "k-9f8e7d", "pw-77aa88bb"):
            assert secret not in text
