"""Postal addresses in free text: street lines, PO boxes and postcodes.

No offline address parser fits detection in free text (docs/identifiers.md, "Addresses"): ``usaddress``
tags any string it is given as an address (it parses, it does not find), ``pyap`` finds only whole
US/CA/GB addresses ending in a city and postcode, and libpostal needs a downloaded model.  So the
recognizer is patterns over a street vocabulary taken from Faker's address providers (a runtime
dependency already): for each of its ~70 locales the words its street-name formats put after a name
("Mews", "Street", "utca", "ул."), before one ("Via", "Calle", "rue", "ul.", "شارع") or glued to one
("-straße", "-gatan", "-laan", "-vej"), read from the formats themselves, so no word list is kept here
but a short list of English street words that are also everyday words in support tickets
(:data:`AMBIGUOUS_SUFFIXES`).

What counts as an address (``STREET_ADDRESS``):

* a street line: a house number and a street name made of capitalised name words and a street word,
  in either order ("57 Holloway Mews", "Via Giuseppe Verdi 14", "12, rue de la Paix", "ul. Polna 12",
  "Keizerslaan 5", "Ленина ул., д. 5"); a number and a street word alone ("2588 Broadway") only after
  an address cue ("live at", "ship to", "address");
* a PO box ("PO Box 4411", "P.O. Box 88", "Postfach 12 34 56", "Apartado 123", "Caixa Postal 45");
* a postcode of its country's format: UK ("SW1A 1AA"; spaced, uppercase, not "8GB"), Irish Eircode
  ("D02 X285"; the unique part mixes letters and digits), US ZIP after a state ("NY 10025") or any
  postal code after its cue word ("zip 94043", "PLZ 10115", "código postal 28013");
* a Japanese address (prefecture, then city or ward, then block numbers, "〒150-0002" before it) and a
  Korean road address (a road name ending in 로/길, then its number).

A number alone is never an address ("2 items", "order 12345"), nor is a room, a gate or a flight.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re

from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult

ENTITY = "STREET_ADDRESS"

# English street words that are also everyday or technical words ("3 Data Centers", "Gate 4",
# "2 Load Balancer Ports", "7 Day Pass"): not street words here
AMBIGUOUS_SUFFIXES = frozenset({
    "access", "block", "branch", "break", "bridge", "center", "centers", "centre", "club", "common", "corner",
    "course", "cross", "edge", "end", "entrance", "extension", "extensions", "fall", "flat", "flats", "follow",
    "formation", "front", "gate", "gates", "gateway", "ground", "key", "keys", "land", "light", "lights", "line",
    "link", "little", "loaf", "lock", "locks", "lower", "mission", "part", "pass", "path", "pocket", "point",
    "points", "port", "ports", "quad", "range", "reach", "reserve", "rest", "ride", "ring", "round", "route",
    "run", "sound", "spring", "springs", "station", "steps", "stream", "strip", "subway", "summit", "top",
    "track", "trailer", "triangle", "tunnel", "turn", "union", "unions", "upper", "view", "views", "wall",
    "well", "wells", "ways", "field", "fields", "forest", "lake", "lakes", "deviation", "distributor", "divide",
    "dip", "ramp", "stand", "radial", "rotary", "drives", "outlook", "rapid", "rapids", "rise", "slope", "trace",
    "approach", "crossing", "interchange", "intersection", "junction", "junctions", "landing", "lookout",
    "passage", "island", "islands", "mall", "river", "mountain", "mountains", "valley", "valleys", "village",
    "villages", "mount", "plain", "plains", "estate", "estates", "green", "greens", "garden", "harbor", "harbors",
    "haven", "isle", "beach", "camp", "canyon", "cape", "ranch", "towers", "retreat", "spur", "spurs", "siding",
    "sur", "para", "tor", "park", "parks", "mill", "mills", "lodge", "manor", "manors",
})
# words glued to a name that end everyday words or city names too ("Notepad", "Monitoring", "Copenhagen")
AMBIGUOUS_GLUED = frozenset({"pad", "ring", "hof", "tie", "lia", "en", "vik", "dal", "hagen", "moen", "roa", "røa",
                             "lei", "ekra", "vika", "myra", "marka", "flata", "gropa", "havna"})
# words before a name that are initials, technical words or areas rather than streets ("R. Jones 3",
# "Diagonal Scaling 2", "Gang Beasts 2", "Distrito Federal")
AMBIGUOUS_PREFIXES = frozenset({"c.", "r.", "gang", "diagonal", "distrito", "corredor", "retorno", "acceso",
                                "privada", "conjunto", "setor", "trecho", "residencial", "área", "area"})
# common abbreviations of English street words, which Faker's lists spell out
_SUFFIX_ALWAYS = ("Street", "St", "St.", "Rd", "Rd.", "Ave", "Ave.", "Blvd", "Ln", "Dr", "Dr.")

_UPPER = "A-ZÀ-ÖØ-ÞĀ-ſΑ-ΩΆ-Ώ\u0400-\u042F"
_CASELESS = "\u0590-\u05FF\u0600-\u06FF\u0900-\u097F\u0E00-\u0E7F"
# a name word: capitalised in a cased script, or any word in a script without case (Hebrew, Arabic, ...)
_NAME_WORD = (rf"(?:[{_UPPER}][\w'’.-]*|[0-9]{{1,3}}(?:st|nd|rd|th|e|er|ª|º)|[{_CASELESS}][{_CASELESS}'-]*)")
# lower-case words inside a street name: "Calle de la Reina", "Rua dos Anjos", "Avenue of the Americas"
_PARTICLE = r"(?:de|del|della|di|da|do|dos|das|du|des|la|le|les|los|las|el|al|van|von|der|den|of|the|y|e|i|ter|ten)"
_NAME = rf"{_NAME_WORD}(?:[ -](?:{_PARTICLE}[ -])*{_NAME_WORD}){{0,3}}"
# a house number: 12, 12a, 12-14, 12/3, 1º
_NUMBER = r"[0-9]{1,5}[A-Za-z]?(?:[-/][0-9]{1,4}[A-Za-z]?)?"
_NUMBER_START = r"(?<![\w$€£¥#.,:/+-])"
_NUMBER_END = r"(?![\w%$€£:]|[.,][0-9])"
# a house marker between a street and its number: "Ленина ул., д. 5", "Jl. Asia Afrika No. 8"
_HOUSE = r"(?:(?:No\.?|Nr\.?|nº|n[.°º]|núm\.?|д\.|дом|буд\.|č\.|#)\s?)?"

# an address cue: what a customer writes before a bare "2588 Broadway"
_ADDRESS_CUE = re.compile(
    r"(?i)(?:address|addr\.?|live[sd]? (?:at|on)|living (?:at|on)|moved to|ship(?:ped|ping)? (?:it )?to|"
    r"deliver(?:ed|y)? (?:it )?to|send (?:it |them )?to|mail(?:ed)? (?:it )?to|located at|residence|"
    r"home (?:is )?(?:at|on)|my place (?:at|on)|billing|shipping|delivery)\W{0,3}(?:\w+\W+){0,3}$")

_PO_BOX = re.compile(
    r"(?i)(?<![\w])(?:p\.?\s?o\.?\s?box|post office box|postfach|postbus|apartado(?: de correos)?|"
    r"caixa postal|casella postale|bo[iî]te postale|skrytka pocztowa|locked bag|private bag|"
    r"а/я|абонентский ящик)\s*(?:no\.?\s*)?#?\s?[0-9](?:[0-9 ]{0,8}[0-9])?(?![0-9])")

# UK postcodes (the Royal Mail's format); the inward part is never a size ("M2 8GB")
_UK_POSTCODE = re.compile(
    r"(?<![A-Za-z0-9])(?P<value>(?:[A-PR-UWYZ][0-9][0-9A-HJKPSTUW]?|[A-PR-UWYZ][A-HK-Y][0-9][0-9ABEHMNPRVWXY]?)"
    r" ?[0-9][ABD-HJLNP-UW-Z]{2})(?![A-Za-z0-9])")
_SIZE = re.compile(r"[0-9](?:GB|MB|KB|TB|PB)$")
# Irish Eircode: a routing key (letter, two digits; D6W) and a unique identifier of four
_EIRCODE = re.compile(r"(?<![A-Za-z0-9])(?P<value>(?:[AC-FHKNPRTV-Y][0-9]{2}|D6W) ?[0-9AC-FHKNPRTV-Y]{4})"
                      r"(?![A-Za-z0-9])")
_US_STATES = ("AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|"
              "NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|PR")
_US_ZIP = re.compile(rf"(?<=,)\s?(?:{_US_STATES})\s(?P<value>[0-9]{{5}}(?:-[0-9]{{4}})?)(?![0-9-])")
# any country's postal code after its cue word
_POSTCODE_CUE = re.compile(
    r"(?i)(?:post\s?code|postal code|zip(?:\s?code)?|plz|postleitzahl|code postal|c[oó]digo postal|"
    r"cep|codice postale|postnummer|postinumero|kod pocztowy|почтовый индекс|индекс|eircode)"
    r"\s*(?:is|was|:|#|=)?\s*(?P<value>[A-Z0-9](?:[A-Z0-9]|[ -](?=[A-Z0-9])){2,9})(?![A-Za-z0-9])")

# Japanese: prefecture, city/ward/town, then block numbers (〒 postcode before it)
_JA_ADDRESS = re.compile(
    r"(?P<value>(?:〒\s?[0-9０-９]{3}[-－][0-9０-９]{4}\s*)?[\u4E00-\u9FFF\u3040-\u30FF]{1,4}[都道府県]"
    r"[\u4E00-\u9FFF\u3040-\u30FF]{1,10}?[市区町村郡][\u4E00-\u9FFF\u3040-\u30FF]{0,10}"
    r"[0-9０-９]+(?:(?:丁目|番地?|号|[-－ーの])[0-9０-９]+){1,3}(?:号)?)")
_JA_POSTCODE = re.compile(r"(?P<value>〒\s?[0-9０-９]{3}[-－][0-9０-９]{4})")
# Korean road address: a road name ending in 로 or 길, then its number ("테헤란로 123", "강남대로94길 15")
_KO_ADDRESS = re.compile(r"(?P<value>(?:[가-힣]+(?:시|도|구|군)\s)*[가-힣0-9]+(?:로|길)\s?[0-9]{1,5}(?:-[0-9]{1,4})?)"
                         r"(?![0-9가-힣])")


def _faker_locales() -> list[object]:
    import faker.providers.address as address

    providers = []
    for module in pkgutil.iter_modules(address.__path__):
        try:
            providers.append(importlib.import_module(f"faker.providers.address.{module.name}").Provider)
        except (ImportError, AttributeError):
            continue
    return providers


def _values(provider: object, field: str) -> list[str]:
    """The words of a street field (``street_suffix`` -> ``street_suffixes``
    and its ``_long``/``_short``/gendered variants)."""
    words: list[str] = []
    base = field + "es"
    for name in dir(provider):
        if name == base or name.startswith(base + "_"):
            value = getattr(provider, name)
            if isinstance(value, (list, tuple, dict)):  # a dict: words and their weights
                words += [w.strip() for w in value if isinstance(w, str)]
    return [w for w in words if len(w) >= 2 and "{" not in w]


@functools.cache
def street_words() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """(words after a name, those of them that English locales use, words
    before a name, endings glued to a name), read from the street-name
    formats of Faker's address providers."""
    after: set[str] = set()
    english: set[str] = set()
    before: set[str] = set()
    glued: set[str] = set()
    for provider in _faker_locales():
        formats = [f for f in getattr(provider, "street_name_formats", ()) if isinstance(f, str)]
        formats += [f for f in getattr(provider, "street_address_formats", ()) if isinstance(f, str)]
        for fmt in formats:
            for field in ("street_suffix", "street_prefix"):
                for match in re.finditer(r"\{\{" + field + r"(?:_[a-z]+)?\}\}", fmt):
                    words = _values(provider, field)
                    head, tail = fmt[:match.start()], fmt[match.end():]
                    if not head.strip() and tail.startswith(" "):
                        before.update(words)  # "{{street_prefix}} {{last_name}}", "{{street_suffix}} {{first_name}}"
                    elif head.endswith("}}"):
                        glued.update(w for w in words if w.islower() and w.isalpha())  # "{{last_name}}{{street_suffix}}"
                    elif head.endswith(" ") and head.strip().endswith("}}") and not head.strip().endswith("prefix}}"):
                        after.update(words)  # "{{last_name}} {{street_suffix}}"
                        if provider.__module__.rsplit(".", 1)[-1].startswith("en"):
                            english.update(words)
    after -= {w for w in after if w.lower() in AMBIGUOUS_SUFFIXES or len(w) < 2 or w in ("A", "B", "Bis")}
    after.update(_SUFFIX_ALWAYS)
    glued -= AMBIGUOUS_GLUED
    glued = {w for w in glued if len(w) >= 3}
    after = {w for w in after if not any(c.isdigit() for c in w)}
    before = {w for w in before if len(w) >= 2 and w.lower() not in AMBIGUOUS_SUFFIXES | AMBIGUOUS_PREFIXES}
    english = (english & after) | set(_SUFFIX_ALWAYS)
    return frozenset(after), frozenset(english), frozenset(before), frozenset(glued)


