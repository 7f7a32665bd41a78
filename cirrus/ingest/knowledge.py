"""Up to five knowledge documents per task.

A ticket's own documents are kept (the most relevant five when it brings
more); a ticket without any gets the top five of a knowledge folder
(``--kb DIR`` of Markdown or text files).  Relevance is BM25 (``bm25s``) of
a document against the ticket's customer text.

Tokenization is language-aware: a text without Han characters is tokenized
exactly as bm25s does for English (lower-cased ``\\w\\w+`` tokens minus its
English stop words); in a text with Han characters, Han runs are segmented
by ``jieba`` (search mode, Chinese stop words dropped) and the runs between
them get the English rule.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import warnings
from pathlib import Path

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from cirrus.cjk import HAN_RUN
from cirrus.schema import KnowledgeDoc

KB_SUFFIXES = (".md", ".markdown", ".txt")


class KnowledgeError(ValueError):
    pass


_HAN_RUN = HAN_RUN
# bm25s's own English rule, read from bm25s so that the two cannot drift apart
_EN_TOKEN = re.compile(inspect.signature(bm25s.tokenize).parameters["token_pattern"].default)
_EN_STOPWORDS = frozenset(STOPWORDS_EN)
# function words and politeness that say nothing about a support topic
ZH_STOPWORDS = frozenset("""
的 地 得 了 着 过 是 我 我们 您 你 你们 他 她 它 他们 这 那 这个 那个 这些 那些 这边 那边 这里 那里
吗 呢 吧 啊 呀 哦 噢 嘛 哈 啦 么 在 有 没 和 与 及 或 跟 同 就 也 都 还 又 再 才 很 太 挺 非常
请 请问 麻烦 一下 一个 一些 下 个 些 把 被 给 让 对 向 从 到 于 为 为了 因为 所以 但 但是 而 并 如果
就是 什么 怎么 怎么办 怎么样 如何 为什么 可以 能 能够 会 要 想 需要 应该 已经 现在 刚才 今天 一直 好的
谢谢 感谢 您好 你好 客服 问题 情况 一样 之后 之前 时候 以及 还是 或者 然后 不过 其实 可能
""".split())

_jieba = None
_jieba_lock = threading.Lock()


def _segmenter():
    """jieba, quiet and initialised once per process (on first Chinese text)."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                with warnings.catch_warnings():  # jieba's old regex literals
                    warnings.simplefilter("ignore", DeprecationWarning)
                    warnings.simplefilter("ignore", SyntaxWarning)
                    import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def _english_tokens(text: str) -> list[str]:
    return [t for t in _EN_TOKEN.findall(text.lower()) if t not in _EN_STOPWORDS]


def _mixed_tokens(text: str) -> list[str]:
    jieba = _segmenter()
    tokens: list[str] = []
    for i, run in enumerate(_HAN_RUN.split(text)):
        if i % 2 == 0:  # between Han runs
            tokens.extend(_english_tokens(run))
        else:
            tokens.extend(w for w in jieba.lcut_for_search(run) if w.strip() and w not in ZH_STOPWORDS)
    return tokens


def tokenize(texts: list[str], segment_han: bool = True) -> list[list[str]]:
    """BM25 tokens of each text (see the module docstring).  Texts without
    Han characters get exactly what ``bm25s.tokenize(..., stopwords="en")``
    gives them; so do all texts with ``segment_han`` off (a pipeline whose
    languages ask for no ``tokenizer = "jieba"``)."""
    if not segment_han or not any(_HAN_RUN.search(t) for t in texts):
        return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    return [_mixed_tokens(t) if _HAN_RUN.search(t) else _english_tokens(t) for t in texts]




def rank(docs: list[KnowledgeDoc], query: str, k: int, segment_han: bool = True) -> list[KnowledgeDoc]:
    """The ``k`` documents most relevant to ``query``, best first; ties keep
    the given order."""
    if len(docs) <= k:
        return list(docs)
    retriever = bm25s.BM25()
    retriever.index(tokenize([f"{d.title}\n{d.text}" for d in docs], segment_han), show_progress=False)
    scores = retriever.get_scores(tokenize([query], segment_han)[0] or [""])
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return [docs[i] for i in order]


def load_kb(folder: Path) -> list[KnowledgeDoc]:
    """Read a knowledge folder: one document per file, title from the first
    Markdown heading (else the file name), id from the relative path."""
    if not folder.is_dir():
        raise KnowledgeError(f"knowledge folder {folder} does not exist or is not a directory")
    docs = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in KB_SUFFIXES and p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise KnowledgeError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        title = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")), path.stem)
        docs.append(KnowledgeDoc(doc_id=path.relative_to(folder).with_suffix("").as_posix(), title=title, text=text))
    if not docs:
        raise KnowledgeError(f"knowledge folder {folder} holds no {'/'.join(KB_SUFFIXES)} files")
    return docs


class KnowledgeBase:
    """A knowledge folder indexed once, queried per ticket."""

    def __init__(self, docs: list[KnowledgeDoc], segment_han: bool = True) -> None:
        self.docs = docs
        self.segment_han = segment_han
        self._retriever = bm25s.BM25()
        self._retriever.index(tokenize([f"{d.title}\n{d.text}" for d in docs], segment_han), show_progress=False)

    def top(self, query: str, k: int) -> list[KnowledgeDoc]:
        tokens = tokenize([query], self.segment_han)[0]
        if not tokens or k <= 0:
            return []
        scores = np.asarray(self._retriever.get_scores(tokens))
        order = [i for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0]
        return [self.docs[i] for i in order]


def select_knowledge(own: list[KnowledgeDoc], customer_text: str, kb: KnowledgeBase | None, k: int,
                     segment_han: bool = True) -> list[KnowledgeDoc]:
    if own:
        return rank(own, customer_text, k, segment_han)
    return kb.top(customer_text, k) if kb is not None else []
