"""Built-in agents that need no model.

* ``baseline:oracle`` answers every checkpoint with its reference reply and
  makes the reference tool calls through the replayer: a harness self-check
  that must score ATPR 1.0 with a correct judge.
* ``baseline:retrieval`` answers with the most similar reply of *another*
  task in the workspace (BM25 over their queries) or, when the task's own
  knowledge matches better, with a passage of it.  It calls no tools: a real,
  weak baseline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any


from cirrus.evaluate.types import AgentTurn, ToolCallMade, TurnRequest
from cirrus.offline import count_tokens
from cirrus.replay import NoRecordedResult, ToolReplayer


def checkpoint_index(request: TurnRequest) -> int:
    """Which checkpoint (0-based) the request's query is: the number of
    customer turns the walk has added to the task's history."""
    base = sum(1 for m in request.task.get("history", []) if m.get("role") == "user")
    asked = sum(1 for m in request.history if m.get("role") == "user") - base
    checkpoints = request.task["checkpoints"]
    if 0 <= asked < len(checkpoints) and checkpoints[asked]["query"] == request.query:
        return asked
    return next(i for i, c in enumerate(checkpoints) if c["query"] == request.query)


class OracleAgent:
    name = "baseline:oracle"
    offline = True

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        checkpoint = request.task["checkpoints"][checkpoint_index(request)]
        messages: list[dict[str, Any]] = []
        calls: list[ToolCallMade] = []
        if checkpoint["tool_calls"]:
            ids = [f"oracle-{i}" for i in range(len(checkpoint["tool_calls"]))]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": tc["name"], "arguments": json.dumps(tc["arguments"], ensure_ascii=False)}}
                for cid, tc in zip(ids, checkpoint["tool_calls"])]})
            for cid, tc in zip(ids, checkpoint["tool_calls"]):
                try:
                    result, recorded, error = replayer.call(tc["name"], tc["arguments"]), True, None
                except NoRecordedResult as exc:
                    result, recorded, error = None, False, str(exc)
                calls.append(ToolCallMade(tc["name"], tc["arguments"], result, recorded, error))
                content = error if error else (result if isinstance(result, str) else json.dumps(result, ensure_ascii=False))
                messages.append({"role": "tool", "tool_call_id": cid, "content": content})
        reply = checkpoint["reply"]
        messages.append({"role": "assistant", "content": reply})
        return AgentTurn(text=reply, tool_calls=calls, messages=messages, output_tokens=count_tokens(reply),
                         model_calls=0, wall_s=time.perf_counter() - started)


def _tokens(texts: list[str]) -> list[list[str]]:
    # the knowledge retriever's tokenizer: bm25s's English rule, jieba for Han text
    from cirrus.ingest.knowledge import tokenize

    return tokenize(texts)


class RetrievalAgent:
    name = "baseline:retrieval"
    offline = True

    def __init__(self, tasks: Iterable[dict[str, Any]]) -> None:
        self._owners: list[str] = []
        self._replies: list[str] = []
        queries: list[str] = []
        for task in tasks:
            for checkpoint in task["checkpoints"]:
                if checkpoint["reply"].strip():
                    self._owners.append(task["task_id"])
                    self._replies.append(checkpoint["reply"])
                    queries.append(checkpoint["query"])
        import bm25s  # numpy and scipy: imported for the retrieval baseline only

        self._index = bm25s.BM25()
        if queries:
            self._index.index(_tokens(queries), show_progress=False)

    def _best_reply(self, task_id: str, query: str) -> tuple[str, float]:
        import numpy as np

        tokens = _tokens([query])[0]
        if not tokens or not self._replies:
            return "", 0.0
        scores = np.asarray(self._index.get_scores(tokens), dtype=float)
        scores[[i for i, owner in enumerate(self._owners) if owner == task_id]] = -1.0
        best = int(np.argmax(scores))
        return (self._replies[best], float(scores[best])) if scores[best] > 0 else ("", 0.0)

    @staticmethod
    def _best_passage(knowledge: list[dict[str, str]], query: str) -> tuple[str, float]:
        passages = [p.strip() for doc in knowledge for p in doc.get("text", "").split("\n\n") if len(p.strip()) > 40]
        tokens = _tokens([query])[0]
        if not passages or not tokens:
            return "", 0.0
        import bm25s
        import numpy as np

        index = bm25s.BM25()
        index.index(_tokens(passages), show_progress=False)
        scores = np.asarray(index.get_scores(tokens), dtype=float)
        best = int(np.argmax(scores))
        return passages[best], float(scores[best])

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        reply, reply_score = self._best_reply(request.task["task_id"], request.query)
        passage, passage_score = self._best_passage(request.task.get("knowledge", []), request.query)
        text = passage if passage_score > reply_score else reply
        text = text or "Could you tell me more about the problem, for example the resource id and the error you see?"
        return AgentTurn(text=text, messages=[{"role": "assistant", "content": text}],
                         output_tokens=count_tokens(text), wall_s=time.perf_counter() - started)