def _alternation(words: frozenset[str], both_cases: bool) -> str:
    forms = set(words)
    if both_cases:
        forms |= {w[:1].upper() + w[1:] for w in words} | {w[:1].lower() + w[1:] for w in words}
    escaped = sorted((re.escape(w) for w in forms), key=len, reverse=True)
    return "(?:" + "|".join(escaped) + ")"


@functools.cache
def _street_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    after, english, before, glued = street_words()
    # a word after a name keeps its case as written ("Mews", "utca", "ул."); before a name both cases
    # ("Rue"/"rue", "Calle"/"calle") but English prepositions must be capitalised ("Via", not "via")
    after_words = _alternation(after, both_cases=False)
    # abbreviated street words also stand before the name ("ул. Ленина", "пр. Мира")
    before = before | {w for w in after - english if w.endswith(".")}
    before_words = _alternation(frozenset(w for w in before if w.lower() != "via"), both_cases=True) \
        .removesuffix(")") + "|Via)"
    glued_words = _alternation(glued, both_cases=False)
    # after a name and before the number only in other languages ("Ленина ул., д. 5", "Petőfi utca 3"):
    # in English a number after "<Name> <Word>" is a count or a version ("Data Lake 2")
    other_after = _alternation(after - english, both_cases=False)
    word_end = r"(?![\w'’-])"
    # "57 Holloway Mews", "12 N. Main St.", "12, rue de la Paix"
    number_first = re.compile(
        rf"{_NUMBER_START}(?P<value>{_NUMBER},? (?:(?:[NSEW]\.?|North|South|East|West) )?"
        rf"(?:{_NAME} {after_words}{word_end}\.?|{before_words} (?:{_PARTICLE} )*{_NAME}{word_end}))")
    # "Via Giuseppe Verdi 14", "ul. Polna 12", "Ленина ул., д. 5", "Keizerslaan 5"
    name_first = re.compile(
        rf"(?<![\w.-])(?P<value>(?:{before_words} (?:{_PARTICLE} )*{_NAME}|{_NAME} {other_after}|"
        rf"[{_UPPER}][\w-]*?{glued_words})"
        rf",? {_HOUSE}{_NUMBER}){_NUMBER_END}")
    # "2588 Broadway" (a street word alone after the number): only after an address cue
    bare = re.compile(rf"{_NUMBER_START}(?P<value>{_NUMBER} (?:[{_UPPER}][\w'’-]* )?{after_words}){word_end}")
    return number_first, name_first, bare, re.compile(after_words)


