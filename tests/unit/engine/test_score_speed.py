"""score()'s short path (issue 14): a per-scorer plan, value functions for the lexical scorers and
no usage collector for self-contained scorers. Each test pins a behaviour the short path must keep
(the same Score, the same errors, the range check, a name's new class after register) or the cost
it removes (which Python functions one call runs)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import pytest
from paths import ROOT

import pytest_llmeval
from pytest_llmeval import LLMEvalError, Score, Scorer, ScorerInputError, score
from pytest_llmeval.core.usage import current_usage
from pytest_llmeval.engine.assertions import _score_sync
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.scorers.lexical import Levenshtein, NumericDiff, make_score

CASES: list[tuple[str, Any, Any]] = [
    ("exact_match", "Paris", "Paris"),
    ("exact_match", "Paris", "paris"),
    ("exact_match", {"a": 1, "b": [1, 2]}, '{"b": [1, 2], "a": 1}'),
    ("exact_match", None, None),
    ("exact_match", 3, "3"),
    ("levenshtein", "kitten", "sitting"),
    ("levenshtein", "", ""),
    ("levenshtein", None, "None"),
    ("levenshtein", 12, "13"),
    ("numeric_diff", 3, 5),
    ("numeric_diff", 0, 0),
    ("numeric_diff", -2.5, 2.5),
    ("numeric_diff", 10**400, 10**400 + 1),
    ("numeric_diff", True, 1),
    ("json_diff", {"a": 1, "b": "x"}, {"a": 2, "b": "y"}),
    ("json_diff", None, None),
    ("valid_json", '{"a": 1}', None),
    ("valid_json", "{nope", None),
    ("list_contains", ["a", "b"], ["b", "c"]),
    ("list_contains", [], []),
]


def _general(name: str, output: Any, expected: Any, ctx: ScoringContext) -> Score:
    """The general path (as every call took before the short path)."""
    fields = {"output": output, "expected": expected, "input": None, "context": None}
    return _score_sync(name, fields, {}, ctx)[1]


def _same(a: Score, b: Score) -> None:
    assert type(a) is Score and type(b) is Score
    left = dataclasses.asdict(a)
    right = dataclasses.asdict(b)
    assert left.pop("duration_s") >= 0 and right.pop("duration_s") >= 0
    assert left == right
    assert type(a.value) is float


@pytest.mark.parametrize(("name", "output", "expected"), CASES)
def test_short_path_gives_the_general_paths_score(
    ctx: ScoringContext, name: str, output: Any, expected: Any
) -> None:
    general = _general(name, output, expected, ctx)
    by_name = score(name, output=output, expected=expected)
    by_instance = score(default_registry.get(name)(), output=output, expected=expected)
    by_class = score(default_registry.get(name), output=output, expected=expected)
    for result in (by_name, by_instance, by_class):
        _same(result, general)
    # A second call (the plan now memoised) gives it again.
    _same(score(name, output=output, expected=expected), general)


def test_short_path_score_has_every_field(ctx: ScoringContext) -> None:
    result = score("numeric_diff", output=3, expected=5)
    assert result == Score(
        value=0.75, scorer="numeric_diff", duration_s=result.duration_s, metadata={}
    )
    assert (result.rationale, result.usage, result.cached) == (None, None, False)
    assert (result.min, result.max, result.passed) == (None, None, None)
    assert 0 < result.duration_s < 1
    assert (
        result.metadata == {}
        and result.metadata is not score("numeric_diff", output=3, expected=5).metadata
    )
    # Score.replace (assert_score's bounds) works on it as on any Score.
    bounded = result.replace(min=0.5, passed=True)
    assert (bounded.value, bounded.scorer, bounded.min, bounded.passed) == (
        0.75,
        "numeric_diff",
        0.5,
        True,
    )


@pytest.mark.parametrize(
    ("name", "output", "expected", "field", "problem"),
    [
        ("numeric_diff", None, 5, "output", "is required but was not given"),
        ("numeric_diff", 5, None, "expected", "is required but was not given"),
        ("numeric_diff", "5", 5, "output", "is str '5', not a number"),
        ("numeric_diff", 5, math.nan, "expected", "is nan"),
        ("numeric_diff", math.inf, 5, "output", "is inf"),
        ("levenshtein", "a", None, "expected", "is required but was not given"),
        ("list_contains", "abc", ["a"], "output", "not a list"),
        ("list_contains", ["a"], None, "expected", "is required but was not given"),
        ("exact_match", {"a": 1}, 3, "expected", "the other side is a dict or list"),
    ],
)
def test_bad_input_gives_the_same_error_as_before(
    ctx: ScoringContext, name: str, output: Any, expected: Any, field: str, problem: str
) -> None:
    with pytest.raises(ScorerInputError) as general:
        _general(name, output, expected, ctx)
    for scorer in (name, default_registry.get(name)()):
        for _ in range(2):  # before and after the plan is memoised
            with pytest.raises(ScorerInputError) as short:
                score(scorer, output=output, expected=expected)
            assert str(short.value) == str(general.value)
            assert short.value.scorer == name and short.value.field == field
            assert problem in str(short.value)


class _BadValue(Scorer):
    """A value function out of its own range: the short path must still refuse it."""

    name = "speed_bad_value"
    required_inputs = ("output",)
    optional_inputs = ("expected",)

    def is_self_contained(self) -> bool:
        return True

    def value_function(self) -> Callable[[Any, Any], float] | None:
        return lambda output, expected: float(output)

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return make_score(float(inputs["output"]), self.name)


class _BadCompute(Scorer):
    name = "speed_bad_compute"

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=float(inputs["output"]))


@pytest.mark.parametrize("cls", [_BadValue, _BadCompute])
@pytest.mark.parametrize("value", [1.5, -0.25, math.nan])
def test_range_check_still_runs(ctx: ScoringContext, cls: type[Scorer], value: float) -> None:
    inst = cls()
    for _ in range(2):
        # a NaN is no score at all, whatever the range; a finite value out of range is the
        # range's error
        expected = "which is not a score" if math.isnan(value) else "outside its declared range"
        with pytest.raises(LLMEvalError, match=expected) as err:
            score(inst, output=value)
        assert repr(value) in str(err.value)
    assert score(inst, output=1.0 + 1e-12).value == pytest.approx(1.0)
    assert score(inst, output=0.5).value == 0.5


def test_a_value_function_giving_an_int_still_gives_a_float_score(ctx: ScoringContext) -> None:
    class Whole(Scorer):
        name = "speed_whole"
        optional_inputs = ("expected",)

        def is_self_contained(self) -> bool:
            return True

        def value_function(self) -> Callable[[Any, Any], float] | None:
            return lambda output, expected: int(output == expected)  # type: ignore[return-value]

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return Score(value=int(inputs.get("output") == inputs.get("expected")))

    for _ in range(2):
        result = score(Whole(), output="a", expected="a")
        assert result.value == 1.0 and type(result.value) is float
    result = score(Whole, output=2, expected=3)
    assert result.value == 0.0 and type(result.value) is float


def test_a_subclass_does_not_inherit_the_value_function(ctx: ScoringContext) -> None:
    class Quarter(Levenshtein):
        name = "speed_quarter"

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return make_score(0.25, self.name, rationale="my own")

    assert Quarter().value_function() is None and not Quarter().is_self_contained()
    result = score(Quarter(), output="abc", expected="abc")
    assert (result.value, result.scorer, result.rationale) == (0.25, "speed_quarter", "my own")


def test_a_name_registered_again_scores_with_its_new_class(ctx: ScoringContext) -> None:
    @pytest_llmeval.scorer(name="speed_swap")
    def first(output: str) -> float:
        return 0.25

    assert score("speed_swap", output="x").value == 0.25
    assert score("speed_swap", output="x").value == 0.25  # memoised plan

    @pytest_llmeval.scorer(name="speed_swap")
    def second(output: str) -> float:
        return 0.75

    assert score("speed_swap", output="x").value == 0.75


def test_equal_instances_keep_their_own_options(ctx: ScoringContext) -> None:
    class Scaled(Scorer):
        name = "speed_scaled"
        default_options = {"scale": 1.0}

        def __eq__(self, other: object) -> bool:  # every instance "equal"
            return isinstance(other, Scaled)

        def __hash__(self) -> int:
            return 0

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return Score(value=0.5 * self.options["scale"])

    assert score(Scaled(scale=1.0), output="x").value == 0.5
    assert score(Scaled(scale=2.0), output="x").value == 1.0
    assert score(Scaled(scale=0.5), output="x").value == 0.25


def test_unhashable_instance_scores(ctx: ScoringContext) -> None:
    class Unhashable(Scorer):
        name = "speed_unhashable"

        def __eq__(self, other: object) -> bool:
            return self is other

        __hash__ = None  # type: ignore[assignment]

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return Score(value=0.5)

    assert score(Unhashable(), output="x").value == 0.5


def test_a_scorer_that_may_call_a_judge_still_gets_its_usage_collector(
    ctx: ScoringContext,
) -> None:
    seen: list[object] = []

    class Watcher(Scorer):
        name = "speed_watcher"

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            seen.append(current_usage.get())
            return Score(value=0.5)

    score(Watcher(), output="x")
    score(Watcher, output="x")
    assert len(seen) == 2 and all(c is not None for c in seen)
    assert seen[0] is not seen[1]  # one per scoring
    assert current_usage.get() is None


def test_unknown_name_is_still_the_clear_error(ctx: ScoringContext) -> None:
    for _ in range(2):
        with pytest.raises(LLMEvalError, match="levenshtein"):
            score("levenshtien", output="a", expected="b")


def _python_calls(fn: Callable[[], Any]) -> list[str]:
    """The Python functions (not C builtins) that ``fn()`` runs, in call order."""
    calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls[1:]  # the lambda itself


@pytest.mark.parametrize(
    ("scorer", "output", "expected", "value_function"),
    [
        ("numeric_diff", 3, 5, "numeric_diff_value"),
        (NumericDiff(), 2.5, 2.0, "numeric_diff_value"),
        ("levenshtein", "hello", "hallo", "levenshtein_similarity"),
        (Levenshtein, "hello", "hallo", "levenshtein_similarity"),
        ("exact_match", "Paris", "Paris", "_match"),
    ],
)
def test_a_lexical_score_call_runs_only_its_value_function(
    ctx: ScoringContext, scorer: Any, output: Any, expected: Any, value_function: str
) -> None:
    """The per-call cost issue 14 removed: no registry lookup, input split, instance memo, check
    loop, usage collector, intermediate Score or Score.replace. Before: 20 Python calls."""
    score(scorer, output=output, expected=expected)  # warm: the plan is made once
    calls = _python_calls(lambda: score(scorer, output=output, expected=expected))
    assert calls == ["score", value_function]


def test_a_self_contained_scorer_runs_without_the_usage_collector(ctx: ScoringContext) -> None:
    score("list_contains", output=["a"], expected=["a"])
    calls = _python_calls(lambda: score("list_contains", output=["a"], expected=["a"]))
    assert "__init__" not in calls  # no UsageCollector(), Usage() or JudgeClock()
    assert calls[:3] == ["score", "_score_planned", "compute"]


def _load_bench() -> Any:
    path = ROOT / "benchmarks" / "bench_deterministic.py"
    spec = importlib.util.spec_from_file_location("bench_deterministic_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_fails_on_any_ratio_below_one() -> None:
    verdict = _load_bench().verdict
    fast = {"compute": 1.3, "score": 1.1, "score_name": 1.0}
    assert verdict({"Levenshtein": fast, "NumericDiff": fast}) == []
    slow_wrapper = {"NumericDiff": {"compute": 1.2, "score": 0.99, "score_name": 1.05}}
    assert verdict(slow_wrapper) == ["NumericDiff: score() ratio 0.99 < 1.0"]
    slow_name = {"ExactMatch": {"compute": 1.2, "score": 1.01, "score_name": 0.5}}
    assert verdict(slow_name) == ["ExactMatch: score(name) ratio 0.50 < 1.0"]
    slow_compute = {"NumericDiff": {"compute": 0.83, "score": 1.2, "score_name": 1.2}}
    assert verdict(slow_compute) == ["NumericDiff: compute ratio 0.83 < 1.0"]
    assert verdict({"JSONDiff": {"compute": math.nan, "score": 2.0, "score_name": 2.0}}) == [
        "JSONDiff: compute ratio nan < 1.0"
    ]


# -- assert_score takes the same short path (issue 24) ----------------------------------------


def _records_of(fn: Callable[[], Any]) -> list[Any]:
    """The records ``fn()`` makes under a recorder of its own (as inside a test)."""
    from pytest_llmeval.core.records import TestRecorder, current_recorder

    recorder = TestRecorder("test_x.py", "test_x", "c1", "cases.jsonl:1")
    token = current_recorder.set(recorder)
    try:
        fn()
    finally:
        current_recorder.reset(token)
    return recorder.records


@pytest.mark.parametrize(("name", "output", "expected"), CASES)
def test_assert_score_short_path_records_what_the_general_path_records(
    ctx: ScoringContext, name: str, output: Any, expected: Any
) -> None:
    """Without options, assert_score scores by the plan; with an option that changes nothing
    (``record_chars`` is not one: use a scorer option the short path cannot take) it takes the
    general path: the records are the same but for the time taken."""
    from pytest_llmeval import assert_score

    def short() -> None:
        assert_score(name, output=output, expected=expected, min=0.0)

    def general() -> None:
        fields = {"output": output, "expected": expected, "input": None, "context": None}
        from pytest_llmeval.engine import assertions

        inst, result = assertions._score_sync(name, fields, {}, ctx)
        assertions._check_and_record(inst, result, 0.0, None, fields, {}, ctx)

    a, b = _records_of(short), _records_of(general)
    assert len(a) == len(b) == 1
    left = {f.name: getattr(a[0], f.name) for f in dataclasses.fields(a[0])}
    right = {f.name: getattr(b[0], f.name) for f in dataclasses.fields(b[0])}
    assert left.pop("duration_s") >= 0 and right.pop("duration_s") >= 0
    assert left == right
    assert a[0].passed is True and a[0].cached is False


def test_assert_score_without_options_skips_the_general_path(ctx: ScoringContext) -> None:
    """The per-case cost issue 24 removed: a deterministic scorer that stores nothing is not split,
    keyed or looked up by assert_score (score()'s plan does the work)."""
    from pytest_llmeval import assert_score

    assert_score("exact_match", output="Paris", expected="Paris", min=1)  # the plan is made
    calls: list[str] = []
    _records_of(
        lambda: calls.extend(
            _python_calls(
                lambda: assert_score("exact_match", output="Paris", expected="Paris", min=1)
            )
        )
    )
    assert "score" in calls and "_match" in calls
    for general in ("_score_sync", "_split", "_prepare", "_lookup", "_compute", "_asked"):
        assert general not in calls, (general, calls)


def test_assert_score_with_a_cache_to_consult_takes_the_general_path(tmp_path: Any) -> None:
    """A scorer whose results are stored is looked up in the cache: no short path (its second
    call is a hit, recorded as cached), while exact_match (which stores nothing) is computed
    each time under the same cache."""
    from pytest_llmeval import assert_score
    from pytest_llmeval.core.settings import Settings
    from pytest_llmeval.engine.context import set_context

    class Stored(Scorer):
        name = "stored_for_speed_test"
        required_inputs = ("output",)

        def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
            return Score(value=1.0, scorer=self.name)

    c = ScoringContext(Settings(cache_mode="use", cache_dir=tmp_path / ".llmeval"))
    prev = set_context(c)
    try:
        first = _records_of(lambda: assert_score(Stored, output="x", min=1))
        second = _records_of(lambda: assert_score(Stored, output="x", min=1))
        plain = _records_of(lambda: assert_score("exact_match", output="x", expected="x", min=1))
        again = _records_of(lambda: assert_score("exact_match", output="x", expected="x", min=1))
    finally:
        set_context(prev)
        c.close()
    assert (first[0].cached, second[0].cached) == (False, True)
    assert (plain[0].cached, again[0].cached) == (False, False)
