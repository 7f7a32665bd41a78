"""A last check for personal data and secrets in a workspace before it is
shared (the library behind ``cirrus audit WORKSPACE``,
:mod:`cirrus.commands.audit`).

What is read: everything under ``tickets/`` except the raw input
(``tickets/raw``, which holds personal data by design), every cassette under
``tool_mocks/``, everything under ``reports/``, and the model response cache
(``.cirrus-cache/*.sqlite3``: the judge's and the fluency checker's answers
quote what they judged), every text value of every table; other hidden files
and folders are skipped.  Text files are streamed line by line (very long
lines in overlapping pieces), YAML cassettes scalar by scalar (so a value that
YAML folded over two lines is seen whole), HTML and SVG by their text and
meaningful attributes, Parquet by its text columns in batches.  Images and
other binary files are skipped and counted.

What is found (kinds):

Candidates for e-mails written to dodge scrapers, cards and IP addresses come
from the ingest's own recognizers (``cirrus.ingest.deid.recognizers``),
secrets from its ``SecretRecognizer``, and identifiers, dates of birth,
addresses and names in other scripts from the recognizers the ingest's
``build_registry`` builds for the default pipeline: one detection engine; the
audit adds its policy on top (which documentation values are not hits) and a
few checks of its own.  Every text is read as the ingest reads it, in its
normalised view (``cirrus.ingest.deid.normalize``: full-width forms folded,
zero-width characters dropped, ``%XX`` escapes and HTML references decoded),
so a disguised value is found too (and shown as read).  In a JSON document
(a JSON Lines line, a cassette body, a cell) the sibling scalars under a key
naming a phone, card, IBAN, e-mail, account ... are also read joined, as the
ingest reads them: a card or IBAN split over array elements or fields
(``{"card": ["4111 1111", "1111 1111"]}``) is found whole.

* ``email``: an address, also obfuscated (``jroe77 [at] outlook [dot] com``,
  ``urlenc.person%40proton.me``); the documentation domains of RFC 2606 (``example.com``,
  ``*.example``, ``*.test``, ``*.invalid``, ``*.localhost``) are not hits.
* ``phone``: numbers that ``phonenumbers`` finds valid -- any country when
  written with ``+``, else one of the 15 regions of the ingest pipeline.  A
  plain run of digits (``4155550199``) only counts as a Chinese mobile number
  (``1[3-9]`` and 11 digits) or after a phone word (``phone``, ``tel``,
  ``call``, ``电话`` ...): sizes, counters and ids are plain digit runs too.
  Dates, times, decimals, prices and ``ORD-20240501-0012``-like ids are not.
* ``card``: 13 to 19 digits, Luhn-valid, with the prefix of a card network
  (3, 4, 5, 6 or the 2221-2720 Mastercard range): epoch milliseconds and
  order numbers starting with 1 or 20 are left alone.
* ``key``: AWS access key ids (``AKIA``/``ASIA``), Alibaba Cloud ``LTAI``
  ids, ``sk-`` API keys, GitHub (``ghp_`` ...) and Slack tokens, PEM
  private-key headers.
* ``secret``: a long high-entropy value assigned to a ``...key``, ``...secret``,
  ``...token`` or ``...password`` name (``key=``, ``"api_key": "..."``), a
  ``Bearer`` token, the password of a URL (``https://user:pw@host``), and what
  the ingest's own secret recognizer finds (detect-secrets' formats: AWS,
  Azure, JWT, Slack, Stripe, ...; ``ya29.`` tokens, PEM key blocks, secret
  query parameters, ``password: hunter2`` / ``pwd is ...`` cues).
* ``national_id``: what the ingest's country recognizers (Presidio's: UK
  NI number, Spanish DNI/NIE, Italian codice fiscale, Indian PAN, ...; those
  that are mostly digits only next to their context word) and check-digit
  recognizer (German tax id, French NIR, after their cue) find, and a US
  driver's licence number after its cue (``driver's license``, ``DL#``;
  :mod:`cirrus.ingest.deid.cued`).
* ``birth_date``: a date after a birth cue (``born``, ``DOB``, ``birthday``,
  ``出生``) or under a birth-date field name.
* ``device_id``: a VIN (check digit or cue), an IMEI after its cue (check
  digit), a MAC address.
* ``iban``: an IBAN of any country, its check digits valid.
* ``address``: a street line, a PO box, a UK postcode or an Irish Eircode
  (the ingest's address recognizer); a room, floor or suite alone is not.
* ``name``: only a name in a non-Latin script next to a name cue
  (``ScriptNameRecognizer``: ``my name is Иван Петров``, ``Best,\nराहुल``;
  and ``田中と申します``).  Latin-script names are left out: NER or a name
  list in a de-identified workspace finds pseudonyms, agents and products.
* also ``card``: a card's security code after its cue (``CVV: 737``, ``the
  security code on the back is 737``; :mod:`cirrus.ingest.deid.cued`), and ``secret``: a
  value whose field name says it is one (``pin=4821``).
* ``ip``: IPv4 with valid octets and IPv6.  Private ranges (10/8,
  172.16/12, 192.168/16, fc00::/7) are hits: they describe a customer's
  network.  Not hits: loopback, unspecified (0.0.0.0, ::), multicast,
  netmasks (255.x), the documentation ranges (RFC 5737/3849), a private or
  "any" network written as a CIDR range (``10.0.0.0/8``), a few well-known
  public services (public DNS resolvers, cloud metadata endpoints) and a
  dotted quad after a version word (``version 1.2.3.4``, ``build``, ``v``).

Masking: the ingest pipeline masks with ``*`` (``ja***@g***.com``,
``157****3190``, ``47.***.***.***``, ``LTAI********``) or writes placeholders
(``<EMAIL_ADDRESS_1>``).  The scanner treats ``*`` as a break that no value
may span, so a masked value never matches, while a real value that merely
sits in Markdown emphasis (``**+1 415 555 0199**``) still does; what the
engine's recognizers find is dropped, as the ingest drops it, when a mask
break is inside it or right next to it (``Ив** Пе*****``).

Allow list: ``--allow`` values and the lines of ``WORKSPACE/.cirrus-audit-allow``
(``#`` comments).  Each entry allows a found value equal to it, or in which it
finds a match as a regular expression (``re.search``; anchor it with ``^...$``);
an entry that is not a valid regular expression is used literally only.

Hits are only ever shown masked (their first two characters and ``***``).
Exit status: 0 clean, 1 any hit, 2 usage error (no such workspace, a folder
with none of ``tickets/``, ``tool_mocks/``, ``reports/``) or, when nothing
was found, a file that could not be read (the audit is incomplete).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from cirrus.checksums import luhn

__all__ = ["ALLOW_FILE", "AllowList", "AuditResult", "Hit", "audit", "is_workspace", "luhn", "mask", "scan_file",
           "scan_text", "workspace_files"]

ALLOW_FILE = ".cirrus-audit-allow"
SCANNED_FOLDERS = ("tickets", "tool_mocks", "reports")
SKIPPED_FOLDERS = {"tickets/raw"}  # raw input: personal data by design
CACHE_FOLDER = ".cirrus-cache"  # model answers (judge, fluency): read as databases
BINARY_SUFFIXES = {
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".tif", ".tiff", ".avif", ".pdf", ".woff", ".woff2",
    ".ttf", ".otf", ".zip", ".gz", ".bz2", ".xz", ".zst", ".tar", ".7z", ".npy", ".npz", ".pkl", ".pickle",
    ".arrow", ".feather", ".ipc", ".sqlite", ".db", ".duckdb",
}
MARKUP_SUFFIXES = {".html", ".htm", ".svg", ".xml"}
YAML_SUFFIXES = {".yaml", ".yml"}
_DRAWING_ATTRIBUTES = {
    "d", "points", "transform", "viewbox", "x", "y", "x1", "x2", "y1", "y2", "dx", "dy", "width", "height", "cx", "cy",
    "r", "rx", "ry", "style", "class", "id", "fill", "stroke", "stroke-width", "stroke-dasharray",
    "stroke-dashoffset", "font-size", "clip-path", "xlink:href", "offset", "opacity", "version", "xmlns",
    "xmlns:xlink", "preserveaspectratio", "text-anchor", "dominant-baseline", "font-family", "font-weight",
}
LINE_PIECE = 1 << 20  # characters of a long line scanned at once
_OVERLAP = 512  # carried from one piece of a long line into the next (longer than any value)


@dataclass(frozen=True)
class Hit:
    """One value found.  ``value`` is the full text and stays in memory: it
    is left out of ``repr`` and of everything printed; show ``masked``."""

    kind: str
    value: str = field(repr=False)
    start: int = 0  # offset in the scanned text
    file: str | None = None
    line: int | None = None  # 1-based line; for Parquet the 1-based row
    column: str | None = None  # Parquet only

    @property
    def masked(self) -> str:
        return mask(self.value)

    @property
    def where(self) -> str:
        place = f"{self.file or '<text>'}:{self.line or 0}"
        return place + (f" [{self.column}]" if self.column else "")

    def to_json(self) -> dict[str, Any]:
        """The hit as printed by ``--json`` (masked)."""
        return {"file": self.file, "line": self.line, "column": self.column, "kind": self.kind,
                "masked": self.masked}

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} {self.masked}"


def mask(value: str) -> str:
    """The first two characters of ``value`` and ``***``: enough to find it
    on the reported line, not enough to read it."""
    return value[:2] + "***"


# -- patterns ---------------------------------------------------------------------------
# The text is prepared first (_prepare): JSON escapes undone and every ``*``
# turned into NUL, which no pattern accepts inside a value: a masked value
# falls apart into pieces too short to match, while a value that only sits
# next to Markdown emphasis (``**...**``) still matches.

_MASK_BREAK = "\x00"
_A = re.ASCII  # \w and \d are ASCII: a Chinese character next to a number is a boundary

# Most patterns start with the character class of their first character and
# check what precedes it with a lookbehind placed after it: Python's engine
# then skips the positions that cannot start a match (several times faster).
_EMAIL_DOMAIN = re.compile(
    r"@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})(?![\w-]|\.[A-Za-z0-9])", _A)
_EMAIL_LOCAL = re.compile(r"[\w.%+-]{1,64}$", _A)  # the part before the @ (read backwards from it)
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.%+-")
_DOC_DOMAINS = re.compile(r"(?:^|\.)(?:example\.(?:com|org|net)|example|test|invalid|localhost)$", re.I)

_KEY = re.compile(
    r"(?:(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|LTAI[0-9A-Za-z]{12,30}"
    r"|sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r")(?![A-Za-z0-9_-])"
    r"|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----", _A)
_KEY_MARKERS = ("AKIA", "ASIA", "LTAI", "sk-", "gh", "github_pat_", "xox", "-----BEGIN")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_URL_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://([^\s/:@\x00\"'<>]{1,64}:[^\s/@\x00\"'<>]{1,128})@", _A)
# a value after ``:``/``=``; the name before it is checked separately (_SECRET_NAME)
_ASSIGNED = re.compile(r"(?:[:=]|=>)\s*[\"']?([A-Za-z0-9+/=_.~-]{16,256})(?![A-Za-z0-9+/=_.~-])", _A)
_SECRET_NAME = re.compile(r"(?i:key|secret|token|passw(?:or)?d|pwd|credentials?)[\"']?\s*$", _A)
_BEARER = re.compile(r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])", _A)


# phone candidates: digits with the separators numbers are written with, not
# glued to a word, an id (``-``), a decimal or a time (``.``/``,``/``:`` and a
# digit), a price (currency sign) or a URL path (``/``)
_PHONE_CANDIDATE = re.compile(
    r"[+(\d](?<![\w.,:+/#$\u00a3\u00a5\u20ac\u20b9-][+(\d])(?:(?<=\+)\s?\d|(?<=\()\d|(?<=\d))"
    r"[\d ().-]{5,20}\d(?![\w/-]|[.,:]\d)", _A)
_DATE = re.compile(
    r"(?:(?:19|20)\d\d([-./ ]?)(?:0[1-9]|1[0-2])\1(?:0[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])([-./])(?:0?[1-9]|1[0-2])\2(?:19|20)\d\d"
    r"|(?:0?[1-9]|1[0-2])([-./])(?:0?[1-9]|[12]\d|3[01])\3(?:19|20)\d\d)")
_DOTTED_QUAD = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")
_CN_MOBILE = re.compile(r"1[3-9]\d{9}")
_PHONE_WORD = re.compile(
    r"(?i:phone|tel|mobile|cell|call|fax|sms|text\s+me|whatsapp|wechat|contact|reach\s+me)"
    r"|\u7535\u8bdd|\u624b\u673a|\u8054\u7cfb|\u53f7\u7801")  # 电话 手机 联系 号码
_PHONE_WORD_WINDOW = 32

# reserved for documentation and examples (RFC 5737, RFC 3849): nobody's address
_DOCUMENTATION_NETS = tuple(ipaddress.ip_network(n) for n in
                            ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
# public services every tutorial names: DNS resolvers, cloud metadata endpoints
_WELL_KNOWN_IPS = frozenset(ipaddress.ip_address(a) for a in (
    "8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1", "9.9.9.9", "149.112.112.112", "208.67.222.222", "208.67.220.220",
    "114.114.114.114", "114.114.115.115", "223.5.5.5", "223.6.6.6", "119.29.29.29", "180.76.76.76",
    "100.100.100.200", "169.254.169.254", "2001:4860:4860::8888", "2001:4860:4860::8844",
    "2606:4700:4700::1111", "2400:3200::1", "2400:3200:baba::1"))


def _prepare(text: str) -> str:
    """JSON escapes undone (``\\u0040`` is an ``@``, ``\\n`` a line break), so
    escaping can neither hide a value nor glue a letter to it; ``*`` made a
    break."""
    if "\\" in text:
        text = _ESCAPE.sub(_unescape, text)
    return text.replace("*", _MASK_BREAK)


_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([\"\\/bfnrt]))")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(m: re.Match[str]) -> str:
    return chr(int(m.group(1), 16)) if m.group(1) else _SIMPLE_ESCAPES[m.group(2)]


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_random(value: str) -> bool:
    classes = sum(any(test(ch) for ch in value) for test in (str.islower, str.isupper, str.isdigit))
    return classes >= 2 and any(ch.isdigit() for ch in value) and _entropy(value) >= 3.5


def _ip_is_personal(text: str, before: str) -> bool:
    address, _, prefix = text.partition("/")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if (ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip in _WELL_KNOWN_IPS
            or any(ip in net for net in _DOCUMENTATION_NETS)):
        return False
    if ip.version == 4 and address.startswith("255."):  # a netmask
        return False
    if prefix:  # a range: a private one (or "any") names nobody's machine
        try:
            network = ipaddress.ip_network(text, strict=True)
        except ValueError:
            return True  # host bits set: an address with its mask
        if network.prefixlen == network.max_prefixlen:
            return True  # a /32 (/128) is one machine
        return not (network.is_private or network.network_address.is_unspecified)
    return True


def _phones(text: str) -> Iterator[tuple[int, str]]:
    for match in _PHONE_CANDIDATE.finditer(text):
        raw = match.group().rstrip(" (.-")
        digits = sum(ch.isdigit() for ch in raw)
        if digits < 8 or digits > 15 or _DATE.fullmatch(raw) or _DOTTED_QUAD.fullmatch(raw):
            continue
        if raw.isdigit():  # a bare run of digits: sizes, counters and ids look the same
            if not (_CN_MOBILE.fullmatch(raw)
                    or _PHONE_WORD.search(text[max(0, match.start() - _PHONE_WORD_WINDOW):match.start()])):
                continue
        elif "." in raw and not re.fullmatch(r"\(?\d{2,4}\)?(?:[. ]\d{2,4}){2,4}", raw.lstrip("+ ")):
            continue  # dots: only 415.555.0199 / 06.12.34.56.78 groupings, not decimals or versions
        found = _phone_in(raw)
        if found is not None:
            yield match.start() + raw.find(found), found


@functools.cache
def _phone_regions() -> tuple[str, ...]:
    """The regions the default pipeline de-identifies phone numbers of."""
    from cirrus.config import load_pipeline

    return tuple(load_pipeline().deid.phone_regions)


@functools.lru_cache(maxsize=1 << 16)
def _phone_in(candidate: str) -> str | None:
    """The valid phone number ``phonenumbers`` finds in ``candidate``, if any
    (each distinct candidate is asked once: the matcher is slow)."""
    import phonenumbers

    regions = ("ZZ",) if candidate.startswith("+") else _phone_regions()  # ZZ: the number carries its country
    for region in regions:
        # the matcher rather than parse(): it also refuses odd groupings
        found = next(iter(phonenumbers.PhoneNumberMatcher(candidate, region, leniency=phonenumbers.Leniency.VALID)),
                     None)
        if found is not None:
            return found.raw_string
    return None


def _emails(text: str) -> list[Hit]:
    """Found from each ``@`` outwards: the domain forwards, the local part
    (the run of address characters before the ``@``) backwards."""
    found = []
    for m in _EMAIL_DOMAIN.finditer(text):
        if _DOC_DOMAINS.search(m.group(1)):
            continue
        at = m.start()
        local = _EMAIL_LOCAL.search(text, max(0, at - 64), at)
        if local is None or (local.start() > 0 and text[local.start() - 1] in _LOCAL_CHARS):
            continue  # nothing before the @, or a run longer than a local part can be
        start = local.start()
        while text[start] in ".%+-":  # "--laura@..." starts at the l
            start += 1
        if start < at:
            found.append(Hit("email", text[start:m.end()], start))
    return found


@functools.cache
def _recognizers() -> dict[str, Any]:
    """The ingest's own pattern recognizers (no model to load): the audit
    finds candidates with the engine that de-identified the workspace and
    adds only its policy on top (documentation ranges, card prefixes)."""
    from cirrus.ingest.deid.recognizers import IpAddressRecognizer, LuhnCardRecognizer, ObfuscatedEmailRecognizer

    return {"ip": IpAddressRecognizer(), "card": LuhnCardRecognizer(), "email": ObfuscatedEmailRecognizer()}


def _cards(text: str) -> list[Hit]:
    """Luhn-valid numbers with a card network's prefix, 13 to 19 digits."""
    if sum(ch.isdigit() for ch in text) < 13:
        return []
    from cirrus.ingest.deid.recognizers import card_prefix

    found = []
    for r in _recognizers()["card"].analyze(text, ["CREDIT_CARD"]):
        value = text[r.start:r.end]
        digits = re.sub(r"\D", "", value)
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and card_prefix(digits):
            found.append(Hit("card", value, r.start))
    return found


