"""Is the judge stable? The asks of ``judge_samples=K`` per case (issue 20).

A record scored with ``judge_samples`` keeps each ask's score in ``metadata["judge_samples"]``.
Each ask's verdict is its score held against the record's own bound. Per record:

* ``passes`` and ``fails``: how many asks passed and failed the bound;
* ``flip_rate``: the share of asks that disagree with the majority of them (``min(passes,
  fails) / K``: 0 for a judge that always said the same, 0.5 for one that split evenly);
* *unstable*: the asks disagree (on the verdict when the record has a bound, else on the
  score).

Per scorer: the sampled records, the asks, the mean flip rate over the bounded ones and the
unstable records, the least stable first. A record scored with ``swap=True`` keeps both
orders' answers in ``metadata["swap"]``; the ones whose two readings differ are
*position-inconsistent* (the judge's answer depended on which text came first), counted and
listed per scorer. Everything is read from the records, which may come
from a report file: an ask whose score is not a finite number makes its record unreadable for
this purpose and it is counted apart (``unreadable``), never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from pytest_llmeval.core.model import Run, sort_key
from pytest_llmeval.core.records import ScoreRecord

__all__ = ["RecordStability", "ScorerStability", "record_stability", "run_stability"]


@final
@dataclass(frozen=True)
class RecordStability:
    """The asks of one sampled record."""

    record: ScoreRecord
    scores: tuple[float, ...]
    passes: int | None  # None: the record has no bound
    fails: int | None

    @property
    def asks(self) -> int:
        return len(self.scores)

    @property
    def flip_rate(self) -> float | None:
        if self.passes is None or self.fails is None:
            return None
        return min(self.passes, self.fails) / self.asks

    @property
    def unstable(self) -> bool:
        if self.passes is not None and self.fails is not None:
            return self.passes > 0 and self.fails > 0
        return len(set(self.scores)) > 1

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            **r.locator(),
            "scores": list(self.scores),
            "passes": self.passes,
            "fails": self.fails,
            "flip_rate": self.flip_rate,
        }


@final
@dataclass(frozen=True)
class ScorerStability:
    """The sampled records of one scorer."""

    scorer: str
    records: tuple[RecordStability, ...]
    unreadable: int = 0
    #: the records asked in both orders (``swap=True``), and those whose orders disagree
    swapped: int = 0
    inconsistent: tuple[ScoreRecord, ...] = ()

    @property
    def asks(self) -> int:
        return sum(r.asks for r in self.records)

    @property
    def unstable(self) -> tuple[RecordStability, ...]:
        out = [r for r in self.records if r.unstable]
        out.sort(key=lambda r: (-(r.flip_rate or 0.0), sort_key(r.record)))
        return tuple(out)

    @property
    def flip_rate(self) -> float | None:
        """The mean flip rate over the records with a bound (None: none has one)."""
        rates = [r.flip_rate for r in self.records if r.flip_rate is not None]
        return math.fsum(rates) / len(rates) if rates else None

    def to_json(self) -> dict[str, Any]:
        return {
            "records": len(self.records),
            "asks": self.asks,
            "flip_rate": self.flip_rate,
            "unstable": [r.to_json() for r in self.unstable],
            "unreadable": self.unreadable,
            "swapped": self.swapped,
            "position_inconsistent": [_swap_json(r) for r in self.inconsistent],
        }


def _swap_json(r: ScoreRecord) -> dict[str, Any]:
    swap = r.metadata.get("swap")
    return {
        **r.locator(),
        "swap": dict(swap) if isinstance(swap, Mapping) else None,
    }


def _consistent(record: ScoreRecord) -> bool | None:
    """Whether a swapped record's two orders agree; None when it was not swapped or its
    ``swap`` entry is unreadable. Re-derived from the two answers (never taken from the
    stored flag alone): a tampered ``consistent`` cannot hide a disagreement."""
    swap = record.metadata.get("swap")
    if not isinstance(swap, Mapping):
        return None
    values = [swap.get(k) for k in ("first", "second", "second_mirrored")]
    numbers = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        numbers.append(float(v))
    first, _, mirrored = numbers
    return abs(first - mirrored) <= 1e-9 and swap.get("consistent") is not False


def _scores(asks: Any) -> tuple[float, ...] | None:
    if not isinstance(asks, list) or len(asks) < 2:
        return None
    out = []
    for a in asks:
        v = a.get("value") if isinstance(a, Mapping) else None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        out.append(float(v))
    return tuple(out)


def record_stability(record: ScoreRecord) -> RecordStability | None:
    """The asks of ``record``, or None when it was not sampled or its asks are unreadable."""
    scores = _scores(record.metadata.get("judge_samples"))
    if scores is None:
        return None
    if record.min is None and record.max is None:
        return RecordStability(record, scores, None, None)
    passes = sum(
        1
        for s in scores
        if (record.min is None or s >= record.min) and (record.max is None or s <= record.max)
    )
    return RecordStability(record, scores, passes, len(scores) - passes)


def scorer_stability(scorer: str, records: Sequence[ScoreRecord]) -> ScorerStability:
    found = []
    unreadable = 0
    swapped = 0
    inconsistent = []
    for r in records:
        if r.error is not None:
            continue
        if "swap" in r.metadata:
            consistent = _consistent(r)
            if consistent is None:
                unreadable += 1
                continue
            swapped += 1
            if not consistent:
                inconsistent.append(r)
        if "judge_samples" not in r.metadata:
            continue
        one = record_stability(r)
        if one is None:
            unreadable += 1
        else:
            found.append(one)
    found.sort(key=lambda s: sort_key(s.record))
    inconsistent.sort(key=sort_key)
    return ScorerStability(scorer, tuple(found), unreadable, swapped, tuple(inconsistent))


def run_stability(run: Run) -> tuple[ScorerStability, ...]:
    """Per scorer with sampled (``judge_samples``) or swapped records, by name."""
    by_scorer: dict[str, list[ScoreRecord]] = {}
    for r in run.records:
        if "judge_samples" in r.metadata or "swap" in r.metadata:
            by_scorer.setdefault(r.scorer, []).append(r)
    return tuple(scorer_stability(name, by_scorer[name]) for name in sorted(by_scorer))
