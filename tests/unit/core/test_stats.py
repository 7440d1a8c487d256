"""pytest_llmeval.core.stats: reducers, intervals and gate verdicts (issue 9).

scipy is the reference here (the module itself is pure Python)."""

from __future__ import annotations

import json
import math
import random as _random
import statistics as _statistics

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from pytest_llmeval.core.stats import (
    REDUCERS,
    VERDICTS,
    CaseResult,
    CaseSamples,
    GateSpec,
    Sample,
    cluster_bootstrap_interval,
    cluster_mean_interval,
    evaluate_gate,
    flaky_cases,
    normal_ppf,
    reduce_case,
    scorer_stats,
    t_cdf,
    t_interval,
    t_ppf,
    wilson_interval,
)


def case(key: str, *scores: float | None, min: float | None = None) -> CaseSamples:
    """A case whose samples pass when score >= min (no verdict without min)."""
    samples = []
    for i, s in enumerate(scores):
        if s is None:
            samples.append(Sample(None, None, "judge failed", i))
        else:
            samples.append(Sample(s, None if min is None else s >= min, None, i))
    return CaseSamples(key, tuple(samples), min=min)


def verdict_case(key: str, *passed: bool, score: float = 1.0) -> CaseSamples:
    return CaseSamples(
        key, tuple(Sample(score if p else 0.0, p, None, i) for i, p in enumerate(passed))
    )


# ------------------------------------------------------------------------------ distributions


def test_normal_ppf_matches_scipy() -> None:
    for p in (1e-300, 1e-20, 1e-9, 0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.9995, 1 - 1e-12):
        ref = float(sps.norm.ppf(p))
        assert normal_ppf(p) == pytest.approx(ref, abs=1e-12 * max(1.0, abs(ref)))
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        normal_ppf(0.0)


@settings(max_examples=300, deadline=None)
@given(p=st.floats(1e-12, 1 - 1e-12))
def test_prop_normal_ppf_matches_scipy(p: float) -> None:
    ref = float(sps.norm.ppf(p))
    assert abs(normal_ppf(p) - ref) <= 1e-12 * max(1.0, abs(ref))


def test_stats_imports_only_math_and_random() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, pytest_llmeval; before = set(sys.modules); import pytest_llmeval.core.stats; "
        "print(sorted(m for m in set(sys.modules) - before "
        "if m.split('.')[0] in ('numpy', 'scipy', 'statistics', 'decimal', 'fractions')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999])
def test_t_ppf_matches_scipy_for_df_1_to_200(confidence: float) -> None:
    for df in range(1, 201):
        for p in (0.5 + confidence / 2, 0.5 - confidence / 2):
            assert abs(t_ppf(p, df) - sps.t.ppf(p, df)) < 1e-6, (df, p)


def test_t_ppf_fractional_df_and_extremes() -> None:
    for df in (0.5, 1.5, 2.5, 7.3, 1000.0, 1e6):
        for p in (1e-6, 0.01, 0.3, 0.7, 0.99):
            assert t_ppf(p, df) == pytest.approx(sps.t.ppf(p, df), rel=1e-8, abs=1e-8)
    assert t_ppf(0.5, 3) == 0.0
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        t_ppf(1.0, 3)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_ppf(0.9, 0)


def test_t_cdf_matches_scipy() -> None:
    for df in (1, 2, 3, 10, 57):
        for t in (-40.0, -2.0, -0.1, 0.0, 0.7, 3.0, 100.0):
            assert t_cdf(t, df) == pytest.approx(sps.t.cdf(t, df), abs=1e-12)
    assert t_cdf(math.inf, 4) == 1.0 and t_cdf(-math.inf, 4) == 0.0


# ------------------------------------------------------------------------------ intervals


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (0, 20), (20, 20), (3, 10), (85, 100), (1, 200)]
)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k: int, n: int, confidence: float) -> None:
    iv = wilson_interval(k, n, confidence)
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert (iv.low, iv.high) == (
        pytest.approx(ref.low, abs=1e-12),
        pytest.approx(ref.high, abs=1e-12),
    )
    assert iv.estimate == k / n and iv.method == "wilson" and iv.n == n


def test_wilson_edges_are_exact() -> None:
    assert wilson_interval(0, 10).low == 0.0
    assert wilson_interval(10, 10).high == 1.0
    # 100% of 10 cases proves no more than 10 / (10 + z**2)
    z = sps.norm.ppf(0.975)
    assert wilson_interval(10, 10).low == pytest.approx(10 / (10 + z * z), abs=1e-12)
    with pytest.raises(ValueError, match="at least one trial"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 3, 1.0)


def test_t_interval_matches_scipy() -> None:
    values = [0.2, 0.9, 0.75, 0.6, 1.0, 0.3]
    iv = t_interval(values, 0.9)
    low, high = sps.t.interval(0.9, len(values) - 1, loc=sps.tmean(values), scale=sps.sem(values))
    assert iv.low == pytest.approx(low, abs=1e-10) and iv.high == pytest.approx(high, abs=1e-10)
    assert iv.estimate == pytest.approx(sum(values) / 6) and iv.method == "t"


