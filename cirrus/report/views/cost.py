"""The Cost section: per run the cost of each role, the total, the cost per
success and attempt, the prompt-cache share and what the numbers rest on
(:func:`cost_view`); and which runs the cost chart can place
(:func:`cost_chart_runs`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.views.cells import as_float, money

if TYPE_CHECKING:
    import polars as pl

__all__ = ["cost_chart_runs", "cost_view"]


def _tokens(usage: Any) -> int:
    """Input plus output tokens of a role's ``usage`` entry (0 when malformed)."""
    if not isinstance(usage, Mapping):
        return 0
    return sum(v for k in ("input_tokens", "output_tokens")
               if isinstance(v := usage.get(k), int) and not isinstance(v, bool))


def cost_view(board: pl.DataFrame, summaries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the Cost section, one per run: cost per role, total, per
    success, currency, the prompt-cache share per role (``prompt_cache_share``
    of ``summary.json``) and what the numbers rest on (``basis``)."""
    rows = []
    for row in board.iter_rows(named=True):
        summary = summaries.get(row["run_id"]) or {}
        recorded = summary.get("cost") if isinstance(summary.get("cost"), Mapping) else {}
        if not isinstance(summary.get("usage"), Mapping):
            basis = "agent tokens only (run written before usage was recorded)" if row["cost_total"] is not None \
                else "no price for the agent's model"
        elif any(recorded.get(r) is None and row[f"cost_{r}"] is not None and _tokens(summary["usage"].get(r))
                 for r in ("agent", "judge", "fluency")):
            basis = "recorded; unpriced roles priced here from their usage"
        else:
            basis = "recorded by the run"
        shares = summary.get("prompt_cache_share")
        cache = ", ".join(f"{role} {share:.2f}" for role, share in shares.items()
                          if isinstance(share, (int, float)) and not isinstance(share, bool)) \
            if isinstance(shares, Mapping) else ""
        rows.append({"run_id": row["run_id"], "model": row["model"], "agent": money(row["cost_agent"]),
                     "judge": money(row["cost_judge"]), "fluency": money(row["cost_fluency"]),
                     "total": money(row["cost_total"]), "per_success": money(row["cost_per_success"]),
                     "per_attempt": money(row["cost_per_attempt"]), "currency": row["currency"] or "–",
                     "cache": cache or "–", "basis": basis})
    return rows


def cost_chart_runs(board: pl.DataFrame, runs: Sequence[str]) -> tuple[list[str], list[str], str | None]:
    """``(drawn, left out, currency)`` of SR pass@1 against the run's cost:
    runs without a cost (or SR), or priced in another currency than the
    first drawn run, are left out; ``currency`` is the drawn runs'."""
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    drawn = [r for r in runs if not math.isnan(as_float(rows[r].get("cost_total")))
             and not math.isnan(as_float(rows[r].get("sr_pass1")))]
    currency = rows[drawn[0]].get("currency") if drawn else None
    drawn = [r for r in drawn if rows[r].get("currency") in (currency, None) or currency is None]
    return drawn, [r for r in runs if r not in drawn], currency
