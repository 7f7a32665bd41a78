"""The example agent (examples/shop_agent, issue 24 item 6): its own prompt,
retrieval and tool names, evaluated on the sample workspace through the four
paths -- a configured model (`--model` + its `[agent]`), its service
(`--agent-url`), its service calling its tools itself (`--tool-server`) and
Python (`--agent`) -- with the same scores, call for call."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import polars as pl
import pytest
import uvicorn
from typer.testing import CliRunner

from cirrus.cli import app
from examples.shop_agent.agent import decide
from tests.chat_server import ChatServer, Reply, tool_calls

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples/shop_agent/agent.toml"
COLUMNS = ["task_id", "attempt", "checkpoint", "accepted", "tia", "tsa", "tev", "tool_calls"]
_SECTION = re.compile(r"^## .*$", re.MULTILINE)


def knowledge_of(messages: list[dict]) -> list[dict]:
    """The documents of the knowledge message (`knowledge = "message"`), as
    the example's retrieval reads them."""
    text = next((m["content"] for m in messages[1:] if m["role"] == "system"), "")
    return [{"text": part.strip()} for part in _SECTION.split(text.split("\n\n", 1)[-1]) if part.strip()]


def the_examples_model(body: dict) -> Reply | str:
    """A model that behaves as the example's policy does, behind an
    OpenAI-compatible endpoint: the configured-model path."""
    messages = [m for m in body["messages"] if m["role"] != "system"]
    step = decide(messages, body.get("tools") or [], knowledge_of(body["messages"]))
    if "tool_calls" in step:
        return tool_calls(*step["tool_calls"])
    return Reply(content=step["content"])


class Service:
    """examples/shop_agent/service.py served by uvicorn on 127.0.0.1."""

    def __enter__(self) -> str:
        from examples.shop_agent.service import app as service

        self.server = uvicorn.Server(uvicorn.Config(service, host="127.0.0.1", port=0, log_config=None,
                                                    access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            self.thread.join(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/agent"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def evaluate(ws: Path, run_id: str, *how: str) -> tuple[dict, pl.DataFrame]:
    result = CliRunner().invoke(app, ["eval", *how, "--agent-config", str(CONFIG), "--judge-model", "local",
                                      "--limit", "12", "--run-id", run_id, "-w", str(ws), "-q"],
                                env={"EXAMPLE_KEY": "sk-example"})
    assert result.exit_code == 0, result.output
    summary = json.loads((ws / "reports" / run_id / "summary.json").read_text())
    turns = pl.read_parquet(ws / "reports" / run_id / "checkpoints.parquet").select(COLUMNS).sort(
        "task_id", "attempt", "checkpoint")
    return summary, turns


def test_the_example_agent_scores_the_same_through_every_path(sample_ingest_copy):
    ws = sample_ingest_copy
    with ChatServer(rule=the_examples_model) as model, Service() as url:
        runs = {
            "model": evaluate(ws, "model", "--model", "examples-model", "--base-url", model.base_url,
                              "--api-key-env", "EXAMPLE_KEY"),
            "service": evaluate(ws, "service", "--agent-url", url),
            "tool-server": evaluate(ws, "tool-server", "--agent-url", url, "--tool-server"),
            "python": evaluate(ws, "python", "--agent", "examples.shop_agent.agent:make_agent"),
        }
        prompts = {r["messages"][0]["content"] for r in model.requests if r.get("tools")}
    summary, turns = runs["model"]
    assert prompts and all(p.startswith("You are Ava, the support assistant of") for p in prompts)
    # it did use its tool, under its own name, and the recordings answered it (TEV)
    assert turns.filter(pl.col("tev")).height >= 1
    for name, (other_summary, other_turns) in runs.items():
        assert other_turns.equals(turns), name
        assert {k: other_summary[k] for k in ("atpr", "sr", "attempts", "errors")} == {
            k: summary[k] for k in ("atpr", "sr", "attempts", "errors")}, name
    labels = {json.loads((ws / "reports" / run / "run.json").read_text()).get("agent_label") for run in runs}
    assert labels == {"shop-agent 1.0"}