def test_one_value_has_an_unbounded_interval() -> None:
    iv = t_interval([0.7])
    assert (iv.estimate, iv.low, iv.high) == (0.7, -math.inf, math.inf)
    assert cluster_mean_interval([[0.5, 0.7]]).low == -math.inf
    assert cluster_bootstrap_interval([[0.5, 0.7]]).high == math.inf
    with pytest.raises(ValueError, match="at least one value"):
        t_interval([])


def test_cluster_interval_with_equal_sizes_is_the_t_interval_of_case_means() -> None:
    groups = [[0.1, 0.3, 0.2], [0.9, 1.0, 0.8], [0.5, 0.5, 0.6], [0.7, 0.4, 0.4]]
    iv = cluster_mean_interval(groups)
    ref = t_interval([sum(g) / 3 for g in groups])
    assert (iv.estimate, iv.low, iv.high) == (
        pytest.approx(ref.estimate),
        pytest.approx(ref.low, abs=1e-12),
        pytest.approx(ref.high, abs=1e-12),
    )
    assert iv.method == "cluster-t" and iv.n == 4


def test_cluster_interval_with_unequal_sizes_matches_a_hand_computation() -> None:
    groups = [[1.0], [0.0, 0.0, 1.0], [0.5, 0.5], [1.0, 1.0, 1.0, 0.0]]
    n_total = 10
    mean = 6.0 / n_total
    resid = sum((sum(g) - len(g) * mean) ** 2 for g in groups)
    se = math.sqrt(4 / 3 * resid) / n_total
    half = sps.t.ppf(0.975, 3) * se
    iv = cluster_mean_interval(groups)
    assert iv.estimate == pytest.approx(0.6)
    assert iv.low == pytest.approx(mean - half, abs=1e-12)
    assert iv.high == pytest.approx(mean + half, abs=1e-12)


def test_cluster_interval_is_wider_than_the_naive_one_when_samples_are_correlated() -> None:
    # each case repeats its score: records are not independent, the cluster interval knows it
    groups = [[s] * 5 for s in (0.1, 0.9, 0.4, 0.6, 0.8, 0.2)]
    naive = t_interval([v for g in groups for v in g])
    clustered = cluster_mean_interval(groups)
    assert clustered.high - clustered.low > 2 * (naive.high - naive.low)


def test_cluster_bootstrap_is_seeded_and_agrees_with_the_cluster_t_interval() -> None:
    import random

    rng = random.Random(7)
    groups = []
    for _ in range(150):
        base = rng.random()
        groups.append(
            [min(1.0, max(0.0, base + rng.gauss(0, 0.1))) for _ in range(rng.randint(1, 4))]
        )
    a = cluster_bootstrap_interval(groups, seed=3)
    b = cluster_bootstrap_interval(groups, seed=3)
    c = cluster_bootstrap_interval(groups, seed=4)
    assert a == b and a != c
    ref = cluster_mean_interval(groups)
    assert a.estimate == pytest.approx(ref.estimate)
    assert a.low == pytest.approx(ref.low, abs=0.01) and a.high == pytest.approx(ref.high, abs=0.01)
    assert a.method == "cluster-bootstrap"


# ------------------------------------------------------------------------------ reducers


def test_score_reducers_rederive_the_verdict_from_the_reduced_score() -> None:
    c = case("c", 0.9, 0.2, 0.7, min=0.6)
    got = {r: reduce_case(c, r) for r in ("mean", "median", "min", "max")}
    assert got["mean"].score == pytest.approx(0.6) and got["mean"].passed is True
    assert got["median"].score == 0.7 and got["median"].passed is True
    assert got["min"].score == 0.2 and got["min"].passed is False
    assert got["max"].score == 0.9 and got["max"].passed is True
    assert all(r.flaky and r.n_samples == 3 and r.n_errors == 0 for r in got.values())


def test_max_bound_is_checked_too() -> None:
    c = CaseSamples("c", (Sample(0.3, True), Sample(0.5, False)), max=0.4)
    assert reduce_case(c, "mean").passed is True  # mean 0.4 <= 0.4
    assert reduce_case(c, "max").passed is False


def test_without_a_bound_a_score_reducer_passes_only_if_every_sample_passed() -> None:
    c = verdict_case("c", True, True, False)
    assert reduce_case(c, "mean").passed is False
    assert reduce_case(verdict_case("d", True, True), "median").passed is True
    no_verdict = case("e", 0.4, 0.6)
    r = reduce_case(no_verdict, "mean")
    assert r.score == pytest.approx(0.5) and r.passed is None and not r.flaky


def test_verdict_reducers() -> None:
    two_of_three = verdict_case("a", True, False, True)
    tie = verdict_case("b", True, False)
    one_of_three = verdict_case("c", False, False, True)
    assert reduce_case(two_of_three, "majority").passed is True
    assert reduce_case(tie, "majority").passed is False  # a tie fails
    assert reduce_case(one_of_three, "majority").passed is False
    assert reduce_case(one_of_three, "pass_at_k").passed is True
    assert reduce_case(verdict_case("d", False, False), "pass_at_k").passed is False
    assert reduce_case(two_of_three, "pass_all").passed is False
    assert reduce_case(verdict_case("e", True, True), "pass_all").passed is True
    assert reduce_case(two_of_three, "pass_at_k").score == pytest.approx(2 / 3)


