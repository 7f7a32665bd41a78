"""The clients of a run (:class:`ClientPool`): connections and limits shared
per endpoint."""

from __future__ import annotations

from openai import AsyncOpenAI

import cirrus.llm
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client.chat import BatchAnswers, ChatClient, _package_make_openai_client
from cirrus.llm.client.limits import AdaptiveLimiter, RateLimiter
from cirrus.llm.client.roles import RoleConfig
from cirrus.llm.providers import Endpoint, shown_url


class ClientPool:
    """Hands out :class:`ChatClient` objects for roles, sharing one
    ``AsyncOpenAI`` (connection pool) per base URL and key variable and one
    limiter per endpoint (model, base URL, key variable; the first role that
    asks for an endpoint sets its limits).  Create it inside the event loop
    that uses it and close it with :meth:`aclose` (or ``async with``).

    With ``adaptive`` (the default) each endpoint's limiter is an
    :class:`~cirrus.llm.client.limits.AdaptiveLimiter`: its window of requests
    in flight starts at ``ceiling`` (``cirrus eval --concurrency``; ``None``:
    unbounded until the endpoint first pushes back) or the role's
    ``concurrency`` when lower, halves on overload answers and grows back
    while calls succeed.  ``adaptive=False`` keeps the fixed limits only.
    """

    def __init__(self, cache: ResponseCache | None = None, *, ceiling: int | None = None,
                 adaptive: bool = True) -> None:
        if ceiling is not None and ceiling < 1:
            raise ValueError("the concurrency ceiling must be >= 1 (or None for no bound)")
        self.cache = cache
        self.ceiling = ceiling
        self.adaptive = adaptive
        self._openai: dict[tuple[str, str | None, float], AsyncOpenAI] = {}
        self._limiters: dict[Endpoint, RateLimiter] = {}
        self._clients: list[ChatClient] = []
        self.batch: BatchAnswers | None = None  # batch mode for every client (use_batch)
        cirrus.llm.track_pool(self)

    def client(self, role: RoleConfig) -> ChatClient:
        endpoint = role.endpoint
        key = (endpoint.base_url, endpoint.api_key_env, role.timeout)
        openai_client = self._openai.get(key)
        if openai_client is None:
            openai_client = self._openai[key] = _package_make_openai_client(endpoint, role.timeout)
        limiter = self._limiters.get(endpoint)
        if limiter is None:
            if self.adaptive:
                limiter = AdaptiveLimiter(role.rpm, role.concurrency, ceiling=self.ceiling,
                                          label=f"{endpoint.model}@{shown_url(endpoint.base_url)}")
            else:
                limiter = RateLimiter(role.rpm, role.concurrency)
            self._limiters[endpoint] = limiter
        chat = ChatClient(role, cache=self.cache, limiter=limiter, openai_client=openai_client)
        chat.batch = self.batch
        self._clients.append(chat)
        return chat

    def use_batch(self, collector: BatchAnswers | None) -> None:
        """Put every client of this pool, made or to be made, in batch mode
        with ``collector`` (``None``: back to online calls)."""
        self.batch = collector
        for chat in self._clients:
            chat.batch = collector

    def _adaptive(self) -> list[AdaptiveLimiter]:
        return [limiter for limiter in self._limiters.values() if isinstance(limiter, AdaptiveLimiter)]

    def concurrency_levels(self) -> dict[str, int | None]:
        """Endpoint (``model@base URL``) -> the requests in flight its window
        allows now (``None``: no bound yet)."""
        return {limiter.label: limiter.level for limiter in self._adaptive()}

    def in_flight(self) -> dict[str, int]:
        """Endpoint (``model@base URL``) -> requests in flight now."""
        return {limiter.label: limiter.in_flight for limiter in self._adaptive()}

    async def aclose(self) -> None:
        cirrus.llm.untrack_pool(self)
        clients, self._openai = list(self._openai.values()), {}
        for openai_client in clients:
            await openai_client.close()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
