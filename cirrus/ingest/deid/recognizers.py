"""Code-based recognizers that Presidio's defaults lack or under-score.

Pattern recognizers that need no code are declared in the pipeline file.
"""

from __future__ import annotations

import re

from presidio_analyzer import AnalysisExplanation, LocalRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from cirrus.checksums import luhn


class ValidatedPhoneRecognizer(PhoneRecognizer):
    """Presidio's phonenumbers-based recognizer, trusted on its own.

    A match that ``phonenumbers`` validates for one of the configured regions
    is strong evidence; Presidio's base score (0.4) only passes the threshold
    with a context word in a narrow window, which support chats often lack
    ("they're not answering at 780-999-2181").
    """

    SCORE = 0.6


class LuhnCardRecognizer(PatternRecognizer):
    """Card numbers of 12 to 19 digits (Maestro, 19-digit Visa) that pass the
    Luhn check; Presidio's card regex covers mostly 13 to 16 digits."""

    PATTERN = r"(?<![0-9A-Za-z.+-])[0-9]{4}(?:[ -]?[0-9]{2,4}){2,4}(?:[ -]?[0-9]{1,3})?(?![0-9A-Za-z-]|\.[0-9])"

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(
            supported_entity="CREDIT_CARD",
            name="luhn_card",
            supported_language=supported_language,
            patterns=[Pattern("card_12_19", self.PATTERN, 0.3)],
            context=["card", "credit", "debit", "cc", "visa", "mastercard", "amex", "maestro", "payment"],
        )

    def validate_result(self, pattern_text: str) -> bool | None:
        digits = re.sub(r"[ -]", "", pattern_text)
        return 12 <= len(digits) <= 19 and luhn(digits)


class GroupedPhoneRecognizer(LocalRecognizer):
    """Phone numbers that ``phonenumbers`` cannot place without a region:
    European local formats, grouped digits, extensions.

    A bare digit group is weak evidence (order numbers, amounts), so the score
    passes the threshold only with an international ``+`` prefix or a phone
    word shortly before or after the number ("call me on", "Fax:",
    "... office").  Dates and IP addresses are never phone numbers.
    """

    BASE_SCORE = 0.45
    INTERNATIONAL_SCORE = 0.7
    CONTEXT_SCORE = 0.75
    CONTEXT = (
        "phone", "telephone", "tel", "mobile", "cell", "call", "fax", "number", "contact", "reach",
        "dial", "text me", "whatsapp", "office", "desk", "home", "work", "answering", "registered",
        "ring", "sms", "hotline", "电话", "手机",
    )
    _PATTERN = re.compile(
        r"(?<![\w.+/-])(?P<num>(?:\+[0-9]{1,3}[ .-]?)?(?:\(0\)[ .-]?)?(?:\(?[0-9]{1,5}\)?[ .-]?)?"
        r"[0-9]{1,6}(?:[ .-][0-9]{1,6}){0,5}(?:\s?(?:x|ext\.?)\s?[0-9]{1,5})?)(?![0-9A-Za-z])(?![.-][0-9])"
    )
    _DATE = re.compile(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}$|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$")
    _IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["PHONE_NUMBER"], supported_language=supported_language,
                         name="grouped_phone")

    def load(self) -> None:
        pass

    def _has_context(self, text: str, start: int, end: int) -> bool:
        window = (text[max(0, start - 48) : start] + " " + text[end : end + 16]).lower()
        return any(word in window for word in self.CONTEXT)

    def analyze(self, text: str, entities: list[str], nlp_artifacts=None) -> list[RecognizerResult]:
        results = []
        for match in self._PATTERN.finditer(text):
            number = match.group("num").strip()
            digits = sum(ch.isdigit() for ch in number.split("x")[0].split("ext")[0])
            if not 7 <= digits <= 15 or self._DATE.match(number) or self._IP.match(number):
                continue
            if number.isdigit() and len(number) > 11:
                continue  # one long run: an account or order id, not a phone
            start, end = match.start("num"), match.start("num") + len(number)
            if self._has_context(text, start, end):
                score = self.CONTEXT_SCORE
            elif number.startswith("+"):
                score = self.INTERNATIONAL_SCORE
            else:
                score = self.BASE_SCORE
            explanation = AnalysisExplanation(recognizer=self.name, original_score=score)
            results.append(RecognizerResult("PHONE_NUMBER", start, end, score, analysis_explanation=explanation,
                                            recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                                                  RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: True}))
        return results