@pytest.mark.parametrize("reducer", REDUCERS)
def test_an_errored_sample_makes_the_case_an_error_never_a_pass(reducer: str) -> None:
    c = case("c", 1.0, None, 1.0, min=0.5)
    r = reduce_case(c, reducer)
    assert (r.score, r.passed, r.n_errors, r.n_samples) == (None, None, 1, 3)
    # an error string with a score is an error too
    c2 = CaseSamples("c2", (Sample(1.0, True), Sample(1.0, True, error="bad input")))
    assert reduce_case(c2, reducer).passed is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_score_is_an_error_sample(bad: float) -> None:
    c = CaseSamples("c", (Sample(1.0, True), Sample(bad, True)))
    r = reduce_case(c, "pass_at_k")
    assert (r.score, r.passed, r.n_errors) == (None, None, 1)
    g = evaluate_gate(GateSpec("s", min_mean=0.0), [c, case("d", 1.0)])
    assert g.verdict == "error" and g.n_errors == 1


def test_unknown_reducer() -> None:
    with pytest.raises(ValueError, match="unknown reducer 'avg'"):
        reduce_case(case("c", 1.0), "avg")


def test_flaky_cases_lists_disagreeing_cases_in_order() -> None:
    cases = [
        verdict_case("a", True, True),
        verdict_case("b", True, False),
        CaseSamples("c", (Sample(None, None, "x"), Sample(1.0, True), Sample(0.0, False))),
        verdict_case("d", False),
    ]
    assert flaky_cases(cases) == ["b", "c"]


# ------------------------------------------------------------------------------ gate spec


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "no bound given"),
        ({"min_mean": 0.5, "confidence": 1.0}, "confidence must be strictly between 0 and 1"),
        ({"min_mean": 0.5, "confidence": 0}, "confidence must be strictly between 0 and 1"),
        ({"min_pass_rate": 1.2}, "min_pass_rate is a fraction of cases"),
        ({"max_pass_rate": -0.1}, "max_pass_rate is a fraction of cases"),
        ({"min_mean": 0.8, "max_mean": 0.2}, "min_mean=0.8 is above max_mean=0.2"),
        ({"min_pass_rate": 0.8, "max_pass_rate": 0.2}, "min_pass_rate=0.8 is above"),
        ({"min_mean": 0.5, "reducer": "avg"}, "unknown reducer 'avg'"),
        ({"min_mean": math.nan}, "min_mean must be a finite number"),
        ({"min_mean": "0.5"}, "min_mean must be a finite number"),
        ({"min_mean": True}, "min_mean must be a finite number"),
        ({"min_mean": 0.5, "max_errors": -1}, "max_errors must be >= 0"),
        ({"min_mean": 0.5, "score_range": (1.0, 0.0)}, "must have low < high"),
        ({"min_mean": 0.5, "score_range": (0.0, 1.0, 2.0)}, "must be a \\(low, high\\) pair"),
        ({"min_mean": 0.5, "score_range": (0.0, math.nan)}, "must be two numbers"),
        ({"min_mean": 0.5, "score_range": (math.inf, math.inf)}, "must have low < high"),
    ],
)
def test_gate_spec_validation(kwargs: dict[str, object], message: str) -> None:
    spec = GateSpec("faithfulness", source="marker at test_x.py:12", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message) as info:
        spec.validate()
    assert "'faithfulness'" in str(info.value) and "test_x.py:12" in str(info.value)


def test_a_valid_spec_validates() -> None:
    GateSpec("x", min_mean=0.1, max_mean=0.1, min_pass_rate=0, confidence=0.9).validate()
    assert VERDICTS == ("pass", "fail", "inconclusive", "error")


# ------------------------------------------------------------------------------ gates


def rate_cases(passes: int, fails: int) -> list[CaseSamples]:
    return [verdict_case(f"p{i}", True) for i in range(passes)] + [
        verdict_case(f"f{i}", False) for i in range(fails)
    ]


def test_point_estimate_gate_without_confidence() -> None:
    cases = rate_cases(9, 1)
    assert evaluate_gate(GateSpec("s", min_pass_rate=0.9), cases).verdict == "pass"
    assert evaluate_gate(GateSpec("s", min_pass_rate=0.91), cases).verdict == "fail"
    r = evaluate_gate(GateSpec("s", min_mean=0.85, max_pass_rate=0.95), cases)
    assert r.verdict == "pass" and [c.verdict for c in r.checks] == ["pass", "pass"]
    assert [c.metric for c in r.checks] == ["mean", "pass_rate"]
    assert (r.n_cases, r.n_scored, r.n_errors, r.n_samples) == (10, 10, 0, 10)
    assert all(c.needed is None for c in r.checks)


