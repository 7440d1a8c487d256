"""Coverage of the corrected pass rate's interval on simulated judges (issue 20): a fast, seeded
subset of ``benchmarks/bench_correction.py``.

Each run draws a labelled set (the judge's hits among the outputs people passed and among those
they failed) and a judged set whose judge-pass count is Binomial(N, p*Se + (1-p)*(1-Sp)), the
count of drawing each output's truth with p and then judging it with Se/Sp.

Monte-Carlo margin: the benchmark measured at least 94.6% coverage for these configurations
(2000 runs each; 95% nominal). With 500 runs, if the true coverage were 94.5%, the chance of
seeing under 90% is P(Binomial(500, 0.945) <= 449) = 2e-5, so the 0.90 floor does not flake on
another seed; an estimator that really covered only 85% would read under 90% with probability
0.9993 and fail. The floor is looser than the benchmark's 93% because 500 runs cannot tell 93%
from 95% (one standard error is 1 point).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pytest_llmeval.core.agreement import corrected_pass_rate

RUNS = 500
SEED = 20


@dataclass(frozen=True)
class Outcome:
    intervals: int
    covered: int
    bias: float  # mean estimate - p over the runs with an estimate
    reasons: tuple[str, ...]  # of the runs without an interval


def simulate(
    se: float, sp: float, p: float, labelled: int, judged: int, balanced: bool, seed: int
) -> Outcome:
    rng = np.random.default_rng(seed)
    lab_pass = np.full(RUNS, labelled // 2) if balanced else rng.binomial(labelled, p, RUNS)
    lab_fail = labelled - lab_pass
    tp_hits = rng.binomial(lab_pass, se)
    tf_hits = rng.binomial(lab_fail, sp)
    passed = rng.binomial(judged, p * se + (1.0 - p) * (1.0 - sp), RUNS)
    intervals = covered = 0
    errors: list[float] = []
    reasons: list[str] = []
    for i in range(RUNS):
        r = corrected_pass_rate(
            int(passed[i]),
            judged,
            int(tp_hits[i]),
            int(lab_pass[i]),
            int(tf_hits[i]),
            int(lab_fail[i]),
        )
        if r.estimate is not None:
            errors.append(r.estimate - p)
        if r.interval is None:
            reasons.append(r.reason or "")
        else:
            intervals += 1
            covered += r.interval.low <= p <= r.interval.high
    bias = sum(errors) / len(errors) if errors else float("nan")
    return Outcome(intervals, covered, bias, tuple(reasons))


# (Se, Sp, p, labelled, judged, balanced): judges better than chance, the estimate defined in
# nearly every run; the lenient and strict rows are the lowest coverages the benchmark saw
CONFIGS = [
    (0.9, 0.9, 0.6, 50, 200, True),
    (0.9, 0.9, 0.95, 200, 1000, False),
    (0.95, 0.7, 0.3, 200, 200, False),
    (0.7, 0.95, 0.6, 200, 200, True),
    (0.65, 0.6, 0.6, 200, 1000, True),
]


@pytest.mark.parametrize(
    ("se", "sp", "p", "labelled", "judged", "balanced"),
    CONFIGS,
    ids=[f"Se{c[0]}-Sp{c[1]}-p{c[2]}-L{c[3]}-N{c[4]}" for c in CONFIGS],
)
def test_the_interval_covers_the_true_rate(
    se: float, sp: float, p: float, labelled: int, judged: int, balanced: bool
) -> None:
    out = simulate(se, sp, p, labelled, judged, balanced, SEED)
    # coverage only means something where intervals are given (withholding them is no pass)
    assert out.intervals >= 0.9 * RUNS
    assert out.covered / out.intervals >= 0.90


def test_a_good_judge_gives_a_nearly_unbiased_estimate() -> None:
    # standard error of the mean of 500 estimates here is about 0.002: 0.01 is five of them
    for p in (0.3, 0.6):
        out = simulate(0.9, 0.9, p, 200, 1000, True, SEED)
        assert abs(out.bias) < 0.01


def test_a_chance_judge_gets_no_interval_and_says_why() -> None:
    out = simulate(0.5, 0.5, 0.6, 50, 200, True, SEED)
    # tp + tf > 1 by luck in about half the runs; an interval only when the labels rule out
    # chance, which they wrongly do in about 2.5% (P(more than 6% of 500) = 2e-4)
    assert out.intervals <= 0.06 * RUNS
    assert all("no better than chance" in reason for reason in out.reasons)


def test_the_two_reasons_for_a_judge_no_better_than_chance() -> None:
    exact = corrected_pass_rate(100, 200, 25, 50, 25, 50)
    assert exact.estimate is None and exact.interval is None
    assert "the judge is no better than chance" in (exact.reason or "")
    # 4/5 + 3/5 > 1, but five labels a side cannot rule chance out
    unsure = corrected_pass_rate(4, 6, 4, 5, 3, 5)
    assert unsure.estimate is None and unsure.interval is None
    assert "cannot tell the judge from one no better than chance" in (unsure.reason or "")
    assert "do not bound the true pass rate" in (unsure.reason or "")
