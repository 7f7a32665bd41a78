#!/usr/bin/env python
"""Ingest at growing corpus sizes: time should grow linearly with the number
of tickets and peak memory should not grow at all (ingestion streams).

The corpus is the replicated tau-bench corpus of ``make_corpus.py`` (fresh
ticket ids, perturbed personal data); a corpus of N tickets is the first N
lines of the largest one, so every size is a prefix of the same data.  Each
size is one run of the real CLI (``cirrus ingest CORPUS -w WS --jobs J -q``)
in its own process, measured by ``ingest_throughput.measure`` (wall time, CPU
time of the process tree, peak RSS and PSS summed over the tree).

Writes ``results/ingest_scale.json`` after every size (a long run that is
stopped keeps what it measured; ``--merge`` keeps the earlier figures of the
sizes not measured now, to finish or redo part of a run) and
``results/ingest_scale.svg``: time against corpus size with its least-squares
line, and peak memory against corpus size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from ingest_throughput import loadavg, machine, measure

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "ingest_scale.json"
PLOT = HERE / "results" / "ingest_scale.svg"
WORKDIR = Path("/tmp/cirrus-bench")
SIZES = (1000, 2500, 5000, 10000, 20000)


def build_corpus(workdir: Path, largest: int, seed: int) -> Path:
    """A corpus of at least ``largest`` tickets: one already built (a corpus
    is a prefix of any larger one of the same seed), or built now with
    ``make_corpus.py``."""
    import make_corpus

    built = sorted((int(p.stem.split("-")[1]), p) for p in workdir.glob("corpus-*.jsonl")
                   if p.stem.split("-")[1].isdigit() and _seed_of(p) == seed)
    for size, path in built:
        if size >= largest:
            return path
    corpus = workdir / f"corpus-{largest}.jsonl"
    if not corpus.exists():
        make_corpus.main(["--tickets", str(largest), "--seed", str(seed), "--out", str(corpus)])
    return corpus


def _seed_of(corpus: Path) -> int | None:
    sidecar = corpus.with_name(corpus.name + ".pii.json")
    try:
        with sidecar.open(encoding="utf-8") as handle:
            head = handle.read(2000)  # the meta block comes first
        return int(re.search(r'"seed": (\d+)', head).group(1))  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return None


def prefix(corpus: Path, n: int) -> Path:
    """The first ``n`` tickets of ``corpus`` as their own file (streamed)."""
    out = corpus.with_name(f"scale-{n}.jsonl")
    if out.exists():
        return out
    written = 0
    with corpus.open("rb") as source, out.open("wb") as sink:
        for line in source:
            if written == n:
                break
            sink.write(line)
            written += 1
    if written < n:
        out.unlink()
        sys.exit(f"{corpus} has only {written} tickets; rebuild it with more")
    return out


def fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Least-squares line y = a + b*x and its R^2."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx else 0.0
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return {"intercept": round(intercept, 3), "slope": round(slope, 6),
            "r2": round(1 - ss_res / ss_tot, 5) if ss_tot else 1.0}


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted(runs, key=lambda r: r["tickets"])
    xs = [r["tickets"] for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label, marker in (("wall_s", "wall time", "o"), ("cpu_s", "CPU time (all processes)", "s")):
        ys = [r[key] for r in runs]
        line = fit(xs, ys)
        left.plot(xs, ys, marker, label=f"{label}: {line['slope'] * 1000:.0f} ms/ticket, R² {line['r2']:.4f}")
        left.plot([0, max(xs)], [line["intercept"], line["intercept"] + line["slope"] * max(xs)], "--", color="grey",
                  linewidth=0.8)
    left.set_xlabel("tickets")
    left.set_ylabel("seconds")
    left.set_title("cirrus ingest: time against corpus size")
    left.legend(fontsize=8)
    left.set_xlim(left=0)
    left.set_ylim(bottom=0)
    for key, label, marker in (("peak_pss_sum_mib", "peak PSS, all processes", "o"),
                               ("max_rss_single_mib", "largest single-process RSS", "s")):
        right.plot(xs, [r[key] for r in runs], marker + "-", label=label)
    right.set_xlabel("tickets")
    right.set_ylabel("MiB")
    right.set_title("peak memory against corpus size")
    right.legend(fontsize=8)
    right.set_xlim(left=0)
    right.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    xs = [r["tickets"] for r in runs]
    pss = [r["peak_pss_sum_mib"] for r in runs]
    return {
        "wall_fit": fit(xs, [r["wall_s"] for r in runs]),
        "cpu_fit": fit(xs, [r["cpu_s"] for r in runs]),
        "peak_pss_mib_min": min(pss),
        "peak_pss_mib_max": max(pss),
        "peak_pss_max_over_min": round(max(pss) / min(pss), 3),
        "tickets_max_over_min": round(max(xs) / min(xs), 1),
    }


def markdown(result: dict[str, Any]) -> str:
    rows = ["| tickets | corpus MB | wall (s) | tickets/s | CPU (s) | CPU ms/ticket | peak PSS sum (MiB) | "
            "largest RSS (MiB) | tasks | 1-min load before/after |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in sorted(result["runs"], key=lambda r: r["tickets"]):
        rows.append(f"| {r['tickets']:,} | {r['corpus_mb']:.1f} | {r['wall_s']:.1f} | {r['tickets_per_s']:.1f} | "
                    f"{r['cpu_s']:.1f} | {r['cpu_ms_per_ticket']:.1f} | {r['peak_pss_sum_mib']:.0f} | "
                    f"{r['max_rss_single_mib']:.0f} | {r['tasks']:,} | {r['loadavg_before'][0]} / {r['loadavg_after'][0]} |")
    if len(result["runs"]) >= 2:
        s = summary(result["runs"])
        rows.append("")
        rows.append(f"wall = {s['wall_fit']['intercept']:.1f} s + {s['wall_fit']['slope'] * 1000:.1f} ms x tickets "
                    f"(R² {s['wall_fit']['r2']}); CPU = {s['cpu_fit']['intercept']:.1f} s + "
                    f"{s['cpu_fit']['slope'] * 1000:.1f} ms x tickets (R² {s['cpu_fit']['r2']}); peak PSS "
                    f"{s['peak_pss_mib_min']:.0f}-{s['peak_pss_mib_max']:.0f} MiB over a {s['tickets_max_over_min']}x "
                    f"range of corpus sizes")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="corpus sizes (tickets)")
    parser.add_argument("--jobs", type=int, default=2, help="cirrus ingest --jobs (default 2)")
    parser.add_argument("--seed", type=int, default=20240515, help="corpus seed (make_corpus.py)")
    parser.add_argument("--workdir", type=Path, default=WORKDIR, help="corpora and workspaces (outside the repo)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--merge", action="store_true",
                        help="keep the figures already in --results for sizes not in --sizes")
    parser.add_argument("--keep", action="store_true", help="keep each workspace (default: delete after measuring)")
    args = parser.parse_args(argv)

    corpus = build_corpus(args.workdir, max(args.sizes), args.seed)
    prior = json.loads(args.results.read_text()) if args.merge and args.results.exists() else {}
    runs = [r for r in prior.get("runs", []) if r.get("jobs") == args.jobs and r.get("seed") == args.seed
            and r["tickets"] not in args.sizes]
    result = {"benchmark": "ingest_scale", "started_at": prior.get("started_at") or
              dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "corpus_source": str(corpus), "runs": runs}
    cirrus = str(Path(sys.executable).with_name("cirrus"))
    for n in sorted(set(args.sizes)):
        source = prefix(corpus, n)
        workspace = args.workdir / f"ws-scale-{n}"
        shutil.rmtree(workspace, ignore_errors=True)
        before = loadavg()
        figures = measure([cirrus, "ingest", str(source), "--workspace", str(workspace), "--jobs", str(args.jobs), "-q"],
                          args.workdir / f"scale-{n}.log")
        manifest = json.loads((workspace / "tickets" / "manifest.json").read_text())
        runs.append({
            "tickets": n, "jobs": args.jobs, "seed": args.seed, **figures,
            "corpus_mb": round(source.stat().st_size / 1e6, 1),
            "tickets_per_s": round(n / figures["wall_s"], 2),
            "cpu_ms_per_ticket": round(1000 * figures["cpu_s"] / n, 2),
            "tasks": manifest["counts"]["tasks"], "quarantined": manifest["counts"]["quarantined"],
            "loadavg_before": before, "loadavg_after": loadavg(),
            "run_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        })
        if len(runs) >= 2:
            result["summary"] = summary(runs)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(result, indent=1) + "\n")
        if not args.keep:
            shutil.rmtree(workspace, ignore_errors=True)
        print(markdown(result), file=sys.stderr, flush=True)
    if len(runs) >= 2:
        plot(runs, args.plot)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