def test_confident_pass_rate_gate_pass_fail_inconclusive() -> None:
    # 190/200: Wilson 95% low = 0.910 > 0.9 -> pass
    assert (
        evaluate_gate(
            GateSpec("s", min_pass_rate=0.9, confidence=0.95), rate_cases(190, 10)
        ).verdict
        == "pass"
    )
    # 160/200: high = 0.849 < 0.9 -> fail
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.9, confidence=0.95), rate_cases(160, 40))
    assert r.verdict == "fail" and r.checks[0].interval is not None
    assert r.checks[0].interval.high < 0.9
    # 18/20: straddles
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.8, confidence=0.95), rate_cases(18, 2))
    assert r.verdict == "inconclusive" and r.checks[0].needed is not None and r.checks[0].needed > 0
    assert "straddles the bound 0.8" in r.reason


def test_max_side_gates() -> None:
    spec = GateSpec("toxicity", max_mean=0.3, confidence=0.95)
    low_scores = [case(f"c{i}", 0.05 + 0.01 * (i % 5)) for i in range(30)]
    high_scores = [case(f"c{i}", 0.6 + 0.01 * (i % 5)) for i in range(30)]
    assert evaluate_gate(spec, low_scores).verdict == "pass"
    assert evaluate_gate(spec, high_scores).verdict == "fail"


def test_the_gate_verdict_is_the_worst_check() -> None:
    cases = rate_cases(190, 10)
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.9, max_pass_rate=0.96, confidence=0.95), cases)
    assert [c.verdict for c in r.checks] == ["pass", "inconclusive"] and r.verdict == "inconclusive"
    r = evaluate_gate(GateSpec("s", min_mean=0.9, max_pass_rate=0.5, confidence=0.95), cases)
    assert [c.verdict for c in r.checks] == ["pass", "fail"] and r.verdict == "fail"


def test_errors_make_the_gate_an_error_and_are_counted() -> None:
    cases = [*rate_cases(100, 0), case("bad", None)]
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.5), cases)
    assert r.verdict == "error" and r.n_errors == 1 and r.n_scored == 100
    assert "1 of 101 cases could not be scored (max_errors=0)" in r.reason
    assert all(c.verdict == "error" for c in r.checks)
    allowed = evaluate_gate(GateSpec("s", min_pass_rate=0.5, max_errors=1), cases)
    assert allowed.verdict == "pass" and allowed.n_errors == 1
    # the errored case is not counted as a pass
    assert allowed.checks[0].interval is not None and allowed.checks[0].interval.n == 100


def test_no_scored_case_is_an_error() -> None:
    r = evaluate_gate(GateSpec("s", min_mean=0.1, max_errors=5), [case("a", None), case("b", None)])
    assert r.verdict == "error" and "none of the 2 cases could be scored" in r.reason
    r = evaluate_gate(GateSpec("s", min_mean=0.1), [])
    assert r.verdict == "error" and r.n_cases == 0


def test_a_pass_rate_gate_says_how_many_scored_cases_had_no_verdict() -> None:
    cases = [*rate_cases(3, 1), case("no-bound", 0.7)]
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.5), cases)
    assert r.checks[0].interval is not None and r.checks[0].interval.n == 4
    assert r.checks[0].reason == "1 scored case(s) have no pass/fail verdict and are not counted"


def test_a_pass_rate_gate_without_case_verdicts_is_an_error() -> None:
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.5), [case("a", 0.4), case("b", 0.9)])
    assert r.verdict == "error" and "no case has a pass/fail verdict" in r.reason


def test_a_single_case_cannot_clear_a_bound_with_confidence() -> None:
    one = [case("only", 1.0, min=0.5)]
    r = evaluate_gate(GateSpec("s", min_mean=0.5, confidence=0.95), one)
    assert r.verdict == "inconclusive" and "one scored case" in r.reason
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.5, confidence=0.95), one)
    assert r.verdict == "inconclusive"  # Wilson(1/1) low = 0.21
    # a trivially met bound is met
    assert evaluate_gate(GateSpec("s", min_pass_rate=0.0, confidence=0.95), one).verdict == "pass"
    # without confidence the point estimate decides
    assert evaluate_gate(GateSpec("s", min_mean=0.5), one).verdict == "pass"


def test_equal_scores_without_a_range_are_inconclusive_with_confidence() -> None:
    cases = [case(f"c{i}", 1.0) for i in range(5)]
    r = evaluate_gate(GateSpec("s", min_mean=0.9, confidence=0.95), cases)
    assert r.verdict == "inconclusive" and "all 5 case scores are equal" in r.reason


def test_a_known_range_keeps_five_perfect_cases_from_proving_a_mean_of_0_9() -> None:
    few = [case(f"c{i}", 1.0) for i in range(5)]
    spec = GateSpec("s", min_mean=0.9, confidence=0.95, score_range=(0.0, 1.0))
    r = evaluate_gate(spec, few)
    z2 = sps.norm.ppf(0.975) ** 2
    assert r.verdict == "inconclusive"
    assert r.checks[0].interval is not None
    assert r.checks[0].interval.low == pytest.approx(5 / (5 + z2))
    # the same as the Wilson bound of 5/5; 35 perfect cases do prove it: 35/(35+3.84) = 0.901
    assert r.checks[0].needed == 30
    many = [case(f"c{i}", 1.0) for i in range(35)]
    assert evaluate_gate(spec, many).verdict == "pass"
    assert evaluate_gate(spec, many[:34]).verdict == "inconclusive"


