"""Shared check for the property tests of the deterministic scorers (one per scorer module)."""

from __future__ import annotations

from typing import Any

from pytest_llmeval import ScorerInputError
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry

#: Deterministic scorers ignore their context; property tests share this one (no fixture, since
#: hypothesis runs many examples per test function).
PLAIN_CTX = ScoringContext(Settings(cache_mode="off"))


def assert_in_range_or_input_error(
    name: str, output: Any, expected: Any, *, slack: float = 0.0
) -> None:
    """Scoring (output, expected) gives a float within the scorer's declared range (plus
    ``slack``), or raises the plugin's input error naming this scorer and one of the fields."""
    scorer = default_registry.get(name)()
    inputs = {k: v for k, v in (("output", output), ("expected", expected)) if v is not None}
    try:
        scorer.check_inputs(inputs)
        value = scorer.compute(inputs, PLAIN_CTX).value
    except ScorerInputError as exc:
        assert exc.scorer == name
        assert exc.field in ("output", "expected")
        return
    assert isinstance(value, float)
    lo, hi = scorer.score_range
    assert lo <= value <= hi + slack
