"""Unit and property tests of pytest_llmeval.scorers.lexical (exact_match, levenshtein,
numeric_diff)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scorer_properties import PLAIN_CTX, assert_in_range_or_input_error

from pytest_llmeval import Score, ScorerConfigError, ScorerInputError, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.scorers.lexical import (
    ExactMatch,
    Levenshtein,
    NumericDiff,
    levenshtein_similarity,
    make_score,
    numeric_similarity,
)

JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def _python_levenshtein(a: str, b: str) -> int:
    """Textbook dynamic programme over Python code points (the oracle for rapidfuzz)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _compute(scorer: Any, inputs: dict[str, Any], ctx: ScoringContext) -> float:
    return float(scorer.compute(inputs, ctx).value)


# -- make_score -----------------------------------------------------------------------------------


def test_make_score_equals_a_constructed_score() -> None:
    built = make_score(0.25, "levenshtein", rationale="why", metadata={"k": 1})
    assert built == Score(value=0.25, scorer="levenshtein", rationale="why", metadata={"k": 1})
    assert make_score(1.0, "x").metadata == {}
    assert make_score(1.0, "x").metadata is not make_score(1.0, "x").metadata


def test_registry_resolves_reference_spellings() -> None:
    assert default_registry.get("Levenshtein") is Levenshtein
    assert default_registry.get("LevenshteinScorer") is Levenshtein
    assert default_registry.get("ExactMatch") is ExactMatch
    assert default_registry.get("NumericDiff") is NumericDiff


# -- levenshtein ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("🙂", "🙃", 1),  # non-BMP: one code point each, not two UTF-16 units
        ("a🙂b", "ab", 1),
        ("𝔘𝔫𝔦", "𝔘𝔫", 1),
        ("e\u0301", "é", 2),  # no Unicode normalisation
        ("", "🙂🙂", 2),
    ],
)
def test_levenshtein_counts_code_points(a: str, b: str, distance: int) -> None:
    assert _python_levenshtein(a, b) == distance
    longest = max(len(a), len(b))
    assert levenshtein_similarity(a, b) == 1 - distance / longest


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_levenshtein_matches_python_code_point_dp(a: str, b: str) -> None:
    longest = max(len(a), len(b))
    want = 1.0 if longest == 0 else 1 - _python_levenshtein(a, b) / longest
    assert levenshtein_similarity(a, b) == want


def test_levenshtein_values(ctx: ScoringContext) -> None:
    assert score("levenshtein", output="hello wrld", expected="hello world").value == 1 - 1 / 11
    assert score("levenshtein", output="", expected="").value == 1.0
    assert score("levenshtein", output=None, expected="None").value == 1.0
    assert score("levenshtein", output=12, expected="12").value == 1.0


