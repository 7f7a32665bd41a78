"""A rescore's verdicts can be defended (issue 22): with the run's own
judge it reproduces the run's recorded verdicts, even where the run got two
different answers to one question and Cirrus's cache kept only one; where it
takes verdicts from the cache, it says how many differ from the run's own.
And it finds the judge where the run asked it, or names its own option."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, between, make_task, write_workspace
from tests.test_eval_loud import is_probe

KEY_ENV = "CIRRUS_RESCORE_KEY"
ENV = {KEY_ENV: "sk-rescore-test-0123456789", "COLUMNS": "250"}


class SplitJudge:
    """A judge that answers checkpoint 1's question (asked by both attempts
    at once, so neither finds it in the cache) Included the first time and
    Not Included the second; every other question by the rule of
    tests/scripted_models.py."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_asks = 0
        self.both_in_flight = threading.Barrier(2, timeout=20)
        self.asked = 0  # judge questions the server answered (endpoint checks left out)
        self.fluency_asked = 0

    def __call__(self, body: dict) -> Reply | str:
        prompt = body["messages"][-1]["content"]
        if body["model"] == "fluency":
            with self.lock:
                self.fluency_asked += not is_probe(body)
            return json.dumps({"reason": "rule", "answer": "Yes"})
        if body["model"] != "judge":
            return agent_reply("perfect", body)
        if is_probe(body):
            return "OK"
        with self.lock:
            self.asked += 1
            first = between(prompt, "reference_reply") == "ANSWER-1" and self.first_asks < 2
            self.first_asks += first
            number = self.first_asks
        if first:
            self.both_in_flight.wait()
            included = number == 1
        else:
            included = between(prompt, "reference_reply") in between(prompt, "candidate_reply")
        return json.dumps({"reason": "rule", "verdict": "Included" if included else "Not Included"})


@pytest.fixture
def judge() -> SplitJudge:
    return SplitJudge()


@pytest.fixture
def server(judge):
    with ChatServer(rule=judge) as chat:
        yield chat


def invoke(*args: str, code: int = 0):
    result = CliRunner().invoke(app, list(args), env=ENV)
    assert result.exit_code == code, result.output
    return result


def evaluate(ws: Path, server: ChatServer) -> dict:
    """One task, two attempts at once: checkpoint 1's identical question
    gets two different answers, so one attempt succeeds and one fails."""
    invoke("eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", KEY_ENV, "--judge-model",
           "judge", "--fluency-model", "fluency", "--run-id", "split", "--pass-k", "2", "--concurrency", "2",
           "-w", str(ws), "-q")
    return json.loads((ws / "reports/split/summary.json").read_text())


def rescore(ws: Path, *extra: str, judge: str = "judge", code: int = 0):
    return invoke("rescore", "split", "--judge-model", judge, "-w", str(ws), "-q", *extra, code=code)


def summary_of(ws: Path, run_id: str) -> dict:
    return json.loads((ws / f"reports/{run_id}/summary.json").read_text())


def verdicts_of(ws: Path, run_id: str) -> list[list[tuple]]:
    """Each attempt's coverage verdicts (the fluency ones are the run's, reused without --fluency-model)."""
    lines = (ws / f"reports/{run_id}/transcripts.jsonl").read_text().splitlines()
    return [[(v["checkpoint"], v["ok"], v["raw"]) for turn in json.loads(line)["turns"]
             for v in turn["verdicts"] if v["kind"] == "coverage"] for line in lines]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    # structured output known to work: the judge's first questions need not wait for one another
    (tmp_path / "cirrus.toml").write_text("[roles.judge]\nstructured_output = true\n")
    return write_workspace(tmp_path, [make_task("T-a", False)])


