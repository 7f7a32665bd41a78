"""De-identify a whole ticket consistently.

Two passes over every piece of text in the ticket (messages, OCR text,
knowledge documents, and each string or long number inside tool arguments and
results):

1. *detect*: Presidio finds spans; JSON fields named in ``field_entities``
   (``email``, ``first_name``...) are personal data whole.  Every value found
   anywhere joins the ticket's vocabulary.
2. *replace*: each text is rewritten with Presidio's anonymizer, replacing its
   own spans plus every other occurrence of a vocabulary value (a name NER
   found in one message is replaced in the message where it missed it, and in
   the tool result that holds it).  One :class:`Pseudonymizer` per ticket
   gives each original one replacement everywhere.

Detection results are cached by text: knowledge documents and canned agent
phrases repeat across tickets and are analysed once per worker.  A worker
detects a chunk of tickets at once (:meth:`Deidentifier.prefetch`), so spaCy
reads their texts in one batch; each ticket then finds its spans in the cache.
"""

from __future__ import annotations

import json
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import spacy
from presidio_analyzer import RecognizerResult
from presidio_anonymizer import AnonymizerEngine
from presidio_anonymizer.entities import OperatorConfig

from cirrus.cjk import CJK_PUNCT_RANGES, HAN_RANGES
from cirrus.cjk import HAN as _HAN
from cirrus.config import DeidConfig, LanguageDeidConfig, PipelineConfig
from cirrus.ingest.deid.keys import entity_of_key, key_words
from cirrus.ingest.deid.normalize import normalised_view
from cirrus.ingest.deid.engine import build_analyzer
from cirrus.ingest.deid.gazetteer import city_names, common_words, in_dictionary, name_lists
from cirrus.ingest.deid.ids import pseudonymous_id
from cirrus.ingest.deid.recognizers import not_a_phone
from cirrus.ingest.deid.pseudonyms import Pseudonymizer
from cirrus.schema import Event, KnowledgeDoc, SourceRef, Ticket

# When spans of different types overlap, the more specific (validated) type
# wins: a Luhn-valid card number is not also a phone number.
ENTITY_PRIORITY = {
    "URL_CREDENTIALS": 9, "EMAIL_ADDRESS": 8, "CLOUD_ACCESS_KEY": 8, "CREDIT_CARD": 7, "IBAN_CODE": 7, "SECRET": 7,
    "CN_RESIDENT_ID": 8, "US_SSN": 6, "IP_ADDRESS": 6, "RESOURCE_ID": 5, "PHONE_NUMBER": 4,
    "ACCOUNT_ID": 3, "STREET_ADDRESS": 3, "DATE_OF_BIRTH": 2, "PERSON": 1, "PASSPORT_NUMBER": 6,
    "CN_LICENSE_PLATE": 5, "NATIONAL_ID": 6, "DEVICE_ID": 6, "MAC_ADDRESS": 6, "UK_NINO": 6, "UK_NHS": 6,
    "UK_PASSPORT": 6, "ES_NIF": 6, "ES_NIE": 6, "IT_FISCAL_CODE": 6, "IN_PAN": 6, "IN_AADHAAR": 6,
    "IN_PASSPORT": 6, "AU_TFN": 6, "AU_MEDICARE": 6, "SG_NRIC_FIN": 6, "KR_RRN": 6, "PL_PESEL": 6,
    "FI_PERSONAL_IDENTITY_CODE": 6, "US_ITIN": 6, "US_PASSPORT": 6, "UK_POSTCODE": 3,
}
_KEY_WORDS = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])")
_MIN_VOCAB_LEN = 3
_LATIN_WORDS = re.compile(r"[A-Za-z]{2,}")

# NER sometimes calls "Mar 8" or "CLOUD*TOPUP" a person; names hold none of these
_NOT_A_NAME = re.compile(r"[0-9*@/_=#]")
_HAN_IN_TEXT = re.compile(f"[{HAN_RANGES}]")
_HANDLE = re.compile(r"([a-z]{3,})[._]([a-z]{2,})[._]?\d*")
_GLUED = re.compile(r"[A-Za-z_]\||\|[A-Za-z_]")
_POSSESSIVE = re.compile(r"[\x27’]s$")
_NAME_EDGE = " \t\n.,;:!?\"()[]{}<>"
# what follows a place: an airport code, "Airport"
_PLACE_AFTER = re.compile(r"(?:/[A-Z][A-Za-z.' -]*?)?\s*(?:\((?P<code>[A-Z]{3})\)|"
                          r"(?:[A-Z][A-Za-z.'-]*\s+){0,3}(?:International\s+)?Airport\b)")
_TRAVEL_BEFORE = re.compile(r"(?:\b(?i:from|to|via|between|and|in|at|into|out of|fly|flying|flight)|"
                            r"\b(?i:origin|destination|departure|arrival)\W*:\W*|\*\*:)\s*(?:[A-Z][a-z]+\s+)?$")
_SITE_AFTER = re.compile(r"(?:,\s*[A-Z]{2})?\s+(?i:office|team|branch|region|area|airport|warehouse|hub|store|"
                         r"site|campus|data ?cent(?:er|re)|location|headquarters|HQ|station|hotel|port|zone|plant|"
                         r"factory|depot|facility|distribution|fulfil+ment|sorting|terminal)\b"
                         # "Memphis, TN", "Leeds, UK": a city with its state or country code
                         r"|,\s*(?:[A-Z]{2}|USA|U\.S\.A?\.?)(?![A-Za-z])")
_TRAVEL_AFTER = re.compile(r"\s*(?:to|->|→|–|-)\s+[A-Z]")
# A product, not a person: what follows it in brackets is a variant (a
# colour, a size, a measure, a model): "Kettle Classic (red)", "Aurora Lamp
# (large)", "Glory Mug (350 ml)", "Warrior（白色，42码）".
_COLOURS = ("red|blue|green|black|white|grey|gray|silver|gold|rose gold|pink|purple|violet|yellow|orange|brown|"
            "beige|navy|teal|cyan|magenta|ivory|cream|charcoal|graphite|midnight|space gr[ae]y|olive|khaki|"
            "burgundy|maroon|turquoise|coral|mint|sand|stone|natural|clear|transparent|matte|light|dark")
_VARIANT_AFTER = re.compile(
    r"\s*[(（\[]\s*(?:"
    rf"(?i:(?:{_COLOURS})\b)"
    r"|(?i:(?:xx?s|s|m|l|xx?l|\d?xl|small|medium|large|regular|mini|one size|size\s+\w+|model\s+\w+|"
    r"pack of \d+|\d+[- ]?(?:pack|pcs|piece|slice|cup|seat|person|litre|liter|inch|in|ft|cm|mm|m|ml|l|oz|lb|kg|g|"
    r"gb|tb|mb|w|v|mah|hz)\b|\d+\s*[x×]\s*\d+)(?![A-Za-z]))"
    r"|[\u4e00-\u9fff]{0,3}色|\d+\s*(?:码|号|寸|英寸|毫升|升|克|公斤|寸|件|个装|片装)|[大中小]号|型号|款"
    r")"
)
# an article before it: "a Kettle Classic", "the Aurora Lamp", "a new Glory Mug"
# (not "my", "our": "our Jane from billing"; not "this": "This is Mr Reed")
_DETERMINER_BEFORE = re.compile(r"(?i:\b(?:the|a|an|each|every|another)\s+)"
                                r"(?:(?!(?:is|was|are|were|be|been)\s)[a-z][\w-]*\s+)?$")
