"""Model access: providers, the response cache and the client layer
(:mod:`cirrus.llm.client`).

This module stays light (it imports neither openai nor the client package):
:func:`endpoint_load` is what the eval progress bar reads, and an offline run
must not pay for importing the SDK to show it.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol


class _Pool(Protocol):
    def concurrency_levels(self) -> dict[str, int | None]: ...

    def in_flight(self) -> dict[str, int]: ...


_LIVE_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def track_pool(pool: _Pool) -> None:
    """Called by :class:`cirrus.llm.client.ClientPool` when it opens."""
    _LIVE_POOLS.add(pool)


def untrack_pool(pool: _Pool) -> None:
    """Called by :class:`cirrus.llm.client.ClientPool` when it closes."""
    _LIVE_POOLS.discard(pool)


def endpoint_load() -> dict[str, str]:
    """The progress bar's view of the open client pools: ``{"inflight":
    "IN/LEVEL"}``, one ``IN/LEVEL`` per endpoint (space separated), LEVEL being the adaptive window
    (``-`` while unbounded); ``{}`` when no model endpoint is in use."""
    parts = []
    for pool in list(_LIVE_POOLS):
        levels = pool.concurrency_levels()
        flying = pool.in_flight()
        for label, level in levels.items():
            parts.append(f"{flying.get(label, 0)}/{'-' if level is None else level}")
    return {"inflight": " ".join(parts)} if parts else {}
