"""Reply-type annotation by an LLM on any OpenAI-compatible endpoint.

One request per ticket labels all its checkpoints.  The answer must be JSON
(``{"labels": [...]}``, one known type per checkpoint); anything else is
retried, and a ticket whose answers stay malformed falls back to the rule
annotator (counted in the manifest), so one bad answer never stops ingest.
A refused API key (401/403) is different: every ticket would fail the same
way, so it stops ingest with :class:`ModelAuthError` instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

from openai import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    InternalServerError,
    OpenAI,
    PermissionDeniedError,
    RateLimitError,
    UnprocessableEntityError,
)
from pydantic import BaseModel, ValidationError, field_validator
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from cirrus.domain import NEUTRAL, Domain, with_domain
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.requests import collected_requests, request_id
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.llm.providers import Endpoint
from cirrus.schema import ReplyType
from cirrus.usage import call_usage, completion_usage, record

SYSTEM_PROMPT = """You label the replies of a customer-service agent for a benchmark.
For every numbered agent reply, choose exactly one type:
- Solution: the agent acts on the problem (runs a tool, changes something) or gives concrete, case-specific steps, commands, causes or answers.
- Standard: policy, process or general product information that would be the same for any customer.
- Inquire: the agent asks the customer for information it needs (an id, a screenshot, an error message).
- Clarify: the agent checks that it understood the request correctly before going on.
- Appease: apology, empathy or reassurance without new information.
Answer with JSON only, in the form {"labels": ["Solution", "Inquire", ...]}, one label per reply, in order."""

_TRANSIENT = (RateLimitError, APITimeoutError, APIConnectionError, InternalServerError)
# refused for this request's content (too long for the context, ...): the
# rules label this ticket, the next ticket asks the model again
_REFUSED_REQUEST = (BadRequestError, UnprocessableEntityError)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class MalformedLabels(ValueError):
    pass


class _Labels(BaseModel):
    labels: list[str]

    @field_validator("labels")
    @classmethod
    def _known(cls, labels: list[str]) -> list[str]:
        allowed = {t.lower(): t for t in get_args(ReplyType)}
        out = []
        for label in labels:
            if label.strip().lower() not in allowed:
                raise ValueError(f"unknown reply type {label!r}")
            out.append(allowed[label.strip().lower()])
        return out


def parse_labels(raw: str, expected: int) -> list[ReplyType]:
    try:
        labels = _Labels.model_validate(json.loads(_FENCE.sub("", raw.strip()))).labels
    except (json.JSONDecodeError, ValidationError, TypeError) as exc:
        raise MalformedLabels(f"annotator answer is not valid label JSON: {exc}") from exc
    if len(labels) != expected:
        raise MalformedLabels(f"annotator gave {len(labels)} labels for {expected} replies")
    return labels  # type: ignore[return-value]


def render_prompt(items: list[ReplyToLabel]) -> str:
    blocks = []
    for i, item in enumerate(items, 1):
        tools = f"\nTools called: {', '.join(item.tool_names)}" if item.tool_names else ""
        blocks.append(f"### Reply {i}\nCustomer: {item.query}\nAgent: {item.reply or '(no text)'}{tools}")
    return "\n\n".join(blocks)


T = TypeVar("T")

class _NotAsked(Exception):
    """The request was collected for a batch, or the batch has no answer for it."""


class JsonAsker:
    """One system prompt, one ticket's user message, one JSON answer read by
    ``parse``: the call, its retries and its failure modes, shared by the
    LLM annotator and the LLM checkpoint selector.  :meth:`ask` returns the
    parsed answer, or ``None`` when the ticket should fall back to the rules
    (answers that stay malformed, a transient error after the client's own
    retries, a request the endpoint refuses for its content); a refused key
    raises :class:`~cirrus.llm.providers.ModelAuthError`.  Every call's usage
    goes to the current ledger as the ``annotator`` role."""

    def __init__(self, endpoint: Endpoint, malformed: type[Exception], temperature: float = 0.0,
                 max_attempts: int = 3, timeout: float = 60.0, answers_path: Path | None = None) -> None:
        self.endpoint = endpoint
        self.malformed = malformed
        self.temperature = temperature
        self.max_attempts = max_attempts
        self.answers_path = answers_path  # the second pass of ingest --batch: answers instead of calls
        self._answers: dict[str, dict[str, Any]] | None = None
        # transient HTTP errors are retried by the client itself (with backoff)
        self._client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), timeout=timeout, max_retries=4)

    def _batch_answer(self, key: str) -> dict[str, Any] | None:
        if self._answers is None:
            self._answers = {}
            for line in self.answers_path.read_text(encoding="utf-8").splitlines():  # type: ignore[union-attr]
                if line.strip():
                    item = json.loads(line)
                    self._answers[item["custom_id"]] = item["response"]
        return self._answers.get(key)

    def _once(self, system: str, user: str, parse: Callable[[str], T]) -> T:
        body = {"model": self.endpoint.model, "temperature": self.temperature,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        bucket = collected_requests()
        if bucket is not None:
            bucket.append((request_id(body), body))
            raise _NotAsked
        if self.answers_path is not None:
            response = self._batch_answer(request_id(body))
            if response is None:  # the batch failed this request, or a retry the batch never saw
                raise _NotAsked
            usage = completion_usage(response.get("usage"))
            record("annotator", call_usage(usage.input_tokens, usage.output_tokens, batch=True,
                                           cached_input_tokens=usage.cached_input_tokens,
                                           reasoning_tokens=usage.reasoning_tokens))
            choices = response.get("choices") or [{}]
            return parse(((choices[0] or {}).get("message") or {}).get("content") or "")
        response = self._client.chat.completions.create(**body)
        record("annotator", completion_usage(getattr(response, "usage", None)))  # the manifest's usage
        content = response.choices[0].message.content if response.choices else None
        return parse(content or "")

    def ask(self, system: str, user: str, parse: Callable[[str], T]) -> T | None:
        once = retry(
            retry=retry_if_exception_type(self.malformed),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(multiplier=0.2, max=2, jitter=0.2),
            reraise=True,
        )(self._once)
        try:
            return once(system, user, parse)
        except (AuthenticationError, PermissionDeniedError) as exc:
            raise self.endpoint.key_refused(exc.status_code, "annotator", "--annotator-api-key-env") from None
        except (self.malformed, _NotAsked, *_TRANSIENT, *_REFUSED_REQUEST):
            return None


class LLMAnnotator:
    name = "llm"

    def __init__(self, endpoint: Endpoint, fallback: RuleAnnotator, temperature: float = 0.0,
                 max_attempts: int = 3, timeout: float = 60.0, answers_path: Path | None = None,
                 domain: Domain = NEUTRAL) -> None:
        self.endpoint = endpoint
        self.fallback = fallback
        self.fallbacks = 0
        self.system_prompt = with_domain(SYSTEM_PROMPT, domain)
        self._asker = JsonAsker(endpoint, MalformedLabels, temperature, max_attempts, timeout, answers_path)

    def label(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        if not items:
            return []
        labels = self._asker.ask(self.system_prompt, render_prompt(items), lambda raw: parse_labels(raw, len(items)))
        if labels is None:
            self.fallbacks += 1
            return self.fallback.label(items)
        return labels
