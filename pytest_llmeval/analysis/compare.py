"""Compare two runs (issue 10): paired tests on matched cases, per scorer and per gate.

Both runs are :class:`pytest_llmeval.core.model.Run` (read from files with :func:`load_run`, which
validates them). The unit of every statistic is the **case** ``(file, test, case id, assertion
index)`` of one scorer: its samples (repeats) are not independent, so a case's score on each side
is its samples reduced (the mean; a gate's own reducer for a gate), over **all** of that side's
samples (a change of ``repeat`` changes how many samples a case has, not what it is compared on;
the samples on one side only are counted and shown), and the paired tests resample cases, never
samples. A case with an errored sample on a side is unscored there (listed, never paired).

**Instruments.** Every record names the instrument that scored it (scorer, version, options,
code, judge model and sampling, prompt hashes; :class:`pytest_llmeval.core.model.Instrument`). A
scorer whose paired cases were scored with different instruments is ``incomparable``, with the
differences listed, unless the user accepts it (``accept``); the direction of a scorer (higher or
lower is better) is what its instruments declared, never a guess when the files say it.

Per scorer:

* baseline and current means over the matched cases, their difference (current - baseline) and a
  two-sided paired Student t interval for it (:func:`pytest_llmeval.core.stats.t_interval` on the
  per-case differences);
* a two-sided p-value from a **sign-flip permutation test** of the mean difference (under "no
  change" each case's difference is as likely to have either sign): exact enumeration of every
  sign pattern when at most :data:`EXACT_MAX` cases differ, a seeded Monte Carlo estimate
  ``(1 + hits) / (1 + resamples)`` otherwise (never 0, valid at any number of resamples);
* an exact two-sided **McNemar test** on the cases whose pass/fail verdict flipped (binomial on
  the discordant pairs with p = 1/2); a case passes when every matched sample with a verdict
  passed;
* the cases that got worse and better, biggest change first, with both outputs when the records
  carry them, and the cases (and records that errored) present on one side only.

A scorer *regressed* when its mean moved in its worse direction (a lower mean for a
higher-is-better scorer) with p < alpha; a move in the worse direction with p >= alpha is
reported as not significant. :meth:`Comparison.problems` says why a comparison cannot stand for
"no regression" (an incomparable instrument, a scorer nothing paired with, nothing compared).
Pure Python (``math`` and ``random``): the plugin may import it.

Why this module is long: the comparison of two runs is one definition (pairing, reduction per case,
instrument changes, the paired tests, the verdict per scorer and gate, its JSON); its text
rendering is in :mod:`pytest_llmeval.report.comparison` and its command line in
:mod:`pytest_llmeval.cli.compare`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from pytest_llmeval.analysis.agreement import ScorerAgreement
from pytest_llmeval.core.model import Instrument, Run
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import CaseSamples, reduce_case, t_interval

__all__ = [
    "COMPARISON_VERDICTS",
    "EXACT_MAX",
    "CaseChange",
    "Comparison",
    "ComparisonError",
    "ScorerComparison",
    "compare_reports",
    "compare_runs",
    "comparison_failures",
    "comparison_json",
    "load_run",
    "mcnemar_exact",
    "refuse_shard",
    "scorer_direction",
    "sign_flip_test",
]

#: Up to this many non-zero differences the sign-flip test enumerates all 2**n sign patterns.
EXACT_MAX = 16
DEFAULT_RESAMPLES = 10_000

CaseKey = tuple[str, str, str, int]  # (file, test, case id or "", assertion index)


class ComparisonError(ValueError):
    """A file that cannot be compared (not a valid report or saved run), naming the file and
    the field."""


# --------------------------------------------------------------------------------------------
# Paired tests
# --------------------------------------------------------------------------------------------


def sign_flip_test(
    diffs: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    exact_max: int = EXACT_MAX,
) -> tuple[float, str]:
    """Two-sided p-value of a paired sign-flip permutation test of ``mean(diffs) == 0``.

    Returns ``(p, method)``, method ``"exact"`` or ``"monte-carlo"``. Zero differences do not
    change under a sign flip and are left out (they scale the mean, not the p-value). No non-zero
    difference: p = 1.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples!r}")
    ds = [float(d) for d in diffs if d != 0.0]
    if any(not math.isfinite(d) for d in ds):
        raise ValueError("differences must be finite numbers")
    m = len(ds)
    if m == 0:
        return 1.0, "exact"
    observed = abs(math.fsum(ds))
    # Sums that equal the observed one up to rounding count as "as extreme".
    tol = 1e-9 * max(1.0, math.fsum(abs(d) for d in ds))
    threshold = observed - tol
    if m <= exact_max:
        sums = [0.0]
        for d in ds:
            sums = [s + d for s in sums] + [s - d for s in sums]
        hits = sum(1 for s in sums if abs(s) >= threshold)
        return min(1.0, hits / len(sums)), "exact"
    # Monte Carlo: a pattern is random bits; the sum of the "+" subset is looked up eight
    # differences at a time in precomputed tables of all 256 subset sums.
    total = math.fsum(ds)
    tables: list[list[float]] = []
    for start in range(0, m, 8):
        chunk = ds[start : start + 8]
        table = [0.0] * (1 << len(chunk))
        for mask in range(1, len(table)):
            low = mask & -mask
            table[mask] = table[mask ^ low] + chunk[low.bit_length() - 1]
        tables.append(table)
    rng = random.Random(seed)
    hits = 0
    for _ in range(resamples):
        bits = rng.getrandbits(m)
        plus = 0.0
        for table in tables:
            plus += table[bits & 255]
            bits >>= 8
        # flipped sum = (sum of kept) - (sum of flipped) = 2 * plus - total
        if abs(2.0 * plus - total) >= threshold:
            hits += 1
    return (1 + hits) / (1 + resamples), "monte-carlo"


