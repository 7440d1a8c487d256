"""Flip rates and unstable cases of ``judge_samples`` records (issue 20)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_llmeval.analysis.stability import record_stability, scorer_stability
from pytest_llmeval.core.records import ScoreRecord


def rec(case: str, asks: Any, *, min: float | None = 0.5, max: float | None = None) -> ScoreRecord:
    return ScoreRecord(
        file="test_x.py",
        test="test_x",
        case_id=case,
        scorer="factuality",
        index=0,
        score=0.5,
        min=min,
        max=max,
        passed=True,
        cached=False,
        duration_s=0.0,
        rationale=None,
        error=None,
        metadata={"judge_samples": asks, "judge_reduce": "mean"},
    )


def asks(*values: Any) -> list[dict[str, Any]]:
    return [{"value": v} for v in values]


def test_flip_rate_is_the_minority_share_of_the_asks() -> None:
    s = record_stability(rec("a", asks(1.0, 0.0, 1.0, 1.0)))
    assert s is not None and (s.passes, s.fails, s.flip_rate, s.unstable) == (3, 1, 0.25, True)
    steady = record_stability(rec("b", asks(1.0, 1.0, 1.0)))
    assert steady is not None and (steady.flip_rate, steady.unstable) == (0.0, False)


def test_a_lower_is_better_bound_decides_each_ask() -> None:
    s = record_stability(rec("a", asks(0.1, 0.4, 0.2), min=None, max=0.3))
    assert s is not None and (s.passes, s.fails) == (2, 1)


def test_without_a_bound_only_the_scores_tell_instability() -> None:
    s = record_stability(rec("a", asks(0.6, 0.6), min=None))
    assert s is not None and s.flip_rate is None and not s.unstable
    s = record_stability(rec("a", asks(0.6, 0.7), min=None))
    assert s is not None and s.unstable


@pytest.mark.parametrize(
    "bad",
    [
        asks(1.0, float("nan")),
        asks(1.0, "1.0"),
        asks(1.0, True),
        asks(1.0),
        "1,0",
        [1.0, 0.0],
        None,
    ],
)
def test_unreadable_asks_are_counted_apart_never_guessed(bad: Any) -> None:
    s = scorer_stability("factuality", [rec("a", bad), rec("b", asks(1.0, 0.0))])
    assert s.unreadable == 1 and len(s.records) == 1
    assert [u.record.case_id for u in s.unstable] == ["b"]


def test_unstable_records_least_stable_first() -> None:
    s = scorer_stability(
        "factuality",
        [rec("a", asks(1.0, 1.0, 1.0, 0.0)), rec("b", asks(1.0, 0.0)), rec("c", asks(1.0, 1.0))],
    )
    assert [u.record.case_id for u in s.unstable] == ["b", "a"]
    assert s.flip_rate == pytest.approx((0.25 + 0.5 + 0.0) / 3)
    assert s.to_json()["asks"] == 8


def swapped(case: str, swap: Any) -> ScoreRecord:
    return dataclasses.replace(rec(case, None), metadata={"swap": swap})


def test_position_inconsistent_records_are_counted_from_both_answers() -> None:
    ok = {"first": 1.0, "second": 0.0, "second_mirrored": 1.0, "consistent": True}
    bad = {"first": 1.0, "second": 1.0, "second_mirrored": 0.0, "consistent": False}
    lying = {**bad, "consistent": True}  # the stored flag alone cannot hide a disagreement
    s = scorer_stability("battle", [swapped("a", ok), swapped("b", bad), swapped("c", lying)])
    assert s.swapped == 3 and [r.case_id for r in s.inconsistent] == ["b", "c"]
    assert s.records == () and s.to_json()["swapped"] == 3


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "swap",
        {"first": 1.0, "second": 0.0},
        {"first": float("nan"), "second": 0.0, "second_mirrored": 1.0},
        {"first": True, "second": 0.0, "second_mirrored": 1.0},
    ],
)
def test_an_unreadable_swap_entry_is_counted_apart(bad: Any) -> None:
    s = scorer_stability("battle", [swapped("a", bad)])
    assert s.unreadable == 1 and s.swapped == 0
