"""De-identification time against ticket length (one customer message of N
characters with a name, an e-mail and a phone every ~500 words).

Long texts are read in overlapping windows (cirrus/ingest/deid/deidentify.py,
``windows``): Presidio's context step costs spans x tokens per text, so a
single huge text used to grow with the square of its length (300k characters
took 90 s, 990k did not finish in 900 s).  The windows go through spaCy in
groups of at most ``GROUP_CHARS`` characters (``piece_groups``), so the
parsed documents held for the second look no longer grow with the text.

Each size runs in a fresh process: ``peak_mb`` is its peak RSS, ``growth_mb``
that less the RSS after loading the models and a warm-up ticket.

    .venv/bin/python benchmarks/deid_long_text.py [--sizes 100000 200000 400000 1000000]
        [--group-chars 0 1000000000]   # cirrus's groups, and one group as before

Writes benchmarks/results/deid_long_text.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from cirrus.config import load_pipeline
from cirrus.ingest.deid import deidentify
from cirrus.ingest.deid.deidentify import Deidentifier
from cirrus.schema import Event, SourceRef, Ticket

WORDS = ("the instance is running slowly since yesterday please check disk usage and memory of the server "
         "call me at").split()


def message(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    out, length, i = [], 0, 0
    while length < size:
        word = rng.choice(WORDS)
        if i % 500 == 0:
            word = f"Laura Chen laura.chen{i}@example.com +1 415 555 {1000 + i % 9000:04d}"
        out.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(out)[:size]


def measure(size: int, group_chars: int | None = None) -> dict:
    """De-identify one ticket of ``size`` characters in this process
    (``group_chars``: another ``GROUP_CHARS``, e.g. 10**9 for one group, as
    before groups existed)."""
    if group_chars:
        deidentify.GROUP_CHARS = group_chars
    deid = Deidentifier(load_pipeline().deid)
    deid.deidentify(Ticket("warm-up", [Event("customer", message(5_000)), Event("agent", "ok")], SourceRef("x")))
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    ticket = Ticket("T", [Event("customer", message(size)), Event("agent", "ok")], SourceRef("x", line=1))
    started = time.perf_counter()
    _, counts = deid.deidentify(ticket)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return {"chars": size, "seconds": round(seconds, 2), "seconds_per_100k": round(seconds * 1e5 / size, 2),
            "chars_per_s": round(size / seconds), "peak_mb": peak, "growth_mb": peak - loaded,
            "replacements": sum(counts.values())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000, 400_000, 1_000_000])
    parser.add_argument("--group-chars", type=int, nargs="+", default=[0],
                        help="GROUP_CHARS values to compare (0: cirrus's own; 1000000000: one group, as before)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: measure this size, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.group_chars[0])), flush=True)
        return
    rows = []
    for group_chars in args.group_chars:
        for size in args.sizes:
            child = subprocess.run([sys.executable, __file__, "--one", str(size), "--group-chars", str(group_chars)],
                                   capture_output=True, text=True, check=True)
            row = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append({"group_chars": group_chars or deidentify.GROUP_CHARS, **row})
            print(rows[-1], flush=True)
    out = Path(__file__).parent / "results" / "deid_long_text.json"
    out.write_text(json.dumps({"machine": f"{platform.machine()}, {platform.python_version()}", "rows": rows},
                              indent=2) + "\n")


if __name__ == "__main__":
    main()
