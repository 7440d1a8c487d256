"""Do the judges of a panel agree? Per scorer scored with ``judges=[...]`` (issue 20).

Each panel record keeps every judge's answer in ``metadata["panel"]`` (its score, or its
error). Per scorer, over its panel records:

* per judge: the answers, the errors, its pass rate (each answer held against the record's
  bound), its mean score, its tokens and cost;
* Fleiss' kappa of the judges' pass/fail verdicts over the bounded records every judge
  answered (the same judges rate every record, as Fleiss' kappa needs);
* Krippendorff's alpha (interval) of their scores over every record, a judge that failed
  being a missing value;
* the records where the judges' verdicts differ.

Everything is read from the records, which may come from a report file: a record whose panel
entry is not a list of judges with a name and a finite score (or none) is counted apart
(``unreadable``), never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from pytest_llmeval.core.agreement import fleiss_kappa, krippendorff_alpha
from pytest_llmeval.core.model import Run, sort_key
from pytest_llmeval.core.records import ScoreRecord

__all__ = ["JudgeSummary", "ScorerPanel", "run_panels", "scorer_panel"]


@final
@dataclass(frozen=True)
class JudgeSummary:
    """One judge of a scorer's panels."""

    judge: str
    answers: int
    errors: int
    passes: int
    bounded: int  # answers held against a bound
    mean: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.bounded if self.bounded else None

    def to_json(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "answers": self.answers,
            "errors": self.errors,
            "pass_rate": self.pass_rate,
            "mean": self.mean,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


@final
@dataclass(frozen=True)
class ScorerPanel:
    scorer: str
    judges: tuple[JudgeSummary, ...]
    records: int
    fleiss_kappa: float | None
    fleiss_n: int  # records in Fleiss' kappa (bounded, every judge answered)
    alpha: float | None
    disagreements: tuple[ScoreRecord, ...]
    unreadable: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "judges": [j.to_json() for j in self.judges],
            "fleiss_kappa": self.fleiss_kappa,
            "fleiss_records": self.fleiss_n,
            "krippendorff_alpha": self.alpha,
            "disagreements": [{**r.locator(), "panel": _entries(r)} for r in self.disagreements],
            "unreadable": self.unreadable,
        }


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _entries(record: ScoreRecord) -> list[dict[str, Any]] | None:
    """The record's panel entries, checked: each a mapping with a judge name and a finite score
    or None; None when any is not."""
    panel = record.metadata.get("panel")
    if not isinstance(panel, list) or len(panel) < 2:
        return None
    out = []
    for e in panel:
        if not isinstance(e, Mapping) or not isinstance(e.get("judge"), str):
            return None
        score = e.get("score")
        if score is not None and not _number(score):
            return None
        out.append(dict(e))
    names = [e["judge"] for e in out]
    return out if len(set(names)) == len(names) else None


def _passes(record: ScoreRecord, score: float) -> bool | None:
    if record.min is None and record.max is None:
        return None
    return (record.min is None or score >= record.min) and (
        record.max is None or score <= record.max
    )


def scorer_panel(scorer: str, records: Sequence[ScoreRecord]) -> ScorerPanel:
    """The panel statistics of ``scorer`` over its panel ``records``."""
    read: list[tuple[ScoreRecord, list[dict[str, Any]]]] = []
    unreadable = 0
    for r in records:
        entries = _entries(r)
        if entries is None:
            unreadable += 1
        else:
            read.append((r, entries))
    order: list[str] = []
    for _, entries in read:
        for e in entries:
            if e["judge"] not in order:
                order.append(e["judge"])
    stats: dict[str, dict[str, Any]] = {
        j: {
            "answers": 0,
            "errors": 0,
            "passes": 0,
            "bounded": 0,
            "scores": [],
            "pt": 0,
            "ct": 0,
            "cost": None,
        }
        for j in order
    }
    fleiss_rows: list[list[int]] = []
    units: list[list[float | None]] = []
    disagreements = []
    for r, entries in read:
        by_judge = {e["judge"]: e for e in entries}
        verdicts = []
        for j in order:
            if j not in by_judge:
                continue
            e = by_judge[j]
            st = stats[j]
            for key, field in (("pt", "prompt_tokens"), ("ct", "completion_tokens")):
                if isinstance(e.get(field), int) and not isinstance(e.get(field), bool):
                    st[key] += e[field]
            if _number(e.get("cost_usd")):
                st["cost"] = (st["cost"] or 0.0) + float(e["cost_usd"])
            if e.get("score") is None:
                st["errors"] += 1
                continue
            score = float(e["score"])
            st["answers"] += 1
            st["scores"].append(score)
            passed = _passes(r, score)
            if passed is not None:
                st["bounded"] += 1
                st["passes"] += int(passed)
                verdicts.append(passed)
        units.append(
            [
                None
                if by_judge.get(j) is None or by_judge[j].get("score") is None
                else float(by_judge[j]["score"])
                for j in order
            ]
        )
        answered = [e for e in entries if e.get("score") is not None]
        if len(answered) == len(order) and len(verdicts) == len(order):
            fleiss_rows.append([sum(verdicts), len(verdicts) - sum(verdicts)])
        if True in verdicts and False in verdicts:
            disagreements.append(r)
    kappa = fleiss_kappa(fleiss_rows) if fleiss_rows else None
    alpha = krippendorff_alpha(units, "interval") if units else None
    judges = tuple(
        JudgeSummary(
            judge=j,
            answers=st["answers"],
            errors=st["errors"],
            passes=st["passes"],
            bounded=st["bounded"],
            mean=math.fsum(st["scores"]) / len(st["scores"]) if st["scores"] else None,
            prompt_tokens=st["pt"],
            completion_tokens=st["ct"],
            cost_usd=st["cost"],
        )
        for j, st in stats.items()
    )
    disagreements.sort(key=sort_key)
    return ScorerPanel(
        scorer,
        judges,
        len(read),
        kappa,
        len(fleiss_rows),
        alpha,
        tuple(disagreements),
        unreadable,
    )


def run_panels(run: Run) -> tuple[ScorerPanel, ...]:
    """Per scorer with panel records, by name."""
    by_scorer: dict[str, list[ScoreRecord]] = {}
    for r in run.records:
        if "panel" in r.metadata and r.error is None:
            by_scorer.setdefault(r.scorer, []).append(r)
    return tuple(scorer_panel(name, by_scorer[name]) for name in sorted(by_scorer))
