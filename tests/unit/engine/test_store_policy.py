"""The per-scorer store policy (issue 24): built-in scorers cheaper than a lookup store nothing,
so a warm cache never makes them slower, and nothing stored (planted, stale, tampered) can
change their verdict; every other scorer stores as before, and the policy is no part of a
scorer's identity."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import Score, Scorer, assert_score, score, score_many
from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.scorers.lexical import ExactMatch, NumericDiff
from pytest_llmeval.stores.cache_protocol import input_key


@pytest.fixture(params=["use", "refresh", "replay"])
def ctx(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ScoringContext]:
    # replay needs a store that exists: record one entry first
    if request.param == "replay":
        warm = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
        prev = set_context(warm)
        score("levenshtein", output="x", expected="y")
        set_context(prev)
        warm.close()
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode=request.param))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


def _plant(ctx: ScoringContext, scorer: Scorer, inputs: Mapping[str, Any], value: float) -> None:
    """Store ``value`` under the key ``scorer`` would use for ``inputs`` if it stored."""
    store = ctx.result_cache()
    assert store is not None
    key = input_key(scorer.identity_json(ctx), scorer.key_inputs(inputs))
    store.put(key, scorer.name, {"value": value})


@pytest.mark.parametrize(
    ("name", "output", "expected", "true_value"),
    [("exact_match", "Paris", "Rome", 0.0), ("numeric_diff", 1, 100, 2 / 101)],
)
def test_a_planted_value_never_reaches_a_scorer_that_stores_nothing(
    ctx: ScoringContext, name: str, output: object, expected: object, true_value: float
) -> None:
    inst = {"exact_match": ExactMatch, "numeric_diff": NumericDiff}[name]()
    assert not inst.stores_results()
    if ctx.settings.cache_mode == "use":
        _plant(ctx, inst, {"output": output, "expected": expected}, 1.0)  # a wrong pass
    for result in (
        score(name, output=output, expected=expected),
        score(name, output=output, expected=expected, input="ignored context"),
        score_many(name, [{"output": output, "expected": expected}]).scores[0],
    ):
        assert result.value == pytest.approx(true_value, abs=1e-9)
        assert result.cached is False
    recorder = TestRecorder("t.py", "test_x", None, None)
    token = current_recorder.set(recorder)
    try:
        with pytest.raises(AssertionError):
            assert_score(name, output=output, expected=expected, min=1)
    finally:
        current_recorder.reset(token)
    (rec,) = recorder.records
    assert rec.passed is False and rec.cached is False
    assert rec.score == pytest.approx(true_value, abs=1e-12)


def test_scorers_that_store_still_read_their_stored_values(tmp_path: Path) -> None:
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
    prev = set_context(c)
    try:
        first = score("levenshtein", output="kitten", expected="sitting")
        again = score("levenshtein", output="kitten", expected="sitting")
        assert (first.cached, again.cached, again.value) == (False, True, first.value)
        assert score("exact_match", output="a", expected="a").value == 1.0
        store = c.result_cache()
        assert store is not None
        # exact_match put nothing in the store: only levenshtein's one entry is there
        assert len(store) == 1  # type: ignore[arg-type]
    finally:
        set_context(prev)
        c.close()


def test_user_scorers_and_subclasses_store_by_default() -> None:
    class Mine(Scorer):
        name = "mine_store_policy"

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return Score(1.0)

    class StrictMatch(ExactMatch):
        name = "strict_match_store_policy"

    assert Mine().stores_results() and StrictMatch().stores_results()
    assert not ExactMatch().stores_results() and not NumericDiff().stores_results()


def test_the_policy_is_not_part_of_the_identity(tmp_path: Path) -> None:
    """exact_match's instrument is the one a report saved before the policy names (the compat
    report of tests/data), so a baseline from before compares as the same instrument."""
    import json

    from paths import DATA

    saved = json.loads((DATA / "compat" / "report.json").read_text("utf-8"))["instruments"]
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="off"))
    try:
        inst = ExactMatch().instrument(c)
    finally:
        c.close()
    assert saved[inst.digest]["identity"] == inst.identity
    assert inst.digest == "6383926f07440c1f"