def _ips(text: str) -> list[Hit]:
    """Addresses the ingest recognizer validates, that name someone's machine
    (:func:`_ip_is_personal`).  An address that runs on into a masked part
    (``::ffff:47.***``, ``10.***.1.2``) was masked: not a hit."""
    if "." not in text and ":" not in text:
        return []
    found = []
    for r in _recognizers()["ip"].analyze(text, ["IP_ADDRESS"]):
        value, tail = text[r.start:r.end], text[r.end:r.end + 2]
        if _MASK_BREAK in tail or (tail[:1] in ":." and tail[1:2].isdigit()):
            continue
        if _ip_is_personal(value, text[max(0, r.start - 24):r.start]):
            found.append(Hit("ip", value, r.start))
    return found


def _obfuscated_emails(text: str) -> list[Hit]:
    """``jroe77 [at] outlook [dot] com``, ``urlenc.person%40proton.me``."""
    lowered = text.lower()
    if "at" not in lowered and "%40" not in lowered:
        return []
    recognizer = _recognizers()["email"]
    found = []
    for r in recognizer.analyze(text, ["EMAIL_ADDRESS"]):
        value = text[r.start:r.end]
        domain = recognizer.plain(value).rpartition("@")[2]
        if _MASK_BREAK not in value and not _DOC_DOMAINS.search(domain):
            found.append(Hit("email", value, r.start))
    return found


