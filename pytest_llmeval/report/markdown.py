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
outputs, labels, paths, error texts) is redacted (:mod:`pytest_llmeval.redaction`), put on one
line (a line break would end a table row), has invisible and direction-changing characters shown
as ``\\uXXXX``, is cut to a bounded length, and is written inside a code span (in a table, with
``|`` escaped) or a fenced block: nothing in it is markup, a link, an HTML tag, an
``@mention`` or an issue reference on GitHub.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.records import ScorerAggregate, aggregate
from pytest_llmeval.redaction import redact_text

if TYPE_CHECKING:
    from pytest_llmeval.compare import CaseChange, Comparison, ScorerComparison
    from pytest_llmeval.gates import GateOutcome
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

#: GitHub's limit on the body of a comment, in characters
LIMIT = 65_536
#: what the summary is kept under: the limit less room for what posting it adds (the hidden
#: marker line of a sticky-comment action is under 100 characters)
BUDGET = LIMIT - 536

#: characters of user text kept per table cell, per output shown, per line of a text block
_CELL = 200
_OUTPUT = 100
_LINE = 500
#: rows made per section at most: a row takes more than 16 characters, so more never fit
_MAX_ROWS = 4_000

# -- escaping -------------------------------------------------------------------------------

#: every line break Python or a renderer knows, and tabs: a table row is one line
_BREAKS = re.compile("[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")
#: characters that do not show, or change the direction of what follows: shown as \uXXXX so a
#: case id cannot look like another
_HIDDEN = re.compile(
    "[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u00ad\u061c\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2069\ufeff]"
)
_SPACES = re.compile(" {2,}")
_BACKTICKS = re.compile("`+")
_TILDES = re.compile("~+")
#: ASCII punctuation that starts markup inside a line (emphasis, code, links, HTML, entities,
#: strikethrough, table cells, GitHub's $math$); a backslash makes each a literal character
_MARKUP = re.compile(r"([\\`*_{}\[\]<>()#+!|~&$])")


def markdown_size(text: str) -> int:
    """The length GitHub's limit is checked against, counted in UTF-16 code units: a character
    outside the Basic Multilingual Plane counts twice, so a text of this size or less fits
    however the characters are counted."""
    return len(text.encode("utf-16-le")) // 2


def _flat(value: object, limit: int) -> str:
    """User text, redacted, on one line, its invisible characters shown, cut to ``limit``
    characters (redacted before it is cut: half a key is still a secret)."""
    raw = str(value)
    # a huge text (a case id of a megabyte) is read only as far as it can be shown; unless
    # redaction shrank that part to what is shown, then all of it is read
    head = 8 * limit + 1000
    text = redact_text(raw[:head]) if len(raw) > head else redact_text(raw)
    if len(raw) > head and len(text) <= limit:
        text = redact_text(raw)
    text = _BREAKS.sub(" ", text)
    text = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def code(value: object, limit: int = _CELL, *, cell: bool = True) -> str:
    """User text as an inline code span, where nothing is markup (see the module docstring).
    ``cell``: for a table cell, where ``|`` must be escaped even inside a code span (a table's
    rows are split at every unescaped ``|`` before anything else is read)."""
    text = _flat(value, limit)
    if not text:
        return "*(empty)*"
    if cell:
        text = text.replace("|", "\\|")
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    # a span that starts or ends with a backtick needs a space inside its fence (stripped again)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _plain(text: str) -> str:
    """This module's own words and numbers in a line or a cell, their punctuation made
    literal (``>=``, ``[0.4, 0.9]``, ``(~3 more cases...)``)."""
    return _MARKUP.sub(r"\\\1", text)


def _fenced(lines: Iterable[object]) -> tuple[str, list[str], str]:
    """A fenced text block of user text: its opening fence, its lines, its closing fence (longer
    than any run of tildes inside, so no line can close it)."""
    body = [_flat(line, _LINE) for line in lines]
    longest = max((len(m) for line in body for m in _TILDES.findall(line)), default=0)
    fence = "~" * max(3, longest + 1)
    return fence + "text", body, fence


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _within(rows: Iterable[str], budget: int) -> list[str]:
    """The rows (most important first) up to the first that cannot be shown within
    ``budget`` characters: the rest are never made (a run of 20,000 cases needs a few
    hundred rows, and each row redacts its texts)."""
    out: list[str] = []
    used = 0
    for row in rows:
        used += markdown_size(row) + 1
        if used > budget or len(out) >= _MAX_ROWS:
            break
        out.append(row)
    return out


