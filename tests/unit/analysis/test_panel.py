"""Inter-judge agreement of judge panels (issue 20), against statsmodels and krippendorff."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from pytest_llmeval.analysis.panel import scorer_panel
from pytest_llmeval.core.records import ScoreRecord


def rec(case: str, scores: list[float | None], *, min: float | None = 0.5) -> ScoreRecord:
    panel = [
        {
            "judge": f"j{i}",
            "model": f"m{i}",
            "score": s,
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "cost_usd": 0.001,
        }
        | ({"error": "JudgeError: down"} if s is None else {})
        for i, s in enumerate(scores)
    ]
    return ScoreRecord(
        file="test_x.py",
        test="test_x",
        case_id=case,
        scorer="factuality",
        index=0,
        score=0.5,
        min=min,
        max=None,
        passed=True,
        cached=False,
        duration_s=0.0,
        rationale=None,
        error=None,
        metadata={"panel": panel, "panel_reduce": "mean"},
    )


ROWS = [
    [1.0, 1.0, 1.0],
    [1.0, 0.0, 1.0],
    [0.0, 0.0, 0.0],
    [0.6, 0.4, 1.0],
    [0.0, 1.0, 0.0],
    [1.0, 1.0, 0.4],
    [0.2, 0.0, 0.0],
]


def test_fleiss_and_krippendorff_match_the_reference_packages() -> None:
    p = scorer_panel("factuality", [rec(f"c{i}", r) for i, r in enumerate(ROWS)])
    verdicts = [[sum(s >= 0.5 for s in r), sum(s < 0.5 for s in r)] for r in ROWS]
    assert p.fleiss_kappa is not None
    assert math.isclose(p.fleiss_kappa, sm_fleiss(np.array(verdicts)), abs_tol=1e-9)
    ref = krippendorff.alpha(reliability_data=np.array(ROWS).T, level_of_measurement="interval")
    assert p.alpha is not None and math.isclose(p.alpha, ref, abs_tol=1e-9)
    assert [r.case_id for r in p.disagreements] == ["c1", "c3", "c4", "c5"]
    j0 = p.judges[0]
    assert (j0.answers, j0.passes, j0.prompt_tokens) == (7, 4, 70)
    assert j0.cost_usd == pytest.approx(0.007)


def test_a_failed_judge_is_a_missing_value_and_left_out_of_fleiss() -> None:
    rows: list[list[float | None]] = [[1.0, None, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]
    p = scorer_panel("factuality", [rec(f"c{i}", r) for i, r in enumerate(rows)])
    assert p.fleiss_n == 2 and p.judges[1].errors == 1 and p.judges[1].answers == 2
    data = np.array([[np.nan if v is None else v for v in r] for r in rows]).T
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert p.alpha is not None and math.isclose(p.alpha, ref, abs_tol=1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "panel",
        [{"judge": "a", "score": 1.0}],
        [{"judge": "a", "score": 1.0}, {"judge": "a", "score": 0.0}],
        [{"judge": "a", "score": float("nan")}, {"judge": "b", "score": 0.0}],
        [{"judge": "a", "score": "1"}, {"judge": "b", "score": 0.0}],
        [{"judge": 3, "score": 1.0}, {"judge": "b", "score": 0.0}],
    ],
)
def test_an_unreadable_panel_is_counted_apart(bad: Any) -> None:
    good = rec("ok", [1.0, 0.0])
    tampered = dataclasses.replace(good, case_id="bad", metadata={"panel": bad})
    p = scorer_panel("factuality", [good, tampered])
    assert p.unreadable == 1 and p.records == 1
