from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.core.records import ScoreRecord, aggregate
from pytest_llmeval.core.trace_summary import SpanEntry, TraceSummary


def rec(scorer: str, score: float | None, passed: bool | None, **kw: object) -> ScoreRecord:
    base: dict[str, object] = dict(
        file="t.py",
        test="test_x",
        case_id="c",
        scorer=scorer,
        index=0,
        score=score,
        min=0.5,
        max=None,
        passed=passed,
        cached=False,
        duration_s=0.5,
    )
    base.update(kw)
    return ScoreRecord(**base)  # type: ignore[arg-type]


def test_record_json_round_trip_is_exact() -> None:
    r = rec(
        "s",
        0.25,
        False,
        rationale="why",
        metadata={"a": [1, 2]},
        prompt_tokens=3,
        completion_tokens=4,
        judge_calls=1,
        cost_usd=0.001,
        where="d.jsonl:2",
    )
    text = json.dumps(r.to_json())
    assert ScoreRecord.from_json(json.loads(text)) == r
    # unknown keys from a newer writer are ignored
    assert ScoreRecord.from_json({**r.to_json(), "future": 1}) == r


def test_aggregate_counts_and_means() -> None:
    recs = [
        rec("a", 1.0, True, cached=True, judge_calls=0),
        rec("a", 0.2, False, judge_calls=2, prompt_tokens=10, completion_tokens=5, cost_usd=0.01),
        rec("a", None, None, error="JudgeError: boom"),
        rec("b", 0.5, None),
    ]
    aggs = aggregate(recs)
    assert list(aggs) == ["a", "b"]
    a = aggs["a"].to_json()
    assert (a["n"], a["passed"], a["failed"], a["errors"], a["cache_hits"]) == (3, 1, 1, 1, 1)
    assert a["mean"] == pytest.approx(0.6) and (a["min"], a["max"]) == (0.2, 1.0)
    assert (a["judge_calls"], a["prompt_tokens"], a["completion_tokens"]) == (2, 10, 5)
    assert a["cost_usd"] == pytest.approx(0.01) and a["time_s"] == pytest.approx(1.5)
    assert aggs["b"].to_json()["cost_usd"] is None


_SCORES = st.one_of(
    st.none(), st.floats(min_value=-1e6, max_value=1e6), st.sampled_from([0.1, 0.2, 0.7])
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            _SCORES,
            st.sampled_from([True, False, None]),
            st.booleans(),  # cached
            st.sampled_from([None, "JudgeError: boom"]),
            st.floats(min_value=0, max_value=10),  # duration
            st.integers(0, 3),  # judge calls
            st.integers(0, 500),  # tokens
            st.sampled_from([None, 0.0, 0.001, 0.1]),  # cost
        ),
        max_size=40,
    )
)
def test_aggregates_made_in_c_passes_equal_the_one_by_one_fold(rows: list[tuple]) -> None:
    """aggregate() sums each field over a scorer's records in C passes: every total, count,
    bound and float equals ScorerAggregate.add() folding the records one by one (errors count
    their cost and time, not their score; None scores, passes and costs are not counted)."""
    from pytest_llmeval.core.records import ScorerAggregate, forget_aggregates

    recs = [
        rec(
            scorer,
            None if error else score,
            None if error else passed,
            cached=cached,
            error=error,
            duration_s=duration,
            judge_calls=calls,
            prompt_tokens=tokens,
            cached_prompt_tokens=tokens // 2,
            completion_tokens=tokens + 1,
            cost_usd=cost,
        )
        for scorer, score, passed, cached, error, duration, calls, tokens, cost in rows
    ]
    folded: dict[str, ScorerAggregate] = {}
    for r in recs:
        folded.setdefault(r.scorer, ScorerAggregate(r.scorer)).add(r)
    forget_aggregates()
    made = aggregate(recs)
    assert list(made) == sorted(folded)
    for scorer, agg in made.items():
        assert agg == folded[scorer]  # dataclass equality: every field, the floats exactly
        assert agg.to_json() == folded[scorer].to_json()
    forget_aggregates()