def _table_head(columns: Sequence[tuple[str, bool]]) -> list[str]:
    """The header and delimiter rows; ``(name, numeric)``: a numeric column is right-aligned."""
    return [
        _row(_plain(name) for name, _ in columns),
        _row("---:" if numeric else "---" for _, numeric in columns),
    ]


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def _p(value: float | None) -> str:
    # as the terminal's comparison prints a p-value
    if value is None:
        return "-"
    return f"{value:.3g}" if value >= 0.001 else "<0.001"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


# -- parts and fitting ----------------------------------------------------------------------


@dataclass
class _Part:
    """A section of the summary: its head, its rows (most important first) and its tail.
    ``rank`` 0: always whole; otherwise the rows are cut (then the whole part dropped) in
    increasing rank. ``order``: the key each row is shown by (default: as given)."""

    what: str  # what the rows are, for the truncation note ("regressed cases")
    head: list[str]
    rows: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    rank: int = 0
    order: list[tuple[Any, ...]] | None = None
    #: rows in all (more than ``rows`` when only the first that could ever fit were made)
    total: int | None = None

    def __post_init__(self) -> None:
        self.count = len(self.rows) if self.total is None else self.total
        self.sizes = [markdown_size(r) for r in self.rows]
        self.prefix = [0]
        for s in self.sizes:
            self.prefix.append(self.prefix[-1] + s)
        self.fixed = sum(markdown_size(line) for line in (*self.head, *self.tail))

    def more_line(self, kept: int) -> list[str]:
        left = self.count - kept
        if left <= 0:
            return []
        return ["", f"*{left:,} more {self.what} left out here: see the note at the top.*"]

    def size(self, kept: int) -> int:
        """Characters of this part with ``kept`` rows (-1: dropped, 0 characters)."""
        if kept < 0:
            return 0
        more = self.more_line(kept)
        lines = len(self.head) + kept + len(self.tail) + len(more)
        return self.fixed + self.prefix[kept] + sum(map(markdown_size, more)) + lines - 1

    def render(self, kept: int) -> str:
        shown = list(range(kept))
        if self.order is not None:
            order = self.order
            shown.sort(key=lambda i: order[i])
        lines = [*self.head, *(self.rows[i] for i in shown), *self.tail, *self.more_line(kept)]
        return "\n".join(lines)


def _total(parts: Sequence[_Part], kept: Sequence[int], note: str = "") -> int:
    present = [p.size(k) for p, k in zip(parts, kept, strict=True) if k >= 0]
    if note:
        present.append(markdown_size(note))
    return sum(present) + 2 * (len(present) - 1) + 1


def _note(parts: Sequence[_Part], kept: Sequence[int], full_report: str | None) -> str:
    left = []
    for p, k in zip(parts, kept, strict=True):
        n = p.count
        if k < 0:
            left.append(f"all {n:,} {p.what}" if n else p.what)
        elif k < n:
            left.append(f"{n - k:,} of {n:,} {p.what}")
    where = (
        f"Everything is in {code(full_report, 300, cell=False)}."
        if full_report
        else _plain(
            "Write the whole report with --llm-eval-report=PATH (JSON) or --llm-eval-html=PATH."
        )
    )
    return (
        f"> **Cut to fit a GitHub comment ({LIMIT:,} characters).** Left out: "
        + _plain("; ".join(left))
        + f". {where}"
    )


def _fit(parts: list[_Part], budget: int, full_report: str | None) -> str:
    """The parts joined, cut to ``budget`` (see the module docstring). The note goes after the
    first part (the header)."""
    kept = [len(p.rows) for p in parts]
    whole = all(p.count == len(p.rows) for p in parts)
    if whole and _total(parts, kept) <= budget:
        return "\n\n".join(p.render(k) for p, k in zip(parts, kept, strict=True)) + "\n"
    cuttable = sorted((i for i, p in enumerate(parts) if p.rank > 0), key=lambda i: parts[i].rank)
    reserve = 0
    note = ""
    for _ in range(5):  # the note's own length depends (a little) on what it names
        kept = [len(p.rows) for p in parts]
        for i in cuttable:
            if _total(parts, kept) + reserve <= budget:
                break
            kept[i] = _largest_fit(parts, kept, i, budget - reserve)
        note = _note(parts, kept, full_report)
        if _total(parts, kept, note) <= budget:
            break
        reserve = markdown_size(note) + 2
    blocks = [p.render(k) for p, k in zip(parts, kept, strict=True) if k >= 0]
    blocks.insert(1, note)
    text = "\n\n".join(blocks) + "\n"
    if markdown_size(text) > budget:
        # unreachable unless the header alone is too long: keep the note whole, cut the rest
        room = budget - markdown_size(note) - 4
        head = text[:room]
        while markdown_size(head) > room:
            head = head[:-1]
        text = head.rsplit("\n", 1)[0] + "\n\n" + note + "\n"
    return text


