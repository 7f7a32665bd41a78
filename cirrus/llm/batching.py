"""Commands whose model calls go through a Batch API: "deferred rounds".

A command such as ``cirrus rescore --batch`` keeps its normal code: judges
call :meth:`~cirrus.llm.client.ChatClient.complete_parsed` as always.  With a
:class:`BatchCollector` set on the clients (``ClientPool.use_batch``), a
request is not sent: :meth:`BatchCollector.answer` answers it from the
results of an earlier batch, or notes it as pending and raises
:class:`Deferred`.

:func:`run_in_rounds` drives the command: it runs a *dry pass* (the
command's work, writing nothing, each unit of work ending at its first
:class:`Deferred`), sends what is pending as one batch per endpoint
(:meth:`BatchCollector.flush`, :func:`cirrus.llm.batch.run_batch`), and
repeats until a dry pass asks for nothing new.  Rounds are needed because a
question may depend on an earlier answer (a walk asks whether a turn covers a
later checkpoint only after it accepted the turn; a repair request follows an
unreadable answer).  The command then runs its normal, writing pass with the
collector still set: every request is answered from the batch results, and
its usage is recorded as a batch call (priced with ``batch_discount``) the
first time it is read; the provider answered (and billed) it once, so a
second unit of work asking the identical question reads it as a Cirrus cache
hit (no tokens, no cost).

Each round's batch is resumable: its state file is
``<state_dir>/<endpoint>-round<n>-<requests hash>.json``, so running the same
command again finds the same requests, hence the same files, and polls (or
reads) the batches already created instead of creating new ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.llm.batch import BatchError, BatchRequest, BatchStatus, run_batch
from cirrus.usage import Usage, call_usage
from cirrus.usage import record as record_usage

if TYPE_CHECKING:
    from cirrus.llm.client import ChatClient, ChatResult

POLL_ENV = "CIRRUS_BATCH_POLL_S"  # seconds between polls of a batch (default 30)
DEFAULT_POLL_S = 30.0
STATE_SUBDIR = "batches"  # under the workspace's .cirrus-cache/
# how cirrus.llm.batch words the error of a request an ``expired`` batch left unanswered
EXPIRED = "expired before this request was answered"


class Deferred(Exception):
    """This request waits for a batch: the unit of work that asked it stops
    here in a dry pass (never caught as a failure)."""


class BatchMissing(RuntimeError):
    """The writing pass asked a question no dry pass asked: a bug (the dry
    pass must ask exactly what the writing pass asks)."""


class TooManyRounds(BatchError):
    """Requests were still pending after the most rounds a command allows."""


def custom_id(base_url: str, payload: bytes) -> str:
    """The batch id of one request: the same body to the same endpoint is the
    same request (and is sent once)."""
    digest = hashlib.sha256(base_url.encode("utf-8") + b"\0" + payload).hexdigest()
    return f"cirrus-{digest[:40]}"


def batch_usage(usage: Usage) -> Usage:
    """``usage`` of one call, counted as a batch call (``batch_*`` fields)."""
    return replace(usage, batch_calls=usage.calls, batch_input_tokens=usage.input_tokens,
                   batch_cached_input_tokens=usage.cached_input_tokens, batch_output_tokens=usage.output_tokens)


def endpoint_slug(base_url: str, api_key_env: str | None) -> str:
    """A file-name-safe name of an endpoint (host and path, key variable)."""
    from cirrus.llm.providers import shown_url

    text = re.sub(r"^[a-z]+://", "", str(shown_url(base_url) or "default")) + (f"-{api_key_env}" if api_key_env else "")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.")
    return slug[:80] or "endpoint"


def poll_interval() -> float:
    """Seconds between two polls: ``$CIRRUS_BATCH_POLL_S`` or 30."""
    raw = os.environ.get(POLL_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_POLL_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{POLL_ENV}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise ValueError(f"{POLL_ENV} must be >= 0 seconds")
    return value


@dataclass
class BatchCollector:
    """The requests of a command in batch mode: those waiting for a batch
    (``pending``), and the answers (``results``) and per-request errors
    (``errors``) of the batches already run, by custom id.

    ``dry`` is true during the dry passes: answers are then not written to
    the response cache (the writing pass must see them as batch calls, not
    as cache hits).  ``final`` is true in the writing pass: a request
    without a result is a :class:`BatchMissing`, not a new pending one."""

    pending: dict[str, tuple[Any, bytes]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    dry: bool = False
    final: bool = False
    rounds: int = 0
    sent: int = 0  # requests sent in batches, all rounds
    read: set[str] = field(default_factory=set)  # results the writing pass has read (and counted) once

    def answer(self, client: ChatClient, payload: bytes) -> ChatResult:
        """The answer to ``payload`` from a finished batch (its usage recorded
        as a batch call the first time the writing pass reads it, as a Cirrus
        cache hit after that: the batch answered it once); an
        :class:`InfrastructureError` when the batch answered this request with
        an error; else :class:`Deferred`."""
        from cirrus.evaluate.types import InfrastructureError
        from cirrus.llm.client.errors import _MalformedAnswer

        key = custom_id(str(client.role.endpoint.base_url or ""), payload)
        if key in self.results:
            try:
                result = _result_of(self.results[key])
            except _MalformedAnswer as exc:
                raise InfrastructureError(client._redact(
                    f"{client.role.describe()} failed: batch answer unusable: {exc}")) from None
            result = client._scrubbed(result)
            record_usage(client.role.name or "agent", self._usage_of(key, result, payload))
            return result
        if key in self.errors:
            raise InfrastructureError(client._redact(
                f"{client.role.describe()} failed: batch request failed: {self.errors[key]}"))
        if self.final:
            raise BatchMissing(f"{client.role.describe()}: a request no dry pass asked was asked in the writing "
                               "pass (batch mode needs the same questions in both; please report this)")
        self.pending.setdefault(key, (client, payload))
        raise Deferred(key)

    def _usage_of(self, key: str, result: ChatResult, payload: bytes) -> Usage:
        """The usage one reading of the batch answer ``key`` adds: the batch
        call the first time the writing pass reads it, then a cache hit."""
        if key in self.read:
            return call_usage(None, None, from_cirrus_cache=True)
        if not self.dry:
            self.read.add(key)
        return batch_usage(result.usage(payload))

    async def flush(self, state_dir: Path, *,
                    progress: Callable[[str, BatchStatus], None] | None = None,
                    notify: Callable[[str], None] | None = None,
                    sleep: Callable[[float], Awaitable[Any]] | None = None) -> int:
        """Send every pending request, one batch per endpoint (base URL and
        key variable), wait for the batches and keep their answers; returns
        how many requests were sent.  ``progress`` gets the endpoint's name
        and each poll's news.  Raises what :func:`run_batch` raises."""
        import json

        from cirrus.llm.client import make_openai_client

        if not self.pending:
            return 0
        self.rounds += 1
        groups: dict[tuple[str, str | None], list[tuple[str, Any, bytes]]] = {}
        for key, (client, payload) in self.pending.items():
            endpoint = client.role.endpoint
            groups.setdefault((str(endpoint.base_url or ""), endpoint.api_key_env), []).append((key, client, payload))
        interval = poll_interval()

        async def one(base_url: str, key_env: str | None, items: list[tuple[str, Any, bytes]]) -> int:
            client = items[0][1]
            ids = sorted(key for key, _, _ in items)
            set_hash = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:10]
            slug = endpoint_slug(base_url, key_env)
            state = state_dir / f"{slug}-round{self.rounds}-{set_hash}.json"
            requests = [BatchRequest(key, json.loads(payload)) for key, _, payload in items]
            if notify is not None:
                notify(f"batch round {self.rounds}: {len(requests)} requests to {slug} (state: {state})")
            kwargs: dict[str, Any] = {"poll_interval_s": interval}
            if progress is not None:
                kwargs["progress"] = lambda status: progress(slug, status)
            if sleep is not None:
                kwargs["sleep"] = sleep
            openai_client = make_openai_client(client.role.endpoint, client.role.timeout)
            try:
                outcomes = await run_batch(openai_client, requests, state, **kwargs)
            finally:
                await openai_client.close()
            expired = 0
            for key, outcome in outcomes.items():
                if outcome.response is not None:
                    self.results[key] = outcome.response
                elif EXPIRED in (outcome.error or ""):
                    expired += 1  # neither answer nor error: the next dry pass asks it again, in a new batch
                else:
                    self.errors[key] = outcome.error or "no answer"
            if expired and notify is not None:
                notify(f"batch round {self.rounds}: {expired} requests expired unanswered; they go in the next round")
            return len(requests)

        # every endpoint's batch submitted before any is waited for
        counts = await asyncio.gather(*(one(base_url, key_env, items)
                                        for (base_url, key_env), items in groups.items()))
        sent = sum(counts)
        self.pending.clear()
        self.sent += sent
        return sent