def test_records_read_with_a_memo_share_the_strings_most_records_repeat() -> None:
    """A controller reads one record per case from its workers: file, test, scorer, instrument
    and judge models are kept once for the run, not once per record; values are unchanged."""
    strings: dict[str, str] = {}
    texts = [
        json.dumps(
            rec(
                "exact_match",
                1.0,
                True,
                case_id=f"c{i}",
                instrument="d" * 64,
                judge_models=("gpt-x",),
                inputs={"output": f"o{i}"},
            ).to_json()
        )
        for i in range(2)
    ]
    a, b = (ScoreRecord.from_json(json.loads(t), strings) for t in texts)
    for name in ("file", "test", "scorer", "instrument"):
        assert getattr(a, name) is getattr(b, name), name
    assert a.judge_models[0] is b.judge_models[0]
    assert a.case_id == "c0" and b.case_id == "c1" and a.inputs == {"output": "o0"}
    # the empty metadata of both is one read-only mapping, equal to {} and written as {}
    assert a.metadata is b.metadata and a.metadata == {} and a.to_json()["metadata"] == {}
    with pytest.raises(TypeError):
        a.metadata["x"] = 1  # type: ignore[index]
    assert a == ScoreRecord.from_json(json.loads(texts[0]))  # without the memo: equal
    assert not hasattr(a, "__dict__")  # slots: no per-record dict (issue 24's memory target)


def _every_field_set() -> ScoreRecord:
    """A record whose every field differs from its default (so a field out of place shows)."""
    return rec(
        "judge",
        0.25,
        False,
        rationale="why",
        error=None,
        where="d.jsonl:2",
        metadata={"a": [1, 2]},
        prompt_tokens=3,
        completion_tokens=4,
        judge_calls=1,
        cost_usd=0.001,
        judge_models=("gpt-x", "gpt-y"),
        sample=2,
        gated=True,
        inputs={"output": "o"},
        cached_prompt_tokens=1,
        instrument="d" * 64,
        label="B",
        label_score=0.5,
        trace=TraceSummary(
            1, 1, 0, 0, 0, 7, 2, 0.25, tree=(SpanEntry("s1", "chat", "model", 0, None, 0.0, 0.25),)
        ),
        max=0.9,
        index=3,
        cached=True,
    )


def test_records_cross_the_wire_as_rows_and_come_back_equal() -> None:
    """xdist workers ship rows (no key per record); each position is the field of the same
    name, and the controller's copy equals the worker's, field for field."""
    from pytest_llmeval.core.records import ROW_FIELDS, records_from_wire, records_to_wire

    r = _every_field_set()
    assert r.to_row() == [r.to_json()[name] for name in ROW_FIELDS]
    plain = rec("exact_match", 1.0, True)
    strings: dict[str, str] = {}
    back = records_from_wire(records_to_wire([r, plain, plain]), strings)
    assert back == [r, plain, plain]
    assert back[1].file is back[2].file and back[1].metadata is back[2].metadata
    assert back[0].judge_models == ("gpt-x", "gpt-y") and back[0].label == "B"
    assert back[0].trace is not None and back[0].trace.tree[0].name == "chat"
    assert records_from_wire(records_to_wire([]), {}) == []


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("file", 1),
        ("scorer", None),
        ("index", True),  # a bool is not an index
        ("index", 1.5),
        ("score", "1.0"),
        ("passed", 1),  # 1 is not True
        ("cached", None),
        ("duration_s", None),
        ("metadata", []),
        ("judge_models", ["a", 1]),
        ("judge_models", "a"),
        ("inputs", "x"),
        ("label", []),
        ("label_score", "0.5"),
        ("trace", "spans"),
        ("trace", []),
    ],
)
def test_a_row_with_a_value_of_the_wrong_type_is_refused_naming_the_field(
    field: str, bad: object
) -> None:
    from pytest_llmeval.core.records import ROW_FIELDS, WIRE_VERSION, records_from_wire

    row = _every_field_set().to_row()
    row[ROW_FIELDS.index(field)] = bad
    with pytest.raises(ValueError, match=f"record field '{field}'"):
        records_from_wire(json.dumps({"v": WIRE_VERSION, "rows": [row]}), {})


