"""Usage per role and its cost: the contract's formula, computed by hand."""

from __future__ import annotations

import asyncio

import pytest

from cirrus.pricing import Price, PriceError, load_prices, parse_prices, run_cost
from cirrus.usage import Usage, UsageLedger, call_usage, record, recording


def test_call_usage_bounds_and_cache_hits() -> None:
    usage = call_usage(1000, 200, cached_input_tokens=1500, reasoning_tokens=50)
    # cached tokens above the input are read as all cached
    assert (usage.calls, usage.input_tokens, usage.cached_input_tokens, usage.output_tokens,
            usage.reasoning_tokens) == (1, 1000, 1000, 200, 50)
    hit = call_usage(1000, 200, from_cirrus_cache=True)
    assert (hit.calls, hit.cirrus_cache_hits, hit.input_tokens, hit.output_tokens) == (0, 1, 0, 0)
    missing = call_usage(None, None)
    assert (missing.calls, missing.input_tokens, missing.output_tokens) == (1, 0, 0)


def test_price_cost_follows_the_contract_formula() -> None:
    price = Price(2.0, 8.0, "USD", cached_input_per_mtok=0.5)
    # (1_000_000 - 400_000) / 1e6 * 2.0 + 400_000 / 1e6 * 0.5 + 250_000 / 1e6 * 8.0 = 1.2 + 0.2 + 2.0 = 3.4
    assert price.cost(1_000_000, 250_000, 400_000) == pytest.approx(3.4)
    # no cached price: cached tokens cost the input price: 1e6 / 1e6 * 2.0 + 0 = 2.0
    assert Price(2.0, 8.0).cost(1_000_000, 0, 400_000) == pytest.approx(2.0)


def test_batch_calls_get_the_discount() -> None:
    price = Price(2.0, 8.0, batch_discount=0.5)
    usage = Usage()
    usage.add(call_usage(500_000, 100_000))               # online: 0.5 * 2 + 0.1 * 8 = 1.8
    usage.add(call_usage(500_000, 100_000, batch=True))   # batch: 1.8 * (1 - 0.5) = 0.9
    assert price.usage_cost(usage) == pytest.approx(2.7)


def test_ledger_records_in_its_context_only() -> None:
    first, second = UsageLedger(), UsageLedger()

    async def attempt(ledger: UsageLedger, tokens: int) -> None:
        with recording(ledger):
            await asyncio.sleep(0)
            record("agent", call_usage(tokens, 10))
            record("judge[2]", call_usage(tokens, 1))

    async def both() -> None:
        await asyncio.gather(attempt(first, 100), attempt(second, 7))

    asyncio.run(both())
    record("agent", call_usage(5, 5))  # no ledger open: not recorded anywhere
    assert first.to_dict()["agent"]["input_tokens"] == 100
    assert second.to_dict()["agent"]["input_tokens"] == 7
    assert list(second.roles_dict()) == ["agent", "judge"]  # a panel member is the judge


def test_ledger_round_trips_and_sums_rows() -> None:
    ledger = UsageLedger()
    ledger.add("agent", call_usage(10, 2, cached_input_tokens=4))
    ledger.add("judge", call_usage(3, 1))
    rows = [ledger.to_dict(), None, {"agent": {"calls": 1, "input_tokens": 5, "bogus": 9, "output_tokens": True}}]
    total = UsageLedger.total_of(rows)
    # agent: inputs 10 + 5, outputs 2 + 0 (a boolean is no count), calls 1 + 1
    assert total.roles_dict()["agent"]["input_tokens"] == 15
    assert total.roles_dict()["agent"]["output_tokens"] == 2
    assert total.roles_dict()["agent"]["calls"] == 2


def test_run_cost_per_role_total_and_unpriced_roles() -> None:
    ledger = UsageLedger()
    ledger.add("agent", call_usage(2_000_000, 500_000, cached_input_tokens=1_000_000))
    ledger.add("judge[1]", call_usage(1_000_000, 100_000))
    ledger.add("judge[2]", call_usage(1_000_000, 100_000))
    ledger.add("fluency", call_usage(1_000_000, 0))
    prices = {"big": Price(1.0, 4.0, cached_input_per_mtok=0.25), "small": Price(0.5, 1.0)}
    models = {"agent": "big", "judge[1]": "small", "judge[2]": "small", "fluency": "unknown"}
    cost = run_cost(ledger, models, prices)
    # agent: 1.0 * 1.0 + 1.0 * 0.25 + 0.5 * 4.0 = 3.25; judge: 2 * (1.0 * 0.5 + 0.1 * 1.0) = 1.2
    assert cost["agent"] == pytest.approx(3.25)
    assert cost["judge"] == pytest.approx(1.2)
    assert cost["fluency"] is None
    assert cost["total"] == pytest.approx(4.45)
    assert cost["currency"] == "USD"
    # one panel member unpriced: the judge's cost is unknown, not understated
    cost = run_cost(ledger, {**models, "judge[2]": "unknown"}, prices)
    assert cost["judge"] is None and cost["total"] == pytest.approx(3.25)
    assert run_cost(ledger, {}, prices)["total"] is None


def test_mixed_currencies_are_refused() -> None:
    ledger = UsageLedger()
    ledger.add("agent", call_usage(1, 1))
    ledger.add("judge", call_usage(1, 1))
    with pytest.raises(PriceError, match="different currencies"):
        run_cost(ledger, {"agent": "a", "judge": "b"}, {"a": Price(1, 1, "USD"), "b": Price(1, 1, "CNY")})


def test_parse_prices_new_keys_and_errors(tmp_path) -> None:
    prices = parse_prices({"m": {"input_per_mtok": 1, "output_per_mtok": 2, "cached_input_per_mtok": 0.1,
                                 "batch_discount": 0.5, "currency": "CNY"}})
    assert prices["m"] == Price(1.0, 2.0, "CNY", 0.1, 0.5)
    with pytest.raises(PriceError, match="batch_discount: expected a number between 0 and 1"):
        parse_prices({"m": {"input_per_mtok": 1, "output_per_mtok": 2, "batch_discount": 1.5}})
    with pytest.raises(PriceError, match="unknown key"):
        parse_prices({"m": {"input_per_mtok": 1, "output_per_mtok": 2, "cache": 1}})
    (tmp_path / "cirrus.toml").write_text('[prices."x"]\ninput_per_mtok = 3\noutput_per_mtok = 4\n')
    assert load_prices(tmp_path) == {"x": Price(3.0, 4.0)}