def smallest_p(diffs: Sequence[float], resamples: int = DEFAULT_RESAMPLES) -> float:
    """The smallest p-value :func:`sign_flip_test` could give on as many paired cases as
    ``diffs``, whatever their values: every case changed the same way (``2 / 2**n`` exactly up to
    :data:`EXACT_MAX` changed cases, ``1 / (1 + resamples)`` by Monte Carlo beyond). At or above
    alpha no result of this size could be significant: the test had no power at all, which is
    not evidence of "no regression". (Few *changed* cases among many is not that: the test could
    have fired, and the data say the change is within noise.)"""
    n = len(diffs)
    if n == 0:
        return 1.0
    best = 2.0 / float(2 ** min(n, EXACT_MAX))
    if n > EXACT_MAX:
        best = min(best, 1.0 / (1 + resamples))
    return min(1.0, best)


def mcnemar_exact(worse: int, better: int) -> float:
    """Exact two-sided McNemar p-value: ``worse`` cases went pass -> fail, ``better`` fail -> pass.

    Under no change each discordant case is a fair coin: p = min(1, 2 * P(X <= min(b, c))) with
    X ~ Binomial(b + c, 1/2) (equal to ``scipy.stats.binomtest(b, b + c).pvalue``).
    """
    if worse < 0 or better < 0:
        raise ValueError("counts must be >= 0")
    n = worse + better
    if n == 0:
        return 1.0
    k = min(worse, better)
    log_half_n = -n * math.log(2.0)
    tail = math.fsum(
        math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        for i in range(k + 1)
    )
    return min(1.0, 2.0 * tail)


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def refuse_shard(run: Run, where: str) -> None:
    """A shard's report is part of a run: comparing it as the whole would call the cases of the
    other shards 'missing' or, worse, compare a lucky part. Raises ComparisonError."""
    if run.shard is not None:
        i, n = run.shard
        raise ComparisonError(
            f"{where} is the report of shard {i}/{n}, a part of a run: merge the shards' reports "
            "first (python -m pytest_llmeval merge SHARD.json... -o report.json) and compare that"
        )


def load_run(path: Path) -> Run:
    """Read and validate a JSON report, saved run or shard report; raise
    :class:`ComparisonError` naming the file and the field that is wrong."""
    from pytest_llmeval.core.model import RunFileError
    from pytest_llmeval.stores.run_files import load_run as _load

    try:
        return _load(path)[0]
    except RunFileError as exc:
        raise ComparisonError(str(exc)) from None


# --------------------------------------------------------------------------------------------
# Matching and comparing
# --------------------------------------------------------------------------------------------


