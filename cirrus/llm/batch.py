"""Chat-completions calls sent through an OpenAI-compatible Batch API.

A provider's Batch API answers a file of requests within a completion window
(24 h) at a discount (OpenAI, DashScope and others: half price).
:func:`run_batch` does the whole round trip: write the requests as JSONL
(one ``{"custom_id", "method", "url", "body"}`` per line), upload it
(``purpose="batch"``), create the batch, poll it until it ends, download the
output file (and the error file) and map every line back to its request by
``custom_id`` -- providers write output lines in any order.

Resuming
    Each step is recorded in a small JSON *state file* (input hash, file
    ids, batch ids, statuses; never a key or a prompt), written atomically
    right after the step.  Calling :func:`run_batch` again with the same
    requests and state file picks up where the last call stopped: a file
    already uploaded is not uploaded again, a batch already created is
    polled, not created again.  Once a batch's results are downloaded they
    are kept beside the state (``<state>.results.jsonl``) and a later call
    reads them without asking the server.  A state file written for other
    requests is refused (:class:`BatchStateMismatch`).

Limits
    Providers cap one batch's input file (OpenAI: 50,000 requests and
    200 MB).  Larger inputs are split into several batches of at most
    ``max_requests`` lines and ``max_bytes`` bytes (defaults below keep a
    margin under 200 MB), all submitted before polling starts.

Errors
    A provider without the files or batches endpoints (HTTP 404, 405 or 501
    on upload or creation) raises :class:`BatchUnsupported`.  A batch that
    ends ``failed`` or ``cancelled`` raises :class:`BatchFailed` with the
    provider's messages (and the results of any requests it did finish); an
    ``expired`` batch returns what it finished, the rest as per-request
    errors.  A request the provider answered with an error (an error-file
    line, or a response whose ``status_code`` is not 200) gets
    :attr:`BatchOutcome.error`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import openai

from cirrus.llm.providers import shown_url
from cirrus.usage import Usage, call_usage

ENDPOINT = "/v1/chat/completions"
DEFAULT_MAX_REQUESTS = 50_000  # OpenAI's cap on requests per batch
DEFAULT_MAX_BYTES = 190_000_000  # OpenAI caps a batch input file at 200 MB; keep a margin
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
UNSUPPORTED_STATUSES = frozenset({404, 405, 501})
TRANSIENT_POLL_FAILURES = 5  # consecutive failed polls tolerated before giving up
STATE_VERSION = 1


class BatchError(RuntimeError):
    """A batch run that cannot go on; the message says what to do."""


class BatchUnsupported(BatchError):
    """The provider has no files/batches endpoint."""


class BatchStateMismatch(BatchError):
    """The state file belongs to other requests (or another provider)."""


class BatchFailed(BatchError):
    """A batch ended ``failed`` or ``cancelled``.  ``outcomes`` holds the
    results of every request that was answered (of all parts), so a caller
    may keep them and send the rest again."""

    def __init__(self, message: str, batch_id: str, status: str, messages: Sequence[str],
                 outcomes: Mapping[str, BatchOutcome]) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.status = status
        self.messages = list(messages)
        self.outcomes = dict(outcomes)


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One chat-completions request: ``body`` holds model, messages and
    parameters, exactly as they would be sent online."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What became of one request: the chat-completion ``response`` body, or
    an ``error`` message (exactly one of them is set)."""

    custom_id: str
    response: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A poll's news of one batch, for progress displays.  ``part`` counts
    from 1 of ``parts`` when the input was split."""

    batch_id: str
    status: str
    completed: int
    failed: int
    total: int
    part: int = 1
    parts: int = 1


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one answer as its ``usage`` reported them (``None``:
    not reported)."""

    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None

    def as_usage(self) -> Usage:
        """The ledger entry of a batch call (priced with ``batch_discount``)."""
        return call_usage(self.prompt_tokens, self.completion_tokens, cached_input_tokens=self.cached_tokens,
                          reasoning_tokens=self.reasoning_tokens, batch=True)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_of(response: Mapping[str, Any] | None) -> TokenUsage:
    """The token counts of a chat-completion body: ``usage.prompt_tokens``,
    ``usage.prompt_tokens_details.cached_tokens``, ``usage.completion_tokens``
    and ``usage.completion_tokens_details.reasoning_tokens``."""
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        return TokenUsage(None, None, None, None)
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    return TokenUsage(
        _count(usage.get("prompt_tokens")),
        _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else None,
        _count(usage.get("completion_tokens")),
        _count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, Mapping) else None,
    )


# ---------------------------------------------------------------- pure parts

