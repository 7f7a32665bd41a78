"""Drop filler turns: greetings, sign-offs, "are you still there?", system
notices.

A message is filler only when it is short and every sentence of it matches a
filler rule (a trailing name is ignored: "Have a nice day, Ethan!"); anything
carrying information (a number, an id, a question about the problem) stays.  Tool calls and results are never dropped.

Messages written in Chinese (any Han character or CJK punctuation) are read
differently, whatever the configured language; messages without them take
the English path unchanged:

* length: every Han character counts as a word, plus the Latin words between
  them (``max_filler_words``);
* information: besides digits (full-width ``０``-``９`` included), ``@`` and
  ``://``, a Chinese numeral used as a quantity (``三台``, ``两次``,
  ``半小时``, ``第二``) or a bare domain keeps the message;
* sentences: a message is cut into clauses after every run of ``。！？，、；~…``
  (and their ASCII forms), spaces or not;
* a clause is filler when it can be cut, from left to right, into pieces that
  each are a whole match of a filler rule, a vocative (``张先生``, ``王女士``,
  ``亲``, ``小李``), or decoration (spaces, ``，。！~…``, emoji, ``[微笑]``-style
  stickers, ``(^_^)``-style faces): so ``好的谢谢张先生~`` is filler when
  ``好的`` and ``谢谢`` each match a rule.  A question mark is not decoration:
  it is filler only where a rule allows it (``请问还在吗？`` does,
  ``好的？`` does not);
* the message is filler only when every clause is and at least one piece
  matched a rule (a message that is only a name, ``王女士``, may be an answer).

On a large corpus ingest also learns the agents' canned lines from the corpus
itself (:mod:`cirrus.ingest.canned`, docs/canned-lines.md): the Denoiser is
then given a ``cut_lines`` function that cuts those lines out of every agent
message first; a message left without words is dropped like filler.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from cirrus.cjk import HAN_RANGES
from cirrus.config import DenoiseConfig
from cirrus.schema import Event, Ticket

_HAS_DATA = re.compile(r"\d|@|://")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
# a trailing vocative: "Have a nice day, Ethan!" -> "Have a nice day!"
_VOCATIVE = re.compile(r",\s*[A-Z][\w\x27-]*(?:\s[A-Z][\w\x27-]*)?(?=[.!?]*$)")

# --- Chinese ----------------------------------------------------------------

_HAN = HAN_RANGES
# Han characters, CJK punctuation (U+3000-303F) and full-width forms (U+FF00-FFEF)
_CJK_TEXT = re.compile(f"[{_HAN}\u3000-\u303f\uff00-\uffef]")
_HAN_CHAR = re.compile(f"[{_HAN}]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
# a clause ends after a run of these (spaces after it are eaten)
_CLAUSE_PUNCT = "。！？，、；~～…!?,;"
_ZH_SPLIT = re.compile(f"(?<=[{_CLAUSE_PUNCT}.])(?![{_CLAUSE_PUNCT}.])\\s*")
# a Chinese numeral counting something: 三台, 两次, 十几个, 半小时, 第二
_ZH_NUMERAL = "零〇一二两三四五六七八九十百千万亿几半"
_ZH_QUANTITY = re.compile(
    f"[{_ZH_NUMERAL}]+\\s*(?:台|个|次|天|块|元|角|月|年|号|日|点|小时|钟头|分钟|秒|张|条|笔|份|位|人|间|周|星期|遍|页|核|倍|"
    f"兆|[GMTK]B?|G|家|种|项|批|层|行|列|组|套|本|节|段|句|封|通|单|处|回|期|岁|米|公里|斤|克|度|毫秒)"
    f"|第[{_ZH_NUMERAL}]"
)
# a domain or dotted name without a scheme: www.example.com, example.cn
_DOMAIN = re.compile(r"[A-Za-z0-9-]+\.[A-Za-z]{2,}")
# decoration between and after clauses: spaces, punctuation other than "?",
# emoji, WeChat-style stickers ([微笑]) and faces ((^_^), ^_^, :) )
_STICKERS = (
    "微笑|撇嘴|色|发呆|得意|流泪|害羞|闭嘴|睡|大哭|尴尬|调皮|呲牙|惊讶|难过|酷|冷汗|偷笑|愉快|憨笑|悠闲|奋斗|"
    "擦汗|鼓掌|坏笑|哈欠|委屈|快哭了|亲亲|可怜|玫瑰|爱心|心|太阳|拥抱|强|握手|胜利|抱拳|拳头|OK|ok|耶|笑脸|"
    "破涕为笑|捂脸|奸笑|机智|加油|汗|嘿哈|跳跳|转圈|合十|庆祝|礼物|红包|好的|谢谢|赞|点赞|嘿嘿|哈哈|呵呵|害羞"
)
_DECOR = re.compile(
    r"(?:\s|[，,。.！!~～…、；;]|"
    f"\\[(?:{_STICKERS})\\]|"
    r"[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B50\u2764\uFE0F\u200D]|"
    r"[（(](?:[^\w（）()]|_){1,12}[)）]|\^[_\-\s]*\^|[:：;；]-?[)）DPp])+"
)
_ZH_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟"
    "谭陆汪范金石廖贾夏韦付傅方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢"
)
_ZH_TITLES = "先生|女士|小姐|老师|总|经理|工|同学|老板|主管|师傅|总监|律师|医生|博士|教授|阿姨|叔叔|大哥|姐姐|哥|姐"
# a full name greeted, a greeting like any other: 吴婷您好 (a name alone may be an answer)
_ZH_GREETED_NAME = re.compile(f"(?:欧阳|司马|上官|诸葛|东方|皇甫|[{_ZH_SURNAMES}])[{_HAN}]{{1,2}}(?:您好|你好)")
_ZH_VOCATIVE = re.compile(
    f"(?:欧阳|司马|上官|诸葛|东方|皇甫|[{_ZH_SURNAMES}])[{_HAN}]{{0,2}}?(?:{_ZH_TITLES})"
    f"|[小老阿][{_ZH_SURNAMES}]"
    r"|(?:尊敬|亲爱)的(?:用户|客户|会员|朋友)|亲爱的|亲亲|亲们|亲|宝宝|宝|客服|客服小姐姐|小姐姐|小哥哥|小哥|老师|师傅|老板|美女|帅哥|各位|朋友|先生|女士"
)


# what the corpus pass (cirrus.ingest.canned) replaces by a slot before it counts a line
ZH_GREETED_NAME = _ZH_GREETED_NAME
ZH_VOCATIVE = _ZH_VOCATIVE


def _is_cjk(text: str) -> bool:
    return _CJK_TEXT.search(text) is not None


def _zh_length(text: str) -> int:
    return len(_HAN_CHAR.findall(text)) + len(_LATIN_WORD.findall(text))


def has_data(text: str) -> bool:
    """Whether ``text`` carries a value: a digit (full-width too), ``@``,
    ``://``, a domain, or a Chinese numeral counting something."""
    return _zh_has_data(text)


