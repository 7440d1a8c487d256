"""Gates on the judge itself (issue 20): min_kappa, min_true_pass, min_true_fail, judged on
labelled records only; too few labels is inconclusive, never a pass."""

from __future__ import annotations

import math

import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from pytest_llmeval.analysis.gates import GateError, make_spec
from pytest_llmeval.core.stats import CaseSamples, GateSpec, Sample, evaluate_gate


def cases(pairs: list[tuple[bool | None, bool]]) -> list[CaseSamples]:
    """One case per (person, judge) pair; the judge's score is 1 for pass, 0 for fail."""
    return [
        CaseSamples(
            f"t.py::test[c{i}]",
            (Sample(score=float(judge), passed=judge, min=0.5, human=human),),
            min=0.5,
        )
        for i, (human, judge) in enumerate(pairs)
    ]


def agreeing(n_pass: int, n_fail: int, wrong_pass: int = 0, wrong_fail: int = 0) -> list:
    """People pass n_pass (the judge fails wrong_fail of them) and fail n_fail (the judge passes
    wrong_pass of them)."""
    return (
        [(True, True)] * (n_pass - wrong_fail)
        + [(True, False)] * wrong_fail
        + [(False, False)] * (n_fail - wrong_pass)
        + [(False, True)] * wrong_pass
    )


def check(spec: GateSpec, data: list) -> tuple[str, dict[str, str]]:
    result = evaluate_gate(spec, cases(data))
    return result.verdict, {c.metric: c.verdict for c in result.checks}


def test_a_judge_that_agrees_passes_the_kappa_gate() -> None:
    spec = GateSpec("factuality", min_kappa=0.6, confidence=0.95)
    verdict, by = check(spec, agreeing(40, 40, wrong_pass=1, wrong_fail=1))
    assert verdict == "pass" and by == {"kappa": "pass"}
    result = evaluate_gate(spec, cases(agreeing(40, 40, wrong_pass=1, wrong_fail=1)))
    (c,) = result.checks
    assert c.interval is not None
    humans = [h for h, _ in agreeing(40, 40, 1, 1)]
    judges = [j for _, j in agreeing(40, 40, 1, 1)]
    assert math.isclose(c.interval.estimate, cohen_kappa_score(humans, judges), abs_tol=1e-12)
    ref = cohens_kappa([[39, 1], [1, 39]])
    assert math.isclose(c.interval.low, ref.kappa_low, abs_tol=1e-9)


def test_a_judge_that_disagrees_fails_and_a_close_one_is_inconclusive_with_a_count() -> None:
    spec = GateSpec("factuality", min_kappa=0.6, confidence=0.95)
    verdict, _ = check(spec, agreeing(50, 50, wrong_pass=20, wrong_fail=20))  # kappa 0.2
    assert verdict == "fail"
    result = evaluate_gate(spec, cases(agreeing(10, 10, wrong_pass=1, wrong_fail=1)))  # 0.8
    (c,) = result.checks
    assert c.verdict == "inconclusive" and c.needed is not None and c.needed > 0


def test_no_labels_is_inconclusive_even_when_the_scores_pass() -> None:
    # the wrong pass to avoid: a mean that passes must not carry a judge nobody checked
    spec = GateSpec("factuality", min_mean=0.5, min_kappa=0.6, min_true_pass=0.9)
    unlabelled = [(None, True)] * 30
    result = evaluate_gate(spec, cases(unlabelled))
    assert result.verdict == "inconclusive"
    by = {c.metric: c for c in result.checks}
    assert by["mean"].verdict == "pass"
    assert by["kappa"].verdict == "inconclusive"
    assert "assert_score(..., label=...)" in by["kappa"].reason
    assert by["true_pass_rate"].verdict == "inconclusive"


def test_labels_of_one_verdict_leave_kappa_undefined_and_the_gate_inconclusive() -> None:
    spec = GateSpec("factuality", min_kappa=0.6)
    result = evaluate_gate(spec, cases([(True, True)] * 12))
    (c,) = result.checks
    assert c.verdict == "inconclusive" and "undefined" in c.reason


def test_true_pass_and_true_fail_rates() -> None:
    spec = GateSpec("factuality", min_true_pass=0.9, min_true_fail=0.8, confidence=0.95)
    # passes 60 of 60 people passed; fails only 30 of 60 people failed
    result = evaluate_gate(spec, cases(agreeing(60, 60, wrong_pass=30)))
    by = {c.metric: c for c in result.checks}
    assert by["true_pass_rate"].verdict == "pass"
    assert by["true_fail_rate"].verdict == "fail"
    assert by["true_fail_rate"].interval is not None
    assert by["true_fail_rate"].interval.estimate == pytest.approx(0.5)
    assert result.verdict == "fail"


def test_point_estimates_without_confidence() -> None:
    spec = GateSpec("factuality", min_kappa=0.5)
    assert check(spec, agreeing(5, 5, wrong_pass=1))[0] == "pass"  # kappa 0.8
    assert check(spec, agreeing(5, 5, wrong_pass=2, wrong_fail=2))[0] == "fail"  # kappa 0.2


def test_the_marker_takes_judge_bounds_alone_and_checks_them() -> None:
    spec = make_spec("factuality", {"min_kappa": 0.6, "confidence": 0.95}, "t.py::test")
    assert spec.min_kappa == 0.6 and spec.to_json()["min_kappa"] == 0.6
    for options, message in (
        ({"min_kappa": -1}, "min_kappa must be in (-1, 1]"),
        ({"min_true_pass": 0}, "min_true_pass must be in (0, 1]"),
        ({"min_true_fail": 1.5}, "min_true_fail must be in (0, 1]"),
        ({"min_kappa": "high"}, "min_kappa= is"),
    ):
        with pytest.raises(GateError, match=message.replace("(", r"\(").replace("]", r"\]")):
            make_spec("factuality", options, "t.py::test")


def test_a_failed_judge_check_says_the_judge_disagrees_with_the_labels() -> None:
    spec = GateSpec("factuality", min_kappa=0.6, min_true_fail=0.8, confidence=0.95)
    result = evaluate_gate(spec, cases(agreeing(50, 50, wrong_pass=25, wrong_fail=10)))
    assert result.verdict == "fail"
    by = {c.metric: c for c in result.checks}
    assert by["kappa"].reason.startswith("the judge disagrees with your labels: its kappa is 0.300")
    assert by["true_fail_rate"].reason == (
        "the judge disagrees with your labels: its true-fail rate is 0.500, below 0.8"
    )
    assert "the judge disagrees with your labels" in result.reason
