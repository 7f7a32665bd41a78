"""Model prices (``[prices]`` of ``cirrus.toml``) and the cost of usage.

A role's cost sums over its calls (contract section 4)::

    (input - cached) / 1e6 * input_per_mtok
      + cached / 1e6 * cached_input_per_mtok
      + output / 1e6 * output_per_mtok

reasoning tokens being part of the output tokens, and calls answered from
Cirrus's own cache costing nothing (they are not in the token counts, see
:mod:`cirrus.usage`).  Calls sent through a Batch API cost the same less
``batch_discount`` (a fraction: 0.5 is half price).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.usage import Usage, UsageLedger, role_of

SETTINGS_FILE = "cirrus.toml"
PRICE_KEYS = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "batch_discount", "currency")


class PriceError(ValueError):
    """A malformed ``[prices]`` table; the message names the entry."""


@dataclass(frozen=True)
class Price:
    """What a million tokens of a model cost.  ``cached_input_per_mtok``:
    input tokens the provider served from its prompt cache (default: the
    input price); ``batch_discount``: the share taken off calls sent through
    a Batch API (default: none)."""

    input_per_mtok: float
    output_per_mtok: float
    currency: str = "USD"
    cached_input_per_mtok: float | None = None
    batch_discount: float = 0.0

    @property
    def cached_rate(self) -> float:
        return self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """The contract's formula for tokens sent at the online price."""
        cached = min(cached_input_tokens, input_tokens)
        return ((input_tokens - cached) / 1e6 * self.input_per_mtok + cached / 1e6 * self.cached_rate
                + output_tokens / 1e6 * self.output_per_mtok)

    def usage_cost(self, usage: Usage) -> float:
        """What ``usage`` costs: its online calls at the listed price, its
        batch calls at the price less the discount, Cirrus cache hits free."""
        online = self.cost(usage.input_tokens - usage.batch_input_tokens, usage.output_tokens - usage.batch_output_tokens,
                           usage.cached_input_tokens - usage.batch_cached_input_tokens)
        batch = self.cost(usage.batch_input_tokens, usage.batch_output_tokens, usage.batch_cached_input_tokens)
        return online + batch * (1.0 - self.batch_discount)


def _number(value: Any, name: str, *, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= upper \
            or value == math.inf:
        bound = "between 0 and 1" if upper == 1 else ">= 0"
        raise PriceError(f"{name}: expected a number {bound}, got {value!r}")
    return float(value)


def parse_prices(table: Any, where: str = "prices") -> dict[str, Price]:
    """``{model: Price}`` from a ``[prices]`` table::

        [prices."qwen3-max"]
        input_per_mtok = 1.2          # price of a million input tokens
        output_per_mtok = 6.0
        cached_input_per_mtok = 0.24  # optional, default: input_per_mtok
        batch_discount = 0.5          # optional, default 0 (no batch price)
        currency = "USD"              # optional, default USD

    Entries may also be :class:`Price` objects already.  A malformed entry
    raises :class:`PriceError` naming it.
    """
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise PriceError(f"{where}: expected a table of models")
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        name = f'{where}."{model}"'
        if isinstance(entry, Price):
            prices[str(model)] = entry
            continue
        if not isinstance(entry, dict):
            raise PriceError(f"{name}: expected a table with input_per_mtok and output_per_mtok")
        unknown = sorted(set(entry) - set(PRICE_KEYS))
        if unknown:
            raise PriceError(f"{name}: unknown key(s) {', '.join(unknown)} (known: {', '.join(PRICE_KEYS)})")
        rates = {key: _number(entry.get(key), f"{name}.{key}") for key in ("input_per_mtok", "output_per_mtok")}
        cached = entry.get("cached_input_per_mtok")
        discount = entry.get("batch_discount", 0.0)
        currency = entry.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            raise PriceError(f"{name}.currency: expected a currency name such as \"USD\"")
        prices[str(model)] = Price(
            rates["input_per_mtok"], rates["output_per_mtok"], currency,
            None if cached is None else _number(cached, f"{name}.cached_input_per_mtok"),
            _number(discount, f"{name}.batch_discount", upper=1.0))
    return prices


def load_prices(workspace: Path, config: Path | None = None) -> dict[str, Price]:
    """The ``[prices]`` table of ``config``, else of ``<workspace>/cirrus.toml``,
    else of ``./cirrus.toml`` (the file ``cirrus eval`` reads); ``{}`` when
    there is no file or no table.  A named ``config`` that does not exist, bad
    TOML or a malformed entry raise :class:`PriceError`."""
    candidates = [config] if config else [workspace / SETTINGS_FILE, Path.cwd() / SETTINGS_FILE]
    path = next((p for p in candidates if p is not None and p.is_file()), None)
    if config is not None and path is None:
        raise PriceError(f"settings file {config} does not exist")
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{path}: invalid TOML: {exc}") from exc
    return parse_prices(data.get("prices"), f"{path}: prices")


def run_cost(ledger: UsageLedger, models: Mapping[str, str | None], prices: Mapping[str, Price]) -> dict[str, Any]:
    """``summary.json``'s ``cost``: per role of ``ledger`` its cost in the
    price table's currency, ``total`` and ``currency``.  ``models`` names the
    model of each client (``agent``, ``judge`` or a panel's ``judge[2]``,
    ...).  A role is null when one of its clients' models has no price (a
    partial sum would understate it); ``total`` sums the priced roles (null
    when none is); ``currency`` is null when nothing is priced.  Priced
    clients must share one currency, else :class:`PriceError`."""
    parts: dict[str, list[float]] = {}
    unpriced: set[str] = set()
    currencies: set[str] = set()
    for client, usage in ledger.clients.items():
        role = role_of(client)
        model = models.get(client)
        price = prices.get(model) if model else None
        if price is None:
            unpriced.add(role)
        else:
            currencies.add(price.currency)
            parts.setdefault(role, []).append(price.usage_cost(usage))
    if len(currencies) > 1:
        raise PriceError(f"the run's models are priced in different currencies ({', '.join(sorted(currencies))}): "
                         "give them prices in one currency")
    cost: dict[str, Any] = {role: None if role in unpriced else math.fsum(parts.get(role, ()))
                             for role in ledger.by_role()}
    priced = [value for value in cost.values() if value is not None]
    cost["total"] = math.fsum(priced) if priced else None
    cost["currency"] = currencies.pop() if currencies else None
    return cost