def case_label(key: CaseKey) -> str:
    file, test, case_id, index = key
    text = f"{file}::{test}" if file else test
    if case_id:
        text += f"[{case_id}]"
    if index:
        text += f" #{index}"
    return text


def _output_of(r: ScoreRecord | None) -> Any:
    if r is None:
        return None
    return r.inputs.get("output") if isinstance(r.inputs, Mapping) else None


@final
@dataclass(frozen=True)
class CaseChange:
    """One matched case of one scorer: its score on each side (its samples reduced, as a gate
    reduces them: the mean unless the gate says otherwise)."""

    case: str
    baseline: float
    current: float
    baseline_passed: bool | None
    current_passed: bool | None
    baseline_output: Any = None
    current_output: Any = None
    where: str | None = None

    @property
    def delta(self) -> float:
        return self.current - self.baseline

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "baseline": self.baseline,
            "current": self.current,
            "delta": self.delta,
            "baseline_passed": self.baseline_passed,
            "current_passed": self.current_passed,
            "baseline_output": self.baseline_output,
            "current_output": self.current_output,
            "where": self.where,
        }


def _jf(x: float) -> float | None:
    return x if math.isfinite(x) else None


#: verdicts of a scorer's (or gate's) comparison
COMPARISON_VERDICTS: tuple[str, ...] = (
    "regressed",
    "improved",
    "worse-not-significant",
    "worse-too-few-cases",  # worse, and too few cases for any result to reach significance
    "better-not-significant",
    "unchanged",
    "not-comparable",  # both runs have it, no case was scored on both sides
    "incomparable",  # measured with another instrument (judge, version, prompt, options, code)
    "new",  # only in the current run
    "missing",  # only in the baseline
)


@final
@dataclass(frozen=True)
class ScorerComparison:
    """The comparison of one scorer (or one gate, ``kind="gate"``) between two runs.

    ``change`` is what the paired test says (regressed, improved, ...); ``verdict`` is the
    comparison's conclusion: ``change``, unless the two runs measured with different instruments
    (``incomparable``, unless the user accepted it), or nothing could be paired."""

    name: str
    kind: str  # "scorer" | "gate"
    higher_is_better: bool
    n: int  # matched cases with a score on both sides
    baseline_mean: float | None
    current_mean: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_method: str
    flips_worse: int  # pass -> fail
    flips_better: int  # fail -> pass
    mcnemar_p: float | None
    verdict: str  # one of COMPARISON_VERDICTS
    regressed: tuple[CaseChange, ...] = ()
    improved: tuple[CaseChange, ...] = ()
    only_baseline: tuple[str, ...] = ()
    only_current: tuple[str, ...] = ()
    errored: tuple[str, ...] = ()  # cases matched by key but without a score on a side
    change: str = "-"
    #: "same", "changed", or "unknown" (a side does not record its instruments: an old file)
    instrument: str = "same"
    instrument_changes: tuple[str, ...] = ()
    accepted: bool = False
    #: where higher_is_better came from: "declared" (by the runs' instruments), "registry"
    #: (this process's scorer), "guessed" (from the records' bounds: an old file)
    direction_source: str = "declared"
    samples_only_baseline: int = 0
    samples_only_current: int = 0
    #: cases with two records for one sample on a side (an old file that merged
    #: parametrizations): not paired
    ambiguous: tuple[str, ...] = ()
    reducer: str = "mean"

    @property
    def is_regression(self) -> bool:
        return self.verdict == "regressed"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "higher_is_better": self.higher_is_better,
            "direction_source": self.direction_source,
            "n": self.n,
            "baseline_mean": self.baseline_mean,
            "current_mean": self.current_mean,
            "diff": self.diff,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "p_method": self.p_method,
            "flips_worse": self.flips_worse,
            "flips_better": self.flips_better,
            "mcnemar_p": self.mcnemar_p,
            "verdict": self.verdict,
            "change": self.change,
            "instrument": self.instrument,
            "instrument_changes": list(self.instrument_changes),
            "accepted": self.accepted,
            "reducer": self.reducer,
            "regressed": [c.to_json() for c in self.regressed],
            "improved": [c.to_json() for c in self.improved],
            "only_baseline": list(self.only_baseline),
            "only_current": list(self.only_current),
            "errored": list(self.errored),
            "ambiguous": list(self.ambiguous),
            "samples_only_baseline": self.samples_only_baseline,
            "samples_only_current": self.samples_only_current,
        }


