"""Read a text as its writer meant it before looking for personal values.

People and systems disguise values without meaning to: an e-mail typed with a
full-width ``＠`` on a Chinese keyboard, ``&#64;`` left by an HTML export, a
phone number URL-encoded in a link (``%2B1%20415...``), zero-width characters
pasted in from a web page.  Detection reads a *normalised view* of each text
and maps what it finds back onto the original characters, so the original
form is what gets replaced:

* HTML character references, named, decimal or hexadecimal in any letter case
  (``&commat;``, ``&#64;``, ``&#X40;``, ``&amp;``; a numeric one without its
  ``;`` too, or with its ``;`` percent-encoded, ``&#X74%3B``) become their
  characters;
* ``%XX`` escapes (either case of hex digit, one character or all of a value)
  become their characters, a run of them that spells UTF-8 its character
  (``%EF%BC%A0`` is ``＠``, then ``@``);
* in a query string (after a URL's ``?``, or a form body ``a=1&b=2``) ``+``
  is a space, except in a value that holds a bare ``@`` (``?to=jane+tag@x.org``
  is one address) and where it was written ``%2B``;
* Unicode compatibility forms become their NFKC form: full-width letters,
  digits and symbols, circled and mathematical digits and letters,
  superscripts, ligatures (``ﬁ``), non-breaking and other Unicode spaces;
  Chinese punctuation (``，`` ``：`` ``。``, the ideographic forms block)
  stays, since cue rules read it, unless it stands between Latin letters
  or digits (``２４０８：４００２``); the full-width symbols that build
  addresses and numbers (``＠ ． － ＿ ＋ （ ） ／``) always convert;
* format characters (Unicode category Cf: zero-width spaces and joiners,
  ``U+2060``, ``U+FEFF``, the soft hyphen, direction marks) are dropped.

A disguise inside a disguise (``&amp;#64;``, ``%2540``, an entity
percent-encoded) is read by applying the same steps again, at most three
times.  Each character of the view knows the original characters it came
from, so a span found in the view maps back onto exactly the original
characters of the value, never onto its neighbours.

A text with none of these is read as it is (no copy, no mapping).
"""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from collections.abc import Callable

_ROUNDS = 3


