"""A scripted OpenAI-compatible ``/chat/completions`` server on 127.0.0.1,
for tests only (stdlib ``http.server``, one thread per connection, HTTP/1.1
keep-alive).

Each request is answered by the next item of ``script``, or, once the script
is used up, by ``rule(body)`` (a callable given the parsed request body, so
any number of concurrent requests can be served), or else by an empty text.
An item is one of:

* a ``str``: the assistant's text content;
* an ``int``: that HTTP error status;
* a :class:`Reply`: full control (tool calls, usage, reasoning tokens,
  status, headers such as ``Retry-After``, a delay before answering);
* a callable: called with the request body, returns one of the above.

Every request body and its headers are recorded (``requests``,
``headers``), also for error answers.

Faults (fields of :class:`Reply`, for tests of what the client does with a
broken endpoint): ``body`` replaces the answer's JSON with any bytes (a
non-JSON or half-JSON body, ``choices: []``); ``truncate`` announces the
whole answer in ``Content-Length``, sends only its first bytes and closes the
connection; ``hang`` answers nothing and holds the connection until the
server stops (or for ``hang`` seconds); ``trickle`` sends the answer one byte
at a time, that many seconds apart (a server that is never silent for long,
but never finishes).  ``times`` records each request's arrival, so tests can
check how long a client waited between tries; ``on_stall`` is called as a
hang or a trickle begins (to move a test's clock, ``tests/moving_clock.py``).
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

OMIT = object()  # usage=OMIT: the answer carries no "usage" at all


@dataclass
class Reply:
    content: str | None = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments: dict or raw JSON string)
    prompt_tokens: int = 10
    completion_tokens: int | None = 5
    reasoning_tokens: int | None = None
    usage: Any = None  # a dict replaces the computed usage; OMIT drops it
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error_message: str = "scripted failure"
    finish_reason: str | None = None
    reasoning_content: str | None = None  # the DeepSeek/Qwen/vLLM message extension
    # faults
    body: Any = None  # bytes/str sent as the body instead of the answer; another value is sent as its JSON
    truncate: int | None = None  # send only this many bytes of the body (Content-Length is the whole), then close
    hang: float | bool = False  # True: no answer until the server stops; a number: for that many seconds, then close
    trickle: float | None = None  # seconds between the body's bytes


Item = str | int | Reply | Callable[[dict[str, Any]], Any]


def text(content: str, **kw: Any) -> Reply:
    return Reply(content=content, **kw)


def tool_calls(*calls: tuple[str, Any], content: str | None = None, **kw: Any) -> Reply:
    return Reply(content=content, tool_calls=list(calls), **kw)


def error(status: int, retry_after: float | str | None = None, **kw: Any) -> Reply:
    headers = dict(kw.pop("headers", {}))
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return Reply(status=status, headers=headers, **kw)


class ChatServer:
    def __init__(self, script: list[Item] | None = None, *, rule: Callable[[dict[str, Any]], Any] | None = None,
                 delay: float = 0.0, on_stall: Callable[[], None] | None = None) -> None:
        self.script: deque[Item] = deque(script or [])
        self.on_stall = on_stall  # called as a reply starts to hang or trickle (tests/moving_clock.py)
        self.rule = rule
        self.delay = delay  # added to every answer
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []  # time.monotonic() at each request's arrival
        self._lock = threading.Lock()
        self._count = 0
        self._stopping = threading.Event()  # wakes sleeping and hanging handlers on stop()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body are written separately: without this, Nagle's
                # algorithm and the client's delayed ACK add ~40 ms per answer
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.times.append(time.monotonic())
                    server._count += 1
                    number = server._count
                    item: Any = server.script.popleft() if server.script else server.rule
                reply = server._resolve(item, body)
                pause = server.delay + reply.delay
                if pause:
                    server._stopping.wait(pause)
                if reply.hang is not False:
                    if server.on_stall is not None:
                        server.on_stall()
                    server._stopping.wait(None if reply.hang is True else float(reply.hang))
                    self.close_connection = True  # never answered
                    return
                status, payload = server._payload(reply, body, number)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self._write_body(reply, payload)
                except OSError:  # the client gave up (a timeout): nothing more to send
                    self.close_connection = True

            def _write_body(self, reply: Reply, payload: bytes) -> None:
                if reply.truncate is not None:
                    payload = payload[: reply.truncate]
                    self.close_connection = True
                if reply.trickle is None:
                    self.wfile.write(payload)
                else:
                    if server.on_stall is not None:
                        server.on_stall()
                    for i in range(len(payload)):
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                        if server._stopping.wait(reply.trickle):
                            self.close_connection = True
                            return
                if reply.truncate is not None:
                    self.wfile.flush()
                    self.request.shutdown(socket.SHUT_WR)  # the peer sees the connection end mid-body

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        # a short poll interval: shutdown() waits for it, once per test
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @staticmethod
    def _resolve(item: Any, body: dict[str, Any]) -> Reply:
        if item is None:
            return Reply()
        while callable(item) and not isinstance(item, Reply):
            item = item(body)
        if isinstance(item, Reply):
            return item
        if isinstance(item, str):
            return Reply(content=item)
        if isinstance(item, int):
            return Reply(status=item)
        raise TypeError(f"unsupported scripted answer {item!r}")

    @staticmethod
    def _payload(reply: Reply, body: dict[str, Any], number: int) -> tuple[int, bytes]:
        if reply.body is not None:
            raw = reply.body
            if isinstance(raw, str):
                raw = raw.encode("utf-8")
            elif not isinstance(raw, bytes):
                raw = json.dumps(raw).encode("utf-8")
            return reply.status, raw
        if reply.status >= 400:
            error_type = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(reply.status, "server_error")
            return reply.status, json.dumps({"error": {"message": reply.error_message, "type": error_type}}).encode()
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{number}_{i}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        }
        if reply.usage is OMIT:
            pass
        elif isinstance(reply.usage, dict):
            answer["usage"] = reply.usage
        else:
            usage: dict[str, Any] = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                                     "total_tokens": reply.prompt_tokens + (reply.completion_tokens or 0)}
            if reply.reasoning_tokens is not None:
                usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
            answer["usage"] = usage
        return 200, json.dumps(answer).encode()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve_forever() -> None:  # pragma: no cover - a manual benchmark helper
    """Run a rule-based server answering "ok" (for CPU benchmarks in another process)."""
    server = ChatServer(rule=lambda body: "ok")
    with server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    serve_forever()
