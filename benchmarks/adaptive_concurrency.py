"""Adaptive concurrency: ``cirrus eval --concurrency 64`` against a local
endpoint that serves at most N = 8 requests at once and answers 429
(``Retry-After: 0``) beyond (``tests/limited_server.py``, in its own process,
answering after ``--delay``).

Three client set-ups, each a real ``cirrus eval`` child process on a fresh
synthetic workspace (``--tasks`` tasks of 3 checkpoints, local judges, so
every model call is an agent call):

* ``adaptive``: what cirrus does (the window starts at the ceiling and
  follows the 429s, docs/concurrency.md);
* ``fixed-N``: the window capped at the true N by ``cirrus.toml``
  (``[roles.agent] concurrency = N``): the best a client that knew N could do;
* ``no-window``: the pool's adaptation switched off (``ClientPool(adaptive=
  False)``, patched in the child): the old behaviour, each request retried
  on its own after a 429.

For each: answers served, 429s, errors (attempts that failed), the server's
time-averaged requests in service, its peak, and wall time.  Writes
``benchmarks/results/adaptive_concurrency.json``.

    .venv/bin/python benchmarks/adaptive_concurrency.py [--limit 8] [--concurrency 64] [--delay 0.05 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.limited_server import LimitedServerProcess  # noqa: E402
from tests.scripted_models import make_task, write_workspace  # noqa: E402

KEY_ENV = "CIRRUS_BENCH_KEY"
NO_WINDOW = (
    "import sys\n"
    "import cirrus.llm.client.pool as pool\n"
    "pool.ClientPool.__init__.__kwdefaults__['adaptive'] = False\n"
    "from cirrus.cli import app\n"
    "sys.argv[0] = 'cirrus'\n"
    "app()\n"
)
MODES = ("adaptive", "fixed-N", "no-window")


def run_mode(mode: str, delay: float, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    workspace = write_workspace(root / f"{mode}-{delay:g}", [make_task(f"T-{i:04d}", False) for i in range(args.tasks)])
    if mode == "fixed-N":
        (workspace / "cirrus.toml").write_text(f"[roles.agent]\nconcurrency = {args.limit}\n", encoding="utf-8")
    with LimitedServerProcess(args.limit, delay=delay) as server:
        cli = [sys.executable, "-c", NO_WINDOW] if mode == "no-window" else [sys.executable, "-m", "cirrus.cli"]
        command = [*cli, "eval", "--model", "limited", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
                   "--judge-model", "local", "--fluency-model", "local", "--concurrency", str(args.concurrency),
                   "--run-id", mode, "-w", str(workspace), "-q"]
        started = time.perf_counter()
        done = subprocess.run(command, env={**os.environ, KEY_ENV: "sk-bench-0123456789abcdef"},
                              capture_output=True, text=True, cwd=REPO)
        wall = time.perf_counter() - started
        stats = server.stats()
    summary_file = workspace / "reports" / mode / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    calls = stats["served"] + stats["rejected"]
    return {
        "mode": mode, "delay_s": delay, "exit_code": done.returncode, "attempts": summary.get("attempts"),
        "errors": summary.get("errors"), "requests": calls, "served": stats["served"], "rejected_429": stats["rejected"],
        "share_429": round(stats["rejected"] / calls, 3) if calls else None,
        "mean_in_flight": round(stats["mean_in_flight"], 2), "peak_in_flight": stats["peak"],
        "wall_s": round(wall, 2),
        "ideal_wall_s": round(args.tasks * 3 * delay / args.limit, 2),  # every answer with N always busy
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=8, help="requests the server serves at once (N)")
    parser.add_argument("--concurrency", type=int, default=64, help="cirrus eval --concurrency")
    parser.add_argument("--delay", type=float, nargs="+", default=[0.05, 0.2], help="seconds per answer")
    parser.add_argument("--tasks", type=int, default=200, help="synthetic tasks (3 agent calls each)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results" / "adaptive_concurrency.json")
    parser.add_argument("--note", default="", help="free text kept in the results")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="cirrus-adaptive-"))
    rows = []
    try:
        for delay in args.delay:
            for mode in args.modes:
                row = run_mode(mode, delay, args, root)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = {
        "benchmark": "adaptive_concurrency", "limit": args.limit, "concurrency": args.concurrency,
        "delays_s": args.delay, "tasks": args.tasks, "agent_calls": args.tasks * 3,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "note": args.note, "rows": rows,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\n| delay s | mode | errors | requests | 429s | 429 share | mean in flight (N={args.limit}) | peak | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['delay_s']:g} | {row['mode']} | {row['errors']} | {row['requests']} | {row['rejected_429']} | {row['share_429']} | "
              f"{row['mean_in_flight']} | {row['peak_in_flight']} | {row['wall_s']} |")
    print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
