"""The reports' trace summary (issue 21, part 4): counts, the span tree in order with its timings,
tool arguments, results and tokens, the caps and their marks, redaction, and the strict reading
back that names the field of anything malformed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pytest_llmeval.core.records import ScoreRecord, records_from_wire, records_to_wire
from pytest_llmeval.core.trace import AgentStep, ModelCall, Span, ToolCall, Trace
from pytest_llmeval.core.trace_summary import (
    SpanEntry,
    TraceSummary,
    TraceSummaryError,
    summarise_trace,
)

MS = 1_000_000
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def span(sid: str, parent: str | None, start: int, end: int, **kw: Any) -> Span:
    base: dict[str, Any] = dict(
        span_id=sid,
        parent_id=parent,
        trace_id=TRACE_ID,
        name=sid,
        kind="span",
        source="gen_ai",
        start_ns=1_000 * MS + start * MS,
        end_ns=1_000 * MS + end * MS,
    )
    base.update(kw)
    return Span(**base)


def weather_run() -> Trace:
    """An agent that asks a model, runs a tool (whose result echoes a key), asks again, hands
    off; added as spans end (children first)."""
    trace = Trace()
    trace.add(
        span(
            "b7ad6b7169203331",
            "a000000000000001",
            10,
            60,
            kind="model",
            name="chat gpt-4o",
            detail=ModelCall(
                "b7ad6b7169203331",
                "chat gpt-4o",
                "gpt-4o",
                input_tokens=20,
                output_tokens=5,
                output_messages=(
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
                        ],
                    },
                ),
            ),
        )
    )
    trace.add(
        span(
            "t000000000000001",
            "a000000000000001",
            60,
            90,
            kind="tool",
            name="execute_tool get_weather",
            error="TimeoutError: upstream slow",
            detail=ToolCall(
                "t000000000000001",
                "get_weather",
                arguments={"city": "Paris", "api_key": "abc123secretvalue"},
                arguments_raw='{"city": "Paris"}',
                result="sunny; called https://user:hunter2@weather.example/v1?token=XYZ",
                call_id="c1",
            ),
        )
    )
    trace.add(
        span(
            "m000000000000002",
            "a000000000000001",
            90,
            120,
            kind="model",
            name="chat gpt-4o",
            detail=ModelCall("m000000000000002", "chat gpt-4o", "gpt-4o", input_tokens=30),
        )
    )
    trace.add(
        span(
            "h000000000000001",
            "a000000000000001",
            120,
            121,
            kind="handoff",
            name="handoff",
            detail=AgentStep("h000000000000001", "handoff", "handoff", "planner", "booker"),
        )
    )
    trace.add(
        span(
            "a000000000000001",
            None,
            0,
            130,
            kind="agent",
            name="invoke_agent planner",
            detail=AgentStep("a000000000000001", "planner", "agent"),
        )
    )
    return trace


def test_the_summary_counts_the_trace_and_lays_out_its_tree() -> None:
    s = summarise_trace(weather_run())
    assert (s.spans, s.model_calls, s.tool_calls, s.agent_steps, s.errors) == (5, 2, 1, 2, 1)
    assert (s.input_tokens, s.output_tokens, s.total_tokens) == (50, 5, 55)
    assert s.duration_s == pytest.approx(0.130)
    assert (s.trace_id, s.root_span_id, s.tree_cut) == (TRACE_ID, "a000000000000001", 0)
    assert [(e.depth, e.parent, e.kind, e.name) for e in s.tree] == [
        (0, None, "agent", "invoke_agent planner"),
        (1, 0, "model", "chat gpt-4o"),
        (1, 0, "tool", "execute_tool get_weather"),
        (1, 0, "model", "chat gpt-4o"),
        (1, 0, "handoff", "handoff"),
    ]
    model, tool = s.tree[1], s.tree[2]
    assert (model.model, model.input_tokens, model.output_tokens) == ("gpt-4o", 20, 5)
    assert model.start_s == pytest.approx(0.010) and model.duration_s == pytest.approx(0.050)
    assert tool.tool == "get_weather"
    assert tool.error == "TimeoutError: upstream slow"
    assert (s.tree[4].from_agent, s.tree[4].to_agent) == ("planner", "booker")


def test_secrets_in_arguments_and_results_never_reach_the_summary() -> None:
    tool = summarise_trace(weather_run()).tree[2]
    assert tool.arguments == '{"city": "Paris", "api_key": "<hidden>"}'
    assert tool.result == "sunny; called https://***@weather.example/v1?token=***"
    text = json.dumps(summarise_trace(weather_run()).to_json())
    assert "abc123secretvalue" not in text and "hunter2" not in text and "XYZ" not in text


def test_texts_are_cut_to_the_limit_and_the_cut_is_marked() -> None:
    tool = summarise_trace(weather_run(), max_chars=10).tree[2]
    assert tool.result == "sunny; cal"
    assert dict(tool.cut) == {
        "name": len("execute_tool get_weather") - 10,
        "tool": 1,
        "error": len("TimeoutError: upstream slow") - 10,
        "arguments": len('{"city": "Paris", "api_key": "<hidden>"}') - 10,
        "result": len("sunny; called https://***@weather.example/v1?token=***") - 10,
    }
    assert tool.name == "execute_to" and tool.tool == "get_weathe"


def test_the_tree_is_cut_after_max_spans_and_the_counts_still_cover_every_span() -> None:
    s = summarise_trace(weather_run(), max_spans=2)
    assert [e.name for e in s.tree] == ["invoke_agent planner", "chat gpt-4o"]
    assert (s.spans, s.tree_cut, s.tool_calls, s.errors) == (5, 3, 1, 1)
    none = summarise_trace(weather_run(), max_spans=0)
    assert (none.tree, none.tree_cut, none.spans) == ((), 5, 5)


def test_an_empty_trace_summarises_to_zeros() -> None:
    s = summarise_trace(Trace())
    assert s == TraceSummary(0, 0, 0, 0, 0, 0, 0, 0.0)
    assert TraceSummary.from_json(s.to_json()) == s


def test_the_summary_reads_back_equal_and_rides_the_records_wire() -> None:
    s = summarise_trace(weather_run(), max_chars=10)
    assert TraceSummary.from_json(json.loads(json.dumps(s.to_json()))) == s
    record = ScoreRecord(
        file="t.py",
        test="test_agent",
        case_id="paris",
        scorer="exact_match",
        index=0,
        score=1.0,
        min=1.0,
        max=None,
        passed=True,
        cached=False,
        duration_s=0.01,
        trace=s,
    )
    assert records_from_wire(records_to_wire([record]), {}) == [record]
    assert ScoreRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert record.to_json()["trace"]["tree"][2]["cut"]["result"] == 44


def _good() -> dict[str, Any]:
    return summarise_trace(weather_run()).to_json()


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda d: d.pop("spans"), "spans", "is missing"),
        (lambda d: d.update(spans=-1), "spans", "must be a whole number >= 0, not -1"),
        (lambda d: d.update(errors=True), "errors", "must be a whole number >= 0, not True"),
        (lambda d: d.update(duration_s="1"), "duration_s", "finite number of seconds"),
        (lambda d: d.update(extra=1), "extra", "is not a field of a trace summary"),
        (lambda d: d.update(tree={}), "tree", "must be a list, not an object"),
        (lambda d: d.update(tree_cut=3), "tree_cut", "3 spans cut + 5 in the tree"),
        (lambda d: d["tree"].__setitem__(1, "x"), "tree[1]", "a span entry is an object"),
        (lambda d: d["tree"][2].update(kind="robot"), "tree[2].kind", "'robot' is not one of"),
        (lambda d: d["tree"][2].update(parent=4), "tree[2].parent", "an earlier entry, not 4"),
        (lambda d: d["tree"][2].update(depth=3), "tree[2].depth", "3 is not one more than"),
        (lambda d: d["tree"][0].update(depth=1), "tree[0].depth", "a root's depth is 0"),
        (lambda d: d["tree"][1].update(input_tokens=1.5), "tree[1].input_tokens", "whole"),
        (lambda d: d["tree"][2].update(result=["x"]), "tree[2].result", "a string or null"),
        (lambda d: d["tree"][2].update(cut={"result": 0}), "tree[2].cut", "left out"),
        (lambda d: d["tree"][2].update(flags="x"), "tree[2].flags", "a list of strings"),
        (lambda d: d["tree"][2].update(colour=1), "tree[2].colour", "not a field of a span"),
    ],
)
def test_a_malformed_summary_is_refused_naming_the_field(
    change: Any, field: str, problem: str
) -> None:
    data = _good()
    change(data)
    with pytest.raises(TraceSummaryError, match=re.escape(f"trace summary {field}: ")) as info:
        TraceSummary.from_json(data)
    assert info.value.field == field and problem in info.value.problem


def test_a_malformed_summary_on_the_wire_names_the_record_field() -> None:
    row = ScoreRecord(
        file="t.py",
        test="t",
        case_id=None,
        scorer="s",
        index=0,
        score=None,
        min=None,
        max=None,
        passed=None,
        cached=False,
        duration_s=0.0,
    ).to_row()
    row[-1] = {"spans": "many"}
    text = json.dumps({"v": 2, "rows": [row]})
    with pytest.raises(ValueError, match="record field 'trace': trace summary"):
        records_from_wire(text, {})


def test_an_entry_writes_only_the_fields_it_fills() -> None:
    entry = SpanEntry("s1", "step", "span", 0, None, 0.0, 0.5)
    assert entry.to_json() == {
        "span_id": "s1",
        "name": "step",
        "kind": "span",
        "depth": 0,
        "parent": None,
        "start_s": 0.0,
        "duration_s": 0.5,
    }
