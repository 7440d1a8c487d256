"""Markdown text for the summary (:mod:`pytest_llmeval.report.markdown`): user text made inert
(redacted, on one line, visible, cut, in a code span or a fenced block), this module's own words
made literal, table rows, and the fitting of a summary's sections to a size (see the summary's
module docstring for what is cut first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmeval.core.redaction import redact_text

__all__ = [
    "BUDGET",
    "CELL",
    "LIMIT",
    "LINE",
    "MAX_ROWS",
    "OUTPUT",
    "Part",
    "code",
    "count_of",
    "fenced",
    "fit",
    "markdown_size",
    "num",
    "p_text",
    "plain",
    "table_head",
    "table_row",
    "within_budget",
]

#: GitHub's limit on the body of a comment, in characters
LIMIT = 65_536
#: what the summary is kept under: the limit less room for what posting it adds (the hidden
#: marker line of a sticky-comment action is under 100 characters)
BUDGET = LIMIT - 536

#: characters of user text kept per table cell, per output shown, per line of a text block
CELL = 200
OUTPUT = 100
LINE = 500
#: rows made per section at most: a row takes more than 16 characters, so more never fit
MAX_ROWS = 4_000

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


def code(value: object, limit: int = CELL, *, cell: bool = True) -> str:
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


def plain(text: str) -> str:
    """This module's own words and numbers in a line or a cell, their punctuation made
    literal (``>=``, ``[0.4, 0.9]``, ``(~3 more cases...)``)."""
    return _MARKUP.sub(r"\\\1", text)


def fenced(lines: Iterable[object]) -> tuple[str, list[str], str]:
    """A fenced text block of user text: its opening fence, its lines, its closing fence (longer
    than any run of tildes inside, so no line can close it)."""
    body = [_flat(line, LINE) for line in lines]
    longest = max((len(m) for line in body for m in _TILDES.findall(line)), default=0)
    fence = "~" * max(3, longest + 1)
    return fence + "text", body, fence


def table_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def within_budget(rows: Iterable[str], budget: int) -> list[str]:
    """The rows (most important first) up to the first that cannot be shown within
    ``budget`` characters: the rest are never made (a run of 20,000 cases needs a few
    hundred rows, and each row redacts its texts)."""
    out: list[str] = []
    used = 0
    for row in rows:
        used += markdown_size(row) + 1
        if used > budget or len(out) >= MAX_ROWS:
            break
        out.append(row)
    return out


def table_head(columns: Sequence[tuple[str, bool]]) -> list[str]:
    """The header and delimiter rows; ``(name, numeric)``: a numeric column is right-aligned."""
    return [
        table_row(plain(name) for name, _ in columns),
        table_row("---:" if numeric else "---" for _, numeric in columns),
    ]


def num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def p_text(value: float | None) -> str:
    # as the terminal's comparison prints a p-value
    if value is None:
        return "-"
    return f"{value:.3g}" if value >= 0.001 else "<0.001"


def count_of(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


# -- parts and fitting ----------------------------------------------------------------------


@dataclass
class Part:
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


def _total(parts: Sequence[Part], kept: Sequence[int], note: str = "") -> int:
    present = [p.size(k) for p, k in zip(parts, kept, strict=True) if k >= 0]
    if note:
        present.append(markdown_size(note))
    return sum(present) + 2 * (len(present) - 1) + 1


def _note(parts: Sequence[Part], kept: Sequence[int], full_report: str | None) -> str:
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
        else plain(
            "Write the whole report with --llm-eval-report=PATH (JSON) or --llm-eval-html=PATH."
        )
    )
    return (
        f"> **Cut to fit a GitHub comment ({LIMIT:,} characters).** Left out: "
        + plain("; ".join(left))
        + f". {where}"
    )


def fit(parts: list[Part], budget: int, full_report: str | None) -> str:
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


def _largest_fit(parts: Sequence[Part], kept: list[int], i: int, budget: int) -> int:
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
