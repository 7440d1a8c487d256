"""The llm-eval sections of pytest's terminal summary (controller only) and of ``merge``'s output:
the ``llm-eval summary`` table here, the statistics and gates in :mod:`.gates`, the comparison;
:class:`TerminalWriter` writes them all from a :class:`~pytest_llmeval.report.view.RunView`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.records import ScorerAggregate, ScoreRecord, aggregate

if TYPE_CHECKING:
    from pytest_llmeval.analysis.agreement import ScorerAgreement
    from pytest_llmeval.analysis.compare import Comparison
    from pytest_llmeval.analysis.panel import ScorerPanel
    from pytest_llmeval.analysis.stability import ScorerStability
    from pytest_llmeval.report.view import Baseline, RunView

__all__ = [
    "COLUMNS",
    "TerminalWriter",
    "format_table",
    "report_error_message",
    "scorer_cells",
    "totals_line",
    "write_comparison",
    "write_report_outcome",
    "write_summary",
]

#: the per-scorer table's columns (``calls``: judge calls; ``cached``: scores from the cache)
COLUMNS = (
    "scorer",
    "n",
    "mean",
    "min",
    "max",
    "passed",
    "failed",
    "errors",
    "cached",
    "calls",
    "tokens",
    "cost",
    "time",
)
_MAX_FAILURES_SHOWN = 20

#: Characters of a rationale shown per failing case, by verbosity (default, -v, -vv and more).
#: A judge can reply with pages; the terminal shows a bounded part and the JSON report keeps all.
RATIONALE_LIMITS = (160, 1000, 4000)
#: The same for the message of a scoring error.
ERROR_LIMITS = (300, 1000, 4000)


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def scorer_cells(agg: ScorerAggregate) -> tuple[str, ...]:
    """One scorer's row of the per-scorer table, a cell per column of :data:`COLUMNS` (the
    terminal and the Markdown summary print the same numbers)."""
    return (
        agg.scorer,
        str(agg.n),
        _num(agg.mean),
        _num(agg.min if agg.scored else None),
        _num(agg.max if agg.scored else None),
        str(agg.passed),
        str(agg.failed),
        str(agg.errors),
        str(agg.cache_hits),
        str(agg.judge_calls),
        str(agg.prompt_tokens + agg.completion_tokens)
        + (f" ({agg.cached_prompt_tokens} cached)" if agg.cached_prompt_tokens else ""),
        "-" if agg.cost_usd is None else f"${agg.cost_usd:.4f}",
        f"{agg.time_s:.2f}s",
    )


def format_table(aggs: Sequence[ScorerAggregate]) -> list[str]:
    """The per-scorer table as aligned text lines (header first)."""
    rows = [COLUMNS, *(scorer_cells(a) for a in aggs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _plural(n: int, what: str) -> str:
    """``1 score``, ``0 scores``, ``2 scores``."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def totals_line(records: Sequence[ScoreRecord], aggs: Sequence[ScorerAggregate]) -> str:
    """``40 scores, 12 from cache, 28 judge calls, $0.0123`` (and the calls of unknown cost)."""
    total_cost = sum(a.cost_usd or 0.0 for a in aggs)
    total_calls = sum(a.judge_calls for a in aggs)
    hits = sum(a.cache_hits for a in aggs)
    n = sum(a.n for a in aggs)
    unpriced = sum(r.judge_calls for r in records if r.judge_calls and r.cost_usd is None)
    return (
        f"{_plural(n, 'score')}, {hits} from cache, {_plural(total_calls, 'judge call')}"
        + (f", ${total_cost:.4f}" if total_cost else "")
        + (
            f" ({_plural(unpriced, 'call')} at an unknown cost: see llm_eval_prices)"
            if unpriced
            else ""
        )
    )


def _bound(rec: ScoreRecord) -> str:
    parts = []
    if rec.min is not None:
        parts.append(f">= {rec.min:g}")
    if rec.max is not None:
        parts.append(f"<= {rec.max:g}")
    return " and ".join(parts) or "-"


def _case(rec: ScoreRecord, samples: bool = False) -> str:
    """``file::test[case]``; with ``samples`` (a run with repeated cases) the sample index too,
    as in the node id (``[case-s2]``)."""
    text = f"{rec.file}::{rec.test}"
    if rec.case_id is not None:
        text += f"[{rec.case_id}-s{rec.sample}]" if samples else f"[{rec.case_id}]"
    return text


