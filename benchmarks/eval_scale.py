#!/usr/bin/env python
"""Evaluation at scale: attempts per minute at concurrency 64, 256 and 1,024,
memory per in-flight attempt, and one run over 5,000 tasks -- one ``cirrus
eval`` process against the delayed local server (``eval_server.py``).

The workspace is ``cirrus ingest`` of the first ``--tasks`` tickets of the
replicated tau-bench corpus (``make_corpus.py``: fresh ids, perturbed
personal data; every ticket resolved, so every ticket is a task).  Each
measurement is ``eval_throughput.run_once``: the real CLI in its own process,
the judge cache and the run folder deleted first, wall and CPU time from
``os.wait4``, the server's own request count and its largest number of
requests in flight.

* **sweep**: the first ``--sweep-tasks`` tasks, one attempt each, at every
  ``--concurrency``.  attempts/min = attempts / the harness's session wall
  time.  Memory per in-flight attempt = the slope of the eval process's peak
  RSS against the concurrency (same tasks, so everything else is equal).
* **full**: all tasks, one attempt each, at ``--full-concurrency``.

Writes ``results/eval_scale.json`` and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import eval_throughput as bench
from ingest_scale import WORKDIR, build_corpus, fit, prefix

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "eval_scale.json"


def ensure_workspace(workspace: Path, tasks: int, seed: int) -> None:
    if (workspace / "tickets" / "tasks.jsonl").exists():
        return
    corpus = prefix(build_corpus(WORKDIR, tasks, seed), tasks)
    subprocess.run([*bench.cirrus_command(), "ingest", str(corpus), "-w", str(workspace), "--jobs", "2", "-q"],
                   check=True)


def measured(args: argparse.Namespace, base_url: str, concurrency: int, limit: int | None) -> dict[str, Any]:
    args.limit = limit
    row = bench.run_once(args, base_url, concurrency)
    minutes = row["session_wall_s"] / 60
    row.update({
        "tasks": limit, "attempts_per_min": round(row["attempts"] / minutes, 1),
        "calls_per_min": round(row["calls"] / minutes), "calls_per_attempt": round(row["calls"] / row["attempts"], 2),
    })
    print(json.dumps({k: row[k] for k in ("concurrency", "tasks", "attempts", "errors", "calls", "wall_s",
                                          "session_wall_s", "attempts_per_min", "calls_per_min", "max_rss_mib",
                                          "cpu_ms_per_call", "server_max_in_flight")}), file=sys.stderr, flush=True)
    return row


def markdown(result: dict[str, Any]) -> str:
    head = ("| tasks | concurrency | attempts | errors | model calls | session wall (s) | attempts/min | calls/min | "
            "ideal (s) | efficiency | harness CPU ms/call | peak RSS (MiB) | max requests in flight | load before/after |")
    rows = [head, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in [*result["sweep"], *([result["full"]] if result.get("full") else [])]:
        rows.append(f"| {r['tasks']:,} | {r['concurrency']:,} | {r['attempts']:,} | {r['errors']} | {r['calls']:,} | "
                    f"{r['session_wall_s']:.1f} | {r['attempts_per_min']:,.0f} | {r['calls_per_min']:,} | "
                    f"{r['ideal_s']:.1f} | {r['efficiency_session']:.2f} | {r['cpu_ms_per_call']:.2f} | "
                    f"{r['max_rss_mib']:.0f} | {r['server_max_in_flight']} | "
                    f"{r['loadavg_before'][0]} / {r['loadavg_after'][0]} |")
    memory = result.get("memory_per_in_flight_attempt")
    if memory:
        rows += ["", f"peak RSS = {memory['intercept']:.0f} MiB + {memory['slope'] * 1024:.0f} KiB x concurrency "
                     f"(R² {memory['r2']})"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5000, help="tasks in the workspace and the full run")
    parser.add_argument("--sweep-tasks", type=int, default=2000, help="tasks of each concurrency sweep run")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[64, 256, 1024],
                        help="concurrencies of the sweep (none: no sweep)")
    parser.add_argument("--full-concurrency", type=int, default=256, help="concurrency of the full run (0: skip it)")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds before the server answers a call")
    parser.add_argument("--seed", type=int, default=20240515)
    parser.add_argument("--workspace", type=Path, default=None, help="default /tmp/cirrus-evalbench/ws-<tasks>")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--merge", action="store_true",
                        help="keep the earlier sweep runs (and full run) of --results that are not measured again")
    args = parser.parse_args(argv)
    args.workspace = (args.workspace or Path(f"/tmp/cirrus-evalbench/ws-{args.tasks}")).resolve()
    args.runs = 1
    ensure_workspace(args.workspace, args.tasks, args.seed)
    args.startup_cpu = bench.startup_cpu()
    result: dict[str, Any] = {
        "benchmark": "eval_scale", "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "benchmarks/eval_scale.py", *(argv or sys.argv[1:])]),
        "workspace": str(args.workspace), "delay_s": args.delay, "startup_cpu_s": round(args.startup_cpu, 3),
        "sweep": [], "full": None,
    }
    if args.merge and args.results.exists():
        prior = json.loads(args.results.read_text(encoding="utf-8"))
        result["sweep"] = [r for r in prior.get("sweep", []) if r["concurrency"] not in args.concurrency]
        result["full"] = None if args.full_concurrency else prior.get("full")
        result["earlier_commands"] = [*prior.get("earlier_commands", []), prior.get("command")]
    server, base_url = bench.start_server(args.workspace, args.delay)
    try:
        for concurrency in args.concurrency:
            result["sweep"].append(measured(args, base_url, concurrency, args.sweep_tasks))
            result["sweep"].sort(key=lambda r: r["concurrency"])
            if len(result["sweep"]) >= 2:
                result["memory_per_in_flight_attempt"] = fit([r["concurrency"] for r in result["sweep"]],
                                                             [r["max_rss_mib"] for r in result["sweep"]])
            _save(args.results, result)
        if args.full_concurrency:
            result["full"] = measured(args, base_url, args.full_concurrency, args.tasks)
            _save(args.results, result)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(markdown(result))
    return 0


def _save(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
