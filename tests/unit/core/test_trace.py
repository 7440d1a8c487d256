"""The trace model's queries: tree, trajectory, counts, tokens, durations, find, bounds."""

from __future__ import annotations

import re
import threading

import pytest

from pytest_llmeval.core.trace import (
    AgentStep,
    EmptyTraceError,
    ModelCall,
    Span,
    ToolCall,
    Trace,
    TraceLimits,
)

MS = 1_000_000


def span(sid: str, parent: str | None, start: int, end: int, **kw: object) -> Span:
    base: dict[str, object] = dict(
        span_id=sid,
        parent_id=parent,
        trace_id="t",
        name=sid,
        kind="span",
        source="unknown",
        start_ns=start * MS,
        end_ns=end * MS,
    )
    base.update(kw)
    return Span(**base)  # type: ignore[arg-type]


def agent_run() -> Trace:
    trace = Trace()
    # added out of order, as spans end: children before parents
    trace.add(
        span(
            "m1",
            "agent",
            10,
            60,
            kind="model",
            name="chat gpt",
            detail=ModelCall(
                "m1", "chat gpt", "gpt", input_tokens=20, output_tokens=5, duration_s=0.05
            ),
        )
    )
    trace.add(
        span(
            "t1",
            "agent",
            60,
            90,
            kind="tool",
            name="execute_tool get_weather",
            attributes={"gen_ai.tool.name": "get_weather"},
            detail=ToolCall("t1", "get_weather", {"city": "Paris"}, duration_s=0.03),
        )
    )
    trace.add(
        span(
            "m2",
            "agent",
            90,
            130,
            kind="model",
            name="chat gpt",
            detail=ModelCall(
                "m2", "chat gpt", "gpt", input_tokens=30, output_tokens=None, duration_s=0.04
            ),
        )
    )
    trace.add(
        span(
            "agent",
            None,
            0,
            140,
            kind="agent",
            name="invoke_agent weather",
            detail=AgentStep("agent", "weather", "agent", duration_s=0.14),
        )
    )
    trace.add(span("x", "t1", 70, 80, error="timeout"))
    return trace


def test_trajectory_queries() -> None:
    trace = agent_run()
    assert [s.span_id for s in trace.spans] == ["agent", "m1", "t1", "x", "m2"]
    assert trace.tool_names == ("get_weather",)
    assert [c.span_id for c in trace.model_calls] == ["m1", "m2"]
    assert [c.arguments for c in trace.tool_calls] == [{"city": "Paris"}]
    assert [a.name for a in trace.agent_steps] == ["weather"]
    assert trace.handoffs == ()
    assert (trace.input_tokens, trace.output_tokens, trace.total_tokens) == (50, 5, 55)
    assert trace.duration_s == pytest.approx(0.14)
    assert trace.model_time_s == pytest.approx(0.09)
    assert trace.tool_time_s == pytest.approx(0.03)
    assert [s.span_id for s in trace.errors] == ["x"]
    assert (trace.count(), trace.count("model"), trace.count("tool"), len(trace)) == (5, 2, 1, 5)


def test_tree_queries() -> None:
    trace = agent_run()
    root = trace.roots
    assert [s.span_id for s in root] == ["agent"]
    assert [s.span_id for s in trace.children(root[0])] == ["m1", "t1", "m2"]
    x = trace.find("x")[0]
    assert trace.parent(x) is not None and trace.parent(x).span_id == "t1"  # type: ignore[union-attr]
    assert [s.span_id for s in trace.ancestors(x)] == ["t1", "agent"]
    assert trace.render().splitlines() == [
        "agent invoke_agent weather (140.0 ms)",
        "  model chat gpt (50.0 ms) model=gpt tokens=20/5",
        "  tool execute_tool get_weather (30.0 ms) get_weather() -> None",
        "    span x (10.0 ms) ERROR timeout",
        "  model chat gpt (40.0 ms) model=gpt tokens=30/None",
    ]


def test_find_by_name_pattern_kind_attributes_and_predicate() -> None:
    trace = agent_run()
    assert [s.span_id for s in trace.find("chat gpt")] == ["m1", "m2"]
    assert [s.span_id for s in trace.find(re.compile(r"^execute_tool"))] == ["t1"]
    assert [s.span_id for s in trace.find(kind="agent")] == ["agent"]
    assert [s.span_id for s in trace.find(attributes={"gen_ai.tool.name": "get_weather"})] == ["t1"]
    assert trace.find(attributes={"gen_ai.tool.name": "other"}) == ()
    assert [s.span_id for s in trace.find(kind="model", where=lambda s: s.start_ns > 50 * MS)] == [
        "m2"
    ]
    with pytest.raises(ValueError, match="unknown span kind 'llm'; one of: model, tool"):
        trace.find(kind="llm")
    with pytest.raises(ValueError, match="unknown span kind"):
        trace.count("llm")


def test_a_trace_keeps_at_most_max_spans() -> None:
    trace = Trace(TraceLimits(max_spans=2))
    for i in range(5):
        trace.add(span(f"s{i}", None, i, i + 1))
    assert len(trace) == 2 and trace.dropped == 3
    assert trace.render().endswith("(spans: 3 dropped)")


def test_concurrent_adds_are_all_kept() -> None:
    trace = Trace()

    def add(k: int) -> None:
        for i in range(200):
            trace.add(span(f"{k}-{i}", None, i, i + 1))

    threads = [threading.Thread(target=add, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trace) == 800


def test_empty_trace_says_so() -> None:
    trace = Trace()
    assert (trace.render(), trace.duration_s, trace.total_tokens) == ("(no spans)", 0.0, 0)
    assert repr(trace) == "<Trace 0 spans: 0 model calls, 0 tool calls [], 0 tokens>"


def test_require_spans_says_why_a_trace_is_empty() -> None:
    trace = agent_run()
    assert trace.require_spans() is trace
    empty = Trace()
    with pytest.raises(EmptyTraceError) as missing:
        empty.require_spans()
    assert str(missing.value).startswith(
        "llm_eval_trace: no span was captured for this test, and none was started in this "
        "process while it ran: is the code under test instrumented? pydantic-ai: "
        "agent.instrument = True"
    )
    empty.unclaimed = 2
    with pytest.raises(EmptyTraceError, match=r"though 2 span\(s\) were started in this process"):
        empty.require_spans()


def test_a_tool_run_takes_the_arguments_its_own_model_call_asked_for() -> None:
    # call ids repeat across model calls with some servers ("call_0" in every reply): a tool
    # span without an arguments object takes the request of the model call just before it
    def model(sid: str, start: int, city: str) -> Span:
        reply = {
            "role": "assistant",
            "tool_calls": [{"id": "call_0", "name": "weather", "arguments": {"city": city}}],
        }
        detail = ModelCall(span_id=sid, name="chat", model="m", output_messages=(reply,))
        return span(sid, None, start, start + 1, kind="model", detail=detail)

    def tool(sid: str, start: int) -> Span:
        detail = ToolCall(span_id=sid, name="weather", arguments="x", call_id="call_0")
        return span(sid, None, start, start + 1, kind="tool", detail=detail)

    trace = Trace()
    for s in (model("m1", 0, "Paris"), tool("t1", 2), model("m2", 4, "Rome"), tool("t2", 6)):
        trace.add(s)
    assert [c.arguments for c in trace.tool_calls] == [{"city": "Paris"}, {"city": "Rome"}]