def test_a_half_unbounded_range_floors_only_its_finite_side() -> None:
    # readability's range is (-inf, 206.84): dispersed scores give the plain t interval
    scores = [55.0, 61.0, 70.5, 48.0, 66.0, 59.5, 72.0, 63.0, 58.0, 65.5]
    spec = GateSpec("readability", min_mean=50.0, confidence=0.95, score_range=(-math.inf, 206.84))
    r = evaluate_gate(spec, [case(f"c{i}", s) for i, s in enumerate(scores)])
    ref = t_interval(scores)
    assert r.verdict == "pass" and r.checks[0].interval is not None
    assert r.checks[0].interval.low == pytest.approx(ref.low)
    assert r.checks[0].interval.high > ref.high  # floored towards 206.84 (10 cases)
    # all equal: the unbounded side has no floor, so nothing can be claimed
    same = [case(f"c{i}", 60.0) for i in range(30)]
    r = evaluate_gate(spec, same)
    assert r.verdict == "inconclusive" and "not known or not bounded" in r.reason
    assert r.checks[0].interval is not None and r.checks[0].interval.low == -math.inf


def test_needed_is_about_what_doubling_the_data_decides() -> None:
    scores = [0.95, 0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.9, 0.75, 0.95, 0.8, 0.9]
    spec = GateSpec("s", min_mean=0.79, confidence=0.95)
    r = evaluate_gate(spec, [case(f"c{i}", s) for i, s in enumerate(scores)])
    assert r.verdict == "inconclusive"
    needed = r.checks[0].needed
    assert needed is not None and 0 < needed <= len(scores)
    doubled = [case(f"c{i}", s) for i, s in enumerate(scores * 2)]
    assert evaluate_gate(spec, doubled).verdict == "pass"
    # reference: the smallest n whose t half-width at the same mean and sd clears the bound
    mean, sd = sum(scores) / 12, float(sps.tstd(scores))
    first = next(n for n in range(2, 1000) if sps.t.ppf(0.975, n - 1) * sd / n**0.5 <= mean - 0.79)
    assert needed == first - 12


def test_needed_for_a_pass_rate_matches_a_direct_search() -> None:
    spec = GateSpec("s", min_pass_rate=0.8, confidence=0.95)
    r = evaluate_gate(spec, rate_cases(18, 2))  # 90% of 20
    needed = r.checks[0].needed
    assert needed is not None
    total = 20 + needed
    # at the same 90% rate, every size from `total` on clears 0.8 and every size below does not
    for j in range(2, 40):
        clears = wilson_interval(9 * j, 10 * j).low >= 0.8
        assert clears == (10 * j >= total), (j, total)


def test_needed_is_none_when_the_estimate_sits_on_the_bound() -> None:
    r = evaluate_gate(GateSpec("s", min_pass_rate=0.9, confidence=0.95), rate_cases(18, 2))
    assert r.verdict == "inconclusive" and r.checks[0].needed is None


def test_reducer_changes_the_case_verdicts_of_a_gate() -> None:
    cases = [verdict_case(f"c{i}", True, True, False) for i in range(10)]
    assert (
        evaluate_gate(GateSpec("s", min_pass_rate=1.0, reducer="majority"), cases).verdict == "pass"
    )
    assert (
        evaluate_gate(GateSpec("s", min_pass_rate=0.1, reducer="pass_all"), cases).verdict == "fail"
    )
    r = evaluate_gate(GateSpec("s", min_pass_rate=1.0, reducer="pass_at_k"), cases)
    assert r.verdict == "pass" and r.n_samples == 30 and len(r.flaky) == 10


def test_gate_result_json_is_strict_json() -> None:
    r = evaluate_gate(GateSpec("s", min_mean=0.5, confidence=0.9), [case("a", 0.7, min=0.5)])
    data = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert data["verdict"] == "inconclusive"
    assert data["checks"][0]["interval"]["low"] is None  # -inf has no JSON spelling
    assert data["cases"] == [
        {"case": "a", "score": 0.7, "passed": True, "n_samples": 1, "n_errors": 0, "flaky": False}
    ]
    assert data["spec"]["min_mean"] == 0.5 and data["n_errors"] == 0


def test_evaluate_gate_validates_the_spec() -> None:
    with pytest.raises(ValueError, match="no bound given"):
        evaluate_gate(GateSpec("s"), [case("a", 1.0)])


# ------------------------------------------------------------------------------ scorer stats


