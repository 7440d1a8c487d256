"""python_unit_testing: the opt-in, test pairing, reasons, pass@k (runs real sandboxed code)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from pytest_llmeval.context import ScoringContext
from pytest_llmeval.errors import ScorerConfigError, ScorerInputError, ScorerNotAvailableError
from pytest_llmeval.scorers.code import PythonUnitTesting, pass_at_k
from pytest_llmeval.settings import Settings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
RAISES = "def add(a, b):\n    return a + None\n"
TEST = "assert add(2, 3) == 5\n"
TEST2 = "assert add(-1, 1) == 0\n"


@pytest.fixture
def enabled(ctx: ScoringContext) -> ScoringContext:
    ctx.settings = dataclasses.replace(ctx.settings, sandbox_enabled=True)
    return ctx


def score(ctx: ScoringContext, output: object, **kw: object) -> object:
    inputs = {k: kw.pop(k) for k in ("tests", "test_index") if k in kw}
    return PythonUnitTesting(**kw).compute({"output": output, **inputs}, ctx)


# -- opt-in ------------------------------------------------------------------------------------


def test_refuses_without_opt_in_and_says_how(ctx: ScoringContext) -> None:
    assert ctx.settings.sandbox_enabled is False
    with pytest.raises(ScorerNotAvailableError) as info:
        PythonUnitTesting().compute({"output": GOOD, "tests": TEST}, ctx)
    msg = str(info.value)
    assert "--llm-eval-allow-code-execution" in msg
    assert "llm_eval_allow_code_execution" in msg
    assert "LLM_EVAL_SANDBOX=1" in msg
    assert "configure(sandbox_enabled=True)" in msg


def test_opt_in_from_the_environment() -> None:
    assert Settings.from_env({"LLM_EVAL_SANDBOX": "1"}).sandbox_enabled is True
    assert Settings.from_env({}).sandbox_enabled is False


def test_opt_in_through_configure_and_score() -> None:
    from pytest_llmeval import score as score_fn
    from pytest_llmeval.context import configure, set_context

    prev = set_context(None)
    try:
        configure(sandbox_enabled=True, cache_mode="off")
        result = score_fn("PythonUnitTesting", output=GOOD, tests=[TEST])
        assert result.value == 1.0
        assert result.scorer == "python_unit_testing"
    finally:
        set_context(prev)


# -- outcomes ----------------------------------------------------------------------------------


def test_passing_code_scores_one(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": GOOD, "tests": [TEST, TEST2]}, enabled)
    assert s.value == 1.0
    assert s.rationale == "passed all 2 test(s)"
    assert s.metadata["status"] == "passed"
    assert s.metadata["passed"] is True
    assert s.metadata["containment"]["environment"] == "minimal"


def test_failing_assertion_scores_zero_with_failure(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": WRONG, "tests": TEST}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "failure"
    assert s.metadata["exception"] == "AssertionError"
    assert s.rationale is not None and s.rationale.startswith("test 1 of 1: failure")


def test_exception_scores_zero_with_error(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": RAISES, "tests": TEST}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "error"
    assert s.metadata["exception"] == "TypeError"
    assert "error (TypeError" in (s.rationale or "")
    assert "TypeError" in s.metadata["traceback"]


def test_infinite_loop_scores_zero_with_timeout(enabled: ScoringContext) -> None:
    s = PythonUnitTesting(timeout=0.5).compute(
        {"output": "while True:\n    pass\n", "tests": TEST}, enabled
    )
    assert s.value == 0.0
    assert s.metadata["status"] == "timeout"
    assert "timeout" in (s.rationale or "")


def test_second_test_failing_is_named(enabled: ScoringContext) -> None:
    half = "def add(a, b):\n    return 5\n"
    s = PythonUnitTesting().compute({"output": half, "tests": [TEST, TEST2]}, enabled)
    assert s.value == 0.0
    assert s.metadata["failed_test"] == 1
    assert (s.rationale or "").startswith("test 2 of 2: failure")


# -- where tests come from ---------------------------------------------------------------------


def test_tests_from_a_directory_in_sorted_order(enabled: ScoringContext, tmp_path: Path) -> None:
    (tmp_path / "b_second.py").write_text("assert add(1, 1) == 3\n")
    (tmp_path / "a_first.py").write_text(TEST)
    scorer = PythonUnitTesting()
    assert scorer.compute({"output": GOOD, "tests": tmp_path, "test_index": 0}, enabled).value == 1
    s = scorer.compute({"output": GOOD, "tests": str(tmp_path)}, enabled)
    assert s.value == 0.0
    assert s.metadata["failed_test"] == 1


def test_unit_tests_option_paired_by_index(enabled: ScoringContext) -> None:
    scorer = PythonUnitTesting(unit_tests=[TEST, "assert add(2, 2) == 0\n"])
    assert scorer.compute({"output": GOOD, "test_index": 0}, enabled).value == 1.0
    assert scorer.compute({"output": WRONG, "test_index": 1}, enabled).value == 1.0
    assert scorer.compute({"output": GOOD, "test_index": 1}, enabled).value == 0.0


def test_a_tests_directory_is_cached_by_contents_not_path(tmp_path: Path) -> None:
    """Editing a test file under the same directory must not replay the old result."""
    from pytest_llmeval import score as score_fn
    from pytest_llmeval.context import configure, set_context

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "t0.py").write_text(TEST)
    prev = set_context(None)
    ctx = configure(sandbox_enabled=True, cache_dir=tmp_path / "cache")
    try:
        first = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (first.value, first.cached) == (1.0, False)
        again = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (again.value, again.cached) == (1.0, True)  # same files: from the cache
        (tests / "t0.py").write_text("assert add(1, 1) == 3\n")
        edited = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (edited.value, edited.cached) == (0.0, False)  # new contents: run again
        (tests / "t0.py").write_text(TEST)
        back = score_fn("python_unit_testing", output=GOOD, tests=tests)  # a Path, same key
        assert (back.value, back.cached) == (1.0, True)
    finally:
        ctx.close()
        set_context(prev)


def test_unit_test_dir_option(enabled: ScoringContext, tmp_path: Path) -> None:
    (tmp_path / "t0.py").write_text(TEST)
    scorer = PythonUnitTesting(unit_test_dir=str(tmp_path))
    assert scorer.compute({"output": GOOD}, enabled).value == 1.0
    ident = scorer.extra_identity(enabled)
    assert len(ident["unit_tests_sha256"]) == 64
    assert ident["sandbox"] in {"namespaces", "audit_hooks"}


def test_unit_test_dir_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ScorerConfigError, match="unit_test_dir"):
        PythonUnitTesting(unit_test_dir=str(tmp_path / "nope"))


def test_missing_tests_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        PythonUnitTesting().compute({"output": GOOD}, enabled)
    assert info.value.field == "tests"
    assert "unit_tests" in str(info.value)


def test_test_index_out_of_range_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="holds 1 test"):
        PythonUnitTesting().compute({"output": GOOD, "tests": [TEST], "test_index": 3}, enabled)


@pytest.mark.parametrize("bad", [42, [GOOD, 3], []])
def test_bad_output_is_an_input_error(enabled: ScoringContext, bad: object) -> None:
    with pytest.raises(ScorerInputError) as info:
        PythonUnitTesting().compute({"output": bad, "tests": TEST}, enabled)
    assert info.value.field == "output"


@pytest.mark.parametrize(
    ("option", "value"),
    [("timeout", 0), ("k", 0), ("memory_mb", 8), ("max_processes", -1), ("unit_tests", "x")],
)
def test_bad_options_are_config_errors(option: str, value: object) -> None:
    with pytest.raises(ScorerConfigError, match=option):
        PythonUnitTesting(**{option: value})


# -- pass@k ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 2, 0.0),
        (5, 4, 2, 1.0),  # n - c < k
        (1, 1, 1, 1.0),
        # 1 - C(187,10)/C(200,10); Codex's product form 1 - prod(1 - k/i, i=188..200) agrees
        (200, 13, 10, 0.4975511147306061),
    ],
)
def test_pass_at_k_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def test_samples_give_pass_at_k_with_per_sample_results(enabled: ScoringContext) -> None:
    samples = [GOOD, WRONG, GOOD]
    s1 = PythonUnitTesting(k=1).compute({"output": samples, "tests": TEST}, enabled)
    assert s1.value == pytest.approx(2 / 3)
    assert s1.metadata["n"] == 3
    assert s1.metadata["c"] == 2
    assert [x["status"] for x in s1.metadata["samples"]] == ["passed", "failure", "passed"]
    assert s1.rationale == "pass@1 = 0.6667: 2 of 3 samples passed all 1 test(s)"
    s2 = PythonUnitTesting(k=2).compute({"output": samples, "tests": TEST}, enabled)
    assert s2.value == 1.0  # 1 - C(1,2)/C(3,2) = 1 - 0
    assert s2.metadata["pass_at_k"] == 1.0


def test_more_k_than_samples_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="k=3"):
        PythonUnitTesting(k=3).compute({"output": [GOOD, GOOD], "tests": TEST}, enabled)
