"""Human labels travel with a case (issue 20): assert_score(..., label=...), the async and batch
forms; a label of the wrong kind is an error naming the scorer, the case and its file:line,
raised before the scorer runs."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest

from pytest_llmeval import (
    Score,
    Scorer,
    assert_score,
    assert_score_async,
    assert_scores,
    assert_scores_async,
)
from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError
from pytest_llmeval.core.records import ScoreRecord, TestRecorder, current_recorder
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, set_context

CALLS: list[str] = []


class Graded(Scorer):
    name = "graded_label_test_scorer"
    score_range = (0.0, 10.0)

    def compute(self, inputs: Any, ctx: Any) -> Score:
        CALLS.append(str(inputs["output"]))
        return Score(value=7.0)


class Picker(Scorer):
    """A classifier's shape (choices worth fixed scores) without a judge."""

    name = "picker_label_test_scorer"
    choice_scores: ClassVar[dict[str, float]] = {"Yes": 1.0, "Partly": 0.5, "No": 0.0}

    def compute(self, inputs: Any, ctx: Any) -> Score:
        CALLS.append(str(inputs["output"]))
        return Score(value=1.0, metadata={"choice": "Yes"})


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[TestRecorder]:
    CALLS.clear()
    ctx = ScoringContext(Settings(cache_mode="off", cache_dir=tmp_path / ".llmeval"))
    previous = set_context(ctx)
    rec = TestRecorder("test_x.py", "test_x", "c7", "cases.jsonl:8")
    token = current_recorder.set(rec)
    yield rec
    current_recorder.reset(token)
    set_context(previous)
    ctx.close()


@pytest.mark.parametrize(
    ("scorer", "label", "kept", "stands_for"),
    [
        (Graded, True, True, None),
        (Graded, False, False, None),
        (Graded, 3, 3.0, 3.0),
        (Graded, 10.0, 10.0, 10.0),
        (Picker, "Partly", "Partly", 0.5),
        (Picker, "No", "No", 0.0),
        (Picker, 0.5, 0.5, 0.5),
        (Graded, None, None, None),
    ],
)
def test_a_label_is_recorded_beside_the_score(
    recorder: TestRecorder, scorer: type[Scorer], label: Any, kept: Any, stands_for: Any
) -> None:
    assert_score(scorer, output="x", label=label)
    (record,) = recorder.records
    assert record.label == kept and type(record.label) is type(kept)
    assert record.label_score == stands_for and type(record.label_score) is type(stands_for)
    assert record.to_json()["label"] == kept
    assert record.to_json()["label_score"] == stands_for
    again = ScoreRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert (again.label, again.label_score) == (kept, stands_for)


@pytest.mark.parametrize(
    ("scorer", "label", "problem"),
    [
        (Graded, 11, "is 11, outside the scorer's range [0, 10] (case 'c7')"),
        (Graded, -0.5, "is -0.5, outside the scorer's range [0, 10] (case 'c7')"),
        (Graded, math.nan, "is nan, outside the scorer's range [0, 10] (case 'c7')"),
        (Graded, "Yes", "is the text 'Yes', but graded_label_test_scorer has no choices to name"),
        (Picker, "Maybe", "is 'Maybe', not one of the scorer's choices ['No', 'Partly', 'Yes']"),
        (Graded, [1], "is a list ([1]) (case 'c7')"),
    ],
)
def test_a_label_of_the_wrong_kind_is_an_error_before_the_scorer_runs(
    recorder: TestRecorder, scorer: type[Scorer], label: Any, problem: str
) -> None:
    with pytest.raises(ScorerInputError) as info:
        assert_score(scorer, output="x", label=label)
    message = str(info.value)
    assert message.startswith(f"cases.jsonl:8: scorer '{scorer.name}': input 'label' ")
    assert problem in message
    assert "A label is True or False, a score in [" in message
    assert CALLS == []  # nothing scored (no judge paid) for a case that cannot be recorded
    (record,) = recorder.records  # the error is in the run's records, as any input error
    assert record.error is not None and "'label'" in record.error and record.label is None


def test_the_async_form_takes_and_checks_a_label(recorder: TestRecorder) -> None:
    asyncio.run(assert_score_async(Picker, output="x", label="No", min=0.5))
    assert recorder.records[0].label == "No"
    with pytest.raises(ScorerInputError, match="outside the scorer's range"):
        asyncio.run(assert_score_async(Graded, output="x", label=12))


def test_batch_labels_one_per_row(recorder: TestRecorder) -> None:
    rows = [{"output": "a"}, {"output": "b"}, {"output": "c"}]
    assert_scores(Graded, rows, labels=[True, None, 4])
    assert [r.label for r in recorder.records] == [True, None, 4.0]
    asyncio.run(assert_scores_async(Picker, rows, labels=["Yes", "No", None]))
    assert [r.label for r in recorder.records[3:]] == ["Yes", "No", None]
    assert [r.label_score for r in recorder.records] == [None, None, 4.0, 1.0, 0.0, None]


@pytest.mark.parametrize(
    ("labels", "error", "message"),
    [
        ([True], ScorerConfigError, "has 1 label(s) for 2 row(s)"),
        ("Yes", ScorerConfigError, "is a str, not a sequence with one label per row"),
        (
            [True, 20],
            ScorerInputError,
            "is 20, outside the scorer's range [0, 10] (row 1, case 'c7')",
        ),
    ],
)
def test_batch_labels_that_do_not_fit_the_rows_are_errors(
    recorder: TestRecorder, labels: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        assert_scores(Graded, [{"output": "a"}, {"output": "b"}], labels=labels)
    assert message in str(info.value)
    assert CALLS == []


def test_the_report_schema_takes_labels_of_each_kind() -> None:
    schema = json.loads(
        (Path(__file__).parents[3] / "pytest_llmeval/schemas/report.schema.json").read_text()
    )
    base = ScoreRecord("f.py", "t", "c", "s", 0, 1.0, None, None, None, False, 0.0).to_json()
    for label in (True, 0.5, "Yes", None):
        jsonschema.validate({"records": [{**base, "label": label}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"records": [{**base, "label": [1]}]}, schema)
