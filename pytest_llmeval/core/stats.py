"""Suite statistics (issue 9): per-case reducers over repeated samples, intervals, gate verdicts.

A *case* is one dataset row (or one test) of one scorer; a *sample* is one scored record of that
case (several when a case is repeated). Samples of one case are not independent (same input, same
app), so every interval here resamples or clusters on **cases**, never on records.

Everything is pure Python (``math`` and ``random`` only): the plugin imports this module,
and the plugin must import fast (no numpy/scipy). The Student t quantile is computed here from the
regularized incomplete beta function (a continued fraction) and refined by Newton's method; the
tests check it against ``scipy.stats.t.ppf``.

Degenerate cases, chosen so that a gate never claims with confidence what the data cannot show:

* one scored case: the t interval is ``(-inf, inf)`` (no spread can be estimated), so a mean gate
  with ``confidence=`` is **inconclusive**; a Wilson interval is always defined (n >= 1);
* all case scores equal (zero spread): without a known, bounded score range the t interval
  would have zero width, which claims certainty no sample of cases can give, so the mean check
  is inconclusive (its interval is reported as ``(-inf, inf)``); with a bounded range
  (``GateSpec.score_range``) the interval is widened as below;
* with a known score range ``[a, b]`` the mean interval always reaches the mean that ``z**2`` more
  cases at the far end of the range would give: ``(n*m + z**2*a) / (n + z**2)`` below and the same
  with ``b`` above. For scores that are all 0 or 1 this is the Wilson bound at a 0% or 100% rate
  (all n cases perfect cannot prove more than ``n / (n + z**2)``). The floor only bites when the
  spread is small against the distance to the range end (``sd < z*(m - a)/sqrt(n)``); in
  ``benchmarks/bench_gates.py`` it costs no measurable power at 100-200 cases. An infinite end
  of the range (an unbounded scorer) gives no floor on that side;
* zero scored cases: no interval, the check's verdict is ``error``.

Why this module is long: it is the one place every number a verdict rests on is computed (sample
reduction, intervals, pass rates, gate specs and their checks), so that pytest, ``merge`` and
``compare`` cannot disagree; splitting it would spread one definition of each number over several
files.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, final

__all__ = [
    "REDUCERS",
    "VERDICTS",
    "CaseResult",
    "CaseSamples",
    "CheckResult",
    "CorrectedRate",
    "GateResult",
    "GateSpec",
    "Interval",
    "Sample",
    "ScorerStats",
    "cluster_bootstrap_interval",
    "cluster_mean_interval",
    "corrected_pass_rate",
    "evaluate_gate",
    "flaky_cases",
    "labelled_pairs",
    "normal_ppf",
    "reduce_case",
    "scorer_stats",
    "single_sample_stats",
    "t_cdf",
    "t_interval",
    "t_ppf",
    "wilson_interval",
]

REDUCERS: tuple[str, ...] = ("mean", "median", "min", "max", "majority", "pass_at_k", "pass_all")
VERDICTS: tuple[str, ...] = ("pass", "fail", "inconclusive", "error")
# Worst first: a gate's verdict is the worst of its checks.
_SEVERITY = {"error": 3, "fail": 2, "inconclusive": 1, "pass": 0}
# `needed` is searched up to this many cases; beyond it the data cannot realistically decide.
_NEEDED_CAP = 10_000_000


# --------------------------------------------------------------------------------------------
# Distributions (pure Python)
# --------------------------------------------------------------------------------------------

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def normal_ppf(p: float) -> float:
    """Quantile of the standard normal, to ~1e-15.

    Abramowitz & Stegun 26.2.23 (error < 4.5e-4) as the start, then Halley steps on the upper
    tail ``erfc(x/sqrt(2))/2``, which ``math.erfc`` gives to full relative precision even far
    out. (``statistics.NormalDist`` would do, but importing ``statistics`` pulls in ``decimal``
    and ``fractions``, and this module is imported with the plugin.)
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p!r}")
    if p == 0.5:
        return 0.0
    q = p if p < 0.5 else 1.0 - p  # tail probability; x >= 0 solves upper_tail(x) = q
    t = math.sqrt(-2.0 * math.log(q))
    x = t - (2.515517 + t * (0.802853 + t * 0.010328)) / (
        1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    )
    for _ in range(8):
        err = 0.5 * math.erfc(x / _SQRT2) - q
        pdf = _INV_SQRT_2PI * math.exp(-0.5 * x * x)
        u = err / pdf
        step = u / (1.0 + 0.5 * x * u)
        x += step
        if abs(step) <= 1e-15 * max(1.0, x):
            break
    return x if p > 0.5 else -x


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(
            f"confidence must be a number strictly between 0 and 1, got {confidence!r}"
        )


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz), for x < (a+1)/(a+b+2)
    where it converges quickly."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b})")


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """Cumulative distribution function of Student's t with ``df`` > 0 degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = _t_upper_tail(abs(t), df)
    return 1.0 - tail if t >= 0 else tail


def _t_pdf(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t with ``df`` > 0 degrees of freedom (accurate to ~1e-10).

    df 1 and 2 have closed forms; otherwise Newton's method on the upper tail (from the
    incomplete beta function), started from the normal quantile and kept inside a bracket.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p!r}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    if p == 0.5:
        return 0.0
    sign = 1.0 if p > 0.5 else -1.0
    q = 1.0 - p if p > 0.5 else p  # the upper-tail probability of |t|
    if df == 1:
        return sign * math.tan(math.pi * (0.5 - q))
    if df == 2:
        a = 4.0 * q * (1.0 - q)
        return sign * (1.0 - 2.0 * q) * math.sqrt(2.0 / a)
    # Newton on the upper tail, which is convex and decreasing for t >= 0, so Newton converges
    # monotonically once it is left of the root (it may overshoot left once from the right).
    # The Cornish-Fisher expansion in 1/df is the start: within ~1e-6 for df >= 10.
    # For df > 1000 the expansion's error (order z**11 / df**5) is below the rounding error of
    # the incomplete beta (lgamma of large arguments), so it is the answer.
    z = -normal_ppf(q)
    t = _cornish_fisher(z, df)
    if df > 1000:
        return sign * t
    for _ in range(60):
        step = (_t_upper_tail(t, df) - q) / _t_pdf(t, df)
        nxt = t + step
        if nxt <= 0.0:
            nxt = t / 2.0
        if abs(nxt - t) <= 1e-13 * max(1.0, t):
            t = nxt
            break
        t = nxt
    return sign * t


def _cornish_fisher(z: float, df: float) -> float:
    """Cornish-Fisher expansion of the t quantile around the normal quantile z, to 1/df**4."""
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def _z(confidence: float) -> float:
    return normal_ppf(0.5 + confidence / 2.0)


@functools.lru_cache(maxsize=4096)
def _t_crit(confidence: float, df: float) -> float:
    return t_ppf(0.5 + confidence / 2.0, df)


# --------------------------------------------------------------------------------------------
# Samples, cases, reducers
# --------------------------------------------------------------------------------------------


@final
@dataclass(frozen=True)
class Sample:
    """One record of the gated scorer for one case (one sample of a repeat, or one assertion)."""

    score: float | None  # None when the scoring errored
    passed: bool | None  # the record's own bound check; None when errored or no bound
    error: str | None = None
    sample: int = 0  # repeat index, 0 without repeat
    #: which assertion of the scorer in the test (0 for the first): several assertions of one
    #: scorer in a case are separate checks, each reduced over its samples
    index: int = 0
    #: the bound of that assertion (None: as the case's)
    min: float | None = None
    max: float | None = None
    #: the person's verdict on this sample's output (its label, issue 20); None: unlabelled
    human: bool | None = None

    @property
    def errored(self) -> bool:
        """No usable score: an error, a missing score, or a NaN/infinite one (which would
        otherwise poison every mean and compare false against every bound)."""
        return self.error is not None or self.score is None or not math.isfinite(self.score)


@final
@dataclass(frozen=True)
class CaseSamples:
    """All samples of one case. ``min``/``max``: the per-case bound the test asserted, used by the
    score reducers (mean, median, min, max) to re-derive the case verdict from the reduced score."""

    case: str
    samples: tuple[Sample, ...]
    min: float | None = None
    max: float | None = None


@final
@dataclass(frozen=True)
class CaseResult:
    """One case reduced to one score and one verdict."""

    case: str
    score: float | None  # reduced score; None if the case could not be scored
    passed: bool | None  # reduced verdict; None if it could not be decided
    n_samples: int
    n_errors: int
    flaky: bool  # scored samples disagree on pass/fail

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "score": self.score,
            "passed": self.passed,
            "n_samples": self.n_samples,
            "n_errors": self.n_errors,
            "flaky": self.flaky,
        }


def _is_flaky(samples: Sequence[Sample]) -> bool:
    verdicts = {s.passed for s in samples if not s.errored and s.passed is not None}
    return len(verdicts) > 1


def reduce_case(case: CaseSamples, reducer: str = "mean") -> CaseResult:
    """Reduce a case's samples to one score and verdict.

    ``mean``/``median``/``min``/``max``: the score is that statistic of the samples' scores, and the
    case passes when it meets the case's ``min``/``max`` bound (a case without a bound passes when
    every sample that has a verdict passed; None if no sample has one). ``majority``: more than half
    of the samples passed (a tie fails). ``pass_at_k``: any sample passed. ``pass_all`` (pass^k):
    every sample passed. The last three score the case with the mean.

    Several assertions of the scorer in one case (``Sample.index``) are separate checks: each is
    reduced over its own samples against its own bound, the case passes only when every one
    passes, and its score is the mean of theirs (a missed assertion is never averaged into a
    pass by another).

    Any errored sample makes the whole case an error case (score and verdict None): an error is
    never softened by other samples and never counted as a pass. Raises ValueError for an unknown
    reducer.
    """
    if reducer not in REDUCERS:
        raise ValueError(f"unknown reducer {reducer!r}; choose one of {', '.join(REDUCERS)}")
    samples = case.samples
    first = samples[0].index if samples else 0
    if any(s.index != first for s in samples):
        return _reduce_assertions(case, reducer)
    return _reduce(case.case, samples, case.min, case.max, reducer)


def _reduce_assertions(case: CaseSamples, reducer: str) -> CaseResult:
    by_index: dict[int, list[Sample]] = {}
    for s in case.samples:
        by_index.setdefault(s.index, []).append(s)
    parts = []
    for _, group in sorted(by_index.items()):
        bounded = next((s for s in group if not s.errored), group[0])
        parts.append(_reduce(case.case, group, bounded.min, bounded.max, reducer))
    n_samples = len(case.samples)
    n_errors = sum(p.n_errors for p in parts)
    flaky = any(p.flaky for p in parts)
    if n_errors or any(p.score is None for p in parts):
        return CaseResult(case.case, None, None, n_samples, n_errors, flaky)
    scores = [p.score for p in parts if p.score is not None]
    verdicts = [p.passed for p in parts if p.passed is not None]
    passed = all(verdicts) if verdicts else None
    return CaseResult(case.case, math.fsum(scores) / len(scores), passed, n_samples, 0, flaky)


def _reduce(
    key: str,
    samples: Sequence[Sample],
    bound_min: float | None,
    bound_max: float | None,
    reducer: str,
) -> CaseResult:
    if len(samples) == 1:
        return _reduce_one(key, samples[0], bound_min, bound_max, reducer)
    return _reduce_samples(key, samples, bound_min, bound_max, reducer)


def _reduce_one(
    key: str, s: Sample, bound_min: float | None, bound_max: float | None, reducer: str
) -> CaseResult:
    """:func:`_reduce_samples` of one sample (most cases: no repeat), told without its lists:
    every reducer of one score is that score; a bound decides a mean/median/min/max case, else
    the sample's own verdict does (the majority, any and all of one verdict are that verdict)."""
    value = s.score
    if s.error is not None or value is None or not math.isfinite(value):
        return CaseResult(key, None, None, 1, 1, False)
    score = float(value)
    passed: bool | None = s.passed
    if (bound_min is not None or bound_max is not None) and reducer in _SCORE_REDUCERS:
        passed = _within(score, bound_min, bound_max)
    return CaseResult(key, score, passed, 1, 0, False)


