"""Comparing two runs (issue 10): the paired tests against scipy, their error rates on simulated
runs, record matching, and the plugin's --llm-eval-baseline / --llm-eval-fail-on-regression."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from pytest_llmeval.analysis.compare import (
    compare_reports,
    mcnemar_exact,
    sign_flip_test,
    smallest_p,
)
from pytest_llmeval.report.comparison import format_comparison

FIXED_X = [0.9, 0.7, 0.8, 1.0, 0.4, 0.65, 0.5, 0.95, 0.3, 0.85, 0.6, 0.72]


FIXED_Y = [0.8, 0.75, 0.6, 1.0, 0.2, 0.6, 0.55, 0.7, 0.3, 0.5, 0.55, 0.7]


def _scipy_paired_p(x: list[float], y: list[float]) -> float:
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")

    def statistic(a: Any, b: Any, axis: int) -> Any:
        return np.mean(a - b, axis=axis)

    res = stats.permutation_test(
        (np.array(y), np.array(x)),
        statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
        alternative="two-sided",
    )
    return float(res.pvalue)


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (FIXED_X, FIXED_Y),
        ([1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
        ([0.2, 0.4, 0.6], [0.3, 0.2, 0.6]),
        ([0.5] * 5, [0.5] * 5),
    ],
)
def test_exact_sign_flip_p_equals_scipy_permutation_test(x: list[float], y: list[float]) -> None:
    diffs = [b - a for a, b in zip(x, y, strict=True)]
    p, method = sign_flip_test(diffs)
    assert method == "exact"
    assert p == pytest.approx(_scipy_paired_p(x, y), abs=1e-12)


def test_exact_p_of_known_data() -> None:
    # 4 differences of +1: only the all-plus and all-minus patterns reach |sum| = 4 of 16
    assert sign_flip_test([1.0, 1.0, 1.0, 1.0]) == (2 / 16, "exact")
    assert sign_flip_test([]) == (1.0, "exact")
    assert sign_flip_test([0.0, 0.0]) == (1.0, "exact")


def test_smallest_p_is_a_property_of_the_number_of_cases_not_of_the_changed_ones() -> None:
    # 3 cases: even all three worse gives p = 2/8, so nothing can be concluded at 0.05
    assert smallest_p([-1.0, -1.0, -1.0]) == pytest.approx(0.25)
    assert smallest_p([-1.0, 0.0, 0.0]) == pytest.approx(0.25)
    # 30 cases, one changed: the test could have fired (all 30 worse gives about 3e-5); the data
    # simply show a change within noise, which is not "too few cases"
    one_of_30 = [0.0] * 29 + [-1.0]
    assert smallest_p(one_of_30) == pytest.approx(2 / 2**16)
    assert sign_flip_test(one_of_30)[0] == pytest.approx(1.0)
    assert smallest_p([]) == 1.0
    # beyond the exact range, Monte Carlo's floor
    assert smallest_p([-1.0] * 40, resamples=100_000) == pytest.approx(1 / 100_001)
    assert smallest_p([-1.0] * 40, resamples=100) == pytest.approx(2 / 2**16)


def test_monte_carlo_p_agrees_with_exact_within_its_error() -> None:
    rng = random.Random(7)
    diffs = [rng.gauss(0.05, 0.2) for _ in range(16)]
    exact, m1 = sign_flip_test(diffs)
    mc, m2 = sign_flip_test(diffs, exact_max=0, resamples=20_000, seed=3)
    assert (m1, m2) == ("exact", "monte-carlo")
    se = math.sqrt(exact * (1 - exact) / 20_000)
    assert abs(mc - exact) <= 4 * se + 1 / 20_000
    # seeded: the same seed gives the same p, another seed (in general) another
    assert sign_flip_test(diffs, exact_max=0, resamples=20_000, seed=3)[0] == mc


def test_monte_carlo_p_is_close_to_the_paired_t_test_on_many_cases() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    x = [rng.gauss(0.7, 0.15) for _ in range(200)]
    y = [a + rng.gauss(-0.012, 0.1) for a in x]
    p, method = sign_flip_test([b - a for a, b in zip(x, y, strict=True)], resamples=20_000)
    assert method == "monte-carlo"
    ref = float(stats.ttest_rel(y, x).pvalue)
    assert 0.001 < ref < 0.2  # the data make a p-value that is neither 0 nor 1
    assert p == pytest.approx(ref, abs=0.015)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (5, 0), (0, 7), (3, 3), (10, 2), (1, 9), (40, 25)])
def test_mcnemar_equals_scipy_binomtest(b: int, c: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    expected = 1.0 if b + c == 0 else float(stats.binomtest(b, b + c, 0.5).pvalue)
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-10, abs=1e-15)


def _report(scores: list[float], *, scorer: str = "quality", **extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "records": [
            {
                "file": "test_e.py",
                "test": "test_q",
                "case_id": f"c{i}",
                "scorer": scorer,
                "index": 0,
                "score": s,
                "passed": None,
                "error": None,
                **extra,
            }
            for i, s in enumerate(scores)
        ],
    }


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def test_no_true_change_gives_at_most_alpha_false_regressions() -> None:
    rng = random.Random(2026)
    runs, alpha, false_regressions, rejections = 400, 0.05, 0, 0
    for _ in range(runs):
        quality = [rng.uniform(0.3, 0.9) for _ in range(50)]
        base = [_clip(q + rng.gauss(0, 0.15)) for q in quality]
        cur = [_clip(q + rng.gauss(0, 0.15)) for q in quality]
        cmp = compare_reports(
            _report(base), _report(cur), alpha=alpha, resamples=1000, seed=rng.randrange(10**9)
        )
        (s,) = cmp.scorers
        false_regressions += s.verdict == "regressed"
        rejections += s.verdict in ("regressed", "improved")
    se = math.sqrt(alpha * (1 - alpha) / runs)
    # a drop with p < alpha (one side of the two-sided test) and any significant change
    assert false_regressions / runs <= alpha / 2 + 3 * se
    assert rejections / runs <= alpha + 3 * se
    assert rejections > 0  # the test is not simply unable to reject


def test_a_true_drop_of_0_1_on_100_cases_is_detected() -> None:
    rng = random.Random(99)
    detected = 0
    for _ in range(40):
        quality = [rng.uniform(0.3, 0.9) for _ in range(100)]
        base = [_clip(q + rng.gauss(0, 0.15)) for q in quality]
        cur = [_clip(q - 0.1 + rng.gauss(0, 0.15)) for q in quality]
        cmp = compare_reports(_report(base), _report(cur), resamples=2000)
        (s,) = cmp.scorers
        assert s.diff is not None and s.diff < 0
        detected += s.is_regression
    assert detected >= 38


def _rec(case: str, score: float | None, **kw: Any) -> dict[str, Any]:
    base = {
        "file": "test_e.py",
        "test": "test_q",
        "case_id": case,
        "scorer": kw.pop("scorer", "quality"),
        "index": kw.pop("index", 0),
        "score": score,
        "passed": kw.pop("passed", None),
        "error": kw.pop("error", None),
    }
    base.update(kw)
    return base


def test_a_case_is_the_mean_of_all_its_samples_on_each_side() -> None:
    base = {
        "records": [
            _rec("a", 1.0, sample=0),
            _rec("a", 0.0, sample=1),
            _rec("a", 0.5, sample=2),  # no sample 2 in the current run: counted, still used
            _rec("b", 0.2),  # no "sample": sample 0
        ]
    }
    cur = {
        "records": [
            _rec("a", 0.5, sample=0),
            _rec("a", 0.5, sample=1),
            _rec("b", 0.6, sample=0),
        ]
    }
    (s,) = compare_reports(base, cur).scorers
    assert s.n == 2
    assert (s.samples_only_baseline, s.samples_only_current) == (1, 0)
    by_case = {c.case: c for c in (*s.regressed, *s.improved)}
    assert set(by_case) == {"test_e.py::test_q[b]"}  # case a: mean 0.5 -> 0.5, unchanged
    assert by_case["test_e.py::test_q[b]"].delta == pytest.approx(0.4)
    assert s.baseline_mean == pytest.approx((0.5 + 0.2) / 2)
    assert s.current_mean == pytest.approx((0.5 + 0.6) / 2)


def test_one_side_only_and_errored_cases_are_counted_and_listed() -> None:
    base = {"records": [_rec("a", 1.0), _rec("b", 1.0), _rec("gone", 0.7), _rec("e", 0.3)]}
    cur = {
        "records": [
            _rec("a", 0.0),
            _rec("b", 1.0),
            _rec("new", 0.1),
            _rec("e", None, error="JudgeError: 500"),
        ]
    }
    (s,) = compare_reports(base, cur).scorers
    assert s.n == 2
    assert s.only_baseline == ("test_e.py::test_q[gone]",)
    assert s.only_current == ("test_e.py::test_q[new]",)
    assert s.errored == ("test_e.py::test_q[e]",)
    text = "\n".join(format_comparison(compare_reports(base, cur)))
    assert "1 case(s) only in the baseline: test_e.py::test_q[gone]" in text
    assert "1 case(s) only in the current run: test_e.py::test_q[new]" in text
    assert "1 case(s) without a score on one side (error): test_e.py::test_q[e]" in text


def test_assertion_index_is_part_of_the_match() -> None:
    base = {"records": [_rec("a", 1.0, index=0), _rec("a", 0.0, index=1)]}
    cur = {"records": [_rec("a", 1.0, index=0), _rec("a", 0.0, index=1)]}
    (s,) = compare_reports(base, cur).scorers
    assert s.n == 2 and s.diff == 0.0 and s.verdict == "unchanged"


def test_regressed_cases_biggest_first_with_both_outputs() -> None:
    base = {
        "records": [
            _rec(c, 1.0, inputs={"output": f"old {c}"}, passed=True) for c in ("a", "b", "c")
        ]
    }
    cur = {
        "records": [
            _rec("a", 0.8, inputs={"output": "new a"}, passed=True),
            _rec("b", 0.1, inputs={"output": "new b"}, passed=False),
            _rec("c", 0.5, inputs={"output": "new c"}, passed=False),
        ]
    }
    (s,) = compare_reports(base, cur).scorers
    assert [c.case.split("[")[1] for c in s.regressed] == ["b]", "c]", "a]"]
    assert (s.regressed[0].baseline_output, s.regressed[0].current_output) == ("old b", "new b")
    assert (s.flips_worse, s.flips_better) == (2, 0)
    assert s.mcnemar_p == pytest.approx(0.5)
    text = "\n".join(format_comparison(compare_reports(base, cur)))
    assert "test_e.py::test_q[b]: 1 -> 0.1 (-0.9)" in text
    assert "was: old b" in text and "now: new b" in text


def test_lower_is_better_scorer_regresses_when_its_mean_rises() -> None:
    # an unregistered scorer whose every bound is a maximum is taken as lower-is-better
    base = {
        "records": [_rec(f"c{i}", 0.1, scorer="unregistered_distance", max=0.5) for i in range(20)]
    }
    cur = {
        "records": [_rec(f"c{i}", 0.4, scorer="unregistered_distance", max=0.5) for i in range(20)]
    }
    (s,) = compare_reports(base, cur).scorers
    assert s.higher_is_better is False
    assert s.verdict == "regressed"
    assert s.direction_source == "guessed"
    (s2,) = compare_reports(cur, base).scorers
    assert s2.verdict == "improved"
    assert any(
        "taken as lower is better from its bounds" in n for n in compare_reports(base, cur).notes
    )


def test_a_registered_scorer_uses_its_declared_direction() -> None:
    from pytest_llmeval.engine.registry import default_registry

    name = "levenshtein"
    higher = default_registry.get(name).higher_is_better
    base = {"records": [_rec(f"c{i}", 0.9, scorer=name) for i in range(10)]}
    cur = {"records": [_rec(f"c{i}", 0.5, scorer=name) for i in range(10)]}
    (s,) = compare_reports(base, cur).scorers
    assert s.higher_is_better is higher
    assert s.verdict == ("regressed" if higher else "improved")


def test_gates_are_compared_from_the_current_runs_gates_and_the_baselines_records() -> None:
    spec = {"scorer": "quality", "min_mean": 0.5, "source": "marker on test_e.py::test_q"}
    plan = [
        {
            "file": "test_e.py",
            "test": "test_q",
            "gates": [spec],
            "total": 12,
            "ran": [[f"c{i}", 0] for i in range(12)],
        }
    ]
    base = {"records": [_rec(f"c{i}", 0.9) for i in range(12)]}
    cur = {"records": [_rec(f"c{i}", 0.2) for i in range(12)], "plan": plan}
    cmp = compare_reports(base, cur)
    (g,) = cmp.gates
    assert g.name == "gate quality (test_e.py::test_q)"
    assert g.kind == "gate" and g.n == 12 and g.verdict == "regressed"
    assert cmp.regressions == [cmp.scorers[0], g]
    # a gate on a test the baseline did not have is new, not a failure
    assert compare_reports({"records": [_rec("x", 1.0, test="other")]}, cur).gates[0].verdict == (
        "new"
    )
    # no gate in the current run: none compared
    assert compare_reports({"records": []}, {"records": []}).gates == ()


def test_a_saved_run_compares_like_its_report() -> None:
    report = _report([0.9] * 10)
    saved = {"format": "pytest-llmeval-run", "number": 3, "report": _report([0.2] * 10)}
    (s,) = compare_reports(report, saved).scorers
    assert s.verdict == "regressed"


def test_a_different_judge_model_is_named_in_the_instrument_change() -> None:
    """Finding 8 (the judge): two runs that differ only in the judge model of an instrument."""
    from pytest_llmeval.analysis.compare import compare_runs
    from pytest_llmeval.core.model import Instrument, Run
    from pytest_llmeval.core.records import ScoreRecord

    def run(model: str) -> Run:
        inst = Instrument(
            digest=f"{abs(hash(model)) % 16**16:016x}",
            scorer="factuality",
            version="4",
            higher_is_better=True,
            score_range=(0.0, 1.0),
            identity={"name": "factuality", "extra": {"judge": {"model": model}}},
        )
        recs = tuple(
            ScoreRecord(
                "t.py",
                "t",
                f"c{i}",
                "factuality",
                0,
                1.0,
                None,
                None,
                None,
                False,
                0.0,
                instrument=inst.digest,
            )
            for i in range(5)
        )
        return Run(records=recs, instruments={inst.digest: inst})

    (s,) = compare_runs(run("gpt-4o"), run("gpt-4o-mini")).scorers
    assert s.verdict == "incomparable"
    assert s.instrument_changes == ('extra.judge.model: "gpt-4o" -> "gpt-4o-mini"',)
    (s,) = compare_runs(run("gpt-4o"), run("gpt-4o-mini"), accept=["factuality"]).scorers
    assert s.verdict == "unchanged" and s.accepted


def test_two_records_for_one_sample_are_never_paired() -> None:
    """A report written before every parametrization had its own identity may hold two records
    for one key: which one is 'the' case is unknowable, so it is not paired (and said)."""
    from pytest_llmeval.analysis.compare import compare_reports

    def rec(case: str, score: float) -> dict[str, Any]:
        return {
            "file": "t.py",
            "test": "t",
            "case_id": case,
            "scorer": "s",
            "score": score,
            "passed": None,
        }

    base = {"records": [rec("a", 1.0), rec("a", 0.0), rec("b", 1.0)]}
    cur = {"records": [rec("a", 1.0), rec("b", 1.0)]}
    cmp = compare_reports(base, cur)
    (s,) = cmp.scorers
    assert s.ambiguous == ("t.py::t[a]",) and s.n == 1
    assert any("two records for one sample" in n for n in cmp.notes)
