"""Compare two runs (issue 10): paired tests on matched cases, per scorer and per gate.

Records of the two runs are matched on ``(file, test, case id, scorer, assertion index,
sample)``; a record without ``sample`` is sample 0. The unit of every statistic is the **case**
``(file, test, case id, assertion index)`` of one scorer: its samples (repeats) are not
independent, so a case's score on each side is the mean of its samples that both runs scored, and
the paired tests resample cases, never samples.

Per scorer:

* baseline and current means over the matched cases, their difference (current - baseline) and a
  two-sided paired Student t interval for it (:func:`pytest_llmeval.stats.t_interval` on the
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
reported as not significant. Pure Python (``math`` and ``random``): the plugin may import it.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from pytest_llmeval.stats import t_interval

__all__ = [
    "EXACT_MAX",
    "CaseChange",
    "Comparison",
    "ComparisonError",
    "ScorerComparison",
    "compare_reports",
    "format_comparison",
    "load_report",
    "mcnemar_exact",
    "records_of",
    "sign_flip_test",
]

#: Up to this many non-zero differences the sign-flip test enumerates all 2**n sign patterns.
EXACT_MAX = 16
DEFAULT_RESAMPLES = 10_000

CaseKey = tuple[str, str, str, int]  # (file, test, case id or "", assertion index)


class ComparisonError(ValueError):
    """A file that cannot be compared (not a report or saved run), with the reason."""


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


def records_of(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The records of a JSON report or of a saved run (whose ``report`` holds them)."""
    report = data.get("report") if isinstance(data.get("report"), Mapping) else data
    assert isinstance(report, Mapping)
    records = report.get("records")
    if not isinstance(records, list):
        raise ComparisonError("no 'records' list: not a pytest-llmeval JSON report or saved run")
    return [r for r in records if isinstance(r, Mapping)]  # type: ignore[misc]


def report_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = data.get("report")
    return inner if isinstance(inner, Mapping) else data


