"""Gates on the judge itself (issue 20): min_kappa, min_true_pass, min_true_fail, judged on
labelled records only; too few labels is inconclusive, never a pass."""

from __future__ import annotations

import math

import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from pytest_llmeval.analysis.gates import GateError, make_spec
from pytest_llmeval.core.stats import (
    CaseSamples,
    GateSpec,
    Sample,
    evaluate_gate,
    wilson_interval,
)


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
    # the interval holds statsmodels' Wald interval and the agreement's Wilson interval (78 of
    # 80) carried to kappa, which is the wider one here
    wil = wilson_interval(78, 80)
    assert math.isclose(c.interval.low, min(ref.kappa_low, (wil.low - 0.5) / 0.5), abs_tol=1e-9)
    assert c.interval.low < ref.kappa_low


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


# -- one labelled output is one labelled record, however often the judge was asked ------------


def repeated(data: list, times: int) -> list[CaseSamples]:
    """Each (person, judge) pair as one case judged ``times`` times, every time alike."""
    return [
        CaseSamples(
            f"t.py::test[c{i}]",
            tuple(
                Sample(score=float(judge), passed=judge, min=0.5, human=human, sample=k)
                for k in range(times)
            ),
            min=0.5,
        )
        for i, (human, judge) in enumerate(data)
    ]


def test_repeated_samples_of_a_labelled_case_count_once() -> None:
    """Ten labelled outputs asked five times are ten labelled records, not fifty: counted
    apart, the kappa interval would narrow from [0.43, 1] to clear 0.6 and pass a judge
    measured on ten outputs."""
    spec = GateSpec("factuality", min_kappa=0.6, confidence=0.95)
    data = agreeing(5, 5, wrong_pass=1)
    once = evaluate_gate(spec, repeated(data, 1))
    five = evaluate_gate(spec, repeated(data, 5))
    assert once.verdict == five.verdict == "inconclusive"
    assert five.checks[0].interval == once.checks[0].interval
    assert five.checks[0].interval is not None and five.checks[0].interval.n == 10
    flat = evaluate_gate(spec, cases(data * 10))  # a hundred distinct outputs do decide it
    assert flat.verdict == "pass"


def test_a_labelled_output_is_judged_by_the_reduced_verdict() -> None:
    """Three asks of one output, two passing: the judge's verdict on it is the reducer's."""
    samples = tuple(
        Sample(score=s, passed=s >= 0.5, min=0.5, human=False, sample=k)
        for k, s in enumerate((1.0, 1.0, 0.0))
    )
    data = [CaseSamples("t.py::test[x]", samples, min=0.5), *cases(agreeing(6, 6))]
    for reducer, judged_pass in (("majority", True), ("pass_all", False), ("min", False)):
        spec = GateSpec("factuality", min_true_fail=0.99, reducer=reducer)
        (c,) = evaluate_gate(spec, data).checks
        assert c.interval is not None and c.interval.n == 7
        assert c.verdict == ("fail" if judged_pass else "pass"), reducer


# -- gates on the corrected pass rate -----------------------------------------------------------


def mixed(labelled: list, unlabelled_judged: list[bool]) -> list[CaseSamples]:
    out = cases(labelled)
    out += [
        CaseSamples(f"t.py::test[u{i}]", (Sample(score=float(j), passed=j, min=0.5),), min=0.5)
        for i, j in enumerate(unlabelled_judged)
    ]
    return out


def test_a_lenient_judge_passes_the_raw_gate_and_fails_the_corrected_one() -> None:
    """The judge passes everything people pass and 30% of what they fail. It passes 154 of 200
    unlabelled cases (77%; 71% over all 400): with a true-pass rate of 1 and a true-fail rate
    of 0.70 the unlabelled cases' true rate is (0.77 + 0.70 - 1) / (1 + 0.70 - 1) = 0.671. The
    raw gate at 0.7 passes; the corrected one does not."""
    from pytest_llmeval.core.agreement import corrected_pass_rate

    data = mixed(agreeing(100, 100, wrong_pass=30), [True] * 154 + [False] * 46)
    raw = evaluate_gate(GateSpec("factuality", min_pass_rate=0.7), data)
    assert raw.verdict == "pass"
    spec = GateSpec("factuality", min_pass_rate=0.7, corrected=True)
    result = evaluate_gate(spec, data)
    (c,) = result.checks
    assert (c.metric, c.verdict) == ("corrected_pass_rate", "fail")
    assert c.interval is not None
    assert math.isclose(c.interval.estimate, 0.47 / 0.70, abs_tol=1e-12)
    ref = corrected_pass_rate(154, 200, 100, 100, 70, 100, 0.95)
    assert ref.interval is not None and c.interval == ref.interval
    with_ci = evaluate_gate(
        GateSpec("factuality", min_pass_rate=0.7, corrected=True, confidence=0.95), data
    )
    assert with_ci.verdict == "inconclusive"  # [0.58, 0.78] straddles 0.7
    assert "straddles" in with_ci.checks[0].reason
    clear = evaluate_gate(
        GateSpec("factuality", min_pass_rate=0.5, corrected=True, confidence=0.95), data
    )
    assert clear.verdict == "pass"


