"""The Markdown summary of a run, for CI: ``--llm-eval-markdown PATH`` (and ``merge --markdown
PATH``), also appended to ``$GITHUB_STEP_SUMMARY`` when that is set (unless
``--llm-eval-markdown-step-summary=off``), sized to be posted as a pull-request comment.

What it says, most important first: the verdict and why the run fails; the per-scorer table (the
terminal's columns and numbers) and the cost; the gates with the numbers that decided them (the
terminal's names: ``pass rate (majority) 0.750 [0.409, 0.929] >= 0.9: fail``); the comparison
with the baseline (n, means, difference and its interval, p and its method, pass/fail flips with
McNemar's p, direction, instrument, verdict); the cases that got worse and better, biggest
first.

**Size.** A GitHub comment holds at most :data:`LIMIT` characters. The text is kept under
:data:`BUDGET` (the rest is room for the marker a sticky-comment action adds), counted in UTF-16
code units, which is never less than the characters GitHub counts. When it would not fit, detail
goes first, least important first: improved cases, regressed cases (each scorer keeps its
biggest), the comparison's notes, passing gates, then the rows of the tables; a note at the top
names what was left out and where the whole report is.

**Escaping.** Everything that comes from users, models or files (case ids, test and scorer names,
outputs, labels, paths, error texts) is redacted (:mod:`pytest_llmeval.core.redaction`), put on one
line (a line break would end a table row), has invisible and direction-changing characters shown
as ``\\uXXXX``, is cut to a bounded length, and is written inside a code span (in a table, with
``|`` escaped) or a fenced block: nothing in it is markup, a link, an HTML tag, an
``@mention`` or an issue reference on GitHub.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.files import report_target, write_text_atomic
from pytest_llmeval.core.records import ScorerAggregate, aggregate
from pytest_llmeval.report.markdown_text import (
    BUDGET,
    LIMIT,
    MAX_ROWS,
    OUTPUT,
    Part,
    code,
    count_of,
    fenced,
    fit,
    markdown_size,
    num,
    p_text,
    plain,
    table_head,
    table_row,
    within_budget,
)

if TYPE_CHECKING:
    from pytest_llmeval.analysis.compare import CaseChange, Comparison, ScorerComparison
    from pytest_llmeval.analysis.gates import GateOutcome
    from pytest_llmeval.report.view import Baseline, RunView

__all__ = [
    "BUDGET",
    "LIMIT",
    "MarkdownWriter",
    "StepSummaryWriter",
    "code",
    "markdown_size",
    "render_markdown",
]

# -- the sections ---------------------------------------------------------------------------

_ICON = {True: "✅", False: "❌"}
#: a gate verdict that fails a run comes first when gate rows must be cut
_GATE_WEIGHT = {"fail": 0, "error": 0, "inconclusive": 1, "skipped": 1, "pass": 2}
#: a comparison verdict that matters most comes first when rows must be cut
_COMPARISON_WEIGHT = {
    "regressed": 0,
    "incomparable": 0,
    "missing": 1,
    "not-comparable": 1,
    "worse-too-few-cases": 1,
    "worse-not-significant": 2,
    "improved": 3,
    "better-not-significant": 3,
    "new": 3,
    "unchanged": 4,
}


def _header(view: RunView, aggs: Sequence[ScorerAggregate]) -> Part:
    run = view.run
    if run.shard is not None and view.passed is False:
        # its own tests failed (or it could not be judged): that fails the shard's job
        icon, word = "❌", f"FAIL (shard {run.shard[0]} of {run.shard[1]})"
    elif run.shard is not None:
        icon, word = "⏳", f"PARTIAL (shard {run.shard[0]} of {run.shard[1]})"
    elif view.passed is None:
        icon, word = "➖", "not judged"
    else:
        icon, word = _ICON[view.passed], "PASS" if view.passed else "FAIL"
    facts = [
        count_of(sum(a.n for a in aggs), "score")
        + f" by {count_of(len(aggs), 'scorer')} in "
        + count_of(len({(r.file, r.test) for r in run.records}), "test")
    ]
    if view.outcomes:
        counts: dict[str, int] = {}
        for o in view.outcomes:
            counts[o.verdict] = counts.get(o.verdict, 0) + 1
        facts.append(
            count_of(len(view.outcomes), "gate")
            + ": "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        )
    facts += _comparison_fact(view)
    facts.append(_cost(run.records, aggs))
    if view.merged is not None:
        facts.append(f"merged from {view.merged[0]} shards")
    lines = [f"## {icon} pytest-llmeval: {plain(word)}", "", plain(" · ".join(facts))]
    meta = view.meta
    about = []
    if meta.judge_model and any(a.judge_calls for a in aggs):
        judge = f"judge {code(meta.judge_model, 100, cell=False)}"
        if meta.judge_url:
            judge += f" at {code(meta.judge_url, 200, cell=False)}"
        about.append(judge)
    if meta.git_commit:
        about.append(f"commit {code(meta.git_commit[:12], cell=False)}")
    if about:
        lines += ["", " · ".join(about)]
    if run.shard is not None:
        lines += [
            "",
            plain(
                "A shard's gates and comparison see only its cases: they are partial, never the "
                "verdict. Merge the shard reports for it (python -m pytest_llmeval merge "
                "SHARD.json... -o report.json --markdown summary.md)."
            ),
        ]
    return Part("header", lines)


def _comparison_fact(view: RunView) -> list[str]:
    """What the comparison says, in a few words: never "no regression" when it cannot say so."""
    cmp, baseline = view.comparison, view.baseline
    if baseline is not None and baseline.problem is not None:
        return ["the baseline cannot be used"]
    if cmp is None:
        return ["nothing compared with a baseline"] if baseline is not None else []
    regressions = len(cmp.regressions)
    problems = len(cmp.problems())
    if regressions:
        fact = f"{count_of(regressions, 'regression')} against the baseline"
        if problems:
            fact += f" ({count_of(problems, 'comparison problem')})"
        return [fact]
    if problems:
        return [
            f"{count_of(problems, 'comparison problem')}: the comparison cannot stand for "
            '"no regression"'
        ]
    return ["no significant regression against the baseline"]


def _cost(records: Sequence[Any], aggs: Sequence[ScorerAggregate]) -> str:
    calls = sum(a.judge_calls for a in aggs)
    cost = sum(a.cost_usd or 0.0 for a in aggs)
    unpriced = sum(r.judge_calls for r in records if r.judge_calls and r.cost_usd is None)
    if not calls:
        return "no judge calls"
    text = f"cost ${cost:.4f} for {count_of(calls, 'judge call')}"
    if unpriced:
        text += f" ({unpriced:,} at an unknown price: see llm_eval_prices)"
    return text


def _failures(view: RunView) -> Part | None:
    reasons = view.reasons
    if not reasons:
        return None
    opening, body, closing = fenced(reasons[:MAX_ROWS])
    title = "**Why the shard fails**" if view.run.shard else "**Why the run fails**"
    return Part(
        "reasons the run fails", [title, "", opening], body, [closing], 7, total=len(reasons)
    )


def _scorers(view: RunView, aggs: Sequence[ScorerAggregate]) -> Part | None:
    from pytest_llmeval.report.terminal import scorer_cells, totals_line

    if not aggs:
        return None
    columns = [
        ("scorer", False),
        *((name, True) for name in ("n", "mean", "min", "max", "passed", "failed", "errors")),
        *((name, True) for name in ("cached", "judge calls", "tokens", "cost")),
    ]
    rows = []
    for agg in aggs[:MAX_ROWS]:
        cells = scorer_cells(agg)[: len(columns)]  # the terminal's cells, less its time column
        rows.append(table_row([code(cells[0]), *(plain(c) for c in cells[1:])]))
    tail = ["", plain(totals_line(view.run.records, aggs))]
    served = sorted({m for r in view.run.records for m in r.judge_models})
    if served:
        tail += ["", "judge calls answered by model: " + ", ".join(code(m, 100) for m in served)]
    head = ["### Scorers", "", *table_head(columns)]
    return Part("scorers", head, rows, tail, rank=6, total=len(aggs))


def _gate_row(o: GateOutcome, shard: tuple[int, int] | None) -> str:
    from pytest_llmeval.report.gates import format_check

    spec, result = o.spec, o.result
    verdict = o.verdict.upper()
    if shard is not None:
        verdict = f"PARTIAL ({o.verdict})"
    elif o.verdict != "pass":
        verdict = f"**{verdict}**"
    notes = [o.note, o.problem]
    if result is None:
        checks, cases, samples, unscored = "-", "-", "-", "-"
        notes.append(f"declared by {spec.source}")
    else:
        with_ci = spec.confidence is not None
        checks = "; ".join(format_check(c, with_ci, spec.reducer) for c in result.checks)
        if with_ci:
            checks += f" ({spec.confidence:g} confidence)"
        checks = plain(checks)
        cases, samples = f"{result.n_cases:,}", f"{result.n_samples:,}"
        unscored = f"{result.n_errors:,}"
        if result.n_errors > spec.max_errors:
            notes.append(f"max_errors={spec.max_errors}: errors are never counted as passes")
    note = "; ".join(n for n in notes if n)
    return table_row(
        [
            plain(verdict) if shard is not None else verdict,
            code(o.test),
            code(spec.scorer),
            checks,
            cases,
            samples,
            unscored,
            code(note, 300) if note else "",
        ]
    )


def _gates(view: RunView, budget: int) -> Part | None:
    from pytest_llmeval.report.gates import gate_totals

    if not view.outcomes:
        return None
    shard = view.run.shard
    columns = [
        ("gate", False),
        ("test", False),
        ("scorer", False),
        ("checks: the numbers that decided", False),
        ("cases", True),
        ("samples", True),
        ("unscored", True),
        ("note", False),
    ]
    indexed = list(enumerate(view.outcomes))
    indexed.sort(key=lambda item: (_GATE_WEIGHT.get(item[1].verdict, 0), item[0]))
    rows = within_budget((_gate_row(o, shard) for _, o in indexed), budget)
    indexed = indexed[: len(rows)]
    tail = []
    for line, _markup in gate_totals(view.outcomes, view.run.settings, shard):
        tail += ["", plain(line)]
    title = "### Gates" + (plain(f" (PARTIAL: shard {shard[0]}/{shard[1]})") if shard else "")
    return Part(
        "gates",
        [title, "", *table_head(columns)],
        rows,
        tail,
        rank=4,
        order=[(i,) for i, _ in indexed],
        total=len(view.outcomes),
    )


def _verdict_cell(s: ScorerComparison) -> str:
    text = s.verdict
    if s.verdict == "incomparable" and s.change not in ("-", "unchanged"):
        text += f" (would be: {s.change})"
    text = plain(text)
    return f"**{text}**" if _COMPARISON_WEIGHT.get(s.verdict, 0) <= 1 else text


def _instrument_cell(s: ScorerComparison) -> str:
    if s.instrument != "changed":
        return s.instrument
    text = "changed: " + "; ".join(s.instrument_changes) if s.instrument_changes else "changed"
    if s.accepted:
        text += " (accepted)"
    return code(text, 300)


def _baseline_lines(baseline: Baseline | None, cmp: Comparison | None) -> list[str]:
    lines: list[str] = []
    if baseline is not None:
        said = f"baseline {code(baseline.label, 100, cell=False)}"
        how = [
            code(baseline.choice, 200, cell=False) if baseline.choice else "",
            code(baseline.path, 200, cell=False) if baseline.path else "",
        ]
        how = [h for h in how if h]
        if how:
            said += " (" + "; ".join(how) + ")"
        if baseline.passed_over:
            shown = "; ".join(f"run {n}: {why}" for n, why in baseline.passed_over[:5])
            more = len(baseline.passed_over) - 5
            said += ", passed over: " + code(
                shown + (f"; and {more} more" if more > 0 else ""), 300, cell=False
            )
        if baseline.path is None and baseline.problem is None:
            asked = f"--llm-eval-baseline={baseline.spec}" if baseline.spec else "the baseline"
            lines.append(
                said
                + plain(f": nothing compared ({asked}; a run that passes becomes the baseline).")
            )
            return lines
        lines.append(said + ".")
    if cmp is not None:
        lines += [
            "",
            plain(
                f"alpha {cmp.alpha:g}; CI: {cmp.confidence:.0%} paired t interval of the "
                "difference (current - baseline); p: paired sign-flip permutation test (exact, "
                "or Monte Carlo over many cases); flips: cases pass->fail / fail->pass, with the "
                "exact McNemar p."
            ),
        ]
    return lines


def _comparison(view: RunView, budget: int) -> list[Part]:
    cmp, baseline = view.comparison, view.baseline
    if cmp is None and baseline is None:
        return []
    head = ["### Against the baseline", "", *_baseline_lines(baseline, cmp)]
    parts: list[Part] = []
    if baseline is not None and baseline.problem is not None:
        opening, body, closing = fenced([f"the baseline cannot be used: {baseline.problem}"])
        parts.append(Part("the baseline's problem", [*head, "", opening, *body, closing]))
        return parts
    if cmp is None:
        return [Part("the baseline", head, rank=5)]
    pct = f"{cmp.confidence:.0%}"
    columns = [
        ("scorer", False),
        ("n", True),
        ("baseline", True),
        ("current", True),
        ("diff", True),
        (f"{pct} CI", True),
        ("p", True),
        ("p method", False),
        ("flips", True),
        ("McNemar p", True),
        ("better", False),
        ("instrument", False),
        ("verdict", False),
    ]
    items = list(enumerate((*cmp.scorers, *cmp.gates)))
    items.sort(key=lambda item: (_COMPARISON_WEIGHT.get(item[1].verdict, 0), item[0]))
    count = len(items)
    items = items[:MAX_ROWS]
    rows = []
    for _, s in items:
        ci = "-" if s.diff is None else f"[{num(s.ci_low, '+.3f')}, {num(s.ci_high, '+.3f')}]"
        better = "higher" if s.higher_is_better else "lower"
        if s.direction_source == "guessed":
            better += " (guessed)"
        rows.append(
            table_row(
                [
                    code(s.name),  # a gate's is "gate SCORER (FILE::TEST)"
                    f"{s.n:,}",
                    num(s.baseline_mean),
                    num(s.current_mean),
                    num(s.diff, "+.3f"),
                    plain(ci),
                    plain(p_text(s.p_value)),
                    plain(s.p_method),
                    f"-{s.flips_worse}/+{s.flips_better}",
                    plain(p_text(s.mcnemar_p)),
                    better,
                    _instrument_cell(s),
                    _verdict_cell(s),
                ]
            )
        )
    parts.append(
        Part(
            "comparison rows",
            [*head, "", *table_head(columns)],
            rows,
            rank=5,
            order=[(i,) for i, _ in items],
            total=count,
        )
    )
    notes = [*cmp.problems()]
    for s in cmp.scorers:
        if s.verdict == "worse-not-significant" and s.diff is not None and s.p_value is not None:
            notes.append(
                f"{s.name}: got worse ({s.diff:+.4g}) but not significantly (p={p_text(s.p_value)} "
                f">= {cmp.alpha:g}); not a regression"
            )
    notes += cmp.notes
    if notes:
        opening, body, closing = fenced(notes[:MAX_ROWS])
        head = ["**Comparison notes**", "", opening]
        parts.append(Part("comparison notes", head, body, [closing], 3, total=len(notes)))
    for kind, rank in (("regressed", 2), ("improved", 1)):
        part = _cases(cmp, kind, rank, budget)
        if part is not None:
            parts.append(part)
    return parts


def _output(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping) and "text" in value and "truncated" in value:
        value = f"{value['text']}…"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return code(text, OUTPUT)


def _cases(cmp: Comparison, kind: str, rank: int, budget: int) -> Part | None:
    scorers = [s for s in cmp.scorers if s.kind == "scorer"]
    entries: list[tuple[int, int, ScorerComparison, CaseChange]] = []
    for k, s in enumerate(scorers):
        for i, c in enumerate(s.regressed if kind == "regressed" else s.improved):
            entries.append((i, k, s, c))
    if not entries:
        return None
    # most important first: every scorer's biggest, then every scorer's second biggest, ...
    entries.sort(key=lambda e: (e[0], e[1]))
    count = len(entries)
    columns = [
        ("scorer", False),
        ("case", False),
        ("baseline", True),
        ("current", True),
        ("change", True),
        ("was", False),
        ("now", False),
    ]
    rows = within_budget(
        (
            table_row(
                [
                    code(s.name),
                    code(c.case),
                    plain(format(c.baseline, ".4g")),
                    plain(format(c.current, ".4g")),
                    plain(format(c.delta, "+.4g")),
                    _output(c.baseline_output),
                    _output(c.current_output),
                ]
            )
            for _, _, s, c in entries
        ),
        budget,
    )
    entries = entries[: len(rows)]
    worse = kind == "regressed"
    title = "### Regressed cases" if worse else "### Improved cases"
    intro = plain(
        f"{count_of(count, 'case')} scored {'worse' if worse else 'better'} than in the "
        "baseline (significant or not: the verdict above says which scorers "
        f"{'regressed' if worse else 'improved'}), by scorer, biggest change first."
    )
    return Part(
        f"{kind} cases",
        [title, "", intro, "", *table_head(columns)],
        rows,
        rank=rank,
        order=[(e[1], e[0]) for e in entries],
        total=count,
    )


def render_markdown(
    view: RunView, *, full_report: str | os.PathLike[str] | None = None, budget: int = BUDGET
) -> str:
    """The Markdown summary of ``view`` (see the module docstring), at most ``budget`` long as
    :func:`markdown_size` counts. ``full_report``: where the whole report was written, named
    by the truncation note."""
    aggs = list(aggregate(view.run.records).values())
    candidates: list[Part | None] = [
        _header(view, aggs),
        _failures(view),
        _scorers(view, aggs),
        _gates(view, budget),
        *_comparison(view, budget),
    ]
    parts = [p for p in candidates if p is not None]
    return fit(parts, budget, None if full_report is None else str(full_report))


# -- writers --------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename, naming
    the path in the way when it is a directory or its folder is a file."""
    report_target(path)
    write_text_atomic(path, text, newline="\n")