@functools.cache
def _secret_recognizer() -> Any:
    """The ingest's :class:`~cirrus.ingest.deid.recognizers.SecretRecognizer`
    (pure patterns and detect-secrets plugins: no model to load)."""
    from cirrus.ingest.deid.recognizers import SecretRecognizer

    return SecretRecognizer()


# -- the ingest's engine: identifiers, dates of birth, addresses, names in other scripts -------------

# the entities of the ingest's engine the audit reports, and their kind; e-mails, phones, IPs, cards,
# keys and secrets have the audit's own finders above (with its documentation and network policy)
ENGINE_KINDS = {
    **dict.fromkeys(("NATIONAL_ID", "UK_NINO", "ES_NIF", "ES_NIE", "IT_FISCAL_CODE", "IN_PAN", "IN_AADHAAR",
                     "IN_PASSPORT", "AU_TFN", "AU_MEDICARE", "SG_NRIC_FIN", "KR_RRN", "PL_PESEL",
                     "FI_PERSONAL_IDENTITY_CODE", "US_ITIN", "US_PASSPORT", "UK_NHS", "UK_PASSPORT", "US_SSN",
                     "CN_RESIDENT_ID"), "national_id"),
    "DATE_OF_BIRTH": "birth_date",
    "DEVICE_ID": "device_id", "MAC_ADDRESS": "device_id",
    "IBAN_CODE": "iban",
    "STREET_ADDRESS": "address", "UK_POSTCODE": "address",
    "PERSON": "name",  # only ScriptNameRecognizer's: a non-Latin name next to a name cue
    "SECRET": "secret",  # only FieldTextRecognizer's: a value its field's name calls secret
}
# what a value's field name alone says (FieldTextRecognizer) counts for these; a name, e-mail, phone
# or card by its key only is left to the audit's own finders, which check the value itself
_FIELD_ENTITIES = ("SECRET", "DATE_OF_BIRTH", "US_SSN", "CN_RESIDENT_ID", "STREET_ADDRESS")
# Presidio's context step, as the ingest configures it: a context word near a find adds this much
_CONTEXT_BOOST, _CONTEXT_FLOOR, _CONTEXT_BEFORE, _CONTEXT_AFTER = 0.35, 0.4, 64, 24