def load_report(path: Path) -> dict[str, Any]:
    """Read a JSON report or saved run; raise :class:`ComparisonError` saying what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ComparisonError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ComparisonError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ComparisonError(f"{path}: not a pytest-llmeval JSON report or saved run")
    try:
        records_of(data)
    except ComparisonError as exc:
        raise ComparisonError(f"{path}: {exc}") from None
    return data


# --------------------------------------------------------------------------------------------
# Matching and comparing
# --------------------------------------------------------------------------------------------


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _case_key(r: Mapping[str, Any]) -> CaseKey:
    return (
        str(r.get("file", "")),
        str(r.get("test", "")),
        "" if r.get("case_id") is None else str(r.get("case_id")),
        int(r.get("index", 0) or 0),
    )


def case_label(key: CaseKey) -> str:
    file, test, case_id, index = key
    text = f"{file}::{test}" if file else test
    if case_id:
        text += f"[{case_id}]"
    if index:
        text += f" #{index}"
    return text


def _output_of(r: Mapping[str, Any] | None) -> Any:
    if r is None:
        return None
    inputs = r.get("inputs")
    return inputs.get("output") if isinstance(inputs, Mapping) else None


@final
@dataclass(frozen=True)
class CaseChange:
    """One matched case of one scorer: its score on each side (mean of matched samples)."""

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


@final
@dataclass(frozen=True)
class ScorerComparison:
    """The comparison of one scorer (or one gate, ``kind="gate"``) between two runs."""

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
    verdict: str  # regressed | improved | worse-not-significant | better-not-significant |
    # unchanged | not-comparable
    regressed: tuple[CaseChange, ...] = ()
    improved: tuple[CaseChange, ...] = ()
    only_baseline: tuple[str, ...] = ()
    only_current: tuple[str, ...] = ()
    errored: tuple[str, ...] = ()  # cases matched by key but without a score on a side

    @property
    def is_regression(self) -> bool:
        return self.verdict == "regressed"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "higher_is_better": self.higher_is_better,
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
            "regressed": [c.to_json() for c in self.regressed],
            "improved": [c.to_json() for c in self.improved],
            "only_baseline": list(self.only_baseline),
            "only_current": list(self.only_current),
            "errored": list(self.errored),
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

    @property
    def regressions(self) -> list[ScorerComparison]:
        return [s for s in (*self.scorers, *self.gates) if s.is_regression]

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "confidence": self.confidence,
            "baseline": self.baseline_label,
            "current": self.current_label,
            "scorers": [s.to_json() for s in self.scorers],
            "gates": [g.to_json() for g in self.gates],
            "notes": list(self.notes),
        }


@dataclass
class _Side:
    scores: list[float] = field(default_factory=list)
    verdicts: list[bool] = field(default_factory=list)
    output: Any = None
    where: str | None = None


def _collect(
    records: Iterable[Mapping[str, Any]],
) -> dict[str, dict[CaseKey, dict[int, Mapping[str, Any]]]]:
    """scorer -> case -> sample -> record (a duplicate key keeps the first record)."""
    out: dict[str, dict[CaseKey, dict[int, Mapping[str, Any]]]] = {}
    for r in records:
        scorer = str(r.get("scorer", ""))
        sample = int(r.get("sample", 0) or 0)
        out.setdefault(scorer, {}).setdefault(_case_key(r), {}).setdefault(sample, r)
    return out


def _usable(r: Mapping[str, Any]) -> bool:
    return r.get("error") is None and _finite(r.get("score"))


def _compare_cases(
    name: str,
    kind: str,
    higher_is_better: bool,
    base: Mapping[CaseKey, Mapping[int, Mapping[str, Any]]],
    cur: Mapping[CaseKey, Mapping[int, Mapping[str, Any]]],
    *,
    alpha: float,
    confidence: float,
    resamples: int,
    seed: int,
    label: Callable[[CaseKey], str] = case_label,
) -> ScorerComparison:
    changes: list[CaseChange] = []
    errored: list[str] = []
    for key in sorted(set(base) & set(cur)):
        b_side, c_side = _Side(), _Side()
        for sample in sorted(set(base[key]) & set(cur[key])):
            rb, rc = base[key][sample], cur[key][sample]
            if not (_usable(rb) and _usable(rc)):
                continue
            for side, r in ((b_side, rb), (c_side, rc)):
                side.scores.append(float(r["score"]))
                if isinstance(r.get("passed"), bool):
                    side.verdicts.append(bool(r["passed"]))
                if side.output is None:
                    side.output = _output_of(r)
                    side.where = r.get("where") if isinstance(r.get("where"), str) else None
        if not b_side.scores:
            errored.append(label(key))
            continue
        changes.append(
            CaseChange(
                case=label(key),
                baseline=math.fsum(b_side.scores) / len(b_side.scores),
                current=math.fsum(c_side.scores) / len(c_side.scores),
                baseline_passed=all(b_side.verdicts) if b_side.verdicts else None,
                current_passed=all(c_side.verdicts) if c_side.verdicts else None,
                baseline_output=b_side.output,
                current_output=c_side.output,
                where=c_side.where or b_side.where,
            )
        )
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
    common = {
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
    }
    if not changes:
        return ScorerComparison(
            baseline_mean=None,
            current_mean=None,
            diff=None,
            ci_low=None,
            ci_high=None,
            p_value=None,
            p_method="-",
            verdict="not-comparable",
            **common,  # type: ignore[arg-type]
        )
    diffs = [c.delta for c in changes]
    iv = t_interval(diffs, confidence)
    p, method = sign_flip_test(diffs, resamples=resamples, seed=seed)
    diff = iv.estimate
    if diff == 0.0:
        verdict = "unchanged"
    elif sign * diff < 0:
        verdict = "regressed" if p < alpha else "worse-not-significant"
    else:
        verdict = "improved" if p < alpha else "better-not-significant"
    return ScorerComparison(
        baseline_mean=math.fsum(c.baseline for c in changes) / len(changes),
        current_mean=math.fsum(c.current for c in changes) / len(changes),
        diff=diff,
        ci_low=_jf(iv.low),
        ci_high=_jf(iv.high),
        p_value=p,
        p_method=method,
        verdict=verdict,
        **common,  # type: ignore[arg-type]
    )


def scorer_direction(name: str, records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a higher score is better for scorer ``name``: the registered scorer's own
    declaration; for an unknown scorer, lower is better only when every bound its records
    asserted is a maximum."""
    from pytest_llmeval.errors import LLMEvalError
    from pytest_llmeval.registry import default_registry

    try:
        return bool(default_registry.get(name).higher_is_better)
    except (LLMEvalError, ImportError, KeyError):
        pass
    bounded = [r for r in records if r.get("min") is not None or r.get("max") is not None]
    return not (bounded and all(r.get("min") is None for r in bounded))