def _limit(limits: tuple[int, int, int], verbosity: int) -> int:
    return limits[min(max(verbosity, 0), len(limits) - 1)]


def _reason(text: str | None, limit: int, report_written: bool = False) -> str:
    """``text`` on one line, cut at ``limit`` characters with a note of how much was left out
    and where to read it."""
    if not text:
        return ""
    flat = " ".join(text.split())
    if len(flat) > limit:
        where = "see the JSON report" if report_written else "--llm-eval-report keeps it whole"
        flat = f"{flat[:limit]}… ({len(flat) - limit} more chars; {where})"
    return flat


def write_summary(
    tr: Any, records: Sequence[ScoreRecord], verbosity: int, *, report_written: bool = False
) -> None:
    """Write the section. ``-q`` prints one line per scorer; the default adds the table's
    columns and the failing cases (at most 20, reasons cut at 160 characters); ``-v`` shows every
    failure with up to 1000 characters of its reason, ``-vv`` up to 4000 and every scored case.
    ``report_written``: a JSON report (which keeps every reason whole) was written."""
    aggs = list(aggregate(records).values())
    samples = any(r.sample for r in records)
    tr.write_sep("=", "llm-eval summary")
    if verbosity < 0:
        for a in aggs:
            mean = _num(a.mean)
            tr.write_line(
                f"{a.scorer}: n={a.n} mean={mean} passed={a.passed} failed={a.failed}"
                + (f" errors={a.errors}" if a.errors else "")
            )
        return
    for line in format_table(aggs):
        tr.write_line(line)
    tr.write_line(totals_line(records, aggs))
    served = sorted({m for r in records for m in r.judge_models})
    if served:
        tr.write_line("judge calls answered by model: " + ", ".join(served))
    failing = [r for r in records if r.passed is False and not r.gated]
    gated_misses = [r for r in records if r.passed is False and r.gated]
    errored = [r for r in records if r.error is not None]
    budget = [r for r in errored if r.error and r.error.startswith("BudgetExceededError")]
    if budget:
        tr.write_line(
            f"budget spent: {len(budget)} scoring(s) not started (--llm-eval-budget)", yellow=True
        )
    if failing:
        tr.write_line("")
        tr.write_line("failing scores:", red=True, bold=True)
        limit = _limit(RATIONALE_LIMITS, verbosity)
        shown = failing if verbosity > 0 else failing[:_MAX_FAILURES_SHOWN]
        for r in shown:
            tr.write_line(
                f"  {_case(r, samples)} {r.scorer} = {_num(r.score, '.4g')} (bound {_bound(r)})"
                + (" [cached]" if r.cached else "")
            )
            reason = _reason(r.rationale, limit, report_written)
            if reason:
                tr.write_line(f"      reason: {reason}")
        if len(shown) < len(failing):
            tr.write_line(f"  ... and {len(failing) - len(shown)} more (use -v to see all)")
    if gated_misses:
        # Misses inside a gated test: the test passed, its gate (llm-eval gates below) decides.
        tr.write_line("")
        tr.write_line("gated misses (counted by their gate):", yellow=True, bold=True)
        shown = gated_misses if verbosity > 0 else gated_misses[:_MAX_FAILURES_SHOWN]
        for r in shown:
            tr.write_line(
                f"  {_case(r, samples)} {r.scorer} = {_num(r.score, '.4g')} (bound {_bound(r)})"
                + (" [cached]" if r.cached else "")
            )
        if len(shown) < len(gated_misses):
            tr.write_line(f"  ... and {len(gated_misses) - len(shown)} more (use -v to see all)")
    if errored:
        tr.write_line("")
        tr.write_line("scoring errors:", red=True, bold=True)
        for r in errored if verbosity > 0 else errored[:_MAX_FAILURES_SHOWN]:
            error = _reason(r.error, _limit(ERROR_LIMITS, verbosity), report_written)
            tr.write_line(f"  {_case(r, samples)} {r.scorer}: {error}")
    if verbosity > 1:
        tr.write_line("")
        tr.write_line("all scores:")
        for r in records:
            status = {True: "pass", False: "FAIL", None: "-"}[r.passed]
            tr.write_line(f"  {_case(r, samples)} {r.scorer} = {_num(r.score, '.4g')} {status}")