@dataclass(frozen=True)
class _Engine:
    # (recognizer, entities, context words, the pre-checks a text must pass)
    recognizers: tuple[tuple[Any, tuple[str, ...], tuple[str, ...], tuple[Any, ...]], ...]
    threshold: float
    allow: frozenset[str]


@functools.cache
def _engine() -> _Engine:
    """The ingest's recognizers for :data:`ENGINE_KINDS`, built by the
    ingest's own :func:`~cirrus.ingest.deid.engine.build_registry` from the
    default pipeline (the pattern and check-digit recognizers: no spaCy
    model is loaded).  Names: only :class:`ScriptNameRecognizer`'s (a name
    in Cyrillic, Greek, Arabic, ... after a name cue); spaCy NER and the
    name gazetteer would find the pseudonyms, products and agents' names of
    a de-identified workspace."""
    from cirrus.config import load_pipeline
    from cirrus.ingest.deid.cued import CuedValueRecognizer
    from cirrus.ingest.deid.engine import build_registry
    from cirrus.ingest.deid.recognizers import ContextRequired, FieldTextRecognizer, ScriptNameRecognizer

    config = load_pipeline().deid
    registry = build_registry(config.model_copy(update={"person_gazetteer": False}))
    chosen = []
    for recognizer in registry.recognizers:
        if isinstance(recognizer, CuedValueRecognizer):
            continue  # read by _own_checks, with the kinds the audit names them by
        entities = [e for e in recognizer.supported_entities if e in ENGINE_KINDS]
        if isinstance(recognizer, FieldTextRecognizer):
            entities = [e for e in entities if e in _FIELD_ENTITIES]
        elif "PERSON" in entities and not isinstance(recognizer, ScriptNameRecognizer):
            entities.remove("PERSON")
        elif "SECRET" in entities:
            entities.remove("SECRET")  # SecretRecognizer: already read above (_secret_recognizer)
        if not entities:
            continue
        inner = recognizer.inner if isinstance(recognizer, ContextRequired) else recognizer
        if _never_kept(inner, config.score_threshold):
            continue
        context = tuple(word.lower() for word in (getattr(inner, "context", None) or ()))
        # a recognizer that counts only next to its context word runs on a text that holds one as a
        # word: "pan" in "company" or "us" in "status" would run Presidio's weak patterns (the
        # Indian PAN's matches any 10 letters and digits) on nearly every text, for nothing
        checks = []
        if isinstance(recognizer, ContextRequired) and context:
            checks.append(re.compile(r"(?i)(?<![^\W_])(?:" + "|".join(map(re.escape, context)) + r")(?![^\W_])"))
        if (shape := _any_pattern(inner)) is not None:
            checks.append(shape)
        chosen.append((recognizer, tuple(entities), context, tuple(checks)))
    return _Engine(tuple(chosen), config.score_threshold, frozenset(v.lower() for v in config.allow_list))


