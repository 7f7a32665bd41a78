"""Per-ticket replacement values: format-shaped, readable, consistent.

The same original value always gets the same replacement within one ticket
(so a de-identified tool call still matches its recorded result), and two
different originals never share one (a collision gets a numeric suffix).
Replacements keep the value's shape the way the CirrusBench paper shows it
(``Ja***``, ``157****3190``) so the dialogue still reads naturally.
"""

from __future__ import annotations

import re
from collections import defaultdict

from cirrus.cjk import HAN as _HAN
from cirrus.config import ReplacementConfig

_DIGIT = re.compile(r"\d")
_ACCESS_KEY_PREFIX = re.compile(r"^(LTAI|AKIA|ASIA|AGPA|AIDA|AROA|sk-proj-|sk-|ghp_|gho_|github_pat_)")
_URL_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def _mask_word(word: str, star: str, keep: int = 2) -> str:
    keep = min(keep, max(len(word) - 1, 1)) if len(word) > 1 else 0
    return word[:keep] + star * 3


def _mask_digits(value: str, star: str, head: int, tail: int) -> str:
    """Mask every digit but the first ``head`` and last ``tail`` ones, keeping
    separators; short values keep fewer digits so most of them is hidden."""
    positions = [m.start() for m in _DIGIT.finditer(value)]
    n = len(positions)
    if n < head + tail + 3:
        head, tail = (0, min(2, n // 3)) if n >= 6 else (0, 0)
    hidden = set(positions[head : n - tail] if tail else positions[head:])
    return "".join(star if i in hidden else ch for i, ch in enumerate(value))


def _mask_alnum(value: str, star: str, head: int, tail: int) -> str:
    chars = [i for i, ch in enumerate(value) if ch.isalnum()]
    n = len(chars)
    if n <= head + tail + 1:
        head, tail = min(head, 1), 0
    hidden = set(chars[head : n - tail] if tail else chars[head:])
    return "".join(star if i in hidden else ch for i, ch in enumerate(value))


_COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "长孙", "宇文", "司徒",
                      "夏侯", "令狐", "端木", "独孤", "南宫", "西门", "轩辕", "呼延", "申屠", "澹台", "公冶", "太史")
# the address kept: up to the district or county ("浙江省杭州市西湖区"), never more than 9 characters
_ADDRESS_HEAD = re.compile("^.{0,9}?(?:区|县|旗)|^.{0,6}?市")


def _mask_chinese(entity: str, value: str, star: str) -> str:
    """Masks for values written in Chinese: a name keeps its surname
    (王**, 欧阳**), an address its province, city and district
    (杭州市西湖区****), a plate its province and letter (京B*****); one
    mask character per hidden character."""
    if entity == "PERSON":
        surname = 2 if value.startswith(_COMPOUND_SURNAMES) and len(value) > 2 else 1
        return value[:surname] + star * max(len(value) - surname, 1)
    if entity == "STREET_ADDRESS":
        head = _ADDRESS_HEAD.match(value)
        kept = head.end() if head and head.end() < len(value) else 0
        return value[:kept] + star * max(len(value) - kept, 3)
    if entity == "CN_LICENSE_PLATE":
        return value[:2] + star * max(len(value) - 2, 3)
    return star * max(len(value), 3)


_REFERENCE_PREFIX = re.compile(r"[A-Za-z]{1,5}[-_]?(?=\d)")


def mask(entity: str, value: str, star: str = "*") -> str:
    """The format-shaped mask of one value (pure; collisions handled by
    :class:`Pseudonymizer`)."""
    if _HAN.search(value):
        return _mask_chinese(entity, value, star)
    if entity == "PERSON":
        return " ".join(_mask_word(part, star) for part in value.split())
    if entity == "EMAIL_ADDRESS" and "@" in value:
        local, _, domain = value.rpartition("@")
        labels = domain.split(".")
        masked_domain = ".".join([_mask_word(labels[0], star, 1)] + labels[1:]) if len(labels) > 1 else _mask_word(domain, star, 1)
        return f"{_mask_word(local, star)}@{masked_domain}"
    if entity in ("PHONE_NUMBER", "ACCOUNT_ID", "CN_RESIDENT_ID") and sum(c.isdigit() for c in value) >= 7:
        return _mask_digits(value, star, head=3, tail=4)
    if entity == "CREDIT_CARD":
        return _mask_digits(value, star, head=0, tail=4)
    if entity == "IP_ADDRESS":
        if "." in value:
            first, *rest = value.split(".")
            return ".".join([first] + [star * 3 for _ in rest])
        groups = value.split(":")
        return ":".join([groups[0]] + [star * 4 if g else "" for g in groups[1:]])
    if entity == "CLOUD_ACCESS_KEY":
        prefix = _ACCESS_KEY_PREFIX.match(value)
        head = len(prefix.group()) if prefix else 2
        return value[:head] + star * max(len(value) - head, 4)
    if entity == "URL_CREDENTIALS":
        return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{star * 3}:{star * 3}@", value, count=1)
    if entity == "RESOURCE_ID":
        return _mask_alnum(value, star, head=3, tail=1) if len(value) > 5 else star * len(value)
    if entity == "REFERENCE_ID":  # a handle keeps its @, a code its letter prefix (INV-); digits hidden
        if value.startswith("@"):
            return "@" + _mask_alnum(value[1:], star, head=2, tail=0)
        prefix = _REFERENCE_PREFIX.match(value)
        head = prefix.end() if prefix and any(c.isdigit() for c in value[prefix.end():]) else 0
        return value[:head] + _mask_alnum(value[head:], star, head=0, tail=2 if len(value) - head >= 8 else 0)
    if entity == "SECRET":  # nothing of a credential is kept, not even its length past 40
        return star * min(max(len(value), 8), 40)
    if entity == "DATE_OF_BIRTH":  # keep the year, as HIPAA's safe harbour does
        year = re.match(r"^(?:18|19|20)\d\d", value)
        return (year.group() if year else "") + _DIGIT.sub(star, value[year.end() if year else 0 :])
    if entity == "STREET_ADDRESS":
        return " ".join(_mask_word(w, star, 1) if any(c.isalnum() for c in w) else w for w in value.split())
    return _mask_alnum(value, star, head=2, tail=0)


def already_masked(value: str, star: str = "*") -> bool:
    """Whether ``value`` is a mask this module wrote: it holds the mask
    character, at least as many of them as letters and digits left visible
    (``10**``, ``Ja***``, ``ja***@g***.com``, ``1*``), so de-identifying a
    masked workspace again changes nothing; ``p@ss**word`` is no mask."""
    stars = value.count(star)
    return stars >= 1 and stars >= sum(c.isalnum() for c in value)


class Pseudonymizer:
    """Replacement values for one ticket."""

    def __init__(self, config: ReplacementConfig) -> None:
        self._config = config
        self._by_original: dict[tuple[str, str], str] = {}
        self._taken: dict[str, str] = {}  # replacement -> original
        self._tag_counts: defaultdict[str, int] = defaultdict(int)

    def replace(self, entity: str, original: str) -> str:
        key = (entity, original)
        if key in self._by_original:
            return self._by_original[key]
        if self._config.style == "tag":
            self._tag_counts[entity] += 1
            candidate = f"<{entity}_{self._tag_counts[entity]}>"
        else:
            candidate = mask(entity, original, self._config.mask_char)
            if already_masked(original, self._config.mask_char) or (
                    candidate == original and self._config.mask_char * 3 in original):
                candidate = original  # "10**", "ja***@g***.com": a second pass changes nothing
            elif candidate == original:  # nothing maskable: hide it whole
                candidate = self._config.mask_char * max(len(original), 3)
        base, n = candidate, 1
        while self._taken.get(candidate, original) != original:
            n += 1
            candidate = f"{base}~{n}"
        self._taken[candidate] = original
        self._by_original[key] = candidate
        return candidate

    @property
    def mapping(self) -> dict[tuple[str, str], str]:
        return dict(self._by_original)
