"""Knowledge as a retrieval tool (``[agent] knowledge = "tool"``).

Many production agents are not handed their documents: they search for them.
Under this setting the agent's model is offered one more function,
``search_knowledge(query)`` by default (``[agent] knowledge_tool``), which
Cirrus answers itself from the task's knowledge documents: the
``knowledge_top_k`` passages (paragraphs of at least a few words, with their
document's id and title) that score best by BM25 against the query, with the
tokenizer that ingest uses to choose the documents (English rule, jieba for
Han text).  A query that matches nothing gets an empty list.

These calls are not the ticket's tool calls: they are answered from the
documents, never from the cassette, and TIA, TSA and TEV do not see them.
They stay in the transcript as the messages the model exchanged, and each is
noted on the turn (``knowledge_searched``, with the query and the documents
returned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_NAME = "search_knowledge"
DEFAULT_TOP_K = 3
_MIN_PASSAGE_CHARS = 20


def tool_schema(name: str = DEFAULT_NAME) -> dict[str, Any]:
    """The OpenAI function schema of the knowledge search."""
    return {"type": "function", "function": {
        "name": name,
        "description": "Search the knowledge base (help articles, policies, procedures) and return "
                       "the passages that best match the query.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for, in a few words."}},
            "required": ["query"]},
    }}


def passages(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The documents cut into passages (paragraphs); a document without a
    paragraph long enough is one passage."""
    found: list[dict[str, str]] = []
    for doc in documents:
        text = str(doc.get("text") or "")
        parts = [p.strip() for p in text.split("\n\n") if len(p.strip()) >= _MIN_PASSAGE_CHARS] or \
            ([text.strip()] if text.strip() else [])
        for part in parts:
            found.append({"doc_id": str(doc.get("doc_id") or ""), "title": str(doc.get("title") or ""),
                          "text": part})
    return found


def search(documents: Sequence[Mapping[str, Any]], query: str, top_k: int = DEFAULT_TOP_K) -> list[dict[str, str]]:
    """The ``top_k`` passages of ``documents`` most relevant to ``query``,
    best first (ties in document order); only passages sharing a term with
    the query."""
    import bm25s
    import numpy as np

    from cirrus.ingest.knowledge import tokenize

    candidates = passages(documents)
    terms = tokenize([query])[0] if query.strip() else []
    if not candidates or not terms:
        return []
    index = bm25s.BM25()
    index.index(tokenize([f"{p['title']}\n{p['text']}" for p in candidates]), show_progress=False)
    scores = np.asarray(index.get_scores(terms), dtype=float)
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [candidates[i] for i in order if scores[i] > 0]


def query_of(arguments: Any) -> str:
    """The query of a call's arguments (a JSON object with ``query``, or the
    raw text a model wrote instead)."""
    if isinstance(arguments, Mapping):
        value = arguments.get("query")
        if value is None and len(arguments) == 1:
            value = next(iter(arguments.values()))
        return str(value or "")
    return str(arguments or "")


__all__ = ["DEFAULT_NAME", "DEFAULT_TOP_K", "passages", "query_of", "search", "tool_schema"]
