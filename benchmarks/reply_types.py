"""How well the offline reply-type rules label agent replies.

Runs :class:`cirrus.ingest.annotate.rules.RuleAnnotator`, built from a
pipeline's ``[annotate]`` section for each reply's language (``[annotate]``
for English, ``[languages.zh.annotate]`` for Chinese), on the hand-labelled
replies of benchmarks/data/reply_types.jsonl (labelling guide and split:
benchmarks/data/README.md) and prints, per split ("tune", "heldout") and
per language (and all together): accuracy, precision and recall per type and
a confusion matrix (rows: the label, columns: what the rules said).

    .venv/bin/python benchmarks/reply_types.py [--split tune|heldout|all]
        [--pipeline default] [--results benchmarks/results/reply_types_after.json]
        [--errors]

``--errors`` also prints every wrongly labelled reply of the splits shown.
Rules are tuned on "tune" only; "heldout" is for reporting.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cirrus.config import load_pipeline  # noqa: E402
from cirrus.ingest.annotate.base import ReplyToLabel  # noqa: E402
from cirrus.ingest.annotate.rules import RuleAnnotator  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "reply_types.jsonl"
TYPES = ("Solution", "Standard", "Inquire", "Clarify", "Appease")
SPLITS = ("tune", "heldout")


def load(path: Path = DATA) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def predict(rows: list[dict], pipeline: str = "default") -> list[str]:
    config = load_pipeline(pipeline)
    annotators: dict[str, RuleAnnotator] = {}
    out = []
    for row in rows:
        lang = row["lang"]
        if lang not in annotators:
            annotators[lang] = RuleAnnotator.from_config(config.annotate_for(lang))
        out.append(annotators[lang].label_one(ReplyToLabel(query="", reply=row["text"])))
    return out


def metrics(gold: list[str], pred: list[str]) -> dict:
    n = len(gold)
    confusion = {g: {p: 0 for p in TYPES} for g in TYPES}
    for g, p in zip(gold, pred):
        confusion[g][p] += 1
    per_type = {}
    for t in TYPES:
        tp = confusion[t][t]
        predicted = sum(confusion[g][t] for g in TYPES)
        actual = sum(confusion[t].values())
        precision = tp / predicted if predicted else None
        recall = tp / actual if actual else None
        f1 = (2 * precision * recall / (precision + recall)
              if precision and recall else (0.0 if predicted and actual else None))
        per_type[t] = {"support": actual, "predicted": predicted, "precision": _r(precision),
                       "recall": _r(recall), "f1": _r(f1)}
    f1s = [v["f1"] for v in per_type.values() if v["support"]]
    correct = sum(g == p for g, p in zip(gold, pred))
    # asks: Inquire or Clarify, the distinction the issue cares most about
    ask_gold = [g in ("Inquire", "Clarify") for g in gold]
    ask_pred = [p in ("Inquire", "Clarify") for p in pred]
    ask_tp = sum(a and b for a, b in zip(ask_gold, ask_pred))
    return {
        "n": n,
        "accuracy": _r(correct / n) if n else None,
        "macro_f1": _r(sum(f for f in f1s if f is not None) / len(f1s)) if f1s else None,
        "asks": {"precision": _r(ask_tp / sum(ask_pred)) if sum(ask_pred) else None,
                 "recall": _r(ask_tp / sum(ask_gold)) if sum(ask_gold) else None},
        "predicted": dict(Counter(pred)),
        "per_type": per_type,
        "confusion": confusion,
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def evaluate(rows: list[dict], pred: list[str], splits: tuple[str, ...]) -> dict:
    result: dict = {}
    for split in splits:
        result[split] = {}
        for lang in ("all", "en", "zh"):
            idx = [i for i, r in enumerate(rows) if r["split"] == split and (lang == "all" or r["lang"] == lang)]
            result[split][lang] = metrics([rows[i]["label"] for i in idx], [pred[i] for i in idx])
    return result


def show(name: str, m: dict) -> None:
    print(f"\n== {name}: n={m['n']} accuracy={m['accuracy']} macro-F1={m['macro_f1']} "
          f"asks P/R={m['asks']['precision']}/{m['asks']['recall']}")
    print(f"{'type':<9} {'P':>6} {'R':>6} {'n':>4} | confusion (row: label, column: rules) "
          + " ".join(f"{t[:5]:>5}" for t in TYPES))
    for t in TYPES:
        v = m["per_type"][t]
        p = "-" if v["precision"] is None else f"{v['precision']:.2f}"
        rc = "-" if v["recall"] is None else f"{v['recall']:.2f}"
        print(f"{t:<9} {p:>6} {rc:>6} {v['support']:>4} | {'':<38}"
              + " ".join(f"{m['confusion'][t][c]:>5}" for c in TYPES))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--pipeline", default="default")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--results", type=Path, help="write the figures as JSON here")
    parser.add_argument("--errors", action="store_true", help="print the wrongly labelled replies")
    args = parser.parse_args(argv)

    rows = load(args.data)
    pred = predict(rows, args.pipeline)
    splits = SPLITS if args.split == "all" else (args.split,)
    result = evaluate(rows, pred, splits)
    for split in splits:
        for lang in ("all", "en", "zh"):
            show(f"{split} / {lang}", result[split][lang])
    if args.errors:
        print()
        for row, p in zip(rows, pred):
            if row["split"] in splits and row["label"] != p:
                print(f"[{row['split']}/{row['lang']}] {row['label']:>8} -> {p:<8} {row['text']}")
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": "python " + " ".join(["benchmarks/reply_types.py", *(argv or sys.argv[1:])]),
                   "data": str(args.data.relative_to(ROOT)) if args.data.is_relative_to(ROOT) else str(args.data),
                   "pipeline": args.pipeline, "results": result}
        args.results.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