def report_error_message(
    path: Path, error: str, kind: str = "JSON", *, appended: bool = False
) -> str:
    """The line that says a report could not be written (or appended), and why."""
    if appended:
        return (
            f"llm-eval: could not append the {kind} report to {path}: {error} (the file may "
            "hold a part of it)"
        )
    return (
        f"llm-eval: could not write the {kind} report to {path}: {error} "
        "(no report was written; a previous report at that path is unchanged)"
    )


def write_report_outcome(
    tr: Any, path: Path, error: str | None, kind: str = "JSON", *, appended: bool = False
) -> None:
    """After the summary: where a report was written (or appended), or why it could not be."""
    if error is None:
        tr.write_line(f"llm-eval: {kind} report {'appended' if appended else 'written'} to {path}")
    else:
        tr.write_line(
            report_error_message(path, error, kind, appended=appended), red=True, bold=True
        )


def write_comparison(
    tr: Any,
    cmp: Comparison | None,
    baseline: Baseline | None,
    *,
    has_records: bool,
    shard: tuple[int, int] | None,
    fail_on_regression: float | None,
) -> None:
    """The ``llm-eval comparison`` section: which baseline was compared with and why (``last``
    is the newest saved run that passed: the runs passed over are named), the table, each
    regression and each reason the comparison cannot stand for "no regression"."""
    from pytest_llmeval.analysis.compare import comparison_failures
    from pytest_llmeval.report.comparison import format_comparison

    if baseline is None and cmp is None:
        return
    problem = baseline.problem if baseline is not None else None
    tr.write_sep("=", "llm-eval comparison")
    if baseline is not None:
        over = ""
        if baseline.passed_over:
            shown = "; ".join(f"run {n}: {why}" for n, why in baseline.passed_over[:5])
            more = len(baseline.passed_over) - 5
            over = f" (passed over: {shown}" + (f"; and {more} more" if more > 0 else "") + ")"
        if baseline.path is None:
            tr.write_line(
                f"--llm-eval-baseline={baseline.spec}: {baseline.choice}{over}; nothing compared "
                "(a run that passes becomes the baseline)",
                yellow=True,
            )
        else:
            tr.write_line(f"baseline: {baseline.label} ({baseline.choice}; {baseline.path}){over}")
    if problem is not None:
        tr.write_line(f"the baseline cannot be used: {problem}", red=True, bold=True)
        return
    if cmp is None:
        if baseline is not None and baseline.path is not None and not has_records:
            tr.write_line("nothing scored in this run: nothing compared", yellow=True)
        return
    for line in format_comparison(cmp):
        tr.write_line(line, red="REGRESSED" in line or "INCOMPARABLE" in line)
    partial = shard is not None
    for line in comparison_failures(cmp):
        if fail_on_regression is not None and not partial:
            tail = "; failing the run (--llm-eval-fail-on-regression)"
        elif fail_on_regression is not None:
            tail = "; partial (a shard): merge the shard reports for the verdict"
        else:
            tail = ""
        tr.write_line(line + tail, red=True, bold=True)
    for s in cmp.scorers:
        if s.verdict == "worse-not-significant" and s.diff is not None and s.p_value is not None:
            tr.write_line(
                f"{s.name}: got worse ({s.diff:+.4g}) but not significantly (p={s.p_value:.3g} "
                f">= {cmp.alpha:g}); not a regression",
                yellow=True,
            )


def _iv(interval: Any) -> str:
    if interval is None:
        return "-"
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def write_stability(tr: Any, items: Sequence[ScorerStability], verbosity: int) -> None:
    """The "judge stability" section (issue 20): per scorer asked ``judge_samples`` times, how
    often the asks disagree, and the unstable cases (all with ``-v``)."""
    tr.write_sep("=", "judge stability")
    for s in items:
        if s.records:
            _write_sampled(tr, s, verbosity)
        if s.swapped:
            bad = s.inconsistent
            tr.write_line(
                f"{s.scorer}: {s.swapped} asked in both orders, {len(bad)} position-inconsistent",
                yellow=bool(bad),
            )
            shown = bad if verbosity > 0 else bad[:_MAX_FAILURES_SHOWN]
            for r in shown:
                swap = r.metadata["swap"]
                tr.write_line(
                    f"    {_record_name(r)}: {swap['first']:.3g} in the first order, "
                    f"{swap['second']:.3g} with {' and '.join(swap.get('fields') or ())} "
                    "exchanged"
                )
            if len(shown) < len(bad):
                tr.write_line(f"    ... and {len(bad) - len(shown)} more (use -v to see all)")


