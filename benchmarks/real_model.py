"""A real model, end to end: ingest -> eval -> report with one small
instruction-tuned model served on this machine as the agent, the coverage
judge and the fluency checker, on a few English and Chinese sample tasks.

The model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) behind llama.cpp's
OpenAI-compatible ``llama-server``, both built by ``../shared/tools/local-llm.sh``
into ``~/.cache/cirrus-local-llm`` (see the README, "A real model on this
machine").  Nothing is downloaded here.

For each language the sample tickets are copied into a fresh workspace under
``--work``, ingested with ``cirrus ingest`` and evaluated twice on the first
``--en-tasks`` / ``--zh-tasks`` tasks, concurrency 1:

* ``off``: the agent as ``cirrus eval`` runs it by default (tool calls written
  as text are judged as text and noted);
* ``on``: ``OpenAIAgent(text_tool_calls=True)``, the opt-in reading of tool
  calls written as text.

The eval runs in this process through the same functions ``cirrus eval``
calls (settings from the workspace's ``cirrus.toml``, ``build_roles``, the
endpoint check, ``run_eval``), so every HTTP request can be timed: each
role's client has its ``_post`` wrapped.  Then ``cirrus report`` compares the
two runs, ``cirrus rescore --judge-model local --fluency-model local``
re-judges each run offline, and every verdict the real judge and fluency
checker gave is asked again of the offline heuristics on the same turn.

Figures go to ``--out`` (default ``benchmarks/results/real_model.json``):
calls per role, latency per call (mean, p50, max), output tokens per second
of call time (and llama.cpp's own prompt and generation speeds), the agent's
tool calls (proper, read from text, written as text and not read, arguments
not JSON, unknown tools, answered from the cassette or not), agent notes,
refusals, judge answers (strict JSON, read leniently, unreadable), scores,
error reasons, and the agreement of the real judge with the offline one.

    ../shared/tools/local-llm.sh 0.5b
    ~/.cache/cirrus-local-llm/llama-server -m ~/.cache/cirrus-local-llm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        --host 127.0.0.1 --port 8091 -t 1 -c 16384 -np 1 --jinja --alias local-model > /tmp/llama-server.log 2>&1 &
    .venv/bin/python benchmarks/real_model.py --base-url http://127.0.0.1:8091/v1

or let the script start and stop the server: ``--server ~/.cache/cirrus-local-llm/llama-server --gguf
~/.cache/cirrus-local-llm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cirrus.agents.openai_agent import OpenAIAgent  # noqa: E402
from cirrus.evaluate.preflight import check_endpoints  # noqa: E402
from cirrus.evaluate.roles import RoleOptions, build_roles  # noqa: E402
from cirrus.evaluate.runner import EvalSettings, run_eval  # noqa: E402
from cirrus.evaluate.tasks import TaskIndex  # noqa: E402
from cirrus.evaluate.walk import ask_coverage  # noqa: E402
from cirrus.judges import verdicts  # noqa: E402
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker  # noqa: E402
from cirrus.llm.client import UnparseableOutput  # noqa: E402
from cirrus.settings import load_settings  # noqa: E402

CIRRUS = str(Path(sys.executable).with_name("cirrus"))
# Sample tasks of both languages: the first three of each sample begin with a tool call (what the model does
# with tools); the others begin with a checkpoint that needs none, so that a turn can be accepted and the
# fluency checker is asked too
DEFAULT_TASKS = ("NC-2024-0311", "NC-2024-0358", "NC-2024-0402", "NC-2025-0008", "NC-2025-0023", "NC-2025-0024",
                 "ZC-2025-0014", "ZC-2025-0015", "ZC-2025-0016", "ZC-2025-0003", "ZC-2025-0006", "ZC-2025-0011")
MODES = ("off", "on")
# "I'm sorry, but I can't assist with that" and its kin, in English and Chinese
REFUSAL = re.compile(r"(?:I'?m|I am) sorry,? but I (?:can(?:no|')t|am unable)|I can(?:no|')t (?:assist|help) with"
                     r"|抱歉.{0,12}(?:无法|不能)(?:协助|帮助|提供|处理)|我无法(?:协助|帮助)", re.IGNORECASE)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="http://127.0.0.1:8091/v1")
    parser.add_argument("--model", default="local-model", help="the model name the server answers to (--alias)")
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                        help="task ids to run (comma list, both languages); '' for the first --en-tasks / --zh-tasks")
    parser.add_argument("--en-tasks", type=int, default=3, help="with --tasks '': the first N English tasks")
    parser.add_argument("--zh-tasks", type=int, default=2, help="with --tasks '': the first N Chinese tasks")
    parser.add_argument("--en-raw", type=Path, default=ROOT / "tickets/raw")
    parser.add_argument("--en-kb", type=Path, default=ROOT / "tickets/kb")
    parser.add_argument("--zh-raw", type=Path, default=ROOT / "samples/zh/tickets/raw")
    parser.add_argument("--zh-kb", type=Path, default=ROOT / "samples/zh/tickets/kb")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cirrus-real-model"),
                        help="workspaces are made here, afresh (outside the repository)")
    parser.add_argument("--modes", default="off,on", help="off (the default agent), on (text_tool_calls=True)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request try, every role")
    parser.add_argument("--max-tokens", type=int, default=1024, help="the agent's output limit per call")
    parser.add_argument("--judge-max-tokens", type=int, default=512,
                        help="the judge's and fluency checker's output limit per call")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/real_model.json")
    parser.add_argument("--server", type=Path, help="start this llama-server (and stop it at the end)")
    parser.add_argument("--gguf", type=Path, help="the model file for --server")
    parser.add_argument("--threads", type=int, default=1, help="llama-server -t, with --server")
    parser.add_argument("--ctx", type=int, default=16384, help="llama-server -c, with --server")
    args = parser.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    if not set(args.modes) <= set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")
    if args.server is not None and args.gguf is None:
        parser.error("--server needs --gguf")
    return args


# -- the server ------------------------------------------------------------------------------


def server_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def start_server(args: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    port = re.search(r":(\d+)", args.base_url.split("//", 1)[-1])
    command = [str(args.server), "-m", str(args.gguf), "--host", "127.0.0.1", "--port", port.group(1) if port else "8091",
               "-t", str(args.threads), "-c", str(args.ctx), "-np", "1", "--jinja", "--alias", args.model]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(240):
        if server_ready(args.base_url):
            return process
        if process.poll() is not None:
            raise SystemExit(f"llama-server exited with {process.returncode}; see {log}")
        time.sleep(0.5)
    process.terminate()
    raise SystemExit(f"llama-server did not answer within 120 s; see {log}")


def server_version(args: argparse.Namespace) -> str | None:
    binary = args.server or Path.home() / ".cache/cirrus-local-llm/llama-server"
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return " ".join((done.stdout + done.stderr).split())[:200] or None


# -- workspaces ------------------------------------------------------------------------------


def cirrus(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CIRRUS, *words], capture_output=True, text=True)


def settings_text(args: argparse.Namespace) -> str:
    """cirrus.toml of a workspace: the CPU model needs long timeouts (a first
    token can take minutes), few retries (a retry repeats minutes of work),
    greedy decoding (the same reply in both modes) and an output limit."""
    limits = {"agent": args.max_tokens, "judge": args.judge_max_tokens, "fluency": args.judge_max_tokens}
    return "".join(f"[roles.{role}]\ntemperature = 0.0\ntimeout = {args.timeout:g}\nmax_retries = 1\n"
                   f"max_tokens = {limit}\n\n" for role, limit in limits.items())


def prepare(lang: str, raw: Path, kb: Path, args: argparse.Namespace) -> Path:
    """A fresh workspace of ``lang``'s sample under ``--work``, ingested."""
    workspace = args.work / lang
    if workspace.exists():
        shutil.rmtree(workspace)
    (workspace / "tickets").mkdir(parents=True)
    shutil.copytree(raw, workspace / "tickets/raw")
    shutil.copytree(kb, workspace / "tickets/kb")
    done = cirrus("ingest", str(workspace / "tickets/raw"), "--kb", str(workspace / "tickets/kb"), "-w", str(workspace))
    if done.returncode != 0:
        raise SystemExit(f"cirrus ingest failed for {lang}:\n{done.stdout}\n{done.stderr}")
    (workspace / "cirrus.toml").write_text(settings_text(args), encoding="utf-8")
    if args.tasks:  # keep only the chosen tasks (this workspace is a copy)
        chosen = set(args.tasks.split(","))
        path = workspace / "tickets/tasks.jsonl"
        kept = [line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["task_id"] in chosen]
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return workspace