def input_line(request: BatchRequest) -> bytes:
    """One line of the batch input file (with its newline)."""
    line = {"custom_id": request.custom_id, "method": "POST", "url": ENDPOINT, "body": request.body}
    return json.dumps(line, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


def check_requests(requests: Sequence[BatchRequest]) -> None:
    """Refuse an empty custom_id or one used twice (the provider maps
    answers back by it), before anything is sent."""
    seen: set[str] = set()
    duplicates: list[str] = []
    for request in requests:
        if not isinstance(request.custom_id, str) or not request.custom_id:
            raise ValueError("every batch request needs a non-empty custom_id")
        if request.custom_id in seen:
            duplicates.append(request.custom_id)
        seen.add(request.custom_id)
    if duplicates:
        shown = ", ".join(repr(c) for c in sorted(set(duplicates))[:5])
        more = f" and {len(set(duplicates)) - 5} more" if len(set(duplicates)) > 5 else ""
        raise ValueError(f"duplicate custom_id in the batch requests: {shown}{more} (each request needs its own id)")


def split_lines(lines: Sequence[bytes], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """Consecutive groups of ``lines``, each at most ``max_requests`` lines
    and ``max_bytes`` bytes.  A single line over ``max_bytes`` is an error."""
    if max_requests < 1 or max_bytes < 1:
        raise ValueError("max_requests and max_bytes must be positive")
    parts: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise ValueError(f"one batch request is {len(line):,} bytes, over the limit of {max_bytes:,} bytes per "
                             "batch file")
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            parts.append(current)
            current, size = [], 0
        current.append(line)
        size += len(line)
    if current:
        parts.append(current)
    return parts


def _sha256(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _error_text(error: Any) -> str | None:
    """The message of an ``error`` object (``{"code", "message"}``) or string."""
    if isinstance(error, Mapping):
        message = error.get("message")
        code = error.get("code") or error.get("type")
        if message and code:
            return f"{code}: {message}"
        return str(message or code or "") or None
    if isinstance(error, str) and error:
        return error
    return None


def parse_result_line(raw: bytes | str) -> BatchOutcome | None:
    """One line of an output or error file as an outcome (``None``: a blank
    or unreadable line, or one without a custom_id)."""
    try:
        line = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(line, Mapping) or not isinstance(line.get("custom_id"), str):
        return None
    custom_id = line["custom_id"]
    response = line.get("response")
    error = _error_text(line.get("error"))
    if isinstance(response, Mapping):
        status = response.get("status_code")
        body = response.get("body")
        if status == 200 and isinstance(body, Mapping) and error is None:
            return BatchOutcome(custom_id, dict(body), None)
        if error is None:
            detail = _error_text(body.get("error")) if isinstance(body, Mapping) else None
            error = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    return BatchOutcome(custom_id, None, error or "the provider returned neither a response nor an error")


def merge_results(lines: Iterable[bytes | str], wanted: Iterable[str]) -> dict[str, BatchOutcome]:
    """Outcomes by custom_id from output and error file lines; ids not in
    ``wanted`` are ignored, and an answer wins over an error for one id."""
    keep = set(wanted)
    outcomes: dict[str, BatchOutcome] = {}
    for raw in lines:
        if not (raw.strip() if isinstance(raw, (bytes, str)) else raw):
            continue
        outcome = parse_result_line(raw)
        if outcome is None or outcome.custom_id not in keep:
            continue
        known = outcomes.get(outcome.custom_id)
        if known is None or (known.response is None and outcome.response is not None):
            outcomes[outcome.custom_id] = outcome
    return outcomes


# ---------------------------------------------------------------- state

@dataclass(slots=True)
class _Part:
    sha256: str
    requests: int
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)
    downloaded: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_PART_FIELDS = frozenset(f.name for f in fields(_Part))


@dataclass(slots=True)
class _State:
    input_sha256: str
    base_url: str | None
    completion_window: str
    parts: list[_Part]

    def to_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "input_sha256": self.input_sha256, "base_url": self.base_url,
                "endpoint": ENDPOINT, "completion_window": self.completion_window,
                "parts": [part.to_dict() for part in self.parts]}


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def results_path(state_path: Path) -> Path:
    """Where the downloaded results of ``state_path``'s batches are kept."""
    return state_path.with_name(state_path.name + ".results.jsonl")


def _save_state(path: Path, state: _State) -> None:
    _write_atomic(path, (json.dumps(state.to_dict(), indent=1) + "\n").encode("utf-8"))


def _load_state(path: Path, expected: _State) -> _State:
    """The saved state, checked against the state these requests would make."""
    advice = f"delete {path} to submit these requests as new batches, or choose another state path"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        parts = [_Part(**{k: v for k, v in p.items() if k in _PART_FIELDS}) for p in data["parts"]]
        saved = _State(data["input_sha256"], data.get("base_url"), data["completion_window"], parts)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BatchStateMismatch(f"batch state file {path} cannot be read ({type(exc).__name__}): {advice}") from exc
    if saved.input_sha256 != expected.input_sha256 or [p.sha256 for p in saved.parts] != \
            [p.sha256 for p in expected.parts]:
        raise BatchStateMismatch(f"batch state file {path} was written for other requests (or other batch size "
                                 f"limits): {advice}")
    if saved.base_url != expected.base_url:
        raise BatchStateMismatch(f"batch state file {path} belongs to batches at {saved.base_url}, not "
                                 f"{expected.base_url}: {advice}")
    return saved


def _read_cache(path: Path, wanted: Iterable[str]) -> dict[str, BatchOutcome]:
    outcomes: dict[str, BatchOutcome] = {}
    keep = set(wanted)
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            item = json.loads(raw)
            if item["custom_id"] in keep:
                outcomes[item["custom_id"]] = BatchOutcome(item["custom_id"], item.get("response"), item.get("error"))
    return outcomes


def _write_cache(path: Path, outcomes: Mapping[str, BatchOutcome]) -> None:
    lines = [json.dumps({"custom_id": o.custom_id, "response": o.response, "error": o.error}, ensure_ascii=False,
                        separators=(",", ":")) for o in (outcomes[c] for c in sorted(outcomes))]
    _write_atomic(path, ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))


