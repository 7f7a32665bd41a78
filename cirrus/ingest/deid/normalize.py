"""Read a text as its writer meant it before looking for personal values.

People and systems disguise values without meaning to: an e-mail typed with a
full-width ``＠`` on a Chinese keyboard, ``&#64;`` left by an HTML export, a
phone number URL-encoded in a link (``%2B1%20415...``), zero-width characters
pasted in from a web page.  Detection reads a *normalised view* of each text
and maps what it finds back onto the original characters, so the original
form is what gets replaced:

* HTML character references (``&#64;``, ``&#x40;``, ``&commat;``, ``&amp;``)
  become their characters;
* ``%XX`` escapes of printable ASCII become their characters;
* full-width ASCII letters, digits and the symbols that build addresses and
  numbers (``＠ ． － ＿ ＋ （ ） ／``) become ASCII; other full-width forms
  (Chinese punctuation such as ``，`` and ``：``, which cue rules read) stay;
* zero-width characters and the soft hyphen are dropped.

A text with none of these is read as it is (no copy, no mapping).
"""

from __future__ import annotations

import html
import re

# what a normalised view rewrites; a text without any of it is left alone
_DISGUISE = re.compile(
    r"&(?:#\d{2,7}|#[xX][0-9A-Fa-f]{2,6}|[A-Za-z]{2,10});|%[2-7][0-9A-Fa-f]|[\uff01-\uff5e]|[\u200b-\u200d\u2060\ufeff\u00ad]")
_FULL_WIDTH_SYMBOLS = frozenset("＠．－＿＋（）／")
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad")


def _full_width(char: str) -> str | None:
    """The ASCII form of a full-width letter, digit or address symbol."""
    if "０" <= char <= "９" or "Ａ" <= char <= "Ｚ" or "ａ" <= char <= "ｚ" or char in _FULL_WIDTH_SYMBOLS:
        return chr(ord(char) - 0xFEE0)
    return None


def _replacement(piece: str) -> str | None:
    """What one match of :data:`_DISGUISE` stands for (None: keep it)."""
    if piece.startswith("&"):
        plain = html.unescape(piece)
        return plain if plain != piece else None
    if piece.startswith("%"):
        char = chr(int(piece[1:], 16))
        return char if 0x20 <= ord(char) <= 0x7E else None
    if piece in _ZERO_WIDTH:
        return ""
    return _full_width(piece)


class NormalisedView:
    """A text's normalised form and, for each of its characters, where it
    came from in the original."""

    __slots__ = ("text", "_starts", "_ends")

    def __init__(self, text: str, starts: list[int], ends: list[int]) -> None:
        self.text = text
        self._starts = starts
        self._ends = ends

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original characters of the view's ``[start, end)``."""
        if end <= start:
            at = self._starts[start] if start < len(self._starts) else (self._ends[-1] if self._ends else 0)
            return at, at
        return self._starts[start], self._ends[end - 1]


def normalised_view(text: str) -> NormalisedView | None:
    """The normalised view of ``text`` (see the module doc); None when it
    has nothing to normalise."""
    if not _DISGUISE.search(text):
        return None
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = 0
    changed = False
    for match in _DISGUISE.finditer(text):
        plain = _replacement(match.group())
        if plain is None:
            continue
        for index in range(at, match.start()):
            parts.append(text[index])
            starts.append(index)
            ends.append(index + 1)
        for char in plain:
            parts.append(char)
            starts.append(match.start())
            ends.append(match.end())
        at = match.end()
        changed = True
    if not changed:
        return None
    for index in range(at, len(text)):
        parts.append(text[index])
        starts.append(index)
        ends.append(index + 1)
    return NormalisedView("".join(parts), starts, ends)


__all__ = ["NormalisedView", "normalised_view"]