def _gate_cases(
    gates: Any,
) -> tuple[dict[str, tuple[bool, dict[CaseKey, dict[int, Mapping[str, Any]]]]], list[str]]:
    """gate name -> (higher is better, case -> {0: pseudo-record}) from a report's ``gates``
    section (a list of gate outcomes, each with ``spec`` and ``result.cases``, or gate results
    with ``spec`` and ``cases``); a malformed entry is
    noted, not fatal: gates are optional in a report."""
    out: dict[str, tuple[bool, dict[CaseKey, dict[int, Mapping[str, Any]]]]] = {}
    notes: list[str] = []
    if gates is None:
        return out, notes
    entries = list(gates.values()) if isinstance(gates, Mapping) else gates
    if not isinstance(entries, list):
        return out, ["the 'gates' section is not a list; gates not compared"]
    for g in entries:
        spec = g.get("spec") if isinstance(g, Mapping) else None
        cases = g.get("cases") if isinstance(g, Mapping) else None
        result = g.get("result") if isinstance(g, Mapping) else None
        if cases is None and isinstance(result, Mapping):
            cases = result.get("cases")  # a gate outcome: {"test", "spec", "result": {"cases"}}
        if isinstance(g, Mapping) and cases is None and "result" in g:
            continue  # a gate that had nothing to compute (its "problem" says why)
        if not isinstance(spec, Mapping) or not isinstance(cases, list):
            notes.append("a gate entry without 'spec' and 'cases' was not compared")
            continue
        where = g.get("test") or spec.get("source") or ""
        name = f"gate {spec.get('scorer', '?')}" + (f" ({where})" if where else "")
        higher = not (spec.get("min_mean") is None and spec.get("max_mean") is not None)
        table: dict[CaseKey, dict[int, Mapping[str, Any]]] = {}
        for c in cases:
            if isinstance(c, Mapping):
                table[("", "", str(c.get("case")), 0)] = {0: c}
        out[name] = (higher, table)
    return out, notes