def _any_pattern(recognizer: Any) -> Any:
    """For a Presidio pattern recognizer, its patterns as one regular
    expression (Presidio's ``regex`` module and flags): a text none of them
    matches is not handed to it (Presidio's per-call and per-match work is
    most of the engine's time); None for another recognizer."""
    import regex
    from presidio_analyzer import PatternRecognizer

    if not isinstance(recognizer, PatternRecognizer) or not recognizer.patterns or recognizer.deny_list:
        return None
    try:
        return regex.compile("|".join(f"(?:{p.regex})" for p in recognizer.patterns),
                             flags=recognizer.global_regex_flags or 0)
    except regex.error:
        return None


def _never_kept(recognizer: Any, threshold: float) -> bool:
    """A Presidio pattern recognizer none of whose finds reaches the
    threshold, even raised by a context word, and that validates none
    (a validated find scores 1.0): the UK postcode, UK, Indian and US
    passport ones score 0.1 at most, so the ingest keeps none of their finds."""
    from presidio_analyzer import PatternRecognizer

    if not isinstance(recognizer, PatternRecognizer) or not recognizer.patterns:
        return False
    best = max(pattern.score for pattern in recognizer.patterns)
    return (max(best + _CONTEXT_BOOST, _CONTEXT_FLOOR) < threshold
            and type(recognizer).validate_result is PatternRecognizer.validate_result)


# where a JSON line's texts meet (a string value and the next key; paragraphs): the engine reads the
# pieces between, each distinct piece once (a knowledge article repeats in every task that cites it)
_CHUNK_BREAK = re.compile(r'\n\n|","')
_CACHED_CHUNK = 8192  # longer pieces are read each time, not remembered (the cache stays under ~64 MB)


def _engine_hits(text: str) -> list[Hit]:
    """:func:`_engine_chunk`'s hits in each piece of ``text``, located in ``text``."""
    if len(text) <= _CACHED_CHUNK and not _CHUNK_BREAK.search(text):
        return [Hit(kind, value, start) for kind, value, start in _engine_chunk(text)]
    found, at = [], 0
    for end in [*(m.start() for m in _CHUNK_BREAK.finditer(text)), len(text)]:
        piece = text[at:end]
        hits = _engine_chunk(piece) if len(piece) <= _CACHED_CHUNK else _engine_chunk.__wrapped__(piece)
        found += [Hit(kind, value, at + start) for kind, value, start in hits]
        at = end + (len(_CHUNK_BREAK.match(text, end).group()) if end < len(text) else 0)
    return found


@functools.lru_cache(maxsize=1 << 13)
def _engine_chunk(text: str) -> tuple[tuple[str, str, int], ...]:
    """What the ingest's recognizers (:func:`_engine`) find in the prepared
    ``text``, kept by the ingest's rules: its score threshold, after its
    context step (a context word near a weak find raises its score); not
    a value of its allow list; not a masked value nor a piece of one (a
    mask break inside it or right next to it: ``Ив** Пе*****``)."""
    engine = _engine()
    found = []
    for recognizer, entities, context, checks in engine.recognizers:
        if not all(check.search(text) for check in checks):
            continue
        for r in recognizer.analyze(text, list(entities)):
            if r.entity_type not in entities:
                continue
            start, end = r.start, r.end
            value = text[start:end]
            if not value.strip() or _MASK_BREAK in text[max(0, start - 1):end + 1]:
                continue
            score = r.score
            if score < engine.threshold and context:
                window = text[max(0, start - _CONTEXT_BEFORE):end + _CONTEXT_AFTER].lower()
                if any(word in window for word in context):
                    score = max(score + _CONTEXT_BOOST, _CONTEXT_FLOOR)
            if score < engine.threshold or value.lower() in engine.allow:
                continue
            if r.entity_type == "STREET_ADDRESS" and _ROOM_ONLY.fullmatch(value):
                continue
            if r.entity_type == "SECRET" and value.isdigit() and \
                    not _PIN_KEY.search(text, max(0, start - 40), start):
                continue  # "token: 1234567890123456" is an id; "pin=4821" is not (as SecretRecognizer reads cues)
            found.append((ENGINE_KINDS[r.entity_type], value, start))
    return tuple(found)


# a key under which a value of digits only is a secret ("pin=4821"; "token: 1234567890123456" is an id)
_PIN_KEY = re.compile(r"(?i)(?:pass|pwd|pin|密码|口令)[\w-]*[\"']?\s*[:：=]\s*[\"']?$")
# a room, floor, suite or unit alone is no address (the pipeline's street_address pattern masks them too)
_ROOM_ONLY = re.compile(r"(?i)(?:suite|apt\.?|apartment|unit|floor|room)\s+#?[0-9A-Z]{1,6}")


_CUED_KINDS = {"SECRET": "card", "NATIONAL_ID": "national_id", "PERSON": "name"}


def _own_checks(text: str) -> list[Hit]:
    """The cued values the ingest masks (:func:`cirrus.ingest.deid.cued.cued_values`:
    a card security code, a US driver's licence, a name before と申します)."""
    from cirrus.ingest.deid.cued import cued_values

    return [Hit(_CUED_KINDS[value.entity], text[value.start:value.end], value.start) for value in cued_values(text)
            if _MASK_BREAK not in text[max(0, value.start - 1):value.end + 1]]


# -- values split over array elements or sibling fields ---------------------------------------------

_SPLIT_HINT = re.compile(
    r"(?i)\\?[\"'][^\"'\\\n]{0,40}(?:phone|mobile|tel|fax|cell|card|iban|ssn|mail|account|contact|msisdn|pan)"
    r"[^\"'\\\n]{0,40}\\?[\"']\s*:")
_SPLIT_KINDS = frozenset({"card", "iban", "phone", "email"})
# the parts a number is split into: digit groups (an IBAN's letters too), never a date ("20250305")
_SPLIT_NUMBERS = {"card": re.compile(r"\s*\d[\d -]*\d\s*"), "phone": re.compile(r"\s*[+(]?\d[\d ().-]*\d\s*"),
                  "iban": re.compile(r"\s*[A-Z0-9][A-Z0-9 ]*[A-Z0-9]\s*")}


