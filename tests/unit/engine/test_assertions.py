from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_llmeval
from pytest_llmeval import (
    CacheMissError,
    LLMEvalAssertionError,
    Score,
    Scorer,
    ScorerConfigError,
    ScorerInputError,
    assert_score,
    assert_scores,
    score,
    score_many,
)
from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, set_context

CALLS: list[dict[str, Any]] = []


class Ratio(Scorer):
    """Counts its calls, so tests see whether the cache answered."""

    name = "ratio_test"
    required_inputs = ("output", "expected")
    optional_inputs = ("note",)
    default_options = {"scale": 1.0}

    def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
        CALLS.append(dict(inputs))
        value = min(1.0, len(inputs["output"]) / max(1, len(inputs["expected"])))
        return Score(value=value * self.options["scale"], rationale="ratio of lengths")


class LowerBetter(Scorer):
    name = "lower_test"
    higher_is_better = False

    def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
        return Score(value=0.8)


pytest_llmeval.register(Ratio, replace=True)
pytest_llmeval.register(LowerBetter, replace=True)


@pytest.fixture(autouse=True)
def no_outer_recorder():  # type: ignore[no-untyped-def]
    """These tests fail assertions on purpose; keep their records out of this run's summary."""
    token = current_recorder.set(None)
    yield
    current_recorder.reset(token)


@pytest.fixture
def cached_ctx(tmp_path: Path):  # type: ignore[no-untyped-def]
    CALLS.clear()
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


def test_inputs_and_options_are_split_by_declared_fields(ctx: ScoringContext) -> None:
    CALLS.clear()
    s = score("ratio_test", output="ab", expected="abcd", note="n", scale=0.5)
    assert s.value == 0.25 and s.scorer == "ratio_test"
    assert CALLS == [{"output": "ab", "expected": "abcd", "note": "n"}]


def test_unknown_option_and_missing_input(ctx: ScoringContext) -> None:
    with pytest.raises(ScorerConfigError, match="'bogus' is not an option"):
        score("ratio_test", output="a", expected="b", bogus=1)
    with pytest.raises(ScorerInputError, match="input 'expected' is required"):
        score("ratio_test", output="a")


def test_assert_score_failure_reads_like_pytest(ctx: ScoringContext) -> None:
    with pytest.raises(LLMEvalAssertionError) as info:
        assert_score("ratio_test", output="a", expected="abcd", min=0.5)
    text = str(info.value)
    assert "ratio_test score 0.25 is not >= 0.5 (higher is better)" in text
    assert "rationale: ratio of lengths" in text


def test_threshold_follows_direction(ctx: ScoringContext) -> None:
    assert assert_score("lower_test", output="x", threshold=0.9).passed is True
    with pytest.raises(AssertionError, match=r"is not <= 0.5 \(lower is better\)"):
        assert_score("lower_test", output="x", threshold=0.5)
    with pytest.raises(ScorerConfigError, match="threshold"):
        assert_score("lower_test", output="x", threshold=0.5, min=0.1)


def test_no_bound_records_but_does_not_assert(ctx: ScoringContext) -> None:
    s = assert_score("ratio_test", output="a", expected="abcd")
    assert s.passed is None and s.value == 0.25


def test_each_call_is_recorded_with_index(ctx: ScoringContext) -> None:
    rec = TestRecorder("f.py", "test_x", "c1", "d.jsonl:1")
    token = current_recorder.set(rec)
    try:
        assert_score("ratio_test", output="ab", expected="ab", min=1)
        assert_score("ratio_test", output="a", expected="ab", max=0.6)
        with pytest.raises(ScorerInputError, match=r"^d\.jsonl:1: scorer 'ratio_test'"):
            assert_score("ratio_test", output="a")
    finally:
        current_recorder.reset(token)
    assert [(r.index, r.score, r.passed) for r in rec.records] == [
        (0, 1.0, True),
        (1, 0.5, True),
        (2, None, None),
    ]
    assert rec.records[2].error is not None and "ScorerInputError" in rec.records[2].error


def test_cache_hit_skips_compute_and_refresh_recomputes(cached_ctx: ScoringContext) -> None:
    first = score("ratio_test", output="ab", expected="abcd")
    second = score("ratio_test", output="ab", expected="abcd")
    assert (first.cached, second.cached) == (False, True)
    assert second.value == first.value and second.rationale == "ratio of lengths"
    assert len(CALLS) == 1
    # a different option is a different key
    score("ratio_test", output="ab", expected="abcd", scale=0.5)
    assert len(CALLS) == 2


class JudgedTest(Scorer):
    """Stands for a judge scorer (no call is made: replay must refuse before computing)."""

    name = "judged_test"
    uses_judge = True

    def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
        CALLS.append(dict(inputs))
        return Score(value=1.0)


def test_replay_miss_of_a_judge_scorer_is_an_error_that_says_how_to_record(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="replay"))
    prev = set_context(c)
    try:
        with pytest.raises(CacheMissError, match="--llm-eval-cache=use"):
            score(JudgedTest, output="zz")
        assert CALLS == []
        # A scorer that needs no judge computes (and replay writes nothing).
        assert score("ratio_test", output="zz", expected="zz").value == 1.0
        assert score("ratio_test", output="zz", expected="zz").cached is False
        assert len(CALLS) == 2
    finally:
        set_context(prev)
        c.close()


