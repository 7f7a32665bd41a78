"""Evaluation throughput: ``cirrus eval`` against a local server that answers
every model call after a fixed delay, on the tau-bench airline tasks.

The project issue's target: with ``--concurrency 64`` and 200 ms per model
call, wall time within 1.25x of the ideal, the ideal being the longest chain
of sequential calls of any single attempt x delay, or total calls x delay /
64, whichever is larger.  Also measured: the harness's own CPU time per model
call.

What a run does:

1. builds the workspace if it is missing (``cirrus ingest`` of the tau-bench
   airline transcripts: 84 tasks, 517 checkpoints);
2. starts ``benchmarks/eval_server.py`` in its own process (rule-based agent,
   judge and fluency checker, answers after ``--delay``);
3. for each ``--concurrency``: deletes the workspace's judge cache
   (``.cirrus-cache``) and the run's report folder, zeroes the server's
   counters, runs the real CLI (``cirrus eval ... --runs R -q``) as a child
   process and takes its wall time and its CPU time (user + system, from
   ``os.wait4``), and the server's request count;
4. computes from the run's ``transcripts.jsonl`` every attempt's model calls
   (agent calls, judge calls, fluency calls: all sequential within an
   attempt) and checks their sum against the server's count;
5. optionally profiles one concurrency with py-spy (``--profile-py-spy``,
   sampling, little overhead) or cProfile (``--profile-cprofile``, exact
   call counts, inflates CPU time) and keeps the top entries;
6. writes ``results/eval_throughput.json`` and prints a Markdown table.

Efficiency = ideal / wall.  "wall" is the whole command, from process start to
exit (imports, loading tasks, writing the parquet files included); "session"
is the harness's own ``wall_s_this_session`` (the walks only).

    .venv/bin/python benchmarks/eval_throughput.py --concurrency 64 16 256 --runs 3
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
TAU_BENCH = REPO.parent / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"
KEY_ENV = "CIRRUS_BENCH_KEY"
# --transport: the HTTP transport cirrus runs on (CIRRUS_HTTP_TRANSPORT, docs/concurrency.md): aiohttp (the
# default since issue 28) or the SDK's httpx one, for comparison
MODELS = {"model": "bench-agent", "judge": "bench-judge", "fluency": "bench-fluency"}


def cirrus_command() -> list[str]:
    exe = VENV_BIN / "cirrus"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cirrus.cli"]


def ensure_workspace(workspace: Path) -> None:
    if (workspace / "tickets" / "tasks.jsonl").exists():
        return
    if not TAU_BENCH.exists():
        sys.exit(f"{TAU_BENCH} is missing (../shared/data beside the repo)")
    subprocess.run([*cirrus_command(), "ingest", str(TAU_BENCH), "-w", str(workspace), "-q"], check=True)


def start_server(workspace: Path, delay: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "eval_server.py"), "--tasks",
         str(workspace / "tickets" / "tasks.jsonl"), "--delay", str(delay)],
        stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline().strip()  # type: ignore[union-attr]
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"the benchmark server did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def server_call(base_url: str, path: str, post: bool = False) -> dict[str, Any]:
    request = urllib.request.Request(base_url + path, data=b"{}" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_cpu(proc: subprocess.Popen) -> tuple[int, float, float, int]:
    """Wait for ``proc``: its status, user and system CPU seconds, max RSS (KiB)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime, usage.ru_stime, usage.ru_maxrss


def startup_cpu() -> float:
    """CPU seconds of importing what ``cirrus eval`` imports (subtracted for the net per-call figure)."""
    code = ("import cirrus.cli, cirrus.evaluate.runner, cirrus.evaluate.roles, cirrus.llm.client, "
            "cirrus.agents.openai_agent, cirrus.judges.llm, cirrus.replay, polars, openai, tqdm")
    samples = []
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", code])
        _, user, system, _ = wait_cpu(proc)
        samples.append(user + system)
    return min(samples)