# -- the eval, instrumented ------------------------------------------------------------------


def _extra(obj: Any, name: str) -> Any:
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def instrument(client: Any, calls: list[dict[str, Any]], tag: dict[str, str]) -> None:
    """Time every HTTP request of ``client`` and keep what came back."""
    original = client._post

    async def post(payload: bytes) -> Any:
        started = time.perf_counter()
        record: dict[str, Any] = {**tag, "role": client.role.name,
                                  "structured": b'"response_format"' in payload}
        try:
            completion = await original(payload)
        except BaseException as exc:
            calls.append({**record, "latency_s": time.perf_counter() - started, "error": f"{type(exc).__name__}"})
            raise
        record["latency_s"] = time.perf_counter() - started
        usage = getattr(completion, "usage", None)
        record["prompt_tokens"] = getattr(usage, "prompt_tokens", None)
        record["completion_tokens"] = getattr(usage, "completion_tokens", None)
        choices = getattr(completion, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        record["content"] = getattr(message, "content", None)
        record["native_tool_calls"] = len(getattr(message, "tool_calls", None) or [])
        record["finish_reason"] = getattr(choices[0], "finish_reason", None) if choices else None
        timings = _extra(completion, "timings")
        if isinstance(timings, dict):
            record["server_prompt_tps"] = timings.get("prompt_per_second")
            record["server_generation_tps"] = timings.get("predicted_per_second")
        calls.append(record)
        return completion

    client._post = post


async def evaluate(workspace: Path, lang: str, mode: str, limit: int, args: argparse.Namespace,
                   calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One run, as ``cirrus eval --model M --base-url U --concurrency 1 --limit N`` does it."""
    settings = load_settings(workspace, None)

    def role(name: str) -> RoleOptions:
        return RoleOptions(args.model, args.base_url, None, settings.role(name).params())  # type: ignore[arg-type]

    index = TaskIndex.scan(workspace, limit)
    roles = build_roles(role("agent"), role("judge"), role("fluency"), index, workspace, concurrency=1)
    if mode == "on":  # what `cirrus eval --text-tool-calls` will build: the same agent, reading them
        assert isinstance(roles.agent, OpenAIAgent)
        roles.agent = copy.copy(roles.agent)
        roles.agent.text_tool_calls = True
        roles.fingerprint["agent_role"] = roles.agent.fingerprint()
    try:
        await check_endpoints(roles.clients)
        for client in roles.clients.values():
            instrument(client, calls, {"lang": lang, "mode": mode})
        run = EvalSettings(workspace=workspace, run_id=f"real-{mode}", runs=1, pass_k=1, concurrency=1,
                           progress=False, fingerprint_extra=roles.fingerprint, details_extra=roles.details,
                           client_models={name: c.model for name, c in roles.clients.items()})
        started = time.perf_counter()
        summary = await run_eval(run, roles.agent, roles.judge, roles.fluency, index)
        summary["bench_wall_s"] = round(time.perf_counter() - started, 1)
        return summary
    finally:
        await roles.aclose()


# -- reading a run ---------------------------------------------------------------------------


def transcripts(workspace: Path, run_id: str) -> list[dict[str, Any]]:
    path = workspace / "reports" / run_id / "transcripts.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def tasks_of(workspace: Path) -> dict[str, dict[str, Any]]:
    lines = (workspace / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return {task["task_id"]: task for task in map(json.loads, lines)}


def walk_turns(task: dict[str, Any], record: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each transcript turn with the history the agent saw, query included."""
    history = list(task.get("history", []))
    out = []
    for turn in record["turns"]:
        history = history + list(turn.get("context") or [])
        seen = history + [{"role": "user", "content": turn["query"]}]
        out.append((turn, seen))
        history = seen + list(turn.get("agent_messages") or [])
    return out


def judge_said(verdict: dict[str, Any]) -> bool | None:
    """The coverage judge's own verdict (RR), read again from its raw answer:
    a transcript's ``ok`` is the checkpoint's decision, which also needs the
    reference tool calls to have been made."""
    try:
        return verdicts.read_coverage(verdict["raw"])
    except UnparseableOutput:
        return None


async def offline_verdicts(workspace: Path, run_id: str) -> list[dict[str, Any]]:
    """Every verdict of the run's real judge and fluency checker, beside the
    offline heuristics' verdict on the same turn and question."""
    judge, fluency = LocalCoverageJudge(), LocalFluencyChecker()
    tasks = tasks_of(workspace)
    pairs = []
    for record in transcripts(workspace, run_id):
        task = tasks[record["task_id"]]
        checkpoints = task["checkpoints"]
        for turn, seen in walk_turns(task, record):
            answered = checkpoints[turn["checkpoint"] - 1]
            for verdict in turn.get("verdicts") or []:
                if verdict.get("raw") is None:
                    continue  # a checkpoint of tool calls only: no question was asked
                judged = checkpoints[verdict["checkpoint"] - 1]
                if verdict["kind"] == "coverage":
                    offline = await ask_coverage(judge, seen, answered, judged, turn["agent_text"])
                    ok = offline.ok if offline is not None else None
                    real = judge_said(verdict)
                else:
                    after = seen + list(turn.get("agent_messages") or []) + list(judged.get("context") or [])
                    ok = (await fluency.follows(after, judged["query"])).ok
                    real = verdict["ok"]
                pairs.append({"task_id": record["task_id"], "checkpoint": verdict["checkpoint"],
                              "kind": verdict["kind"], "real": real, "offline": ok,
                              "refusal": bool(REFUSAL.search(turn["agent_text"] or ""))})
    return pairs


def agreement(pairs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    chosen = [p for p in pairs if p["kind"] == kind and p["offline"] is not None and p["real"] is not None]
    table = Counter((p["real"], p["offline"]) for p in chosen)
    agree = table[(True, True)] + table[(False, False)]
    return {"verdicts": len(chosen), "agree": agree, "rate": round(agree / len(chosen), 3) if chosen else None,
            "both_yes": table[(True, True)], "both_no": table[(False, False)],
            "real_yes_offline_no": table[(True, False)], "real_no_offline_yes": table[(False, True)],
            "real_yes_on_a_refusal": sum(1 for p in chosen if p["real"] and p["refusal"]),
            "offline_yes_on_a_refusal": sum(1 for p in chosen if p["offline"] and p["refusal"])}


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "max": None}
    return {"mean": round(statistics.fmean(values), 2), "p50": round(statistics.median(values), 2),
            "max": round(max(values), 2)}


def role_figures(calls: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [c for c in calls if "error" not in c]
    out_tokens = sum(c["completion_tokens"] or 0 for c in answered)
    call_time = sum(c["latency_s"] for c in answered)
    server_generation = [c["server_generation_tps"] for c in answered if c.get("server_generation_tps")]
    server_prompt = [c["server_prompt_tps"] for c in answered if c.get("server_prompt_tps")]
    return {
        "calls": len(calls), "failed_calls": len(calls) - len(answered),
        "latency_s": spread([c["latency_s"] for c in answered]),
        "prompt_tokens": spread([float(c["prompt_tokens"]) for c in answered if c["prompt_tokens"] is not None]),
        "output_tokens": spread([float(c["completion_tokens"]) for c in answered if c["completion_tokens"] is not None]),
        "output_tokens_per_s_of_call_time": round(out_tokens / call_time, 2) if call_time else None,
        "server_generation_tps": spread(server_generation),
        "server_prompt_tps": spread(server_prompt),
        "cut_at_max_tokens": sum(1 for c in answered if c.get("finish_reason") == "length"),
    }


def judge_answers(calls: list[dict[str, Any]], role: str) -> dict[str, int]:
    """How the judge's (or fluency checker's) answers read: strict JSON with
    the verdict field, read by Cirrus's lenient reader, or unreadable (each
    unreadable answer is asked again with a repair message)."""
    read = verdicts.read_coverage if role == "judge" else verdicts.read_fluency
    field = "verdict" if role == "judge" else "answer"
    counts = Counter()
    for call in calls:
        content = call.get("content")
        if "error" in call or content is None:
            continue
        try:
            strict = json.loads(content)
        except ValueError:
            strict = None
        if isinstance(strict, dict) and isinstance(strict.get(field), str):
            counts["strict_json"] += 1
            continue
        try:
            read(content)
        except UnparseableOutput:
            counts["unreadable"] += 1
        else:
            counts["read_leniently"] += 1
    return {k: counts[k] for k in ("strict_json", "read_leniently", "unreadable")}


def agent_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    turns = [turn for record in records for turn in record["turns"]]
    calls = [call for turn in turns for call in turn.get("tool_calls") or []]
    notes = [note for turn in turns for note in turn.get("agent_notes") or []]
    written = [note for note in notes if note["kind"] == "tool_call_as_text"]
    texts = [turn.get("agent_text") or "" for turn in turns]
    return {
        "turns": len(turns),
        "tool_calls_proper": sum(1 for c in calls if not c.get("read_from_text")),
        "tool_calls_read_from_text": sum(1 for c in calls if c.get("read_from_text")),
        "read_from_text_forms": dict(Counter(c["read_from_text"] for c in calls if c.get("read_from_text"))),
        "tool_calls_written_as_text_not_read": sum(len(n.get("tools") or []) for n in written),
        "written_as_text_forms": dict(Counter(n.get("form") for n in written)),
        "arguments_not_json": sum(1 for n in notes if n["kind"] == "arguments_not_json"),
        "unknown_tool": sum(1 for n in notes if n["kind"] == "unknown_tool"),
        "answered_from_cassette": sum(1 for c in calls if c.get("recorded")),
        "no_recorded_result": sum(1 for c in calls if not c.get("recorded")),
        "notes": dict(Counter(n["kind"] for n in notes)),
        "refusals": sum(1 for text in texts if REFUSAL.search(text)),
        "empty_replies": sum(1 for text in texts if not text.strip()),
        "accepted_turns": sum(1 for turn in turns if turn.get("accepted")),
        "replies": [{"checkpoint": turn["checkpoint"], "accepted": turn.get("accepted"),
                     "text": (turn.get("agent_text") or "")[:160]} for turn in turns],
    }


def run_figures(workspace: Path, lang: str, mode: str, summary: dict[str, Any], calls: list[dict[str, Any]],
                pairs: list[dict[str, Any]], rescore: dict[str, Any] | None) -> dict[str, Any]:
    mine = [c for c in calls if c["lang"] == lang and c["mode"] == mode]
    records = transcripts(workspace, f"real-{mode}")
    return {
        "run_id": f"real-{mode}", "tasks": [r["task_id"] for r in records],
        "scores": {k: summary.get(k) for k in ("atpr", "sr", "n_tasks", "attempts", "errors")},
        "error_reasons": summary.get("error_reasons"),
        "agent_notes": summary.get("agent_notes"),
        "wall_s": summary.get("bench_wall_s"),
        "usage": summary.get("usage"),
        "roles": {role: role_figures([c for c in mine if c["role"] == role]) for role in ("agent", "judge", "fluency")},
        "agent": agent_figures(records),
        "judge_answers": judge_answers([c for c in mine if c["role"] == "judge"], "judge"),
        "fluency_answers": judge_answers([c for c in mine if c["role"] == "fluency"], "fluency"),
        "verdicts": {"coverage": sum(1 for p in pairs if p["kind"] == "coverage"),
                     "fluency": sum(1 for p in pairs if p["kind"] == "fluency")},
        "offline_agreement": {"coverage": agreement(pairs, "coverage"), "fluency": agreement(pairs, "fluency"),
                              "pairs": pairs},
        "rescore_local": rescore,
    }


def rescore_offline(workspace: Path, run_id: str) -> dict[str, Any] | None:
    done = cirrus("rescore", run_id, "--judge-model", "local", "--fluency-model", "local",
                  "--run-id", f"{run_id}-local", "-w", str(workspace), "-q")
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-400:]}
    summary = json.loads((workspace / "reports" / f"{run_id}-local" / "summary.json").read_text(encoding="utf-8"))
    keep = ("verdicts_compared", "verdict_agreement", "changed", "truncated")
    return {"atpr": summary.get("atpr"), **{k: (summary.get("rescore") or {}).get(k) for k in keep}}


def report(workspace: Path, run_ids: list[str]) -> dict[str, Any]:
    done = cirrus("report", *run_ids, "-w", str(workspace), "--bootstrap", "0")
    return {"exit_status": done.returncode, "tail": (done.stdout + done.stderr)[-600:]}


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    args = parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    server = start_server(args, args.work / "llama-server.log") if args.server else None
    if server is None and not server_ready(args.base_url):
        raise SystemExit(f"nothing answers at {args.base_url}: start llama-server first (README) or pass --server")
    calls: list[dict[str, Any]] = []
    results: dict[str, Any] = {"runs": {}}
    try:
        for lang, raw, kb, limit in (("en", args.en_raw, args.en_kb, args.en_tasks),
                                     ("zh", args.zh_raw, args.zh_kb, args.zh_tasks)):
            if limit < 1 and not args.tasks:
                continue
            workspace = prepare(lang, raw, kb, args)
            limit = len(tasks_of(workspace)) if args.tasks else limit
            if limit < 1:
                continue
            for mode in args.modes:
                print(f"[{lang}/{mode}] evaluating {limit} tasks ...", flush=True)
                summary = asyncio.run(evaluate(workspace, lang, mode, limit, args, calls))
                pairs = asyncio.run(offline_verdicts(workspace, f"real-{mode}"))
                figures = run_figures(workspace, lang, mode, summary, calls, pairs,
                                      rescore_offline(workspace, f"real-{mode}"))
                results["runs"][f"{lang}/{mode}"] = figures
                print(f"[{lang}/{mode}] done in {figures['wall_s']} s: atpr {figures['scores']['atpr']}, "
                      f"notes {figures['agent_notes']}", flush=True)
            results["runs"][f"{lang}/report"] = report(workspace, [f"real-{m}" for m in args.modes])
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    for mode in args.modes:
        mine = [c for c in calls if c["mode"] == mode]
        results[f"all/{mode}"] = {role: role_figures([c for c in mine if c["role"] == role])
                                  for role in ("agent", "judge", "fluency")}
    results["setup"] = {
        "model": args.model, "base_url": args.base_url, "server": server_version(args),
        "tasks": args.tasks or {"en": args.en_tasks, "zh": args.zh_tasks}, "modes": args.modes, "concurrency": 1,
        "timeout_s": args.timeout, "max_tokens": {"agent": args.max_tokens, "judge": args.judge_max_tokens},
        "temperature": 0.0,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "command": " ".join(["python", "benchmarks/real_model.py", *sys.argv[1:]]),
    }
    results["calls"] = [{k: v for k, v in c.items() if k != "content"} | {"content": (c.get("content") or "")[:300]}
                        for c in calls]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"figures: {args.out}")


if __name__ == "__main__":
    main()
