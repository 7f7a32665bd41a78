"""``cirrus stats``: the dataset statistics (cirrus/stats.py, cirrus/workspace_stats.py, cirrus/commands/stats.py).

The expected values of the tiny workspace are worked out by hand in the
comments: quartiles by linear interpolation (numpy's default, type 7): the
q-quantile of n sorted values x[0..n-1] sits at h = (n - 1) * q and is
x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.schema import Task
from cirrus.stats import Distribution, compute_stats, distribution, has_images
from cirrus.workspace_stats import stats_json

REPO = Path(__file__).resolve().parents[1]


def _cp(index: int, reply_type: str, tools: Sequence[str] = (), query: str = "q") -> dict[str, Any]:
    return {"index": index, "query": query, "reply": "r", "reply_type": reply_type,
            "tool_calls": [{"name": name, "arguments": {}} for name in tools]}


def _doc(n: int) -> dict[str, str]:
    return {"doc_id": f"kb-{n}", "title": f"doc {n}", "text": "..."}


# Four tasks:
#   T1  ECS     en  turns 2   tokens 100   1 checkpoint   2 docs  tools A         image: in a query, 2nd line
#   T2  ECS     en  turns 4   tokens 300   2 checkpoints  0 docs  tools A, B      image: in a history user message
#   T3  Billing zh  turns 6   tokens 200   3 checkpoints  1 doc   tools A         no image (marker mid-line)
#   T4  (none)  en  turns 10  tokens 1000  4 checkpoints  5 docs  no tools        no image (marker in an agent message)
TINY: list[dict[str, Any]] = [
    {"task_id": "T1", "category": "ECS", "language": "en", "knowledge": [_doc(1), _doc(2)],
     "checkpoints": [_cp(1, "Solution", ["A"], query="server down\n[image text] Connection timed out")],
     "stats": {"input_tokens": 100, "turns": 2, "checkpoints": 1}},
    {"task_id": "T2", "category": "ECS", "language": "en",
     "history": [{"role": "user", "content": "[image text] Error 502"}, {"role": "assistant", "content": "Hm."}],
     "checkpoints": [_cp(1, "Inquire"), _cp(2, "Solution", ["A", "B"])],
     "stats": {"input_tokens": 300, "turns": 4, "checkpoints": 2}},
    {"task_id": "T3", "category": "Billing", "language": "zh", "knowledge": [_doc(3)],
     "checkpoints": [_cp(1, "Standard", query="我写了 [image text] 这几个字"), _cp(2, "Clarify"),
                     _cp(3, "Solution", ["A"])],
     "stats": {"input_tokens": 200, "turns": 6, "checkpoints": 3}},
    {"task_id": "T4", "category": None, "language": "en", "knowledge": [_doc(n) for n in range(5)],
     "history": [{"role": "assistant", "content": "[image text] not the customer's"}],
     "checkpoints": [_cp(1, "Appease"), _cp(2, "Standard"), _cp(3, "Solution"), _cp(4, "Solution")],
     "stats": {"input_tokens": 1000, "turns": 10, "checkpoints": 4}},
]

EXPECTED: dict[str, Any] = {
    "stats_version": 1,
    "quantile_method": "linear",
    "tasks": 4,
    "checkpoints": 10,  # 1 + 2 + 3 + 4
    "categories": {"ECS": 2, "Billing": 1, "(none)": 1},
    "languages": {"en": 3, "zh": 1},
    # turns 2, 4, 6, 10: p25 h=0.75 -> 2 + 0.75*2 = 3.5; p50 h=1.5 -> 4 + 0.5*2 = 5; p75 h=2.25 -> 6 + 0.25*4 = 7;
    # mean 22/4 = 5.5
    "turns": {"min": 2, "p25": 3.5, "p50": 5.0, "p75": 7.0, "max": 10, "mean": 5.5},
    # K = 1, 2, 3, 4: p25 1 + 0.75 = 1.75; p50 2 + 0.5 = 2.5; p75 3 + 0.25 = 3.25; mean 10/4 = 2.5
    "checkpoints_per_task": {"min": 1, "p25": 1.75, "p50": 2.5, "p75": 3.25, "max": 4, "mean": 2.5},
    # tokens sorted 100, 200, 300, 1000: p25 100 + 0.75*100 = 175; p50 200 + 0.5*100 = 250;
    # p75 300 + 0.25*700 = 475; mean 1600/4 = 400
    "input_tokens": {"min": 100, "p25": 175.0, "p50": 250.0, "p75": 475.0, "max": 1000, "mean": 400.0},
    "tasks_with_tool_calls": 3,  # T1, T2, T3
    "tool_call_share": 0.75,
    "tasks_with_images": 2,  # T1 (query), T2 (history user message)
    "image_share": 0.5,
    # Solution T1 1 + T2 1 + T3 1 + T4 2 = 5; Standard T3 + T4 = 2; Inquire T2; Clarify T3; Appease T4
    "reply_types": {"Solution": 5, "Standard": 2, "Inquire": 1, "Clarify": 1, "Appease": 1},
    "tool_calls": 4,  # A three times (T1, T2, T3), B once
    "distinct_tools": 2,
    "top_tools": [{"name": "A", "calls": 3}, {"name": "B", "calls": 1}],
    "knowledge_docs": 8,  # 2 + 0 + 1 + 5
    "knowledge_docs_mean": 2.0,
}


def _workspace(root: Path, tasks: list[dict[str, Any]]) -> Path:
    (root / "tickets").mkdir(parents=True)
    (root / "tickets" / "tasks.jsonl").write_text(
        "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return root


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["stats", *args])


def test_tiny_tasks_are_valid() -> None:
    for task in TINY:
        Task.model_validate(task)


def test_compute_stats_by_hand() -> None:
    stats = compute_stats(Task.model_validate(t) for t in TINY)
    assert stats.to_json() == EXPECTED
    # dicts of counts are ordered largest first, then by name (the JSON file sorts its keys)
    assert list(stats.categories) == ["ECS", "(none)", "Billing"]


def test_images_need_the_marker_at_a_line_start_of_customer_text() -> None:
    tasks = [Task.model_validate(t) for t in TINY]
    assert [has_images(t) for t in tasks] == [True, True, False, False]


def test_distribution_edges() -> None:
    assert distribution([]) == Distribution(None, None, None, None, None, None)
    assert distribution([7]) == Distribution(7, 7.0, 7.0, 7.0, 7, 7.0)
    # 1, 2: p25 h=0.25 -> 1.25; p50 1.5; p75 1.75
    assert distribution([2, 1]) == Distribution(1, 1.25, 1.5, 1.75, 2, 1.5)


def test_top_tools_keeps_twenty_largest_ties_by_name() -> None:
    # tool t00 called once, t01 twice, ..., t24 25 times, one checkpoint each
    calls = [f"t{n:02d}" for n in range(25) for _ in range(n + 1)]
    task = Task.model_validate({"task_id": "X", "checkpoints": [_cp(1, "Solution", calls)],
                                "stats": {"input_tokens": 1, "turns": 2, "checkpoints": 1}})
    tie = Task.model_validate({"task_id": "Y", "checkpoints": [_cp(1, "Solution", ["zz", "aa"] * 25)],
                               "stats": {"input_tokens": 1, "turns": 2, "checkpoints": 1}})
    stats = compute_stats([task, tie])
    top = [(t.name, t.calls) for t in stats.top_tools]
    assert len(top) == 20 and stats.distinct_tools == 27
    assert top[:4] == [("aa", 25), ("t24", 25), ("zz", 25), ("t23", 24)]
    assert top[-1] == ("t07", 8)
    assert stats.tool_calls == sum(range(1, 26)) + 50


def test_command_writes_stats_json(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws", TINY)
    result = _invoke(str(workspace))
    assert result.exit_code == 0, result.output
    text = (workspace / "reports" / "stats.json").read_text(encoding="utf-8")
    assert json.loads(text) == EXPECTED
    assert text == stats_json(compute_stats(Task.model_validate(t) for t in TINY))
    assert list(json.loads(text)) == sorted(EXPECTED)  # sorted keys
    for shown in ("tasks per category", "reply types", "top tools", "Billing", "475"):
        assert shown in result.stdout
    assert "wrote" in result.stderr


def test_command_json_and_workspace_option(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws", TINY)
    result = _invoke("--json", "-w", str(workspace))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == EXPECTED
    assert result.stdout == (workspace / "reports" / "stats.json").read_text(encoding="utf-8")


def test_command_defaults_to_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_workspace(tmp_path / "ws", TINY))
    result = _invoke("--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tasks"] == 4
    assert (tmp_path / "ws" / "reports" / "stats.json").is_file()


def test_chinese_text_is_written_as_is(tmp_path: Path) -> None:
    tasks = [dict(TINY[2], category="费用与账单")]
    workspace = _workspace(tmp_path / "ws", tasks)
    result = _invoke(str(workspace), "--json")
    assert result.exit_code == 0, result.output
    text = (workspace / "reports" / "stats.json").read_text(encoding="utf-8")
    assert '"费用与账单": 1' in text
    assert json.loads(result.stdout)["languages"] == {"zh": 1}


def test_empty_task_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws", [])
    result = _invoke(str(workspace), "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["tasks"] == 0 and stats["turns"]["p50"] is None and stats["tool_call_share"] is None
    assert _invoke(str(workspace)).exit_code == 0  # the tables too


def test_missing_workspace_is_a_usage_error(tmp_path: Path) -> None:
    for args in ([str(tmp_path / "nowhere")], ["-w", str(tmp_path)]):
        result = _invoke(*args)
        assert result.exit_code == 2
        assert "tasks.jsonl does not exist" in result.stderr and "cirrus ingest" in result.stderr
    assert not (tmp_path / "reports").exists()


def test_two_different_workspaces_are_refused(tmp_path: Path) -> None:
    result = _invoke(str(tmp_path / "a"), "-w", str(tmp_path / "b"))
    assert result.exit_code == 2 and "two workspaces" in result.stderr


def test_invalid_task_is_a_usage_error(tmp_path: Path) -> None:
    bad = dict(TINY[0], checkpoints=[dict(TINY[0]["checkpoints"][0], reply_type="Nonsense")])
    workspace = _workspace(tmp_path / "ws", [TINY[1], bad])
    result = _invoke(str(workspace))
    assert result.exit_code == 2
    assert "tasks.jsonl:2: not a valid task" in result.stderr and "reply_type" in result.stderr


def test_committed_sample_workspace(tmp_path: Path) -> None:
    """The sample of the repository root (copied: the command writes reports/)."""
    workspace = tmp_path / "sample"
    (workspace / "tickets").mkdir(parents=True)
    shutil.copy(REPO / "tickets" / "tasks.jsonl", workspace / "tickets" / "tasks.jsonl")
    lines = [json.loads(line) for line in (REPO / "tickets" / "tasks.jsonl").read_text("utf-8").splitlines()
             if line.strip()]
    result = _invoke(str(workspace), "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["tasks"] == len(lines)
    assert stats["checkpoints"] == sum(len(t["checkpoints"]) for t in lines)
    assert sum(stats["categories"].values()) == sum(stats["languages"].values()) == len(lines)
    assert sum(stats["reply_types"].values()) == stats["checkpoints"]
    assert stats["tool_calls"] == sum(len(cp["tool_calls"]) for t in lines for cp in t["checkpoints"])
    assert stats["checkpoints_per_task"]["max"] == max(len(t["checkpoints"]) for t in lines)
    assert stats["input_tokens"]["min"] == min(t["stats"]["input_tokens"] for t in lines)
    assert stats["tasks_with_images"] <= sum('[image text] ' in json.dumps(t, ensure_ascii=False) for t in lines)
    assert stats["tasks_with_images"] > 0
    d = stats["turns"]
    assert d["min"] <= d["p25"] <= d["p50"] <= d["p75"] <= d["max"]
    # the same dataset as its manifest says (ingest wrote both)
    manifest = json.loads((REPO / "tickets" / "manifest.json").read_text("utf-8"))
    counts = manifest["counts"]
    assert (stats["tasks"], stats["checkpoints"], stats["tasks_with_tool_calls"]) == \
        (counts["tasks"], counts["checkpoints"], counts["tasks_with_tool_calls"])
    assert {k: v for k, v in stats["reply_types"].items() if v} == manifest["reply_types"]
    assert stats["input_tokens"]["p50"] == manifest["tokens"]["input_tokens_median"]
    assert round(stats["input_tokens"]["mean"], 1) == manifest["tokens"]["input_tokens_mean"]
