"""The span router: which capture a span belongs to (context, then parent, then trace), late
and unfinished spans, nothing leaking between captures. The OpenTelemetry processor is driven
by a real SDK tracer provider."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from scorer_properties import PLAIN_CTX

from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.core.trace import TraceLimits
from pytest_llmeval.core.trace_conventions import RawSpan
from pytest_llmeval.plugin.trace_capture import SpanRouter

LIMITS = TraceLimits()


def rec(name: str) -> TestRecorder:
    return TestRecorder("t.py", name, None, None)


def raw(key: str, parent: str | None = None) -> RawSpan:
    return RawSpan(name=key, span_id=key, parent_id=parent, trace_id="t", start_ns=1, end_ns=2)


def start_in(
    recorder: TestRecorder | None, router: SpanRouter, key: str, parent: str | None, trace: str
) -> None:
    token = current_recorder.set(recorder)
    try:
        router.started(key, parent, trace)
    finally:
        current_recorder.reset(token)


def test_context_decides_between_two_open_captures() -> None:
    router = SpanRouter()
    a, b = rec("a"), rec("b")
    ta, tb = router.open(a, "t.py::a", LIMITS), router.open(b, "t.py::b", LIMITS)
    start_in(a, router, "s1", None, "T1")
    start_in(b, router, "s2", None, "T2")
    router.ended("s2", lambda: raw("s2"))
    router.ended("s1", lambda: raw("s1"))
    assert [s.name for s in ta.spans] == ["s1"]
    assert [s.name for s in tb.spans] == ["s2"]


def test_a_span_without_context_follows_its_parent_then_its_trace() -> None:
    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "root", None, "T")
    # a thread the agent started: no recorder in its context
    done = threading.Event()

    def worker() -> None:
        router.started("child", "root", "T")  # parent still open
        router.ended("child", lambda: raw("child", "root"))
        done.set()

    threading.Thread(target=worker).start()
    assert done.wait(5)
    router.ended("root", lambda: raw("root"))
    start_in(None, router, "orphan", "gone", "T")  # parent unknown, trace known
    router.ended("orphan", lambda: raw("orphan"))
    assert sorted(s.name for s in trace.spans) == ["child", "orphan", "root"]


def test_spans_nobody_captures_are_ignored() -> None:
    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    start_in(rec("other"), router, "s", None, "T9")  # another test, not capturing
    start_in(None, router, "t", None, "T8")
    router.ended("s", lambda: raw("s"))
    router.ended("t", lambda: raw("t"))
    assert len(trace) == 0
    assert trace.unclaimed == 2  # what require_spans tells the user


def test_late_spans_are_counted_not_attached_to_the_next_test() -> None:
    router = SpanRouter()
    a, b = rec("a"), rec("b")
    ta = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "slow", None, "T")
    assert router.close(ta) == 1
    assert ta.unfinished == 1
    tb = router.open(b, "t.py::b", LIMITS)
    router.ended("slow", lambda: raw("slow"))
    # a straggler started after the test ended, in the same trace, without context
    start_in(None, router, "after", None, "T")
    router.ended("after", lambda: raw("after"))
    assert (len(ta), len(tb)) == (0, 0)
    assert router.take_late() == {"t.py::a": 2}
    assert router.take_late() == {}
    router.close(tb)


def test_a_closed_capture_keeps_no_trace_alive_while_stragglers_are_open() -> None:
    import gc
    import weakref

    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "s1", None, "T")
    router.ended("s1", lambda: raw("s1"))
    start_in(a, router, "straggler", None, "T")
    assert router.close(trace) == 1
    ref = weakref.ref(trace)
    del trace
    gc.collect()
    assert ref() is None  # the straggler's routing entry does not hold the captured spans
    router.ended("straggler", lambda: raw("straggler"))
    assert router.take_late() == {"t.py::a": 1}


def test_log_events_join_their_open_span_only() -> None:
    from pytest_llmeval.core.trace_conventions import SpanEvent

    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "chat", None, "T")
    router.event("chat", SpanEvent("gen_ai.user.message", {"content": "hi"}))
    router.event("other", SpanEvent("gen_ai.user.message", {"content": "lost"}))  # unclaimed

    def chat(key: str = "chat") -> RawSpan:
        return RawSpan(
            name=key,
            span_id=key,
            parent_id=None,
            trace_id="T",
            start_ns=1,
            end_ns=2,
            attributes={"gen_ai.operation.name": "chat"},
        )

    router.ended("chat", chat)
    (call,) = trace.model_calls
    assert list(call.input_messages) == [{"role": "user", "content": "hi"}]
    start_in(a, router, "other", None, "T")  # claimed only now: the early event is gone
    router.ended("other", lambda: chat("other"))
    assert [c.input_messages for c in trace.model_calls] == [
        ({"role": "user", "content": "hi"},),
        (),
    ]


def test_a_thousand_captures_leave_the_router_holding_nothing_but_recent_trace_ids() -> None:
    router = SpanRouter()
    for i in range(1_000):
        r = rec(f"t{i}")
        trace = router.open(r, f"t.py::t{i}", LIMITS)
        for k in range(5):
            start_in(r, router, f"{i}-{k}", None, f"T{i}")
            router.ended(f"{i}-{k}", lambda i=i, k=k: raw(f"{i}-{k}"))
        router.close(trace)
        assert len(trace) == 5
    assert (router._active, router._open, router._traces, router._events) == ({}, {}, {}, {})
    assert len(router._closed_traces) == 1_000  # ids only: every sink there dropped its trace
    assert all(s.trace is None for s in router._closed_traces.values())


def test_a_reused_recorder_id_never_reaches_a_closed_capture() -> None:
    router = SpanRouter()
    a = rec("a")
    ta = router.open(a, "t.py::a", LIMITS)
    router.close(ta)
    start_in(a, router, "s", None, "T")  # same recorder, capture closed: not captured
    router.ended("s", lambda: raw("s"))
    assert len(ta) == 0 and router.take_late() == {}
    with pytest.raises(RuntimeError, match="a trace capture is already open"):
        b = rec("b")
        router.open(b, "t.py::b", LIMITS)
        router.open(b, "t.py::b", LIMITS)


# -- the OpenTelemetry processor on a real SDK provider -----------------------------------------


@pytest.fixture
def provider() -> Iterator[object]:
    sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (dev pins it)")
    TracerProvider = sdk.TracerProvider

    from pytest_llmeval.plugin import trace_capture

    p = TracerProvider()
    p.add_span_processor(trace_capture._make_otel_processor())
    yield p
    p.shutdown()


def test_otel_processor_routes_spans_with_ids_status_and_events(provider: object) -> None:
    from opentelemetry.trace import Status, StatusCode

    from pytest_llmeval.plugin.trace_capture import router

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        with tracer.start_as_current_span(
            "invoke_agent x",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"},
        ) as root:

            def in_thread() -> None:  # a thread without the context: parent carried explicitly
                from opentelemetry import trace as api

                ctx = api.set_span_in_context(root)
                with tracer.start_as_current_span(
                    "execute_tool f",
                    context=ctx,
                    attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f"},
                ) as s:
                    s.set_status(Status(StatusCode.ERROR, "tool broke"))

            t = threading.Thread(target=in_thread)
            t.start()
            t.join()
    finally:
        current_recorder.reset(token)
    router().close(trace)
    agent, tool = trace.spans
    assert (agent.kind, agent.name, agent.parent_id) == ("agent", "invoke_agent x", None)
    assert (tool.kind, tool.parent_id, tool.error) == ("tool", agent.span_id, "tool broke")
    assert len(agent.span_id) == 16 and len(agent.trace_id) == 32
    assert tool.trace_id == agent.trace_id


def test_a_finished_tests_straggler_never_lands_in_the_next_test_sharing_its_trace() -> None:
    # every test under one trace id (a session-wide span in the context, pytest-opentelemetry):
    # test a's work that starts a span after a ended (a thread with a's context copied, or one
    # carrying only the OpenTelemetry context) must not join test b's trace through the trace id
    router = SpanRouter()
    a, b = rec("a"), rec("b")
    ta = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "a1", "session", "T")
    router.ended("a1", lambda: raw("a1", "session"))
    router.close(ta)
    tb = router.open(b, "t.py::b", LIMITS)
    start_in(b, router, "b1", "session", "T")
    start_in(a, router, "a-late", "a1", "T")  # a's context, its parent ended
    start_in(None, router, "a-thread", "a1", "T")  # no context at all
    for key in ("a-late", "a-thread", "b1"):
        router.ended(key, lambda key=key: raw(key, "a1"))
    assert [s.name for s in tb.spans] == ["b1"]
    router.close(tb)


def test_a_span_of_a_test_that_does_not_capture_is_not_counted_late_for_another() -> None:
    router = SpanRouter()
    a, c = rec("a"), rec("c")
    ta = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "a1", "session", "T")
    router.ended("a1", lambda: raw("a1", "session"))
    router.close(ta)
    start_in(c, router, "c1", "session", "T")  # test c, no llm_eval_trace, same trace id
    router.ended("c1", lambda: raw("c1", "session"))
    assert router.take_late() == {}


def test_an_open_span_forgotten_past_the_open_limit_makes_its_trace_incomplete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # past the spans open at once the router follows, the oldest is forgotten: its test's trace
    # will never hold it, so it must say it is incomplete, never read as "no such call"
    from pytest_llmeval import ScorerInputError
    from pytest_llmeval.plugin import trace_capture
    from pytest_llmeval.scorers.trajectory import TraceBudget

    monkeypatch.setattr(trace_capture, "_MAX_OPEN", 2)
    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    for key in ("tool", "x", "y"):
        start_in(a, router, key, None, "T")
    assert router.forgotten == 1
    for key in ("tool", "x", "y"):
        router.ended(key, lambda key=key: raw(key))  # "tool" is no longer followed: not kept
    router.close(trace)
    assert [s.span_id for s in trace.spans] == ["x", "y"]
    assert (trace.dropped, trace.lost, trace.open_limit) == (1, 1, 2)
    with pytest.raises(ScorerInputError) as info:
        TraceBudget(max_tool_calls=0).compute({"output": trace}, PLAIN_CTX)
    # the open-span limit named, not the trace's own span limit (LIMITS.max_spans)
    assert str(info.value) == (
        "scorer 'trace_budget': input 'output' is an incomplete trace: 1 span(s) were lost "
        "because more than 2 spans were open at once in this process (the capture follows at "
        "most that many open spans and forgot the oldest), so what the agent did cannot be "
        "scored. End every span the code under test starts: one never ended stays open, counted "
        "against the limit of 2 open spans, until the process exits"
    )


def test_a_trace_scored_while_a_call_runs_is_refused_until_it_ends(provider: object) -> None:
    # an agent's tool still running (a background task, a thread not joined) when the test
    # scores: counted now the trace says no such call; a span of the test's own is no call
    from pytest_llmeval import ScorerInputError
    from pytest_llmeval.plugin.trace_capture import router
    from pytest_llmeval.scorers.trajectory import TraceBudget

    def budget() -> float:
        return TraceBudget(max_tool_calls=0).compute({"output": trace}, PLAIN_CTX).value

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        with tracer.start_as_current_span("my test's own span"):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
            tool = tracer.start_span(
                "execute_tool delete_db",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "delete_db",
                },
            )
            assert trace.running_calls() == ("tool delete_db",)
            with pytest.raises(ScorerInputError, match=r"still being written: 1 call.*delete_db"):
                budget()
            tool.end()
            assert trace.running_calls() == ()
            assert budget() == 0.0  # scored inside the test's own open span: one tool call, over
    finally:
        current_recorder.reset(token)
        router().close(trace)


@pytest.mark.parametrize(
    ("attributes", "what"),
    [
        ({"gen_ai.operation.name": "execute_tool"}, "a tool call"),
        ({"gen_ai.tool.name": "f"}, "tool f"),
        ({"openinference.span.kind": "TOOL"}, "a tool call"),
        ({"traceloop.span.kind": "tool", "traceloop.entity.name": "f"}, "tool f"),
        ({"gen_ai.operation.name": "chat"}, "a model call"),
        ({"openinference.span.kind": "LLM"}, "a model call"),
        ({"llm.request.type": "chat"}, "a model call"),
        ({"gen_ai.operation.name": "invoke_agent"}, None),
        ({"openinference.span.kind": "CHAIN"}, None),
        ({"http.method": "GET"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_what_a_span_is_at_its_start(attributes: object, what: str | None) -> None:
    from pytest_llmeval.plugin.trace_capture import _call_at_start

    assert _call_at_start(attributes) == what


def test_what_an_agents_sdk_span_is_at_its_start() -> None:
    tracing = pytest.importorskip("agents.tracing.span_data", reason="openai-agents (dev pins it)")
    from pytest_llmeval.plugin.trace_capture import _agents_call_at_start

    assert _agents_call_at_start(tracing.FunctionSpanData("get_weather", None, None)) == (
        "tool get_weather"
    )
    assert _agents_call_at_start(tracing.GenerationSpanData()) == "a model call"
    assert _agents_call_at_start(tracing.ResponseSpanData()) == "a model call"
    assert _agents_call_at_start(tracing.AgentSpanData("weather")) is None


def test_a_call_is_kept_and_stops_running_in_one_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # a reader between "no longer running" and "kept" would see neither: never a missing call
    from pytest_llmeval.plugin import trace_capture

    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        router.started("k", None, "T", "tool f")
    finally:
        current_recorder.reset(token)
    seen = []
    real = trace_capture.summarise

    def summarise(span: RawSpan, limits: TraceLimits) -> object:  # the span ended, not kept yet
        seen.append((trace.running_calls(), len(trace)))
        return real(span, limits)

    monkeypatch.setattr(trace_capture, "summarise", summarise)
    router.ended("k", lambda: raw("k"))
    assert seen == [(("tool f",), 0)]
    assert (trace.running_calls(), len(trace)) == ((), 1)
    router.close(trace)


def test_an_agents_sdk_response_span_gives_its_model_items_and_usage() -> None:
    # the Agents SDK's default model (the Responses API) exports a response span as its id and
    # usage alone: model, input and output items are read from the span data's Response
    pytest.importorskip("agents", reason="openai-agents (dev pins it)")
    from agents.tracing import response_span, set_trace_processors
    from agents.tracing import trace as agents_trace
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseUsage,
    )

    from pytest_llmeval.plugin import trace_capture

    call = ResponseFunctionToolCall(
        type="function_call", call_id="c1", name="get_weather", arguments='{"city": "Paris"}'
    )
    answer = ResponseOutputMessage(
        id="m1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="Sunny.", annotations=[])],
    )
    user = {"role": "user", "content": "Weather in Paris?"}
    ran = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    set_trace_processors([trace_capture._make_agents_processor()])
    a = rec("a")
    trace = trace_capture.router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        with agents_trace("weather"):
            for given, output, usage in (
                ([user], [call], (12, 3)),
                ([user, call.model_dump(), ran], [answer], (20, 2)),
            ):
                with response_span() as span:
                    span.span_data.input = given
                    span.span_data.response = Response.model_construct(
                        id="r",
                        model="gpt-test",
                        output=output,
                        usage=ResponseUsage.model_construct(
                            input_tokens=usage[0], output_tokens=usage[1]
                        ),
                    )
    finally:
        current_recorder.reset(token)
        trace_capture.router().close(trace)
        set_trace_processors([])
    first, second = trace.model_calls
    assert (first.model, first.input_tokens, first.output_tokens) == ("gpt-test", 12, 3)
    assert first.requested_tools == ("get_weather",)
    assert first.input_messages == ({"role": "user", "content": "Weather in Paris?"},)
    assert [m["role"] for m in second.input_messages] == ["user", "assistant", "tool"]
    assert second.input_messages[2]["tool_call_id"] == "c1"
    assert second.output_messages == ({"role": "assistant", "content": "Sunny."},)
    assert (second.input_tokens, second.output_tokens) == (20, 2)
    assert trace.flagged == ()


def test_a_span_that_cannot_be_read_is_kept_flagged_not_lost() -> None:
    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", LIMITS)
    start_in(a, router, "bad", None, "T")

    def broken() -> RawSpan:
        raise RuntimeError("export failed")

    router.ended("bad", broken)  # never raises into the code that ended the span
    router.close(trace)
    (span,) = trace.spans
    assert span.flags == ("unreadable:RuntimeError",)


def test_a_failure_in_the_processor_never_reaches_the_users_code(
    provider: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_llmeval.plugin import trace_capture

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug of ours")

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = trace_capture.router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        monkeypatch.setattr(trace_capture, "summarise", boom)
        with tracer.start_as_current_span("chat"):
            pass
        monkeypatch.setattr(trace_capture._ROUTER, "started", boom)
        with tracer.start_as_current_span("chat 2"):
            pass
    finally:
        current_recorder.reset(token)
        trace_capture.router().close(trace)
    assert [s.flags for s in trace.spans] == [("unreadable:RuntimeError",)]


def test_attributes_the_sdk_dropped_are_flagged(provider: object) -> None:
    # the SDK keeps 128 attributes a span and drops the OLDEST beyond: a long conversation in
    # flattened messages lost the span's kind (no longer a model call) and its first messages
    from pytest_llmeval.plugin.trace_capture import router

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        with tracer.start_as_current_span(
            "llm", attributes={"openinference.span.kind": "LLM"}
        ) as span:
            for i in range(70):
                span.set_attribute(f"llm.input_messages.{i}.message.role", "user")
                span.set_attribute(f"llm.input_messages.{i}.message.content", f"hi {i}")
    finally:
        current_recorder.reset(token)
        router().close(trace)
    (kept,) = trace.spans
    assert "sdk-dropped-attributes:13" in kept.flags
    assert kept in trace.flagged


def test_a_tool_span_that_lost_its_oldest_attributes_is_never_scored_as_no_call(
    provider: object,
) -> None:
    # a tool run with 200 flattened attributes loses the ones naming it a tool run (set first):
    # unscored it reads as "no tool called", a pass for expected=[] and any max_tool_calls
    from pytest_llmeval import ScorerInputError
    from pytest_llmeval.plugin.trace_capture import router
    from pytest_llmeval.scorers.trajectory import TraceBudget, TrajectoryMatch

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        with tracer.start_as_current_span(
            "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5}
        ):
            pass
        with tracer.start_as_current_span(
            "run",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_db"},
        ) as span:
            for i in range(200):
                span.set_attribute(f"app.row.{i}", i)
    finally:
        current_recorder.reset(token)
        router().close(trace)
    assert [s.kind for s in trace.spans] == ["model", "span"]  # the tool run is not seen as one
    assert trace.tool_calls == ()
    with pytest.raises(ScorerInputError, match=r"incomplete trace: 1 span.*'run'.*sdk-dropped"):
        TrajectoryMatch(mode="exact").compute({"output": trace, "expected": []}, PLAIN_CTX)
    with pytest.raises(ScorerInputError, match="OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"):
        TraceBudget(max_tool_calls=0).compute({"output": trace}, PLAIN_CTX)


def test_log_events_past_the_limit_are_flagged_on_their_span() -> None:
    # a long agent loop's last model call: over 100 input messages as events, then its choice
    from pytest_llmeval.core.trace_conventions import SpanEvent

    router = SpanRouter()
    a = rec("a")
    trace = router.open(a, "t.py::a", TraceLimits(max_items=3))
    start_in(a, router, "chat", None, "T")
    for i in range(3):
        router.event("chat", SpanEvent("gen_ai.user.message", {"content": f"m{i}"}))
    router.event("chat", SpanEvent("gen_ai.choice", {"message": {"content": "ok"}}))
    router.ended(
        "chat",
        lambda: RawSpan(
            name="chat",
            span_id="chat",
            parent_id=None,
            trace_id="T",
            start_ns=1,
            end_ns=2,
            attributes={"gen_ai.operation.name": "chat"},
        ),
    )
    router.close(trace)
    (span,) = trace.spans
    assert "events-dropped:1" in span.flags


def test_a_provider_replaced_test_by_test_is_not_kept_alive(
    provider: object, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    # a project's fixture that sets a fresh provider (and in-memory exporter) for each test:
    # the capture adds its processor to each, and must not keep them (and their spans) alive
    # (made without the SDK's own atexit hook, which would keep them alive by itself)
    import gc
    import weakref

    from opentelemetry import trace as api
    from opentelemetry.sdk.trace import TracerProvider

    from pytest_llmeval.plugin import trace_capture

    refs = []
    for _ in range(3):
        fresh = TracerProvider(shutdown_on_exit=False)
        monkeypatch.setattr(api, "get_tracer_provider", lambda fresh=fresh: fresh)
        trace_capture._attach_otel(pytestconfig)
        refs.append(weakref.ref(fresh))
        del fresh
    monkeypatch.undo()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def _one_tool_span(provider: object, status: object, error_type: str | None, event: bool) -> object:
    """A captured trace of one tool run ending with ``status``, ``error.type`` and an event."""
    from pytest_llmeval.plugin.trace_capture import router

    tracer = provider.get_tracer("t")  # type: ignore[attr-defined]
    a = rec("a")
    trace = router().open(a, "t.py::a", LIMITS)
    token = current_recorder.set(a)
    try:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
        with tracer.start_as_current_span("execute_tool lookup", attributes=attributes) as span:
            if error_type is not None:
                span.set_attribute("error.type", error_type)
            if event:
                span.add_event("exception", {"exception.message": "no such city"})
            if status is not None:
                span.set_status(status)
    finally:
        current_recorder.reset(token)
        router().close(trace)
    return trace


def test_a_tool_span_with_error_type_and_unset_status_is_a_tool_error(provider: object) -> None:
    # the GenAI conventions mark a failed operation with error.type; the status may stay UNSET
    from scorer_properties import PLAIN_CTX

    from pytest_llmeval.scorers.trajectory import TraceBudget, TrajectoryMatch

    trace = _one_tool_span(provider, None, "KeyError", event=True)
    (tool,) = trace.spans  # type: ignore[attr-defined]
    assert (tool.kind, tool.error) == ("tool", "KeyError: no such city")
    budget = TraceBudget(max_tool_errors=0).compute({"output": trace}, PLAIN_CTX)
    assert budget.value == 0.0 and "tool errors 1 > max 0" in budget.rationale
    expected = [{"name": "lookup"}]
    got = TrajectoryMatch(mode="exact").compute({"output": trace, "expected": expected}, PLAIN_CTX)
    assert got.value == 0.0
    allowed = TrajectoryMatch(mode="exact", allow_tool_errors=True)
    assert allowed.compute({"output": trace, "expected": expected}, PLAIN_CTX).value == 1.0
    (bare,) = _one_tool_span(provider, None, "TimeoutError", event=False).spans  # type: ignore[attr-defined]
    assert bare.error == "TimeoutError"


def test_error_type_under_an_explicit_ok_status_and_a_handled_exception_are_not_errors(
    provider: object,
) -> None:
    # an explicit OK is the instrumentation's final word; an "exception" event alone (status
    # UNSET, no error.type) is an exception the code handled (OpenTelemetry's reading)
    from opentelemetry.trace import Status, StatusCode
    from scorer_properties import PLAIN_CTX

    from pytest_llmeval.scorers.trajectory import TraceBudget

    ok = _one_tool_span(provider, Status(StatusCode.OK), "KeyError", event=True)
    handled = _one_tool_span(provider, None, None, event=True)
    for trace in (ok, handled):
        (tool,) = trace.spans  # type: ignore[attr-defined]
        assert tool.kind == "tool" and tool.error is None
        assert TraceBudget(max_tool_errors=0).compute({"output": trace}, PLAIN_CTX).value == 1.0
    failed = _one_tool_span(provider, Status(StatusCode.ERROR), "KeyError", event=True)
    assert failed.spans[0].error == "no such city"  # type: ignore[attr-defined]