def test_errors_are_never_cached(cached_ctx: ScoringContext) -> None:
    class Flaky(Scorer):
        name = "flaky_test"
        fails = True

        def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
            if Flaky.fails:
                raise pytest_llmeval.JudgeError("boom", scorer="flaky_test")
            return Score(value=1.0)

    with pytest.raises(pytest_llmeval.JudgeError):
        score(Flaky, output="x")
    Flaky.fails = False
    assert score(Flaky, output="x").cached is False


def test_out_of_range_score_is_reported_as_a_scorer_bug(ctx: ScoringContext) -> None:
    with pytest.raises(pytest_llmeval.LLMEvalError, match="outside its declared range"):
        score("ratio_test", output="abcd", expected="a", scale=3.0)


def test_score_many_keeps_row_order_and_assert_scores_aggregates(ctx: ScoringContext) -> None:
    rows = [{"output": "a" * i, "expected": "aaaa"} for i in (4, 1, 2)]
    res = score_many("ratio_test", rows)
    assert res.values == [1.0, 0.25, 0.5]
    assert res.mean == pytest.approx(0.5833333333)
    assert res.pass_rate(min=0.5) == pytest.approx(2 / 3)
    assert_scores("ratio_test", rows, min_mean=0.5)
    with pytest.raises(AssertionError, match=r"pass rate 0.667 < min_pass_rate 0.9"):
        assert_scores("ratio_test", rows, min=0.5, min_pass_rate=0.9)
    with pytest.raises(ScorerInputError, match=r"^row 1: scorer 'ratio_test'"):
        score_many("ratio_test", [{"output": "a", "expected": "a"}, {"output": "a"}])


class Judged(Scorer):
    """Reports judge usage like a judge scorer does."""

    name = "judged_test"

    def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
        return Score(value=1.0, usage=pytest_llmeval.Usage(100, 20, 1, 0.002))


def test_cached_result_spends_no_tokens_in_its_record(cached_ctx: ScoringContext) -> None:
    rec = TestRecorder("f.py", "test_x", None, None)
    token = current_recorder.set(rec)
    try:
        assert_score(Judged, output="x")
        again = assert_score(Judged, output="x")
    finally:
        current_recorder.reset(token)
    assert again.cached and again.usage == pytest_llmeval.Usage(100, 20, 1, 0.002)
    first, second = rec.records
    assert (first.judge_calls, first.prompt_tokens, first.cost_usd) == (1, 100, 0.002)
    assert (second.judge_calls, second.prompt_tokens, second.cost_usd) == (0, 0, None)
    assert second.cached is True


@pytest.mark.parametrize(
    ("bounds", "option", "problem"),
    [
        ({"min": float("nan")}, "min", "is nan"),
        ({"max": float("inf")}, "max", "is inf"),
        ({"min": "0.5"}, "min", "is str '0.5', not a number"),
        ({"threshold": True}, "threshold", "is bool True, not a number"),
        ({"min": 0.9, "max": 0.1}, "min", "(0.9) is above max (0.1): no score can pass"),
        ({"min": 1.5}, "min", "is 1.5, above the highest score 1: it can never pass"),
        ({"max": -0.1}, "max", "is -0.1, below the lowest score 0: it can never pass"),
    ],
)
def test_bad_bounds_are_config_errors_before_any_scoring(
    ctx: ScoringContext, bounds: dict[str, Any], option: str, problem: str
) -> None:
    import json

    CALLS.clear()
    rec = TestRecorder("f.py", "test_x", None, None)
    token = current_recorder.set(rec)
    try:
        with pytest.raises(ScorerConfigError) as info:
            assert_score("ratio_test", output="ab", expected="ab", **bounds)
    finally:
        current_recorder.reset(token)
    assert str(info.value).startswith(f"scorer 'ratio_test': option '{option}' {problem}")
    if "never pass" not in problem:
        assert CALLS == []  # rejected before the scorer ran
    [record] = rec.records
    assert record.error is not None and "ScorerConfigError" in record.error
    json.dumps(record.to_json(), allow_nan=False)  # the record stays valid JSON


def test_bounds_at_the_edges_of_the_range_are_fine(ctx: ScoringContext) -> None:
    assert assert_score("ratio_test", output="ab", expected="ab", min=1).passed is True
    assert assert_score("ratio_test", output="", expected="ab", min=0, max=0).passed is True
    with pytest.raises(ScorerConfigError, match=r"option 'threshold' is -0.5, below the lowest"):
        assert_score("lower_test", output="x", threshold=-0.5)
    with pytest.raises(ScorerConfigError, match=r"scores lie in \[0, 1\] \(lower is better\)"):
        assert_score("lower_test", output="x", threshold=-0.5)


def test_assert_scores_checks_its_bounds_and_points_threshold_to_min(
    ctx: ScoringContext,
) -> None:
    rows = [{"output": "ab", "expected": "ab"}]
    with pytest.raises(
        ScorerConfigError,
        match=r"'threshold' is not taken by assert_scores\. "
        r"Give the per-row bound as min=",
    ):
        assert_scores("ratio_test", rows, threshold=0.5)
    with pytest.raises(ScorerConfigError, match=r"'min_pass_rate' is 75, not a fraction.*0\.75"):
        assert_scores("ratio_test", rows, min=0.5, min_pass_rate=75)
    with pytest.raises(ScorerConfigError, match=r"'min_mean' is 2, above the highest score 1"):
        assert_scores("ratio_test", rows, min_mean=2)
    with pytest.raises(ScorerConfigError, match=r"'max' is nan"):
        assert_scores("ratio_test", rows, max=float("nan"))