def _within(score: float, bound_min: float | None, bound_max: float | None) -> bool:
    """A reduced score's verdict against the case's bound (a missing side is no limit)."""
    return (bound_min is None or score >= bound_min) and (bound_max is None or score <= bound_max)


_SCORE_REDUCERS = frozenset(("mean", "median", "min", "max"))


def _reduce_samples(
    key: str,
    samples: Sequence[Sample],
    bound_min: float | None,
    bound_max: float | None,
    reducer: str,
) -> CaseResult:
    # one pass over the samples: this runs for every case of every gate and scorer
    n_errors = 0
    scores: list[float] = []
    verdicts: list[bool] = []
    for s in samples:
        if s.error is not None or s.score is None or not math.isfinite(s.score):
            n_errors += 1
            continue
        scores.append(float(s.score))
        if s.passed is not None:
            verdicts.append(s.passed)
    flaky = True in verdicts and False in verdicts
    if n_errors or not samples:
        return CaseResult(key, None, None, len(samples), n_errors, flaky)
    mean = scores[0] if len(scores) == 1 else math.fsum(scores) / len(scores)
    score: float
    passed: bool | None
    if reducer in _SCORE_REDUCERS:
        if reducer == "mean":
            score = mean
        elif reducer == "median":
            ordered = sorted(scores)
            mid = len(ordered) // 2
            score = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
        elif reducer == "min":
            score = min(scores)
        else:
            score = max(scores)
        if bound_min is not None or bound_max is not None:
            passed = _within(score, bound_min, bound_max)
        else:
            passed = all(verdicts) if verdicts else None
    else:
        score = mean
        if not verdicts:
            passed = None
        elif reducer == "majority":
            passed = 2 * sum(verdicts) > len(verdicts)
        elif reducer == "pass_at_k":
            passed = any(verdicts)
        else:  # pass_all
            passed = all(verdicts)
    return CaseResult(key, score, passed, len(samples), 0, flaky)


def flaky_cases(cases: Sequence[CaseSamples]) -> list[str]:
    """Keys of the cases whose scored samples disagree on pass/fail, in input order."""
    return [c.case for c in cases if _is_flaky(c.samples)]


# --------------------------------------------------------------------------------------------
# Intervals
# --------------------------------------------------------------------------------------------


def _json_float(x: float) -> float | None:
    # JSON has no infinity: an unbounded side is null
    return x if math.isfinite(x) else None


