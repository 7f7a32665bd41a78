"""`cirrus judge-consistency`: the statistics as pure functions (edge cases
included), the saved-verdict and judge recovery, the command with the local
judge on an offline baseline run (0 flips), and with a scripted LLM judge on
tests/chat_server.py that changes its mind on a known set of items and fails
some calls (failures are counted, never flips)."""

from __future__ import annotations

import json
import shutil
import threading

import pytest
import typer
from typer.testing import CliRunner

from cirrus.commands.judge_consistency import judge_consistency
from cirrus.evaluate.saved_run import run_judge
from cirrus.judges.calibration import wilson_interval
from cirrus.judges.consistency import (
    ConsistencyError,
    RunJudge,
    bootstrap_ratio_ci,
    consistency_stats,
    draw_sample,
    item_flipped,
    judge_options,
    saved_judge_verdict,
)
from cirrus.schema import Checkpoint, ToolCallRef
from cirrus.settings import RoleSettings
from tests.chat_server import ChatServer, Reply
from tests.conftest import workspace_snapshot
from tests.scripted_models import agent_reply, between, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_CONSISTENCY_KEY"
ENV = {KEY_ENV: "sk-consistency-test-0123456789", "COLUMNS": "200"}
TOP_KEYS = {"run_id", "judge", "judge_fingerprint", "sample", "repeats", "seed", "items_available", "calls",
            "failed_calls", "item_flip_rate", "item_flip_rate_ci95", "verdict_flip_rate", "verdict_flip_rate_ci95",
            "self_agreement", "by_kind", "created_at", "items"}
KIND_KEYS = {"sample", "calls", "failed_calls", "item_flip_rate", "item_flip_rate_ci95", "verdict_flip_rate",
             "verdict_flip_rate_ci95", "self_agreement"}
ITEM_KEYS = {"task_id", "attempt", "turn_checkpoint", "judged_checkpoint", "saved", "fresh"}

app = typer.Typer()


@app.callback()
def _main() -> None:
    pass


app.command("judge-consistency")(judge_consistency)


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["judge-consistency", *args, "-q"], env=ENV)
    assert result.exit_code == code, result.output
    return result.output


# --- statistics ----------------------------------------------------------------------


def test_stats_of_a_mixed_sample():
    outcomes = [
        (True, [True, True, True]),      # steady
        (True, [False, False, False]),   # flipped, agrees with itself
        (False, [False, True, False]),   # flipped once, disagrees with itself
        (True, [None, True, True]),      # a failed call: left out
        (False, [None, None, None]),     # every call failed: not scored
        (True, [None, False, None]),     # one answer: flipped, nothing to compare it with
    ]
    s = consistency_stats(outcomes)
    assert (s.sample, s.calls, s.failed_calls) == (6, 18, 6)
    assert (s.items_scored, s.items_flipped, s.item_flip_rate) == (5, 3, 0.6)
    assert s.item_flip_rate_ci95 == wilson_interval(3, 5)
    assert (s.verdicts, s.verdicts_flipped, s.verdict_flip_rate) == (12, 5, 5 / 12)
    lo, hi = s.verdict_flip_rate_ci95
    assert 0 <= lo < 5 / 12 < hi <= 1
    assert (s.items_compared, s.items_self_agreeing, s.self_agreement) == (4, 3, 0.75)
    assert s.as_dict() == {"sample": 6, "calls": 18, "failed_calls": 6, "item_flip_rate": 0.6,
                           "item_flip_rate_ci95": list(wilson_interval(3, 5)), "verdict_flip_rate": 5 / 12,
                           "verdict_flip_rate_ci95": [lo, hi], "self_agreement": 0.75}
    assert consistency_stats(outcomes) == s  # seeded: the same interval every time
    assert item_flipped(True, [None, None]) is None and item_flipped(True, [None, False]) is True