def compare_reports(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    baseline_label: str = "baseline",
    current_label: str = "current",
    directions: Mapping[str, bool] | None = None,
) -> Comparison:
    """Compare two JSON reports (or saved runs). ``directions``: scorer -> higher is better,
    overriding :func:`scorer_direction`."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    base_recs, cur_recs = records_of(baseline), records_of(current)
    base, cur = _collect(base_recs), _collect(cur_recs)
    opts = {"alpha": alpha, "confidence": confidence, "resamples": resamples, "seed": seed}
    scorers = []
    for name in sorted(set(base) | set(cur)):
        if directions is not None and name in directions:
            higher = directions[name]
        else:
            higher = scorer_direction(
                name, [r for r in (*base_recs, *cur_recs) if r.get("scorer") == name]
            )
        scorers.append(
            _compare_cases(name, "scorer", higher, base.get(name, {}), cur.get(name, {}), **opts)  # type: ignore[arg-type]
        )
    gb, notes_b = _gate_cases(report_of(baseline).get("gates"))
    gc, notes_c = _gate_cases(report_of(current).get("gates"))
    gates = []
    for name in sorted(set(gb) | set(gc)):
        higher = (gc.get(name) or gb[name])[0]
        gates.append(
            _compare_cases(
                name,
                "gate",
                higher,
                gb.get(name, (higher, {}))[1],
                gc.get(name, (higher, {}))[1],
                label=lambda k: k[2],
                **opts,  # type: ignore[arg-type]
            )
        )
    return Comparison(
        tuple(scorers),
        tuple(gates),
        alpha=alpha,
        confidence=confidence,
        baseline_label=baseline_label,
        current_label=current_label,
        notes=tuple(dict.fromkeys([*notes_b, *notes_c])),
    )


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------

_VERDICT_TEXT = {
    "regressed": "REGRESSED",
    "improved": "improved",
    "worse-not-significant": "lower, not significant",
    "better-not-significant": "higher, not significant",
    "unchanged": "unchanged",
    "not-comparable": "no matched cases",
}


def _n(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x >= 0.001 else "<0.001"


def _short(value: Any, limit: int = 80) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping) and "truncated" in value and "text" in value:
        value = str(value["text"]) + "..."
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _verdict_text(s: ScorerComparison) -> str:
    text = _VERDICT_TEXT.get(s.verdict, s.verdict)
    if not s.higher_is_better and s.verdict in ("worse-not-significant", "better-not-significant"):
        text = "worse, not significant" if s.verdict.startswith("worse") else "better, n.s."
    return text


def format_comparison(cmp: Comparison, *, max_cases: int = 5) -> list[str]:
    """The comparison as text lines: one table row per scorer and gate, then, for each scorer
    that changed, its biggest regressed and improved cases (at most ``max_cases`` each) and the
    cases present on one side only."""
    pct = f"{cmp.confidence:.0%}"
    header = ("scorer", "n", "baseline", "current", "diff", f"{pct} CI", "p", "flips", "verdict")
    rows = [header]
    items = [*cmp.scorers, *cmp.gates]
    for s in items:
        ci = "-" if s.diff is None else f"[{_n(s.ci_low, '+.3f')}, {_n(s.ci_high, '+.3f')}]"
        rows.append(
            (
                s.name,
                str(s.n),
                _n(s.baseline_mean),
                _n(s.current_mean),
                _n(s.diff, "+.3f"),
                ci,
                _p(s.p_value),
                f"-{s.flips_worse}/+{s.flips_better}",
                _verdict_text(s),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        f"{cmp.baseline_label} -> {cmp.current_label} (alpha {cmp.alpha:g}; p: paired sign-flip "
        "permutation test; flips: pass->fail/fail->pass)"
    ]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1], strict=True)
        ]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    for s in items:
        if s.mcnemar_p is not None and (s.flips_worse or s.flips_better):
            lines.append(
                f"{s.name}: {s.flips_worse} pass->fail, {s.flips_better} fail->pass "
                f"(exact McNemar p={_p(s.mcnemar_p)})"
            )
        for title, cases in (("regressed", s.regressed), ("improved", s.improved)):
            if not cases:
                continue
            lines.append(f"{s.name}: {len(cases)} case(s) {title}, biggest first:")
            for c in cases[:max_cases]:
                lines.append(f"  {c.case}: {c.baseline:.4g} -> {c.current:.4g} ({c.delta:+.4g})")
                if c.baseline_output is not None or c.current_output is not None:
                    lines.append(f"      was: {_short(c.baseline_output)}")
                    lines.append(f"      now: {_short(c.current_output)}")
            if len(cases) > max_cases:
                lines.append(f"  ... and {len(cases) - max_cases} more")
        for title, names in (
            ("only in the baseline", s.only_baseline),
            ("only in the current run", s.only_current),
            ("without a score on one side (error)", s.errored),
        ):
            if names:
                shown = ", ".join(names[:max_cases])
                more = f", ... ({len(names) - max_cases} more)" if len(names) > max_cases else ""
                lines.append(f"{s.name}: {len(names)} case(s) {title}: {shown}{more}")
    lines.extend(cmp.notes)
    return lines


# --------------------------------------------------------------------------------------------
# Command line: python -m pytest_llmeval compare BASELINE CURRENT
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``compare BASELINE CURRENT``: print the comparison; exit 1 on a significant regression
    with ``--fail-on-regression``, 2 for unusable input."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmeval compare",
        description="Compare two pytest-llmeval runs (saved runs or JSON reports).",
    )
    parser.add_argument("baseline", type=Path, help="the baseline: a saved run or JSON report")
    parser.add_argument("current", type=Path, help="the run to check against it")
    parser.add_argument(
        "--fail-on-regression",
        nargs="?",
        const=0.05,
        default=None,
        type=float,
        metavar="ALPHA",
        help="exit 1 when a scorer's mean gets worse with p < ALPHA (default 0.05)",
    )
    parser.add_argument("--alpha", type=float, default=None, help="significance level (0.05)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--max-cases", type=int, default=5, help="cases listed per scorer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the Monte Carlo test")
    args = parser.parse_args(list(argv))
    alpha = args.fail_on_regression if args.fail_on_regression is not None else args.alpha
    alpha = 0.05 if alpha is None else alpha
    if not 0.0 < alpha < 1.0:
        parser.error(f"ALPHA must be strictly between 0 and 1, got {alpha!r}")
    try:
        base = load_report(args.baseline)
        cur = load_report(args.current)
    except ComparisonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cmp = compare_reports(
        base,
        cur,
        alpha=alpha,
        seed=args.seed,
        baseline_label=str(args.baseline),
        current_label=str(args.current),
    )
    if args.json:
        print(json.dumps(cmp.to_json(), indent=2, allow_nan=False))
    else:
        for line in format_comparison(cmp, max_cases=args.max_cases):
            print(line)
        for s in cmp.regressions:
            print(
                f"regression: {s.name} mean {s.baseline_mean:.3f} -> {s.current_mean:.3f} "
                f"(p={_p(s.p_value)} < {alpha:g})"
            )
    return 1 if cmp.regressions and args.fail_on_regression is not None else 0
