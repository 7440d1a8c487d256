"""Agreement statistics (issue 20) against the established implementations, to 1e-9."""

from __future__ import annotations

import math
import random

import krippendorff
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from pytest_llmeval.core.agreement import (
    cohen_kappa,
    confusion,
    corrected_pass_rate,
    fleiss_kappa,
    krippendorff_alpha,
    mean_absolute_error,
    spearman,
)
from pytest_llmeval.core.stats import wilson_interval

TOL = 1e-9

pairs = st.lists(
    st.tuples(
        st.sampled_from(["pass", "fail", "unsure"]), st.sampled_from(["pass", "fail", "unsure"])
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(pairs)
@example([("fail", "pass")] * 3 + [("fail", "fail")] * 2 + [("fail", "unsure")])  # var ~ 1e-17
@example([("fail", "pass")] * 4 + [("fail", "fail"), ("fail", "unsure")])  # var ~ -1e-17
@example([("pass", "fail")] + [("fail", "fail")] * 4 + [("unsure", "fail")])  # se ~ 1.8e-8
def test_kappa_and_its_interval_match_sklearn_and_statsmodels(data: list[tuple[str, str]]) -> None:
    labels = [a for a, _ in data]
    judged = [b for _, b in data]
    cats = ["pass", "fail", "unsure"]
    table = confusion(labels, judged, cats)
    assert [list(r) for r in table.counts] == sk_confusion(labels, judged, labels=cats).tolist()
    k = cohen_kappa(table)
    seen = set(labels) | set(judged)
    if len(seen) == 1:
        assert k.kappa is None and k.interval is None
        assert "undefined" in (k.reason or "")
        return
    with np.errstate(all="ignore"):
        expected = cohen_kappa_score(labels, judged)
    assert k.kappa is not None and k.interval is not None and k.se is not None
    assert math.isclose(k.kappa, expected, abs_tol=TOL)
    res = sm_cohens_kappa(np.array(table.counts, dtype=float))
    assert math.isclose(k.kappa, res.kappa, abs_tol=TOL)
    # The variances agree to 1e-12. Where the true variance is 0 (a degenerate table), both
    # are rounding errors of up to a few 1e-16, negative as often as not (statsmodels' sqrt is
    # then nan), and a square root turns them into standard errors of up to a few 1e-8:
    # compared there to sqrt(1e-12) = 1e-6 (what the variances' agreement implies), elsewhere
    # to 1e-9.
    ref_var = float(res.var_kappa)
    assert math.isclose(k.se**2, max(ref_var, 0.0), abs_tol=1e-12)
    ref_se = math.sqrt(max(ref_var, 0.0))
    tol = TOL if ref_var > 1e-12 else 1e-6
    assert math.isclose(k.se, ref_se, abs_tol=tol)
    z = 1.959963984540054
    if not math.isnan(res.std_kappa):
        assert math.isclose(ref_se * z, res.kappa_upp - res.kappa, abs_tol=TOL)
    # The interval holds statsmodels' Wald interval and the Wilson interval of the agreement
    # carried to kappa, and is the union of the two.
    wald = (max(-1.0, res.kappa - z * ref_se), min(1.0, res.kappa + z * ref_se))
    agree = sum(table.counts[i][i] for i in range(3))
    wil = wilson_interval(agree, len(data))
    pe = k.expected
    carried = ((wil.low - pe) / (1 - pe), (wil.high - pe) / (1 - pe))
    assert math.isclose(k.interval.low, max(-1.0, min(wald[0], carried[0])), abs_tol=2 * tol)
    assert math.isclose(k.interval.high, min(1.0, max(wald[1], carried[1])), abs_tol=2 * tol)
    assert k.n == len(data)


def test_a_few_records_that_all_agree_do_not_make_kappa_certain() -> None:
    """Six labelled records, all agreeing: the Wald variance is 0 and its interval [1, 1]
    would pass any kappa gate at 95%; the agreement's Wilson interval (0.61 to 1 for 6 of 6)
    keeps kappa's lower bound at 0.22 with chance agreement 0.5."""
    k = cohen_kappa([[3, 0], [0, 3]])
    assert k.kappa == 1.0 and k.se == 0.0
    assert k.interval is not None
    wil = wilson_interval(6, 6)
    assert k.interval.low == pytest.approx((wil.low - 0.5) / 0.5, abs=1e-12)
    assert 0.21 < k.interval.low < 0.23 and k.interval.high == 1.0


def test_kappa_of_a_known_table() -> None:
    # 20 labelled records: people passed 10 (judge passed 9 of them), failed 10 (judge failed 7)
    k = cohen_kappa([[9, 1], [3, 7]])
    assert k.kappa == pytest.approx(0.6, abs=1e-12)  # observed 0.8, chance 0.5
    assert k.observed == pytest.approx(0.8) and k.expected == pytest.approx(0.5)
    assert k.interval is not None and k.interval.low < 0.6 < k.interval.high


def test_perfect_agreement_on_one_category_is_undefined_not_one() -> None:
    k = cohen_kappa([[12, 0], [0, 0]])
    assert k.kappa is None and k.interval is None


@pytest.mark.parametrize("bad", [[[1, 2]], [[1, -1], [0, 1]], [[0, 0], [0, 0]], [[1.5, 0], [0, 1]]])
def test_kappa_rejects_tables_that_are_not_square_counts(bad: list[list[float]]) -> None:
    with pytest.raises(ValueError):
        cohen_kappa(bad)  # type: ignore[arg-type]


def test_confusion_names_a_value_outside_the_categories() -> None:
    with pytest.raises(ValueError, match="'maybe' is not one of the categories"):
        confusion(["pass", "maybe"], ["pass", "fail"], ["pass", "fail"])


graded = st.lists(
    st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(0, 1, allow_nan=False)),
    min_size=2,
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(graded)
def test_spearman_and_mae_match_scipy_and_numpy(data: list[tuple[float, float]]) -> None:
    x = [a for a, _ in data]
    y = [b for _, b in data]
    ours = spearman(x, y)
    if len(set(x)) == 1 or len(set(y)) == 1:
        assert ours is None
    else:
        assert ours is not None
        assert math.isclose(ours, spearmanr(x, y).statistic, abs_tol=TOL)
    assert math.isclose(
        mean_absolute_error(x, y), float(np.mean(np.abs(np.array(x) - np.array(y)))), abs_tol=TOL
    )


def test_spearman_needs_two_pairs_and_finite_numbers() -> None:
    assert spearman([1.0], [2.0]) is None
    with pytest.raises(ValueError, match="nan is not a finite number"):
        spearman([1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError):
        mean_absolute_error([], [])


panels = st.integers(2, 5).flatmap(
    lambda m: st.lists(
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=m, max_size=m), min_size=1, max_size=40
    )
)


@settings(max_examples=200, deadline=None)
@given(panels)
def test_fleiss_kappa_matches_statsmodels(ratings: list[list[str]]) -> None:
    cats = ["a", "b", "c"]
    table = [[row.count(c) for c in cats] for row in ratings]
    ours = fleiss_kappa(table)
    if len({v for row in ratings for v in row}) == 1:
        assert ours is None
        return
    assert ours is not None
    assert math.isclose(ours, sm_fleiss_kappa(np.array(table), method="fleiss"), abs_tol=TOL)


def test_fleiss_kappa_refuses_a_missing_rating() -> None:
    with pytest.raises(ValueError, match="Krippendorff"):
        fleiss_kappa([[2, 1], [1, 1]])


units_nominal = st.lists(
    st.lists(st.one_of(st.none(), st.sampled_from([0, 1, 2])), min_size=3, max_size=3),
    min_size=1,
    max_size=40,
)


def _kripp_reference(units: list[list[float | None]], level: str) -> float | None:
    data = np.array([[np.nan if v is None else v for v in unit] for unit in units], dtype=float).T
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    values = {v for u in pairable for v in u if v is not None}
    if len(values) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


@settings(max_examples=200, deadline=None)
@given(units_nominal, st.sampled_from(["nominal", "interval"]))
def test_krippendorff_alpha_matches_the_krippendorff_package(
    units: list[list[int | None]], level: str
) -> None:
    ours = krippendorff_alpha(units, level)  # type: ignore[arg-type]
    expected = _kripp_reference(units, level)  # type: ignore[arg-type]
    if expected is None:
        assert ours is None
        return
    assert ours is not None
    assert math.isclose(ours, expected, abs_tol=TOL)


def test_krippendorff_alpha_of_interval_scores() -> None:
    rng = random.Random(3)
    units = [
        [round(rng.random(), 3) if rng.random() > 0.2 else None for _ in range(4)]
        for _ in range(30)
    ]
    ours = krippendorff_alpha(units, "interval")
    assert ours is not None
    assert math.isclose(ours, _kripp_reference(units, "interval") or 0.0, abs_tol=TOL)


def test_corrected_rate_of_a_known_judge() -> None:
    # judge passes 70% of 200 outputs; true-pass 0.9 (18/20), true-fail 0.8 (16/20):
    # (0.7 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.5 / 0.7
    r = corrected_pass_rate(140, 200, 18, 20, 16, 20)
    assert r.raw == pytest.approx(0.7)
    assert r.estimate == pytest.approx(0.5 / 0.7, abs=1e-12)
    assert r.interval is not None
    assert r.interval.low <= r.estimate <= r.interval.high
    # wider than the raw binomial interval alone: the labelled sets' uncertainty is carried
    assert r.interval.high - r.interval.low > 0.2


def test_corrected_rate_is_undefined_for_a_judge_no_better_than_chance() -> None:
    r = corrected_pass_rate(50, 100, 10, 20, 10, 20)
    assert r.estimate is None and r.interval is None
    assert "no better than chance" in (r.reason or "")
    r = corrected_pass_rate(50, 100, 10, 10, 0, 0)
    assert r.estimate is None and "labelled records people passed" in (r.reason or "")


def test_corrected_rate_rejects_counts_out_of_range() -> None:
    with pytest.raises(ValueError, match="passed=101 is outside"):
        corrected_pass_rate(101, 100, 1, 2, 1, 2)