@final
class MarkdownWriter:
    """``--llm-eval-markdown PATH`` / ``merge --markdown PATH``: the summary, written whole."""

    name = "Markdown"

    def __init__(
        self,
        path: Path,
        *,
        full_report: str | os.PathLike[str] | None = None,
        budget: int = BUDGET,
    ) -> None:
        self.path = path
        self.full_report = full_report
        self.budget = budget

    def write(self, view: RunView) -> None:
        _write_atomic(
            self.path, render_markdown(view, full_report=self.full_report, budget=self.budget)
        )


@final
class StepSummaryWriter:
    """The summary appended to a GitHub step summary file (``$GITHUB_STEP_SUMMARY``), after a
    blank line when the file already holds something: every step of a job appends to it, so
    nothing there is overwritten."""

    name = "Markdown"

    def __init__(
        self,
        path: Path,
        *,
        full_report: str | os.PathLike[str] | None = None,
        budget: int = BUDGET,
    ) -> None:
        self.path = path
        self.full_report = full_report
        self.budget = budget

    def write(self, view: RunView) -> None:
        text = render_markdown(view, full_report=self.full_report, budget=self.budget)
        if self.path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.path))
        # one write on an O_APPEND descriptor: two steps appending at once do not interleave
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = (b"\n" if os.fstat(fd).st_size else b"") + text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