@final
@dataclass(frozen=True)
class Comparison:
    """Every scorer's (and gate's) comparison, with the settings that decided the verdicts."""

    scorers: tuple[ScorerComparison, ...]
    gates: tuple[ScorerComparison, ...] = ()
    alpha: float = 0.05
    confidence: float = 0.95
    baseline_label: str = "baseline"
    current_label: str = "current"
    notes: tuple[str, ...] = field(default=())
    #: per scorer with labelled records in either run: the judge against the labels on each
    #: side (issue 20), (scorer, baseline, current), None on a side without labels
    judges: tuple[tuple[str, ScorerAgreement | None, ScorerAgreement | None], ...] = ()

    @property
    def regressions(self) -> list[ScorerComparison]:
        return [s for s in (*self.scorers, *self.gates) if s.is_regression]

    @property
    def compared(self) -> int:
        """Cases paired over all scorers (0: nothing was compared)."""
        return sum(s.n for s in self.scorers)

    def problems(self) -> list[str]:
        """Why this comparison cannot stand for "no regression" (with
        ``--llm-eval-fail-on-regression`` each fails the run): a scorer measured with another
        instrument, a scorer of the baseline that nothing in this run paired with, nothing
        compared at all. Accepted scorers (``--llm-eval-accept-incomparable``) are left out."""
        out = []
        for s in (*self.scorers, *self.gates):
            if s.verdict == "worse-too-few-cases":
                out.append(
                    f"{s.name}: got worse ({number_text(s.diff, '+.3f')}) on {s.n} cases, "
                    f"too few for any result to reach p < {self.alpha:g}: nothing can be "
                    "concluded (add cases, or samples with repeat=)"
                )
        ambiguous = sum(len(s.ambiguous) for s in self.scorers)
        if ambiguous:
            out.append(
                f"{ambiguous} case(s) have two records for one sample in a run (the same items "
                "run twice, e.g. --keep-duplicates, or a report from before every "
                "parametrization had its own identity): they cannot be paired, so nothing can "
                "be said of them; run each item once, or record the baseline again"
            )
        for s in self.scorers:
            if s.verdict == "incomparable":
                out.append(
                    f"{s.name}: measured with another instrument than the baseline "
                    f"({'; '.join(s.instrument_changes[:3]) or 'see the comparison'}); not "
                    f"compared (accept it with --llm-eval-accept-incomparable={s.name}, or "
                    "re-record the baseline)"
                )
            elif s.verdict == "not-comparable" and not s.accepted:
                out.append(
                    f"{s.name}: no case was scored in both runs ({len(s.only_baseline)} only in "
                    f"the baseline, {len(s.only_current)} only in this run, {len(s.errored)} "
                    "without a score on a side): nothing compared is not 'no regression'"
                )
            elif s.verdict == "missing" and not s.accepted:
                out.append(
                    f"{s.name}: scored in the baseline ({len(s.only_baseline)} cases) but not in "
                    f"this run (accept it with --llm-eval-accept-incomparable={s.name})"
                )
        if not self.compared and not out:
            out.append(
                "nothing compared: no case of the baseline was scored in this run "
                "(renamed cases or another suite?)"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "confidence": self.confidence,
            "baseline": self.baseline_label,
            "current": self.current_label,
            "scorers": [s.to_json() for s in self.scorers],
            "gates": [g.to_json() for g in self.gates],
            "notes": list(self.notes),
            "problems": self.problems(),
            "judge_agreement": {
                name: {
                    "baseline": None if b is None else _agreement_brief(b),
                    "current": None if c is None else _agreement_brief(c),
                }
                for name, b, c in self.judges
            },
        }


def _agreement_brief(a: ScorerAgreement) -> dict[str, Any]:
    """What a comparison shows of a side's judge agreement (the run's own report has all)."""
    return {
        "n": a.n,
        "kappa": None if a.kappa is None else a.kappa.kappa,
        "accuracy": None if a.accuracy is None else a.accuracy.estimate,
        "true_pass_rate": None if a.true_pass is None else a.true_pass.estimate,
        "true_fail_rate": None if a.true_fail is None else a.true_fail.estimate,
    }


