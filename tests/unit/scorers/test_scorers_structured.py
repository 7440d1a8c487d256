"""Unit and property tests of pytest_llmeval.scorers.structured (json_diff, valid_json,
list_contains)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scorer_properties import PLAIN_CTX, assert_in_range_or_input_error

from pytest_llmeval import Score, Scorer, ScorerConfigError, ScorerInputError, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.scorers.lexical import ExactMatch, levenshtein_similarity
from pytest_llmeval.scorers.structured import JSONDiff, ListContains, ValidJSON

JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


class Halves(Scorer):
    """A custom sub-scorer: 0.5 for every pair."""

    name = "halves_for_tests"
    required_inputs = ("output",)
    optional_inputs = ("expected",)

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=0.5, scorer=self.name)


# -- json_diff ------------------------------------------------------------------------------------


def test_json_diff_nested_mean(ctx: ScoringContext) -> None:
    out = {"name": "John Smith", "age": 30, "tags": ["a", "b"]}
    exp = {"name": "John A. Smith", "age": 31, "tags": ["a", "c"]}
    want = (levenshtein_similarity("John Smith", "John A. Smith") + (1 - 1 / 61) + 0.5) / 3
    assert score("json_diff", output=out, expected=exp).value == pytest.approx(want, abs=1e-12)


def test_json_diff_does_not_depend_on_key_order(ctx: ScoringContext) -> None:
    a = {"x": "abc", "y": 0.1, "z": [1, 2], "w": None}
    b = {"w": "q", "z": [1], "y": 0.3, "x": "abd"}
    first = score("json_diff", output=a, expected=b).value
    second = score("json_diff", output=dict(reversed(a.items())), expected=b).value
    assert first == second


def test_json_diff_parses_json_text_unless_preserve_strings(ctx: ScoringContext) -> None:
    assert score("json_diff", output='{"a": [1, 2]}', expected={"a": [1, 2]}).value == 1.0
    preserved = score("json_diff", output='{"a":1}', expected='{"a": 1}', preserve_strings=True)
    assert preserved.value == levenshtein_similarity('{"a":1}', '{"a": 1}')


def test_json_diff_nan_text_stays_text(ctx: ScoringContext) -> None:
    # Strict JSON: '{"a": NaN}' is not parsed, so it is compared as a string.
    value = score("json_diff", output='{"a": NaN}', expected='{"a": NaN}').value
    assert value == 1.0


def test_json_diff_custom_sub_scorers(ctx: ScoringContext) -> None:
    by_name = JSONDiff(string_scorer="exact_match")
    assert by_name.compute({"output": {"a": "x"}, "expected": {"a": "X"}}, ctx).value == 0.0
    by_class = JSONDiff(number_scorer=Halves)
    assert by_class.compute({"output": [1, 2], "expected": [1, 2]}, ctx).value == 0.5
    by_instance = JSONDiff(string_scorer=ExactMatch(case_sensitive=False))
    assert by_instance.compute({"output": ["A"], "expected": ["a"]}, ctx).value == 1.0


@pytest.mark.parametrize(
    ("option", "value"),
    [("string_scorer", "no_such_scorer"), ("number_scorer", 42), ("preserve_strings", "yes")],
)
def test_json_diff_bad_options(option: str, value: Any) -> None:
    with pytest.raises(ScorerConfigError) as info:
        JSONDiff(**{option: value})
    assert (info.value.scorer, info.value.option) == ("json_diff", option)


@pytest.mark.parametrize(
    ("output", "expected", "field"),
    [
        ({"a": math.nan}, {"a": 1}, "output"),
        ([1.0], [math.inf], "expected"),
        ({"a": {1, 2}}, [1], "output"),
    ],
)
def test_json_diff_non_json_values_are_input_errors(
    output: Any, expected: Any, field: str, ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("json_diff", output=output, expected=expected)
    assert (info.value.scorer, info.value.field) == ("json_diff", field)


def test_json_diff_too_deep_is_an_input_error(ctx: ScoringContext) -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ScorerInputError) as info:
        score("json_diff", output=deep, expected=deep)
    assert "nested too deeply" in str(info.value)


def test_json_diff_missing_values_are_null(ctx: ScoringContext) -> None:
    assert score("json_diff", output=None).value == 1.0
    assert score("json_diff", output="x").value == 0.0


# -- valid_json -----------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_valid_json_without_schema(ctx: ScoringContext) -> None:
    assert score("valid_json", output='{"a": 1}').value == 1.0
    assert score("valid_json", output="[1, 2]").value == 1.0
    assert score("valid_json", output="1").value == 0.0
    assert score("valid_json", output="{'a': 1}").value == 0.0
    assert score("valid_json", output='{"x": NaN}').value == 0.0
    assert score("valid_json", output={"a": 1}).value == 1.0
    assert score("valid_json", output=None).value == 0.0


def test_valid_json_constructor_schema_is_honoured(ctx: ScoringContext) -> None:
    scorer = ValidJSON(schema=SCHEMA)
    assert score(scorer, output='{"a": "x"}').value == 1.0
    assert score(scorer, output='{"b": "x"}').value == 0.0
    assert score("valid_json", output='{"b": 1}', schema=SCHEMA).value == 0.0  # per-call input


def test_valid_json_schema_precedence(ctx: ScoringContext) -> None:
    scorer = ValidJSON(schema={"type": "array"})
    assert score(scorer, output='{"a": "x"}').value == 0.0
    assert score(scorer, output='{"a": "x"}', expected=SCHEMA).value == 1.0  # expected wins
    assert (
        score(scorer, output='{"a": "x"}', expected={"type": "array"}, schema=SCHEMA).value == 1.0
    )


def test_valid_json_invalid_constructor_schema_is_a_config_error() -> None:
    with pytest.raises(ScorerConfigError) as info:
        ValidJSON(schema={"type": 12})
    assert (info.value.scorer, info.value.option) == ("valid_json", "schema")
    assert "not a valid JSON Schema" in str(info.value)


@pytest.mark.parametrize("field", ["schema", "expected"])
def test_valid_json_invalid_call_schema_is_an_input_error(field: str, ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("valid_json", output="{}", **{field: {"type": "nonsense"}})
    assert (info.value.scorer, info.value.field) == ("valid_json", field)


def test_valid_json_unresolvable_ref_is_not_fetched(ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("valid_json", output="{}", schema={"$ref": "http://127.0.0.1:9/none.json"})
    assert info.value.field == "schema"
    assert "could not be applied" in str(info.value)


# -- list_contains --------------------------------------------------------------------------------


def test_list_contains_pairs_in_metadata(ctx: ScoringContext) -> None:
    result = score("list_contains", output=["apple", "banana"], expected=["banana", "appl"])
    assert result.value == pytest.approx((1.0 + 0.8) / 2)
    pairs = sorted(result.metadata["pairs"], key=lambda p: p["output_index"])
    assert pairs == [
        {
            "output": "apple",
            "expected": "appl",
            "score": 0.8,
            "output_index": 0,
            "expected_index": 1,
        },
        {
            "output": "banana",
            "expected": "banana",
            "score": 1.0,
            "output_index": 1,
            "expected_index": 0,
        },
    ]


def test_list_contains_allow_extra_entities(ctx: ScoringContext) -> None:
    out = ["a", "b", "c"]
    assert score("list_contains", output=out, expected=["a"]).value == pytest.approx(1 / 3)
    extra = score("list_contains", output=out, expected=["a"], allow_extra_entities=True)
    assert extra.value == 1.0


def test_list_contains_custom_pairwise_scorer(ctx: ScoringContext) -> None:
    exact = ListContains(pairwise_scorer="exact_match")
    assert score(exact, output=["Paris", "Rome"], expected=["Rome", "Pari"]).value == 0.5
    halves = ListContains(pairwise_scorer=Halves())
    assert score(halves, output=[1, 2], expected=[3, 4]).value == 0.5


def test_list_contains_tuples_and_non_strings(ctx: ScoringContext) -> None:
    assert score("list_contains", output=(1, None), expected=["1", "None"]).value == 1.0


@pytest.mark.parametrize(
    ("output", "expected", "field"),
    [("a, b", ["a"], "output"), (["a"], {"a": 1}, "expected"), (["a"], ["a", None], "expected")],
)
def test_list_contains_input_errors(
    output: Any, expected: Any, field: str, ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("list_contains", output=output, expected=expected)
    assert (info.value.scorer, info.value.field) == ("list_contains", field)


def test_list_contains_bad_options() -> None:
    with pytest.raises(ScorerConfigError) as info:
        ListContains(pairwise_scorer="nope")
    assert info.value.option == "pairwise_scorer"
    with pytest.raises(ScorerConfigError) as info:
        ListContains(allow_extra_entities=1)
    assert info.value.option == "allow_extra_entities"


def test_list_contains_matches_python_loop_on_larger_lists(ctx: ScoringContext) -> None:
    from scipy.optimize import linear_sum_assignment

    out = [f"item{i}" * (i % 3 + 1) for i in range(9)]
    exp = [f"item{i * 2}" for i in range(6)]
    sim = [[levenshtein_similarity(o, e) for e in exp] for o in out]
    rows, cols = linear_sum_assignment([[-s for s in row] for row in sim])
    want = sum(sim[r][c] for r, c in zip(rows, cols, strict=True)) / 9
    assert score("list_contains", output=out, expected=exp).value == pytest.approx(want, abs=1e-12)


# -- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["json_diff", "valid_json", "list_contains"])
@settings(max_examples=150, deadline=None)
@given(output=JSON_LIKE, expected=JSON_LIKE)
def test_any_json_like_input_scores_in_range_or_is_an_input_error(
    name: str, output: Any, expected: Any
) -> None:
    assert_in_range_or_input_error(name, output, expected)


@settings(max_examples=100, deadline=None)
@given(output=st.lists(JSON_LIKE, max_size=6), expected=st.lists(JSON_LIKE, max_size=6))
def test_list_contains_on_lists_of_json_like_items(output: list[Any], expected: list[Any]) -> None:
    inputs = {"output": output, "expected": expected}
    try:
        result = ListContains().compute(inputs, PLAIN_CTX)
    except ScorerInputError as exc:
        assert exc.field == "expected"
        assert None in expected
        return
    assert 0.0 <= result.value <= 1.0
    assert len(result.metadata["pairs"]) == (min(len(output), len(expected)))


def test_list_contains_large_lists_use_the_same_similarities(ctx: ScoringContext) -> None:
    from pytest_llmeval.scorers.structured import _CDIST_MIN_PAIRS, _levenshtein_matrix

    out = [f"w{i}🙂" * (i % 4) for i in range(40)]
    exp = [f"w{i * 3}" for i in range(30)] + [""]
    assert len(out) * len(exp) >= _CDIST_MIN_PAIRS
    sim = _levenshtein_matrix(out, exp)
    assert sim == [[levenshtein_similarity(o, e) for e in exp] for o in out]


class AsyncHalves(Scorer):
    """A custom async-only sub-scorer (like a judge): 0.5 for every pair."""

    name = "async_halves_for_tests"
    required_inputs = ("output",)
    optional_inputs = ("expected",)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=0.5, scorer=self.name)


def test_async_sub_scorers_work_in_batch_scoring(ctx: ScoringContext) -> None:
    from pytest_llmeval import score_many

    rows = [{"output": [1, 2], "expected": [3, 4]}, {"output": [5], "expected": [5, 6]}]
    diff = score_many(JSONDiff(number_scorer=AsyncHalves()), rows)
    assert diff.values == [0.5, 0.25]
    lists = score_many(ListContains(pairwise_scorer=AsyncHalves), rows)
    assert lists.values == [0.5, 0.25]
