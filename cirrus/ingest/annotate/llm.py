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
from typing import get_args

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

from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.llm.providers import Endpoint
from cirrus.schema import ReplyType

SYSTEM_PROMPT = """You label the replies of a cloud-service support agent for a benchmark.
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


class LLMAnnotator:
    name = "llm"

    def __init__(self, endpoint: Endpoint, fallback: RuleAnnotator, temperature: float = 0.0,
                 max_attempts: int = 3, timeout: float = 60.0) -> None:
        self.endpoint = endpoint
        self.fallback = fallback
        self.temperature = temperature
        self.max_attempts = max_attempts
        self.fallbacks = 0
        # transient HTTP errors are retried by the client itself (with backoff)
        self._client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), timeout=timeout, max_retries=4)

    def _ask(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        response = self._client.chat.completions.create(
            model=self.endpoint.model,
            temperature=self.temperature,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": render_prompt(items)}],
        )
        content = response.choices[0].message.content if response.choices else None
        return parse_labels(content or "", len(items))

    def label(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        if not items:
            return []
        ask = retry(
            retry=retry_if_exception_type(MalformedLabels),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(multiplier=0.2, max=2, jitter=0.2),
            reraise=True,
        )(self._ask)
        try:
            return ask(items)
        except (AuthenticationError, PermissionDeniedError) as exc:
            raise self.endpoint.key_refused(exc.status_code, "annotator", "--annotator-api-key-env") from None
        except (MalformedLabels, *_TRANSIENT, *_REFUSED_REQUEST):
            self.fallbacks += 1
            return self.fallback.label(items)