_LEADING_DETERMINER = re.compile(r"(?i:(?:the|a|an)\s+)")
_HONORIFICS = frozenset({"Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Sir", "Madam", "Dame", "Lord", "Lady", "Prof"})
# next to a Latin word inside Chinese text, what says it is a person's name
# ("我叫Michael", "联系人：Jessica", "Tom你好", "David先生")
_ZH_NAME_CUE_BEFORE = re.compile(
    r"(?:我是|我叫|叫做?|名字是|姓名[:：]?|称呼|同事|朋友|老公|老婆|先生|女士|客户|联系人[:：]?|收件人[:：]?|"
    r"经理|老师|工程师|客服|(?:hi|hello|dear|mr|mrs|ms|dr)\.?)\s*$", re.IGNORECASE)
_ZH_NAME_CUE_AFTER = re.compile(r"^\s*(?:你好|您好|先生|女士|小姐|老师|经理|同学|说|告诉|跟我|打电话|来电|[,，]?\s*(?:你好|您好))")
_HAN_NEAR = re.compile(f"[{HAN_RANGES}]")
_LATIN_NAME_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
# another Latin word right next to it: "Jay White" in 我叫Jay White is a full name, not one word
_LATIN_BEFORE = re.compile(r"[A-Za-z][.]?[ \t]+$")
_LATIN_AFTER = re.compile(r"[ \t]+[A-Za-z]")
_LATIN_PIECE = re.compile(r"[A-Za-z][A-Za-z'’-]*(?:[ \t]+[A-Za-z][A-Za-z'’-]*)*")

# part-of-speech tags (Penn Treebank, spaCy's tag_) a one-word name never has: modal verbs, determiners,
# pronouns, prepositions, conjunctions, wh-words
_NOT_NAME_TAGS = frozenset({"MD", "DT", "PRP", "PRP$", "IN", "CC", "WDT", "WP", "WP$", "WRB", "EX", "TO"})
_ROLE_CODES = frozenset({"CEO", "CTO", "CFO", "COO", "CIO", "CSO", "CMO", "CPO", "CRO", "EVP", "SVP", "AVP", "DBA",
                         "QA", "SRE", "PMO", "VIP"})


def _long_enough(value: str, entity: str) -> bool:
    """Whether a found value is replaced wherever it occurs: names of 3
    characters or more ("Li" and "Ann" sit inside words), Chinese names of
    2 or more (张伟; a surname alone, 张, is not), any other type."""
    if entity != "PERSON":
        return True
    return len(value) >= (2 if _HAN.match(value) else _MIN_VOCAB_LEN)


def _names_evidence(value: str, given: frozenset[str], family: frozenset[str]) -> bool:
    """Whether a name found inside an identifier reads as one: written as a
    name ("Olivia Hartmann"), or a given name next to a family name."""
    words = value.split()
    if len(words) >= 2 and all(w[:1].isupper() and w[1:].islower() for w in words):
        return True
    return bool(_name_pairs(value, given, family))


_WORD = re.compile(r"[A-Za-z]+")


def _name_pairs(identifier: str, given: frozenset[str], family: frozenset[str]) -> list[Span]:
    """A given name next to a family name inside an identifier, any case
    ("olivia hartmann" of the key ``olivia_hartmann``): too short for NER,
    a name by the name lists."""
    words = list(_WORD.finditer(identifier))
    found = []
    for a, b in zip(words, words[1:]):
        first, second = a.group().title(), b.group().title()
        if identifier[a.end():b.start()].strip() == "" and len(first) >= 3 and len(second) >= 3 and (
                (first in given and second in family) or (first in family and second in given)):
            found.append(Span(a.start(), b.end(), "PERSON", 0.6))
    return found


def _is_place(text: str, start: int, end: int) -> bool:
    """A capitalised word that names a place, not a person: followed by
    "Airport", or by an airport code that is no job title ("Jane (CTO)")
    next to a travel word ("from Atlanta (ATL)", "to Dallas/Fort Worth
    (DFW)", "Origin: Denver (DEN)", "Phoenix (PHX) to ...").  Without one,
    "Jane (JRX)" may be initials: kept."""
    name = text[start:end]
    if name.endswith("Airport") or (" " in name and name in city_names()):
        return True  # "John F. Kennedy International Airport"; "Los Angeles", "San Francisco" anywhere
    after = _PLACE_AFTER.match(text, end)
    if after is None:
        # a city by name, travelled to or from, or with a site after it:
        # "from Atlanta to Las Vegas", "the Dallas team", "our Phoenix office"
        return text[start:end] in city_names() and bool(
            _TRAVEL_BEFORE.search(text[max(0, start - 24):start]) or _TRAVEL_AFTER.match(text, end)
            or _SITE_AFTER.match(text, end))
    code = after.group("code")
    if code is None:
        return True
    return code not in _ROLE_CODES and bool(_TRAVEL_BEFORE.search(text[max(0, start - 24):start])
                                            or _TRAVEL_AFTER.match(text, after.end()))


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    entity: str
    score: float


