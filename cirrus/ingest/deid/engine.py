"""Build the Presidio analyzer that Cirrus uses, from a :class:`DeidConfig`.

The engine is Presidio's ``AnalyzerEngine`` with an explicit recognizer
registry (no YAML defaults, so the entity set is exactly the configured one),
the spaCy model named in the config loaded without its dependency parser
(Presidio needs tokens, lemmas and entities, not parses), and the pipeline's
own pattern recognizers.
"""

from __future__ import annotations

import re
from typing import Any

import spacy
from presidio_analyzer import AnalyzerEngine, EntityRecognizer, Pattern, PatternRecognizer, RecognizerRegistry
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    SpacyRecognizer,
    UsSsnRecognizer,
)

from cirrus.config import DeidConfig, LanguageDeidConfig, PatternRecognizerConfig
from cirrus.ingest.deid.addresses import AddressRecognizer
from cirrus.ingest.deid.cued import CuedValueRecognizer
from cirrus.ingest.deid.gazetteer import PersonGazetteerRecognizer
from cirrus.ingest.deid.recognizers import (
    CheckDigitRecognizer,
    ContextRequired,
    FieldTextRecognizer,
    GroupedPhoneRecognizer,
    IpAddressRecognizer,
    LuhnCardRecognizer,
    ObfuscatedEmailRecognizer,
    ReferenceRecognizer,
    ScriptNameRecognizer,
    SecretRecognizer,
    ValidatedPhoneRecognizer,
)
from cirrus.ingest.deid.spacy_model import ModelNotInstalled, load_spacy
from cirrus.offline import use_bundled_suffix_list

# ModelNotInstalled: what build_analyzer raises for a spaCy model that is not installed
__all__ = ["ModelNotInstalled", "build_analyzer", "build_registry", "language_recognizers", "load_spacy"]


def _pattern_recognizer(spec: PatternRecognizerConfig, language: str) -> PatternRecognizer:
    flags = re.DOTALL | re.MULTILINE | (0 if spec.case_sensitive else re.IGNORECASE)
    return PatternRecognizer(
        supported_entity=spec.entity,
        name=spec.name,
        supported_language=language,
        patterns=[Pattern(f"{spec.name}_{i}", regex, spec.score) for i, regex in enumerate(spec.patterns)],
        context=spec.context or None,
        global_regex_flags=flags,
    )