def _char_class(predicate) -> str:
    """A regex character class body for every code point ``predicate`` holds for."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if predicate(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


_FORMAT = _char_class(lambda c: unicodedata.category(c) == "Cf")
_FORMAT_CHAR = re.compile(f"[{_FORMAT}]")
# East Asian punctuation zones: CJK symbols and punctuation, vertical, compatibility
# and small forms, half- and full-width forms
_CJK_ZONES = "\u3000-\u303f\ufe10-\ufe1f\ufe30-\ufe6f\uff00-\uffef"
_IN_CJK_ZONE = re.compile(f"[{_CJK_ZONES}]")
# what always converts there: letters, digits and the symbols of addresses and numbers
_ADDRESS_SYMBOLS = frozenset("@.-_+()/")
_LATIN_ALNUM = "0-9A-Za-z\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"
# a run of East Asian punctuation (with ASCII punctuation in it, "：:") between
# Latin letters or digits converts too
_ASCII_PUNCT = r"!-/:-@\[-`{-~"
_PUNCT_BETWEEN_LATIN = re.compile(f"(?<=[{_LATIN_ALNUM}])[{_ASCII_PUNCT}]*[{_CJK_ZONES}][{_CJK_ZONES}{_ASCII_PUNCT}]*"
                                  f"(?=[{_LATIN_ALNUM}])")

# references and escapes
# a numeric reference may lack its ";", unless a format character follows
# (``&#6\u200b4;`` is ``&#64;`` with a zero-width space inside, read next round)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}(?:;|(?![0-9" + _FORMAT + r"]))|#[xX][0-9A-Fa-f]{1,6}(?:;|(?![0-9A-Fa-f"
                     + _FORMAT + r"]))|[A-Za-z][A-Za-z0-9]{1,31};)")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# query strings: after a URL's "?", or a form body of two pairs or more
# "&" inside a value: a character reference, not the next pair ("&amp;" is one)
_REF_AMP = r"&(?!amp;)(?=#|[A-Za-z][A-Za-z0-9]*;)"
_QUERY = re.compile(r"\?((?:[^\s#\"'<>?]|&#)*=(?:[^\s#\"'<>]|&#)*)"
                    r"|(?<![^\s\"'(\[{,;:])([\w.%\[\]-]+=(?:[^\s\"'<>&]|" + _REF_AMP + r")*"
                    r"(?:&(?:amp;)?[\w.%\[\]-]+=(?:[^\s\"'<>&]|" + _REF_AMP + r")*)+)")
_QUERY_VALUE = re.compile(r"=((?:[^&]|" + _REF_AMP + r")*)")

# a quick look: a text with none of these and in NFKC (Chinese punctuation
# aside) has nothing to normalise
_MAYBE = re.compile(r"&#|&[A-Za-z][A-Za-z0-9]{1,31};|%[0-9A-Fa-f]{2}" f"|[{_FORMAT}]")
_KEPT_CJK = re.compile(f"[{_CJK_ZONES}]+")


def _kept_cjk(char: str) -> bool:
    """Whether an East Asian punctuation form stays as it is in the view
    (unless it stands between Latin letters or digits)."""
    folded = unicodedata.normalize("NFKC", char)
    return not (len(folded) == 1 and (folded.isascii() and (folded.isalnum() or folded in _ADDRESS_SYMBOLS)
                                      or folded == " "))


def _folded(char: str) -> str:
    """The NFKC form of one character (or a character and its combining
    marks); any space separator is a space."""
    if len(char) == 1 and unicodedata.category(char) == "Zs":
        return " "
    return unicodedata.normalize("NFKC", char)


def _percent_decoded(run: str) -> list[tuple[str, int, int]]:
    """The characters a run of ``%XX`` escapes spells, each with the range
    of the run it came from; an escape that is a control character (or
    part of no valid UTF-8 sequence) is kept as it is."""
    data = bytes(int(run[i + 1:i + 3], 16) for i in range(0, len(run), 3))
    out: list[tuple[str, int, int]] = []
    index = 0
    while index < len(data):
        byte = data[index]
        width = 1 if byte < 0x80 else 2 if 0xC2 <= byte <= 0xDF else 3 if 0xE0 <= byte <= 0xEF \
            else 4 if 0xF0 <= byte <= 0xF4 else 0
        char = None
        if width:
            try:
                char = data[index:index + width].decode("utf-8")
            except UnicodeDecodeError:
                char = None
        if char is not None and len(char) == 1 and (
                unicodedata.category(char) not in ("Cc", "Cn", "Co", "Cs") or char in "\t\n\r"):
            out.append((char, 3 * index, 3 * (index + width)))
            index += width
        else:
            out.append((run[3 * index:3 * index + 3], 3 * index, 3 * index + 3))  # kept: maps char by char
            index += 1
    return out


def _query_values(text: str) -> set[int]:
    """Where the values of query strings lie, those in which ``+`` stands
    for a space (not those holding a bare ``@``)."""
    if "=" not in text:
        return set()
    found: set[int] = set()
    for match in _QUERY.finditer(text):
        group = 1 if match.group(1) is not None else 2
        query, offset = match.group(group), match.start(group)
        for pair in _QUERY_VALUE.finditer(query):
            value = pair.group(1)
            if "@" in value:  # "jane+tag@x.org": an address whose + is its own
                continue
            if any(_TOKEN_PIECE.fullmatch(piece) for piece in value.split("+")):
                continue  # a key or signature in base64 ("key=Qm3vT8kP...A3+ASbG7kQ2m="): its + is its own
            found.update(range(offset + pair.start(1), offset + pair.end(1)))
    return found


# a piece of a query value that is a token, not a word: 8 characters or more mixing letters and digits
_TOKEN_PIECE = re.compile(r"(?=[A-Za-z0-9/=]*[0-9])(?=[A-Za-z0-9/=]*[A-Za-z])[A-Za-z0-9/=]{8,}")


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

    def _then(self, inner: NormalisedView) -> NormalisedView:
        """This view read again through ``inner`` (a view of this view's text)."""
        return NormalisedView(inner.text, [self._starts[s] for s in inner._starts],
                              [self._ends[e - 1] for e in inner._ends])


def _one_round(text: str, space: Callable[[int], bool]) -> NormalisedView | None:
    """One reading of ``text``; ``space(i)``: whether a ``+`` at ``i`` is a space."""
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    changed = False
    between_latin = {i for m in _PUNCT_BETWEEN_LATIN.finditer(text) for i in range(m.start(), m.end())} \
        if _IN_CJK_ZONE.search(text) else set()

    def emit(piece: str, start: int, end: int) -> None:
        for char in piece:
            parts.append(char)
            starts.append(start)
            ends.append(end)

    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char == "&":
            match = _ENTITY.match(text, index)
            if match:
                reference, stop = match.group(), match.end()
                if reference[1] == "#" and not reference.endswith(";") and text[stop:stop + 3] in ("%3B", "%3b"):
                    reference, stop = reference + ";", stop + 3  # its ";" percent-encoded: "&#X74%3B"
                plain = html.unescape(reference)
                if plain and plain != reference and not any(unicodedata.category(c) == "Cc" and c not in "\t\n\r"
                                                            for c in plain):
                    emit(plain, index, stop)
                    index, changed = stop, True
                    continue
        elif char == "%":
            match = _PERCENT_RUN.match(text, index)
            if match:
                for piece, begin, stop in _percent_decoded(match.group()):
                    if len(piece) == 3 and piece.startswith("%"):
                        for k, c in enumerate(piece):
                            emit(c, index + begin + k, index + begin + k + 1)
                    else:
                        emit(piece, index + begin, index + stop)
                        changed = True
                index = match.end()
                continue
        elif char == "+" and space(index):
            emit(" ", index, index + 1)
            index, changed = index + 1, True
            continue
        end = index + 1
        while end < size and unicodedata.combining(text[end]):
            end += 1
        cluster = text[index:end]
        if _FORMAT_CHAR.match(char):
            index, changed = index + 1, True  # dropped
            continue
        if cluster.isascii() or (_IN_CJK_ZONE.match(char) and index not in between_latin and _kept_cjk(char)):
            folded = cluster
        else:
            folded = _folded(cluster)
        if folded != cluster:
            changed = True
            emit(folded, index, end)
        else:
            for k, c in enumerate(cluster):
                emit(c, index + k, index + k + 1)
        index = end
    if not changed:
        return None
    return NormalisedView("".join(parts), starts, ends)


def _needs_a_look(text: str) -> bool:
    if _MAYBE.search(text) or ("+" in text and "=" in text and _query_values(text)):
        return True
    if text.isascii():
        return False
    if _PUNCT_BETWEEN_LATIN.search(text):
        return True
    rest = _KEPT_CJK.sub(lambda m: "" if all(_kept_cjk(c) for c in m.group()) else m.group(), text)
    return not unicodedata.is_normalized("NFKC", rest) or any(
        unicodedata.category(c) == "Zs" for c in rest if not c.isascii())


def normalised_view(text: str) -> NormalisedView | None:
    """The normalised view of ``text`` (see the module doc); None when it
    has nothing to normalise."""
    if not _needs_a_look(text):
        return None
    # query strings are found in the original: a space read into one must not end it
    values = _query_values(text) if "+" in text or "%2" in text or "&" in text else set()
    view = _one_round(text, values.__contains__)
    if view is None:
        return None
    for _ in range(_ROUNDS - 1):
        # a + decoded from an entity or a full-width form is a space too; one written %2B is not
        again = _one_round(view.text, lambda i, view=view: view._starts[i] in values and text[view._starts[i]] != "%")
        if again is None:
            break
        view = view._then(again)
    return view


__all__ = ["NormalisedView", "normalised_view"]