def test_scorer_stats() -> None:
    cases = [
        case("a", 1.0, 1.0, min=0.5),
        case("b", 0.0, 1.0, min=0.5),
        case("c", 0.2, 0.4, min=0.5),
        case("d", 0.9, None, min=0.5),
    ]
    st = scorer_stats("exact", cases)
    assert (st.n_cases, st.n_samples, st.n_errors, st.flaky) == (4, 8, 1, ("b",))
    # over cases: a 1.0, b 0.5, c 0.3 (d has an errored sample: unscored, as in a gate)
    assert st.mean is not None and st.mean.estimate == pytest.approx(0.6)
    assert st.mean == t_interval([1.0, 0.5, 0.3])
    # one name, one meaning: a mean gate at the same confidence prints the same interval
    gate = evaluate_gate(GateSpec("exact", min_mean=0.1, confidence=0.95, max_errors=1), cases)
    assert gate.checks[0].interval == st.mean
    # case verdicts (mean reducer): a pass, b mean 0.5 pass, c fail, d error (excluded)
    assert st.pass_rate == wilson_interval(2, 3)
    data = json.loads(json.dumps(st.to_json(), allow_nan=False))
    assert data["flaky"] == ["b"] and data["pass_rate"]["n"] == 3


# ------------------------------------------------------------------------------ properties


confidences = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999]) | st.floats(0.5, 0.999)
unit = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 5000), frac=unit, confidence=confidences)
def test_prop_wilson_matches_scipy(n: int, frac: float, confidence: float) -> None:
    k = round(frac * n)  # includes 0% and 100%
    iv = wilson_interval(k, n, confidence)
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert iv.low == pytest.approx(ref.low, abs=1e-10)
    assert iv.high == pytest.approx(ref.high, abs=1e-10)
    assert 0.0 <= iv.low <= iv.estimate <= iv.high <= 1.0


@settings(max_examples=300, deadline=None)
@given(df=st.integers(1, 200) | st.floats(0.5, 2000.0), p=st.floats(1e-5, 1 - 1e-5))
def test_prop_t_ppf_matches_scipy(df: float, p: float) -> None:
    ref = float(sps.t.ppf(p, df))
    assert abs(t_ppf(p, df) - ref) <= 1e-6 * max(1.0, abs(ref))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60), confidence=confidences)
def test_prop_t_interval_matches_scipy(values: list[float], confidence: float) -> None:
    sem = float(sps.sem(values))
    assume(sem > 1e-9)
    iv = t_interval(values, confidence)
    mean = float(np.mean(values))
    low, high = sps.t.interval(confidence, len(values) - 1, loc=mean, scale=sem)
    tol = 1e-7 * max(1.0, abs(high - low))
    assert iv.low == pytest.approx(low, abs=tol) and iv.high == pytest.approx(high, abs=tol)


groups_strategy = st.lists(st.lists(unit, min_size=1, max_size=6), min_size=2, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    groups=groups_strategy, confidence=confidences, shift=st.floats(-5, 5), scale=st.floats(0.1, 10)
)
def test_prop_cluster_interval_is_shift_scale_equivariant_and_order_free(
    groups: list[list[float]], confidence: float, shift: float, scale: float
) -> None:
    iv = cluster_mean_interval(groups, confidence)
    moved = cluster_mean_interval([[shift + scale * v for v in g] for g in groups], confidence)
    tol = 1e-9 * scale * max(1.0, abs(iv.low), abs(iv.high)) + 1e-9 * abs(shift)
    assert moved.low == pytest.approx(shift + scale * iv.low, abs=tol)
    assert moved.high == pytest.approx(shift + scale * iv.high, abs=tol)
    assert cluster_mean_interval(list(reversed(groups)), confidence).low == pytest.approx(iv.low)
    assert iv.low <= iv.estimate <= iv.high


@settings(max_examples=100, deadline=None)
@given(groups=groups_strategy, size=st.integers(1, 5), confidence=confidences)
def test_prop_cluster_interval_equal_sizes_equals_t_over_case_means(
    groups: list[list[float]], size: int, confidence: float
) -> None:
    groups = [(g * size)[:size] for g in groups]
    iv = cluster_mean_interval(groups, confidence)
    ref = t_interval([sum(g) / size for g in groups], confidence)
    assert iv.low == pytest.approx(ref.low, abs=1e-9) and iv.high == pytest.approx(
        ref.high, abs=1e-9
    )


def numpy_cluster_bootstrap(
    groups: list[list[float]], confidence: float, seed: int
) -> tuple[float, float]:
    """Reference: a plain seeded numpy percentile bootstrap over whole groups."""
    rng = np.random.default_rng(seed)
    sums = np.array([sum(g) for g in groups])
    sizes = np.array([len(g) for g in groups])
    idx = rng.integers(0, len(groups), size=(20000, len(groups)))
    means = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    alpha = 1 - confidence
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_groups=st.integers(30, 80),
    confidence=st.sampled_from([0.9, 0.95]),
)
def test_prop_cluster_bootstrap_agrees_with_a_numpy_bootstrap(
    seed: int, n_groups: int, confidence: float
) -> None:
    rng = _random.Random(seed)
    groups = []
    for _ in range(n_groups):
        base = rng.betavariate(2, 1)
        groups.append(
            [rng.betavariate(1 + 8 * base, 1 + 8 * (1 - base)) for _ in range(rng.randint(1, 5))]
        )
    iv = cluster_bootstrap_interval(groups, confidence, resamples=4000, seed=seed)
    low, high = numpy_cluster_bootstrap(groups, confidence, seed)
    width = high - low
    # Monte Carlo error of a 4000-resample percentile is a few percent of the width
    assert abs(iv.low - low) <= 0.12 * width and abs(iv.high - high) <= 0.12 * width
    assert iv == cluster_bootstrap_interval(groups, confidence, resamples=4000, seed=seed)