def resolve_overlaps(spans: Iterable[Span]) -> list[Span]:
    """Keep non-overlapping spans: higher priority first, then longer, then
    higher score.  Sorted by start."""
    ranked = sorted(spans, key=lambda s: (-ENTITY_PRIORITY.get(s.entity, 0), -(s.end - s.start), -s.score, s.start))
    kept: list[Span] = []
    for span in ranked:
        if all(span.end <= k.start or span.start >= k.end for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def _key_context(key: str | None) -> tuple[str, ...]:
    return tuple(w.lower() for w in _KEY_WORDS.findall(key or ""))


@dataclass(slots=True)
class _Slot:
    text: str
    context: tuple[str, ...]
    ner: bool


class Deidentifier:
    """Holds the analyzer (one per process: loading spaCy takes seconds)."""

    def __init__(self, config: DeidConfig, cache_size: int = 50_000, language: str | None = None,
                 extra: LanguageDeidConfig | None = None, also: Deidentifier | None = None) -> None:
        """``language``: the language of the texts (the pipeline's base one
        by default); ``extra``: what that language adds (``[languages.<code>.deid]``);
        ``also``: the base language's de-identifier, for the words of that
        language inside these texts."""
        self.config = config
        self.also = also
        self.language = language or config.language
        self.analyzer = build_analyzer(config, self.language, extra)
        self.anonymizer = AnonymizerEngine()
        self._nlp_engine = self.analyzer.nlp_engine
        self._blank = spacy.blank(self.language)
        self._common = common_words(config.spacy_model)
        self._dictionary = common_words(config.spacy_model, include_nouns=True)
        given, family = name_lists()
        self._known_names = given | family
        self._entities = list(config.entities)
        self.allow = frozenset(v.lower() for v in [*config.allow_list, *(extra.allow_list if extra else [])])
        self.field_entities = {k.lower(): v for k, v in config.field_entities.items() if v in config.entities}
        self._wanted = frozenset(config.entities)
        self._cache: OrderedDict[tuple[str, tuple[str, ...], bool], tuple[Span, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._star = config.replacement.mask_char
        self._non_personal = re.compile("|".join(f"(?:{p})" for p in config.non_personal_codes)) \
            if config.non_personal_codes else None
        self._masked_run = self._star * 3

    # -- detection -----------------------------------------------------------

    def detect(self, text: str, context: Iterable[str] = (), ner: bool = True) -> list[Span]:
        return list(self.detect_many([(text, tuple(context), ner)])[0])

    def detect_many(self, requests: list[tuple[str, tuple[str, ...], bool]]) -> list[tuple[Span, ...]]:
        """Detect spans in many texts; texts needing NER go through spaCy in
        one batch (``nlp.pipe``), which is several times faster than one call
        per text.  A text longer than ``WINDOW`` characters is read in
        overlapping windows (:func:`windows`): Presidio's context step costs
        (spans x tokens) per text, so one huge text would take time that
        grows with the square of its length.  The pieces go through spaCy
        in groups of at most ``GROUP_CHARS`` characters (:func:`piece_groups`):
        a group's parsed documents are kept until its second look, so memory
        is bounded by the group, not by the ticket's length.  Each text is
        read in its normalised view (:mod:`cirrus.ingest.deid.normalize`:
        ``＠``, ``&#64;``, ``%40``, zero-width characters) and what is found
        is mapped back onto its original characters."""
        pieces: list[tuple[str, tuple[str, ...], bool]] = []
        layout: list[list[tuple[int, int]]] = []  # per request: (piece index, offset)
        views = [normalised_view(text) for text, _, _ in requests]
        for (text, context, ner), view in zip(requests, views):
            parts = []
            for offset, window in windows(view.text if view is not None else text):
                parts.append((len(pieces), offset))
                pieces.append((window, context, ner))
            layout.append(parts)
        found = [spans for group in piece_groups(pieces) for spans in self._detect_pieces(group)]
        out = []
        for parts in layout:
            if len(parts) == 1:
                out.append(found[parts[0][0]])
                continue
            spans = {Span(sp.start + offset, sp.end + offset, sp.entity, sp.score)
                     for index, offset in parts for sp in found[index]}
            out.append(tuple(resolve_overlaps(spans)))
        for index, view in enumerate(views):
            if view is not None and out[index]:
                out[index] = tuple(resolve_overlaps(
                    Span(*view.original(sp.start, sp.end), sp.entity, sp.score) for sp in out[index]))
        if self.also is not None:
            out = self._with_also(requests, out)
        return out

    def _with_also(self, requests: list[tuple[str, tuple[str, ...], bool]],
                   out: list[tuple[Span, ...]]) -> list[tuple[Span, ...]]:
        """Mixed-language text: the English de-identifier also reads the texts
        that hold English words ("我同事 John Smith 说..."), and what it finds
        outside Chinese characters is added."""
        mixed = [i for i, (text, _, _) in enumerate(requests) if len(_LATIN_WORDS.findall(text)) >= 2]
        if not mixed:
            return out
        english = self.also.detect_many([(requests[i][0], requests[i][1], " " in requests[i][0]) for i in mixed])
        out = list(out)
        for i, spans in zip(mixed, english):
            text = requests[i][0]
            extra = [part for sp in spans for part in _outside_han(text, sp)
                     if text[part.start:part.end].lower() not in self.allow]
            if extra:
                out[i] = tuple(resolve_overlaps([*out[i], *extra]))
        return out

    def _detect_pieces(self, requests: list[tuple[str, tuple[str, ...], bool]]) -> list[tuple[Span, ...]]:
        out: list[tuple[Span, ...] | None] = [self._cache_get(r) for r in requests]
        todo = [i for i, r in enumerate(out) if r is None]
        ner_idx = [i for i in todo if requests[i][2]]
        plain_idx = [i for i in todo if not requests[i][2]]
        lang = self.language
        if ner_idx:
            docs = self._nlp_engine.nlp[lang].pipe([requests[i][0] for i in ner_idx], batch_size=32)
            first_docs = {}
            for i, doc in zip(ner_idx, docs):
                first_docs[i] = doc
                out[i] = self._analyze(requests[i], self._nlp_engine._doc_to_nlp_artifact(doc, lang))
            self._second_look(requests, out, first_docs)
        for i in plain_idx:
            out[i] = self._analyze(requests[i], self._nlp_engine._doc_to_nlp_artifact(self._blank(requests[i][0]), lang))
        return out  # type: ignore[return-value]

    def _second_look(self, requests: list[tuple[str, tuple[str, ...], bool]], out: list[Any],
                     first_docs: dict[int, Any]) -> None:
        """NER again on the texts where values were found, with those values
        masked the way the output will be: a key glued to a name can hide the
        name from spaCy ("LTAI5tQx... Jane Roe" is one ORG to it), and a
        masked neighbour can reveal one ("Ja*** Ro***, Grace"); what the
        output would show a second pass is found now, so de-identifying the
        output again changes nothing more.  What the first look named
        otherwise (an ORG: "Harborline Freight") stays, unless that entity
        ran into a value found."""
        lang = self.language
        again = [i for i in first_docs if out[i]]
        if not again:
            return
        views = [_masked_view(requests[i][0], out[i], self.config.replacement.mask_char) for i in again]
        docs = self._nlp_engine.nlp[lang].pipe([text for text, _ in views], batch_size=32)
        for i, (text, segments), doc in zip(again, views, docs):
            request = requests[i]
            artifacts = self._nlp_engine._doc_to_nlp_artifact(doc, lang)
            if not self._person_candidates((text, request[1], request[2]), artifacts):
                continue  # no name in the masked view: the whole analysis below would add nothing
            found = self._analyze((text, request[1], request[2]), artifacts, cache=False)
            named = [(e.start_char, e.end_char) for e in first_docs[i].ents
                     if not any(e.start_char < v.end and v.start < e.end_char for v in out[i])]
            people = [moved for sp in found if sp.entity == "PERSON"
                      for moved in [_map_back(sp, segments)] if moved is not None
                      and not any(moved.start < end and start < moved.end for start, end in named)]
            if people:
                out[i] = tuple(resolve_overlaps([*out[i], *people]))
                self._cache[request] = out[i]

    def _cache_get(self, request: tuple[str, tuple[str, ...], bool]) -> tuple[Span, ...] | None:
        hit = self._cache.get(request)
        if hit is not None:
            self._cache.move_to_end(request)
        return hit

    def _person_candidates(self, request: tuple[str, tuple[str, ...], bool], artifacts: Any) -> bool:
        """Whether the analysis of ``request`` can keep a PERSON span: the
        PERSON recognizers alone, each find through the same checks as in
        :meth:`_analyze`.  Presidio's steps before those checks treat each
        entity type on its own (duplicates are removed within a type, context
        raises a result's own score), so the PERSON results of a full analysis
        are these; when none passes, a full analysis keeps no PERSON span."""
        if "PERSON" not in self._wanted:
            return False
        text, context, _ = request
        try:
            results = self.analyzer.analyze(text, language=self.language, entities=["PERSON"],
                                             nlp_artifacts=artifacts, context=list(context) or None)
        except ValueError:  # no recognizer for PERSON in this language: the full analysis decides
            return True
        return any(sp.entity == "PERSON" for sp in self._checked(text, results, artifacts))

    def _analyze(self, request: tuple[str, tuple[str, ...], bool], artifacts: Any, cache: bool = True
                 ) -> tuple[Span, ...]:
        text, context, _ = request
        results = self.analyzer.analyze(
            text,
            language=self.language,
            entities=self._entities,
            nlp_artifacts=artifacts,
            context=list(context) or None,
        )
        kept = self._checked(text, results, artifacts)
        references = [sp for sp in kept if sp.entity == "REFERENCE_ID"]
        if references:  # digits a phone rule found inside a reference code are the code's ("INV-2025-000871")
            kept = [sp for sp in kept if not (sp.entity == "PHONE_NUMBER" and any(
                ref.start <= sp.start and sp.end <= ref.end and (ref.start, ref.end) != (sp.start, sp.end)
                for ref in references))]
        spans = tuple(resolve_overlaps(kept))
        if not cache:
            return spans
        self._cache[request] = spans
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return spans

    def _checked(self, text: str, results: list[RecognizerResult], artifacts: Any) -> list[Span]:
        """The results that pass the checks made on each one alone."""
        kept = []
        for r in results:
            if r.entity_type == "PERSON":
                r = self._clean_person(text, r, artifacts)
            if r is None or r.score < self.config.score_threshold or not text[r.start : r.end].strip():
                continue
            if text[r.start : r.end].lower() in self.allow:
                continue
            if self._non_personal is not None and self._non_personal.fullmatch(_code_around(text, r.start, r.end)):
                continue  # a reference code the pipeline declares non-personal
            if self._masked_run in text[r.start : r.end] or self._star in (text[r.start - 1 : r.start] + text[r.end : r.end + 1]):
                continue  # part of a value masked already ("Ja" of Ja***): de-identifying twice changes nothing
            if r.entity_type == "PHONE_NUMBER" and not_a_phone(text[r.start : r.end]):
                continue
            if r.entity_type == "PHONE_NUMBER" and _GLUED.search(text[max(0, r.start - 1) : r.start] + "|" + text[r.end : r.end + 1]):
                continue  # digits inside an identifier: gift_card_1647044
            kept.append(Span(r.start, r.end, r.entity_type, r.score))
        return kept

    def _clean_person(self, text: str, result: RecognizerResult, artifacts: Any) -> RecognizerResult | None:
        """Trim punctuation NER leaves on names ("Daniel!", "Misty's"), cut
        spans at line breaks and UI paths ("Hannah Brooks > Edit"), and drop
        single words it takes for names that are dictionary words and nobody's
        name ("still saying Stopping", lemma "stop"; "Arrival"); Frank and
        White stay names."""
        from_ner = (result.recognition_metadata or {}).get("recognizer_name") == "SpacyRecognizer"
        span_text = text[result.start : result.end]
        segment = next((m for m in re.finditer(r"[^\n>|]+", span_text) if m.group().strip(_NAME_EDGE)), None)
        if segment is None:
            return None
        stripped = _POSSESSIVE.sub("", segment.group().strip(_NAME_EDGE)).strip(_NAME_EDGE)
        if not stripped or _NOT_A_NAME.search(stripped):
            return None
        start = result.start + segment.start() + segment.group().index(stripped)
        result = RecognizerResult(result.entity_type, start, start + len(stripped), result.score)
        if stripped.isupper() and len(stripped) <= 6:
            return None  # ICMP, SSH: acronyms
        if from_ner and stripped.islower() and (in_dictionary(stripped, self._dictionary) or (
                " " not in stripped and stripped.title() not in self._known_names) or any(
                in_dictionary(word, self._dictionary) and word.title() not in self._known_names
                for word in stripped.split())):
            return None  # "the devs", "snapshot keeps failing": NER on lower-case words that are nobody's name
        if _is_place(text, result.start, result.end):
            return None  # "from Atlanta (ATL)", "Dallas/Fort Worth (DFW)", "Denver Airport": a place
        if self._is_product(text, result.start, result.end):
            return None  # "Kettle Classic (red)", "a new Aurora Lamp", "Dance" in 我买的Dance鞋子
        if " " not in stripped:
            token = next((tok for tok in artifacts.tokens if tok.idx == start), None)
            lemma = next((lem for tok, lem in zip(artifacts.tokens, artifacts.lemmas) if tok.idx == start), "")
            common = in_dictionary(stripped, self._dictionary) or (lemma and lemma.lower() in self._common)
            if common and stripped not in self._known_names:
                return None
            if token is not None and getattr(token, "tag_", "") in _NOT_NAME_TAGS and stripped not in self._known_names:
                return None  # "Shall I refund ...?": a modal verb at a sentence's start, by its grammar
        return result

    def _is_product(self, text: str, start: int, end: int) -> bool:
        """Whether a name NER found is a product's name, by its context: a
        variant in brackets after it ("Kettle Classic (red)", "Warrior（白色，
        42码）") or a determiner before it ("a Kettle Classic", "the new
        Aurora Lamp") when a word of it is a dictionary word that is nobody's
        name (Kettle, Lamp; not "Sarah Connor (red)", "the Frank White");
        or a single Latin word inside Chinese text ("我买的Dance鞋子",
        "Warrior旗舰店") that is a dictionary word or no known name, with no
        name cue next to it (我叫Michael, Tom你好 stay names)."""
        value = text[start:end]
        if _HAN_NEAR.search(value):
            # English NER across Chinese text ("Pro（黑色）运动鞋"): its Latin words decide
            pieces = list(_LATIN_PIECE.finditer(value))
            return bool(pieces) and all(self._is_product(text, start + m.start(), start + m.end()) for m in pieces)
        lead = _LEADING_DETERMINER.match(value)
        words = value[lead.end():].split() if lead else value.split()
        if not words:
            return False
        productish = any(in_dictionary(w, self._dictionary) and w not in self._known_names
                         and w.rstrip(".") not in _HONORIFICS for w in words)
        if productish and (_VARIANT_AFTER.match(text, end) or lead is not None
                           or _DETERMINER_BEFORE.search(text[max(0, start - 40):start])):
            return True
        alone = not (_LATIN_BEFORE.search(text[max(0, start - 40):start]) or _LATIN_AFTER.match(text, end))
        if len(words) == 1 and alone and _LATIN_NAME_WORD.fullmatch(words[0]) and (
                _HAN_NEAR.search(text[max(0, start - 12):start]) or _HAN_NEAR.search(text[end:end + 12])):
            word = words[0]
            name_like = word in self._known_names and not in_dictionary(word, self._dictionary)
            if name_like:
                return False
            if _ZH_NAME_CUE_BEFORE.search(text[max(0, start - 8):start]) or _ZH_NAME_CUE_AFTER.match(text[end:end + 8]):
                return False
            return True
        return False

    # -- a whole ticket --------------------------------------------------------

    def deidentify(self, ticket: Ticket) -> tuple[Ticket, Counter[str]]:
        """The ticket with every text and JSON leaf de-identified, and the
        number of replacements by entity type."""
        vocabulary, spans_by_text, leaves = self._detect_ticket(ticket)
        rewriter = _TicketRewriter(self, vocabulary, spans_by_text, leaves)
        new_ticket = replace(
            ticket,
            ticket_id=self.safe_ticket_id(ticket.ticket_id, rewriter),
            category=_same_or(ticket.category, rewriter.text),
            channel=_same_or(ticket.channel, rewriter.text),
            status=rewriter.text(ticket.status),
            events=[rewriter.event(e) for e in ticket.events],
            knowledge=[KnowledgeDoc(rewriter.text(d.doc_id), rewriter.text(d.title), rewriter.text(d.text))
                       for d in ticket.knowledge],
        )
        return new_ticket, rewriter.counts

    def found_values(self, ticket: Ticket) -> dict[str, str]:
        """Every personal value and secret detected in ``ticket``, with its
        entity type: what de-identification replaces (``cirrus audit --raw``
        searches a workspace for them)."""
        vocabulary, spans_by_text, leaves = self._detect_ticket(ticket)
        found = {v: e for v, e in vocabulary.items() if _long_enough(v, e)}
        found.update({v: e for v, e in leaves.items() if len(v) >= 2})
        for text, spans in spans_by_text.items():
            for span in spans:
                found.setdefault(text[span.start:span.end], span.entity)
        return found

    def prefetch(self, tickets: Iterable[Ticket]) -> None:
        """Detect what several tickets hold in one batch, ahead of their
        :meth:`deidentify`: spaCy reads the texts of all of them together
        (``nlp.pipe`` over the batch costs far less than one call per ticket
        on short tickets), and what is found waits in the detection cache,
        where each ticket's own detection finds it.  The same requests give
        the same spans either way, so the output does not change; a ticket
        that cannot be read here is left to its own detection."""
        requests: dict[tuple[str, tuple[str, ...], bool], None] = {}
        for ticket in tickets:
            try:
                slots = self._gather(ticket)[0]
            except Exception:  # noqa: BLE001 -- deidentify() meets it again and the ticket is quarantined there
                continue
            requests.update(slots)
        todo = [r for r in requests if r not in self._cache]
        if todo and len(todo) <= self._cache_size // 2:  # all of them stay in the cache until used
            self.detect_many(todo)

    def _gather(self, ticket: Ticket) -> tuple[dict[tuple[str, tuple[str, ...], bool], None], dict[str, str],
                                               list[tuple[str, tuple[str, ...], list[tuple[int, int, str]]]],
                                               dict[str, str], list[tuple[str, int]]]:
        """What detection reads in ``ticket``: the requests (text, context,
        NER or not), the values of fields named as personal data, the joins
        of sibling values, the identifiers (as read) and the seams between
        messages."""
        slots: dict[tuple[str, tuple[str, ...], bool], None] = {}
        vocabulary: dict[str, str] = {}
        joins: list[tuple[str, tuple[str, ...], list[tuple[int, int, str]]]] = []

        def add_join(children: list[tuple[str | None, Any]], key: str | None) -> None:
            """Sibling scalars read together: a value split over them is found whole."""
            pieces = [(k, str(v)) for k, v in children
                      if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()]
            if not 2 <= len(pieces) <= 8 or sum(len(v) for _, v in pieces) > 200:
                return
            if sum(1 for _, v in pieces if sum(c.isdigit() for c in v) >= 2 or "@" in v) < 2:
                return  # the values worth joining are numbers (a phone, a card) and addresses
            named = {word for k in (key, *(k for k, _ in pieces)) if k for word in key_words(k)}
            if not named & _SPLIT_KEY_WORDS:
                return  # only where a key says so: sibling counts ("Inbox": 1204, "Sent": 2311) are no phone
            text, bounds, context = "", [], list(_key_context(key))
            for k, value in pieces:
                start = len(text) + (1 if text else 0)
                text = f"{text} {value}" if text else value
                bounds.append((start, start + len(value), value))
                context += _key_context(k)
            joins.append((text, tuple(dict.fromkeys(context)), bounds))
            slots.setdefault((text, tuple(dict.fromkeys(context)), False), None)

        def add_text(text: str, context: tuple[str, ...] = ()) -> None:
            if text and text.strip():
                # masks do not count: a masked text gets NER only if its original did
                ner = len(text) - text.count(self._star) >= self.config.ner_min_chars and " " in text.strip()
                slots[(text, context, ner)] = None

        def visit_json(value: Any, key: str | None) -> None:
            if isinstance(value, dict):
                add_join([(str(k), v) for k, v in value.items()], key)
                for k, v in value.items():
                    visit_json(v, str(k))
            elif isinstance(value, list):
                add_join([(None, v) for v in value], key)
                for v in value:
                    visit_json(v, key)
            elif isinstance(value, bool) or value is None:
                return
            else:
                as_text = str(value)
                entity = self.field_entity(key)
                embedded = embedded_json(value) if isinstance(value, str) else None
                if embedded is None and isinstance(value, str):
                    embedded = embedded_xml(value)
                if embedded is not None:  # a JSON or XML document inside a string: read as structure too
                    visit_json(embedded, key)
                    visit_keys(embedded)
                if entity and as_text.strip():  # a named field is personal data, allow list or not
                    vocabulary.setdefault(as_text, entity)
                elif isinstance(value, str) or len(as_text.replace(".", "").lstrip("-")) >= 7:
                    add_text(as_text, _key_context(key))

        identifiers: dict[str, str] = {}  # an identifier -> the text detection reads

        def add_identifier(value: str | None) -> None:
            """Ids, tool names, metadata and JSON keys: read with ``_`` as a
            space (same length, so spans fit the original), since
            ``callback__14155550142`` hides a phone number from patterns that
            want a word boundary."""
            if value and value.strip() and value not in identifiers:
                identifiers[value] = value.replace("_", " ")
                add_text(identifiers[value])

        def visit_keys(value: Any) -> None:
            stack = [value]
            while stack:
                item = stack.pop()
                if isinstance(item, dict):
                    for key, child in item.items():
                        add_identifier(str(key))
                        stack.append(child)
                elif isinstance(item, list):
                    stack.extend(item)

        for event in ticket.events:
            add_text(event.text)
            for ocr in event.ocr:
                add_text(ocr)
            visit_json(event.arguments, None)
            visit_json(event.content, None)
            visit_keys(event.arguments)
            visit_keys(event.content)
            add_identifier(event.name)
        for doc in ticket.knowledge:
            add_text(doc.title)
            add_text(doc.text)
            add_identifier(doc.doc_id)
        for value in (ticket.ticket_id, ticket.category, ticket.channel, ticket.status):
            add_identifier(value)
        seams = _seams(ticket.events)
        for glued, _ in seams:
            slots.setdefault((glued, (), False), None)
        return slots, vocabulary, joins, identifiers, seams

    def _detect_ticket(self, ticket: Ticket) -> tuple[dict[str, str], dict[str, list[Span]], dict[str, str]]:
        """The ticket's vocabulary (every value found, with its entity), the
        spans found in each of its texts, and the JSON leaves that are parts
        of one value split over sibling fields or array elements (a phone's
        area code and number), each replaced whole wherever it is a leaf."""
        slots, vocabulary, joins, identifiers, seams = self._gather(ticket)
        requests = list(slots)
        detected = dict(zip(requests, self.detect_many(requests)))
        own_id = ticket.ticket_id
        spans_by_text: dict[str, list[Span]] = {}
        glued = {text for text, _ in seams}
        for (text, _, _), spans in detected.items():
            if text not in glued:  # a seam is read for the values that cross it, below
                # the ticket's own id is the benchmark's key, not a reference to hide (docs/identifiers.md)
                spans_by_text.setdefault(text, []).extend(
                    sp for sp in spans if not (sp.entity == "REFERENCE_ID" and text[sp.start:sp.end] == own_id))
        given, family = name_lists()
        for original, read_as in identifiers.items():
            # a JSON key or an id is code: a name in it needs a name's evidence ("olivia_hartmann",
            # "Olivia Hartmann"), not NER's guess on lower-case words ("eta_business_days")
            spans_by_text[read_as] = [sp for sp in spans_by_text.get(read_as, ()) if sp.entity != "PERSON"
                                      or _names_evidence(read_as[sp.start:sp.end], given, family)]
            spans_by_text[read_as] = resolve_overlaps([*spans_by_text[read_as], *_name_pairs(read_as, given, family)])
            if read_as != original:
                spans_by_text.setdefault(original, []).extend(spans_by_text.get(read_as, ()))
                # "gift_card_1646646": a short number inside an id is the id's
                # serial, not a phone (one with a country or area code has 10+ digits)
                spans_by_text[read_as] = [sp for sp in spans_by_text.get(read_as, ()) if not (
                    sp.entity == "PHONE_NUMBER" and sum(c.isdigit() for c in read_as[sp.start:sp.end]) < 10)]
                spans_by_text[original] = [sp for sp in spans_by_text[original] if not (
                    sp.entity == "PHONE_NUMBER" and sum(c.isdigit() for c in original[sp.start:sp.end]) < 10)]
        for text, spans in spans_by_text.items():
            for span in spans:
                vocabulary.setdefault(text[span.start : span.end], span.entity)
        for glued, cut in seams:  # a value split across two messages: each part is replaced
            for span in detected.get((glued, (), False), ()):
                if span.start < cut < span.end and span.entity in _SPLIT_ENTITIES:
                    before, after = glued[span.start:cut].strip(), glued[cut:span.end].strip()
                    whole_after = any(found.entity == span.entity and found.start == 0
                                      for found in self.detect(glued[cut:].strip(), ner=False))
                    if whole_after:  # "... locked" + "jane@x.fr ...": the second message holds it whole
                        continue
                    for part in (before, after):
                        if len(part) >= 2:
                            vocabulary.setdefault(part, span.entity)
        leaves: dict[str, str] = {}
        for text, context, bounds in joins:  # a value split over sibling fields or array elements
            for span in detected.get((text, context, False), ()):
                parts = [value for start, end, value in bounds if start < span.end and span.start < end]
                if span.entity in _SPLIT_ENTITIES and len(parts) >= 2:
                    for value in parts:
                        leaves.setdefault(value, span.entity)
        self._add_name_parts(vocabulary)
        return vocabulary, spans_by_text, leaves

    def field_entity(self, key: str | None) -> str | None:
        """The entity a field named ``key`` holds: the pipeline's
        ``[deid.field_entities]`` first, then what the key's words say
        (:mod:`cirrus.ingest.deid.keys`, unless ``read_key_names`` is off)."""
        if not key:
            return None
        entity = self.field_entities.get(key.lower())
        if entity is None and self.config.read_key_names:
            entity = entity_of_key(key)
        return entity if entity in self._wanted else None

    def is_word(self, word: str) -> bool:
        """An ordinary English word (the spaCy model's dictionary)."""
        return in_dictionary(word, self._dictionary)

    def safe_ticket_id(self, ticket_id: str, rewriter: _TicketRewriter | None = None) -> str:
        """``ticket_id`` as it is, or, when it holds personal data, its
        pseudonym (:func:`pseudonymous_id`): the same input always gives the
        same id, so duplicates are still found and runs still line up.
        ``rewriter``: the ticket's, whose vocabulary also counts (an id made
        of a name the messages hold); without one, the id is checked alone."""
        if rewriter is None:
            found = bool(self.detect(ticket_id.replace("_", " "), ner=False))
        else:
            found = rewriter.text(ticket_id) != ticket_id
        return pseudonymous_id(ticket_id) if found else ticket_id

    def _add_name_parts(self, vocabulary: dict[str, str]) -> None:
        """Given and family names of a detected person are replaced wherever
        they stand alone ("Thanks, Laura" after "Laura Chen"), unless the part
        is an ordinary word that is nobody's name ("Security" of a title NER
        took for a person)."""
        for value, entity in list(vocabulary.items()):
            handle = _HANDLE.fullmatch(value) if entity == "ACCOUNT_ID" else None
            if handle and all(part.title() in self._known_names for part in handle.groups()):
                value, entity = " ".join(part.title() for part in handle.groups()), "PERSON"
                vocabulary.setdefault(value, entity)
            if entity == "PERSON":
                for part in value.split():
                    if (len(part) >= _MIN_VOCAB_LEN and part[0].isupper() and part.lower() not in self.allow
                            and (part in self._known_names or not in_dictionary(part, self._dictionary))):
                        vocabulary.setdefault(part, "PERSON")


_DIGIT_SEPARATORS = r"[\s.\-/()]{0,3}"
_DIGITS_ONLY = re.compile(r"\+?[\d\s.\-/()]+")


def _outside_han(text: str, span: Span) -> list[Span]:
    """The parts of ``span`` outside Chinese characters that hold a Latin
    word: English NER reads "我同事 John Smith" as one name; "John Smith" is."""
    value = text[span.start:span.end]
    if not _HAN.search(value):
        return [span]
    parts = []
    for m in re.finditer(f"[^{HAN_RANGES}{CJK_PUNCT_RANGES}]+", value):
        piece = m.group()
        stripped = piece.strip(_NAME_EDGE)
        if _LATIN_WORDS.search(stripped):
            start = span.start + m.start() + piece.index(stripped)
            parts.append(Span(start, start + len(stripped), span.entity, span.score))
    return parts


class Deidentifiers:
    """One :class:`Deidentifier` per language a pipeline knows, built when a
    ticket in that language first comes (a language's models load once)."""

    def __init__(self, pipeline: PipelineConfig) -> None:
        self.pipeline = pipeline
        self._by_language: dict[str, Deidentifier] = {pipeline.deid.language: Deidentifier(pipeline.deid)}

    def documents(self, docs: list[KnowledgeDoc]) -> list[KnowledgeDoc]:
        """Knowledge documents (a ``--kb`` folder) de-identified one by one,
        each by the de-identifier of its language (Chinese when it holds Han
        characters): a help article's hotline, a staff member's name or a
        password in a how-to are masked as in a ticket."""
        cleaned = []
        for doc in docs:
            language = "zh" if _HAN_IN_TEXT.search(doc.text) else self.pipeline.deid.language
            deid = self.for_language(language)
            # the body as a ticket's text; the title and id (written by the business, in Title Case
            # that NER misreads: "Troubleshoot SSH") are changed only where a pattern finds a value
            holder = Ticket("kb", [Event("agent", doc.text)], SourceRef("kb"))
            done, _ = deid.deidentify(holder)
            title, doc_id = (value if not deid.detect(value, ner=False) else
                             deid.deidentify(Ticket("kb", [Event("agent", value)], SourceRef("kb")))[0].events[0].text
                             for value in (doc.title, doc.doc_id))
            cleaned.append(KnowledgeDoc(doc_id, title, done.events[0].text))
        return cleaned

    @property
    def base(self) -> Deidentifier:
        return self._by_language[self.pipeline.deid.language]

    def for_language(self, language: str) -> Deidentifier:
        """The de-identifier for ``language``: its own when the pipeline has
        a ``[languages.<code>]`` section, else the base one."""
        if language not in self.pipeline.languages:
            return self.base
        if language not in self._by_language:
            section = self.pipeline.languages[language]
            self._by_language[language] = Deidentifier(self.pipeline.deid, language=language, extra=section.deid,
                                                       also=self.base)
        return self._by_language[language]


def embedded_json(text: str) -> Any:
    """The JSON object or array a string holds (a tool result's ``payload``
    written as JSON text), or None."""
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) and value else None


def embedded_xml(text: str, limit: int = 100_000) -> Any:
    """The XML fragment a string holds, as nested dicts and lists (element
    names and attributes as keys, text as values) for reading by structure;
    None when it is no XML.  Its occurrences are replaced in the string as
    text (no re-serialisation).  The standard parser resolves no external
    entity, and its expat refuses entity expansion attacks."""
    stripped = text.strip()
    if len(stripped) > limit or not (stripped.startswith("<") and stripped.endswith(">") and "</" in stripped):
        return None
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.fromstring(stripped)
    except (ElementTree.ParseError, ValueError):
        return None

    def as_data(element: Any) -> Any:
        data: dict[str, Any] = {name.rpartition("}")[2]: value for name, value in element.attrib.items()}
        children = [(child.tag.rpartition("}")[2], as_data(child)) for child in element]
        repeated: dict[str, list[Any]] = {}
        for tag, child in children:
            repeated.setdefault(tag, []).append(child)
        for tag, values in repeated.items():
            data[tag] = values[0] if len(values) == 1 else values
        if element.text and element.text.strip():
            if not data:
                return element.text.strip()
            data["#text"] = element.text.strip()
        return data

    return {root.tag.rpartition("}")[2]: as_data(root)}


_CODE_CHAR = re.compile(r"[A-Za-z0-9_/#.-]")


def _code_around(text: str, start: int, end: int) -> str:
    """The whole code a detected span lies in ("INV-2025-000871" around the
    digits a phone rule found), trailing dots left out."""
    while start > 0 and _CODE_CHAR.match(text[start - 1]):
        start -= 1
    while end < len(text) and _CODE_CHAR.match(text[end]):
        end += 1
    return text[start:end].rstrip(".")


def _masked_view(text: str, spans: Iterable[Span], star: str) -> tuple[str, list[tuple[int, int, int]]]:
    """``text`` with each span replaced by its mask, and the unmasked
    segments as (start in the view, start in ``text``, length)."""
    from cirrus.ingest.deid.pseudonyms import mask

    parts, segments, at, view_at = [], [], 0, 0
    for sp in sorted(spans, key=lambda s: s.start):
        if sp.start < at:
            continue
        segments.append((view_at, at, sp.start - at))
        parts.append(text[at:sp.start])
        view_at += sp.start - at
        shown = mask(sp.entity, text[sp.start:sp.end], star)
        parts.append(shown)
        view_at += len(shown)
        at = sp.end
    segments.append((view_at, at, len(text) - at))
    parts.append(text[at:])
    return "".join(parts), segments


def _map_back(span: Span, segments: list[tuple[int, int, int]]) -> Span | None:
    """The span at its place in the original text, if it lies in one
    unmasked segment of the view."""
    for view_start, start, length in segments:
        if view_start <= span.start and span.end <= view_start + length:
            shift = start - view_start
            return Span(span.start + shift, span.end + shift, span.entity, span.score)
    return None


def _digit_heavy(value: str) -> bool:
    return bool(_DIGITS_ONLY.fullmatch(value)) and sum(c.isdigit() for c in value) >= 7


def _form(value: str) -> str:
    """What two occurrences of one value share: the digits of a number, the
    lower-case text of anything else."""
    return "".join(c for c in value if c.isdigit()) if _digit_heavy(value) else value.lower()


def _occurrence_pattern(value: str, entity: str, is_word: Callable[[str], bool] = lambda _: True) -> str:
    """A regex for every occurrence of a found value: a number (a phone, a
    card, an account) with any spacing or separators between its digits
    (``4111 1111``, ``4111.1111``, ``4111-1111``); a value of several words,
    or with digits or symbols (a full name, an e-mail address, a handle) in
    any letter case (``crystal minh`` after ``Crystal Minh``).  A single name
    word is matched in any case unless it is an ordinary word (``is_word``):
    "laura@mbp" and "lina-studio.com" after "Laura", "Lina"; but "Will",
    "May" or "Grace" must not mask "will", "may" and "grace period"."""
    if _digit_heavy(value):
        return _DIGIT_SEPARATORS.join(c for c in value if c.isdigit())
    if entity == "PERSON" and value.isalpha() and is_word(value.lower()):
        return re.escape(value)
    return "(?i:" + re.escape(value) + ")"


# values a customer may split over two messages ("my mail is jane.roe@" +
# "example.com"); names are left to NER on each message
# key words under which a value may be split over sibling fields or array elements
_SPLIT_KEY_WORDS = frozenset({"phone", "mobile", "tel", "telephone", "fax", "cell", "card", "iban", "ssn", "email",
                              "mail", "account", "contact", "msisdn", "pan"})
_SPLIT_ENTITIES = frozenset({"EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN",
                             "CN_RESIDENT_ID", "CLOUD_ACCESS_KEY", "SECRET", "IP_ADDRESS"})
_SEAM_CHARS = 80


def _seams(events: list[Event]) -> list[tuple[str, int]]:
    """The joins of consecutive messages of one speaker (as canonicalize
    merges them): the end of one and the start of the next, glued with
    nothing and with a space, and where the first ends."""
    seams = []
    for before, after in zip(events, events[1:]):
        if before.role == after.role and before.role in ("customer", "agent") and before.text.strip() \
                and after.text.strip():
            tail, head = before.text.strip()[-_SEAM_CHARS:], after.text.strip()[:_SEAM_CHARS]
            seams += [(tail + head, len(tail)), (tail + " " + head, len(tail))]
    return seams


WINDOW = 20_000
WINDOW_OVERLAP = 2_000  # longer than any value found (a PEM key block is about 1,700)


def windows(text: str, size: int | None = None, overlap: int | None = None) -> list[tuple[int, str]]:
    """``text`` as ``(offset, piece)`` windows of at most ``size``
    characters, each starting ``overlap`` characters before the previous one
    ends (at a space where one is near), so a value at a seam is whole in one
    of them; the text itself when it fits.  Defaults: ``WINDOW``,
    ``WINDOW_OVERLAP``."""
    size = size or WINDOW
    overlap = overlap or WINDOW_OVERLAP
    if len(text) <= size:
        return [(0, text)]
    out = []
    start = 0
    while True:
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", end - overlap // 2, end)
            end = space if space > start else end
        out.append((start, text[start:end]))
        if end >= len(text):
            return out
        next_start = end - overlap
        space = text.find(" ", next_start, end)
        start = space + 1 if 0 <= space < end else next_start


GROUP_CHARS = 100_000  # characters of text parsed by spaCy at once (docs held for the second look)


def piece_groups(pieces: list[tuple[str, tuple[str, ...], bool]],
                 limit: int | None = None) -> Iterator[list[tuple[str, tuple[str, ...], bool]]]:
    """``pieces`` in consecutive groups of at most ``limit`` characters
    (default ``GROUP_CHARS``; a longer piece alone): a ticket of ordinary
    length is one group, as it always was."""
    limit = limit or GROUP_CHARS
    group: list[tuple[str, tuple[str, ...], bool]] = []
    size = 0
    for piece in pieces:
        if group and size + len(piece[0]) > limit:
            yield group
            group, size = [], 0
        group.append(piece)
        size += len(piece[0])
    if group:
        yield group


def _same_or(value: str | None, rewrite: Callable[[str], str]) -> str | None:
    return value if value is None else rewrite(value)


_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class _TicketRewriter:
    """Rewrites the texts of one ticket with one pseudonymizer."""

    def __init__(self, deid: Deidentifier, vocabulary: dict[str, str], spans_by_text: dict[str, list[Span]],
                 leaves: dict[str, str] | None = None) -> None:
        self._deid = deid
        self._leaves = leaves or {}
        self._vocabulary = {v: e for v, e in vocabulary.items() if _long_enough(v, e)}
        self._spans_by_text = spans_by_text
        self._pseudonyms = Pseudonymizer(deid.config.replacement)
        self.counts: Counter[str] = Counter()
        values = sorted(self._vocabulary, key=len, reverse=True)
        # every other occurrence, whatever its form: see _occurrence_pattern
        self._by_form = {_form(v): e for v, e in sorted(self._vocabulary.items(), key=lambda ve: -len(ve[0]))}
        self._pattern = (
            re.compile("(?<![0-9A-Za-z])(?:" + "|".join(_occurrence_pattern(v, e, deid.is_word) for v, e in
                                                      ((v, self._vocabulary[v]) for v in values))
                       + ")(?![0-9A-Za-z])") if values else None
        )
        self._operators = {
            entity: OperatorConfig("custom", {"lambda": self._replacer(entity)}) for entity in ENTITY_PRIORITY
        }
        self._operators.update(
            {e: OperatorConfig("custom", {"lambda": self._replacer(e)}) for e in deid.config.entities}
        )

    def _entity_of(self, found: str) -> str:
        return self._vocabulary.get(found) or self._by_form.get(_form(found)) or "PERSON"

    def _replacer(self, entity: str) -> Callable[[str], str]:
        def replace_value(original: str) -> str:
            self.counts[entity] += 1
            return self._pseudonyms.replace(entity, original)

        return replace_value

    def text(self, text: str) -> str:
        if not text:
            return text
        spans = list(self._spans_by_text.get(text, ()))
        if self._pattern is not None:
            for m in self._pattern.finditer(text):
                entity = self._entity_of(m.group())
                if entity == "PERSON" and _is_place(text, m.start(), m.end()):
                    continue  # "Houston" found as a name elsewhere, here "to Houston (IAH)"
                spans.append(Span(m.start(), m.end(), entity, 1.0))
        if not spans:
            return text
        results = [RecognizerResult(s.entity, s.start, s.end, s.score) for s in resolve_overlaps(spans)]
        # never merge two values of one type that only a space separates: the
        # merged "value" would be masked as one (an e-mail by its last @) and
        # leak the rest
        return self._deid.anonymizer.anonymize(text=text, analyzer_results=results, operators=self._operators,
                                               merge_entities_with_spaces=False).text

    def key(self, key: str, taken: dict[str, Any]) -> str:
        """A JSON object key de-identified like any text, made unique among
        the object's keys when two keys are masked alike."""
        new = self.text(key)
        if new == key or new not in taken:
            return new
        number = 2
        while f"{new}~{number}" in taken:
            number += 1
        return f"{new}~{number}"

    def tool_name(self, name: str | None) -> str | None:
        """A tool name de-identified and still a valid function name."""
        if not name:
            return name
        new = self.text(name)
        return name if new == name else _TOOL_NAME_UNSAFE.sub("_", new)

    def json(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                out[self.key(str(k), out)] = self.json(v, str(k))
            return out
        if isinstance(value, list):
            return [self.json(v, key) for v in value]
        if isinstance(value, bool) or value is None:
            return value
        as_text = str(value)
        entity = self._deid.field_entity(key) or self._leaves.get(as_text)
        if entity and as_text.strip():
            return self._replacer(entity)(as_text)
        if isinstance(value, str):
            embedded = embedded_json(value)
            if embedded is not None:  # rewritten as structure, written back as JSON text
                rewritten = self.json(embedded, key)
                return value if rewritten == embedded else json.dumps(rewritten, ensure_ascii=False)
            return self.text(value)
        rewritten = self.text(as_text)
        return value if rewritten == as_text else rewritten  # identifiers become masked strings

    def event(self, event: Event) -> Event:
        return replace(
            event,
            name=self.tool_name(event.name),
            text=self.text(event.text),
            ocr=[self.text(t) for t in event.ocr],
            arguments=self.json(event.arguments),
            content=self.json(event.content),
        )
