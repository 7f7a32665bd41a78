"""A rule-based OpenAI-compatible ``/v1/chat/completions`` server for the
evaluation throughput benchmark (``eval_throughput.py``).  Run it in its own
process, so its CPU time is not counted as the harness's.

Every answer is sent ``--delay`` seconds after the request arrived (asyncio,
one event loop, no thread per connection, so the server itself costs little
CPU).  It plays three models, told apart by the request's ``model``:

* ``bench-agent``: the agent under test.  It knows the workspace's tasks and
  finds the checkpoint from the customer messages of the request.  When the
  last message is the customer's and the checkpoint has reference tool calls,
  it makes exactly those calls; otherwise it answers with the checkpoint's
  reference reply followed by `` [rN]``, N being the request number (so no
  two judge or fluency prompts are the same, and none is answered from
  cirrus's cache, even across attempts of one task).
* ``bench-judge``: "Included" when the ``<reference_reply>`` occurs in the
  ``<candidate_reply>``, else "Not Included".  So each agent turn covers its
  own checkpoint and (almost always) not the next one: the walk goes through
  every checkpoint, one turn each, and asks the judge twice per turn.
* ``bench-fluency``: always "Yes".

``GET /stats`` returns the request counts by model, the server's own CPU
time and the time of the first and last request; ``POST /reset`` zeroes them.

    python benchmarks/eval_server.py --tasks WS/tickets/tasks.jsonl --delay 0.2 --port 0
    (prints "listening on http://127.0.0.1:PORT/v1")
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

_TAG = {name: re.compile(rf'<{name}(?: id="\w+")?>\n?(.*?)\n?</{name}(?: id="\w+")?>', re.S) for name in ("reference_reply", "candidate_reply")}


def _between(text: str, tag: str) -> str:
    match = _TAG[tag].search(text)
    return match.group(1).strip() if match else ""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Rules:
    def __init__(self, tasks_file: Path | None) -> None:
        # (the customer messages of a request, in order) -> the checkpoint they end at
        self.checkpoints: dict[tuple[str, ...], dict[str, Any]] = {}
        if tasks_file is not None:
            for line in tasks_file.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                task = json.loads(line)
                queries = [m.get("content") or "" for m in task.get("history", []) if m.get("role") == "user"]
                for checkpoint in task["checkpoints"]:
                    queries.append(checkpoint["query"])
                    self.checkpoints.setdefault(tuple(queries), checkpoint)
        self.counter = 0

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message (and usage) answering ``body``."""
        self.counter += 1
        model = str(body.get("model"))
        messages = body.get("messages") or []
        if model.endswith("judge"):
            user = messages[-1]["content"] if messages else ""
            included = _between(user, "reference_reply") in _between(user, "candidate_reply")
            verdict = "Included" if included else "Not Included"
            return {"content": json.dumps({"reason": "rule", "verdict": verdict}), "completion_tokens": 12}
        if model.endswith("fluency"):
            return {"content": json.dumps({"reason": "rule", "answer": "Yes"}), "completion_tokens": 10}
        queries = tuple(m.get("content") or "" for m in messages if m.get("role") == "user")
        checkpoint = self.checkpoints.get(queries)
        if checkpoint is None:
            return {"content": f"I do not know this conversation. [r{self.counter}]", "completion_tokens": 8}
        last = messages[-1].get("role") if messages else None
        if last == "user" and checkpoint["tool_calls"] and body.get("tools"):
            calls = [{"id": f"call_{self.counter}_{i}", "type": "function",
                      "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                     for i, c in enumerate(checkpoint["tool_calls"])]
            return {"content": None, "tool_calls": calls, "completion_tokens": 20 * len(calls)}
        reply = f"{checkpoint['reply']} [r{self.counter}]".strip()
        return {"content": reply, "completion_tokens": max(1, len(reply) // 4)}


class Server:
    def __init__(self, rules: Rules, delay: float) -> None:
        self.rules = rules
        self.delay = delay
        self.reset()

    def reset(self) -> None:
        self.by_model: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.bytes_in = 0
        self.first: float | None = None
        self.last: float | None = None
        self.cpu0 = _cpu()
        self.in_flight = 0
        self.max_in_flight = 0

    def stats(self) -> dict[str, Any]:
        return {"requests": sum(self.by_model.values()), "by_model": dict(self.by_model),
                "bytes_in": self.bytes_in, "first": self.first, "last": self.last,
                "server_cpu_s": round(_cpu() - self.cpu0, 3), "max_in_flight": self.max_in_flight}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                arrived = time.monotonic()
                length = 0
                while True:
                    header = await reader.readline()
                    if header in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                raw = await reader.readexactly(length) if length else b""
                method, path = request_line.decode("latin-1").split(" ")[:2]
                if method == "GET" and path.endswith("/stats"):
                    payload = json.dumps(self.stats()).encode()
                elif method == "POST" and path.endswith("/reset"):
                    self.reset()
                    payload = b"{}"
                else:
                    payload = await self.complete(raw, arrived)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(payload)).encode() + b"\r\n\r\n" + payload)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def complete(self, raw: bytes, arrived: float) -> bytes:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            body = json.loads(raw)
            self.bytes_in += len(raw)
            self.first = arrived if self.first is None else self.first
            self.last = arrived
            model = str(body.get("model"))
            self.by_model[model] += 1
            answer = self.rules.answer(body)
            message = {"role": "assistant", "content": answer["content"]}
            if answer.get("tool_calls"):
                message["tool_calls"] = answer["tool_calls"]
            completion = {
                "id": f"chatcmpl-{self.rules.counter}", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": answer["completion_tokens"],
                          "total_tokens": len(raw) // 4 + answer["completion_tokens"]},
            }
            payload = json.dumps(completion).encode()
            pause = self.delay - (time.monotonic() - arrived)
            if pause > 0:
                await asyncio.sleep(pause)
            return payload
        finally:
            self.in_flight -= 1


async def serve(args: argparse.Namespace) -> None:
    server = Server(Rules(args.tasks), args.delay)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", args.port, backlog=1024, limit=1 << 20)
    port = listener.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}/v1", flush=True)
    async with listener:
        await listener.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, help="tickets/tasks.jsonl of the workspace under test")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds from a request's arrival to its answer")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