@final
@dataclass(frozen=True)
class Interval:
    """A point estimate and a two-sided confidence interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str  # "t", "cluster-t", "cluster-bootstrap", "wilson"
    n: int = 0  # independent units behind it (cases)

    def clip(self, score_range: tuple[float, float] | None) -> Interval:
        """The interval cut to the scorer's range: the true mean lies inside it, so the cut
        interval covers it whenever the uncut one does (an infinite end cuts nothing)."""
        if score_range is None:
            return self
        low, high = max(self.low, score_range[0]), min(self.high, score_range[1])
        if low == self.low and high == self.high:
            return self
        return dataclasses.replace(self, low=low, high=high)

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "low": _json_float(self.low),
            "high": _json_float(self.high),
            "confidence": self.confidence,
            "method": self.method,
            "n": self.n,
        }


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a proportion (no continuity correction; the bounds are exactly
    0 at 0 successes and 1 at n). Raises ValueError for n < 1 or successes outside [0, n]."""
    _check_confidence(confidence)
    if n < 1:
        raise ValueError(f"a Wilson interval needs at least one trial, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    low, high = _wilson_ends(p, n, _z(confidence))
    low = 0.0 if successes == 0 else max(0.0, low)
    high = 1.0 if successes == n else min(1.0, high)
    return Interval(p, low, high, confidence, "wilson", n)


def _wilson_ends(p: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson score interval's two ends for the proportion ``p`` of ``n`` trials (``n`` may
    be a hypothetical count: kappa's "records needed" asks it of a proportion kept fixed), not
    cut to [0, 1]."""
    z2 = z * z
    center = (n * p + z2 / 2.0) / (n + z2)
    half = z / (n + z2) * math.sqrt(max(n * p * (1.0 - p), 0.0) + z2 / 4.0)
    return center - half, center + half


# -- agreement of two raters (issue 20; more in core/agreement.py) ----------------------------


@dataclass(frozen=True)
class Confusion:
    """Counts of (label, judge) pairs: ``counts[i][j]`` is how many records a person labelled
    ``categories[i]`` and the judge gave ``categories[j]``."""

    categories: tuple[Hashable, ...]
    counts: tuple[tuple[int, ...], ...]

    @property
    def n(self) -> int:
        return sum(sum(row) for row in self.counts)

    @property
    def agreed(self) -> int:
        return sum(self.counts[i][i] for i in range(len(self.categories)))

    def to_json(self) -> dict[str, Any]:
        return {
            "categories": [
                c if isinstance(c, (str, int, float, bool)) else str(c) for c in self.categories
            ],
            "counts": [list(row) for row in self.counts],
        }


def confusion(
    labels: Sequence[Hashable],
    judged: Sequence[Hashable],
    categories: Sequence[Hashable] | None = None,
) -> Confusion:
    """The confusion matrix of paired ``labels`` (people) and ``judged`` (the judge). Categories
    are ``categories`` in that order (a value outside them is a ValueError), else every value
    seen, in order of first appearance among the labels, then the judge's."""
    if len(labels) != len(judged):
        raise ValueError(f"{len(labels)} labels but {len(judged)} judged values")
    if categories is None:
        cats = list(dict.fromkeys([*labels, *judged]))
    else:
        cats = list(dict.fromkeys(categories))
    index = {c: i for i, c in enumerate(cats)}
    counts = [[0] * len(cats) for _ in cats]
    for a, b in zip(labels, judged, strict=True):
        if a not in index or b not in index:
            missing = a if a not in index else b
            raise ValueError(f"{missing!r} is not one of the categories {cats!r}")
        counts[index[a]][index[b]] += 1
    return Confusion(tuple(cats), tuple(tuple(row) for row in counts))


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of a confusion matrix. ``kappa`` is None when undefined (both raters used a
    single, same category: chance agreement is 1), with ``reason``."""

    kappa: float | None
    se: float | None
    interval: Interval | None
    n: int
    observed: float  # agreement, the share of the diagonal
    expected: float  # agreement by chance from the margins
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kappa": self.kappa,
            "se": self.se,
            "interval": None if self.interval is None else self.interval.to_json(),
            "n": self.n,
            "observed": self.observed,
            "expected": self.expected,
            "reason": self.reason,
        }


def _kappa_interval(
    kappa: float, se: float, observed: float, expected: float, n: float, confidence: float
) -> Interval:
    """The interval of a kappa over ``n`` records: the Wald interval ``kappa +- z * se`` (as
    statsmodels' ``cohens_kappa``) widened to hold the Wilson interval of the observed agreement
    carried through ``(po - pe) / (1 - pe)``, cut to [-1, 1].

    The Wald interval alone collapses where its large-sample variance does: six records that
    all agree have ``se = 0`` and the interval [1, 1], which would pass any kappa gate "at 95%".
    The Wilson part keeps what so few records can say (six agreeing of six: agreement 0.61 to 1,
    kappa 0.22 to 1 with chance agreement 0.5); with many records the Wald interval is the
    wider one and decides."""
    z = _z(confidence)
    po_low, po_high = _wilson_ends(observed, n, z)
    po_low, po_high = max(0.0, po_low), min(1.0, po_high)
    low = min(kappa - z * se, (po_low - expected) / (1.0 - expected))
    high = max(kappa + z * se, (po_high - expected) / (1.0 - expected))
    return Interval(kappa, max(-1.0, low), min(1.0, high), confidence, "wald+wilson", int(n))


def cohen_kappa(table: Confusion | Sequence[Sequence[int]], confidence: float = 0.95) -> Kappa:
    """Cohen's (unweighted) kappa, its large-sample standard error (Fleiss, Cohen and Everitt,
    1969, as statsmodels' ``cohens_kappa``) and an interval that holds both the Wald interval
    ``kappa +- z * se`` and the Wilson interval of the observed agreement carried to kappa (see
    :func:`_kappa_interval`: the Wald interval alone is [1, 1] for a few records that all
    agree). ``table`` is square: rows one rater, columns the other."""
    _check_confidence(confidence)
    counts = table.counts if isinstance(table, Confusion) else tuple(tuple(r) for r in table)
    k = len(counts)
    if k == 0 or any(len(row) != k for row in counts):
        raise ValueError("a kappa needs a square table of counts")
    if any((not isinstance(c, int)) or isinstance(c, bool) or c < 0 for r in counts for c in r):
        raise ValueError("a kappa's table holds whole counts >= 0")
    n = sum(sum(row) for row in counts)
    if n == 0:
        raise ValueError("a kappa needs at least one pair")
    p = [[c / n for c in row] for row in counts]
    rows = [sum(row) for row in p]
    cols = [sum(p[i][j] for i in range(k)) for j in range(k)]
    observed = sum(p[i][i] for i in range(k))
    expected = sum(rows[i] * cols[i] for i in range(k))
    if expected >= 1.0 - 1e-12:
        return Kappa(
            None,
            None,
            None,
            n,
            observed,
            expected,
            "both raters gave every record the same single category: chance agreement is "
            "complete, so kappa is undefined",
        )
    kappa = (observed - expected) / (1.0 - expected)
    a = sum(p[i][i] * (1.0 - (rows[i] + cols[i]) * (1.0 - kappa)) ** 2 for i in range(k))
    b = (1.0 - kappa) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j
    )
    c = (kappa - expected * (1.0 - kappa)) ** 2
    var = (a + b - c) / ((1.0 - expected) ** 2 * n)
    se = math.sqrt(max(var, 0.0))
    interval = _kappa_interval(kappa, se, observed, expected, n, confidence)
    return Kappa(kappa, se, interval, n, observed, expected)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, math.nan
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var)


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Student t interval for the mean of independent values. One value: ``(-inf, inf)``.
    Raises ValueError for no values."""
    _check_confidence(confidence)
    if not values:
        raise ValueError("a t interval needs at least one value")
    n = len(values)
    mean, sd = _mean_sd(values)
    if n < 2:
        return Interval(mean, -math.inf, math.inf, confidence, "t", n)
    half = _t_crit(confidence, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, confidence, "t", n)


def cluster_mean_interval(groups: Sequence[Sequence[float]], confidence: float = 0.95) -> Interval:
    """Mean over all values, with a cluster-robust interval (clusters = cases).

    The standard error is the CR1 sandwich estimate for a mean: with G non-empty groups, N values,
    group sums S_g and sizes n_g, ``var = G/(G-1) * sum((S_g - n_g*mean)**2) / N**2``, and the
    interval uses t with G-1 degrees of freedom. With equal group sizes this is exactly the t
    interval over the group means. Fewer than two groups: ``(-inf, inf)``. Empty groups are
    ignored; raises ValueError when there is no value at all.
    """
    _check_confidence(confidence)
    nonempty = [list(g) for g in groups if len(g)]
    if not nonempty:
        raise ValueError("a cluster interval needs at least one value")
    total = sum(len(g) for g in nonempty)
    mean = math.fsum(math.fsum(g) for g in nonempty) / total
    n_groups = len(nonempty)
    if n_groups < 2:
        return Interval(mean, -math.inf, math.inf, confidence, "cluster-t", n_groups)
    resid = math.fsum((math.fsum(g) - len(g) * mean) ** 2 for g in nonempty)
    se = math.sqrt(n_groups / (n_groups - 1) * resid) / total
    half = _t_crit(confidence, n_groups - 1) * se
    return Interval(mean, mean - half, mean + half, confidence, "cluster-t", n_groups)


def _quantile_sorted(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default, type 7)."""
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def cluster_bootstrap_interval(
    groups: Sequence[Sequence[float]],
    confidence: float = 0.95,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Mean over all values with a percentile cluster-bootstrap interval: each resample draws G
    whole groups (cases) with replacement and takes the mean over all their values. Seeded, so
    the same input gives the same interval. Fewer than two groups: ``(-inf, inf)``."""
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    nonempty = [list(g) for g in groups if len(g)]
    if not nonempty:
        raise ValueError("a cluster interval needs at least one value")
    sums = [math.fsum(g) for g in nonempty]
    sizes = [len(g) for g in nonempty]
    mean = math.fsum(sums) / sum(sizes)
    n_groups = len(nonempty)
    if n_groups < 2:
        return Interval(mean, -math.inf, math.inf, confidence, "cluster-bootstrap", n_groups)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        idx = rng.choices(range(n_groups), k=n_groups)
        means.append(math.fsum(sums[i] for i in idx) / sum(sizes[i] for i in idx))
    means.sort()
    alpha = 1.0 - confidence
    low = _quantile_sorted(means, alpha / 2.0)
    high = _quantile_sorted(means, 1.0 - alpha / 2.0)
    return Interval(mean, low, high, confidence, "cluster-bootstrap", n_groups)


# --------------------------------------------------------------------------------------------
# Gates
# --------------------------------------------------------------------------------------------


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@final
@dataclass(frozen=True)
class GateSpec:
    """A dataset-level gate on one scorer: bounds on the mean case score and/or the pass rate.

    ``confidence=None`` compares the point estimate; otherwise the verdict comes from the
    two-sided interval at that confidence (pass / fail / inconclusive). ``max_errors``: how many
    unscored cases are allowed before the gate cannot pass. ``score_range``: the scorer's range
    when known; it keeps a mean interval from claiming certainty from cases that all scored alike
    (see the module docstring).
    """

    scorer: str
    min_mean: float | None = None
    max_mean: float | None = None
    min_pass_rate: float | None = None
    max_pass_rate: float | None = None
    confidence: float | None = None
    reducer: str = "mean"
    max_errors: int = 0
    source: str = ""
    score_range: tuple[float, float] | None = None
    #: bounds on the judge itself (issue 20), judged on labelled records only: Cohen's kappa
    #: and the true-pass and true-fail rates of its verdicts against the labels
    min_kappa: float | None = None
    min_true_pass: float | None = None
    min_true_fail: float | None = None
    #: decide the pass-rate bounds on the pass rate corrected for the judge's measured error
    #: (Rogan-Gladen over the unlabelled cases, with the true-pass and true-fail rates measured
    #: on the labelled ones) instead of the judge's raw pass rate
    corrected: bool = False

    @property
    def bounds_quality(self) -> bool:
        """Whether the gate bounds the scores (mean or pass rate). Only such a gate decides its
        test's per-case misses; a gate on the judge alone (kappa, true-pass, true-fail) does
        not: it would otherwise let a bad output pass because the judge was measured."""
        return any(
            v is not None
            for v in (self.min_mean, self.max_mean, self.min_pass_rate, self.max_pass_rate)
        )

    @property
    def judge_bounds(self) -> dict[str, float | None]:
        return {
            "min_kappa": self.min_kappa,
            "min_true_pass": self.min_true_pass,
            "min_true_fail": self.min_true_fail,
        }

    def _where(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"llm_eval gate on scorer {self.scorer!r}{where}"

    def validate(self) -> None:
        """Raise ValueError, naming the gate and what to fix, for a gate that cannot be run."""
        where = self._where()
        if not isinstance(self.scorer, str) or not self.scorer:
            raise ValueError(f"{where}: scorer must be a non-empty scorer name")
        bounds = {
            "min_mean": self.min_mean,
            "max_mean": self.max_mean,
            "min_pass_rate": self.min_pass_rate,
            "max_pass_rate": self.max_pass_rate,
        }
        judge = self.judge_bounds
        if all(v is None for v in (*bounds.values(), *judge.values())):
            raise ValueError(
                f"{where}: no bound given; set at least one of min_mean, max_mean, "
                "min_pass_rate, max_pass_rate, min_kappa, min_true_pass, min_true_fail"
            )
        for name, value in judge.items():
            if value is None:
                continue
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
            low = -1.0 if name == "min_kappa" else 0.0
            if not low < value <= 1.0:
                raise ValueError(
                    f"{where}: {name} must be in ({low:g}, 1] (at {low:g} it could never "
                    f"fail), got {value!r}"
                )
        for name, value in bounds.items():
            if value is None:
                continue
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
            if name.endswith("pass_rate") and not 0.0 <= value <= 1.0:
                raise ValueError(
                    f"{where}: {name} is a fraction of cases and must be in [0, 1], got {value!r}"
                )
        if (
            self.min_mean is not None
            and self.max_mean is not None
            and self.min_mean > self.max_mean
        ):
            raise ValueError(
                f"{where}: min_mean={self.min_mean!r} is above max_mean={self.max_mean!r}"
            )
        if (
            self.min_pass_rate is not None
            and self.max_pass_rate is not None
            and self.min_pass_rate > self.max_pass_rate
        ):
            raise ValueError(
                f"{where}: min_pass_rate={self.min_pass_rate!r} is above "
                f"max_pass_rate={self.max_pass_rate!r}"
            )
        if self.confidence is not None and not (
            _is_number(self.confidence) and 0.0 < self.confidence < 1.0
        ):
            raise ValueError(
                f"{where}: confidence must be strictly between 0 and 1 (e.g. 0.95), "
                f"got {self.confidence!r}"
            )
        if self.reducer not in REDUCERS:
            raise ValueError(
                f"{where}: unknown reducer {self.reducer!r}; choose one of {', '.join(REDUCERS)}"
            )
        if not isinstance(self.max_errors, int) or isinstance(self.max_errors, bool):
            raise ValueError(f"{where}: max_errors must be an int >= 0, got {self.max_errors!r}")
        if self.max_errors < 0:
            raise ValueError(f"{where}: max_errors must be >= 0, got {self.max_errors!r}")
        if self.score_range is not None:
            if not isinstance(self.score_range, (tuple, list)) or len(self.score_range) != 2:
                raise ValueError(f"{where}: score_range must be a (low, high) pair")
            lo, hi = self.score_range
            # an infinite end is allowed: the scorer is unbounded on that side (readability)
            if not (_is_number(lo) and _is_number(hi)) or math.isnan(lo) or math.isnan(hi):
                raise ValueError(f"{where}: score_range must be two numbers (an end may be inf)")
            if not lo < hi:
                raise ValueError(f"{where}: score_range {self.score_range!r} must have low < high")
        if not isinstance(self.corrected, bool):
            raise ValueError(f"{where}: corrected must be True or False, got {self.corrected!r}")
        if self.corrected and self.min_pass_rate is None and self.max_pass_rate is None:
            raise ValueError(
                f"{where}: corrected=True corrects the pass rate for the judge's error; give "
                "min_pass_rate or max_pass_rate with it"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer,
            "min_mean": self.min_mean,
            "max_mean": self.max_mean,
            "min_pass_rate": self.min_pass_rate,
            "max_pass_rate": self.max_pass_rate,
            "confidence": self.confidence,
            "reducer": self.reducer,
            "max_errors": self.max_errors,
            "source": self.source,
            "score_range": list(self.score_range) if self.score_range is not None else None,
            "min_kappa": self.min_kappa,
            "min_true_pass": self.min_true_pass,
            "min_true_fail": self.min_true_fail,
            "corrected": self.corrected,
        }


@final
@dataclass(frozen=True)
class CheckResult:
    """One bound of a gate (a gate with min_mean and min_pass_rate has two checks)."""

    metric: str  # "mean" | "pass_rate"
    side: str  # "min" | "max"
    bound: float
    interval: Interval | None  # None when nothing could be scored
    verdict: str  # pass | fail | inconclusive | error
    needed: int | None  # inconclusive: extra cases likely to decide it (None otherwise/unknown)
    reason: str = ""  # one line saying why, for the summary

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "side": self.side,
            "bound": self.bound,
            "interval": self.interval.to_json() if self.interval is not None else None,
            "verdict": self.verdict,
            "needed": self.needed,
            "reason": self.reason,
        }


@final
@dataclass(frozen=True)
class GateResult:
    """The verdict of one gate over the cases of one test (or one run)."""

    spec: GateSpec
    verdict: str  # worst of the checks: error > fail > inconclusive > pass
    checks: tuple[CheckResult, ...]
    n_cases: int
    n_scored: int
    n_errors: int  # cases that could not be scored
    n_samples: int
    flaky: tuple[str, ...]
    cases: tuple[CaseResult, ...]
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_json(),
            "verdict": self.verdict,
            "reason": self.reason,
            "checks": [c.to_json() for c in self.checks],
            "n_cases": self.n_cases,
            "n_scored": self.n_scored,
            "n_errors": self.n_errors,
            "n_samples": self.n_samples,
            "flaky": list(self.flaky),
            "cases": [c.to_json() for c in self.cases],
        }


def _point_verdict(estimate: float, side: str, bound: float) -> str:
    ok = estimate >= bound if side == "min" else estimate <= bound
    return "pass" if ok else "fail"


def _interval_verdict(iv: Interval, side: str, bound: float) -> str:
    if side == "min":
        if iv.low >= bound:
            return "pass"
        if iv.high < bound:
            return "fail"
    else:
        if iv.high <= bound:
            return "pass"
        if iv.low > bound:
            return "fail"
    return "inconclusive"


def _decides(iv: Interval, side: str, bound: float) -> bool:
    return _interval_verdict(iv, side, bound) != "inconclusive"


def _needed(n: int, make: Callable[[int], Interval], side: str, bound: float) -> int | None:
    """Extra cases that would likely decide a check: the smallest n' > n for which the interval
    built from the same estimate and spread (``make(n')``) no longer straddles the bound, minus n.
    None when no realistic number of cases would (the estimate sits on the bound)."""
    if not _decides(make(_NEEDED_CAP), side, bound):
        return None
    lo, hi = n, n + 1
    while not _decides(make(hi), side, bound):
        lo, hi = hi, min(_NEEDED_CAP, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _decides(make(mid), side, bound):
            hi = mid
        else:
            lo = mid
    return hi - n


def _t_crit_projection(confidence: float, df: int) -> float:
    """The t critical value for `needed` projections: the df searched are many and differ from
    run to run, so above 30 df the Cornish-Fisher expansion (error < 1e-5 there) stands in for
    the exact quantile; the verdict itself always uses the exact one."""
    if df < 30:
        return _t_crit(confidence, df)
    return _cornish_fisher(_z(confidence), df)


def _mean_interval(
    scores: Sequence[float], confidence: float, score_range: tuple[float, float] | None
) -> tuple[Interval, Callable[[int], Interval] | None]:
    """The gate's mean interval over case scores, and a function giving the interval the same
    estimate and spread would have with n' cases (None when it cannot be extrapolated)."""
    n = len(scores)
    mean, sd = _mean_sd(scores)

    def make(m: int, exact: bool = False) -> Interval:
        if m < 2:
            return Interval(mean, -math.inf, math.inf, confidence, "t", m)
        crit = _t_crit(confidence, m - 1) if exact else _t_crit_projection(confidence, m - 1)
        half = crit * sd / math.sqrt(m)
        low, high = mean - half, mean + half
        method = "t"
        if score_range is not None:
            # never narrower than z**2 more cases at the far end of the range would allow
            # (only on a side where the range is finite: an unbounded side has no far end)
            k = _z(confidence) ** 2
            if math.isfinite(score_range[0]):
                floor_low = (m * mean + k * score_range[0]) / (m + k)
                if floor_low < low:
                    low, method = floor_low, "t+range"
            if math.isfinite(score_range[1]):
                floor_high = (m * mean + k * score_range[1]) / (m + k)
                if floor_high > high:
                    high, method = floor_high, "t+range"
            return Interval(mean, low, high, confidence, method, m).clip(score_range)
        return Interval(mean, low, high, confidence, method, m)

    if n < 2:
        return make(n, True), None
    return make(n, True), make


def _case_mean_interval(
    scores: Sequence[float], confidence: float, score_range: tuple[float, float] | None
) -> Interval:
    """The mean interval over case scores as a gate's mean check reports it: unbounded when the
    cases scored alike and the range cannot bound it (zero width would claim certainty)."""
    iv = _mean_interval(scores, confidence, score_range)[0]
    bounded = score_range is not None and all(math.isfinite(e) for e in score_range)
    if len(scores) >= 2 and _mean_sd(scores)[1] == 0.0 and not bounded:
        return Interval(iv.estimate, -math.inf, math.inf, confidence, "t", len(scores))
    return iv


def _check_mean(spec: GateSpec, side: str, bound: float, scores: Sequence[float]) -> CheckResult:
    if not scores:
        return CheckResult("mean", side, bound, None, "error", None, "no case could be scored")
    confidence = spec.confidence if spec.confidence is not None else 0.95
    iv, make = _mean_interval(scores, confidence, spec.score_range)
    if spec.confidence is None:
        return CheckResult("mean", side, bound, iv, _point_verdict(iv.estimate, side, bound), None)
    n = len(scores)
    if n < 2:
        return CheckResult(
            "mean",
            side,
            bound,
            iv,
            "inconclusive",
            None,
            "one scored case: no interval can be estimated; add cases",
        )
    spread = _mean_sd(scores)[1]
    bounded = spec.score_range is not None and all(math.isfinite(e) for e in spec.score_range)
    if spread == 0.0 and not bounded:
        return CheckResult(
            "mean",
            side,
            bound,
            # a zero-width interval would claim certainty: report it as unbounded
            Interval(iv.estimate, -math.inf, math.inf, confidence, "t", n),
            "inconclusive",
            None,
            f"all {n} case scores are equal: no spread to estimate an interval from "
            "(the scorer's range is not known or not bounded)",
        )
    verdict = _interval_verdict(iv, side, bound)
    if verdict != "inconclusive":
        return CheckResult("mean", side, bound, iv, verdict, None)
    needed = _needed(n, make, side, bound) if make is not None else None
    return CheckResult("mean", side, bound, iv, verdict, needed, _straddles(iv, bound))


def _straddles(iv: Interval, bound: float) -> str:
    pct = round(iv.confidence * 100, 4)
    return f"the {pct:g}% interval [{iv.low:.4g}, {iv.high:.4g}] straddles the bound {bound:g}"


def _check_pass_rate(
    spec: GateSpec, side: str, bound: float, verdicts: Sequence[bool]
) -> CheckResult:
    if not verdicts:
        return CheckResult(
            "pass_rate",
            side,
            bound,
            None,
            "error",
            None,
            "no case has a pass/fail verdict (assert a per-case bound, e.g. min=)",
        )
    n = len(verdicts)
    k = sum(verdicts)
    confidence = spec.confidence if spec.confidence is not None else 0.95
    iv = wilson_interval(k, n, confidence)
    if spec.confidence is None:
        return CheckResult(
            "pass_rate", side, bound, iv, _point_verdict(iv.estimate, side, bound), None
        )
    verdict = _interval_verdict(iv, side, bound)
    if verdict != "inconclusive":
        return CheckResult("pass_rate", side, bound, iv, verdict, None)
    p = k / n

    def make(m: int) -> Interval:
        # same observed rate with m cases (successes need not be an integer here)
        z = _z(confidence)
        z2 = z * z
        center = (m * p + z2 / 2.0) / (m + z2)
        half = z / (m + z2) * math.sqrt(m * p * (1.0 - p) + z2 / 4.0)
        low = 0.0 if k == 0 else max(0.0, center - half)
        high = 1.0 if k == n else min(1.0, center + half)
        return Interval(p, low, high, confidence, "wilson", m)

    return CheckResult(
        "pass_rate", side, bound, iv, verdict, _needed(n, make, side, bound), _straddles(iv, bound)
    )


def labelled_pairs(cases: Sequence[CaseSamples], reducer: str = "mean") -> list[tuple[bool, bool]]:
    """(person, judge) verdicts, one pair per labelled output: the samples of one assertion in
    one case that carry the same label are one labelled output judged several times (a repeat,
    ``judge_samples``), reduced with ``reducer`` to the judge's one verdict on it. Counting them
    as separate records would claim more evidence about the judge than the labels give (a
    narrower interval: a kappa gate passed on five re-asks of ten outputs). An output whose
    samples errored, or that has no verdict, is left out."""
    pairs: list[tuple[bool, bool]] = []
    for c in cases:
        groups: dict[tuple[int, bool], list[Sample]] = {}
        for s in c.samples:
            if s.human is not None:
                groups.setdefault((s.index, s.human), []).append(s)
        for (_, human), group in groups.items():
            bounded = next((s for s in group if not s.errored), group[0])
            # the assertion's own bound, both ends (a max-only assertion has no min: the case's,
            # another assertion's, would judge it against a bound it never had)
            if bounded.min is not None or bounded.max is not None:
                bmin, bmax = bounded.min, bounded.max
            else:
                bmin, bmax = c.min, c.max
            judged = _reduce(c.case, group, bmin, bmax, reducer)
            if judged.passed is not None and judged.n_errors == 0:
                pairs.append((human, judged.passed))
    return pairs


def _renamed(check: CheckResult, metric: str, empty: str) -> CheckResult:
    if check.interval is None:
        return dataclasses.replace(check, metric=metric, verdict="inconclusive", reason=empty)
    return _disagrees(dataclasses.replace(check, metric=metric))


def _disagrees(check: CheckResult) -> CheckResult:
    """A failed check on the judge says so in the words CI shows."""
    if check.verdict != "fail" or check.interval is None:
        return check
    name = {"kappa": "kappa", "true_pass_rate": "true-pass rate"}.get(
        check.metric, "true-fail rate"
    )
    return dataclasses.replace(
        check,
        reason=f"the judge disagrees with your labels: its {name} is "
        f"{check.interval.estimate:.3f}, below {check.bound:g}",
    )


def _judge_checks(spec: GateSpec, cases: Sequence[CaseSamples]) -> list[CheckResult]:
    """The gate's bounds on the judge (issue 20), over labelled samples only: Cohen's kappa of
    the judge's verdicts against the labels, the true-pass rate (the judge passes what people
    passed) and the true-fail rate (it fails what they failed). Too few labels is inconclusive,
    never a pass: with none, the check says to label cases."""
    if all(v is None for v in spec.judge_bounds.values()):
        return []
    pairs = labelled_pairs(cases, spec.reducer)
    none = (
        "no labelled record has both verdicts: give cases a person's verdict "
        "(assert_score(..., label=...)) to measure the judge"
    )
    out: list[CheckResult] = []
    if spec.min_kappa is not None:
        out.append(_check_kappa(spec, float(spec.min_kappa), pairs, none))
    if spec.min_true_pass is not None:
        judged = [j for h, j in pairs if h]
        check = _check_pass_rate(spec, "min", float(spec.min_true_pass), judged)
        out.append(_renamed(check, "true_pass_rate", f"{none} (none that people passed)"))
    if spec.min_true_fail is not None:
        judged = [not j for h, j in pairs if not h]
        check = _check_pass_rate(spec, "min", float(spec.min_true_fail), judged)
        out.append(_renamed(check, "true_fail_rate", f"{none} (none that people failed)"))
    return out


def _check_kappa(
    spec: GateSpec, bound: float, pairs: Sequence[tuple[bool, bool]], none: str
) -> CheckResult:
    if not pairs:
        return CheckResult("kappa", "min", bound, None, "inconclusive", None, none)
    table = confusion([h for h, _ in pairs], [j for _, j in pairs], (True, False))
    confidence = spec.confidence if spec.confidence is not None else 0.95
    k = cohen_kappa(table, confidence)
    if k.kappa is None or k.interval is None or k.se is None:
        return CheckResult(
            "kappa",
            "min",
            bound,
            None,
            "inconclusive",
            None,
            f"kappa is undefined over {k.n} labelled record(s): {k.reason}; label cases of "
            "both verdicts",
        )
    iv = k.interval
    if spec.confidence is None:
        point = _point_verdict(iv.estimate, "min", bound)
        return _disagrees(CheckResult("kappa", "min", bound, iv, point, None))
    verdict = _interval_verdict(iv, "min", bound)
    if verdict != "inconclusive":
        return _disagrees(CheckResult("kappa", "min", bound, iv, verdict, None))
    n, kappa, se = k.n, k.kappa, k.se
    observed, expected = k.observed, k.expected

    def make(m: int) -> Interval:
        # the same table shape with m records: the standard error shrinks as 1/sqrt(m), the
        # agreement's Wilson interval narrows with m
        return _kappa_interval(kappa, se * math.sqrt(n / m), observed, expected, m, confidence)

    return CheckResult(
        "kappa", "min", bound, iv, verdict, _needed(n, make, "min", bound), _straddles(iv, bound)
    )


@dataclass(frozen=True)
class CorrectedRate:
    """The true pass rate a judge's observed pass rate implies, given the judge's true-pass
    rate (passes among outputs people passed) and true-fail rate (fails among outputs people
    failed), each measured on labelled records. ``estimate`` and ``interval`` are None where the
    correction is not defined (``reason`` says why: a judge no better than chance, or labelled
    records too few to tell it from one)."""

    raw: float  # the judge's pass rate over the judged set
    estimate: float | None
    interval: Interval | None
    n: int  # judged records behind ``raw``
    true_pass: float | None  # None without labelled records people passed
    true_fail: float | None  # None without labelled records people failed
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "raw": self.raw,
            "estimate": self.estimate,
            "interval": None if self.interval is None else self.interval.to_json(),
            "n": self.n,
            "true_pass_rate": self.true_pass,
            "true_fail_rate": self.true_fail,
            "reason": self.reason,
        }


def corrected_pass_rate(
    passed: int,
    n: int,
    true_pass_hits: int,
    labelled_pass: int,
    true_fail_hits: int,
    labelled_fail: int,
    confidence: float = 0.95,
) -> CorrectedRate:
    """Rogan-Gladen: ``(raw + tf - 1) / (tp + tf - 1)`` for the judge's pass rate ``raw`` =
    ``passed / n`` over the judged set, its true-pass rate ``tp`` = ``true_pass_hits /
    labelled_pass`` and true-fail rate ``tf`` = ``true_fail_hits / labelled_fail``, cut to
    [0, 1].

    The interval is a delta-method interval in the manner of Lang and Reiczigel (2014): each of
    the three proportions is first moved towards 1/2 as in the Agresti-Coull interval
    (``z**2 / 2`` successes added to ``z**2`` trials); the delta-method variance of the
    corrected rate then combines the judged set's binomial variance with the labelled sets',
    and the interval is cut to [0, 1] (it always holds the estimate). Lang and Reiczigel add
    only 1 success to 2 trials for the true-pass and true-fail rates and shift the centre; with
    those constants a 95% interval covered the true rate in 92.8% of 20,000 simulated runs of
    a good judge (true rate 0.95, 50 labelled records drawn from the same outputs, 200 judged),
    while ``z**2`` trials on all three kept at least 94% in every configuration of
    ``benchmarks/bench_correction.py`` where the estimate is defined in at least 90% of the
    runs, at the price of wider intervals from small labelled sets.

    Not defined (``estimate`` and ``interval`` None, ``reason`` says why):

    - without labelled records of both kinds;
    - when ``tp + tf <= 1``: the judge passes failing outputs at least as often as passing
      ones, so its verdicts carry no information about the true rate;
    - when the labelled records cannot tell the judge from one no better than chance: the
      Agresti-Caffo interval (1 success added to 2 trials on each side) of ``tp + tf - 1`` at
      the same confidence reaches 0. The corrected rate is a ratio with ``tp + tf - 1`` below
      the line, and by Fieller's theorem the confidence set of a ratio whose denominator may
      be 0 is unbounded: the data do not bound the true pass rate. The delta-method interval
      stops meaning anything there, and the point estimate divides by a rate
      difference that may be next to 0, so neither is given; label more records. A judge no
      better than chance shows ``tp + tf > 1`` on about half of its labelled samples, but
      passes this check on about 2.5% of them (the benchmark: 0.1-4% depending on the set
      sizes). This check only withholds: every interval given is the one the delta method
      gives. Those it withholds in the benchmark mostly spanned all of [0, 1] (median width
      1) and covered the true rate in 99.96% of runs; the narrowest stood on one or two
      labelled failing records.

    Where the check withholds often, the intervals it lets through are a selected few and
    their coverage can sit a little below the level above: 92.7% for a weak judge (true-pass
    0.65, true-fail 0.6, true rate 0.95, 25 + 25 labelled records, 1,000 judged; 20,000
    simulated runs, an interval in 48% of them), with 3.6% of all runs getting an interval
    that misses."""
    _check_confidence(confidence)
    for name, hits, total in (
        ("passed", passed, n),
        ("true_pass_hits", true_pass_hits, labelled_pass),
        ("true_fail_hits", true_fail_hits, labelled_fail),
    ):
        if not (0 <= hits <= total):
            raise ValueError(f"{name}={hits} is outside [0, {total}]")
    if n < 1:
        raise ValueError("a corrected pass rate needs at least one judged record")
    raw = passed / n
    if labelled_pass < 1 or labelled_fail < 1:
        return CorrectedRate(
            raw,
            None,
            None,
            n,
            true_pass_hits / labelled_pass if labelled_pass else None,
            true_fail_hits / labelled_fail if labelled_fail else None,
            "the correction needs labelled records people passed and labelled records they "
            f"failed (have {labelled_pass} passed, {labelled_fail} failed)",
        )
    tp = true_pass_hits / labelled_pass
    tf = true_fail_hits / labelled_fail
    youden = tp + tf - 1.0
    if youden <= 0.0:
        return CorrectedRate(
            raw,
            None,
            None,
            n,
            tp,
            tf,
            f"the judge is no better than chance on the labelled records (true-pass rate "
            f"{tp:.3f} + true-fail rate {tf:.3f} <= 1): its pass rate says nothing about the "
            "true one",
        )
    z = _z(confidence)
    # Agresti-Caffo interval of tp + tf - 1 (a difference of two independent proportions,
    # tp - (1 - tf)): its lower end must clear 0, else the ratio's confidence set is unbounded
    tp_c = (true_pass_hits + 1.0) / (labelled_pass + 2.0)
    tf_c = (true_fail_hits + 1.0) / (labelled_fail + 2.0)
    youden_sd = math.sqrt(
        tp_c * (1.0 - tp_c) / (labelled_pass + 2.0) + tf_c * (1.0 - tf_c) / (labelled_fail + 2.0)
    )
    youden_low = tp_c + tf_c - 1.0 - z * youden_sd
    z2 = z * z
    # Agresti-Coull-adjusted proportions and their trial counts
    p_a = (passed + z2 / 2.0) / (n + z2)
    tp_a = (true_pass_hits + z2 / 2.0) / (labelled_pass + z2)
    tf_a = (true_fail_hits + z2 / 2.0) / (labelled_fail + z2)
    youden_a = tp_a + tf_a - 1.0
    if youden_low <= 0.0 or youden_a <= 0.0:
        return CorrectedRate(
            raw,
            None,
            None,
            n,
            tp,
            tf,
            f"the labelled records cannot tell the judge from one no better than chance "
            f"(true-pass rate {tp:.3f} of {labelled_pass}, true-fail rate {tf:.3f} of "
            f"{labelled_fail}: the {confidence * 100:g}% interval of their sum reaches down to "
            "1), so its verdicts do not bound the true pass rate; label more records",
        )
    estimate = min(1.0, max(0.0, (raw + tf - 1.0) / youden))
    center = (p_a + tf_a - 1.0) / youden_a
    var = (
        p_a * (1.0 - p_a) / (n + z2)
        + center**2 * tp_a * (1.0 - tp_a) / (labelled_pass + z2)
        + (1.0 - center) ** 2 * tf_a * (1.0 - tf_a) / (labelled_fail + z2)
    ) / youden_a**2
    half = z * math.sqrt(max(var, 0.0))
    # (the adjusted centre may sit beside the estimate: the interval always holds both)
    low = max(0.0, min(center - half, estimate))
    high = min(1.0, max(center + half, estimate))
    interval = Interval(estimate, low, high, confidence, "rogan-gladen", n)
    return CorrectedRate(raw, estimate, interval, n, tp, tf)


def _check_corrected(
    spec: GateSpec,
    side: str,
    bound: float,
    cases: Sequence[CaseSamples],
    results: Sequence[CaseResult],
) -> CheckResult:
    """A pass-rate bound decided on the corrected pass rate (``corrected=True``): the judge's
    pass rate over the unlabelled cases, corrected for its true-pass and true-fail rates on the
    labelled ones (one pair per labelled output, see :func:`labelled_pairs`). Whatever the
    correction cannot estimate (no unlabelled case, labels of one verdict only, a judge no
    better than chance, too few labels for an interval) is inconclusive with the reason, never
    a pass."""
    metric = "corrected_pass_rate"
    labelled = {c.case for c in cases if any(s.human is not None for s in c.samples)}
    judged = [r.passed for r in results if r.case not in labelled and r.passed is not None]
    pairs = labelled_pairs(cases, spec.reducer)
    if not judged:
        why = (
            "no unlabelled case has a verdict: the corrected pass rate estimates the unlabelled "
            "cases' true pass rate from the judge's verdicts on them"
        )
        return CheckResult(metric, side, bound, None, "inconclusive", None, why)
    people_pass = [j for h, j in pairs if h]
    people_fail = [j for h, j in pairs if not h]
    confidence = spec.confidence if spec.confidence is not None else 0.95
    rate = corrected_pass_rate(
        sum(judged),
        len(judged),
        sum(people_pass),
        len(people_pass),
        sum(1 for j in people_fail if not j),
        len(people_fail),
        confidence,
    )
    if rate.estimate is None or (spec.confidence is not None and rate.interval is None):
        why = f"the corrected pass rate is not defined: {rate.reason}"
        return CheckResult(metric, side, bound, rate.interval, "inconclusive", None, why)
    if spec.confidence is None:
        iv = rate.interval or Interval(
            rate.estimate, rate.estimate, rate.estimate, confidence, "rogan-gladen", len(judged)
        )
        return CheckResult(
            metric, side, bound, iv, _point_verdict(rate.estimate, side, bound), None
        )
    assert rate.interval is not None
    iv = rate.interval
    verdict = _interval_verdict(iv, side, bound)
    reason = "" if verdict != "inconclusive" else _straddles(iv, bound)
    return CheckResult(metric, side, bound, iv, verdict, None, reason)


def evaluate_gate(spec: GateSpec, cases: Sequence[CaseSamples]) -> GateResult:
    """Reduce each case with ``spec.reducer`` and check every bound of the gate.

    Mean bounds: t interval over the case scores (one value per case, so repeated samples count
    once). Pass-rate bounds: Wilson interval over the case verdicts. With ``spec.confidence`` a
    check passes when the interval clears the bound, fails when it lies entirely on the wrong
    side, and is inconclusive otherwise (with ``needed``); without it the point estimate decides.
    More unscored cases than ``spec.max_errors``, or no scored case at all, makes the gate
    ``error`` (never a pass). Calls ``spec.validate()`` first (ValueError for a bad gate).
    """
    spec.validate()
    results = tuple(reduce_case(c, spec.reducer) for c in cases)
    scored = [r for r in results if r.score is not None]
    n_errors = len(results) - len(scored)
    scores = [r.score for r in scored if r.score is not None]
    verdicts = [r.passed for r in scored if r.passed is not None]
    checks: list[CheckResult] = []
    for side, bound in (("min", spec.min_mean), ("max", spec.max_mean)):
        if bound is not None:
            checks.append(_check_mean(spec, side, float(bound), scores))
    for side, bound in (("min", spec.min_pass_rate), ("max", spec.max_pass_rate)):
        if bound is not None and spec.corrected:
            checks.append(_check_corrected(spec, side, float(bound), cases, results))
        elif bound is not None:
            check = _check_pass_rate(spec, side, float(bound), verdicts)
            undecided = len(scored) - len(verdicts)
            if verdicts and undecided:
                note = f"{undecided} scored case(s) have no pass/fail verdict and are not counted"
                check = dataclasses.replace(
                    check, reason=f"{check.reason}; {note}" if check.reason else note
                )
            checks.append(check)
    checks += _judge_checks(spec, cases)
    reason = ""
    if not scored:
        reason = f"none of the {len(results)} cases could be scored"
    elif n_errors > spec.max_errors:
        reason = (
            f"{n_errors} of {len(results)} cases could not be scored "
            f"(max_errors={spec.max_errors}); the gate cannot pass"
        )
    if reason:
        checks = [
            CheckResult(c.metric, c.side, c.bound, c.interval, "error", None, reason)
            for c in checks
        ]
    verdict = max((c.verdict for c in checks), key=_SEVERITY.__getitem__)
    if not reason:
        reason = "; ".join(c.reason for c in checks if c.reason and c.verdict == verdict)
    return GateResult(
        spec=spec,
        verdict=verdict,
        checks=tuple(checks),
        n_cases=len(results),
        n_scored=len(scored),
        n_errors=n_errors,
        n_samples=sum(r.n_samples for r in results),
        flaky=tuple(r.case for r in results if r.flaky),
        cases=results,
        reason=reason,
    )


# --------------------------------------------------------------------------------------------
# Per-scorer statistics for the summary
# --------------------------------------------------------------------------------------------


@final
@dataclass(frozen=True)
class ScorerStats:
    """Per scorer in a test, over its cases (each case's samples reduced by ``reducer``, as a
    gate with that reducer reduces them): the mean of the case scores with the interval a gate's
    mean check uses (t over cases, never narrower than the scorer's range allows), the pass rate
    of the case verdicts with a Wilson interval, and the flaky cases. The same names mean the
    same numbers as in a gate with the same reducer and confidence."""

    scorer: str
    n_cases: int
    n_samples: int
    mean: Interval | None
    pass_rate: Interval | None
    flaky: tuple[str, ...]
    n_errors: int = 0  # cases that could not be scored (an errored or lost sample)
    reducer: str = "mean"
    #: why this reducer ("as its gate"), or None for the default
    reducer_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer,
            "n_cases": self.n_cases,
            "n_samples": self.n_samples,
            "n_errors": self.n_errors,
            "reducer": self.reducer,
            "mean": self.mean.to_json() if self.mean is not None else None,
            "pass_rate": self.pass_rate.to_json() if self.pass_rate is not None else None,
            "flaky": list(self.flaky),
        }


def scorer_stats(
    scorer: str,
    cases: Sequence[CaseSamples],
    confidence: float = 0.95,
    score_range: tuple[float, float] | None = None,
    *,
    reducer: str = "mean",
    reducer_note: str | None = None,
) -> ScorerStats:
    """Summary statistics of one scorer over its cases (see ScorerStats); ``score_range`` (the
    scorer's declared range) bounds the mean interval as in a gate."""
    _check_confidence(confidence)
    results = [reduce_case(c, reducer) for c in cases]
    return _stats_of(
        scorer,
        len(cases),
        sum(len(c.samples) for c in cases),
        [r.score for r in results if r.score is not None],
        [r.passed for r in results if r.score is not None and r.passed is not None],
        tuple(r.case for r in results if r.flaky),
        confidence,
        score_range,
        reducer,
        reducer_note,
    )


def single_sample_stats(
    scorer: str,
    samples: Iterable[tuple[float | None, bool | None, str | None, float | None, float | None]],
    confidence: float = 0.95,
    score_range: tuple[float, float] | None = None,
    *,
    reducer: str = "mean",
    reducer_note: str | None = None,
) -> ScorerStats:
    """:func:`scorer_stats` of cases of one sample each (no repeat, one assertion of the
    scorer per case: most dataset tests), each given as ``(score, passed, error, min, max)``,
    told without a :class:`CaseSamples`, :class:`Sample` and :class:`CaseResult` per case:
    the same statistics, each case reduced as :func:`reduce_case` reduces one sample (an
    error, a missing or non-finite score: unscored; a bound decides a mean, median, min or
    max case, else the sample's verdict does). One sample is never flaky."""
    _check_confidence(confidence)
    if reducer not in REDUCERS:
        raise ValueError(f"unknown reducer {reducer!r}; choose one of {', '.join(REDUCERS)}")
    by_bound = reducer in _SCORE_REDUCERS
    isfinite = math.isfinite
    n = 0
    scores: list[float] = []
    verdicts: list[bool] = []
    for value, passed, error, bound_min, bound_max in samples:
        n += 1
        if error is not None or value is None or not isfinite(value):
            continue
        score = float(value)
        scores.append(score)
        if by_bound and (bound_min is not None or bound_max is not None):
            passed = _within(score, bound_min, bound_max)
        if passed is not None:
            verdicts.append(passed)
    return _stats_of(
        scorer, n, n, scores, verdicts, (), confidence, score_range, reducer, reducer_note
    )


def _stats_of(
    scorer: str,
    n_cases: int,
    n_samples: int,
    scores: list[float],
    verdicts: list[bool],
    flaky: tuple[str, ...],
    confidence: float,
    score_range: tuple[float, float] | None,
    reducer: str,
    reducer_note: str | None,
) -> ScorerStats:
    """The statistics over the cases' reduced scores (of the scored cases) and verdicts (of
    the scored cases that have one)."""
    mean = _case_mean_interval(scores, confidence, score_range) if scores else None
    pass_rate = wilson_interval(sum(verdicts), len(verdicts), confidence) if verdicts else None
    return ScorerStats(
        scorer=scorer,
        n_cases=n_cases,
        n_samples=n_samples,
        mean=mean,
        pass_rate=pass_rate,
        flaky=flaky,
        n_errors=n_cases - len(scores),
        reducer=reducer,
        reducer_note=reducer_note,
    )