def _split_hits(text: str) -> list[Hit]:
    """Values split over the elements of a JSON array or sibling fields
    (``{"card": ["4111 1111", "1111 1111"]}``), as the ingest reads them:
    2 to 8 sibling scalars, two holding digits or an ``@``, under a key
    that names a phone, card, IBAN, e-mail, account ...; the siblings are
    read joined with spaces, and a value found across two of them is a hit
    (``value`` is the joined value, ``start`` 0).  ``text`` is a JSON
    document (JSON inside its strings is read too); other text has none."""
    if not _SPLIT_HINT.search(text):
        return []
    from cirrus.ingest.deid.deidentify import embedded_json

    data = embedded_json(text)
    if data is None:
        return []
    found: list[Hit] = []
    stack: list[tuple[Any, str | None, int]] = [(data, None, 0)]
    while stack:
        value, key, depth = stack.pop()
        if isinstance(value, dict):
            children = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(None, v) for v in value]
        else:
            if isinstance(value, str) and depth < 4 and _SPLIT_HINT.search(value):
                inner = embedded_json(value)
                if inner is not None:
                    stack.append((inner, key, depth + 1))
            continue
        found += _joined(children, key)
        stack.extend((v, k if k is not None else key, depth) for k, v in children)
    return found


def _joined(children: list[tuple[str | None, Any]], key: str | None) -> list[Hit]:
    from cirrus.ingest.deid.deidentify import _SPLIT_KEY_WORDS
    from cirrus.ingest.deid.keys import key_words

    pieces = [str(v) for _, v in children
              if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()]
    if not 2 <= len(pieces) <= 8 or sum(len(p) for p in pieces) > 200:
        return []
    if sum(1 for p in pieces if sum(c.isdigit() for c in p) >= 2 or "@" in p) < 2:
        return []
    named = {word for k in (key, *(k for k, _ in children)) if k for word in key_words(k)}
    if not named & _SPLIT_KEY_WORDS:
        return []
    text, bounds = "", []
    for piece in pieces:
        start = len(text) + (1 if text else 0)
        text = f"{text} {piece}" if text else piece
        bounds.append((start, start + len(piece)))
    prepared = text.replace("*", _MASK_BREAK)  # the pieces are JSON values already: no escapes to undo
    found = []
    for hit in _scan_prepared(prepared):
        end = hit.start + len(hit.value)
        parts = [text[s:e] for s, e in bounds if s < end and hit.start < e]
        if (hit.kind in _SPLIT_KINDS and len(parts) >= 2
                and _MASK_BREAK not in prepared[max(0, hit.start - 1):end + 1]  # a masked part's rest is no value
                and (hit.kind not in _SPLIT_NUMBERS or not any(
                    _SPLIT_NUMBERS[hit.kind].fullmatch(p) is None or _DATE.fullmatch(p.strip()) for p in parts))):
            found.append(replace(hit, start=0))
    return found


def scan_text(text: str) -> list[Hit]:
    """The personal values and secrets in ``text``, in order of position.
    Values masked with ``*`` are never found; where two findings overlap
    the more specific one (key, secret, e-mail, card, identifier, IP,
    phone) is kept.  ``start`` is an offset in ``text`` after JSON escapes
    are undone.  A JSON document's values split over array elements or
    sibling fields are found too (:func:`_split_hits`)."""
    return _scan_prepared(_prepare(text)) + _split_hits(text)


def _scan_prepared(text: str) -> list[Hit]:
    """The hits of a prepared text, read as the ingest reads it: in its
    normalised view (:func:`cirrus.ingest.deid.normalize.normalised_view`:
    full-width forms folded, zero-width characters dropped, ``%XX`` and
    HTML references decoded), each hit mapped back onto the original
    characters (its ``value`` is the value as read); then what the text as
    written holds besides."""
    from cirrus.ingest.deid.normalize import normalised_view

    view = normalised_view(text)
    if view is None:
        return _resolved(_candidates(text))
    kept = []
    for hit in _resolved(_candidates(view.text.replace("*", _MASK_BREAK))):
        start, _ = view.original(hit.start, hit.start + len(hit.value))
        kept.append(replace(hit, start=start))
    taken = [(h.start, h.start + len(h.value)) for h in kept]
    kept += [h for h in _resolved(_candidates(text))
             if not any(h.start < e and s < h.start + len(h.value) for s, e in taken)]
    return sorted(kept, key=lambda h: h.start)


def _candidates(text: str) -> list[Hit]:
    """Every finding in a prepared text, in order of preference."""
    candidates: list[Hit] = []
    if any(marker in text for marker in _KEY_MARKERS):
        candidates += [Hit("key", m.group(), m.start()) for m in _KEY.finditer(text)
                       if m.group().startswith("-----")  # a private key header
                       or (any(c.isdigit() for c in m.group())  # real keys have digits; words do not
                           and (m.start() == 0 or text[m.start() - 1] not in _WORD_CHARS))]
    if "://" in text:
        candidates += [Hit("secret", m.group(1), m.start(1)) for m in _URL_CREDENTIALS.finditer(text)]
    candidates += [Hit("secret", m.group(1), m.start(1)) for m in _ASSIGNED.finditer(text)
                   if _SECRET_NAME.search(text, max(0, m.start() - 40), m.start()) and _looks_random(m.group(1))]
    if "earer" in text or "EARER" in text:
        candidates += [Hit("secret", m.group(1), m.start(1)) for m in _BEARER.finditer(text)
                       if _looks_random(m.group(1))]
    # the ingest's own secret detection (detect-secrets' formats, tokens, PEM
    # blocks, "password: ..." cues); a masked value holds a mask break
    candidates += [Hit("secret", text[r.start:r.end], r.start) for r in _secret_recognizer().analyze(text, ["SECRET"])
                   if _MASK_BREAK not in text[r.start:r.end]]
    candidates += _own_checks(text)
    if "@" in text:
        candidates += _emails(text)
    candidates += _obfuscated_emails(text)
    candidates += _cards(text)
    candidates += _engine_hits(text)
    candidates += _ips(text)
    candidates += [Hit("phone", value, start) for start, value in _phones(text)]
    return candidates


def _resolved(candidates: list[Hit]) -> list[Hit]:
    """The candidates that overlap none preferred to them, by position."""
    kept: list[Hit] = []
    taken: list[tuple[int, int]] = []
    for hit in candidates:  # in order of preference
        end = hit.start + len(hit.value)
        if not any(hit.start < e and s < end for s, e in taken):
            kept.append(hit)
            taken.append((hit.start, end))
    return sorted(kept, key=lambda h: h.start)


