"""The annotator's requests of ``cirrus ingest --batch`` (docs/batch.md).

The first pass runs the pipeline with every LLM annotator (or selector)
request collected instead of sent (:func:`collecting_requests`, per ticket);
the requests go to the provider's Batch API; the second pass reads the
answers by :func:`request_id`.  Kept apart from the LLM annotator so that the
pipeline can import it without the OpenAI SDK.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

Request = tuple[str, dict[str, Any]]  # (custom_id, chat-completions body)

_COLLECTED: contextvars.ContextVar[list[Request] | None] = contextvars.ContextVar(
    "cirrus_annotator_requests", default=None)


@contextlib.contextmanager
def collecting_requests(bucket: list[Request]) -> Iterator[list[Request]]:
    """Within this block, annotator requests are not sent: each ``(custom_id,
    body)`` goes to ``bucket`` and the ticket is labelled by the rules (a
    placeholder: the first pass of ``ingest --batch`` writes nothing)."""
    token = _COLLECTED.set(bucket)
    try:
        yield bucket
    finally:
        _COLLECTED.reset(token)


def request_id(body: Mapping[str, Any]) -> str:
    """The custom_id of an annotator request: a hash of its body, the same in
    both passes of ``ingest --batch`` (de-identification is deterministic)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def collected_requests() -> list[Request] | None:
    """The bucket of the current :func:`collecting_requests` block, if any."""
    return _COLLECTED.get()
