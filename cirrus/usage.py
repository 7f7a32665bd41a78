"""Token usage per role, and what it costs (issue 16, contract section 4).

Every model call Cirrus makes belongs to a role: ``agent``, ``judge``,
``fluency`` or ``annotator``.  A :class:`UsageLedger` adds up, per role, the
calls sent to an endpoint and their tokens as the endpoint reported them:
input, cached input (``usage.prompt_tokens_details.cached_tokens``), output
and reasoning (``usage.completion_tokens_details.reasoning_tokens``, part of
the output).  Calls answered from Cirrus's own response cache are counted
apart (``cirrus_cache_hits``): they were not sent, so they cost nothing.

The ledger a call is written to is the one current in its context
(:func:`recording`): ``cirrus eval`` opens one per (task, attempt), so usage
is stored with the attempt row and survives a resume; commands that are not
walks (``judge-eval``, ``rescore``, ingest's annotator) open one for the
whole command.  Everything here is pure but :func:`record`, which writes to
the current ledger.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

ROLES = ("agent", "judge", "fluency", "annotator")
USAGE_FIELDS = ("calls", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens",
                "cirrus_cache_hits", "batch_calls")


def role_of(client_name: str) -> str:
    """The role a model client's name belongs to: a judge panel's members
    (``judge[1]``, ``judge[2]``, ...) are the ``judge``."""
    return client_name.split("[", 1)[0]


@dataclass(slots=True)
class Usage:
    """One role's calls and tokens.  Token counts are those of the calls sent
    (``calls``); ``cirrus_cache_hits`` were answered from Cirrus's cache and
    add no tokens.  ``batch_calls`` of ``calls`` went through a Batch API
    (their tokens are priced with the batch discount: ``batch_*`` fields)."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cirrus_cache_hits: int = 0
    batch_calls: int = 0
    batch_input_tokens: int = 0
    batch_cached_input_tokens: int = 0
    batch_output_tokens: int = 0

    def add(self, other: Usage) -> None:
        for name in _ALL_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        """A usage read back from JSON; unknown keys are ignored, missing or
        malformed counts read as 0 (rows of older runs have none)."""
        usage = cls()
        for name in _ALL_FIELDS:
            value = (data or {}).get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(usage, name, value)
        return usage


_ALL_FIELDS = tuple(f.name for f in fields(Usage))


def call_usage(input_tokens: int | None, output_tokens: int | None, *, cached_input_tokens: int | None = None,
               reasoning_tokens: int | None = None, from_cirrus_cache: bool = False, batch: bool = False) -> Usage:
    """The usage of one call as the endpoint reported it (``None``: not
    reported, counted as 0).  A call answered from Cirrus's cache is one
    ``cirrus_cache_hits`` and no tokens.  Cached input tokens are bounded by
    the input tokens (a provider reporting more is read as all cached)."""
    if from_cirrus_cache:
        return Usage(cirrus_cache_hits=1)
    entered = max(input_tokens or 0, 0)
    cached = min(max(cached_input_tokens or 0, 0), entered)
    output = max(output_tokens or 0, 0)
    usage = Usage(calls=1, input_tokens=entered, cached_input_tokens=cached, output_tokens=output,
                  reasoning_tokens=max(reasoning_tokens or 0, 0))
    if batch:
        usage.batch_calls = 1
        usage.batch_input_tokens, usage.batch_cached_input_tokens, usage.batch_output_tokens = entered, cached, output
    return usage


def _ordered(names: Iterable[str]) -> list[str]:
    """:data:`ROLES` order (a panel's members after their role), then any other name."""
    def key(name: str) -> tuple[int, str]:
        role = role_of(name)
        return (ROLES.index(role) if role in ROLES else len(ROLES), name)
    return sorted(names, key=key)


def completion_usage(usage: Any) -> Usage:
    """The :class:`Usage` of one call from a chat completion's ``usage``
    object (the OpenAI SDK's, or a dict), read defensively: a field the
    provider left out counts 0."""
    def field_of(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return call_usage(count(field_of(usage, "prompt_tokens")), count(field_of(usage, "completion_tokens")),
                      cached_input_tokens=count(field_of(field_of(usage, "prompt_tokens_details"), "cached_tokens")),
                      reasoning_tokens=count(field_of(field_of(usage, "completion_tokens_details"),
                                                      "reasoning_tokens")))


@dataclass(slots=True)
class UsageLedger:
    """Usage by model client: a role's name (``agent``, ``judge``, ...), or a
    judge panel member's (``judge[2]``), whose prices may differ."""

    clients: dict[str, Usage] = field(default_factory=dict)

    def add(self, client: str, usage: Usage) -> None:
        self.clients.setdefault(client, Usage()).add(usage)

    def merge(self, other: UsageLedger) -> None:
        for client, usage in other.clients.items():
            self.add(client, usage)

    def by_role(self) -> dict[str, Usage]:
        """Usage per role, a panel's members summed into ``judge``."""
        roles: dict[str, Usage] = {}
        for client in _ordered(self.clients):
            roles.setdefault(role_of(client), Usage()).add(self.clients[client])
        return roles

    def to_dict(self) -> dict[str, dict[str, int]]:
        """Per model client, in :data:`ROLES` order (stored with attempt rows)."""
        return {client: self.clients[client].to_dict() for client in _ordered(self.clients)}

    def roles_dict(self) -> dict[str, dict[str, int]]:
        """Per role (``summary.json``'s ``usage``)."""
        return {role: usage.to_dict() for role, usage in self.by_role().items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> UsageLedger:
        ledger = cls()
        for role, usage in (data or {}).items():
            if isinstance(usage, Mapping):
                ledger.add(str(role), Usage.from_dict(usage))
        return ledger

    @classmethod
    def total_of(cls, ledgers: Iterable[Mapping[str, Any] | None]) -> UsageLedger:
        """The sum of ledgers stored as dicts (attempt rows' ``usage``)."""
        total = cls()
        for data in ledgers:
            total.merge(cls.from_dict(data))
        return total


_CURRENT: contextvars.ContextVar[UsageLedger | None] = contextvars.ContextVar("cirrus_usage_ledger", default=None)


@contextlib.contextmanager
def recording(ledger: UsageLedger) -> Iterator[UsageLedger]:
    """Make ``ledger`` the one calls in this context (and the asyncio tasks
    it starts) are recorded in."""
    token = _CURRENT.set(ledger)
    try:
        yield ledger
    finally:
        _CURRENT.reset(token)


def record(role: str, usage: Usage) -> None:
    """Add one call's usage to the current ledger (none open: not recorded)."""
    ledger = _CURRENT.get()
    if ledger is not None:
        ledger.add(role, usage)


def calls_sent(*roles: str) -> int | None:
    """The calls the current ledger holds for these roles, sent to an
    endpoint (answers from Cirrus's cache are not calls); ``None`` when no
    ledger is open.  What the walk counts a checkpoint's judge calls with."""
    ledger = _CURRENT.get()
    if ledger is None:
        return None
    return sum(usage.calls for client, usage in ledger.clients.items() if role_of(client) in roles)
