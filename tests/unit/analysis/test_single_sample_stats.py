"""The statistics of cases of one sample each (issue 24: most dataset tests) are told without a
sample object per case; they must be the statistics the general path tells, record for record:
an errored, missing, NaN or infinite score is an unscored case (never a pass), a bound decides a
mean/median/min/max case whatever the record's own verdict, and a lower-is-better bound (max=)
the same way."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.analysis.gates import case_samples, dataset_statistics
from pytest_llmeval.core.model import Run
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import REDUCERS, scorer_stats, single_sample_stats

SCORES = st.one_of(
    st.none(),
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
    st.floats(-2.0, 3.0, allow_nan=False),
    st.integers(-1, 2),
)
BOUNDS = st.one_of(st.none(), st.floats(0.0, 1.0, allow_nan=False))


@st.composite
def records(draw: st.DrawFn, *, distinct: bool = True) -> list[ScoreRecord]:
    n = draw(st.integers(0, 12))
    out = []
    for i in range(n):
        case_id = f"c{i}" if distinct else f"c{draw(st.integers(0, 3))}"
        out.append(
            ScoreRecord(
                file="test_a.py",
                test="test_t",
                case_id=case_id,
                scorer="s",
                index=0,
                score=draw(SCORES),
                min=draw(BOUNDS),
                max=draw(BOUNDS),
                passed=draw(st.sampled_from([None, True, False])),
                cached=False,
                duration_s=0.0,
                error=draw(st.sampled_from([None, None, "JudgeError: boom"])),
                where=f"cases.jsonl:{i + 1}",
                sample=0 if distinct else draw(st.integers(0, 2)),
            )
        )
    return out


def _fields(r: ScoreRecord) -> tuple[object, ...]:
    return (r.score, r.passed, r.error, r.min, r.max)


@settings(max_examples=300, deadline=None)
@given(records(), st.sampled_from(REDUCERS), st.sampled_from([None, (0.0, 1.0), (0.0, math.inf)]))
def test_one_sample_per_case_tells_what_the_general_path_tells(
    recs: list[ScoreRecord], reducer: str, score_range: tuple[float, float] | None
) -> None:
    general = scorer_stats("s", case_samples(recs), 0.9, score_range, reducer=reducer)
    fast = single_sample_stats(
        "s", map(_fields, recs), 0.9, score_range, reducer=reducer, reducer_note=None
    )
    assert fast == general


@settings(max_examples=150, deadline=None)
@given(records(distinct=False))
def test_dataset_statistics_are_the_general_paths_with_repeats_or_not(
    recs: list[ScoreRecord],
) -> None:
    # repeats (several records of a case) take the general path; distinct cases the short one
    recs = list({(r.case_id, r.sample): r for r in recs}.values())
    stats = dataset_statistics(Run(records=tuple(recs)))
    if not recs:
        assert stats == []
        return
    (test_stats,) = stats
    assert test_stats.stats == scorer_stats("s", case_samples(recs), 0.95)


def _record(score: float | None, passed: bool | None, **kw: object) -> ScoreRecord:
    fields: dict[str, object] = {
        "file": "test_a.py",
        "test": "test_t",
        "case_id": "c",
        "scorer": "s",
        "index": 0,
        "score": score,
        "min": None,
        "max": None,
        "passed": passed,
        "cached": False,
        "duration_s": 0.0,
    }
    fields.update(kw)
    return ScoreRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "record",
    [
        _record(math.nan, True, min=0.5),
        _record(math.inf, True, max=2.0),
        _record(None, True),
        _record(1.0, True, error="JudgeError: the judge failed"),
    ],
    ids=["nan", "inf", "no-score", "errored"],
)
def test_an_unusable_score_is_an_unscored_case_never_a_pass(record: ScoreRecord) -> None:
    st_ = single_sample_stats("s", [_fields(record)])
    assert (st_.n_cases, st_.n_errors, st_.mean, st_.pass_rate) == (1, 1, None, None)


def test_a_bound_decides_over_the_records_own_verdict_both_ways() -> None:
    # a lower-is-better scorer's max= bound: 0.7 misses max=0.5 though the record said pass
    rows = [_fields(_record(0.7, True, max=0.5)), _fields(_record(0.2, False, max=0.5))]
    stats = single_sample_stats("s", rows)
    assert stats.pass_rate is not None
    assert (stats.pass_rate.estimate, stats.pass_rate.n) == (0.5, 2)
    # the majority reducer reads the record's verdict, not the bound
    stats = single_sample_stats("s", rows, reducer="majority")
    assert stats.pass_rate is not None
    assert (stats.pass_rate.estimate, stats.pass_rate.n) == (0.5, 2)
    with pytest.raises(ValueError, match="unknown reducer 'avg'"):
        single_sample_stats("s", rows, reducer="avg")