class AddressRecognizer(LocalRecognizer):
    """Street lines, PO boxes and postcodes in free text (module docstring)."""

    SCORE = 0.75
    CUE_SCORE = 0.8

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=[ENTITY], name="addresses", supported_language=supported_language)

    def load(self) -> None:
        _street_patterns()

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        if entities and ENTITY not in entities:
            return []
        found: list[tuple[int, int, float, str]] = []
        has_digit = any(c.isdigit() for c in text)
        if not has_digit:
            return []
        number_first, name_first, bare, _ = _street_patterns()
        for pattern, why in ((number_first, "street line"), (name_first, "street line")):
            for match in pattern.finditer(text):
                value = match.group("value")
                if _plausible_street(value):
                    found.append((match.start("value"), match.end("value"), self.SCORE, why))
        for match in bare.finditer(text):
            if _ADDRESS_CUE.search(text, max(0, match.start() - 60), match.start()):
                found.append((match.start("value"), match.end("value"), self.CUE_SCORE, "street after cue"))
        for match in _PO_BOX.finditer(text):
            found.append((match.start(), match.end(), self.CUE_SCORE, "po box"))
        for match in _UK_POSTCODE.finditer(text):
            value = match.group("value")
            if " " in value and not _SIZE.search(value):
                found.append((match.start("value"), match.end("value"), self.SCORE, "uk postcode"))
        for match in _EIRCODE.finditer(text):
            unique = match.group("value")[-4:]
            if any(c.isalpha() for c in unique) and any(c.isdigit() for c in unique):
                found.append((match.start("value"), match.end("value"), self.SCORE, "eircode"))
        for match in _US_ZIP.finditer(text):
            found.append((match.start("value"), match.end("value"), self.SCORE, "us zip"))
        for match in _POSTCODE_CUE.finditer(text):
            value = match.group("value").strip()
            if any(c.isdigit() for c in value):
                found.append((match.start("value"), match.start("value") + len(value), self.CUE_SCORE, "postcode cue"))
        if not text.isascii():
            for pattern, why in ((_JA_ADDRESS, "japanese address"), (_JA_POSTCODE, "japanese postcode"),
                                 (_KO_ADDRESS, "korean road address")):
                for match in pattern.finditer(text):
                    found.append((match.start("value"), match.end("value"), self.SCORE, why))
        return [RecognizerResult(ENTITY, start, end, score, AnalysisExplanation(self.name, score, pattern_name=why))
                for start, end, score, why in found]


def _plausible_street(value: str) -> bool:
    """A street line names a street: its name is not all capitals ("2 GB RAM
    Lane"?) and holds a letter besides its street word."""
    letters = [c for c in value if c.isalpha()]
    return len(letters) >= 4 and not all(c.isupper() for c in letters)
