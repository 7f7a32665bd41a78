"""Which language a ticket is processed in: ``"zh"`` (the ``[languages.zh]``
settings) or ``"en"`` (the pipeline's base settings).

:func:`ticket_language` takes the ticket's own ``language`` field when the
input is trusted to carry one (normalised: ``zh-CN``, ``zh_cn``, ``zh-Hans``,
``cmn`` -> ``zh``; ``en-US`` -> ``en``), otherwise :func:`detect_language`
reads the customer, agent and system texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cirrus.cjk import HAN
from cirrus.schema import Ticket

__all__ = ["HAN_SHARE", "detect_language", "normalize_language", "ticket_language"]

#: A ticket is Chinese when Han characters make up at least this share of
#: (Han characters + English words); see :func:`detect_language`.
HAN_SHARE = 0.45

_HAN = HAN
# CJK punctuation (、。「」【】…) and full-width punctuation (，！？：；（）)
_CJK_PUNCT = re.compile("[\u3001-\u3003\u3008-\u3011\u3014-\u301f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
_KANA = re.compile("[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff]")
_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_NOT_LATIN = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0003134f]"
)

_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{1,15}://|www\.)[^\s\u3000-\u303f\uff00-\uffef\u4e00-\u9fff]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.A)
_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_EDGE_PUNCT = "\"'“”‘’()[]{}<>,.;:!?*#|"
# a line of a log, stack trace or shell session
_LOG_LINE = re.compile(
    r"^\s*(?:at\s+[\w$.<>]+\(|File \"|Traceback\b|Caused by\b|\.\.\. \d+ more|\$ |\w+(?:Error|Exception)\b"
    r"|(?:ERROR|WARN|WARNING|INFO|DEBUG|FATAL|TRACE)\b)"
    r"|\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}|\[(?:ERROR|WARN|WARNING|INFO|DEBUG|FATAL|TRACE)\]|[{};]\s*$"
)
_ZH_CODES = {"zh", "cmn", "zho", "chi"}
_EN_CODES = {"en", "eng"}


def _is_code_like(token: str) -> bool:
    """An id, path, version, identifier, hex string or acronym: not prose."""
    if not _WORD.fullmatch(token):
        return True  # digits, _, /, ., =, :: ... inside
    if len(token) >= 2 and token.isupper():
        return True  # ECS, HTTP, ERROR
    return _CAMEL.search(token) is not None  # AccessKey, getUser, iPhone


def _english_words(line: str) -> int:
    tokens = [t.strip(_EDGE_PUNCT) for t in _NOT_LATIN.sub(" ", line).split()]
    tokens = [t for t in tokens if any(c.isalnum() for c in t)]
    if not tokens:
        return 0
    code = sum(1 for t in tokens if _is_code_like(t))
    # a Han-free line that is mostly code (a log line, a command, a config
    # fragment) says nothing about the language the people write in
    if not _HAN.search(line) and (code * 3 >= len(tokens) or _LOG_LINE.search(line)):
        return 0
    return len(tokens) - code


def detect_language(texts: Iterable[str]) -> str:
    """``"zh"`` when the texts are written in Chinese, else ``"en"``.

    The rule counts two things over all the texts given:

    * Chinese: Han characters (CJK Unified Ideographs, Extension A, the
      compatibility block and Extensions B and later) and CJK / full-width
      punctuation (``，。！？、：；（）【】``), which only a Chinese input method
      types;
    * English: words of Latin letters.  Words, not letters: a Han character
      carries about as much as an English word (a Chinese sentence is about
      1.5 times as many characters as its English translation has words),
      while letters would make every English word count five times.  Not
      counted as words: URLs, e-mail addresses, anything in backticks, tokens
      with digits or ``_ / . = :`` inside (ids such as ``i-bp1abc2def3``, hex,
      paths, versions), acronyms in capitals (``ECS``, ``HTTP``) and
      camelCase names (``AccessKey``), and whole lines without Han
      characters that are mostly such tokens or look like a log, stack-trace
      or shell line (a timestamp, ``[ERROR]`` or a line opening with a log
      level, ``Traceback``, ``at foo.Bar(``, ``FooError``, ``$ cmd``, a
      trailing ``{``/``}``/``;``).

    The texts are Chinese when the Chinese count is at least ``HAN_SHARE``
    (0.45) of the two together: about 4 Han characters (or CJK punctuation
    marks) for every 5 English words.  A Chinese sentence has about 1.5
    characters per word of its English translation, so this holds when a
    third or more of what the people wrote (ids, code, logs and names aside)
    is in Chinese.  A Chinese ticket keeps that easily with product names,
    English error messages and pasted logs (most of a log is not counted, and
    the agent's answers are Chinese too); an English ticket quoting a Chinese
    company name or error message of 10-20 characters stays English from
    some 12-25 English words on, which almost every ticket has.

    Japanese and Korean are not Chinese: one kana for every ten Han
    characters makes the texts ``"en"`` (the base settings), and Hangul
    syllables count on the English side.  No Han character at all (empty
    input, only numbers or code): ``"en"``.
    """
    han = 0
    other = 0
    kana = 0
    for text in texts:
        if not text:
            continue
        text = _CODE_BLOCK.sub(" ", text)
        text = _URL.sub(" ", text)
        text = _EMAIL.sub(" ", text)
        han += len(_HAN.findall(text)) + len(_CJK_PUNCT.findall(text))
        kana += len(_KANA.findall(text))
        other += len(_HANGUL.findall(text))
        for line in text.splitlines():
            other += _english_words(line)
    if han == 0:
        return "en"
    if kana * 10 >= han:
        return "en"
    return "zh" if han >= HAN_SHARE * (han + other) else "en"


def normalize_language(code: str) -> str:
    """``zh-CN``, ``zh_cn``, ``zh-Hans``, ``cmn``, ``zho`` -> ``zh``;
    ``en-US``, ``en_GB``, ``eng`` -> ``en``; any other code lower-cased as
    given (``fr-FR`` -> ``fr-fr``)."""
    lowered = code.strip().lower()
    primary = re.split(r"[-_]", lowered, maxsplit=1)[0]
    if primary in _ZH_CODES:
        return "zh"
    if primary in _EN_CODES:
        return "en"
    return lowered


def ticket_language(ticket: Ticket, given: bool) -> str:
    """The language ``ticket`` is processed in.

    ``given``: the input carries a trustworthy ``language`` field, which is
    used (normalised; a blank one falls back to detection).  Otherwise the
    language is detected from the ticket's customer, agent and system texts.
    """
    if given:
        code = normalize_language(ticket.language or "")
        if code:
            return code
    return detect_language(e.text for e in ticket.events if e.role in ("customer", "agent", "system") and e.text)
