"""The judge price table: lookups, dated snapshots, overrides, unknown models."""

from __future__ import annotations

import pytest

from pytest_llmeval.judge.prices import DEFAULT_PRICES, cost_usd, price_of


def test_known_model() -> None:
    # (input, output, cached input)
    assert price_of("gpt-4o-mini") == (0.15, 0.60, 0.075)
    assert cost_usd(("gpt-4o-mini",), 1_000_000, 1_000_000) == pytest.approx(0.75)


def test_dated_snapshot_falls_back_to_the_base_model() -> None:
    assert price_of("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_of("gpt-4-0613") == (30.00, 60.00, 30.00)  # no cached rate: the input rate
    # Not a snapshot: a different model that merely shares a prefix.
    assert price_of("gpt-4o-audio-preview") is None


def test_unknown_model_costs_none() -> None:
    assert price_of("local") is None
    assert cost_usd(("local", None), 10, 10) is None


def test_overrides_win_and_extend() -> None:
    over = {"gpt-4o": (1.0, 1.0), "local": (0.0, 0.0)}
    assert price_of("gpt-4o", over) == (1.0, 1.0, 1.0)
    assert price_of("gpt-4o-2024-08-06", over) == (1.0, 1.0, 1.0)
    assert cost_usd(("local",), 500, 500, over) == 0.0


def test_first_priced_model_is_used() -> None:
    # The requested alias has no price; the model the reply names does.
    assert cost_usd(("my-alias", "gpt-4o"), 1_000_000, 0) == pytest.approx(2.5)
