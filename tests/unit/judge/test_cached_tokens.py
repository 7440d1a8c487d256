"""Cached prompt tokens (``usage.prompt_tokens_details.cached_tokens``): counted in the ledger,
priced at the cached-input rate, carried to records, aggregates, the summary and the JSON report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from judges import judge_test_settings

from pytest_llmeval.core.records import ScoreRecord, aggregate
from pytest_llmeval.core.scores import Usage
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge.prices import cost_usd, price_of
from pytest_llmeval.testing import OpenAITestServer, text


def test_builtin_cached_rates() -> None:
    assert price_of("gpt-4o")[2] == 1.25  # type: ignore[index]
    assert price_of("gpt-4o-mini-2024-07-18")[2] == 0.075  # type: ignore[index]
    assert price_of("gpt-5")[2] == 0.125  # type: ignore[index]
    # 1M prompt tokens, half cached, on gpt-4o: 0.5 * 2.50 + 0.5 * 1.25
    assert cost_usd(("gpt-4o",), 1_000_000, 0, cached_prompt_tokens=500_000) == pytest.approx(1.875)
    # without a cached rate the cached tokens cost the input price
    assert cost_usd(("m",), 1_000_000, 0, {"m": (2.0, 0.0)}, cached_prompt_tokens=500_000) == (
        pytest.approx(2.0)
    )
    # more cached than prompt tokens cannot be true: no price
    assert cost_usd(("gpt-4o",), 10, 0, cached_prompt_tokens=11) is None


def test_usage_adds_and_round_trips_cached_tokens() -> None:
    total = Usage(10, 1, 1, None, (), 4) + Usage(20, 2, 1, None, (), 5)
    assert total.cached_prompt_tokens == 9
    assert Usage.from_json(total.to_json()) == total
    # an old stored usage (no such field) reads as none cached
    old = Usage.from_json({"prompt_tokens": 5, "completion_tokens": 1, "calls": 1})
    assert old is not None and old.cached_prompt_tokens == 0


def _priced_ctx(server: OpenAITestServer, tmp_path: Path) -> ScoringContext:
    """A context on the test server with $1000 per M input, $10 per M output and $100 per M
    cached input for "test-judge"."""
    settings = judge_test_settings(server.base_url, tmp_path)
    return ScoringContext(
        dataclasses.replace(settings, prices={"test-judge": (1000.0, 10.0, 100.0)})
    )


def test_client_reads_and_prices_cached_tokens(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    ctx = _priced_ctx(judge_server, tmp_path)
    try:
        judge_server.enqueue(text("ok", usage=(3000, 100), cached_tokens=1000))
        client = ctx.judge()
        result = asyncio.run(client.chat([{"role": "user", "content": "hi"}]))
        # 2000 * 1000 + 1000 * 100 + 100 * 10 = 2_101_000 micro-dollars
        assert result.usage == Usage(3000, 100, 1, pytest.approx(2.101), ("test-judge",), 1000)
        assert ctx.ledger.total.cached_prompt_tokens == 1000
    finally:
        ctx.close()


def test_impossible_cached_count_is_not_believed(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    ctx = _priced_ctx(judge_server, tmp_path)
    try:
        judge_server.enqueue(text("ok", usage=(10, 1), cached_tokens=50))
        with pytest.warns(RuntimeWarning, match="cannot be true"):
            result = asyncio.run(ctx.judge().chat([{"role": "user", "content": "hi"}]))
        assert result.usage.cost_usd is None and result.usage.cached_prompt_tokens == 0
    finally:
        ctx.close()


def test_aggregate_and_summary_cell() -> None:
    from pytest_llmeval.report.terminal import format_table

    base = dict(file="f", test="t", case_id=None, scorer="s", score=1.0, min=None, max=None)
    recs = [
        ScoreRecord(
            **base,  # type: ignore[arg-type]
            index=i,
            passed=True,
            cached=False,
            duration_s=0.0,
            prompt_tokens=3000,
            completion_tokens=1,
            judge_calls=1,
            cached_prompt_tokens=1000,
        )
        for i in range(2)
    ]
    agg = aggregate(recs)["s"]
    assert agg.cached_prompt_tokens == 2000
    assert agg.to_json()["cached_prompt_tokens"] == 2000
    assert "6002 (2000 cached)" in format_table([agg])[1]
    back = ScoreRecord.from_json(json.loads(json.dumps(recs[0].to_json())))
    assert back.cached_prompt_tokens == 1000