def write_panels(tr: Any, items: Sequence[ScorerPanel], verbosity: int) -> None:
    """The "judge panel" section (issue 20): per scorer asked of a panel, how its judges agree
    (Fleiss' kappa of their verdicts, Krippendorff's alpha of their scores), each judge's pass
    rate, errors, tokens and cost, and the cases they split on (all with ``-v``)."""
    tr.write_sep("=", "judge panel")
    for p in items:

        def num(x: float | None) -> str:
            return "undefined" if x is None else f"{x:.3f}"

        head = (
            f"{p.scorer}: {p.records} case(s), {len(p.judges)} judges; Fleiss' kappa "
            f"{num(p.fleiss_kappa)} over {p.fleiss_n}, Krippendorff's alpha {num(p.alpha)}"
        )
        if p.unreadable:
            head += f" ({p.unreadable} with an unreadable panel, not counted)"
        tr.write_line(head)
        for j in p.judges:
            rate = "-" if j.pass_rate is None else f"{j.pass_rate:.3f}"
            cost = "" if j.cost_usd is None else f", ${j.cost_usd:.4f}"
            errors = f", {j.errors} error(s)" if j.errors else ""
            tr.write_line(
                f"  {j.judge}: {j.answers} answers{errors}, pass rate {rate}, "
                f"{j.prompt_tokens + j.completion_tokens} tokens{cost}"
            )
        if p.disagreements:
            shown = p.disagreements if verbosity > 0 else p.disagreements[:_MAX_FAILURES_SHOWN]
            tr.write_line(f"  split verdicts ({len(p.disagreements)}):", yellow=True)
            for r in shown:
                said = ", ".join(
                    f"{e.get('judge')} {e['score']:.3g}"
                    for e in r.metadata["panel"]
                    if e.get("score") is not None
                )
                tr.write_line(f"    {_record_name(r)}: {said}")
            if len(shown) < len(p.disagreements):
                tr.write_line(
                    f"    ... and {len(p.disagreements) - len(shown)} more (use -v to see all)"
                )


def _record_name(r: ScoreRecord) -> str:
    name = f"{r.file}::{r.test}" + (f"[{r.case_id}]" if r.case_id else "")
    return f"{name} ({r.where})" if r.where else name


def _write_sampled(tr: Any, s: ScorerStability, verbosity: int) -> None:
    rate = "" if s.flip_rate is None else f", mean flip rate {s.flip_rate:.3f}"
    head = (
        f"{s.scorer}: {len(s.records)} sampled scoring(s), {s.asks} asks{rate}; "
        f"{len(s.unstable)} unstable"
    )
    if s.unreadable:
        head += f" ({s.unreadable} with unreadable asks, not counted)"
    tr.write_line(head, yellow=bool(s.unstable))
    shown = s.unstable if verbosity > 0 else s.unstable[:_MAX_FAILURES_SHOWN]
    for u in shown:
        scores = ", ".join(f"{v:.3g}" for v in u.scores)
        verdicts = f"{u.passes} of {u.asks} asks pass" if u.passes is not None else "no bound"
        tr.write_line(f"    {_record_name(u.record)}: {verdicts} (scores {scores})")
    if len(shown) < len(s.unstable):
        tr.write_line(f"    ... and {len(s.unstable) - len(shown)} more (use -v to see all)")