samples_strategy = st.lists(
    st.tuples(unit, st.sampled_from([True, False, None]), st.booleans()), min_size=1, max_size=9
)


def reference_reduce(
    rows: list[tuple[float, bool | None, bool]], reducer: str, lo: float | None
) -> tuple[float | None, bool | None]:
    if any(err for _, _, err in rows):
        return None, None
    scores = [s for s, _, _ in rows]
    verdicts = [p for _, p, _ in rows if p is not None]
    stat = {
        "mean": _statistics.fmean,
        "median": _statistics.median,
        "min": min,
        "max": max,
    }
    if reducer in stat:
        score = float(stat[reducer](scores))
        if lo is not None:
            return score, score >= lo
        return score, (all(verdicts) if verdicts else None)
    score = _statistics.fmean(scores)
    if not verdicts:
        return score, None
    if reducer == "majority":
        return score, verdicts.count(True) > verdicts.count(False)
    if reducer == "pass_at_k":
        return score, True in verdicts
    return score, False not in verdicts


@settings(max_examples=400, deadline=None)
@given(rows=samples_strategy, reducer=st.sampled_from(REDUCERS), lo=st.none() | unit)
def test_prop_reducers_match_a_reference(
    rows: list[tuple[float, bool | None, bool]], reducer: str, lo: float | None
) -> None:
    samples = tuple(
        Sample(None if err else s, None if err else p, "boom" if err else None, i)
        for i, (s, p, err) in enumerate(rows)
    )
    r = reduce_case(CaseSamples("k", samples, min=lo), reducer)
    score, passed = reference_reduce(rows, reducer, lo)
    assert r.passed is passed
    assert (r.score is None) == (score is None)
    if score is not None and r.score is not None:
        assert r.score == pytest.approx(score, abs=1e-12)
    assert r.n_errors == sum(err for _, _, err in rows) and r.n_samples == len(rows)
    ok = {p for _, p, err in rows if not err and p is not None}
    assert r.flaky == (ok == {True, False})
    if r.n_errors:
        assert r.passed is None  # an error is never a pass


def gate_cases(rows: list[tuple[float, bool]]) -> list[CaseSamples]:
    return [CaseSamples(f"c{i}", (Sample(s, p),)) for i, (s, p) in enumerate(rows)]


rows_strategy = st.lists(st.tuples(unit, st.booleans()), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    rows=rows_strategy,
    bound=unit,
    metric=st.sampled_from(["min_mean", "max_mean", "min_pass_rate", "max_pass_rate"]),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
    score_range=st.sampled_from([None, (0.0, 1.0)]),
)
def test_prop_gate_verdicts_are_consistent(
    rows: list[tuple[float, bool]],
    bound: float,
    metric: str,
    confidence: float,
    score_range: tuple[float, float] | None,
) -> None:
    cases = gate_cases(rows)
    spec = GateSpec("s", confidence=confidence, score_range=score_range, **{metric: bound})  # type: ignore[arg-type]
    r = evaluate_gate(spec, cases)
    (check,) = r.checks
    assert r.verdict == check.verdict and r.verdict in ("pass", "fail", "inconclusive")
    iv = check.interval
    assert iv is not None
    side_min = metric.startswith("min")
    point = evaluate_gate(GateSpec("s", **{metric: bound}), cases).verdict  # type: ignore[arg-type]
    # a confident verdict agrees with the point estimate, and follows the interval exactly
    if r.verdict in ("pass", "fail"):
        assert r.verdict == point
    if r.verdict == "pass":
        assert (iv.low >= bound) if side_min else (iv.high <= bound)
    if r.verdict == "fail":
        assert (iv.high < bound) if side_min else (iv.low > bound)
    if r.verdict == "inconclusive":
        assert iv.low <= bound + 1e-12 and iv.high >= bound - 1e-12
    else:
        assert check.needed is None
    # a single case never decides a mean check with confidence
    if len(rows) == 1 and metric.endswith("mean"):
        assert r.verdict == "inconclusive"
    # less confidence never turns a pass into a non-pass
    if r.verdict == "pass":
        lower = GateSpec(
            "s", confidence=confidence / 2 + 0.25, score_range=score_range, **{metric: bound}
        )  # type: ignore[arg-type]
        assert evaluate_gate(lower, cases).verdict == "pass"