# ---------------------------------------------------------------- the run

def _status_code(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def _unsupported(base_url: str | None, what: str, exc: BaseException) -> BatchUnsupported:
    return BatchUnsupported(
        f"the provider at {base_url} has no Batch API ({what} answered HTTP {_status_code(exc)}): "
        "run without --batch to send the calls one by one")


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return True
    status = _status_code(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def _batch_errors(batch: Any) -> list[str]:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    messages: list[str] = []
    for item in data:
        text = _error_text({"code": getattr(item, "code", None), "message": getattr(item, "message", None)})
        line = getattr(item, "line", None)
        if text:
            messages.append(f"line {line}: {text}" if line is not None else text)
    return messages


def _counts(batch: Any) -> tuple[int, int, int]:
    counts = getattr(batch, "request_counts", None)
    return (getattr(counts, "completed", 0) or 0, getattr(counts, "failed", 0) or 0,
            getattr(counts, "total", 0) or 0)


async def _download(client: openai.AsyncOpenAI, file_id: str) -> bytes:
    content = await client.files.content(file_id)
    return content.content


async def _submit(client: openai.AsyncOpenAI, state: _State, groups: Sequence[Sequence[bytes]],
                  state_path: Path) -> None:
    """Upload and create every part not created yet, saving after each step."""
    for part, group in zip(state.parts, groups):
        if part.file_id is None:
            try:
                uploaded = await client.files.create(file=("cirrus-batch.jsonl", b"".join(group), "application/jsonl"),
                                                     purpose="batch")
            except openai.APIStatusError as exc:
                if exc.status_code in UNSUPPORTED_STATUSES:
                    raise _unsupported(state.base_url, "the files endpoint", exc) from exc
                raise
            part.file_id = uploaded.id
            _save_state(state_path, state)
        if part.batch_id is None:
            try:
                batch = await client.batches.create(input_file_id=part.file_id, endpoint=ENDPOINT,
                                                    completion_window=state.completion_window)  # type: ignore[arg-type]
            except openai.APIStatusError as exc:
                if exc.status_code in UNSUPPORTED_STATUSES:
                    raise _unsupported(state.base_url, "the batches endpoint", exc) from exc
                raise
            part.batch_id, part.status = batch.id, batch.status
            _save_state(state_path, state)


async def _poll(client: openai.AsyncOpenAI, state: _State, state_path: Path, poll_interval_s: float,
                progress: Callable[[BatchStatus], None] | None, sleep: Callable[[float], Awaitable[Any]]) -> None:
    """Retrieve every unfinished part until all have ended; passing trouble
    (connection errors, 408/409/429/5xx) is tolerated
    :data:`TRANSIENT_POLL_FAILURES` times in a row."""
    failures = 0
    while any(p.status not in TERMINAL for p in state.parts):
        for index, part in enumerate(state.parts):
            if part.status in TERMINAL:
                continue
            try:
                batch = await client.batches.retrieve(part.batch_id or "")
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                code = _status_code(exc)
                if code == 404:
                    raise BatchError(f"batch {part.batch_id} is unknown at {state.base_url}: delete {state_path} "
                                     "to submit the requests again") from exc
                if not _transient(exc) or failures >= TRANSIENT_POLL_FAILURES:
                    what = f"HTTP {code}" if code is not None else type(exc).__name__
                    raise BatchError(f"polling batch {part.batch_id} at {state.base_url} failed ({what}): run again "
                                     "with the same state file to resume") from exc
                failures += 1
                continue
            failures = 0
            seen = (batch.status, batch.output_file_id, batch.error_file_id)
            if seen != (part.status, part.output_file_id, part.error_file_id):
                part.status, part.output_file_id, part.error_file_id = seen
                part.errors = _batch_errors(batch)
                _save_state(state_path, state)
            if progress is not None:
                completed, failed, total = _counts(batch)
                progress(BatchStatus(batch.id, batch.status, completed, failed, total, index + 1, len(state.parts)))
        if any(p.status not in TERMINAL for p in state.parts):
            await sleep(poll_interval_s)


async def _collect(client: openai.AsyncOpenAI, state: _State, ids_of: Sequence[Sequence[str]], state_path: Path,
                   outcomes: dict[str, BatchOutcome]) -> None:
    """Download the output and error files of every part not downloaded yet
    into ``outcomes`` and the results cache."""
    for part, ids in zip(state.parts, ids_of):
        if part.downloaded:
            continue
        raw: list[bytes] = []
        for file_id in (part.output_file_id, part.error_file_id):
            if file_id:
                raw.extend((await _download(client, file_id)).splitlines())
        outcomes.update(merge_results(raw, ids))
        _write_cache(results_path(state_path), outcomes)
        part.downloaded = True
        _save_state(state_path, state)


def _settle(state: _State, ids_of: Sequence[Sequence[str]], outcomes: dict[str, BatchOutcome],
            state_path: Path) -> None:
    """Give every request without a result an error; raise
    :class:`BatchFailed` for the first part that failed or was cancelled."""
    for part, ids in zip(state.parts, ids_of):
        why = {"expired": "expired before this request was answered",
               "completed": "returned no result for this request"}.get(part.status or "", f"ended {part.status}")
        for custom_id in ids:
            if custom_id not in outcomes:
                outcomes[custom_id] = BatchOutcome(custom_id, None, f"batch {part.batch_id} {why}")
    for part in state.parts:
        if part.status in ("failed", "cancelled"):
            detail = "; ".join(part.errors[:5]) or "the provider gave no reason"
            more = f" (and {len(part.errors) - 5} more)" if len(part.errors) > 5 else ""
            raise BatchFailed(f"batch {part.batch_id} at {state.base_url} ended {part.status}: {detail}{more}. "
                              f"Delete {state_path} to submit the requests again", part.batch_id or "",
                              part.status or "", part.errors, outcomes)


async def run_batch(
    client: openai.AsyncOpenAI,
    requests: Sequence[BatchRequest],
    state_path: Path,
    *,
    poll_interval_s: float = 30.0,
    completion_window: str = "24h",
    progress: Callable[[BatchStatus], None] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    max_requests: int = DEFAULT_MAX_REQUESTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, BatchOutcome]:
    """Send ``requests`` as one or more batches and return an outcome for
    each custom_id, in the order of ``requests``.  Resumable through
    ``state_path`` (see the module's docstring).  Raises ``ValueError`` for
    duplicate custom_ids (nothing sent), :class:`BatchUnsupported`,
    :class:`BatchStateMismatch`, :class:`BatchFailed` or :class:`BatchError`;
    the SDK's own error for an upload or creation refused otherwise (a
    401: the key)."""
    check_requests(requests)
    if not requests:
        return {}
    state_path = Path(state_path)
    ordered = sorted(requests, key=lambda r: r.custom_id)  # the same set in any order is the same input
    lines = [input_line(r) for r in ordered]
    groups = split_lines(lines, max_requests, max_bytes)
    ids_of: list[list[str]] = []
    for group in groups:
        start = sum(len(ids) for ids in ids_of)
        ids_of.append([r.custom_id for r in ordered[start:start + len(group)]])
    fresh = _State(_sha256(lines), shown_url(str(client.base_url).rstrip("/")), completion_window,
                   [_Part(_sha256(group), len(group)) for group in groups])
    state = _load_state(state_path, fresh) if state_path.exists() else fresh
    wanted = [r.custom_id for r in ordered]
    outcomes: dict[str, BatchOutcome] = {}
    cache = results_path(state_path)
    if cache.exists():
        outcomes = _read_cache(cache, wanted)
    else:  # never downloaded, or the cache was deleted: download again
        for part in state.parts:
            part.downloaded = False
    if not state_path.exists():
        _save_state(state_path, state)

    await _submit(client, state, groups, state_path)
    await _poll(client, state, state_path, poll_interval_s, progress, sleep)
    await _collect(client, state, ids_of, state_path, outcomes)
    _settle(state, ids_of, outcomes, state_path)
    return {r.custom_id: outcomes[r.custom_id] for r in requests}