# -- allow list ------------------------------------------------------------------------------

class AllowList:
    """Values that look personal but are not: literals, and regular
    expressions searched in each found value."""

    def __init__(self, entries: Iterable[str] = ()) -> None:
        self.literals: set[str] = set()
        self.patterns: list[re.Pattern[str]] = []
        for entry in entries:
            self.add(entry)

    def add(self, entry: str) -> None:
        if not entry:
            return
        self.literals.add(entry)
        try:
            self.patterns.append(re.compile(entry))
        except re.error:
            pass  # not a regular expression: the literal alone

    def allows(self, value: str) -> bool:
        return value in self.literals or any(p.search(value) for p in self.patterns)

    @classmethod
    def for_workspace(cls, workspace: Path, extra: Iterable[str] = ()) -> AllowList:
        """``extra`` plus the entries of ``workspace/.cirrus-audit-allow``."""
        allow = cls(extra)
        path = workspace / ALLOW_FILE
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    allow.add(line.strip())
        return allow


# -- files -------------------------------------------------------------------------------------

def workspace_files(workspace: Path) -> Iterator[Path]:
    """The files of ``workspace`` the audit reads, in a stable order:
    ``tickets/`` (not ``tickets/raw``), ``tool_mocks/``, ``reports/``;
    no hidden file or folder."""
    for top in SCANNED_FOLDERS:
        root = workspace / top
        if not root.is_dir():
            continue
        for folder, dirs, names in os.walk(root):
            here = Path(folder)
            rel = here.relative_to(workspace).as_posix()
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and f"{rel}/{d}" not in SKIPPED_FOLDERS)
            for name in sorted(names):
                if not name.startswith("."):
                    yield here / name


def _is_binary(path: Path) -> bool:
    """An image, an archive or any other file that is neither Parquet nor text."""
    if path.suffix.lower() == ".parquet":
        return False
    if path.suffix.lower() in BINARY_SUFFIXES:
        return True
    with path.open("rb") as handle:
        return b"\x00" in handle.read(8192)


def scan_file(path: Path, shown_as: str, allow: AllowList | None = None) -> Iterator[Hit]:
    """The hits of one file, located (``file`` is ``shown_as``); the caller
    leaves binary files out (see :func:`audit`)."""
    allow = allow or AllowList()
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        located = _scan_parquet(path)
    elif suffix in YAML_SUFFIXES:
        located = _scan_yaml(path)
    else:
        located = _scan_markup(path) if suffix in MARKUP_SUFFIXES else _scan_lines(path)
    for hit in located:
        if not allow.allows(hit.value):
            yield replace(hit, file=shown_as)


def _scan_lines(path: Path) -> Iterator[Hit]:
    with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
        for number, text, done, held in _pieces(handle):
            for hit in _scan_prepared(text):
                end = hit.start + len(hit.value)
                if done < end <= len(text) - held:
                    yield replace(hit, line=number)
    yield from _split_lines(path)


WHOLE_JSON_LIMIT = 64 << 20  # a .json file up to this size is also read as one document


def _split_lines(path: Path) -> Iterator[Hit]:
    """Values split over array elements or sibling fields
    (:func:`_split_hits`) in each line of a text file that is a JSON
    document (JSON Lines); a ``.json`` file written over several lines is
    read whole, each hit on the line where its first part is."""
    lines = 0
    with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
        while line := handle.readline(LINE_PIECE):
            lines += 1
            if not line.endswith("\n") and len(line) == LINE_PIECE:
                while (rest := handle.readline(LINE_PIECE)) and not rest.endswith("\n"):
                    pass  # a line longer than any document worth joining: its pieces were scanned
                continue
            yield from (replace(hit, line=lines) for hit in _split_hits(line))
    if lines > 1 and path.suffix.lower() == ".json" and path.stat().st_size <= WHOLE_JSON_LIMIT:
        text = path.read_text(encoding="utf-8", errors="replace")
        for hit in _split_hits(text):
            first = json.dumps(hit.value.split()[0])[:-1]  # the opening quote and first group of the first part
            at = text.find(first)
            yield replace(hit, line=text.count("\n", 0, at) + 1 if at >= 0 else 1)


def _pieces(handle: IO[str], size: int | None = None) -> Iterator[tuple[int, str, int, int]]:
    """(line number, prepared text, reported before, held for the next
    piece) for each line.  A line longer than ``size`` comes in pieces that
    overlap by ``2 * _OVERLAP`` characters: a piece reports the hits that
    end after ``reported before`` and not in its last ``held`` characters,
    so each value is reported once, by a piece that holds all of it."""
    size = max(size or LINE_PIECE, 4 * _OVERLAP)
    number, carry, pending = 0, "", ""  # carry: prepared text; pending: raw text of a cut escape
    while True:
        piece = handle.readline(size)
        if not piece:
            if carry or pending:  # the file ended right after a full piece
                yield number, carry + _prepare(pending), max(0, len(carry) - _OVERLAP), 0
            return
        if not carry and not pending:
            number += 1
        raw = pending + piece
        line_ends = piece.endswith("\n") or len(piece) < size
        pending = "" if line_ends else _cut_escape(raw)
        raw = raw[: len(raw) - len(pending)]
        text, done = carry + _prepare(raw), max(0, len(carry) - _OVERLAP)
        if line_ends:
            yield number, text, done, 0
            carry = ""
        else:
            yield number, text, done, _OVERLAP
            carry = text[-2 * _OVERLAP:]  # holds any value that ends in the last _OVERLAP characters


def _cut_escape(raw: str) -> str:
    """The end of ``raw`` from the backslash run of an escape that may be
    cut off (``\\u00`` and the ``40`` in the next piece)."""
    last = raw.rfind("\\", max(0, len(raw) - 6))
    if last < 0:
        return ""
    first = last
    while first > 0 and raw[first - 1] == "\\":
        first -= 1
    return raw[first:]


