"""Ingest throughput on Chinese tickets, next to the same number of English
ones built the same way.

    .venv/bin/python benchmarks/ingest_chinese.py [--tickets 400] [--jobs 2]

Each ticket is a realistic exchange around one labelled sentence with
personal data (Chinese: ``tests/data/pii_zh.json``; English: the sentences of
``../shared/data/presidio-synth``), with filler turns and a tool call and
result that carry a name; tickets are replicated with their own ids until
there are ``--tickets`` of them.  Each corpus is ingested by the real CLI
(``cirrus ingest RAW -w WS --jobs J -q``) in its own process; wall time
includes start-up and model loading.  Writes
``benchmarks/results/ingest_chinese.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZH_SET = ROOT / "tests" / "data" / "pii_zh.json"
EN_SET = ROOT.parent / "shared" / "data" / "presidio-synth" / "synth_dataset_v2.json"
OUT = ROOT / "benchmarks" / "results" / "ingest_chinese.json"

TURNS = {
    "zh": ("在吗", "您好，很高兴为您服务", "好的，请稍等，正在为您查询", "已为您处理完毕，请您再试一下。", "谢谢", "不客气，祝您生活愉快！"),
    "en": ("Hi there", "Hello, thank you for contacting support!", "One moment please while I check.",
           "Done: I have updated it, please try again.", "Thanks!", "You're welcome, have a nice day!"),
}


def tickets(examples: list[dict], language: str, count: int) -> list[dict]:
    greet, hello, hold, solution, thanks, bye = TURNS[language]
    with_pii = [e for e in examples if e["spans"]]
    out = []
    for n in range(count):
        example = with_pii[n % len(with_pii)]
        names = [s["entity_value"] for s in example["spans"] if s["entity_type"] == "PERSON"] or ["-"]
        events = [{"role": "customer", "text": greet}, {"role": "agent", "text": hello},
                  {"role": "customer", "text": example["full_text"]}, {"role": "agent", "text": hold},
                  {"role": "tool_call", "call_id": "c1", "name": "lookup_member", "arguments": {"name": names[0]}},
                  {"role": "tool_result", "call_id": "c1", "content": {"member": names[0], "level": "gold"}},
                  {"role": "agent", "text": solution}, {"role": "customer", "text": thanks},
                  {"role": "agent", "text": bye}]
        out.append({"ticket_id": f"{language.upper()}-{n:05d}", "status": "resolved", "events": events})
    return out


def ingest(raw_tickets: list[dict], jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        raw, workspace = Path(tmp) / "raw", Path(tmp) / "ws"
        raw.mkdir()
        (raw / "tickets.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in raw_tickets),
                                           encoding="utf-8")
        started = time.perf_counter()
        subprocess.run([str(ROOT / ".venv" / "bin" / "cirrus"), "ingest", str(raw), "-w", str(workspace),
                        "--jobs", str(jobs), "-q"], check=True, capture_output=True)
        wall = time.perf_counter() - started
        tasks = (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").count("\n")
    return {"tickets": len(raw_tickets), "tasks": tasks, "wall_s": round(wall, 1),
            "tickets_per_s": round(len(raw_tickets) / wall, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    result = {"command": f"python benchmarks/ingest_chinese.py --tickets {args.tickets} --jobs {args.jobs}",
              "machine": f"{platform.machine()}, Python {platform.python_version()}"}
    zh = json.loads(ZH_SET.read_text(encoding="utf-8"))
    result["zh"] = ingest(tickets(zh, "zh", args.tickets), args.jobs)
    if EN_SET.exists():
        en = json.loads(EN_SET.read_text(encoding="utf-8"))
        result["en"] = ingest(tickets(en, "en", args.tickets), args.jobs)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