@pytest.mark.parametrize(
    ("field", "bad"),
    [("index", True), ("score", "1.0"), ("judge_models", ["a", 1]), ("trace", {"spans": 1})],
)
@pytest.mark.parametrize("memo_full", [False, True])
def test_a_bad_row_after_good_rows_is_refused_whatever_shapes_were_checked_before(
    field: str, bad: object, memo_full: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader checks each row shape (each value's type) once: a good row's shape never
    lets a bad row through, be it of another shape (a bool index) or of the same shape with a
    bad value inside (a list holding a number, a trace that is no summary); nor does a full
    memo of shapes."""
    from pytest_llmeval.core import records as records_module
    from pytest_llmeval.core.records import ROW_FIELDS, WIRE_VERSION, records_from_wire

    if memo_full:
        monkeypatch.setattr(records_module, "_CHECKED_SHAPES", set())
        monkeypatch.setattr(records_module, "_MAX_SHAPES", 0)
    good = _every_field_set().to_row()
    row = _every_field_set().to_row()
    row[ROW_FIELDS.index(field)] = bad
    text = json.dumps({"v": WIRE_VERSION, "rows": [good, good, row]})
    with pytest.raises(ValueError, match=f"record field '{field}'"):
        records_from_wire(text, {})
    assert records_from_wire(json.dumps({"v": WIRE_VERSION, "rows": [good]}), {}) == [
        _every_field_set()
    ]
    shape = tuple(map(type, json.loads(json.dumps(good))))
    assert (shape in records_module._CHECKED_SHAPES) is not memo_full


@pytest.mark.parametrize(
    "text",
    [
        '[{"file": 1}]',  # the old form: a list of objects
        '{"v": 1, "rows": []}',  # another version (1: rows without the trace summary)
        '{"rows": []}',
        '{"v": 2, "rows": {}}',
        '{"v": 2, "rows": [[1, 2]]}',  # too short
        '{"v": 2, "rows": [{"file": "t.py"}]}',
        '"x"',
    ],
)
def test_anything_but_rows_of_this_wire_version_is_refused(text: str) -> None:
    from pytest_llmeval.core.records import records_from_wire

    with pytest.raises(ValueError, match=r"wire version 2|JSON array of 28 values"):
        records_from_wire(text, {})


def test_aggregates_asked_twice_are_counted_once_and_again_when_the_records_grew() -> None:
    """The terminal and the report ask for the aggregates of the same records: counted once;
    a list that grew since (or another list) is counted afresh, never the stale totals."""
    from pytest_llmeval.core import records as records_module

    recs = [rec("a", 1.0, True), rec("a", 0.0, False)]
    first = aggregate(recs)
    assert aggregate(recs)["a"] is first["a"]  # the memo
    recs.append(rec("a", None, None, error="JudgeError: down"))
    grown = aggregate(recs)["a"].to_json()
    assert (grown["n"], grown["passed"], grown["failed"], grown["errors"]) == (3, 1, 1, 1)
    other = aggregate(list(recs[:1]))["a"].to_json()
    assert (other["n"], other["passed"], other["failed"]) == (1, 1, 0)
    frozen = tuple(recs)
    assert aggregate(frozen)["a"].to_json()["n"] == 3
    records_module.forget_aggregates()
    assert records_module._last_aggregate is None


def test_the_field_order_is_pinned_and_record_of_sets_every_field_by_it() -> None:
    """``record_of`` (the usual record's constructor) and the wire rows set fields by position:
    the order is pinned here, and a record made by position equals one made by name."""
    from pytest_llmeval.core.records import ROW_FIELDS, record_of

    assert ROW_FIELDS == (
        "file", "test", "case_id", "scorer", "index", "score", "min", "max", "passed",
        "cached", "duration_s", "rationale", "error", "where", "metadata", "prompt_tokens",
        "completion_tokens", "judge_calls", "cost_usd", "judge_models", "sample", "gated",
        "inputs", "cached_prompt_tokens", "instrument", "label", "label_score", "trace",
    )  # fmt: skip
    full = _every_field_set()
    values = tuple(getattr(full, name) for name in ROW_FIELDS)
    made = record_of(values)
    assert made == full and type(made) is ScoreRecord
    assert all(getattr(made, name) is getattr(full, name) for name in ROW_FIELDS)
    with pytest.raises(TypeError, match="28 fields, not 27"):
        record_of(values[:-1])


def test_the_usual_record_equals_the_general_paths_record_field_by_field() -> None:
    """``_record`` builds the usual record (no judge call in this run, no metadata) by
    position: every field equals the keyword-built record's, default or not."""
    from pytest_llmeval.core.model import Instrument
    from pytest_llmeval.core.records import TestRecorder, current_recorder
    from pytest_llmeval.core.scores import Score
    from pytest_llmeval.engine.assertions import Label, _record

    recorder = TestRecorder("t.py", "test_x", "c7", "data.jsonl:8", sample=2)
    recorder.next_index("exact_match")  # the second assertion of the scorer: index 1
    token = current_recorder.set(recorder)
    try:
        score = Score(0.25, "exact_match", "why", cached=True, duration_s=0.5, passed=False)
        inst = Instrument(digest="d1g3st", scorer="exact_match")
        _record("exact_match", score, 0.5, 0.75, gated=True, inputs={"output": "o"},
                instrument=inst, label=Label("B", 0.5))  # fmt: skip
    finally:
        current_recorder.reset(token)
    (made,) = recorder.records
    assert made == ScoreRecord(
        file="t.py", test="test_x", case_id="c7", scorer="exact_match", index=1, score=0.25,
        min=0.5, max=0.75, passed=False, cached=True, duration_s=0.5, rationale="why",
        where="data.jsonl:8", sample=2, gated=True, inputs={"output": "o"},
        instrument=inst.digest, label="B", label_score=0.5,
    )  # fmt: skip
    assert made.metadata == {} and made.judge_models == () and made.trace is None


def test_the_json_form_names_every_field_once_in_its_written_order_each_a_json_value() -> None:
    """``to_json`` reads every field in one call: its keys and their order are the saved runs'
    and reports' (pinned), each mapping a plain dict and each sequence a list (what
    ``json.dumps`` writes without a default), never the record's own shared objects."""
    full = _every_field_set()
    out = full.to_json()
    assert list(out) == [
        "file", "test", "case_id", "scorer", "index", "score", "min", "max", "passed",
        "cached", "duration_s", "rationale", "error", "where", "metadata", "prompt_tokens",
        "cached_prompt_tokens", "completion_tokens", "judge_calls", "cost_usd", "judge_models",
        "sample", "gated", "inputs", "instrument", "label", "label_score", "trace",
    ]  # fmt: skip
    assert type(out["metadata"]) is dict and out["metadata"] == dict(full.metadata)
    assert out["metadata"] is not full.metadata and out["inputs"] is not full.inputs
    assert type(out["inputs"]) is dict and out["inputs"] == dict(full.inputs)
    assert out["judge_models"] == list(full.judge_models) and type(out["judge_models"]) is list
    assert full.trace is not None and out["trace"] == full.trace.to_json()
    for name in out.keys() - {"metadata", "inputs", "judge_models", "trace"}:
        assert out[name] == getattr(full, name), name
    assert ScoreRecord.from_json(json.loads(json.dumps(out))) == full
    bare = rec("s", 1.0, True).to_json()
    assert (bare["trace"], bare["metadata"], bare["judge_models"]) == (None, {}, [])


def test_aggregate_floats_are_the_one_by_one_fold_on_every_python() -> None:
    """Ten scores, durations and costs of 0.1 add up, one by one, to 0.9999999999999999; from
    Python 3.12 ``sum()`` compensates and gives 1.0: the aggregates fold, as add() does."""
    from pytest_llmeval.core.records import forget_aggregates

    forget_aggregates()
    recs = [rec("a", 0.1, True, duration_s=0.1, cost_usd=0.1) for _ in range(10)]
    agg = aggregate(recs)["a"]
    assert (agg.total, agg.time_s, agg.cost_usd) == (0.9999999999999999,) * 3
    forget_aggregates()
