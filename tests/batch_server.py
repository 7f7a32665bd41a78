"""An OpenAI-compatible files + batches server on 127.0.0.1, for tests only
(stdlib ``http.server`` in a background thread, like :mod:`tests.chat_server`,
whose :class:`~tests.chat_server.Reply` answers and JSON shapes it reuses).

Endpoints: ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET
/v1/batches/{id}``, ``POST /v1/batches/{id}/cancel`` and the online ``POST
/v1/chat/completions``.

Every request, online or in a batch, is answered by ``answer(body)`` (a
``str``, an ``int`` HTTP status or a :class:`Reply`, as in ``chat_server``),
so a test can check that both paths give the same answers.  :func:`reply`
builds a :class:`Reply` whose usage has the details batch pricing reads
(``prompt_tokens_details.cached_tokens``,
``completion_tokens_details.reasoning_tokens``).

A batch moves ``validating -> in_progress -> finalizing -> completed`` by
polls, not wall time: it advances one step every ``polls_per_step``
retrievals (0: it is done at the first).  Its input is checked when it leaves
``validating`` (JSON lines, a custom_id used once, ``POST`` to the batch's
endpoint), as providers do.  Faults, set on the server (also after it has
started): ``fail`` ends batches ``failed``; ``expire`` ends them ``expired``
with the first half of their requests answered; ``request_errors`` maps a
custom_id to an int (an error-file line with that HTTP status in its
``response``) or a str (an error-file line with that ``error.message`` and no
response); ``shuffle`` (a seed) writes output lines in a shuffled order;
``no_batches`` answers 404 on every ``/v1/batches`` path (a provider without
a Batch API); ``poll_errors`` answers that many of the next batch retrievals
with HTTP 503 (a provider's passing trouble).  ``uploads``, ``batch_creations``, ``retrievals``,
``downloads`` and ``chat_calls`` count requests, so a resume test can check
that nothing was sent twice.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import random
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.chat_server import ChatServer, Reply

STEPS = ("validating", "in_progress", "finalizing", "completed")
EPOCH = 1_750_000_000  # a fixed clock: timestamps count requests, not seconds


def reply(content: str, *, prompt: int = 20, cached: int | None = 8, completion: int = 6,
          reasoning: int | None = 2) -> Reply:
    """An answer whose usage carries cached and reasoning token details
    (``None``: that detail left out)."""
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return Reply(content=content, usage=usage)


def echo_answer(body: dict[str, Any]) -> Reply:
    """The default answer: ``"echo: "`` and the last message's content."""
    messages = body.get("messages") or [{}]
    return reply(f"echo: {messages[-1].get('content', '')}")


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def object(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed"}


@dataclass
class StoredBatch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    created_at: int
    metadata: dict[str, Any] | None = None
    polls: int = 0
    status: str = "validating"
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)

    def object(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "batch", "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id, "completion_window": self.completion_window,
            "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "created_at": self.created_at, "metadata": self.metadata,
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
        }


