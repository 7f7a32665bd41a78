"""Roles: which model serves the agent, the coverage judge and the fluency
checker, and with which parameters and limits."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cirrus.llm.providers import Endpoint, resolve_endpoint, shown_url

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")



@dataclass(frozen=True, slots=True)
class RoleConfig:
    """Which model serves a role, and how it is called.

    ``None`` parameters are not sent (the server's default applies).
    ``extra_body`` is merged into the request body as is (e.g.
    ``{"enable_thinking": false}`` for Qwen3 on DashScope, ``{"top_p": 0.9}``).
    ``max_tokens_param`` is the body field ``max_tokens`` is sent as: OpenAI's
    reasoning models want ``max_completion_tokens``.  ``rpm`` and
    ``concurrency`` bound the requests to the endpoint (requests started per
    minute, requests in flight); ``None`` is unbounded.  ``timeout`` is per
    request (each try as a whole), in seconds; ``max_retries`` counts retries
    after the first try.  ``name`` is the role ("agent", "judge", "fluency")
    for messages; it changes no answer.

    ``structured_output`` is whether :meth:`ChatClient.complete_parsed` sends
    the ``response_format`` it is given: ``None`` (auto) tries it and falls
    back for good when the endpoint refuses it, ``False`` never sends it,
    ``True`` always does (a refusal is an error).  It is not a body parameter
    and is left out of :meth:`fingerprint`: the parsers read every answer
    shape, and a run started before it existed can be resumed.
    """

    endpoint: Endpoint
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 5
    rpm: float | None = None
    concurrency: int | None = None
    max_tokens_param: str = "max_tokens"
    retry_initial_wait: float = 1.0  # backoff: retry_initial_wait * 2**n + jitter, capped at retry_max_wait
    retry_max_wait: float = 30.0
    name: str | None = None
    structured_output: bool | None = None

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0")
        if self.rpm is not None and self.rpm <= 0:
            raise ValueError("rpm must be > 0 (or None for no limit)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 (or None for no limit)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'")
        if self.structured_output is not None and not isinstance(self.structured_output, bool):
            raise ValueError("structured_output must be true, false or absent (auto)")

    @property
    def model(self) -> str:
        return self.endpoint.model

    @classmethod
    def from_options(
        cls,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | str | None = None,
        option_prefix: str = "",
        **settings: Any,
    ) -> RoleConfig:
        """A role from command-line style options.  ``extra_body`` may be a
        JSON object as text (``--extra-body '{"top_p": 0.8}'``); ``settings``
        are the other fields (timeout, max_retries, rpm, concurrency,
        structured_output, ...).
        Without ``base_url`` the model is looked up in the provider registry
        (:func:`~cirrus.llm.providers.resolve_endpoint`); ``option_prefix``
        names the command's options for this role in its errors (``judge``:
        ``--judge-base-url``)."""
        if isinstance(extra_body, str):
            try:
                extra_body = json.loads(extra_body) if extra_body.strip() else {}
            except ValueError as exc:
                raise ValueError(f"extra body parameters must be a JSON object: {exc}") from None
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ValueError("extra body parameters must be a JSON object")
        if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(f"reasoning effort must be one of {', '.join(REASONING_EFFORTS)}")
        return cls(
            endpoint=resolve_endpoint(model, base_url, api_key_env, option_prefix=option_prefix),
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            extra_body=dict(extra_body or {}),
            **settings,
        )

    def with_params(self, **changes: Any) -> RoleConfig:
        return replace(self, **changes)

    def body_params(self) -> dict[str, Any]:
        """The request-body fields this role adds to every call (model included)."""
        params: dict[str, Any] = {"model": self.endpoint.model}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params[self.max_tokens_param] = self.max_tokens
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        params.update(self.extra_body)
        return params

    def fingerprint(self) -> dict[str, Any]:
        """What makes this role's answers what they are: model and parameters.
        Not the base URL or the key variable (a resume may change those), and
        never the key."""
        return {"model": self.endpoint.model, "params": self.body_params()}

    def describe(self) -> str:
        role = f"{self.name} " if self.name else ""
        return f"{role}model {self.endpoint.model!r} at {shown_url(self.endpoint.base_url)}"


def roles_from_options(
    model: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    *,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_api_key_env: str | None = None,
    fluency_model: str | None = None,
    fluency_base_url: str | None = None,
    fluency_api_key_env: str | None = None,
    agent_params: Mapping[str, Any] | None = None,
    judge_params: Mapping[str, Any] | None = None,
    fluency_params: Mapping[str, Any] | None = None,
) -> tuple[RoleConfig, RoleConfig, RoleConfig]:
    """The (agent, judge, fluency) roles of ``cirrus eval`` (contract 3).

    The base URL and key variable given for the agent are the defaults of the
    judge and fluency checker; the judge model defaults to the agent model and
    the fluency model to the judge model.  Judge and fluency calls default to
    temperature 0.  ``*_params`` are :meth:`RoleConfig.from_options` keywords.
    """
    judge_model = judge_model or model
    fluency_model = fluency_model or judge_model
    agent = RoleConfig.from_options(model, base_url, api_key_env, **{"name": "agent", **dict(agent_params or {})})
    judge = RoleConfig.from_options(
        judge_model, judge_base_url or base_url, judge_api_key_env or api_key_env, option_prefix="judge",
        **{"name": "judge", "temperature": 0.0, **dict(judge_params or {})},
    )
    fluency = RoleConfig.from_options(
        fluency_model, fluency_base_url or judge_base_url or base_url,
        fluency_api_key_env or judge_api_key_env or api_key_env, option_prefix="fluency",
        **{"name": "fluency", "temperature": 0.0, **dict(fluency_params or {})},
    )
    return agent, judge, fluency

