"""How many checkpoints ``--checkpoints select`` keeps (K per task).

    .venv/bin/python benchmarks/checkpoint_selection.py [--jobs 2]

Ingests each corpus twice into temporary workspaces, with ``--checkpoints
all`` and ``--checkpoints select`` (the offline rule selector; no model is
called), and reports per corpus: tasks, K in total, K per task (mean,
median, min, max), the kept/total ratio from the manifest, how many tasks
lost at least one checkpoint, and why the rule selector dropped turns (its
reasons, recomputed on the ``all`` workspace's checkpoints).  Corpora: the
tau-bench airline transcripts (``../shared/data``, skipped when absent), the
English sample (``tickets/raw --kb tickets/kb``) and the Chinese sample
(``samples/zh/tickets/raw --kb samples/zh/tickets/kb``).  Writes
``benchmarks/results/checkpoint_selection.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cirrus.config import load_pipeline  # noqa: E402
from cirrus.ingest.annotate.base import ReplyToLabel  # noqa: E402
from cirrus.ingest.annotate.rules import RuleAnnotator  # noqa: E402
from cirrus.ingest.annotate.select import RuleSelector  # noqa: E402
from cirrus.ingest.pipeline import AnnotatorSpec  # noqa: E402
from cirrus.ingest.run import IngestOptions, run_ingest  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "checkpoint_selection.json"
CORPORA: dict[str, tuple[Path, Path | None]] = {
    "tau-bench-airline": (ROOT.parent / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json", None),
    "sample-en": (ROOT / "tickets" / "raw", ROOT / "tickets" / "kb"),
    "sample-zh": (ROOT / "samples" / "zh" / "tickets" / "raw", ROOT / "samples" / "zh" / "tickets" / "kb"),
}


def k_figures(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    ks = [len(t["checkpoints"]) for t in tasks]
    return {"tasks": len(ks), "k_total": sum(ks), "k_mean": round(statistics.fmean(ks), 3) if ks else None,
            "k_median": statistics.median(ks) if ks else None, "k_min": min(ks, default=None),
            "k_max": max(ks, default=None)}


def drop_reasons(tasks: list[dict[str, Any]]) -> dict[str, int]:
    """The rule selector's reasons for the turns it drops, recomputed on the
    checkpoints of an ``all`` workspace (their labels as ingest wrote them)."""
    config = load_pipeline()
    reasons: Counter[str] = Counter()
    for task in tasks:
        annotate = config.annotate_for(task["language"])
        selector = RuleSelector.from_config(RuleAnnotator.from_config(annotate), config.select_for(task["language"]),
                                            annotate)
        items = [ReplyToLabel(c["query"], c["reply"], tuple(x["name"] for x in c["tool_calls"]))
                 for c in task["checkpoints"]]
        reasons.update(r for r in selector.reasons(items, [c["reply_type"] for c in task["checkpoints"]])
                       if r.startswith("drop"))
    return dict(sorted(reasons.items()))


def ingest(raw: Path, kb: Path | None, mode: str, workspace: Path, jobs: int) -> tuple[dict, list[dict]]:
    manifest = run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=load_pipeline(), kb_dir=kb,
                                        annotator=AnnotatorSpec(None, mode), jobs=jobs,  # type: ignore[arg-type]
                                        progress=False)).manifest
    lines = (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    tasks = [json.loads(line) for line in lines]
    return manifest, tasks


def measure(raw: Path, kb: Path | None, jobs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        _, all_tasks = ingest(raw, kb, "all", Path(tmp) / "all", jobs)
        manifest, selected = ingest(raw, kb, "select", Path(tmp) / "select", jobs)
    before = {t["task_id"]: len(t["checkpoints"]) for t in all_tasks}
    selection = manifest["checkpoint_selection"]
    return {
        "all": k_figures(all_tasks),
        "select": k_figures(selected),
        "kept": selection["kept"], "total": selection["total"], "ratio": selection["ratio"],
        "tasks_with_fewer_checkpoints": sum(len(t["checkpoints"]) < before[t["task_id"]] for t in selected),
        "checkpoints_with_context": sum("context" in c for t in selected for c in t["checkpoints"]),
        "dropped_by_reason": drop_reasons(all_tasks),
        "config_hash": manifest["config_hash"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, Any] = {"selector": "rules", "rules_hash": load_pipeline().select_hash(), "corpora": {}}
    for name, (raw, kb) in CORPORA.items():
        if not raw.exists():
            print(f"{name}: {raw} is absent, skipped", file=sys.stderr)
            continue
        figures = measure(raw, kb, args.jobs)
        results["corpora"][name] = figures
        a, s = figures["all"], figures["select"]
        print(f"{name}: {a['tasks']} tasks; K all {a['k_total']} (mean {a['k_mean']}, median {a['k_median']}) -> "
              f"select {s['k_total']} (mean {s['k_mean']}, median {s['k_median']}); kept {figures['kept']} of "
              f"{figures['total']} ({figures['ratio']:.1%}); dropped: {figures['dropped_by_reason']}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