def test_stats_edge_cases():
    empty = consistency_stats([])
    assert (empty.sample, empty.calls, empty.failed_calls) == (0, 0, 0)
    assert empty.as_dict() == {"sample": 0, "calls": 0, "failed_calls": 0, "item_flip_rate": None,
                               "item_flip_rate_ci95": None, "verdict_flip_rate": None,
                               "verdict_flip_rate_ci95": None, "self_agreement": None}
    failed = consistency_stats([(True, [None, None]), (False, [None, None])])
    assert (failed.calls, failed.failed_calls, failed.items_scored) == (4, 4, 0)
    assert failed.item_flip_rate is None and failed.verdict_flip_rate is None and failed.self_agreement is None
    one = consistency_stats([(True, [True]), (True, [False]), (False, [False]), (False, [None])])  # R = 1
    assert (one.item_flip_rate, one.verdict_flip_rate) == (1 / 3, 1 / 3)
    assert one.self_agreement is None and one.items_compared == 0  # no two answers to compare
    steady = consistency_stats([(True, [True, True])] * 4 + [(False, [False, False])] * 4)
    assert steady.item_flip_rate == 0.0 and steady.item_flip_rate_ci95[0] == 0.0
    assert steady.verdict_flip_rate_ci95 == (0.0, 0.0) and steady.self_agreement == 1.0
    everything = consistency_stats([(True, [False, False])] * 3)
    assert everything.item_flip_rate == 1.0 and everything.verdict_flip_rate_ci95 == (1.0, 1.0)


def test_bootstrap_resamples_items_not_verdicts():
    import numpy as np

    flips, sizes = [3, 0, 0, 0, 1, 0, 2, 0], [3, 3, 3, 3, 3, 3, 3, 3]
    ci = bootstrap_ratio_ci(flips, sizes, seed=7, resamples=4000)
    assert ci == bootstrap_ratio_ci(flips, sizes, seed=7, resamples=4000)
    # the same cluster bootstrap written out
    rng = np.random.default_rng(7)
    picks = rng.integers(0, 8, size=(4000, 8))
    ratios = np.asarray(flips)[picks].sum(1) / np.asarray(sizes)[picks].sum(1)
    assert ci == pytest.approx(tuple(np.quantile(ratios, [0.025, 0.975])))
    # flips bunched in items are noisier than the same number of verdicts resampled one by one
    verdicts = [1] * 6 + [0] * 18
    one_by_one = bootstrap_ratio_ci(verdicts, [1] * 24, seed=7, resamples=4000)
    assert ci[1] - ci[0] > one_by_one[1] - one_by_one[0]
    assert bootstrap_ratio_ci([], []) is None and bootstrap_ratio_ci([0], [0]) is None
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1], [1, 2])


def test_draw_sample_is_reproducible():
    items = list(range(100))
    first = draw_sample(items, 10, seed=3)
    assert first == draw_sample(items, 10, seed=3) and len(set(first)) == 10
    assert first == sorted(first) and first != draw_sample(items, 10, seed=4)
    assert draw_sample(items, 500, seed=0) == items and draw_sample([], 5, seed=0) == []


# --- what was saved, and which judge ------------------------------------------------------


def test_the_saved_verdict_is_the_judges_not_the_acceptance():
    checkpoint = Checkpoint(index=1, query="q", reply="r", reply_type="Solution",
                            tool_calls=[ToolCallRef(name="Describe", arguments={"id": "i-1"})])
    plain = Checkpoint(index=1, query="q", reply="r", reply_type="Solution")
    right = {"checkpoint": 1, "tool_calls": [{"name": "Describe", "arguments": {"id": "i-1"}, "recorded": True}]}
    wrong = {"checkpoint": 1, "tool_calls": []}
    rejected = {"kind": "coverage", "checkpoint": 1, "ok": False,
                "raw": json.dumps({"reason": "x", "verdict": "Included"})}
    # the tools could not reject: ok is the judge's verdict
    assert saved_judge_verdict(rejected, right, checkpoint) is False
    assert saved_judge_verdict(rejected, wrong, plain) is False
    # the tools rejected the turn: the row's rr, else the raw answer
    assert saved_judge_verdict(rejected, wrong, checkpoint, {"rr": True}) is True
    assert saved_judge_verdict(rejected, wrong, checkpoint) is True
    assert saved_judge_verdict({**rejected, "raw": "Not Included (offline heuristic)"}, wrong, checkpoint) is False
    assert saved_judge_verdict({**rejected, "raw": "hmm"}, wrong, checkpoint) is None
    jump = {**rejected, "checkpoint": 2}  # the row's rr is the turn's own checkpoint's, not a later one's
    assert saved_judge_verdict({**jump, "raw": "Not Included"}, wrong, checkpoint, {"rr": True}) is False


def _run(judge_role: dict, **details) -> dict:
    return {"fingerprint": {"judge": "x", "judge_role": judge_role}, **details}


