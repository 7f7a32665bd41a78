"""Values that only their cue makes personal: a card's security code after
"CVV" or "security code", a US driver's licence number after "driver's
license" or "DL#", a Japanese name before と申します ("I am called").

The shapes alone (three digits, a letter and seven digits, two kanji) are
everywhere in support text, so each is taken only right after (or before) its
cue, with the guards below.  The ingest masks them (:class:`CuedValueRecognizer`)
and ``cirrus audit`` reads the same spans (:func:`cued_values`): one rule set
for both.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from presidio_analyzer import LocalRecognizer, RecognizerResult

__all__ = ["CuedValue", "CuedValueRecognizer", "cued_values"]

_CVV = re.compile(
    r"(?i:\b(?:cvv2?|cvc2?|csc)\b|card\s+(?:security|verification)\s+(?:code|value|number)"
    r"|(?<=[\s,.;:(])security\s+code)"
    r"(?:\s*(?:number|code|no\.?|#))?[^\S\n]*(?:is|was|:|=|-)?[^\S\n]*(?:on\s+the\s+back\s+)?(?:is\s+)?[\"']?"
    r"(?P<value>(?<![\d.,/-])\d{3,4})(?![\d.,/:-]\d|\d|\s*(?:ms|s|sec|seconds|minutes|%|px|gb|mb)\b)")
# near a bare "security code": what makes it a card's (else a login code: "your security code is 4821")
_CARD_WORDS = re.compile(r"(?i)card|visa|mastercard|amex|back|expir(?:y|ation)\b|exp\.?\s*date|cvv|cvc|payment|"
                         r"billing")
_DRIVER_LICENCE = re.compile(
    r"(?i:\bdriver'?s?\s+licen[cs]e|\bdriving\s+licen[cs]e|\bDL)(?:\s*(?:number|no\.?|num|id|#))?"
    r"[^\S\n]*(?:is|was|:|=|#)?[^\S\n]*"
    r"(?P<value>(?<![A-Za-z0-9])[A-Z]{0,3}\d[A-Z0-9-]{3,20}[A-Z0-9](?![A-Za-z0-9]))")
_DL_CUE_WORD = re.compile(r"(?i)\bDL\b")
_DL_MARKED = re.compile(r"(?i)number|no\.?|num|id|#")
# a Japanese self-introduction after a name in kanji or katakana ("田中と申します")
_JA_INTRODUCTION = re.compile(r"(?<![\u4E00-\u9FFF\u30A0-\u30FF])"
                              r"(?P<value>[\u4E00-\u9FFF]{1,4}(?:[ \u3000][\u4E00-\u9FFF]{1,4})?"
                              r"|[\u30A0-\u30FF]{2,10}(?:[ \u3000\u30FB][\u30A0-\u30FF]{2,10})?)\s*と申します")


class CuedValue(NamedTuple):
    start: int
    end: int
    entity: str  # the ingest's entity type
    kind: str  # what it is: "card security code", "driver's licence", "name"


def cued_values(text: str) -> list[CuedValue]:
    """The cued values of ``text`` (cheap word checks first: most texts
    have none of the cues)."""
    found: list[CuedValue] = []
    lowered = text.lower()
    if any(cue in lowered for cue in ("cvv", "cvc", "csc", "security code", "verification")):
        for m in _CVV.finditer(text):
            cue = lowered[m.start():m.start("value")]
            if "security code" in cue and "card" not in cue and \
                    not _CARD_WORDS.search(text, max(0, m.start() - 80), m.end() + 40):
                continue  # "your security code is 4821": a login code, unless a card is near
            found.append(CuedValue(m.start("value"), m.end("value"), "SECRET", "card security code"))
    if "licen" in lowered or "dl" in lowered:
        for m in _DRIVER_LICENCE.finditer(text):
            value = m.group("value")
            cue = text[m.start():m.start("value")]
            if sum(c.isdigit() for c in value) < 5:
                continue
            if _DL_CUE_WORD.match(cue) and not _DL_MARKED.search(cue):
                continue  # "DL 2024-05-01": a download, a date; "DL# F255..." is a licence
            found.append(CuedValue(m.start("value"), m.end("value"), "NATIONAL_ID", "driver's licence"))
    if "と申します" in text:
        found += [CuedValue(m.start("value"), m.end("value"), "PERSON", "name")
                  for m in _JA_INTRODUCTION.finditer(text)]
    return found


class CuedValueRecognizer(LocalRecognizer):
    """:func:`cued_values` as a Presidio recognizer (any language)."""

    SCORE = 0.8

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["SECRET", "NATIONAL_ID", "PERSON"], name="cued_values",
                         supported_language=supported_language)

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        return [RecognizerResult(value.entity, value.start, value.end, self.SCORE,
                                 recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                                       RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id})
                for value in cued_values(text) if not entities or value.entity in entities]