def write_agreement(tr: Any, items: Sequence[ScorerAgreement], verbosity: int) -> None:
    """The "judge agreement" section (issue 20): per scorer with labelled records, how often
    its verdicts agree with the labels, and the disagreements (all with ``-v``)."""
    tr.write_sep("=", "judge agreement")
    for a in items:
        kind: dict[bool | None, str] = {
            True: "judge",
            False: "deterministic: this checks the scorer, not a judge",
            None: "judge?",
        }
        tr.write_line(
            f"{a.scorer} ({kind[a.uses_judge]}): {a.labelled} labelled, "
            f"{a.n} with both verdicts"
            + (f", {a.unplaced} without (no bound, or an error)" if a.unplaced else "")
        )
        if a.n:
            (tp, fn), (fp, tn) = a.confusion.counts
            kappa = (
                "kappa undefined (one category only)"
                if a.kappa is None or a.kappa.kappa is None
                else f"kappa {_iv(a.kappa.interval)}"
            )
            tr.write_line(f"  accuracy {_iv(a.accuracy)}  {kappa}")
            tr.write_line(
                f"  true-pass rate {_iv(a.true_pass)} ({tp}/{tp + fn})  "
                f"true-fail rate {_iv(a.true_fail)} ({tn}/{fp + tn})"
            )
            tr.write_line(
                f"  label pass: judge pass {tp}, judge fail {fn}; "
                f"label fail: judge pass {fp}, judge fail {tn}"
            )
        if a.choices is not None:
            cats = a.choices.categories
            cells = "; ".join(
                f"label {c}: " + ", ".join(f"{d} {n}" for d, n in zip(cats, row, strict=True) if n)
                for c, row in zip(cats, a.choices.counts, strict=True)
                if any(row)
            )
            tr.write_line(f"  choices (label: judge's picks): {cells}")
        if a.graded:
            rho = "-" if a.spearman is None else f"{a.spearman:.3f}"
            mae = "-" if a.mae is None else f"{a.mae:.4g}"
            tr.write_line(
                f"  scores: Spearman {rho}, mean absolute error {mae} ({a.graded} records)"
            )
        named = len(a.corrected_by_test) > 1  # each test's own correction, by name
        for test, c in a.corrected_by_test:
            where = f" in {test}" if named else ""
            if c.estimate is None or c.interval is None:
                tr.write_line(
                    f"  corrected pass rate{where}: not defined ({c.reason})", yellow=True
                )
            else:
                tr.write_line(
                    f"  corrected pass rate{where} {_iv(c.interval)} (the judge's raw pass rate "
                    f"{c.raw:.3f} over {c.n} unlabelled records)"
                )
        if a.disagreements:
            shown = a.disagreements if verbosity > 0 else a.disagreements[:_MAX_FAILURES_SHOWN]
            tr.write_line(f"  disagreements ({len(a.disagreements)}):")
            for r in shown:
                judged = "pass" if r.passed else "fail"
                label = (
                    r.label if not isinstance(r.label, bool) else ("pass" if r.label else "fail")
                )
                tr.write_line(
                    f"    {_case(r, bool(r.sample))} label {label}, judge {judged} "
                    f"(score {_num(r.score, '.4g')})"
                )
                reason = _reason(r.rationale, _limit(RATIONALE_LIMITS, verbosity), True)
                if reason:
                    tr.write_line(f"        judge's reason: {reason}")
            if len(shown) < len(a.disagreements):
                tr.write_line(
                    f"    ... and {len(a.disagreements) - len(shown)} more (use -v to see all)"
                )


TerminalHook = Callable[[Any], None]


@final
class TerminalWriter:
    """The llm-eval sections of a terminal summary, in this order: ``before`` (merge: the
    shards), the summary table, ``after_summary`` (the session: the rate limit, where the
    reports went, the saved run), the statistics, what kept the run from being judged, the
    gates, the comparison, ``after`` (merge: where the report went and the verdict). ``tr`` is
    pytest's terminal reporter or anything with its ``write_sep`` and ``write_line``.
    ``report_written``: a JSON report, which keeps every reason whole, was written."""

    name = "terminal"

    def __init__(
        self,
        tr: Any,
        verbosity: int,
        *,
        report_written: bool = False,
        before: TerminalHook | None = None,
        after_summary: TerminalHook | None = None,
        after: TerminalHook | None = None,
    ) -> None:
        self.tr = tr
        self.verbosity = verbosity
        self.report_written = report_written
        self.before = before
        self.after_summary = after_summary
        self.after = after

    def write(self, view: RunView) -> None:
        from pytest_llmeval.report.gates import write_gates, write_statistics

        tr, verbosity, run = self.tr, self.verbosity, view.run
        if self.before is not None:
            self.before(tr)
        if run.records:
            write_summary(tr, run.records, verbosity, report_written=self.report_written)
        if self.after_summary is not None:
            self.after_summary(tr)
        if view.statistics and verbosity >= 0:
            write_statistics(tr, view.statistics)
        if view.agreement:
            write_agreement(tr, view.agreement, verbosity)
        if view.stability:
            write_stability(tr, view.stability, verbosity)
        if view.panels:
            write_panels(tr, view.panels, verbosity)
        for problem in view.problems:
            tr.write_line(f"llm-eval: {problem}", red=True, bold=True)
        if view.outcomes:
            write_gates(tr, view.outcomes, run.settings, verbosity, shard=run.shard)
        write_comparison(
            tr,
            view.comparison,
            view.baseline,
            has_records=bool(run.records),
            shard=run.shard,
            fail_on_regression=run.settings.fail_on_regression,
        )
        if self.after is not None:
            self.after(tr)