def test_the_runs_judge_is_recovered_from_run_json():
    role = {"model": "judge-m", "params": {"model": "judge-m", "temperature": 0.0, "max_completion_tokens": 50,
                                           "top_p": 0.5}}
    recorded = run_judge(_run(role, judge_base_url="http://h/v1", api_key_envs=["K"]))
    assert recorded.model == "judge-m" and recorded.base_url == "http://h/v1" and recorded.api_key_envs == ("K",)
    assert recorded.params == {"temperature": 0.0, "max_tokens": 50, "max_tokens_param": "max_completion_tokens",
                               "extra_body": {"top_p": 0.5}}
    panel = run_judge(_run({"panel": [{"model": "a", "params": {"model": "a", "temperature": 0.0}},
                                      {"model": "b", "params": {"model": "b", "temperature": 0.0}}]}))
    assert panel.model == "a,b" and panel.params == {"temperature": 0.0}
    assert run_judge(_run({"name": "local-heuristic", "thresholds": [0.6, 0.5]})).model == "local"
    assert run_judge({"fingerprint": {"judge": "llm-coverage:old"}}).model == "old"

    toml = RoleSettings(model="other", base_url="http://toml/v1", api_key_env="TOML_KEY", max_retries=1,
                        temperature=0.7)
    options = judge_options(recorded, toml, None, None, None)
    assert (options.model, options.base_url, options.api_key_env) == ("judge-m", "http://h/v1", "K")
    assert options.params == {"max_retries": 1, **recorded.params}  # the run's answer parameters, not the file's
    given = judge_options(recorded, toml, None, "http://given/v1", "GIVEN")
    assert (given.base_url, given.api_key_env) == ("http://given/v1", "GIVEN")
    other = judge_options(recorded, toml, "gpt-x", None, None)  # another model: cirrus.toml's settings
    assert (other.model, other.base_url, other.api_key_env, other.params) == (
        "gpt-x", "http://toml/v1", "TOML_KEY", {"temperature": 0.7, "max_retries": 1})
    assert judge_options(recorded, toml, "local", None, None).model == "local"
    masked = RunJudge("judge-m", "https://***@h/v1", ("K",), {}, None)
    with pytest.raises(ConsistencyError, match="--judge-base-url"):
        judge_options(masked, RoleSettings(), None, None, None)
    several = RunJudge("judge-m", "http://h/v1", ("A", "B"), {}, None)
    with pytest.raises(ConsistencyError, match="--judge-api-key-env"):
        judge_options(several, RoleSettings(), None, None, None)
    assert judge_options(several, RoleSettings(), None, None, "B").api_key_env == "B"
    with pytest.raises(ConsistencyError, match="--judge-model"):
        judge_options(RunJudge(None, None, (), {}, None), RoleSettings(), None, None, None)


# --- the command with the local judge -----------------------------------------------------


def test_local_judge_on_a_baseline_run(sample_runs_copy, tmp_path):
    run_dir = sample_runs_copy / "reports" / "retrieval"
    before = workspace_snapshot(run_dir)
    output = _invoke("retrieval", "-w", str(sample_runs_copy), "--sample", "20", "--seed", "5")
    result = json.loads((run_dir / "judge_consistency.json").read_text(encoding="utf-8"))
    after = workspace_snapshot(run_dir)
    assert after.pop("judge_consistency.json") and after == before  # nothing else in the run folder changed
    assert set(result) == TOP_KEYS and set(result["by_kind"]) == {"own", "jump"}
    assert all(set(stats) == KIND_KEYS for stats in result["by_kind"].values())
    assert all(set(item) == ITEM_KEYS for item in result["items"])
    assert result["run_id"] == "retrieval" and result["judge"] == "local-heuristic"
    assert result["judge_fingerprint"]["name"] == "local-heuristic"
    assert (result["sample"], result["repeats"], result["seed"]) == (20, 3, 5) and result["items_available"] > 20
    assert (result["calls"], result["failed_calls"]) == (60, 0)
    assert result["item_flip_rate"] == 0.0 and result["verdict_flip_rate"] == 0.0 and result["self_agreement"] == 1.0
    assert result["by_kind"]["own"]["sample"] + result["by_kind"]["jump"]["sample"] == 20
    assert all(item["fresh"] == [item["saved"]] * 3 for item in result["items"])
    assert "changed its mind on 0 of 20 items" in output and "deterministic" in output
    # the same seed draws the same items; --output writes elsewhere, the run's file stays
    elsewhere = tmp_path / "out" / "consistency.json"
    _invoke("retrieval", "-w", str(sample_runs_copy), "--sample", "20", "--seed", "5", "--judge-model", "local",
            "--output", str(elsewhere))
    again = json.loads(elsewhere.read_text(encoding="utf-8"))
    assert again["items"] == result["items"]
    assert json.loads((run_dir / "judge_consistency.json").read_text(encoding="utf-8")) == result