def _result_of(response: Mapping[str, Any]) -> ChatResult:
    """A batch answer read as an online one: the SDK's (unvalidated)
    ``ChatCompletion`` of the body, then :meth:`ChatResult.from_completion`."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion

    from cirrus.llm.client import ChatResult

    completion = construct_type(type_=ChatCompletion, value=dict(response))
    return ChatResult.from_completion(completion, 0.0, 1)


async def run_in_rounds(collector: BatchCollector, dry_pass: Callable[[], Awaitable[None]], state_dir: Path, *,
                        max_rounds: int = 6, notify: Callable[[str], None] | None = None,
                        progress: Callable[[str, BatchStatus], None] | None = None,
                        sleep: Callable[[float], Awaitable[Any]] | None = None) -> int:
    """Repeat: a dry pass (``dry_pass``: the command's work, writing nothing,
    each unit catching :class:`Deferred`), then a batch of what it left
    pending, until a dry pass leaves nothing pending; returns the rounds
    used.  Afterwards the collector is ``final``: the caller's writing pass
    is answered from the results.  More than ``max_rounds`` rounds is a
    :class:`TooManyRounds` (the batches already run stay resumable)."""
    collector.dry, collector.final = True, False
    try:
        while True:
            await dry_pass()
            if not collector.pending:
                break
            if collector.rounds >= max_rounds:
                raise TooManyRounds(f"{len(collector.pending)} requests still wait after {max_rounds} batch rounds "
                                    "(the work kept asking new questions)")
            await collector.flush(state_dir, progress=progress, notify=notify, sleep=sleep)
    finally:
        collector.dry = False
    collector.final = True
    return collector.rounds