class BatchServer:
    def __init__(self, answer: Callable[[dict[str, Any]], Any] = echo_answer, *, polls_per_step: int = 1,
                 shuffle: int | None = None, fail: bool = False, expire: bool = False,
                 request_errors: Mapping[str, int | str] | None = None, no_batches: bool = False,
                 poll_errors: int = 0) -> None:
        self.answer = answer
        self.polls_per_step = polls_per_step
        self.shuffle = shuffle
        self.fail = fail
        self.expire = expire
        self.request_errors: dict[str, int | str] = dict(request_errors or {})
        self.no_batches = no_batches
        self.poll_errors = poll_errors
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, StoredBatch] = {}
        self.uploads = 0
        self.batch_creations = 0
        self.retrievals = 0
        self.downloads = 0
        self.chat_calls = 0
        self.headers: list[dict[str, str]] = []  # every request's headers
        self._ids = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET", b"")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST", self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _serve(self, method: str, raw: bytes) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.headers.append(headers)
                    try:
                        status, payload, kind = server._route(method, self.path.split("?", 1)[0], raw, headers)
                    except _HTTPError as exc:
                        status, payload, kind = exc.status, _error_body(exc.message, exc.status), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    # ------------------------------------------------------------ routing

    def _route(self, method: str, path: str, raw: bytes, headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["v1"]:
            parts = parts[1:]
        match method, parts:
            case "POST", ["chat", "completions"]:
                self.chat_calls += 1
                return self._complete(json.loads(raw or b"{}"), self.chat_calls) + ("application/json",)
            case "POST", ["files"]:
                return 200, _json(self._upload(raw, headers.get("content-type", "")).object()), "application/json"
            case "GET", ["files", file_id]:
                return 200, _json(self._file(file_id).object()), "application/json"
            case "GET", ["files", file_id, "content"]:
                self.downloads += 1
                return 200, self._file(file_id).data, "application/octet-stream"
            case _, ["batches", *rest] if self.no_batches:
                raise _HTTPError(404, f"no route for {'/'.join(['batches', *rest])}")
            case "POST", ["batches"]:
                return 200, _json(self._create(json.loads(raw or b"{}")).object()), "application/json"
            case "GET", ["batches", batch_id]:
                self.retrievals += 1
                if self.poll_errors > 0:
                    self.poll_errors -= 1
                    raise _HTTPError(503, "the service is busy, try again")
                return 200, _json(self._poll(self._batch(batch_id)).object()), "application/json"
            case "POST", ["batches", batch_id, "cancel"]:
                batch = self._batch(batch_id)
                if batch.status not in ("completed", "failed", "expired", "cancelled"):
                    batch.status = "cancelling"
                return 200, _json(batch.object()), "application/json"
        raise _HTTPError(404, f"no route for {method} {path}")

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids:04d}"

    def _file(self, file_id: str) -> StoredFile:
        if file_id not in self.files:
            raise _HTTPError(404, f"No such File object: {file_id}")
        return self.files[file_id]

    def _batch(self, batch_id: str) -> StoredBatch:
        if batch_id not in self.batches:
            raise _HTTPError(404, f"No batch found with id '{batch_id}'")
        return self.batches[batch_id]

    def _upload(self, raw: bytes, content_type: str) -> StoredFile:
        if not content_type.startswith("multipart/form-data"):
            raise _HTTPError(400, "expected a multipart/form-data upload")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields or purpose != "batch":
            raise _HTTPError(400, "an upload needs a file and purpose=batch")
        self.uploads += 1
        stored = StoredFile(self._next_id("file"), fields["file"][0] or "upload.jsonl", purpose, fields["file"][1],
                            EPOCH + self._ids)
        self.files[stored.id] = stored
        return stored

    def _create(self, body: dict[str, Any]) -> StoredBatch:
        self._file(str(body.get("input_file_id")))
        if body.get("endpoint") != "/v1/chat/completions":
            raise _HTTPError(400, f"unsupported endpoint {body.get('endpoint')!r}")
        if body.get("completion_window") != "24h":
            raise _HTTPError(400, "completion_window must be 24h")
        self.batch_creations += 1
        batch = StoredBatch(self._next_id("batch"), body["input_file_id"], body["endpoint"],
                            body["completion_window"], EPOCH + self._ids, body.get("metadata"))
        self.batches[batch.id] = batch
        return batch

    # ------------------------------------------------------------ a batch's life

    def _poll(self, batch: StoredBatch) -> StoredBatch:
        """One retrieval: advance the batch by the poll count."""
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        if batch.status == "cancelling":
            self._finish(batch, "cancelled", done=len(self._lines(batch)) // 2)
            return batch
        batch.polls += 1
        step = len(STEPS) - 1 if self.polls_per_step <= 0 else min(batch.polls // self.polls_per_step, len(STEPS) - 1)
        if step >= 1 and batch.status == "validating":
            problems = self._validate(batch)
            if problems or self.fail:
                batch.errors = problems or [{"code": "scripted_failure", "message": "the batch was told to fail",
                                             "line": None, "param": None}]
                batch.status = "failed"
                return batch
            batch.total = len(self._lines(batch))
        if step == len(STEPS) - 1:
            lines = self._lines(batch)
            if self.expire:
                self._finish(batch, "expired", done=len(lines) // 2)
            else:
                self._finish(batch, "completed", done=len(lines))
        elif step >= 1:
            batch.status = STEPS[step]
            batch.completed = batch.total // 2 if step == 1 else batch.total
        return batch

    def _lines(self, batch: StoredBatch) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.files[batch.input_file_id].data.splitlines() if raw.strip()]

    def _validate(self, batch: StoredBatch) -> list[dict[str, Any]]:
        problems: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number, raw in enumerate(self.files[batch.input_file_id].data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                problems.append(_problem("invalid_json_line", "this line is not JSON", number))
                continue
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str) or custom_id in seen:
                problems.append(_problem("duplicate_custom_id", "custom_id missing or already used", number))
            seen.add(str(custom_id))
            if line.get("method") != "POST" or line.get("url") != batch.endpoint:
                problems.append(_problem("mismatched_endpoint", f"expected POST {batch.endpoint}", number))
        return problems

    def _finish(self, batch: StoredBatch, status: str, done: int) -> None:
        """Answer the first ``done`` requests, write the output and error files."""
        output: list[bytes] = []
        errors: list[bytes] = []
        for number, line in enumerate(self._lines(batch)[:done], start=1):
            custom_id = line["custom_id"]
            scripted = self.request_errors.get(custom_id)
            if isinstance(scripted, str):
                item = {"custom_id": custom_id, "response": None, "error": {"code": "server_error",
                                                                            "message": scripted}}
            else:
                code, body = (scripted, json.loads(_error_body("scripted request failure", scripted))) \
                    if isinstance(scripted, int) else self._complete(line["body"], number)
                if not isinstance(body, dict):
                    body = json.loads(body)
                item = {"custom_id": custom_id, "response": {"status_code": code, "request_id": f"req-{number}",
                                                             "body": body}, "error": None}
            item["id"] = f"{batch.id}-req-{number}"
            ok = item["response"] is not None and item["response"]["status_code"] == 200
            (output if ok else errors).append(_json(item))
        if self.shuffle is not None:
            random.Random(self.shuffle).shuffle(output)
        batch.total = len(self._lines(batch))
        batch.completed, batch.failed = len(output), len(errors)
        if output:
            batch.output_file_id = self._store_output(batch, "output", output)
        if errors:
            batch.error_file_id = self._store_output(batch, "errors", errors)
        batch.status = status

    def _store_output(self, batch: StoredBatch, kind: str, lines: list[bytes]) -> str:
        stored = StoredFile(self._next_id("file"), f"{batch.id}_{kind}.jsonl", "batch_output",
                            b"\n".join(lines) + b"\n", EPOCH + self._ids)
        self.files[stored.id] = stored
        return stored.id

    def _complete(self, body: dict[str, Any], number: int) -> tuple[int, bytes]:
        """The chat-completion answer to ``body``, the same online and in a batch."""
        return ChatServer._payload(ChatServer._resolve(self.answer, body), body, number)

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> BatchServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> BatchServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def _error_body(message: str, status: int) -> bytes:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return _json({"error": {"message": message, "type": kind, "code": None, "param": None}})


def _problem(code: str, message: str, line: int) -> dict[str, Any]:
    return {"code": code, "message": message, "line": line, "param": None}