def _largest_fit(parts: Sequence[_Part], kept: list[int], i: int, budget: int) -> int:
    """The most rows of part ``i`` (most important first) that fit, or -1 (drop it)."""
    lo, hi = 1, len(parts[i].rows)
    best = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        trial = [*kept[:i], mid, *kept[i + 1 :]]
        if _total(parts, trial) <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


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


def _header(view: RunView, aggs: Sequence[ScorerAggregate]) -> _Part:
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
        _count(sum(a.n for a in aggs), "score")
        + f" by {_count(len(aggs), 'scorer')} in "
        + _count(len({(r.file, r.test) for r in run.records}), "test")
    ]
    if view.outcomes:
        counts: dict[str, int] = {}
        for o in view.outcomes:
            counts[o.verdict] = counts.get(o.verdict, 0) + 1
        facts.append(
            _count(len(view.outcomes), "gate")
            + ": "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        )
    facts += _comparison_fact(view)
    facts.append(_cost(run.records, aggs))
    if view.merged is not None:
        facts.append(f"merged from {view.merged[0]} shards")
    lines = [f"## {icon} pytest-llmeval: {_plain(word)}", "", _plain(" · ".join(facts))]
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
            _plain(
                "A shard's gates and comparison see only its cases: they are partial, never the "
                "verdict. Merge the shard reports for it (python -m pytest_llmeval merge "
                "SHARD.json... -o report.json --markdown summary.md)."
            ),
        ]
    return _Part("header", lines)


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
        fact = f"{_count(regressions, 'regression')} against the baseline"
        if problems:
            fact += f" ({_count(problems, 'comparison problem')})"
        return [fact]
    if problems:
        return [
            f"{_count(problems, 'comparison problem')}: the comparison cannot stand for "
            '"no regression"'
        ]
    return ["no significant regression against the baseline"]


def _cost(records: Sequence[Any], aggs: Sequence[ScorerAggregate]) -> str:
    calls = sum(a.judge_calls for a in aggs)
    cost = sum(a.cost_usd or 0.0 for a in aggs)
    unpriced = sum(r.judge_calls for r in records if r.judge_calls and r.cost_usd is None)
    if not calls:
        return "no judge calls"
    text = f"cost ${cost:.4f} for {_count(calls, 'judge call')}"
    if unpriced:
        text += f" ({unpriced:,} at an unknown price: see llm_eval_prices)"
    return text


def _failures(view: RunView) -> _Part | None:
    reasons = view.reasons
    if not reasons:
        return None
    opening, body, closing = _fenced(reasons[:_MAX_ROWS])
    title = "**Why the shard fails**" if view.run.shard else "**Why the run fails**"
    return _Part(
        "reasons the run fails", [title, "", opening], body, [closing], 7, total=len(reasons)
    )


def _scorers(view: RunView, aggs: Sequence[ScorerAggregate]) -> _Part | None:
    from pytest_llmeval.report.terminal import scorer_cells, totals_line

    if not aggs:
        return None
    columns = [
        ("scorer", False),
        *((name, True) for name in ("n", "mean", "min", "max", "passed", "failed", "errors")),
        *((name, True) for name in ("cached", "judge calls", "tokens", "cost")),
    ]
    rows = []
    for agg in aggs[:_MAX_ROWS]:
        cells = scorer_cells(agg)[: len(columns)]  # the terminal's cells, less its time column
        rows.append(_row([code(cells[0]), *(_plain(c) for c in cells[1:])]))
    tail = ["", _plain(totals_line(view.run.records, aggs))]
    served = sorted({m for r in view.run.records for m in r.judge_models})
    if served:
        tail += ["", "judge calls answered by model: " + ", ".join(code(m, 100) for m in served)]
    head = ["### Scorers", "", *_table_head(columns)]
    return _Part("scorers", head, rows, tail, rank=6, total=len(aggs))


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
        checks = _plain(checks)
        cases, samples = f"{result.n_cases:,}", f"{result.n_samples:,}"
        unscored = f"{result.n_errors:,}"
        if result.n_errors > spec.max_errors:
            notes.append(f"max_errors={spec.max_errors}: errors are never counted as passes")
    note = "; ".join(n for n in notes if n)
    return _row(
        [
            _plain(verdict) if shard is not None else verdict,
            code(o.test),
            code(spec.scorer),
            checks,
            cases,
            samples,
            unscored,
            code(note, 300) if note else "",
        ]
    )


