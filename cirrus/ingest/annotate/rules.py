"""Offline rule-based reply-type annotator (the default).

Types, as Cirrus uses them:

* Clarify: the agent checks it understood the customer ("do you mean...",
  "you'd like both passengers moved, right?") or asks for the customer's
  choice or consent before it acts: an offer ("Shall I refund the order?",
  "Would you like me to rebook you?", "我帮您申请退款可以吗？") or a choice
  ("a refund or store credit?").
* Inquire: the agent asks for information it needs (an id, a screenshot,
  what happened, what the customer already tried).
* Solution: the agent acts (tool calls, "I have reset...") or gives concrete
  steps, commands or a diagnosis specific to this customer's problem.
* Appease: apology or reassurance without new information.
* Standard: policy, process or general product information that would read
  the same for any customer.

A reply that asks the customer something (in any of its sentences) is
Clarify or Inquire (Clarify first), even when it also states, apologises or
acts, except that

* a long reply (over 30 words; two Han characters count as one word) that
  both acts and asks is a Solution: the decision it carries matters more
  than the follow-up question;
* a request to try again or check that a fix worked, after the agent acted
  ("I restarted it; could you check again?"), asks for nothing the agent
  needs: the reply is a Solution.

Otherwise the first type whose rule fires wins, in the order Solution,
Appease (short replies), Standard; a reply with none is a Solution when it
carries concrete case data (numbers, commands, links) about the customer's
own case ("your", 您的), else Standard.

How a reply is read: it is cut into sentences (after . ! ? and line breaks,
and after 。！？ and a "?" next to Chinese).  A sentence asks when a
configured inquire or clarify pattern matches it (they decide the type:
configuration overrides the shapes below), or when it has the shape of a
question: a trailing ? or ？, a trailing 吗/么/呢 particle, or an English
auxiliary-inverted opener (shall/would/could/can/do/may I/you...) or
wh-word.  Closing questions ("Is there anything else I can help with?",
还有其他问题吗) and rhetorical ones (a question about no one, answered by
the next sentence: "Not sure where to find it? Go to...") ask nothing.  A
question is Clarify when it confirms the agent's understanding (a tag such
as "..., right?", 对吗, 是吗, 对吧; words such as "mean", "understood",
说的是, 是指; a statement read as a question: "You want the refund to the
card?"), offers an action ("Shall I...", "Would you like me to...",
需要我帮您...吗, 我帮您...可以吗), or asks for a choice or preference
("Would you prefer...", 还是 without a wh-word, 选择哪); else it is Inquire
(wh-questions, "Could you send...", "Have you tried...").  Requests without
a question mark ("Please send...", 请提供...) ask when a configured inquire
pattern says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cirrus.config import AnnotateConfig
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.schema import ReplyType

_LONG_REPLY_WORDS = 30
_SHORT_APPEASE_WORDS = 40
_CONCRETE = re.compile(r"\d|`|https?://|\b[a-z]+-[a-z0-9]{6,}\b")
# the customer's own case, as opposed to what holds for every customer
_CASE_SPECIFIC = re.compile(r"(?i)\byour\b|您的|你的")

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’.\-][A-Za-z0-9]+)*")
# sentence ends: . ! ? … before a space (not "5.2.1", "example.com"), any
# 。！？, a "?" or "!" before Chinese, and line breaks
_SENTENCE_END = re.compile(
    r"(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[。！？])[\"'”’）)\]」』]*|(?<=[!?])(?=[\u3400-\u9fff])|\s*\n+\s*"
)
_LIST_MARKER = re.compile(r"(\d{1,2}|[a-zA-Z]|[ivx]{1,4})[.)]|[-*•]")
_CLAUSE_END = re.compile(r"[，,；;]\s*")
_TRAILER = re.compile(r"[\s\"'”’)\]）」』~～…😊🙂]+$")

# --- English shapes ---------------------------------------------------------
_EN_AUX = ("is", "are", "was", "were", "am", "do", "does", "did", "have", "has", "had", "can", "could",
           "would", "will", "shall", "should", "may", "might", "must", "any", "anything", "isn't", "aren't",
           "don't", "doesn't", "didn't", "won't", "wouldn't", "can't", "couldn't", "haven't", "hasn't")
_EN_WH = ("what", "what's", "which", "who", "whom", "whose", "when", "where", "why", "how", "how's")
_EN_OPENER = re.compile(r"(?i)^(?:" + "|".join(re.escape(w) for w in (*_EN_AUX, *_EN_WH)) + r")\b")
# discourse markers in front of the question proper ("Okay, so ...", "Great, thanks.")
_EN_LEAD = re.compile(
    r"(?i)^(?:(?:so|ok|okay|alright|all right|right|great|thanks|thank you|and|also|then|just|sorry|"
    r"perfect|understood|sure|got it|happy to help( with that)?|hi|hello)\b[\s,;!-]*)+"
)
_EN_CLOSING = re.compile(
    r"(?i)\b(anything else|any other (questions?|issues?|concerns?)|(does|did) (that|this) (help|answer|make sense)|"
    r"is there (anything|something) (more|else))\b"
)
_EN_PERSON = re.compile(r"(?i)\b(you|your|yours|i|i'm|i've|i'll|i'd|me|my|we|we're|we've|we'll|us|our)\b")
_EN_TAG = re.compile(
    r"(?i)(,|\b(?:so|then))\s*(right|correct|yes|no|ok|okay|is that (right|correct|so|it)|am i right|"
    r"have i got (that|it) right|did i get (that|it) right)\s*\?*$|"
    r"\b(is that (right|correct|so)|am i right|did i get (that|it) right|have i got (that|it) right)\s*\?*$"
)
_EN_OFFER = re.compile(
    r"(?i)^(shall|should|can|could|may) (i|we)\b|\b(would|do|did) you (like|want|need) (me|us) to\b|"
    r"\bwant me to\b|\bwould it help if (i|we)\b|\b(shall|should) (i|we)\b"
)
_EN_PREFERENCE = re.compile(
    r"(?i)\b(would|do) you (prefer|rather|like|want)\b|\bwhich (one )?(would|do) you (prefer|like|want|choose)\b|"
    r"\b(suits?|suit) you\b|\bwould you be (ok|okay|happy|fine) with\b"
)
_EN_UNDERSTANDING = re.compile(
    r"(?i)\b(you mean|you meant|understood|understand correctly|got (it|that) right|read (it|that) right|"
    r"referring to|asking about|talking about|you('re| are) (asking|referring|talking))\b|"
    r"^(is|was) (this|that|it) (about|regarding|for|related to)\b|^(can|could|may) i (confirm|check)\b"
)
# a request to retry or check that a fix worked ("could you try again?")
_VERIFY = re.compile(
    r"(?i)\b(try|test|check|see)\b[^.?!]{0,40}\b(again|now|if it works|whether it works|if it('s| is) working|"
    r"that it works|if that (works|helps|fixed|fixes))\b|\b(try|log ?in|sign ?in|connect)(ing)?\b[^.?!]{0,30}"
    r"\b(tell|let) me (know )?(if|whether) (it|that) (works|worked|helps|helped)\b"
    r"|再(试|登录|登陆|连接|刷新|看|确认|测试)|(是否|能否|有没有)(正常|恢复|成功|好了|可以了|能登录|能登陆|登录|登陆|连上|访问)"
)

# --- Chinese shapes -----------------------------------------------------------
_ZH_PARTICLE_Q = re.compile(r"(吗|么|嘛)[哦呀啊呢]?$|呢$")
_ZH_CLOSING = re.compile(r"还有(其他|其它|什么|别的)|(其他|其它|别的)(问题|疑问|需要)|满意吗")
_ZH_TAG = re.compile(r"(对吗|是吗|对吧|是吧|是这样吗|没错吧|没错吗|对不对|是不是|这样理解对吗|可以这样理解吗)$")
_ZH_OFFER = re.compile(
    r"(需要|要不要|要不|是否需要|用不用)(我|这边|我们)?[^。！？?，,您你]{0,4}(帮|为|给|替|把|来|去)"
    r"|(需要|要)(帮|为|给|替)(您|你)|(我|这边|我们)(可以|来|先|再|现在|马上)?(帮|给|为|替)(您|你)[^。！？?]*"
    r"(可以吗|好吗|行吗|好不好|可不可以|吧|您看|怎么样)|(您|你)(需要|要)吗|(可以吗|好吗|行吗|好不好|可不可以)$"
)
_ZH_PREFERENCE = re.compile(r"选择哪|选哪|(希望|想要|倾向|更喜欢|偏好)[^。！？?]*还是|还是[^。！？?]*(方便|合适|好)")
_ZH_UNDERSTANDING = re.compile(
    r"(您|你)(是)?(说|指|想|要|希望|打算)(的)?(是)?[^。！？?]*(吗|么|吧|呢)$|(咨询|问|反馈|提到|说|指)的是|确认一下|核实一下|理解"
)
_ZH_WH = re.compile(r"什么|哪|多少|几|怎么|怎样|谁|何时|为什么|为何|如何")
_ZH_PERSON = re.compile(r"您|你|我|咱")


def _any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences, each with its end mark (a list marker
    such as "1." stays with its item)."""
    out: list[str] = []
    for part in _SENTENCE_END.split(text):
        part = part.strip() if part else ""
        if not part:
            continue
        if out and _LIST_MARKER.fullmatch(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def count_words(text: str) -> float:
    """Latin words, plus one word per two Han characters."""
    return len(_LATIN_WORD.findall(text)) + len(_HAN.findall(text)) / 2


def _bare(sentence: str) -> str:
    return _TRAILER.sub("", sentence)


def _is_chinese(sentence: str) -> bool:
    return len(_HAN.findall(sentence)) >= 2


def _question_shaped(sentence: str) -> bool:
    bare = _bare(sentence)
    if bare.endswith(("?", "？")):
        return True
    if _is_chinese(bare):
        return bool(_ZH_PARTICLE_Q.search(bare.rstrip("。.!！")))
    return False


def _en_core(sentence: str) -> str:
    """The question proper: after a lead-in ending in ':' and discourse markers."""
    core = _EN_LEAD.sub("", _bare(sentence).rstrip("?").strip()).strip()
    if ":" in core:
        head, tail = core.split(":", 1)
        # "Let me confirm: you want...?" asks after the colon; "What is slow:
        # SSH, the website, or...?" before it
        if not _EN_OPENER.match(head.strip()):
            core = _EN_LEAD.sub("", tail.strip()).strip()
    return core


def _question_kind(sentence: str) -> str:
    """Clarify or Inquire, for a question-shaped sentence."""
    bare = _bare(sentence).rstrip("?？").strip()
    if _is_chinese(bare):
        if _ZH_TAG.search(bare) or _ZH_OFFER.search(bare) or _ZH_PREFERENCE.search(bare):
            return "Clarify"
        if _ZH_WH.search(bare):
            return "Inquire"
        if "还是" in bare or _ZH_UNDERSTANDING.search(bare):
            return "Clarify"
        return "Inquire"
    core = _en_core(sentence)
    if _EN_TAG.search(bare) or _EN_OFFER.search(core) or _EN_PREFERENCE.search(core) \
            or _EN_UNDERSTANDING.search(core):
        return "Clarify"
    if core and not _EN_OPENER.match(core):
        return "Clarify"  # a statement read as a question: "You want the refund to the card?"
    return "Inquire"


def _closing(sentence: str) -> bool:
    return bool(_ZH_CLOSING.search(sentence) if _is_chinese(sentence) else _EN_CLOSING.search(sentence))


def _addresses_someone(sentence: str) -> bool:
    return bool(_ZH_PERSON.search(sentence) if _is_chinese(sentence) else _EN_PERSON.search(sentence))


@dataclass(frozen=True, slots=True)
class RuleAnnotator:
    inquire: tuple[re.Pattern[str], ...]
    clarify: tuple[re.Pattern[str], ...]
    appease: tuple[re.Pattern[str], ...]
    standard: tuple[re.Pattern[str], ...]
    solution: tuple[re.Pattern[str], ...]
    name: str = "rules"

    @classmethod
    def from_config(cls, config: AnnotateConfig) -> "RuleAnnotator":
        def compile_all(patterns: list[str]) -> tuple[re.Pattern[str], ...]:
            return tuple(re.compile(p) for p in patterns)

        return cls(
            inquire=compile_all(config.inquire_patterns),
            clarify=compile_all(config.clarify_patterns),
            appease=compile_all(config.appease_patterns),
            standard=compile_all(config.standard_patterns),
            solution=compile_all(config.solution_patterns),
        )

    def ask(self, sentence: str, answered: bool = False) -> str | None:
        """What ``sentence`` asks of the customer: "Clarify", "Inquire" or
        None.  ``answered``: a statement follows it in the reply (a question
        about no one that is answered at once is rhetorical)."""
        if _any(self.clarify, sentence):
            return "Clarify"
        if _any(self.inquire, sentence):
            return "Inquire"
        if not _question_shaped(sentence) or _closing(sentence):
            return None
        if answered and not _addresses_someone(sentence):
            return None  # "Not sure where to find it? Go to Billing."
        return _question_kind(sentence)

    def label_one(self, item: ReplyToLabel) -> ReplyType:
        reply = item.reply
        if not reply.strip():
            return "Solution"  # a turn of tool calls only
        parts = sentences(reply)
        asks: list[tuple[str, str]] = []  # (sentence, kind)
        statements: list[str] = []  # what does not ask, to look for acts in
        for i, sentence in enumerate(parts):
            answered = any(not _question_shaped(later) for later in parts[i + 1:])
            kind = self.ask(sentence, answered)
            if kind is None:
                statements.append(sentence)
            else:
                asks.append((sentence, kind))
                # "已经为您重启了服务器，麻烦您再登录看一下？": the clauses before the question
                statements.extend(c for c in _CLAUSE_END.split(sentence)[:-1] if c.strip())
        words = count_words(reply)
        acts = bool(item.tool_names) or any(_any(self.solution, s) for s in statements)
        if asks:
            if acts and (words > _LONG_REPLY_WORDS or all(_VERIFY.search(s) for s, _ in asks)):
                return "Solution"
            return "Clarify" if any(kind == "Clarify" for _, kind in asks) else "Inquire"
        if acts:
            return "Solution"
        if _any(self.appease, reply) and words <= _SHORT_APPEASE_WORDS:
            return "Appease"
        if _any(self.standard, reply):
            return "Standard"
        return "Solution" if _CONCRETE.search(reply) and _CASE_SPECIFIC.search(reply) else "Standard"

    def label(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        return [self.label_one(item) for item in items]
