"""Helpers of the concurrent-case tests (test_concurrent*.py): the dataset file they write and
what the cases themselves record (events, start/end times), read back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest


def write_cases(p: pytest.Pytester, ids: list[str], name: str = "cases.jsonl") -> None:
    """A dataset of one row per id: ``{"id": i, "input": "q-<i>", "expected": i}``."""
    rows = [json.dumps({"id": i, "input": f"q-{i}", "expected": i}) for i in ids]
    (p.path / name).write_text("\n".join(rows) + "\n")


def read_events(p: pytest.Pytester) -> list[str]:
    """The lines the cases appended to events.txt, in order."""
    path = p.path / "events.txt"
    return path.read_text().splitlines() if path.exists() else []


def max_overlap(entries: Sequence[Mapping[str, Any]]) -> int:
    """The largest number of cases whose [start, end) intervals share one instant."""
    points = sorted(
        [(float(e["start"]), 1) for e in entries] + [(float(e["end"]), -1) for e in entries]
    )
    best = now = 0
    for _, step in points:  # an end sorts before a start at the same instant
        now += step
        best = max(best, now)
    return best
