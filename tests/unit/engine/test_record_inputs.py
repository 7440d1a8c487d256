"""Records carry what was judged (issue 10): the scorer's inputs, JSON-safe, cut to
--llm-eval-record-chars with the cut marked, never an option or a key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import Score, Scorer, assert_score, assert_scores
from pytest_llmeval.core.records import ScoreRecord, TestRecorder, current_recorder
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, set_context


class Noted(Scorer):
    name = "noted_test_scorer"
    required_inputs = ("output",)
    optional_inputs = ("expected", "notes")
    default_options = {"weight": 1.0}

    def compute(self, inputs: Any, ctx: Any) -> Score:
        return Score(value=0.5)


class NotedJudge(Noted):
    """Takes the judge options (api_key among them); never calls a judge."""

    name = "noted_judge_test_scorer"
    uses_judge = True


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[TestRecorder]:
    rec = TestRecorder("test_x.py", "test_x", "c1", "data.jsonl:3")
    token = current_recorder.set(rec)
    yield rec
    current_recorder.reset(token)


def _ctx(tmp_path: Path, chars: int) -> ScoringContext:
    return ScoringContext(
        Settings(cache_mode="off", cache_dir=tmp_path / ".llmeval", record_chars=chars)
    )


@pytest.fixture
def use_ctx(tmp_path: Path) -> Iterator[Any]:
    made: list[tuple[ScoringContext, ScoringContext | None]] = []

    def install(chars: int = 4000) -> ScoringContext:
        c = _ctx(tmp_path, chars)
        made.append((c, set_context(c)))
        return c

    yield install
    for c, prev in reversed(made):
        set_context(prev)
        c.close()


def test_inputs_are_recorded_without_options_or_keys(recorder: TestRecorder, use_ctx: Any) -> None:
    use_ctx()
    assert_score(
        NotedJudge,
        output="the answer",
        expected="answer",
        input=None,
        notes={"k": [1, 2.5, None]},
        weight=3.0,
        api_key="sk-SECRET-1",
        min=0.1,
    )
    (rec,) = recorder.records
    assert rec.inputs == {
        "output": "the answer",
        "expected": "answer",
        "notes": {"k": [1, 2.5, None]},
    }
    text = json.dumps(rec.to_json())
    assert "SECRET" not in text and "weight" not in text
    assert ScoreRecord.from_json(json.loads(text)).inputs == rec.inputs


def test_long_inputs_are_cut_and_marked(recorder: TestRecorder, use_ctx: Any) -> None:
    use_ctx(10)
    assert_score(Noted, output="x" * 25, expected="short", notes=list(range(20)))
    (rec,) = recorder.records
    assert rec.inputs["output"] == {"text": "x" * 10, "truncated": 15}
    assert rec.inputs["expected"] == "short"
    dumped = json.dumps(list(range(20)))
    assert rec.inputs["notes"] == {"json": dumped[:10], "truncated": len(dumped) - 10}


def test_record_chars_zero_keeps_no_inputs(recorder: TestRecorder, use_ctx: Any) -> None:
    use_ctx(0)
    assert_score(Noted, output="anything")
    assert recorder.records[0].inputs == {}


def test_failed_scoring_keeps_the_standard_inputs(recorder: TestRecorder, use_ctx: Any) -> None:
    use_ctx()
    with pytest.raises(Exception, match="output"):
        assert_score(Noted, output=None, expected="e")
    (rec,) = recorder.records
    assert rec.error is not None
    assert rec.inputs == {"expected": "e"}


def test_batch_rows_record_their_own_inputs(recorder: TestRecorder, use_ctx: Any) -> None:
    use_ctx()
    rows = iter([{"id": "r1", "output": "a", "notes": "n1"}, {"output": "b", "weight": 2.0}])
    assert_scores(Noted, rows, min=0.1)
    assert [r.inputs for r in recorder.records] == [
        {"output": "a", "notes": "n1"},
        {"output": "b"},
    ]