def test_levenshtein_needs_expected(ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("levenshtein", output="abc")
    assert (info.value.scorer, info.value.field) == ("levenshtein", "expected")
    with pytest.raises(ScorerInputError) as info:
        Levenshtein().compute({"output": "abc"}, ctx)
    assert info.value.field == "expected"


def test_levenshtein_rejects_unknown_option() -> None:
    with pytest.raises(ScorerConfigError) as info:
        Levenshtein(case_sensitive=False)
    assert info.value.option == "case_sensitive"


# -- exact_match ----------------------------------------------------------------------------------


def test_exact_match_strings_are_exact(ctx: ScoringContext) -> None:
    assert score("exact_match", output="Paris", expected="Paris").value == 1.0
    assert score("exact_match", output="Paris", expected="paris").value == 0.0
    assert score("exact_match", output="Paris ", expected="Paris").value == 0.0


def test_exact_match_case_insensitive_option(ctx: ScoringContext) -> None:
    assert score("exact_match", output="Paris", expected="PARIS", case_sensitive=False).value == 1.0
    assert score("exact_match", output="Paris", expected="Rome", case_sensitive=False).value == 0.0
    assert (
        ExactMatch(case_sensitive=False).compute({"output": ["A"], "expected": '["a"]'}, ctx).value
        == 1.0
    )


def test_exact_match_option_must_be_bool() -> None:
    with pytest.raises(ScorerConfigError) as info:
        ExactMatch(case_sensitive="no")
    assert info.value.option == "case_sensitive"


def test_exact_match_json_values(ctx: ScoringContext) -> None:
    em = ExactMatch()
    assert _compute(em, {"output": {"a": 1, "b": 2}, "expected": {"b": 2, "a": 1}}, ctx) == 1.0
    assert _compute(em, {"output": {"a": 1}, "expected": '{"a": 1}'}, ctx) == 1.0
    assert _compute(em, {"output": [1, 2], "expected": "[1, 2"}, ctx) == 0.0  # not JSON: raw
    assert _compute(em, {"output": {1: "x", "b": 2}, "expected": {1: "x", "b": 2}}, ctx) == 1.0
    assert _compute(em, {"output": (1, 2), "expected": "(1, 2)"}, ctx) == 1.0  # tuple: str()


def test_exact_match_json_errors(ctx: ScoringContext) -> None:
    em = ExactMatch()
    with pytest.raises(ScorerInputError) as info:
        em.compute({"output": {"a": {1, 2}}, "expected": {"a": 1}}, ctx)
    assert (info.value.scorer, info.value.field) == ("exact_match", "output")
    assert "JSON-serialisable" in str(info.value)
    with pytest.raises(ScorerInputError) as info:
        em.compute({"output": [1]}, ctx)
    assert info.value.field == "expected"
    assert "missing" in str(info.value)


def test_exact_match_none_and_numbers(ctx: ScoringContext) -> None:
    em = ExactMatch()
    assert _compute(em, {}, ctx) == 1.0  # None vs None, as str()
    assert _compute(em, {"output": 1, "expected": 1.0}, ctx) == 0.0  # "1" != "1.0"
    assert _compute(em, {"output": True, "expected": "True"}, ctx) == 1.0


# -- numeric_diff ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected", "want"),
    [
        (0, 0, 1.0),
        (105, 100, 1 - 5 / 205),
        (-3, 3, 0.0),
        (True, True, 1.0),
        (Fraction(1, 3), Fraction(2, 3), 1 - (1 / 3) / 1),
        (10**400, 10**400 + 10**399, 1 - 10**399 / (2 * 10**400 + 10**399)),
        (1.7e308, -1.7e308, 0.0),
        (1.7e308, 1.7e308, 1.0),
        (1e308, 1.5e308, 0.8),
        (10**400, 1.5, 1 - float((10**400 - Fraction(3, 2)) / (10**400 + Fraction(3, 2)))),
    ],
)
def test_numeric_diff_values(output: Any, expected: Any, want: float, ctx: ScoringContext) -> None:
    value = score("numeric_diff", output=output, expected=expected).value
    assert value == pytest.approx(want, abs=1e-12)
    assert 0.0 <= value <= 1.0


def test_numeric_similarity_is_symmetric() -> None:
    assert numeric_similarity(3, 7) == numeric_similarity(7, 3) == 1 - 4 / 10


@pytest.mark.parametrize(
    ("output", "expected", "field"),
    [
        ("1", 1, "output"),
        (1, "1", "expected"),
        (math.nan, 1, "output"),
        (1, math.inf, "expected"),
        ([1], 1, "output"),
        (1, None, "expected"),
    ],
)
def test_numeric_diff_errors(output: Any, expected: Any, field: str, ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("numeric_diff", output=output, expected=expected)
    assert (info.value.scorer, info.value.field) == ("numeric_diff", field)


# -- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["exact_match", "levenshtein", "numeric_diff"])
@settings(max_examples=150, deadline=None)
@given(output=JSON_LIKE, expected=JSON_LIKE)
def test_any_json_like_input_scores_in_range_or_is_an_input_error(
    name: str, output: Any, expected: Any
) -> None:
    assert_in_range_or_input_error(name, output, expected)


JSON_CONTAINERS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.5, 1.0])
    | st.text("aAbÉé", max_size=2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text("abcAB", max_size=2), children, max_size=3)
    ),
    max_leaves=8,
).filter(lambda v: isinstance(v, (dict, list)))


@settings(max_examples=300, deadline=None)
@given(
    output=JSON_CONTAINERS,
    expected=JSON_CONTAINERS | st.text('{}[]"a:1, ', max_size=8),
    reorder=st.booleans(),
    as_text=st.booleans(),
    case_sensitive=st.booleans(),
)
def test_exact_match_json_equals_sorted_key_json_text(
    output: Any, expected: Any, reorder: bool, as_text: bool, case_sensitive: bool
) -> None:
    """The encode-unsorted-first shortcut gives the same answer as comparing sorted JSON text."""
    import json

    def reversed_keys(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reversed_keys(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reversed_keys(v) for v in value]
        return value

    if reorder:
        expected = reversed_keys(output)
    if as_text and not isinstance(expected, str):
        expected = json.dumps(expected, separators=(",", ":"))

    def canonical(value: Any) -> str:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value
        return json.dumps(value, sort_keys=True)

    a, b = canonical(output), canonical(expected)
    if not case_sensitive:
        a, b = a.lower(), b.lower()
    scorer = ExactMatch(case_sensitive=case_sensitive)
    value = scorer.compute({"output": output, "expected": expected}, PLAIN_CTX).value
    assert value == (1.0 if a == b else 0.0)