def test_a_rescore_with_the_runs_own_judge_reproduces_its_verdicts(ws, server, judge):
    source = evaluate(ws, server)
    assert source["sr"]["pass@1"] == 0.5  # the same question, two answers: one attempt passed checkpoint 1
    asked = judge.asked
    result = rescore(ws, "--judge-base-url", server.base_url, "--judge-api-key-env", KEY_ENV)
    summary = summary_of(ws, "split-rescored-judge")
    # measured before: answered from the cache (0 calls), both attempts got the one answer it kept: 0.0 or 1.0
    assert summary["sr"] == source["sr"] and summary["atpr"] == source["atpr"]
    assert judge.asked == asked  # nothing asked again
    info = summary["rescore"]
    assert info["changed"] == 0 and info["verdict_agreement"] == 1.0 and info["same_judge"] is True
    assert info["verdicts_reused"] == info["verdicts_compared"] > 0
    assert (info["verdicts_from_cache"], info["cached_verdicts_differing"]) == (0, 0)
    assert "judge" not in summary["usage"]  # no call, no cache hit
    assert verdicts_of(ws, "split-rescored-judge") == verdicts_of(ws, "split")  # as recorded, raw answers too
    transcripts = (ws / "reports/split-rescored-judge/transcripts.jsonl").read_text()
    assert '"answer_from":"run"' in transcripts
    assert "taken as the run recorded them" in " ".join(result.output.split())
    # the run's own fluency checker, asked again: its recorded verdicts too
    fluency_asked = judge.fluency_asked
    rescore(ws, "--judge-base-url", server.base_url, "--judge-api-key-env", KEY_ENV, "--fluency-model", "fluency",
            "--run-id", "with-fluency")
    again = summary_of(ws, "with-fluency")
    assert again["rescore"]["same_fluency"] is True and judge.fluency_asked == fluency_asked
    assert again["sr"] == source["sr"] and again["rescore"]["verdicts_reused"] > info["verdicts_reused"]


def test_verdicts_taken_from_the_cache_that_differ_from_the_runs_are_counted(ws, server, judge):
    source = evaluate(ws, server)
    # a run that does not record its judge's fingerprint (written before it did): its judge cannot be known
    # to be the rescore's, so questions go to the cache, which kept one of the two answers
    run_file = ws / "reports/split/run.json"
    run = json.loads(run_file.read_text())
    del run["fingerprint"]["judge_role"]
    run_file.write_text(json.dumps(run))
    asked = judge.asked
    result = rescore(ws, "--judge-base-url", server.base_url, "--judge-api-key-env", KEY_ENV)
    summary = summary_of(ws, "split-rescored-judge")
    info = summary["rescore"]
    assert info["same_judge"] is False and info["verdicts_reused"] == 0
    assert judge.asked == asked  # every question from the cache
    assert info["verdicts_from_cache"] >= 2
    assert info["cached_verdicts_differing"] == 1  # checkpoint 1 of the attempt whose answer the cache lost
    # which answer the cache kept is a race: the failed attempt now passes checkpoint 1 (and is truncated where
    # its transcript ends), or the successful one fails it; either way one attempt's outcome changed
    assert info["changed"] == 1 and source["sr"]["pass@1"] == 0.5
    output = " ".join(result.output.split())
    assert f"1 of the {info['verdicts_from_cache']} verdicts answered from Cirrus's cache differ from run split's" \
        in output


def test_rescore_asks_the_runs_own_judge_where_the_run_asked_it(ws, server):
    evaluate(ws, server)
    result = rescore(ws)  # no --judge-base-url: the judge is the run's model
    output = " ".join(result.output.split())
    assert f"judge judge at {server.base_url}: where run split asked it" in output
    recorded = json.loads((ws / "reports/split-rescored-judge/run.json").read_text())
    assert recorded["judge_base_url"] == server.base_url and recorded["api_key_envs"] == [KEY_ENV]
    assert summary_of(ws, "split-rescored-judge")["sr"] == summary_of(ws, "split")["sr"]


def test_rescore_names_its_own_option_for_a_judge_it_cannot_place(ws, server):
    evaluate(ws, server)
    shutil.rmtree(ws / ".cirrus-cache")
    result = rescore(ws, "--run-id", "other", judge="other-judge", code=2)
    output = " ".join(result.output.split())
    assert "don't know where model 'other-judge' is served: pass --judge-base-url" in output
    assert "--base-url," not in output.replace("--judge-base-url,", "")
    # a URL the run recorded with its credentials masked cannot be used: say which option gives it
    run_file = ws / "reports/split/run.json"
    run = json.loads(run_file.read_text())
    run["judge_base_url"] = server.base_url.replace("http://", "http://***@")
    run_file.write_text(json.dumps(run))
    result = rescore(ws, code=2)
    assert "give the full URL with --judge-base-url" in " ".join(result.output.split())