class _Registry(RecognizerRegistry):
    """Presidio's registry with :meth:`get_recognizers` remembered per
    (language, entities): Presidio filters the whole list again on every
    ``analyze`` call, once per text.  Adding or removing a recognizer
    forgets what was remembered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chosen: dict[tuple[Any, ...], list[EntityRecognizer]] = {}

    def get_recognizers(self, language: str, entities: list[str] | None = None, all_fields: bool = False,
                        ad_hoc_recognizers: list[EntityRecognizer] | None = None) -> list[EntityRecognizer]:
        if ad_hoc_recognizers:
            return super().get_recognizers(language, entities, all_fields, ad_hoc_recognizers)
        key = (language, tuple(entities) if entities else None, all_fields)
        chosen = self._chosen.get(key)
        if chosen is None:
            chosen = self._chosen[key] = super().get_recognizers(language, entities, all_fields)
        return list(chosen)

    def add_recognizer(self, recognizer: EntityRecognizer) -> None:
        self._chosen = {}
        super().add_recognizer(recognizer)

    def remove_recognizer(self, *args: Any, **kwargs: Any) -> None:
        self._chosen = {}
        super().remove_recognizer(*args, **kwargs)


def build_registry(config: DeidConfig, language: str | None = None,
                   extra: LanguageDeidConfig | None = None) -> RecognizerRegistry:
    """The recognizers for ``language`` (the base one by default).  Another
    language gets the base pattern and code recognizers that do not depend
    on English (phones, cards, IPs, keys, secrets, street lines and postcodes
    (:mod:`cirrus.ingest.deid.addresses`), ...), ``extra``'s
    recognizers, and Cirrus's own for the language (Chinese:
    :mod:`cirrus.ingest.deid.zh`, which also finds e-mails next to CJK text);
    English NER and the English name gazetteer stay with the base language."""
    lang = language or config.language
    base = lang == config.language
    wanted = set(config.entities)
    registry = _Registry(supported_languages=[lang])
    english = [SpacyRecognizer(supported_language=lang, supported_entities=["PERSON"]),
               EmailRecognizer(supported_language=lang)] if base else []
    builtin = [
        *english,
        ObfuscatedEmailRecognizer(supported_language=lang),
        ValidatedPhoneRecognizer(supported_language=lang, supported_regions=tuple(config.phone_regions)),
        GroupedPhoneRecognizer(supported_language=lang),
        IpAddressRecognizer(supported_language=lang),
        CreditCardRecognizer(supported_language=lang),
        LuhnCardRecognizer(supported_language=lang),
        IbanRecognizer(supported_language=lang),
        UsSsnRecognizer(supported_language=lang),
        SecretRecognizer(supported_language=lang),
        ReferenceRecognizer(supported_language=lang),
        FieldTextRecognizer(supported_language=lang),
        CheckDigitRecognizer(supported_language=lang),
        AddressRecognizer(supported_language=lang),
        ScriptNameRecognizer(supported_language=lang),
        CuedValueRecognizer(supported_language=lang),  # CVV, US driver's licence, 田中と申します (cued.py)
        *country_recognizers(lang),
    ]
    if not base and (extra is None or extra.builtin_recognizers):
        builtin += language_recognizers(lang)
    if not base and extra is not None and extra.spacy_model:
        builtin.append(SpacyRecognizer(supported_language=lang, supported_entities=["PERSON"]))
    if not base and extra is not None and extra.ner_model:  # an offline NER model's names (zh_ner.py)
        from cirrus.ingest.deid.zh_ner import ner_recognizers
        builtin += ner_recognizers(extra.ner_model, lang)
    for recognizer in builtin:
        if wanted & set(recognizer.supported_entities):
            registry.add_recognizer(recognizer)
    for spec in [*config.recognizers, *(extra.recognizers if extra else [])]:
        if spec.entity in wanted:
            registry.add_recognizer(_pattern_recognizer(spec, lang))
    if base and config.person_gazetteer and "PERSON" in wanted:
        registry.add_recognizer(PersonGazetteerRecognizer(supported_language=lang, model_name=config.spacy_model))
    return registry


# Presidio's own recognizers for national and personal identifiers and device
# addresses (each validates its checksum or asks for its context word); a
# pipeline switches one on by listing its entity (pipelines/default.toml)
COUNTRY_RECOGNIZERS = (
    "MacAddressRecognizer", "UkNinoRecognizer", "UkPostcodeRecognizer", "NhsRecognizer", "UkPassportRecognizer",
    "EsNifRecognizer", "EsNieRecognizer", "ItFiscalCodeRecognizer", "InPanRecognizer", "InAadhaarRecognizer",
    "InPassportRecognizer", "AuTfnRecognizer", "AuMedicareRecognizer", "SgFinRecognizer", "KrRrnRecognizer",
    "PlPeselRecognizer", "FiPersonalIdentityCodeRecognizer", "UsItinRecognizer", "UsPassportRecognizer",
)


# identifiers whose shape alone is evidence (letters and digits in a fixed pattern); the others
# (mostly digits: a checksum passes one random number in ten) count only next to their context word
SELF_EVIDENT = frozenset({"MacAddressRecognizer", "UkNinoRecognizer", "UkPostcodeRecognizer", "ItFiscalCodeRecognizer",
                          "EsNifRecognizer", "EsNieRecognizer"})


def country_recognizers(language: str) -> list[EntityRecognizer]:
    """:data:`COUNTRY_RECOGNIZERS`, for ``language`` (they default to their
    country's language; the identifiers appear in any)."""
    import presidio_analyzer.predefined_recognizers as predefined

    found = []
    for name in COUNTRY_RECOGNIZERS:
        if hasattr(predefined, name):
            recognizer = getattr(predefined, name)(supported_language=language)
            found.append(recognizer if name in SELF_EVIDENT else ContextRequired(recognizer))
    return found


def language_recognizers(language: str) -> list[EntityRecognizer]:
    """Cirrus's own recognizers for a language other than English."""
    if language == "zh":
        from cirrus.ingest.deid.zh import chinese_recognizers

        return chinese_recognizers(language)
    return []


def build_analyzer(config: DeidConfig, language: str | None = None,
                   extra: LanguageDeidConfig | None = None) -> AnalyzerEngine:
    use_bundled_suffix_list()
    lang = language or config.language
    nlp_engine = SpacyNlpEngine(
        models=[{"lang_code": lang, "model_name": config.spacy_model}],
        ner_model_configuration=NerModelConfiguration(
            model_to_presidio_entity_mapping={"PERSON": "PERSON", "PER": "PERSON"},
            labels_to_ignore=["ORG", "GPE", "LOC", "NORP", "FAC", "DATE", "TIME", "CARDINAL", "MONEY",
                              "ORDINAL", "PERCENT", "PRODUCT", "QUANTITY", "WORK_OF_ART", "EVENT",
                              "LAW", "LANGUAGE"],
        ),
    )
    # SpacyNlpEngine.load() would download a missing model; load it ourselves.
    # Another language gets a blank pipeline (tokens only): its names come
    # from its own recognizers, not from an English NER model.
    model = config.spacy_model if lang == config.language else (extra.spacy_model if extra else None)
    nlp_engine.nlp = {lang: load_spacy(model) if model else spacy.blank(lang)}
    return AnalyzerEngine(
        registry=build_registry(config, lang, extra),
        nlp_engine=nlp_engine,
        supported_languages=[lang],
        default_score_threshold=config.score_threshold,
        # Presidio looks 5 keywords back; support chats put the context word
        # a little further ("call me back on ...", "card number is ...").
        context_aware_enhancer=LemmaContextAwareEnhancer(context_prefix_count=8, context_suffix_count=2),
    )
