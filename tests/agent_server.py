"""A scripted agent service speaking Cirrus's HTTP agent protocol
(docs/agent-protocol.md) on 127.0.0.1, for tests only (stdlib
``http.server``, one thread per connection, HTTP/1.1 keep-alive).

Each POST is answered by the next item of ``script``, or, once it is used up,
by ``rule(body)``.  An item is a :class:`Answer` (full control: reply, tool
calls, usage, the agent's identity, status, headers such as ``Retry-After``,
a delay, a raw ``body`` instead of the answer, ``hang``), a ``str`` (a
reply), an ``int`` (that HTTP status), or a callable given the request body
that returns one of those.  ``GET`` answers ``info`` (a dict as JSON, or an
int status; default 404).  Every request body, its headers and its arrival
time are recorded (``requests``, ``headers``, ``times``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.chat_server import OMIT, Reply


@dataclass
class Answer:
    content: str | None = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments: dict, or raw JSON text)
    usage: Any = None  # a dict is sent as "usage"; None sends none
    agent: dict[str, str] | None = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error_message: str = "scripted failure"
    body: Any = None  # bytes/str sent instead of the answer; another value is sent as its JSON
    hang: float | bool = False  # True: no answer until the server stops
    ids: bool = True  # give the tool calls ids


Item = str | int | Answer | Callable[[dict[str, Any]], Any]


def from_chat_reply(reply: Reply) -> Answer:
    """The agent-protocol answer of a scripted model answer
    (tests/chat_server.py): the same reply, tool calls, usage and status."""
    usage = None
    if reply.usage is OMIT:
        usage = None
    elif isinstance(reply.usage, dict):
        usage = reply.usage
    else:
        usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
    return Answer(content=reply.content, tool_calls=list(reply.tool_calls), usage=usage, status=reply.status,
                  headers=dict(reply.headers), error_message=reply.error_message, delay=reply.delay)


class AgentServer:
    def __init__(self, script: list[Item] | None = None, *, rule: Callable[[dict[str, Any]], Any] | None = None,
                 info: dict[str, Any] | int = 404, on_stall: Callable[[], None] | None = None) -> None:
        self.script: deque[Item] = deque(script or [])
        self.on_stall = on_stall  # called as an answer starts to hang (tests/moving_clock.py)
        self.rule = rule
        self.info = info
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self.gets = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with server._lock:
                    server.gets += 1
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if isinstance(server.info, int):
                    self._send(server.info, json.dumps({"error": {"message": "no info"}}).encode(), {})
                else:
                    self._send(200, json.dumps(server.info).encode(), {})

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.times.append(time.monotonic())
                    item: Any = server.script.popleft() if server.script else server.rule
                answer = server._resolve(item, body)
                if answer.delay:
                    server._stopping.wait(answer.delay)
                if answer.hang is not False:
                    if server.on_stall is not None:
                        server.on_stall()
                    server._stopping.wait(None if answer.hang is True else float(answer.hang))
                    self.close_connection = True
                    return
                status, payload = server._payload(answer, body)
                self._send(status, payload, answer.headers)

            def _send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:  # the client gave up (a timeout)
                    self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @staticmethod
    def _resolve(item: Any, body: dict[str, Any]) -> Answer:
        if item is None:
            return Answer()
        while callable(item) and not isinstance(item, Answer):
            item = item(body)
        if isinstance(item, Reply):
            return from_chat_reply(item)
        if isinstance(item, Answer):
            return item
        if isinstance(item, str):
            return Answer(content=item)
        if isinstance(item, int):
            return Answer(status=item)
        raise TypeError(f"unsupported scripted answer {item!r}")

    @staticmethod
    def _payload(answer: Answer, body: dict[str, Any]) -> tuple[int, bytes]:
        if answer.body is not None:
            raw = answer.body
            if isinstance(raw, str):
                raw = raw.encode("utf-8")
            elif not isinstance(raw, bytes):
                raw = json.dumps(raw).encode("utf-8")
            return answer.status, raw
        if answer.status >= 400:
            return answer.status, json.dumps({"error": {"message": answer.error_message}}).encode()
        message: dict[str, Any] = {"role": "assistant", "content": answer.content}
        if answer.tool_calls:
            message["tool_calls"] = [
                {**({"id": f"t{body.get('round')}-{i}"} if answer.ids else {}), "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(answer.tool_calls)]
        data: dict[str, Any] = {"message": message}
        if answer.usage is not None:
            data["usage"] = answer.usage
        if answer.agent is not None:
            data["agent"] = answer.agent
        return answer.status, json.dumps(data).encode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/agent"

    def start(self) -> AgentServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
