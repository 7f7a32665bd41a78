"""An OpenAI-compatible ``/chat/completions`` server on 127.0.0.1 that serves
at most ``limit`` requests at once and answers every request beyond that
with a 429 (``Retry-After: 0``) at once: an endpoint with a hard concurrency
cap, for the adaptive limiter's tests and benchmark (stdlib ``http.server``,
one thread per connection, HTTP/1.1 keep-alive).

An admitted request is answered after ``delay`` seconds with the text
``rule(body)`` (default: ``"ok"``).  The server keeps the figures the tests
check: ``served`` (200 answers), ``rejected`` (429 answers), ``peak`` (most
requests in service at once, never above ``limit``) and
:meth:`mean_in_flight`, the time average of the requests in service between
the first admission and the last answer.  A request leaves the count before
its answer is written, so a client that sends its next request as soon as it
reads an answer never finds the place still taken.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def numbered_answer(body: dict[str, Any]) -> str:
    """``ANSWER-k`` for a request holding k user messages: the reference reply
    of checkpoint k in :func:`tests.scripted_models.make_task`, so an agent
    played by this server covers every checkpoint."""
    return f"ANSWER-{sum(1 for message in body.get('messages') or () if message.get('role') == 'user')}"


class LimitedServer:
    def __init__(self, limit: int, *, delay: float = 0.05, rule: Callable[[dict[str, Any]], str] | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.delay = delay
        self.rule = rule or (lambda body: "ok")
        self.served = 0
        self.rejected = 0
        self.peak = 0
        self._in_service = 0
        self._area = 0.0  # integral of the requests in service over time (request-seconds)
        self._first: float | None = None
        self._last_change = 0.0
        self._last_answer: float | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802  (GET /stats: the figures, for a server in another process)
                self._send(200, outer.stats())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not outer._admit():
                    self._send(429, {"error": {"message": "too many requests in flight", "type": "rate_limit"}},
                               {"Retry-After": "0"})
                    return
                try:
                    time.sleep(outer.delay)
                    content = outer.rule(body)
                finally:
                    outer._release()
                self._send(200, {
                    "id": "chatcmpl-limited", "object": "chat.completion", "created": 0,
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _move(self, change: int, now: float) -> None:
        """Add ``change`` to the requests in service at ``now`` (lock held)."""
        if self._first is None:
            self._first = now
        else:
            self._area += self._in_service * (now - self._last_change)
        self._last_change = now
        self._in_service += change

    def _admit(self) -> bool:
        with self._lock:
            if self._in_service >= self.limit:
                self.rejected += 1
                return False
            self._move(+1, time.monotonic())
            self.peak = max(self.peak, self._in_service)
            return True

    def _release(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._move(-1, now)
            self.served += 1
            self._last_answer = now

    def mean_in_flight(self) -> float:
        """Requests in service, averaged over the time from the first
        admission to the last answer (0.0 before any answer)."""
        with self._lock:
            if self._first is None or self._last_answer is None or self._last_answer <= self._first:
                return 0.0
            return self._area / (self._last_answer - self._first)

    def stats(self) -> dict[str, Any]:
        return {"served": self.served, "rejected": self.rejected, "peak": self.peak,
                "mean_in_flight": self.mean_in_flight()}

    @property
    def calls(self) -> int:
        """Every request answered: served and rejected."""
        return self.served + self.rejected

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> LimitedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LimitedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LimitedServerProcess:
    """A :class:`LimitedServer` answering :func:`numbered_answer` in a child
    process (``python -m tests.limited_server``), so that its threads do not compete with the
    client for the interpreter lock: in one process the client's own work
    slows the server and the in-flight figures measure the interpreter, not
    the limiter.  :meth:`stats` asks the child for its figures."""

    def __init__(self, limit: int, *, delay: float = 0.05) -> None:
        self.limit = limit
        self.delay = delay
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> LimitedServerProcess:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.limited_server", str(self.limit), str(self.delay)],
            stdout=subprocess.PIPE, text=True, cwd=str(_REPO))
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the limited server did not start (it said {line!r})")
        self.base_url = line
        return self

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url + "/stats", timeout=10) as answer:  # noqa: S310 (127.0.0.1)
            return json.loads(answer.read())

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None

    def __enter__(self) -> LimitedServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


_REPO = Path(__file__).resolve().parents[1]


def _main() -> None:  # pragma: no cover - run by LimitedServerProcess
    limit, delay = int(sys.argv[1]), float(sys.argv[2])
    server = LimitedServer(limit, delay=delay, rule=numbered_answer).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    _main()