# --- the command with a scripted LLM judge ------------------------------------------------


def _where(prompt: str) -> tuple[str, int, int]:
    """(task prefix, answered checkpoint k, judged checkpoint j) of a coverage prompt."""
    query = between(prompt, "customer_last_message")
    return query.split()[0], int(query[-1]), int(between(prompt, "reference_reply").removeprefix("ANSWER-"))


class Scripted:
    """The agent ``jumper``, the judge ``judge`` and fluency ``fluency`` of
    tests/scripted_models.py while ``mode`` is "eval"; then a judge that
    changes its mind ("flaky") or always fails ("down")."""

    def __init__(self) -> None:
        self.mode = "eval"
        self.asked: dict[tuple[str, int, int], int] = {}
        self.lock = threading.Lock()
        self.judge_requests = 0

    def __call__(self, body: dict) -> Reply | str | None:
        if self.mode == "eval" or body["model"] != "judge":
            answer = judge_or_fluency(body)
            return answer if answer is not None else agent_reply(body["model"], body)
        self.judge_requests += 1
        if self.mode == "down":
            return Reply(status=500, headers={"Retry-After": "0"})
        prompt = body["messages"][1]["content"]
        where = _where(prompt)
        with self.lock:
            if len(body["messages"]) == 2:
                self.asked[where] = self.asked.get(where, 0) + 1
            count = self.asked.get(where, 0)
        honest = between(prompt, "reference_reply") in between(prompt, "candidate_reply")
        unreadable = "I cannot decide."
        if where == ("gamma", 1, 1):
            return Reply(status=500, headers={"Retry-After": "0"})  # every call fails after its retry
        if where == ("gamma", 1, 3):
            return unreadable  # every call fails after its repair attempts
        if where == ("beta", 1, 1) and (len(body["messages"]) > 2 or count == 1):
            return unreadable  # the first call fails, the others answer
        if where == ("alpha", 1, 2) or (where == ("beta", 3, 3) and count == 2):
            honest = not honest  # always changes its mind / once in three
        return json.dumps({"reason": "scripted", "verdict": "Included" if honest else "Not Included"})


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    """A finished run "r1" of the agent ``jumper`` judged by the scripted LLM
    judge (one attempt of three tasks, one with a tool call; 12 coverage
    verdicts: 6 on the turn's own checkpoint, 6 logical-jump ones), and the
    server, still up, that made it."""
    root = tmp_path_factory.mktemp("consistency") / "ws"
    write_workspace(root, [make_task("T-alpha", False, "alpha "), make_task("T-beta", False, "beta "),
                           make_task("T-gamma", True, "gamma ")])
    (root / "cirrus.toml").write_text("[roles.judge]\nmax_retries = 1\n", encoding="utf-8")
    scripted = Scripted()
    with ChatServer(rule=scripted) as server:
        from cirrus.cli import app as cirrus_app

        result = CliRunner().invoke(cirrus_app, [
            "eval", "--model", "jumper", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
            "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "r1", "-w", str(root), "-q",
        ], env=ENV)
        assert result.exit_code == 0, result.output
        yield root, scripted


@pytest.fixture
def llm_workspace(llm_run, tmp_path):
    root, scripted = llm_run
    scripted.mode, scripted.asked, scripted.judge_requests = "eval", {}, 0
    return shutil.copytree(root, tmp_path / "ws"), scripted


