"""The ``llm-eval statistics`` and ``llm-eval gates`` sections of the terminal summary
(controller only; see :mod:`pytest_llmeval.analysis.gates`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_llmeval.analysis.gates import GateOutcome, TestStatistics, failing_outcomes
from pytest_llmeval.core.model import RunSettings
from pytest_llmeval.core.stats import CheckResult, Interval

__all__ = [
    "format_check",
    "format_gate",
    "gate_totals",
    "interval_defined",
    "metric_name",
    "undefined_interval_text",
    "write_gates",
    "write_statistics",
]

_MARKUP = {
    "pass": {"green": True},
    "fail": {"red": True, "bold": True},
    "error": {"red": True, "bold": True},
    "inconclusive": {"yellow": True, "bold": True},
    "skipped": {"yellow": True, "bold": True},
}


def metric_name(metric: str, reducer: str) -> str:
    """``mean`` / ``pass rate``, with the reducer when it is not the mean: the same name means
    the same number wherever it is printed (statistics and gates)."""
    if metric == "pass_rate":
        return "pass rate" if reducer == "mean" else f"pass rate ({reducer})"
    if metric == "corrected_pass_rate":
        # the judge's pass rate over the unlabelled cases, corrected for its measured error
        name = "corrected pass rate"
        return name if reducer == "mean" else f"{name} ({reducer})"
    if metric in _JUDGE_METRICS:
        # the judge against the labels (issue 20): over labelled records, no reducer
        return (
            "judge kappa"
            if metric == "kappa"
            else metric.replace("_", " ").replace("true ", "true-")
        )

    # majority, pass_at_k and pass_all decide a case's verdict; its score is still the mean
    return f"{metric} ({reducer})" if reducer in ("median", "min", "max") else metric


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def interval_defined(iv: Interval) -> bool:
    """False for an interval with no finite end: the t interval of one case, ``(-inf, inf)``."""
    return math.isfinite(iv.low) or math.isfinite(iv.high)


def undefined_interval_text(n: int) -> str:
    """What is printed in place of an interval that has no finite end: ``n/a (1 case)`` (the
    same words in the terminal, the Markdown summary and the HTML report)."""
    if n < 2:
        return f"n/a ({_plural(max(n, 0), 'case')})"
    return "n/a (unbounded)"


def _interval(iv: Interval | None, *, with_ci: bool = True) -> str:
    if iv is None:
        return "-"
    text = f"{iv.estimate:.3f}"
    if with_ci:
        if interval_defined(iv):
            text += f" [{iv.low:.3f}, {iv.high:.3f}]"
        else:
            text += f" [{undefined_interval_text(iv.n)}]"
    return text


def _interval_with_method(iv: Interval) -> str:
    """``0.700 [0.4, 0.9] (95% t)``; without a finite end no level or method is claimed."""
    if not interval_defined(iv):
        return _interval(iv)
    return f"{_interval(iv)} ({iv.confidence:.0%} {iv.method})"


def _case_name(key: str) -> str:
    """``file::test[case]`` -> ``case`` (the test is printed once above)."""
    if key.endswith("]") and "[" in key:
        return key[key.index("[") + 1 : -1]
    return key


def format_check(check: CheckResult, with_ci: bool, reducer: str = "mean") -> str:
    """``pass rate (majority) 0.750 [0.409, 0.929] >= 0.9: fail``."""
    metric = metric_name(check.metric, reducer)
    op = ">=" if check.side == "min" else "<="
    text = f"{metric} {_interval(check.interval, with_ci=with_ci)} {op} {check.bound:g}: "
    text += check.verdict
    if check.needed:
        more = "labelled records" if check.metric in _JUDGE_METRICS else "cases"
        text += f" (~{check.needed} more {more} may decide it)"
    return text


#: the checks of a gate on the judge itself (issue 20): over labelled records
_JUDGE_METRICS = ("kappa", "true_pass_rate", "true_fail_rate")


def format_gate(outcome: GateOutcome) -> list[str]:
    """The lines of one gate: its verdict, test, scorer and checks, then its counts and notes."""
    spec = outcome.spec
    head = f"{outcome.verdict.upper()} {outcome.test} {spec.scorer}"
    result = outcome.result
    if result is None:
        return [head, f"    {outcome.problem}", f"    declared by {spec.source}"]
    with_ci = spec.confidence is not None
    checks = "; ".join(format_check(c, with_ci, spec.reducer) for c in result.checks)
    level = f" ({spec.confidence:g} confidence)" if with_ci else ""
    lines = [f"{head}: {checks}{level}"]
    counts = (
        f"    {_plural(result.n_cases, 'case')}, {_plural(result.n_samples, 'sample')}, "
        f"{result.n_errors} unscored"
    )
    if spec.reducer != "mean":
        counts += f", reducer {spec.reducer}"
    if result.n_errors > spec.max_errors:
        counts += f" (max_errors={spec.max_errors}: errors are never counted as passes)"
    lines.append(counts)
    if outcome.note:
        lines.append(f"    {outcome.note}")
    for c in result.checks:  # the judge measured against labels: say what went wrong
        judged = c.metric in _JUDGE_METRICS or c.metric == "corrected_pass_rate"
        if judged and c.verdict != "pass" and c.reason:
            lines.append(f"    {c.reason}")
    if result.flaky:
        lines.append(f"    flaky: {', '.join(_case_name(c) for c in result.flaky)}")
    if outcome.problem:
        lines.append(f"    {outcome.problem}")
    return lines


def write_gates(
    tr: Any,
    outcomes: Sequence[GateOutcome],
    settings: RunSettings,
    verbosity: int,
    shard: tuple[int, int] | None = None,
) -> None:
    """Write the gates section: one block per gate (one line with ``-q``), and a totals line
    saying what fails the run. ``shard``: (i, n) of a shard run, whose gates saw only its cases:
    each is PARTIAL, and none is the verdict."""
    tr.write_sep(
        "=", "llm-eval gates" + (f" (PARTIAL: shard {shard[0]}/{shard[1]})" if shard else "")
    )
    for o in outcomes:
        lines = format_gate(o)
        if shard is not None:
            lines[0] = f"PARTIAL ({o.verdict} over this shard's cases) " + lines[0].split(" ", 1)[1]
            tr.write_line(lines[0], yellow=True)
        else:
            tr.write_line(lines[0], **_MARKUP.get(o.verdict, {}))
        if verbosity >= 0:
            for line in lines[1:]:
                tr.write_line(line)
            if verbosity > 0 and o.result is not None:
                tr.write_line(f"    declared by {o.spec.source}")
    for line, markup in gate_totals(outcomes, settings, shard):
        tr.write_line(line, **markup)


def gate_totals(
    outcomes: Sequence[GateOutcome],
    settings: RunSettings,
    shard: tuple[int, int] | None = None,
) -> list[tuple[str, dict[str, bool]]]:
    """The lines under the gates, each with its terminal markup: how many gates ended how and
    whether that fails the run (a shard's: partial, never the verdict), then what the
    inconclusive and skipped policies did."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.verdict] = counts.get(o.verdict, 0) + 1
    failing = failing_outcomes(outcomes, settings.inconclusive, settings.skipped)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no gate ran"
    if shard is not None:
        return [
            (
                f"gates: PARTIAL, shard {shard[0]} of {shard[1]} ({summary} over this shard's "
                "cases); not the verdict: merge the shard reports for it "
                "(python -m pytest_llmeval merge SHARD.json... -o report.json)",
                {"yellow": True, "bold": True},
            )
        ]
    lines: list[tuple[str, dict[str, bool]]] = []
    if failing:
        lines.append((f"gates: {summary}: the run fails", {"red": True, "bold": True}))
    else:
        lines.append((f"gates: {summary}", {"green": bool(outcomes)}))
    if counts.get("inconclusive"):
        policy = (
            "inconclusive gates fail the run (--llm-eval-inconclusive=pass lets them pass)"
            if settings.inconclusive != "pass"
            else "inconclusive gates do not fail the run (--llm-eval-inconclusive=pass)"
        )
        lines.append((policy, {"yellow": True}))
    if counts.get("skipped"):
        policy = (
            "gates whose every case was skipped fail the run (--llm-eval-skipped=pass lets "
            "them pass)"
            if settings.skipped != "pass"
            else "gates whose every case was skipped do not fail the run (--llm-eval-skipped=pass)"
        )
        lines.append((policy, {"yellow": True}))
    return lines


def write_statistics(tr: Any, statistics: Sequence[TestStatistics]) -> None:
    """Per scorer of each dataset test: the mean and the pass rate over its cases, each case's
    samples reduced as the scorer's gate reduces them (the mean without a gate), with their
    intervals, and the flaky cases."""
    tr.write_sep("=", "llm-eval statistics")
    tr.write_line(
        "per scorer: mean score and pass rate (share of cases meeting their bound), each with a "
        "confidence interval [low, high]; a case's repeated samples are combined into one score"
    )
    current = None
    for item in statistics:
        if item.test != current:
            tr.write_line(item.test)
            current = item.test
        s = item.stats
        parts = [_plural(s.n_cases, "case"), _plural(s.n_samples, "sample")]
        if s.n_errors:
            parts.append(f"{s.n_errors} unscored")
        if s.mean is not None:
            parts.append(f"{metric_name('mean', s.reducer)} {_interval_with_method(s.mean)}")
        if s.pass_rate is not None:
            parts.append(
                f"{metric_name('pass_rate', s.reducer)} {_interval_with_method(s.pass_rate)}"
            )
        line = f"  {s.scorer}: " + ", ".join(parts)
        if s.reducer_note and s.reducer != "mean":
            line += f" [{s.reducer}: {s.reducer_note}]"
        if s.flaky:
            line += f"; flaky: {', '.join(_case_name(c) for c in s.flaky)}"
        tr.write_line(line)