def _zh_has_data(text: str) -> bool:
    if _HAS_DATA.search(text) or _DOMAIN.search(text):
        return True
    for match in _ZH_QUANTITY.finditer(text):
        # "祝您有美好的一天" wishes a nice day, it does not count days
        if match.group() == "一天" and text[: match.start()].endswith("的"):
            continue
        return True
    return False


@dataclass(frozen=True, slots=True)
class Denoiser:
    max_words: int
    customer: tuple[re.Pattern[str], ...]
    agent: tuple[re.Pattern[str], ...]
    system_keep: tuple[re.Pattern[str], ...]
    drop_system: bool
    # the corpus's canned lines cut out of an agent message (None: the rules alone)
    cut_lines: Callable[[str], str] | None = None

    @classmethod
    def from_config(cls, config: DenoiseConfig, cut_lines: Callable[[str], str] | None = None) -> "Denoiser":
        return cls(
            max_words=config.max_filler_words,
            customer=tuple(re.compile(p) for p in config.customer_filler),
            agent=tuple(re.compile(p) for p in config.agent_filler),
            system_keep=tuple(re.compile(p) for p in config.system_keep),
            drop_system=config.drop_system,
            cut_lines=cut_lines,
        )

    def is_filler(self, event: Event) -> bool:
        if event.role == "system":
            if event.context:  # the customer's context is kept (cirrus.ingest.context)
                return False
            return self.drop_system and not any(p.search(event.text) for p in self.system_keep)
        rules = self.customer if event.role == "customer" else self.agent if event.role == "agent" else ()
        if not rules or event.ocr:
            return False
        text = " ".join(event.text.split())
        if not text:
            return True
        if _is_cjk(text):
            return self._zh_filler(text, rules)
        if len(text.split()) > self.max_words or _HAS_DATA.search(text):
            return False
        sentences = [_VOCATIVE.sub("", part) for part in _SENTENCE_END.split(text) if part]
        return all(any(p.fullmatch(sentence) for p in rules) for sentence in sentences)

    def _zh_filler(self, text: str, rules: tuple[re.Pattern[str], ...]) -> bool:
        if _zh_length(text) > self.max_words or _zh_has_data(text):
            return False
        matched_rule = False
        for clause in _ZH_SPLIT.split(text):
            if not clause:
                continue
            result = _segment(clause, rules)
            if result is None:
                return False
            matched_rule = matched_rule or result
        return matched_rule

    def __call__(self, ticket: Ticket) -> Ticket:
        events = ticket.events if self.cut_lines is None else [
            cut for cut in (self._cut(e) for e in ticket.events) if cut is not None]
        return replace(ticket, events=[e for e in events if not self.is_filler(e)])

    def _cut(self, event: Event) -> Event | None:
        """``event`` without its canned lines; None when nothing is left of an
        agent message (customer and other events are never touched)."""
        assert self.cut_lines is not None
        if event.role != "agent" or not event.text:
            return event
        text = self.cut_lines(event.text)
        if text == event.text:
            return event
        return replace(event, text=text) if text else None


def _segment(clause: str, rules: tuple[re.Pattern[str], ...]) -> bool | None:
    """Cut ``clause`` into rule matches, vocatives and decoration.

    Returns None when it cannot be cut so, else whether some piece matched a
    rule.  ``best[i]`` is None when ``clause[:i]`` cannot be cut, else whether
    some cut of it uses a rule."""
    n = len(clause)
    best: list[bool | None] = [None] * (n + 1)
    best[0] = False
    for i in range(n):
        if best[i] is None:
            continue
        for j in range(i + 1, n + 1):
            if best[j]:
                continue
            piece = clause[i:j]
            if any(p.fullmatch(piece) for p in rules) or _ZH_GREETED_NAME.fullmatch(piece):
                best[j] = True
            elif _DECOR.fullmatch(piece) or _ZH_VOCATIVE.fullmatch(piece):
                best[j] = best[i] or bool(best[j])
    return best[n]