def test_the_corrected_gate_is_inconclusive_where_the_correction_is_not_defined() -> None:
    chance = mixed(agreeing(20, 20, wrong_pass=10, wrong_fail=10), [True] * 40)
    spec = GateSpec("factuality", min_pass_rate=0.5, corrected=True)
    result = evaluate_gate(spec, chance)
    assert result.verdict == "inconclusive"
    assert "no better than chance" in result.reason
    one_kind = mixed([(True, True)] * 20, [True] * 40)
    result = evaluate_gate(spec, one_kind)
    assert result.verdict == "inconclusive" and "labelled records people passed" in result.reason
    all_labelled = mixed(agreeing(20, 20), [])
    result = evaluate_gate(spec, all_labelled)
    assert result.verdict == "inconclusive" and "no unlabelled case" in result.reason
    no_labels = mixed([], [True] * 40)
    assert evaluate_gate(spec, no_labels).verdict == "inconclusive"


def test_corrected_needs_a_pass_rate_bound_and_a_bool() -> None:
    with pytest.raises(GateError, match="give min_pass_rate or max_pass_rate"):
        make_spec("factuality", {"min_mean": 0.5, "corrected": True}, "t.py::test")
    with pytest.raises(GateError, match="corrected= is"):
        make_spec("factuality", {"min_pass_rate": 0.5, "corrected": "yes"}, "t.py::test")
    spec = make_spec("factuality", {"min_pass_rate": 0.5, "corrected": True}, "t.py::test")
    assert spec.corrected and spec.to_json()["corrected"] is True
    with pytest.raises(ValueError, match="corrected must be True or False"):
        GateSpec("factuality", min_pass_rate=0.5, corrected=1).validate()  # type: ignore[arg-type]


def test_corrected_in_the_gate_option_and_through_json() -> None:
    from pytest_llmeval.analysis.gates import parse_gate_option
    from pytest_llmeval.core.model import spec_from_json

    rule = parse_gate_option("t.py::test:factuality:min_pass_rate=0.8,corrected=true")
    assert rule.spec.corrected is True
    assert spec_from_json(rule.spec.to_json()) == rule.spec
    with pytest.raises(GateError, match="not true or false"):
        parse_gate_option("t.py::test:factuality:min_pass_rate=0.8,corrected=maybe")
    with pytest.raises(ValueError, match="corrected must be True or False"):
        spec_from_json({**rule.spec.to_json(), "corrected": "true"}).validate()


def test_each_assertion_of_a_case_is_judged_against_its_own_bound() -> None:
    # Two assertions of one scorer in each case: the first bounded by max=0.8 only, the second
    # by min=0.5 only. People fail every second output, which the judge passed (0.9 >= 0.5): a
    # false pass. Judged against min=0.5 and the first assertion's max=0.8 it looked like a
    # fail, an agreement that hid the judge's false passes from min_true_fail.
    data = [
        CaseSamples(
            f"t.py::test[c{i}]",
            (
                Sample(score=0.1, passed=True, index=0, max=0.8, human=True),
                Sample(score=0.9, passed=True, index=1, min=0.5, human=False),
            ),
            max=0.8,
        )
        for i in range(30)
    ]
    spec = GateSpec("factuality", min_true_fail=0.8)
    result = evaluate_gate(spec, data)
    (c,) = result.checks
    assert c.interval is not None and c.interval.estimate == 0.0
    assert result.verdict == "fail"


def test_six_agreeing_labels_do_not_pass_a_kappa_gate_at_95_percent() -> None:
    """The Wald variance of six records that all agree is 0 (interval [1, 1]): the gate must
    not take that as certainty. The agreement's Wilson interval keeps it inconclusive, with
    the number of labelled records likely to decide it."""
    spec = GateSpec("factuality", min_kappa=0.6, confidence=0.95)
    result = evaluate_gate(spec, cases(agreeing(3, 3)))
    (c,) = result.checks
    assert c.verdict == "inconclusive" and c.interval is not None and c.interval.low < 0.6
    assert c.needed is not None and c.needed > 0