def _gates(view: RunView, budget: int) -> _Part | None:
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
    rows = _within((_gate_row(o, shard) for _, o in indexed), budget)
    indexed = indexed[: len(rows)]
    tail = []
    for line, _markup in gate_totals(view.outcomes, view.run.settings, shard):
        tail += ["", _plain(line)]
    title = "### Gates" + (_plain(f" (PARTIAL: shard {shard[0]}/{shard[1]})") if shard else "")
    return _Part(
        "gates",
        [title, "", *_table_head(columns)],
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
    text = _plain(text)
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
                + _plain(f": nothing compared ({asked}; a run that passes becomes the baseline).")
            )
            return lines
        lines.append(said + ".")
    if cmp is not None:
        lines += [
            "",
            _plain(
                f"alpha {cmp.alpha:g}; CI: {cmp.confidence:.0%} paired t interval of the "
                "difference (current - baseline); p: paired sign-flip permutation test (exact, "
                "or Monte Carlo over many cases); flips: cases pass->fail / fail->pass, with the "
                "exact McNemar p."
            ),
        ]
    return lines


def _comparison(view: RunView, budget: int) -> list[_Part]:
    cmp, baseline = view.comparison, view.baseline
    if cmp is None and baseline is None:
        return []
    head = ["### Against the baseline", "", *_baseline_lines(baseline, cmp)]
    parts: list[_Part] = []
    if baseline is not None and baseline.problem is not None:
        opening, body, closing = _fenced([f"the baseline cannot be used: {baseline.problem}"])
        parts.append(_Part("the baseline's problem", [*head, "", opening, *body, closing]))
        return parts
    if cmp is None:
        return [_Part("the baseline", head, rank=5)]
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
    items = items[:_MAX_ROWS]
    rows = []
    for _, s in items:
        ci = "-" if s.diff is None else f"[{_num(s.ci_low, '+.3f')}, {_num(s.ci_high, '+.3f')}]"
        better = "higher" if s.higher_is_better else "lower"
        if s.direction_source == "guessed":
            better += " (guessed)"
        rows.append(
            _row(
                [
                    code(s.name),  # a gate's is "gate SCORER (FILE::TEST)"
                    f"{s.n:,}",
                    _num(s.baseline_mean),
                    _num(s.current_mean),
                    _num(s.diff, "+.3f"),
                    _plain(ci),
                    _plain(_p(s.p_value)),
                    _plain(s.p_method),
                    f"-{s.flips_worse}/+{s.flips_better}",
                    _plain(_p(s.mcnemar_p)),
                    better,
                    _instrument_cell(s),
                    _verdict_cell(s),
                ]
            )
        )
    parts.append(
        _Part(
            "comparison rows",
            [*head, "", *_table_head(columns)],
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
                f"{s.name}: got worse ({s.diff:+.4g}) but not significantly (p={_p(s.p_value)} "
                f">= {cmp.alpha:g}); not a regression"
            )
    notes += cmp.notes
    if notes:
        opening, body, closing = _fenced(notes[:_MAX_ROWS])
        head = ["**Comparison notes**", "", opening]
        parts.append(_Part("comparison notes", head, body, [closing], 3, total=len(notes)))
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
    return code(text, _OUTPUT)


def _cases(cmp: Comparison, kind: str, rank: int, budget: int) -> _Part | None:
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
    rows = _within(
        (
            _row(
                [
                    code(s.name),
                    code(c.case),
                    _plain(format(c.baseline, ".4g")),
                    _plain(format(c.current, ".4g")),
                    _plain(format(c.delta, "+.4g")),
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
    intro = _plain(
        f"{_count(count, 'case')} scored {'worse' if worse else 'better'} than in the "
        "baseline (significant or not: the verdict above says which scorers "
        f"{'regressed' if worse else 'improved'}), by scorer, biggest change first."
    )
    return _Part(
        f"{kind} cases",
        [title, "", intro, "", *_table_head(columns)],
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
    candidates: list[_Part | None] = [
        _header(view, aggs),
        _failures(view),
        _scorers(view, aggs),
        _gates(view, budget),
        *_comparison(view, budget),
    ]
    parts = [p for p in candidates if p is not None]
    return _fit(parts, budget, None if full_report is None else str(full_report))


# -- writers --------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename, naming
    the path in the way when it is a directory or its folder is a file."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(
            errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)
        ) from None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
