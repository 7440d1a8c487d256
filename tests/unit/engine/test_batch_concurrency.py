"""score_many / assert_scores(_async) with max_concurrency= (issue 24): rows in flight are
bounded by it, judge slots grow to it when no judge limit is set, a smaller limit the user set
is kept with a JudgeSlotsWarning, and a bad value is a clear error."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from judges import judge_test_settings

from pytest_llmeval import assert_scores, assert_scores_async, score_many
from pytest_llmeval.core.errors import ScorerConfigError
from pytest_llmeval.core.slots import JudgeSlotsWarning
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.testing import OpenAITestServer, delay, text

#: l3score of the reply below: P(yes) / (P(yes) + P(no))
_L3 = math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.5))
YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1))


@pytest.fixture
def batch_ctx(judge_server: OpenAITestServer, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    limit = getattr(request, "param", None)
    ctx = ScoringContext(judge_test_settings(judge_server.base_url, tmp_path, concurrency=limit))
    prev = set_context(ctx)
    judge_server.set_default(delay(0.3, YES))
    yield ctx
    set_context(prev)
    ctx.close()


def _rows(n: int) -> list[dict[str, str]]:
    return [{"input": f"q{i}", "output": f"a{i}", "expected": f"a{i}"} for i in range(n)]


def test_without_max_concurrency_judge_calls_stay_at_the_automatic_floor(
    batch_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    result = score_many("l3score", _rows(12))
    assert len(result.scores) == 12 and judge_server.max_in_flight == 8
    waits = batch_ctx.ledger.slots.waits()
    assert waits is not None and waits.waited == 4 and not waits.explicit


def test_max_concurrency_grows_the_judge_slots_when_no_limit_is_set(
    batch_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    result = score_many("l3score", _rows(24), max_concurrency=12)
    assert [s.value for s in result.scores] == pytest.approx([_L3] * 24, rel=1e-9)
    assert len(judge_server.requests) == 24
    assert judge_server.max_in_flight == 12  # rows bounded by it, slots grown to it
    assert batch_ctx.ledger.slots.waits() is None  # nothing queued for a slot


@pytest.mark.parametrize("batch_ctx", [3], indirect=True)
def test_a_smaller_limit_the_user_set_is_kept_with_a_warning(
    batch_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    with pytest.warns(JudgeSlotsWarning, match=r"score_many\(max_concurrency=6\).* limited to 3"):
        assert_scores("l3score", _rows(6), min=0.5, max_concurrency=6)
    assert judge_server.max_in_flight == 3
    waits = batch_ctx.ledger.slots.waits()
    assert waits is not None and (waits.limit, waits.waited, waits.explicit) == (3, 3, True)


def test_the_async_form_bounds_rows_in_flight(
    batch_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    result = asyncio.run(assert_scores_async("l3score", _rows(10), min=0.5, max_concurrency=2))
    assert len(result.scores) == 10 and judge_server.max_in_flight == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", True])
def test_a_bad_max_concurrency_is_a_config_error_naming_it(
    batch_ctx: ScoringContext, judge_server: OpenAITestServer, bad: object
) -> None:
    with pytest.raises(ScorerConfigError, match=r"l3score.*max_concurrency.*whole number >= 1"):
        score_many("l3score", _rows(2), max_concurrency=bad)  # type: ignore[arg-type]
    assert judge_server.requests == []


@pytest.mark.parametrize(
    ("scorer", "rows"),
    [
        ("exact_match", [{"output": "a", "expected": "a"}, {"output": "a", "expected": "b"}]),
        (
            "levenshtein",
            [{"output": "kitten", "expected": "sitting"}, {"output": "", "expected": "x"}],
        ),
        ("numeric_diff", [{"output": 1, "expected": 100}, {"output": 3, "expected": 3}]),
        ("json_diff", [{"output": {"a": 1}, "expected": {"a": 1, "b": 2}}]),
    ],
)
def test_deterministic_rows_scored_without_the_loop_equal_the_loops_scores(
    tmp_path: Path, scorer: str, rows: list[dict[str, object]]
) -> None:
    """score_many scores self-contained scorers one row after the other (no task per row);
    assert_scores_async still goes through the loop: the two agree, value for value, warm and
    cold, and a bad row is named by its index either way."""
    from pytest_llmeval.core.settings import Settings

    ctx = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
    prev = set_context(ctx)
    try:
        sync = score_many(scorer, rows)  # cold: computed (and stored by scorers that store)
        looped = asyncio.run(assert_scores_async(scorer, rows))
        assert [s.value for s in sync.scores] == [s.value for s in looped.scores]
        assert not any(s.cached for s in sync.scores)
        assert sync.instruments == looped.instruments
        warm = score_many(scorer, rows)
        stores = scorer in ("levenshtein", "json_diff")
        assert [s.cached for s in warm.scores] == [s.cached for s in looped.scores]
        assert [s.cached for s in warm.scores] == [stores] * len(rows)
        assert [s.value for s in warm.scores] == [s.value for s in sync.scores]
        with pytest.raises(Exception, match=r"row 1") as sync_error:
            score_many(
                "numeric_diff", [{"output": 1, "expected": 1}, {"output": "x", "expected": 1}]
            )
        with pytest.raises(Exception, match=r"row 1") as loop_error:
            asyncio.run(
                assert_scores_async(
                    "numeric_diff", [{"output": 1, "expected": 1}, {"output": "x", "expected": 1}]
                )
            )
        assert str(sync_error.value) == str(loop_error.value)
    finally:
        set_context(prev)
        ctx.close()
