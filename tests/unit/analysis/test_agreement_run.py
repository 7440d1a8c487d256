"""Per-scorer agreement of a run's verdicts with its labels (issue 20)."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from pytest_llmeval.analysis.agreement import human_verdict, run_agreement, scorer_agreement
from pytest_llmeval.core.model import Instrument, Run
from pytest_llmeval.core.records import ScoreRecord


def rec(
    case: str,
    score: float | None,
    label: bool | float | str | None,
    *,
    scorer: str = "factuality",
    min: float | None = 0.5,
    max: float | None = None,
    label_score: float | None = None,
    choice: str | None = None,
    error: str | None = None,
    sample: int = 0,
) -> ScoreRecord:
    passed = None
    if score is not None and (min is not None or max is not None):
        passed = (min is None or score >= min) and (max is None or score <= max)
    return ScoreRecord(
        file="test_x.py",
        test="test_x",
        case_id=case,
        scorer=scorer,
        index=0,
        score=score,
        min=min,
        max=max,
        passed=passed,
        cached=False,
        duration_s=0.0,
        rationale=f"reason {case}",
        error=error,
        metadata={"choice": choice} if choice else {},
        label=label,
        label_score=label_score,
        sample=sample,
        inputs={"output": f"output {case}"},
    )


def test_human_verdicts_from_each_kind_of_label() -> None:
    assert human_verdict(rec("a", 1.0, True)) is True
    assert human_verdict(rec("a", 1.0, False)) is False
    assert human_verdict(rec("a", 1.0, 0.4, label_score=0.4)) is False  # below min 0.5
    assert human_verdict(rec("a", 1.0, 0.6, label_score=0.6)) is True
    # a lower-is-better bound: the label's score must be at most max
    assert human_verdict(rec("a", 0.1, 0.3, min=None, max=0.2, label_score=0.3)) is False
    assert human_verdict(rec("a", 1.0, "B", label_score=0.6, choice="A")) is True
    # a numeric label from a report without label_score still places itself
    assert human_verdict(rec("a", 1.0, 0.6)) is True
    assert human_verdict(rec("a", 1.0, 0.6, min=None, label_score=0.6)) is None  # no bound
    assert human_verdict(rec("a", 1.0, None)) is None


def test_confusion_rates_and_kappa_of_a_scorer() -> None:
    # people: 10 pass, 10 fail. judge: passes 9 of the first, 3 of the second.
    records = [rec(f"p{i}", 1.0 if i < 9 else 0.0, True) for i in range(10)]
    records += [rec(f"f{i}", 1.0 if i < 3 else 0.0, False) for i in range(10)]
    a = scorer_agreement("factuality", records, uses_judge=True)
    assert a.n == 20 and a.labelled == 20 and a.unplaced == 0
    assert a.confusion.counts == ((9, 1), (3, 7))
    assert a.accuracy is not None and a.accuracy.estimate == pytest.approx(0.8)
    assert a.true_pass is not None and a.true_pass.estimate == pytest.approx(0.9)
    assert a.true_fail is not None and a.true_fail.estimate == pytest.approx(0.7)
    human = [r.label for r in records]
    judge = [r.passed for r in records]
    assert a.kappa is not None and a.kappa.kappa is not None
    assert math.isclose(a.kappa.kappa, cohen_kappa_score(human, judge), abs_tol=1e-12)
    assert [r.case_id for r in a.disagreements] == ["f0", "f1", "f2", "p9"]
    out = a.to_json()
    assert out["kappa"] == a.kappa.kappa and out["accuracy"] == pytest.approx(0.8)
    assert out["true_pass_rate"] == pytest.approx(0.9)
    assert out["true_fail_rate"] == pytest.approx(0.7)
    assert out["confusion"]["false_pass"] == 3 and out["confusion"]["false_fail"] == 1
    assert out["disagreements"][0]["output"] == "output f0"
    assert out["disagreements"][0]["rationale"] == "reason f0"
    assert a.corrected is None  # every record is labelled


def test_unlabelled_records_get_a_corrected_pass_rate() -> None:
    records = [rec(f"p{i}", 1.0 if i < 9 else 0.0, True) for i in range(10)]
    records += [rec(f"f{i}", 1.0 if i < 2 else 0.0, False) for i in range(10)]
    records += [rec(f"u{i}", 1.0 if i < 60 else 0.0, None) for i in range(100)]
    a = scorer_agreement("factuality", records)
    c = a.corrected
    assert c is not None and c.estimate is not None and c.interval is not None
    assert c.raw == pytest.approx(0.6) and c.n == 100
    # (0.6 + 0.8 - 1) / (0.9 + 0.8 - 1)
    assert c.estimate == pytest.approx(0.4 / 0.7)
    assert c.interval.low < c.estimate < c.interval.high


def test_records_without_both_verdicts_are_counted_apart() -> None:
    records = [
        rec("a", 1.0, True),
        rec("b", None, True, error="JudgeError: timed out"),
        rec("c", 0.7, 0.9, min=None, label_score=0.9),  # no bound: no pass/fail either side
        rec("d", 0.0, False),
    ]
    a = scorer_agreement("factuality", records)
    assert (a.labelled, a.n, a.unplaced) == (4, 2, 2)
    assert a.kappa is not None and a.kappa.kappa == pytest.approx(1.0)
    # the score-labelled record still counts for the graded statistics
    assert a.graded == 1 and a.mae == pytest.approx(0.2)


def test_choices_and_scores_of_a_classifier() -> None:
    records = [
        rec("a", 1.0, "A", label_score=1.0, choice="A"),
        rec("b", 0.6, "A", label_score=1.0, choice="B"),
        rec("c", 0.0, "C", label_score=0.0, choice="C"),
        rec("d", 0.6, "B", label_score=0.6, choice="B"),
    ]
    a = scorer_agreement("factuality", records)
    assert a.choices is not None
    assert a.choices.categories == ("A", "B", "C")
    assert a.choices.counts == ((1, 1, 0), (0, 1, 0), (0, 0, 1))
    assert a.graded == 4 and a.mae == pytest.approx(0.1)
    assert a.spearman is not None and 0.0 < a.spearman <= 1.0


def test_run_agreement_only_for_scorers_with_labels_and_says_which_use_a_judge() -> None:
    run = Run(
        records=(
            rec("a", 1.0, True),
            rec("b", 1.0, None, scorer="exact_match"),
            rec("c", 1.0, True, scorer="levenshtein"),
        ),
        instruments={
            "d1": Instrument("d1", "factuality", uses_judge=True),
            "d2": Instrument("d2", "levenshtein", uses_judge=False),
        },
    )
    items = run_agreement(run)
    assert [(a.scorer, a.uses_judge) for a in items] == [
        ("factuality", True),
        ("levenshtein", False),
    ]


def test_agreement_over_ten_thousand_labelled_records_is_fast() -> None:
    records = [rec(f"c{i}", float(i % 3 == 0), i % 2 == 0, label_score=None) for i in range(10_000)]
    run = Run(records=tuple(records))
    t0 = time.process_time()
    (a,) = run_agreement(run)
    elapsed = time.process_time() - t0
    assert a.n == 10_000
    assert elapsed < 0.5, f"{elapsed:.3f} s of CPU for 10,000 labelled records"


def test_a_labelled_output_asked_several_times_counts_once() -> None:
    """Three samples of one labelled case are one labelled record: the confusion counts ten
    outputs, not thirty, and a case's samples reduce (mean score against the bound) to one
    verdict; the disagreement list still shows every record that disagrees."""

    def asks(i: int) -> tuple[float, ...]:
        if i == 5:  # a fail asked three times: 1.0, 0.0, 0.0 -> mean 0.33, the judge fails it
            return (1.0, 0.0, 0.0)
        return (1.0, 1.0, 1.0) if i < 4 or i == 9 else (0.0, 0.0, 0.0)

    records = [rec(f"c{i}", s, i < 5, sample=k) for i in range(10) for k, s in enumerate(asks(i))]
    a = scorer_agreement("factuality", records)
    assert a.confusion.n == 10
    # people pass c0-c4, the judge passes c0-c3 and c9 (c4 and c9 disagree)
    assert a.confusion.counts == ((4, 1), (1, 4))
    assert a.kappa is not None and math.isclose(a.kappa.kappa, 0.6, abs_tol=1e-12)
    assert len(a.disagreements) == 3 + 3 + 1  # c4 x3, c9 x3, c5's passing sample


def test_the_corrected_pass_rate_counts_each_unlabelled_case_once() -> None:
    labelled = [rec(f"p{i}", 1.0, True) for i in range(10)]
    labelled += [rec(f"f{i}", 1.0 if i < 2 else 0.0, False) for i in range(10)]
    # four unlabelled cases, one of them asked five times (all passes): 3 of 4 cases pass
    unlabelled = [rec("u0", 1.0, None, sample=k) for k in range(5)]
    unlabelled += [rec("u1", 1.0, None), rec("u2", 1.0, None), rec("u3", 0.0, None)]
    a = scorer_agreement("factuality", labelled + unlabelled)
    assert a.corrected is not None
    assert (a.corrected.n, a.corrected.raw) == (4, 0.75)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(0, 1), st.just(float("nan"))),
            st.one_of(st.none(), st.booleans()),
            st.one_of(st.none(), st.just(0.5)),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_the_one_record_per_case_path_reduces_as_the_general_one(rows: list) -> None:
    """Records read from a file may say passed=True under their bound: both paths re-derive
    the verdict from the score and the bound, never trust the stored flag."""
    from pytest_llmeval.analysis.agreement import _cases, _judged
    from pytest_llmeval.core.stats import labelled_pairs, reduce_case

    records = []
    for i, (score, label, bound, claimed) in enumerate(rows):
        r = rec(f"c{i}", score, label, min=bound)
        records.append(dataclasses.replace(r, passed=claimed if score is not None else None))
    pairs, alone = _judged(records)
    cases = _cases(records)
    assert pairs == labelled_pairs(cases)
    assert alone == [
        v
        for c in cases
        if all(x.human is None for x in c.samples) and (v := reduce_case(c).passed) is not None
    ]


def test_the_correction_is_per_test_never_across_tests() -> None:
    """Another test's unlabelled records (here held against max=0.5: they pass when the judge
    says No) are not corrected with this test's rates; two labelled tests get one correction
    each, by name."""
    labelled = [rec(f"p{i}", 1.0, True) for i in range(10)]
    labelled += [rec(f"f{i}", 1.0 if i < 2 else 0.0, False) for i in range(10)]
    unlabelled = [rec(f"u{i}", 1.0 if i < 3 else 0.0, None) for i in range(4)]
    other = [
        dataclasses.replace(rec(f"o{i}", 0.0, None, min=None, max=0.5), test="test_other")
        for i in range(6)
    ]
    a = scorer_agreement("factuality", labelled + unlabelled + other)
    assert [t for t, _ in a.corrected_by_test] == ["test_x.py::test_x"]
    assert a.corrected is not None and (a.corrected.n, a.corrected.raw) == (4, 0.75)
    second = [dataclasses.replace(r, test="test_y") for r in labelled + unlabelled[:2]]
    b = scorer_agreement("factuality", labelled + unlabelled + second)
    assert [t for t, _ in b.corrected_by_test] == ["test_x.py::test_x", "test_x.py::test_y"]
    assert b.corrected is None
    assert [r.n for _, r in b.corrected_by_test] == [4, 2]
    assert b.to_json()["corrected_by_test"][1]["test"] == "test_x.py::test_y"