def _scan_yaml(path: Path) -> Iterator[Hit]:
    """Every scalar (key or value) of a YAML file, unfolded, with the line
    it starts on; a file YAML cannot parse is read line by line instead."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: list[Hit] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for event in yaml.parse(handle, Loader=loader):
                if isinstance(event, yaml.ScalarEvent) and event.value:
                    found += [replace(h, line=event.start_mark.line + 1) for h in scan_text(event.value)]
    except yaml.YAMLError:
        yield from _scan_lines(path)
        return
    yield from found


def _scan_markup(path: Path) -> Iterator[Hit]:
    for number, text in _markup_chunks(path):
        yield from (replace(h, line=number) for h in scan_text(text))


def _markup_chunks(path: Path) -> Iterator[tuple[int, str]]:
    """The text and the meaningful attribute values of an HTML, SVG or XML
    file, with their line numbers.  Drawing data (path coordinates, sizes,
    styles) and ``data:`` URIs (embedded images) are left out: their digit
    runs are not phone numbers."""
    from html.parser import HTMLParser

    pending: list[tuple[int, str]] = []

    class Reader(HTMLParser):
        skip = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "style":
                self.skip += 1
            line = self.getpos()[0]
            pending.extend((line, value) for name, value in attrs
                           if value and name not in _DRAWING_ATTRIBUTES and not value.lstrip().startswith("data:"))

        def handle_endtag(self, tag: str) -> None:
            if tag == "style" and self.skip:
                self.skip -= 1

        def handle_data(self, data: str) -> None:
            if not self.skip and data.strip():
                pending.append((self.getpos()[0], data))

        def handle_comment(self, data: str) -> None:
            pending.append((self.getpos()[0], data))

    reader = Reader(convert_charrefs=True)
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            reader.feed(line)
            yield from pending
            pending.clear()
    reader.close()
    yield from pending


def _has_text(dtype: Any) -> bool:
    import polars as pl

    if dtype in (pl.String, pl.Categorical, pl.Binary) or isinstance(dtype, (pl.Categorical, pl.Enum)):
        return True
    if isinstance(dtype, (pl.List, pl.Array)):
        return _has_text(dtype.inner)
    if isinstance(dtype, pl.Struct):
        return any(_has_text(f.dtype) for f in dtype.fields)
    return False


def _cell_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return json.dumps(value, ensure_ascii=False, default=str)  # lists and structs: every string in them


def _scan_parquet(path: Path, batch: int = 10_000) -> Iterator[Hit]:
    """The text columns (and lists or structs holding text) of a Parquet
    file, ``batch`` rows at a time; ``line`` is the 1-based row."""
    import polars as pl

    schema = pl.read_parquet_schema(path)
    columns = [name for name, dtype in schema.items() if _has_text(dtype)]
    if not columns:
        return
    frame = pl.scan_parquet(path).select(columns)
    if hasattr(frame, "collect_batches"):  # polars >= 1.32: streamed
        batches: Iterable[pl.DataFrame] = frame.collect_batches(chunk_size=batch)
    else:
        batches = _sliced(frame, batch)
    row = 0
    for part in batches:
        for name in columns:
            column = part.get_column(name)
            if column.dtype == pl.String:  # each distinct text scanned once (columns repeat a lot)
                found = {v: hits for v in column.drop_nulls().unique().to_list() if (hits := scan_text(v))}
                if not found:
                    continue
                rows: Iterable[tuple[int, Any]] = ((i, column[i]) for i in column.is_in(list(found)).arg_true())
            else:
                found = {}
                rows = enumerate(column.to_list())
            for offset, value in rows:
                if value is None:
                    continue
                hits = found[value] if found else scan_text(_cell_text(value))
                for hit in hits:
                    yield replace(hit, line=row + offset + 1, column=name)
        row += part.height


def _sliced(frame: Any, batch: int) -> Iterator[Any]:
    start = 0
    while True:
        part = frame.slice(start, batch).collect()
        if part.height == 0:
            return
        yield part
        start += part.height


# -- the audit --------------------------------------------------------------------------------

@dataclass
class AuditResult:
    """What one audit read and found."""

    hits: list[Hit] = field(default_factory=list)
    scanned: int = 0  # files read
    skipped: list[str] = field(default_factory=list)  # binary files, not read
    unreadable: list[str] = field(default_factory=list)  # "path: reason"

    @property
    def exit_code(self) -> int:
        return 1 if self.hits else (2 if self.unreadable else 0)


def _scan_sqlite(path: Path) -> Iterator[Hit]:
    """Every text value of every table of an SQLite database (the model
    response cache), read-only; ``line`` is the row's ``rowid``."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            for rowid, *values in db.execute(f"SELECT rowid, * FROM {quoted}"):  # noqa: S608 (a table name read from the file)
                for value in values:
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                    if isinstance(text, str):
                        for hit in scan_text(text):
                            yield replace(hit, line=rowid)


def cache_files(workspace: Path) -> Iterator[Path]:
    """The model response caches the workspace holds (``.cirrus-cache``):
    judge and fluency answers quote the dialogue they judged."""
    folder = workspace / CACHE_FOLDER
    if folder.is_dir():
        yield from sorted(p for p in folder.rglob("*.sqlite3") if p.is_file())


def audit(workspace: Path, allow: Iterable[str] = ()) -> AuditResult:
    """Scan ``workspace`` (see the module docstring for what is read and
    found); ``allow`` adds to the workspace's allow list."""
    allowed = AllowList.for_workspace(workspace, allow)
    result = AuditResult()
    for path in cache_files(workspace):
        shown = path.relative_to(workspace).as_posix()
        try:
            result.hits.extend(replace(hit, file=shown) for hit in _scan_sqlite(path) if not allowed.allows(hit.value))
        except Exception as exc:  # noqa: BLE001 - one bad file must not hide the others
            result.unreadable.append(f"{shown}: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        result.scanned += 1
    for path in workspace_files(workspace):
        shown = path.relative_to(workspace).as_posix()
        try:
            if _is_binary(path):
                result.skipped.append(shown)
                continue
            result.hits.extend(scan_file(path, shown, allowed))
        except Exception as exc:  # noqa: BLE001 - one bad file must not hide the others
            reason = str(exc).splitlines()[0][:160] if str(exc) else ""
            result.unreadable.append(f"{shown}: {type(exc).__name__}" + (f": {reason}" if reason else ""))
            continue
        result.scanned += 1
    return result


def is_workspace(path: Path) -> bool:
    """Whether ``path`` holds a ``tickets/``, ``tool_mocks/`` or ``reports/`` folder."""
    return any((path / top).is_dir() for top in SCANNED_FOLDERS)