def attempt_chains(report: Path) -> dict[tuple[str, int], dict[str, int]]:
    """Model calls of every attempt, from ``transcripts.jsonl``: agent calls
    (assistant messages of each turn), judge and fluency calls (verdicts with
    a raw answer).  Within one attempt all of them are sequential."""
    chains = {}
    for line in (report / "transcripts.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        calls = Counter()
        for turn in record["turns"]:
            calls["agent"] += sum(1 for m in turn["agent_messages"] if m.get("role") == "assistant")
            for verdict in turn["verdicts"]:
                if verdict.get("raw") is not None:
                    calls["judge" if verdict["kind"] == "coverage" else "fluency"] += 1
        calls["total"] = calls["agent"] + calls["judge"] + calls["fluency"]
        chains[(record["task_id"], record["attempt"])] = dict(calls)
    return chains


def longest_first_workspace(workspace: Path) -> Path:
    """A copy of ``workspace`` whose ``tasks.jsonl`` lists the tasks with the
    most checkpoints first (stable), cassettes shared by a symlink.  cirrus
    starts (task, attempt) pairs in file order, so this shows what starting the
    longest walks first would give (see the README)."""
    target = workspace.parent / f"{workspace.name}-longest-first"
    tasks = [json.loads(line) for line in (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    tasks.sort(key=lambda task: -len(task["checkpoints"]))
    (target / "tickets").mkdir(parents=True, exist_ok=True)
    (target / "tickets" / "tasks.jsonl").write_text(
        "".join(json.dumps(task, ensure_ascii=False) + "\n" for task in tasks), encoding="utf-8")
    mocks = target / "tool_mocks"
    if not mocks.exists():
        mocks.symlink_to((workspace / "tool_mocks").resolve(), target_is_directory=True)
    return target


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def list_schedule(chains: list[int], concurrency: int, delay: float) -> float:
    """Wall time of starting attempts in the given order on ``concurrency``
    slots, each taking (its calls x ``delay``) with no other cost: what
    cirrus's semaphore does, with a harness of zero overhead."""
    slots = [0.0] * max(1, concurrency)
    end = 0.0
    for calls in chains:
        start = heapq.heappop(slots)
        finish = start + calls * delay
        end = max(end, finish)
        heapq.heappush(slots, finish)
    return end


def best_packing(chains: list[int], concurrency: int, delay: float) -> float:
    """Wall time of the best packing of the attempts onto ``concurrency``
    slots that first-fit decreasing finds (MULTIFIT: the smallest slot length
    into which it fits them all), knowing each attempt's number of calls in
    advance, which no scheduler has: the agent decides its tool calls.  The
    reference for the load-bound regime under ``--concurrency`` as the
    contract defines it (attempts in flight, not calls)."""
    ordered = sorted(chains, reverse=True)

    def slots_needed(length: int) -> int:
        slots: list[int] = []
        for calls in ordered:
            for i, used in enumerate(slots):
                if used + calls <= length:
                    slots[i] += calls
                    break
            else:
                slots.append(calls)
        return len(slots)

    low, high = max(ordered[0], -(-sum(ordered) // max(1, concurrency))), sum(ordered)
    while low < high:
        middle = (low + high) // 2
        if slots_needed(middle) <= concurrency:
            high = middle
        else:
            low = middle + 1
    return low * delay


def run_once(args: argparse.Namespace, base_url: str, concurrency: int, profile: str | None = None,
             profile_out: Path | None = None, order: str = "file", transport: str = "aiohttp") -> dict[str, Any]:
    workspace: Path = args.workspace if order == "file" else longest_first_workspace(args.workspace)
    run_id = (f"bench-c{concurrency}" + (f"-{order}" if order != "file" else "")
              + (f"-{transport}" if transport != "aiohttp" else "") + (f"-{profile}" if profile else ""))
    shutil.rmtree(workspace / ".cirrus-cache", ignore_errors=True)  # every judge call must reach the server
    shutil.rmtree(workspace / "reports" / run_id, ignore_errors=True)
    eval_args = ["eval", "--model", MODELS["model"], "--base-url", base_url, "--api-key-env", KEY_ENV,
                 "--judge-model", MODELS["judge"], "--fluency-model", MODELS["fluency"],
                 "--concurrency", str(concurrency), "--runs", str(args.runs), "--run-id", run_id,
                 "-w", str(workspace), "-q"]
    if args.limit:
        eval_args += ["--limit", str(args.limit)]
    if profile == "cprofile":
        command = [sys.executable, "-m", "cProfile", "-o", str(profile_out), "-m", "cirrus.cli", *eval_args]
    elif profile == "py-spy":
        command = [args.py_spy, "record", "--format", "raw", "--rate", "200", "-o", str(profile_out), "--",
                   sys.executable, "-m", "cirrus.cli", *eval_args]
    else:
        command = [*cirrus_command(), *eval_args]
    server_call(base_url, "/reset", post=True)
    load_before = loadavg()
    env = {**os.environ, KEY_ENV: "sk-bench-not-a-secret"}
    env.pop("PYTHONPATH", None)
    env["CIRRUS_HTTP_TRANSPORT"] = transport
    started = time.perf_counter()
    started_mono = time.monotonic()  # CLOCK_MONOTONIC is system-wide: comparable with the server's times
    # run from the workspace: no cirrus.toml of the current directory changes the roles
    proc = subprocess.Popen(command, env=env, cwd=workspace, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    code, user, system, maxrss = wait_cpu(proc)
    wall = time.perf_counter() - started
    ended_mono = time.monotonic()
    stderr = proc.stderr.read() if proc.stderr else ""  # type: ignore[union-attr]
    if code != 0:
        sys.exit(f"cirrus eval failed ({code}): {stderr[-2000:]}")
    stats = server_call(base_url, "/stats")
    report = workspace / "reports" / run_id
    summary = json.loads((report / "summary.json").read_text())
    chains = attempt_chains(report)
    longest_key = max(chains, key=lambda k: chains[k]["total"])
    longest = chains[longest_key]["total"]
    calls = stats["requests"]
    delay = args.delay
    ideal_chain = longest * delay
    ideal_load = calls * delay / concurrency
    ideal = max(ideal_chain, ideal_load)
    file_order = [json.loads(line)["task_id"] for line in
                  (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit:
        file_order = file_order[:args.limit]
    in_order = [chains[(task_id, a)]["total"] for task_id in file_order for a in range(args.runs)]
    by_length = sorted(in_order, reverse=True)
    session = summary["wall_s_this_session"]
    cpu = user + system
    # the harness's own latency on each attempt's chain: attempt wall time minus its calls x delay, per call
    rows = [json.loads(line) for line in (report / "attempts.jsonl").read_text(encoding="utf-8").splitlines()]
    overhead = [1000 * (row["wall_s"] - chains[(row["task_id"], row["attempt"])]["total"] * delay)
                / chains[(row["task_id"], row["attempt"])]["total"] for row in rows if row["status"] == "ok"]
    return {
        "concurrency": concurrency, "profile": profile, "run_id": run_id,
        "attempts": summary["attempts"], "errors": summary["errors"], "atpr": summary["atpr"],
        "calls": calls, "calls_by_model": stats["by_model"], "calls_from_transcripts": sum(c["total"] for c in chains.values()),
        "longest_chain": longest, "longest_chain_attempt": list(longest_key),
        "mean_chain": round(sum(c["total"] for c in chains.values()) / len(chains), 2),
        "ideal_s": round(ideal, 3), "ideal_bound": "chain" if ideal_chain >= ideal_load else "load",
        "ideal_chain_s": round(ideal_chain, 3), "ideal_load_s": round(ideal_load, 3),
        "wall_s": round(wall, 3), "session_wall_s": session,
        # the same attempts on `concurrency` slots with zero harness overhead: in this run's order (cirrus starts
        # pairs in file order), and longest chain first
        "zero_overhead_schedule_s": round(list_schedule(in_order, concurrency, delay), 3),
        "zero_overhead_longest_first_s": round(list_schedule(by_length, concurrency, delay), 3),
        "best_packing_with_foresight_s": round(best_packing(in_order, concurrency, delay), 3),
        "server_span_s": round(stats["last"] - stats["first"] + delay, 3) if stats["first"] is not None else None,
        "efficiency": round(ideal / wall, 4), "efficiency_session": round(ideal / session, 4),
        "ratio_wall_to_ideal": round(wall / ideal, 4), "order": order, "transport": transport,
        "startup_s": round(stats["first"] - started_mono, 3) if stats["first"] is not None else None,
        "after_last_answer_s": round(ended_mono - stats["last"] - delay, 3) if stats["last"] is not None else None,
        "latency_overhead_ms_per_call": {"median": round(percentile(overhead, 0.5), 2),
                                         "p90": round(percentile(overhead, 0.9), 2),
                                         "max": round(max(overhead), 2)},
        "cpu_user_s": round(user, 3), "cpu_sys_s": round(system, 3), "cpu_s": round(cpu, 3),
        "cpu_ms_per_call": round(1000 * cpu / calls, 3),
        "cpu_ms_per_call_net": round(1000 * (cpu - args.startup_cpu) / calls, 3),
        "cpu_share_of_one_core": round(cpu / wall, 3),
        "max_rss_mib": round(maxrss / 1024, 1),
        "server_cpu_s": stats["server_cpu_s"], "server_cpu_ms_per_call": round(1000 * stats["server_cpu_s"] / calls, 3),
        "server_max_in_flight": stats["max_in_flight"], "request_mib": round(stats["bytes_in"] / 2**20, 1),
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


def top_cprofile(path: Path, n: int) -> dict[str, list[dict[str, Any]]]:
    import pstats

    stats = pstats.Stats(str(path))
    rows = []
    for (filename, line, name), (cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        short = filename.split("site-packages/")[-1].replace(str(REPO) + "/", "")
        rows.append({"function": f"{short}:{line}({name})", "calls": nc, "tottime_s": round(tt, 3),
                     "cumtime_s": round(ct, 3)})
    return {"by_tottime": sorted(rows, key=lambda r: -r["tottime_s"])[:n],
            "by_cumtime": sorted(rows, key=lambda r: -r["cumtime_s"])[:n]}


# Where the harness's CPU goes, by what the sampled stack is doing: the first category whose pattern occurs
# in any frame of the stack wins, so order matters (more specific first).
CATEGORIES = [
    ("startup: imports", ["<frozen importlib"]),
    ("finalize: parquet + transcripts rewrite", ["RunStore.finalize"]),
    ("httpcore2 pool bookkeeping (assigning requests, idle-connection checks, closing)",
     ["_assign_requests_to_connections", "_close_connections", "PoolByteStream.aclose", "AsyncShieldCancellation"]),
    ("HTTP/1.1 exchange: h11, anyio stream, socket send/recv (loopback TCP in the kernel)",
     ["httpcore2/", "h11/", "anyio/"]),
    ("openai: build request (FinalRequestOptions, headers, URL, idempotency key)",
     ["_build_request", "FinalRequestOptions.construct", "_prepare_options", "_prepare_request", "model_copy",
      "_idempotency_key"]),
    ("openai: response into ChatCompletion (construct_type)",
     ["_process_response", "construct_type", "BaseModel.construct", "validate_type"]),
    ("httpx2 client (send, redirects/auth wrappers, response read)", ["httpx2/"]),
    ("openai: other", ["openai/"]),
    ("cirrus: ChatResult.from_completion", ["ChatResult.from_completion"]),
    ("cirrus: judge cache (canonical JSON, SHA-256, SQLite)", ["canonical_json", "ResponseCache", "cache_key"]),
    ("cirrus: request body JSON encoding", ["_dumps", "JSONEncoder"]),
    ("cirrus: judge/fluency prompt rendering", ["render_history", "user_message", "_shorten"]),
    ("cirrus: verdict parsing", ["parse_coverage", "parse_yes_no"]),
    ("cirrus: run store append (JSON + fsync)", ["RunStore.append"]),
    ("cirrus: cassette load + replay (vcrpy, YAML)", ["ToolReplayer", "yaml/", "vcr/"]),
    ("tenacity + rate limiter", ["tenacity/", "RateLimiter"]),
    ("cirrus: walk, agent loop, rows", ["cirrus/"]),
    ("asyncio event loop", ["asyncio/", "selectors.py"]),
]


def py_spy_categories(path: Path) -> dict[str, Any]:
    """Shares of the main thread's samples by category (idle thread-pool workers left out)."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if any("concurrent/futures/thread.py" in f or f.startswith("Thread._bootstrap") for f in frames):
            continue
        weight = int(count)
        total += weight
        for name, patterns in CATEGORIES:
            if any(p in f for f in frames for p in patterns):
                counts[name] += weight
                break
        else:
            counts["other (CLI, interpreter)"] += weight
    return {"main_thread_samples": total,
            "categories": [{"category": k, "share": round(v / total, 4)} for k, v in counts.most_common()]}


def top_py_spy(path: Path, n: int) -> dict[str, Any]:
    """Self and inclusive sample shares per function, from py-spy's raw (collapsed stack) output."""
    self_counts: Counter[str] = Counter()
    incl_counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        weight = int(count)
        total += weight
        frames = [f.split("site-packages/")[-1].replace(str(REPO) + "/", "") for f in stack.split(";")]
        self_counts[frames[-1]] += weight
        for frame in set(frames):
            incl_counts[frame] += weight
    share = lambda c: round(c / total, 4) if total else 0.0  # noqa: E731
    return {"samples": total,
            "self": [{"frame": f, "share": share(c)} for f, c in self_counts.most_common(n)],
            "inclusive": [{"frame": f, "share": share(c)} for f, c in incl_counts.most_common(n)]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/cirrus-evalbench/ws"))
    parser.add_argument("--concurrency", type=int, nargs="*", default=[64, 16, 256],
                        help="concurrencies to measure (none: only the --profile-* runs)")
    parser.add_argument("--order", nargs="+", default=["file"], choices=["file", "longest-first"],
                        help="task order: the workspace's, or a copy listing the longest tasks first")
    parser.add_argument("--transport", nargs="+", default=["aiohttp"], choices=["aiohttp", "httpx"],
                        help="the HTTP transport (CIRRUS_HTTP_TRANSPORT): aiohttp, the default, or the SDK's httpx")
    parser.add_argument("--runs", type=int, default=3, help="attempts per task (84 tasks x runs)")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=1, help="runs per concurrency (each is kept)")
    parser.add_argument("--profile-py-spy", type=int, default=None, metavar="C",
                        help="also run concurrency C under py-spy (needs --py-spy)")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--profile-cprofile", type=int, default=None, metavar="C",
                        help="also run concurrency C under cProfile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results" / "eval_throughput.json")
    parser.add_argument("--note", default="", help="free text kept in the results")
    args = parser.parse_args(argv)

    args.workspace = args.workspace.resolve()
    ensure_workspace(args.workspace)
    args.startup_cpu = startup_cpu()
    server, base_url = start_server(args.workspace, args.delay)
    runs: list[dict[str, Any]] = []
    profiles: dict[str, Any] = {}
    try:
        # repeats outermost: a change in the machine's load then falls on every configuration alike
        plan = [(order, transport, c) for _ in range(args.repeat) for c in args.concurrency for order in args.order
                for transport in args.transport]
        for order, transport, concurrency in plan:
            row = run_once(args, base_url, concurrency, order=order, transport=transport)
            runs.append(row)
            print(json.dumps(row), flush=True)
        if args.profile_py_spy:
            out = Path("/tmp") / f"eval-c{args.profile_py_spy}.pyspy.txt"
            row = run_once(args, base_url, args.profile_py_spy, "py-spy", out)
            profiles["py-spy"] = {"run": row, **py_spy_categories(out), **top_py_spy(out, args.top)}
            print(json.dumps(profiles["py-spy"]["categories"], indent=1), flush=True)
            print(json.dumps(row), flush=True)
        if args.profile_cprofile:
            out = Path("/tmp") / f"eval-c{args.profile_cprofile}.prof"
            row = run_once(args, base_url, args.profile_cprofile, "cprofile", out)
            profiles["cprofile"] = {"run": row, **top_cprofile(out, args.top)}
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)

    import openai

    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["order"], r["transport"], r["concurrency"]), []).append(r)
    medians = []
    for (order, transport, concurrency), rows in groups.items():
        med = lambda key: sorted(r[key] for r in rows)[len(rows) // 2]  # noqa: E731  (the median of odd counts)
        medians.append({"order": order, "transport": transport, "concurrency": concurrency, "n": len(rows),
                        "efficiency": med("efficiency"), "efficiency_range": [min(r["efficiency"] for r in rows),
                                                                              max(r["efficiency"] for r in rows)],
                        "wall_s": med("wall_s"), "session_wall_s": med("session_wall_s"),
                        "efficiency_session": med("efficiency_session"), "ideal_s": rows[0]["ideal_s"],
                        "cpu_ms_per_call": med("cpu_ms_per_call"), "cpu_ms_per_call_net": med("cpu_ms_per_call_net"),
                        "server_cpu_ms_per_call": med("server_cpu_ms_per_call")})
    results = {
        "what": "cirrus eval against a local rule-based server (separate process) answering every call after a "
                "fixed delay; tau-bench airline tasks",
        "command": " ".join([".venv/bin/python", "benchmarks/eval_throughput.py", *(argv or sys.argv[1:])]),
        "workspace": str(args.workspace), "delay_s": args.delay, "runs_per_task": args.runs, "limit": args.limit,
        "startup_cpu_s": round(args.startup_cpu, 3),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "openai": openai.__version__},
        "note": args.note, "medians": medians, "runs": runs, "profiles": profiles,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("\n| order | transport | concurrency | calls | longest chain | ideal (s) | bound | wall (s) | efficiency | session (s) | "
          "CPU (s) | CPU ms/call | net ms/call | server CPU ms/call |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        print(f"| {r['order']} | {r['transport']} | {r['concurrency']} | {r['calls']} | {r['longest_chain']} | {r['ideal_s']} | {r['ideal_bound']} | "
              f"{r['wall_s']} | {r['efficiency']} | {r['session_wall_s']} | {r['cpu_s']} | {r['cpu_ms_per_call']} | "
              f"{r['cpu_ms_per_call_net']} | {r['server_cpu_ms_per_call']} |")
    print("\nmedians:\n\n| order | transport | concurrency | n | ideal (s) | wall (s) | efficiency (range) | "
          "session (s) | CPU ms/call | net ms/call |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for m in medians:
        low, high = m["efficiency_range"]
        print(f"| {m['order']} | {m['transport']} | {m['concurrency']} | {m['n']} | {m['ideal_s']} | {m['wall_s']} | "
              f"{m['efficiency']} ({low}-{high}) | {m['session_wall_s']} | {m['cpu_ms_per_call']} | "
              f"{m['cpu_ms_per_call_net']} |")
    print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