def _usable(r: ScoreRecord) -> bool:
    return r.error is None and r.score is not None and math.isfinite(r.score)


Side = dict[CaseKey, list[ScoreRecord]]


def _by_scorer(run: Run) -> dict[str, Side]:
    """scorer -> case -> its records (every sample and error)."""
    out: dict[str, Side] = {}
    for r in run.records:
        key = (r.file, r.test, r.case_id or "", r.index)
        out.setdefault(r.scorer, {}).setdefault(key, []).append(r)
    return out


def _duplicated(records: Sequence[ScoreRecord]) -> bool:
    samples = [(r.sample, r.index) for r in records]
    return len(samples) != len(set(samples))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k in sorted(value):
            out.update(_flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _quoted(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_instrument_change(
    before: Instrument | None, after: Instrument | None, b_digest: str, a_digest: str
) -> str:
    """One line saying how two instruments differ (``version: '3' -> '4'``, ...)."""
    if before is None or after is None:
        return f"instrument {b_digest} -> {a_digest} (the details are not in the files)"
    old = _flatten({"version": before.version, "identity": before.identity})
    new = _flatten({"version": after.version, "identity": after.identity})
    diffs = []
    for key in sorted(set(old) | set(new)):
        if key == "identity.version" or old.get(key) == new.get(key):
            continue
        name = key.removeprefix("identity.")
        diffs.append(f"{name}: {_quoted(old.get(key))} -> {_quoted(new.get(key))}")
    if before.higher_is_better != after.higher_is_better:
        diffs.append(f"higher_is_better: {before.higher_is_better} -> {after.higher_is_better}")
    return (
        "; ".join(diffs[:4]) + ("; ..." if len(diffs) > 4 else "")
        if diffs
        else (f"instrument {b_digest} -> {a_digest}")
    )


def _compare_cases(
    name: str,
    kind: str,
    higher_is_better: bool,
    base: Side,
    cur: Side,
    baseline: Run,
    current: Run,
    *,
    reducer: str = "mean",
    alpha: float,
    confidence: float,
    resamples: int,
    seed: int,
    accepted: bool,
    direction_source: str,
    label: Callable[[CaseKey], str] = case_label,
) -> ScorerComparison:
    changes: list[CaseChange] = []
    errored: list[str] = []
    ambiguous: list[str] = []
    instrument_changes: list[str] = []
    unknown = False
    only_b_samples = only_c_samples = 0
    for key in sorted(set(base) & set(cur)):
        rb, rc = base[key], cur[key]
        if _duplicated(rb) or _duplicated(rc):
            ambiguous.append(label(key))
            continue
        sb, sc = {(r.sample, r.index) for r in rb}, {(r.sample, r.index) for r in rc}
        only_b_samples += len(sb - sc)
        only_c_samples += len(sc - sb)
        case_b = reduce_case(_samples(rb), reducer)
        case_c = reduce_case(_samples(rc), reducer)
        if case_b.score is None or case_c.score is None:
            errored.append(label(key))
            continue
        db = {r.instrument for r in rb if _usable(r)}
        dc = {r.instrument for r in rc if _usable(r)}
        if None in db or None in dc:
            unknown = True
        elif db != dc and len(instrument_changes) < 3:
            b_d = min(d for d in db if d is not None)
            c_d = min(d for d in dc if d is not None)
            line = describe_instrument_change(
                baseline.instruments.get(b_d), current.instruments.get(c_d), b_d, c_d
            )
            if line not in instrument_changes:
                instrument_changes.append(line)
        first_b = next((r for r in rb if _usable(r)), rb[0])
        first_c = next((r for r in rc if _usable(r)), rc[0])
        changes.append(
            CaseChange(
                case=label(key),
                baseline=case_b.score,
                current=case_c.score,
                baseline_passed=case_b.passed,
                current_passed=case_c.passed,
                baseline_output=_output_of(first_b),
                current_output=_output_of(first_c),
                where=first_c.where or first_b.where,
            )
        )
    instrument = "changed" if instrument_changes else ("unknown" if unknown else "same")
    only_base = tuple(label(k) for k in sorted(set(base) - set(cur)))
    only_cur = tuple(label(k) for k in sorted(set(cur) - set(base)))
    sign = 1.0 if higher_is_better else -1.0
    worse = sorted(
        (c for c in changes if sign * c.delta < 0), key=lambda c: (sign * c.delta, c.case)
    )
    better = sorted(
        (c for c in changes if sign * c.delta > 0), key=lambda c: (-sign * c.delta, c.case)
    )
    flips_worse = sum(1 for c in changes if c.baseline_passed is True and c.current_passed is False)
    flips_better = sum(
        1 for c in changes if c.baseline_passed is False and c.current_passed is True
    )
    common: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "higher_is_better": higher_is_better,
        "n": len(changes),
        "flips_worse": flips_worse,
        "flips_better": flips_better,
        "mcnemar_p": mcnemar_exact(flips_worse, flips_better)
        if any(c.baseline_passed is not None and c.current_passed is not None for c in changes)
        else None,
        "regressed": tuple(worse),
        "improved": tuple(better),
        "only_baseline": only_base,
        "only_current": only_cur,
        "errored": tuple(errored),
        "ambiguous": tuple(ambiguous),
        "instrument": instrument,
        "instrument_changes": tuple(instrument_changes),
        "accepted": accepted,
        "direction_source": direction_source,
        "samples_only_baseline": only_b_samples,
        "samples_only_current": only_c_samples,
        "reducer": reducer,
    }
    if not changes:
        if not base:
            verdict = "new"
        elif not cur:
            verdict = "missing"
        else:
            verdict = "not-comparable"
        return ScorerComparison(
            baseline_mean=None,
            current_mean=None,
            diff=None,
            ci_low=None,
            ci_high=None,
            p_value=None,
            p_method="-",
            verdict=verdict,
            change="-",
            **common,
        )
    diffs = [c.delta for c in changes]
    iv = t_interval(diffs, confidence)
    p, method = sign_flip_test(diffs, resamples=resamples, seed=seed)
    diff = iv.estimate
    if diff == 0.0:
        change = "unchanged"
    elif sign * diff < 0:
        change = "regressed" if p < alpha else "worse-not-significant"
        if p >= alpha and smallest_p(diffs, resamples) >= alpha:
            # no result at this size could have shown a regression: not "no regression"
            change = "worse-too-few-cases"
    else:
        change = "improved" if p < alpha else "better-not-significant"
    mcnemar_p = common["mcnemar_p"]
    if flips_worse > flips_better and mcnemar_p is not None and mcnemar_p < alpha:
        # significantly more cases now fail their bound than pass it anew: a regression of the
        # pass rate, whatever the mean did (a pass-rate gate is about exactly that)
        change = "regressed"
    verdict = "incomparable" if instrument == "changed" and not accepted else change
    return ScorerComparison(
        baseline_mean=math.fsum(c.baseline for c in changes) / len(changes),
        current_mean=math.fsum(c.current for c in changes) / len(changes),
        diff=diff,
        ci_low=_jf(iv.low),
        ci_high=_jf(iv.high),
        p_value=p,
        p_method=method,
        verdict=verdict,
        change=change,
        **common,
    )


def _samples(records: Sequence[ScoreRecord]) -> CaseSamples:
    """One case's records as a gate sees them (an errored record is an unscored sample)."""
    from pytest_llmeval.analysis.gates import case_samples

    (case,) = case_samples(records)
    return case


def scorer_direction(name: str, current: Run, baseline: Run | None = None) -> tuple[bool, str]:
    """Whether a higher score is better for scorer ``name``, and where that came from: the
    runs' instruments (what the scorer declared when it ran; the current run first), else the
    scorer registered in this process, else a guess from the records' bounds (lower is better
    only when every bound asserted is a maximum), for files that do not record it."""
    for run in (current, baseline):
        if run is not None:
            way = run.direction(name)
            if way is not None:
                return way, "declared"
    from pytest_llmeval.core.errors import LLMEvalError
    from pytest_llmeval.engine.registry import default_registry

    try:
        return bool(default_registry.get(name).higher_is_better), "registry"
    except (LLMEvalError, ImportError, KeyError):
        pass
    records = [r for run in (current, baseline) if run is not None for r in run.records]
    bounded = [r for r in records if r.scorer == name and (r.min is not None or r.max is not None)]
    return not (bounded and all(r.min is None for r in bounded)), "guessed"


def compare_runs(
    baseline: Run,
    current: Run,
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    baseline_label: str = "baseline",
    current_label: str = "current",
    accept: Sequence[str] = (),
    gates: Sequence[Any] = (),
) -> Comparison:
    """Compare ``current`` with ``baseline``: per scorer, its cases ``(file, test, case id,
    assertion index)`` paired across the runs, each case's samples reduced to its mean (all of
    its samples, on each side: a change of ``repeat`` compares the same thing); per gate of the
    current run (``gates``: its :class:`~pytest_llmeval.analysis.gates.GateOutcome` list), its cases
    reduced by the gate's reducer on both sides. Scorers measured with a different instrument
    (judge model, version, prompt, options or code) are ``incomparable`` unless named in
    ``accept`` (or ``"all"`` is)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    base, cur = _by_scorer(baseline), _by_scorer(current)
    opts: dict[str, Any] = {
        "alpha": alpha,
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
    }
    accepted = set(accept)
    notes: list[str] = []
    scorers = []
    for name in sorted(set(base) | set(cur)):
        higher, source = scorer_direction(name, current, baseline)
        if source == "guessed":
            notes.append(
                f"{name}: neither run records whether a higher score is better, and this "
                f"process does not know the scorer: taken as {'higher' if higher else 'lower'} "
                "is better from its bounds"
            )
        scorers.append(
            _compare_cases(
                name,
                "scorer",
                higher,
                base.get(name, {}),
                cur.get(name, {}),
                baseline,
                current,
                accepted=name in accepted or "all" in accepted,
                direction_source=source,
                **opts,
            )
        )
    gate_rows = []
    for outcome in gates:
        if outcome.result is None:
            continue
        spec = outcome.spec
        file, _, test = outcome.test.partition("::")
        higher, source = scorer_direction(spec.scorer, current, baseline)
        b_side = _gate_side(base.get(spec.scorer, {}), file, test)
        c_side = _gate_side(cur.get(spec.scorer, {}), file, test)
        gate_rows.append(
            _compare_cases(
                f"gate {spec.scorer} ({outcome.test})",
                "gate",
                higher,
                b_side,
                c_side,
                baseline,
                current,
                reducer=spec.reducer,
                accepted=spec.scorer in accepted or "all" in accepted,
                direction_source=source,
                label=lambda k: case_label(k),
                **opts,
            )
        )
    for s in scorers:
        if s.instrument == "unknown":
            notes.append(
                f"{s.name}: a run does not record the instruments it measured with (a report "
                "written before pytest-llmeval recorded them): compared as if the same"
            )
        if s.samples_only_baseline or s.samples_only_current:
            notes.append(
                f"{s.name}: {s.samples_only_baseline} sample(s) only in the baseline and "
                f"{s.samples_only_current} only in this run (repeat changed?): each case is "
                "compared on the mean of all its samples on each side"
            )
        if s.ambiguous:
            notes.append(
                f"{s.name}: {len(s.ambiguous)} case(s) have two records for one sample on a side "
                "(a report that merged parametrizations of one case): not paired"
            )
    notes.extend(_repeat_notes(baseline, current))
    return Comparison(
        tuple(scorers),
        tuple(gate_rows),
        alpha=alpha,
        confidence=confidence,
        baseline_label=baseline_label,
        current_label=current_label,
        notes=tuple(dict.fromkeys(notes)),
        judges=_judges(baseline, current),
    )


def _judges(
    baseline: Run, current: Run
) -> tuple[tuple[str, ScorerAgreement | None, ScorerAgreement | None], ...]:
    """Each labelled scorer's agreement on both sides (the same numbers as each run's own
    report: the labelled records of each run, counted per labelled output)."""
    from pytest_llmeval.analysis.agreement import run_agreement

    base = {a.scorer: a for a in run_agreement(baseline)}
    cur = {a.scorer: a for a in run_agreement(current)}
    return tuple((name, base.get(name), cur.get(name)) for name in sorted({*base, *cur}))


def compare_reports(
    baseline: Mapping[str, Any], current: Mapping[str, Any], **options: Any
) -> Comparison:
    """:func:`compare_runs` over two JSON reports (or saved runs) given as parsed JSON, each
    validated first (:class:`ComparisonError` names the field that is wrong); the current run's
    gates are judged from its own plan. ``options`` are :func:`compare_runs`'s."""
    from pytest_llmeval.analysis.gates import evaluate_gates
    from pytest_llmeval.core.model import RunFileError
    from pytest_llmeval.stores.run_files import run_from_json

    try:
        base = run_from_json(baseline, str(options.pop("baseline_where", "baseline")))
        cur = run_from_json(current, str(options.pop("current_where", "current")))
    except RunFileError as exc:
        raise ComparisonError(str(exc)) from None
    options.setdefault("gates", evaluate_gates(cur))
    return compare_runs(base, cur, **options)


