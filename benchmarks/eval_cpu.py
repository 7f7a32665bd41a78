"""The harness's CPU per model call, in the regime users hit: chain-bound.

``eval_throughput.py`` runs 84 tau-bench tasks x 3 attempts at
``--concurrency 64``: 6,144 calls, load-bound (calls x delay / 64 = 19.2 s
> the longest chain, 12.2 s), so CPU per call hides behind the queue.  Here
the same workspace runs with ``--runs 1``: ~2,050 calls, the longest attempt
a chain of ~61 sequential calls, so the ideal is the chain (61 x 0.2 s =
12.2 s) and every millisecond the harness spends per call on the longest
chain's path lengthens the run (the issue's case: 127 short tasks, one
60-call chain, efficiency 0.46-0.50).

What a run does:

1. builds the workspace if missing (``cirrus ingest`` of the tau-bench airline
   transcripts; the same as ``eval_throughput.py``, another folder);
2. starts ``benchmarks/eval_server.py`` in its own process (its CPU is not
   counted), answering every call after ``--delay``;
3. ``--repeat`` times: runs the real CLI (``cirrus eval ... --runs 1 -q``) as a
   child process, judge cache deleted first, and takes its wall time and CPU
   (user + system, ``os.wait4``); CPU per call is that over the server's
   request count; "net" subtracts the CPU of importing what eval imports;
4. once more under ``cProfile`` (inflates the CPU; kept apart) and writes its
   top 20 by cumulative and by own time to ``--profile-out``;
5. ``--transport-calls N``: a micro-benchmark of the HTTP client layer alone
   (no cirrus above it) against the same server: N calls sequentially and N
   at 64 in flight, CPU per call of this process for (a) ``AsyncOpenAI.post``
   with ``cast_to=ChatCompletion`` as ``ChatClient._post`` does it, (b) the
   same with ``cast_to=httpx.Response`` and ``json.loads`` (no pydantic
   model), (c) a plain ``httpx.AsyncClient`` + ``json.loads``, (d) aiohttp
   when importable (it is not in uv.lock: skipped otherwise).

    .venv/bin/python benchmarks/eval_cpu.py --repeat 3 --transport-calls 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_throughput as tp  # noqa: E402  (start_server, ensure_workspace, attempt_chains, ...)

REPO = tp.REPO


def eval_command(args: argparse.Namespace, base_url: str, run_id: str, profile: Path | None) -> list[str]:
    eval_args = ["eval", "--model", tp.MODELS["model"], "--base-url", base_url, "--api-key-env", tp.KEY_ENV,
                 "--judge-model", tp.MODELS["judge"], "--fluency-model", tp.MODELS["fluency"],
                 "--concurrency", str(args.concurrency), "--runs", str(args.runs), "--run-id", run_id,
                 "-w", str(args.workspace), "-q"]
    if args.limit:
        eval_args += ["--limit", str(args.limit)]
    if profile is not None:
        return [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "cirrus.cli", *eval_args]
    return [*tp.cirrus_command(), *eval_args]


def run_eval(args: argparse.Namespace, base_url: str, run_id: str, profile: Path | None = None) -> dict[str, Any]:
    shutil.rmtree(args.workspace / ".cirrus-cache", ignore_errors=True)
    shutil.rmtree(args.workspace / "reports" / run_id, ignore_errors=True)
    tp.server_call(base_url, "/reset", post=True)
    env = {**os.environ, tp.KEY_ENV: "sk-bench-not-a-secret"}
    env.pop("PYTHONPATH", None)
    load_before = tp.loadavg()
    started = time.perf_counter()
    started_mono = time.monotonic()  # system-wide: comparable with the server's times
    proc = subprocess.Popen(eval_command(args, base_url, run_id, profile), env=env, cwd=args.workspace,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    code, user, system, maxrss = tp.wait_cpu(proc)
    wall = time.perf_counter() - started
    ended_mono = time.monotonic()
    stderr = proc.stderr.read() if proc.stderr else ""  # type: ignore[union-attr]
    if code != 0:
        sys.exit(f"cirrus eval failed ({code}): {stderr[-2000:]}")
    stats = tp.server_call(base_url, "/stats")
    report = args.workspace / "reports" / run_id
    summary = json.loads((report / "summary.json").read_text())
    chains = tp.attempt_chains(report)
    longest = max(c["total"] for c in chains.values())
    calls = stats["requests"]
    ideal_chain = longest * args.delay
    ideal_load = calls * args.delay / args.concurrency
    ideal = max(ideal_chain, ideal_load)
    cpu = user + system
    return {
        "profile": profile is not None, "attempts": summary["attempts"], "errors": summary["errors"],
        "calls": calls, "calls_by_model": stats["by_model"], "longest_chain": longest,
        "ideal_s": round(ideal, 3), "ideal_bound": "chain" if ideal_chain >= ideal_load else "load",
        "ideal_load_s": round(ideal_load, 3), "wall_s": round(wall, 3),
        "session_wall_s": summary["wall_s_this_session"], "efficiency": round(ideal / wall, 4),
        "efficiency_session": round(ideal / summary["wall_s_this_session"], 4),
        "cpu_user_s": round(user, 3), "cpu_sys_s": round(system, 3), "cpu_s": round(cpu, 3),
        "cpu_ms_per_call": round(1000 * cpu / calls, 3),
        "cpu_ms_per_call_net": round(1000 * (cpu - args.startup_cpu) / calls, 3),
        "max_rss_mib": round(maxrss / 1024, 1), "server_cpu_s": stats["server_cpu_s"],
        "first_request_s": round(stats["first"] - started_mono, 3) if stats["first"] is not None else None,
        "after_last_answer_s": round(ended_mono - stats["last"] - args.delay, 3) if stats["last"] is not None else None,
        "loadavg_before": load_before, "loadavg_after": tp.loadavg(),
    }


def profile_text(path: Path, n: int) -> str:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.sort_stats("cumulative").print_stats(n)
    stats.sort_stats("tottime").print_stats(n)
    return out.getvalue().replace(str(REPO) + "/", "").replace(str(Path(sys.executable).parents[1]) + "/", "")


# ---------------------------------------------------------------------------------------------------------------------
# the HTTP client layer alone

def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _body(i: int) -> bytes:
    # a judge-sized request (the server answers bench-judge with a small JSON verdict)
    prompt = "<reference_reply>\nYour booking is confirmed.\n</reference_reply>\n<candidate_reply>\n" \
             + "Your booking is confirmed. " * 20 + f"[r{i}]\n</candidate_reply>"
    return json.dumps({"model": "bench-judge", "temperature": 0, "messages": [
        {"role": "system", "content": "You judge replies. " * 30}, {"role": "user", "content": prompt}]},
        separators=(",", ":")).encode()


async def _measure(send, n: int, concurrency: int) -> dict[str, float]:
    bodies = [_body(i) for i in range(n)]
    for body in bodies[:20]:  # warm: connections open, lazy imports done
        await send(body)
    gate = asyncio.Semaphore(concurrency)

    async def one(body: bytes) -> None:
        async with gate:
            answer = await send(body)
            assert answer["choices"][0]["message"]["content"] is not None

    cpu0, wall0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies))
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    return {"calls": n, "concurrency": concurrency, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "cpu_ms_per_call": round(1000 * cpu / n, 3)}


async def _transports(base_url: str, n: int) -> list[dict[str, Any]]:
    import httpx
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

    rows = []

    async def sdk_model(client: AsyncOpenAI):
        async def send(body: bytes) -> Any:
            completion = await client.post("/chat/completions", cast_to=ChatCompletion, content=body)
            return {"choices": [{"message": {"content": completion.choices[0].message.content}}]}
        return send

    async def sdk_raw(client: AsyncOpenAI):
        async def send(body: bytes) -> Any:
            response = await client.post("/chat/completions", cast_to=httpx.Response, content=body)
            return json.loads(response.content)
        return send

    from openai import DefaultAioHttpClient

    variants: list[tuple[str, Any, Any]] = [
        ("openai SDK, cast_to=ChatCompletion", sdk_model, None),
        ("openai SDK, cast_to=httpx.Response + json.loads", sdk_raw, None),
        ("openai SDK over aiohttp (DefaultAioHttpClient), raw response + json.loads", sdk_raw, DefaultAioHttpClient),
    ]
    for name, make, http_client in variants:
        client = AsyncOpenAI(base_url=base_url, api_key="sk-bench-not-a-secret", timeout=60, max_retries=0,
                             **({"http_client": http_client(timeout=60)} if http_client else {}))
        try:
            send = await make(client)
            for conc in (1, 64):
                rows.append({"transport": name, **await _measure(send, n if conc > 1 else max(25, n // 40), conc)})
        finally:
            await client.close()

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as plain:
        async def send_httpx(body: bytes) -> Any:
            response = await plain.post("/chat/completions", content=body, headers={
                "Authorization": "Bearer sk-bench-not-a-secret", "Content-Type": "application/json"})
            return json.loads(response.content)
        for conc in (1, 64):
            rows.append({"transport": "httpx.AsyncClient + json.loads", **await _measure(
                send_httpx, n if conc > 1 else max(25, n // 40), conc)})
    try:
        import aiohttp
    except ImportError:
        rows.append({"transport": "aiohttp", "skipped": "not importable (not in uv.lock)"})
    else:
        async with aiohttp.ClientSession() as session:
            async def send_aiohttp(body: bytes) -> Any:
                async with session.post(base_url + "/chat/completions", data=body, headers={
                        "Authorization": "Bearer sk-bench-not-a-secret",
                        "Content-Type": "application/json"}) as response:
                    return json.loads(await response.read())
            for conc in (1, 64):
                rows.append({"transport": "aiohttp + json.loads", **await _measure(
                    send_aiohttp, n if conc > 1 else max(25, n // 40), conc)})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/cirrus-evalcpu/ws"))
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--runs", type=int, default=1, help="attempts per task (1: chain-bound)")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-out", type=Path, default=REPO / "benchmarks" / "results" / "eval_cpu_profile.txt")
    parser.add_argument("--transport-calls", type=int, default=0, help="N for the HTTP-layer micro-benchmark")
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results" / "eval_cpu.json")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)

    args.workspace = args.workspace.resolve()
    tp.ensure_workspace(args.workspace)
    args.startup_cpu = tp.startup_cpu()
    server, base_url = tp.start_server(args.workspace, args.delay)
    runs, transports, profile_row = [], [], None
    try:
        for i in range(args.repeat):
            row = run_eval(args, base_url, "cpu-bench")
            runs.append(row)
            print(json.dumps(row), flush=True)
        if not args.no_profile:
            out = Path("/tmp") / "eval-cpu.prof"
            profile_row = run_eval(args, base_url, "cpu-bench-profile", out)
            args.profile_out.write_text(
                f"cProfile of: {' '.join(eval_command(args, 'URL', 'cpu-bench-profile', out)[3:])}\n"
                f"run under cProfile (CPU inflated): {json.dumps(profile_row)}\n\n" + profile_text(out, 20),
                encoding="utf-8")
            print(f"wrote {args.profile_out}", flush=True)
        if args.transport_calls:
            transports = asyncio.run(_transports(base_url, args.transport_calls))
            for row in transports:
                print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)

    import openai

    med = lambda key: sorted(r[key] for r in runs)[len(runs) // 2] if runs else None  # noqa: E731
    results = {
        "what": "cirrus eval, chain-bound: tau-bench airline tasks x --runs against a local server (separate "
                "process) answering every call after a fixed delay; CPU of the eval process per model call",
        "command": " ".join([".venv/bin/python", "benchmarks/eval_cpu.py", *(argv or sys.argv[1:])]),
        "workspace": str(args.workspace), "delay_s": args.delay, "concurrency": args.concurrency,
        "runs_per_task": args.runs, "startup_cpu_s": round(args.startup_cpu, 3),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "openai": openai.__version__},
        "note": args.note,
        "median": {k: med(k) for k in ("wall_s", "session_wall_s", "efficiency", "cpu_s", "cpu_ms_per_call",
                                       "cpu_ms_per_call_net")} if runs else {},
        "runs": runs, "profile_run": profile_row, "transports": transports,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("\n| run | calls | longest chain | ideal (s) | bound | wall (s) | efficiency | session (s) | CPU (s) | "
          "CPU ms/call | net ms/call |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for i, r in enumerate(runs):
        print(f"| {i + 1} | {r['calls']} | {r['longest_chain']} | {r['ideal_s']} | {r['ideal_bound']} | {r['wall_s']} | "
              f"{r['efficiency']} | {r['session_wall_s']} | {r['cpu_s']} | {r['cpu_ms_per_call']} | "
              f"{r['cpu_ms_per_call_net']} |")
    if transports:
        print("\n| transport | concurrency | calls | wall (s) | CPU (s) | CPU ms/call |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in transports:
            if "skipped" in r:
                print(f"| {r['transport']} | - | - | - | - | skipped: {r['skipped']} |")
            else:
                print(f"| {r['transport']} | {r['concurrency']} | {r['calls']} | {r['wall_s']} | {r['cpu_s']} | "
                      f"{r['cpu_ms_per_call']} |")
    print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