def test_a_scripted_judge_that_changes_its_mind(llm_workspace):
    workspace, scripted = llm_workspace
    run_dir = workspace / "reports" / "r1"
    before = workspace_snapshot(run_dir)
    scripted.mode = "flaky"
    # the run's own judge: model, base URL and key variable from run.json
    output = _invoke("r1", "-w", str(workspace), "--concurrency", "4")
    result = json.loads((run_dir / "judge_consistency.json").read_text(encoding="utf-8"))
    after = workspace_snapshot(run_dir)
    assert after.pop("judge_consistency.json") and after == before
    # the cache is bypassed: every call reached the server (29 answered, 1 + 3 + 3 failed after 3, 2, 3 tries)
    assert scripted.judge_requests == 29 + 3 + 3 * 2 + 3 * 3
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert result["judge"] == "llm-coverage:judge" and result["judge_fingerprint"] == run["fingerprint"]["judge_role"]
    assert (result["sample"], result["items_available"], result["repeats"]) == (12, 12, 3)
    assert (result["calls"], result["failed_calls"]) == (36, 7)
    assert result["item_flip_rate"] == 0.2 and result["item_flip_rate_ci95"] == list(wilson_interval(2, 10))
    assert result["verdict_flip_rate"] == 4 / 29 and result["self_agreement"] == 0.9
    lo, hi = result["verdict_flip_rate_ci95"]
    assert 0 <= lo < 4 / 29 < hi < 1
    own, jump = result["by_kind"]["own"], result["by_kind"]["jump"]
    assert (own["sample"], own["calls"], own["failed_calls"]) == (6, 18, 4)
    assert (own["item_flip_rate"], own["verdict_flip_rate"], own["self_agreement"]) == (0.2, 1 / 14, 0.8)
    assert (jump["sample"], jump["calls"], jump["failed_calls"]) == (6, 18, 3)
    assert (jump["item_flip_rate"], jump["verdict_flip_rate"], jump["self_agreement"]) == (0.2, 0.2, 1.0)
    items = {(i["task_id"], i["turn_checkpoint"], i["judged_checkpoint"]): i for i in result["items"]}
    assert len(items) == 12 and {i["attempt"] for i in result["items"]} == {0}
    assert items[("T-alpha", 1, 2)]["saved"] is True and items[("T-alpha", 1, 2)]["fresh"] == [False] * 3
    assert items[("T-alpha", 1, 3)]["saved"] is False and items[("T-alpha", 1, 3)]["fresh"] == [False] * 3
    assert sorted(items[("T-beta", 3, 3)]["fresh"]) == [False, True, True]
    assert sorted(items[("T-beta", 1, 1)]["fresh"], key=str) == [None, True, True]
    assert items[("T-gamma", 1, 1)]["fresh"] == [None] * 3 and items[("T-gamma", 1, 3)]["fresh"] == [None] * 3
    assert items[("T-gamma", 3, 3)]["fresh"] == [True] * 3
    assert "changed its mind on 2 of 10 items (20%, 95% CI 5.7-51.0%)" in output
    assert "failed call" in output and "unreadable coverage verdict" in output and "500" in output
    assert "deterministic" not in output and "not the one that made" not in output


def test_every_call_failing_exits_1(llm_workspace):
    workspace, scripted = llm_workspace
    scripted.mode = "down"
    output = _invoke("r1", "-w", str(workspace), "--sample", "2", "--repeats", "1", code=1)
    assert "every judge call failed (2)" in output and scripted.judge_requests == 4
    assert not (workspace / "reports" / "r1" / "judge_consistency.json").exists()


def test_input_mistakes_exit_2(llm_workspace):
    workspace, _ = llm_workspace
    output = _invoke("nope", "-w", str(workspace), code=2)
    assert "no run 'nope'" in output and "available runs: r1" in output
    assert "there is no run there" in _invoke("r1", "-w", str(workspace / "elsewhere"), code=2)
    run_dir = workspace / "reports" / "r1"
    transcripts = run_dir / "transcripts.jsonl"
    lines = transcripts.read_text(encoding="utf-8").splitlines(keepends=True)
    transcripts.write_text(lines[0] + "{broken\n" + "".join(lines[1:]) + '{"task_id": 3}\n', encoding="utf-8")
    output = _invoke("r1", "-w", str(workspace), code=2)
    assert f"{transcripts}:2: not valid JSON" in output and f"{transcripts}:{len(lines) + 2}: no task_id" in output
    (run_dir / "summary.json").unlink()
    assert "not finished" in _invoke("r1", "-w", str(workspace), code=2)
    _invoke("r1", "-w", str(workspace), "--sample", "0", code=2)
    _invoke("r1", "-w", str(workspace), "--repeats", "0", code=2)


def test_the_cache_is_bypassed_for_every_panel_member(tmp_path, monkeypatch):
    import asyncio

    from cirrus.evaluate.roles import RoleOptions, build_roles
    from cirrus.judges.consistency import bypass_cache

    monkeypatch.setenv(KEY_ENV, ENV[KEY_ENV])
    roles = build_roles(RoleOptions("baseline:oracle"), RoleOptions("a,b", "http://127.0.0.1:9/v1", KEY_ENV),
                        RoleOptions("local"), [], tmp_path)
    try:
        assert all(member.cache for member in roles.judge.members)
        bypass_cache(roles.judge)
        assert not any(member.cache for member in roles.judge.members)
    finally:
        asyncio.run(roles.aclose())