def _gate_side(records: Side, file: str, test: str) -> Side:
    """The records of one test as a gate sees them: a case is all of its assertions' samples."""
    out: Side = {}
    for (f, t, c, _i), recs in records.items():
        if f == file and t == test:
            out.setdefault((f, t, c, 0), []).extend(recs)
    return out


def _repeat_notes(baseline: Run, current: Run) -> list[str]:
    out = []
    before = {(p.file, p.test): p.repeat for p in baseline.plan}
    for p in current.plan:
        old = before.get((p.file, p.test))
        if old is not None and old != p.repeat:
            out.append(f"{p.name}: repeat {old} in the baseline, {p.repeat} in this run")
    return out


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def number_text(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def p_text(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x >= 0.001 else "<0.001"


def comparison_failures(cmp: Comparison) -> list[str]:
    """What fails a run that asked to fail on regression: each significant regression, and each
    of :meth:`Comparison.problems`."""
    out = []
    for s in cmp.regressions:
        if s.baseline_mean is None or s.current_mean is None:
            continue
        worse_mean = (s.diff or 0.0) * (1 if s.higher_is_better else -1) < 0
        if worse_mean and s.p_value is not None and s.p_value < cmp.alpha:
            out.append(
                f"regression: {s.name} mean {s.baseline_mean:.3f} -> {s.current_mean:.3f} "
                f"(p={p_text(s.p_value)} < {cmp.alpha:g})"
            )
        else:
            out.append(
                f"regression: {s.name}: {s.flips_worse} case(s) now miss their bound, "
                f"{s.flips_better} meet it anew (exact McNemar p={p_text(s.mcnemar_p)} < "
                f"{cmp.alpha:g})"
            )
    return out + cmp.problems()


# --------------------------------------------------------------------------------------------
# Command line: python -m pytest_llmeval compare BASELINE CURRENT
# --------------------------------------------------------------------------------------------


def comparison_json(
    cmp: Comparison,
    baseline: Run,
    current: Run,
    *,
    path: str | None = None,
    choice: str | None = None,
) -> dict[str, Any]:
    """The comparison as the JSON and HTML reports carry it: the comparison's own JSON (each
    scorer also under ``scorer``), the baseline run's metadata (``path``; ``choice``: how it was
    chosen), and for every current record matched in the baseline the baseline's side of it
    (score, verdict, rationale, judged inputs), so a report can show both outputs per case."""
    out: dict[str, Any] = cmp.to_json()
    for entry in (*out.get("scorers", []), *out.get("gates", [])):
        entry.setdefault("scorer", entry.get("name"))
    out["baseline_label"] = out.get("baseline")
    out["baseline"] = {
        "label": out["baseline_label"],
        "path": path,
        "choice": choice,
        "git_commit": baseline.info.get("git_commit"),
        "started": baseline.info.get("started"),
    }
    by_key = {r.key: r for r in baseline.records}
    cases = []
    for r in current.records:
        b = by_key.get(r.key)
        if b is None:
            continue
        delta = r.score - b.score if r.score is not None and b.score is not None else None
        ident = ("file", "test", "case_id", "scorer", "index", "sample")
        cases.append(
            {
                "key": [r.file, r.test, r.case_id, r.scorer, r.index, r.sample],
                "current": {k: getattr(r, k) for k in ident},
                "baseline": {
                    **{k: getattr(b, k) for k in ident},
                    "score": b.score,
                    "passed": b.passed,
                    "error": b.error,
                    "rationale": b.rationale,
                    "inputs": dict(b.inputs),
                },
                "delta": delta,
            }
        )
    out["cases"] = cases
    return out
