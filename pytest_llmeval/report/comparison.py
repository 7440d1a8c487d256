"""The baseline comparison as text: one table row per scorer and gate, then the regressed and
improved cases of each scorer that changed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_llmeval.analysis.compare import (
    Comparison,
    ScorerComparison,
    number_text,
    p_text,
)

_VERDICT_TEXT = {
    "regressed": "REGRESSED",
    "improved": "improved",
    "worse-not-significant": "lower, not significant",
    "better-not-significant": "higher, not significant",
    "unchanged": "unchanged",
    "worse-too-few-cases": "WORSE, too few cases to test",
    "not-comparable": "NOT COMPARED: no case scored in both runs",
    "incomparable": "INCOMPARABLE: another instrument",
    "new": "new in this run",
    "missing": "MISSING from this run",
}


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
    if s.verdict == "incomparable" and s.change not in ("-", "unchanged"):
        text += f" (would be: {_VERDICT_TEXT.get(s.change, s.change)})"
    if s.instrument == "changed" and s.accepted:
        text += " (instrument changed: accepted)"
    if not s.higher_is_better:
        text += " [lower is better]"
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
        ci = (
            "-"
            if s.diff is None
            else f"[{number_text(s.ci_low, '+.3f')}, {number_text(s.ci_high, '+.3f')}]"
        )
        rows.append(
            (
                s.name,
                str(s.n),
                number_text(s.baseline_mean),
                number_text(s.current_mean),
                number_text(s.diff, "+.3f"),
                ci,
                p_text(s.p_value),
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
                f"(exact McNemar p={p_text(s.mcnemar_p)})"
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
        for change in s.instrument_changes:
            lines.append(f"{s.name}: instrument changed: {change}")
        for title, names in (
            ("only in the baseline", s.only_baseline),
            ("only in the current run", s.only_current),
            ("without a score on one side (error)", s.errored),
            ("with two records for one sample (not paired)", s.ambiguous),
        ):
            if names:
                shown = ", ".join(names[:max_cases])
                more = f", ... ({len(names) - max_cases} more)" if len(names) > max_cases else ""
                lines.append(f"{s.name}: {len(names)} case(s) {title}: {shown}{more}")
    for name, base, cur in cmp.judges:
        lines.append(
            f"{name}: the judge against your labels: {cmp.baseline_label} {_agreement(base)} "
            f"-> {cmp.current_label} {_agreement(cur)}"
        )
    lines.extend(cmp.notes)
    return lines


def _agreement(a: Any) -> str:
    if a is None:
        return "no labels"
    if a.kappa is None or a.kappa.kappa is None:
        return f"kappa undefined over {a.n}"
    return f"kappa {a.kappa.kappa:.3f} over {a.n}"
