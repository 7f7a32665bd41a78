"""What one ``cirrus eval`` run is asked to do (:class:`EvalSettings`), its
``--max-cost`` budget (:func:`budget`) and its summary's usage and cost
(:func:`usage_and_cost`).  Shared by the walk (:mod:`cirrus.evaluate.runner`),
subtask mode (:mod:`cirrus.evaluate.subtask`) and the rescore
(:mod:`cirrus.evaluate.rescore`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrus.evaluate.scheduler import Budget
from cirrus.pricing import Price
from cirrus.usage import UsageLedger

__all__ = ["EvalSettings", "budget", "usage_and_cost"]


@dataclass
class EvalSettings:
    workspace: Path
    run_id: str
    runs: int
    pass_k: int
    concurrency: int
    limit: int | None = None
    progress: bool = True
    # what must not change when a run is resumed (models, parameters, prompts)
    fingerprint_extra: dict[str, Any] = field(default_factory=dict)
    # recorded with the run, free to change (base URLs, ``self_judged``: its
    # value is also summary.json's)
    details_extra: dict[str, Any] = field(default_factory=dict)
    # "walk" (contract section 4) or "subtask" (every checkpoint alone with the
    # real history: cirrus.evaluate.subtask, docs/subtasks.md)
    mode: str = "walk"
    # the model of each model client ("agent", "judge" or a panel's "judge[2]", "fluency") and the
    # [prices] of cirrus.toml: summary.json's cost (cirrus.pricing.run_cost)
    client_models: dict[str, str] = field(default_factory=dict)
    prices: dict[str, Price] = field(default_factory=dict)
    # --max-cost: start no attempt once the run has spent this much (in the prices' currency)
    max_cost: float | None = None


def budget(settings: EvalSettings) -> Budget | None:
    """The ``--max-cost`` budget of a run (``None`` without one)."""
    if settings.max_cost is None:
        return None
    return Budget(settings.max_cost, settings.client_models, settings.prices)


def usage_and_cost(usages: Iterable[Mapping[str, Any] | None], settings: EvalSettings,
                   overhead: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``summary.json``'s ``usage`` (per role: calls, tokens, Cirrus cache
    hits; summed over ``usages``, the attempt rows' ``usage``, and
    ``overhead``, the billed requests outside them: ``{"kind", "usage"}``
    records of :func:`cirrus.evaluate.overhead.overhead_records`) and
    ``cost`` (per role, ``total`` and ``currency``, from the ``[prices]`` of
    cirrus.toml; null where a role's model has no price), and
    ``prompt_cache_share``: per role with input tokens, the share of them the
    provider's prompt cache served (0 where the provider reports none).  With
    overhead, ``overhead_usage`` says, per kind (``preflight``, ``rerun``)
    and role, which part of ``usage`` it was."""
    from cirrus.pricing import run_cost

    ledger = UsageLedger.total_of(usages)
    kinds: dict[str, UsageLedger] = {}
    for record in overhead:
        part = UsageLedger.from_dict(record.get("usage"))
        kinds.setdefault(str(record.get("kind")), UsageLedger()).merge(part)
        ledger.merge(part)
    roles = ledger.by_role()
    shown = {kind: part.roles_dict() for kind, part in kinds.items() if part.clients}
    return {"usage": ledger.roles_dict(), "cost": run_cost(ledger, settings.client_models, settings.prices),
            "prompt_cache_share": {role: round(usage.cached_input_tokens / usage.input_tokens, 4)
                                   for role, usage in roles.items() if usage.input_tokens},
            **({"overhead_usage": shown} if shown else {})}
