"""De-identification time against ticket length (one customer message of N
characters with a name, an e-mail and a phone every ~500 words).

Long texts are read in overlapping windows (cirrus/ingest/deid/deidentify.py,
``windows``): Presidio's context step costs spans x tokens per text, so a
single huge text used to grow with the square of its length (300k characters
took 90 s, 990k did not finish in 900 s).

    .venv/bin/python benchmarks/deid_long_text.py [--sizes 100000 250000 500000 1000000]

Writes benchmarks/results/deid_long_text.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

from cirrus.config import load_pipeline
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 250_000, 500_000, 1_000_000])
    args = parser.parse_args()
    deid = Deidentifier(load_pipeline().deid)
    deid.deidentify(Ticket("warm-up", [Event("customer", message(5_000)), Event("agent", "ok")], SourceRef("x")))
    rows = []
    for size in args.sizes:
        ticket = Ticket("T", [Event("customer", message(size)), Event("agent", "ok")], SourceRef("x", line=1))
        started = time.perf_counter()
        _, counts = deid.deidentify(ticket)
        seconds = time.perf_counter() - started
        rows.append({"chars": size, "seconds": round(seconds, 2), "seconds_per_100k": round(seconds * 1e5 / size, 2),
                     "replacements": sum(counts.values())})
        print(rows[-1], flush=True)
    out = Path(__file__).parent / "results" / "deid_long_text.json"
    out.write_text(json.dumps({"machine": f"{platform.machine()}, {platform.python_version()}", "rows": rows},
                              indent=2) + "\n")


if __name__ == "__main__":
    main()
