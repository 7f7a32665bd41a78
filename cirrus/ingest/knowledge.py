"""Up to five knowledge documents per task.

A ticket's own documents are kept (the most relevant five when it brings
more); a ticket without any gets the top five of a knowledge folder
(``--kb DIR`` of Markdown or text files).  Relevance is BM25 (``bm25s``) of
a document against the ticket's customer text.
"""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np

from cirrus.schema import KnowledgeDoc

KB_SUFFIXES = (".md", ".markdown", ".txt")


class KnowledgeError(ValueError):
    pass


def _tokenize(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def rank(docs: list[KnowledgeDoc], query: str, k: int) -> list[KnowledgeDoc]:
    """The ``k`` documents most relevant to ``query``, best first; ties keep
    the given order."""
    if len(docs) <= k:
        return list(docs)
    retriever = bm25s.BM25()
    retriever.index(_tokenize([f"{d.title}\n{d.text}" for d in docs]), show_progress=False)
    scores = retriever.get_scores(_tokenize([query])[0] or [""])
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

    def __init__(self, docs: list[KnowledgeDoc]) -> None:
        self.docs = docs
        self._retriever = bm25s.BM25()
        self._retriever.index(_tokenize([f"{d.title}\n{d.text}" for d in docs]), show_progress=False)

    def top(self, query: str, k: int) -> list[KnowledgeDoc]:
        tokens = _tokenize([query])[0]
        if not tokens or k <= 0:
            return []
        scores = np.asarray(self._retriever.get_scores(tokens))
        order = [i for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0]
        return [self.docs[i] for i in order]


def select_knowledge(own: list[KnowledgeDoc], customer_text: str, kb: KnowledgeBase | None, k: int) -> list[KnowledgeDoc]:
    if own:
        return rank(own, customer_text, k)
    return kb.top(customer_text, k) if kb is not None else []