@settings(max_examples=200, deadline=None)
@given(
    rows=rows_strategy,
    n_bad=st.integers(1, 5),
    max_errors=st.integers(0, 5),
    confidence=st.none() | st.just(0.95),
)
def test_prop_errors_beyond_the_allowance_never_pass(
    rows: list[tuple[float, bool]], n_bad: int, max_errors: int, confidence: float | None
) -> None:
    cases = gate_cases(rows) + [
        CaseSamples(f"bad{i}", (Sample(None, None, "judge failed"),)) for i in range(n_bad)
    ]
    spec = GateSpec(
        "s", min_pass_rate=0.0, min_mean=0.0, confidence=confidence, max_errors=max_errors
    )
    r = evaluate_gate(spec, cases)
    assert r.n_errors == n_bad and r.n_scored == len(rows)
    if n_bad > max_errors:
        assert r.verdict == "error" and all(c.verdict == "error" for c in r.checks)
    else:
        # trivially met bounds: the point estimate passes; with confidence the pass rate
        # (Wilson low >= 0) passes and the mean can be inconclusive for tiny samples only
        assert r.verdict in ("pass", "inconclusive")
        assert r.checks[1].verdict == "pass"


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 400),
    bound=st.floats(0.01, 0.99),
    confidence=st.sampled_from([0.9, 0.95, 0.99]),
)
def test_prop_all_pass_and_all_fail_datasets(n: int, bound: float, confidence: float) -> None:
    z2 = float(sps.norm.ppf(0.5 + confidence / 2)) ** 2
    all_pass = rate_cases(n, 0)
    all_fail = rate_cases(0, n)
    r = evaluate_gate(GateSpec("s", min_pass_rate=bound, confidence=confidence), all_pass)
    # 100% of n proves a rate of at most n / (n + z**2)
    expected = "pass" if n / (n + z2) >= bound + 1e-12 else "inconclusive"
    if abs(n / (n + z2) - bound) > 1e-9:
        assert r.verdict == expected
    r = evaluate_gate(GateSpec("s", max_pass_rate=bound, confidence=confidence), all_fail)
    expected = "pass" if z2 / (n + z2) <= bound - 1e-12 else "inconclusive"
    if abs(z2 / (n + z2) - bound) > 1e-9:
        assert r.verdict == expected
    r = evaluate_gate(GateSpec("s", min_pass_rate=bound, confidence=confidence), all_fail)
    assert r.verdict in ("fail", "inconclusive")
    if r.verdict == "inconclusive":
        assert r.checks[0].needed is not None


def test_case_result_is_exported() -> None:
    r = reduce_case(case("x", 0.5, min=0.5))
    assert r == CaseResult("x", 0.5, True, 1, 0, False)


def test_intervals_are_cut_to_the_scorers_range() -> None:
    # Four cases near the top of a 0..1 scorer: the raw interval reaches past 1.0, which no
    # mean of such scores can; cut to the range it ends at 1.0 (and the low end is unchanged).
    cases = [
        CaseSamples(f"c{i}", tuple(Sample(v, True) for v in vals), min=0.5)
        for i, vals in enumerate([[1.0, 1.0], [1.0, 1.0], [0.6, 0.7], [1.0, 0.9]])
    ]
    raw = scorer_stats("s", cases).mean
    cut = scorer_stats("s", cases, score_range=(0.0, 1.0)).mean
    assert raw is not None and cut is not None
    assert raw.high > 1.0
    assert cut.high == 1.0 and cut.estimate == raw.estimate
    unbounded = scorer_stats("s", cases, score_range=(-math.inf, math.inf)).mean
    assert unbounded == raw
    # the statistics' interval is the gate's (same range, same confidence)
    gate = evaluate_gate(
        GateSpec("s", min_mean=0.6, confidence=0.95, score_range=(0.0, 1.0)), cases
    )
    (check,) = gate.checks
    assert check.interval == cut


def test_one_sample_is_reduced_as_the_general_pass_reduces_it() -> None:
    """A case of one sample takes a short way (no lists); every reducer, bound, verdict and
    unusable score gives the CaseResult the general one-pass reduction gives (a NaN, an
    infinity, an error and a missing score are error cases, never a pass)."""
    from pytest_llmeval.core.stats import REDUCERS, Sample, _reduce, _reduce_samples

    scores = [0.0, 0.4, 0.5, 1.0, math.nan, math.inf, None]
    bounds = [(None, None), (0.5, None), (None, 0.5), (0.4, 0.6)]
    seen = set()
    for reducer in REDUCERS:
        for value in scores:
            for passed in (True, False, None):
                for error in (None, "JudgeError: down"):
                    for lo, hi in bounds:
                        sample = Sample(score=value, passed=passed, error=error)
                        one = _reduce("k", [sample], lo, hi, reducer)
                        assert one == _reduce_samples("k", [sample], lo, hi, reducer)
                        seen.add((one.score is None, one.passed))
    # every outcome occurred: scored passes and fails, unscored errors, no verdict
    assert seen == {(False, True), (False, False), (False, None), (True, None)}
    # a bound decides a mean case against the sample's own (stale) verdict
    assert _reduce("k", [Sample(score=0.4, passed=True)], 0.5, None, "mean").passed is False
    nan = Sample(score=math.nan, passed=True)
    assert _reduce("k", [nan], None, None, "pass_all").passed is None
