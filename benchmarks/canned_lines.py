"""How many canned agent lines survive denoising, and how many informative
lines it drops (issue 25, item 1; docs/canned-lines.md).

    .venv/bin/python benchmarks/canned_lines.py [--tickets 400]

Two corpora, both read from disk or generated here, nothing downloaded:

* **synthetic** (``benchmarks/canned_corpus.py``): ``--tickets`` English and
  ``--tickets`` Chinese chats per split, every agent segment labelled canned
  or informative by construction.  ``tune`` is the macro inventory the
  thresholds were chosen on; ``heldout`` has other shops and other wordings
  and was run once, after the thresholds were fixed.
* **tau-bench** (``../shared/data/tau-bench-airline``, skipped when absent):
  200 real transcripts of an LLM airline agent; the sentences in at least 8
  transcripts are hand-labelled in ``benchmarks/data/canned_lines_tau_labels.json``.

Each corpus is denoised twice with the default pipeline: with the
hand-written rules alone (what ingest did before) and with the corpus pass
(:func:`cirrus.ingest.canned.find_canned_lines` on the corpus, then the
denoiser that cuts its procedural lines).  Reported: canned lines that
survive, informative lines dropped, customer messages with content dropped,
and the first pass's speed.  Writes ``benchmarks/results/canned_lines.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from canned_corpus import CANNED, INFO, LabelledTicket, corpus  # noqa: E402

from cirrus.config import PipelineConfig, load_pipeline  # noqa: E402
from cirrus.ingest.canned import CannedLines, find_canned_lines, line_key, pieces, sentences  # noqa: E402
from cirrus.ingest.denoise import Denoiser  # noqa: E402
from cirrus.ingest.readers import read_tickets  # noqa: E402
from cirrus.schema import Event, SourceRef, Ticket  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "canned_lines.json"
TAU = ROOT.parent / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"
TAU_LABELS = ROOT / "benchmarks" / "data" / "canned_lines_tau_labels.json"
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$")


def _as_ticket(labelled: LabelledTicket) -> Ticket:
    events = [Event(role=m.role, text=m.text) for m in labelled.messages]
    return Ticket(labelled.ticket_id, events, SourceRef("synthetic.jsonl"), language=labelled.language,
                  language_given=True)


def _outputs(ticket: Ticket, denoiser: Denoiser) -> list[str]:
    """What is left of each event's text after ``denoiser`` (``""``: dropped),
    event by event; checked against the denoiser run on the whole ticket."""
    out = []
    for event in ticket.events:
        text = event.text
        if denoiser.cut_lines is not None and event.role == "agent" and text:
            text = denoiser.cut_lines(text)
        out.append("" if not text or denoiser.is_filler(replace(event, text=text)) else text)
    said = [e.text for e in denoiser(ticket).events if e.role in ("customer", "agent")]
    assert said == [t for e, t in zip(ticket.events, out) if t and e.role in ("customer", "agent")], ticket.ticket_id
    return out


def _parts(text: str) -> list[str]:
    """The clauses of ``text`` that carry a word, lower-cased, without edge punctuation."""
    return [_EDGE_PUNCT.sub("", p.text).lower() for p in pieces(text) if line_key(p.text)]


def _present(segment: str, output: str, any_part: bool) -> bool:
    parts, out = _parts(segment), output.lower()
    if not parts:
        return bool(output)
    found = [part in out for part in parts]
    return any(found) if any_part else all(found)


def _denoisers(pipeline: PipelineConfig, canned: CannedLines | None, language: str) -> Denoiser:
    cutter = canned.cutter(language) if canned is not None else None
    return Denoiser.from_config(pipeline.denoise_for(language), cut_lines=cutter)


def synthetic(pipeline: PipelineConfig, split: str, tickets: int) -> dict[str, Any]:
    labelled = corpus(split, "en", tickets, seed=1) + corpus(split, "zh", tickets, seed=1)
    raw = [_as_ticket(t) for t in labelled]
    started = time.perf_counter()
    canned = find_canned_lines(lambda: raw, pipeline)
    scan_s = time.perf_counter() - started
    figures: dict[str, Any] = {"tickets": len(raw), "first_pass_s": round(scan_s, 2),
                               "first_pass_tickets_per_s": round(len(raw) / scan_s)}
    for language in ("en", "zh"):
        counts: Counter[str] = Counter(dict.fromkeys(
            ("canned", "canned_survived_rules", "canned_survived_pass", "informative", "informative_dropped_rules",
             "informative_dropped_pass", "customer_info", "customer_info_dropped"), 0))
        by_kind: Counter[str] = Counter()
        survivors: Counter[str] = Counter()
        for ticket, labels in ((r, t) for r, t in zip(raw, labelled) if t.language == language):
            rules = _outputs(ticket, _denoisers(pipeline, None, language))
            passed = _outputs(ticket, _denoisers(pipeline, canned, language))
            for message, before, after in zip(labels.messages, rules, passed):
                for text, label in message.segments:
                    if message.role == "customer":
                        if label == INFO:
                            counts["customer_info"] += 1
                            counts["customer_info_dropped"] += not after
                        continue
                    if label.startswith(CANNED):
                        kind = label.split("/")[-1]
                        counts["canned"] += 1
                        by_kind[kind] += 1
                        counts["canned_survived_rules"] += _present(text, before, any_part=True)
                        if _present(text, after, any_part=True):
                            counts["canned_survived_pass"] += 1
                            survivors[kind] += 1
                    else:
                        counts["informative"] += 1
                        counts["informative_dropped_rules"] += not _present(text, before, any_part=False)
                        counts["informative_dropped_pass"] += not _present(text, after, any_part=False)
        figures[language] = {
            **counts,
            "canned_survival_rules": round(counts["canned_survived_rules"] / counts["canned"], 4),
            "canned_survival_pass": round(counts["canned_survived_pass"] / counts["canned"], 4),
            "survivors_by_kind": {kind: f"{survivors[kind]}/{n}" for kind, n in sorted(by_kind.items())},
            "lines_decided": _decided(canned, language),
        }
    return figures


def _decided(canned: CannedLines | None, language: str) -> dict[str, int]:
    lines = [line for line in (canned.lines if canned else ()) if line.language == language]
    return {"frequent": len(lines), "procedural": sum(line.procedural for line in lines),
            **Counter(f"reason: {line.reason}" for line in lines)}


def tau_bench(pipeline: PipelineConfig) -> dict[str, Any] | None:
    if not TAU.exists():
        return None
    labels = json.loads(TAU_LABELS.read_text(encoding="utf-8"))["labels"]
    tickets = [t for t in read_tickets(TAU) if isinstance(t, Ticket)]
    canned = find_canned_lines(lambda: tickets, pipeline)
    counts: Counter[str] = Counter(dict.fromkeys(
        ("canned", "canned_survived_rules", "canned_survived_pass", "informative", "informative_dropped_rules",
         "informative_dropped_pass", "neutral", "unlabelled", "unlabelled_changed_pass"), 0))
    wrong: Counter[str] = Counter()
    for ticket in tickets:
        language = "en"
        rules = _outputs(ticket, _denoisers(pipeline, None, language))
        passed = _outputs(ticket, _denoisers(pipeline, canned, language))
        for event, before, after in zip(ticket.events, rules, passed):
            if event.role != "agent" or not event.text:
                continue
            for sentence in sentences(pieces(event.text)):
                text = "".join(p.text + p.end for p in sentence[:-1]) + sentence[-1].text
                label = labels.get(line_key(text), "unlabelled")
                counts[label] += 1
                kept_before, kept_after = _present(text, before, False), _present(text, after, False)
                if label == "canned":
                    counts["canned_survived_rules"] += _present(text, before, True)
                    counts["canned_survived_pass"] += _present(text, after, True)
                elif label == "informative":
                    counts["informative_dropped_rules"] += not kept_before
                    counts["informative_dropped_pass"] += not kept_after
                    if not kept_after:
                        wrong[line_key(text)] += 1
                elif label == "unlabelled":
                    counts["unlabelled_changed_pass"] += kept_before and not kept_after
    return {
        "transcripts": len(tickets), **counts,
        "canned_survival_rules": round(counts["canned_survived_rules"] / counts["canned"], 4),
        "canned_survival_pass": round(counts["canned_survived_pass"] / counts["canned"], 4),
        "informative_dropped_lines": dict(wrong.most_common()),
        "lines_decided": _decided(canned, "en"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tickets", type=int, default=400, help="synthetic chats per language and split")
    parser.add_argument("--only", choices=["tune", "heldout", "tau_bench"], help="one corpus (default: all)")
    parser.add_argument("--results", type=Path, default=OUT)
    args = parser.parse_args()
    pipeline = load_pipeline()
    runs = {"tune": lambda: synthetic(pipeline, "tune", args.tickets),
            "heldout": lambda: synthetic(pipeline, "heldout", args.tickets),
            "tau_bench": lambda: tau_bench(pipeline)}
    results = {name: run() for name, run in runs.items() if args.only in (None, name)}
    args.results.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, figures in results.items():
        if figures is None:
            print(f"{name}: skipped (../shared/data absent)")
            continue
        for language in ("en", "zh") if name != "tau_bench" else ("",):
            f = figures[language] if language else figures
            print(f"{name:8} {language or 'en':3} canned {f['canned']:5}"
                  f"  survive rules {f['canned_survival_rules']:.1%}"
                  f"  survive pass {f['canned_survival_pass']:.1%}  informative {f['informative']:5}"
                  f"  dropped rules {f['informative_dropped_rules']}  dropped pass {f['informative_dropped_pass']}"
                  + (f"  customer info dropped {f['customer_info_dropped']}/{f['customer_info']}" if language else ""))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
