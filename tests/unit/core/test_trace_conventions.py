"""Spans of each convention agents emit, summarised: kinds, calls, messages, tokens, bounds."""

from __future__ import annotations

import json

import pytest

from pytest_llmeval.core.trace import AgentStep, ModelCall, Span, ToolCall, TraceLimits
from pytest_llmeval.core.trace_conventions import (
    RawSpan,
    SpanEvent,
    raw_from_agents_export,
    summarise,
)


def raw(name: str = "s", attrs: dict[str, object] | None = None, **kw: object) -> RawSpan:
    base: dict[str, object] = dict(
        name=name,
        span_id="a1",
        parent_id=None,
        trace_id="t1",
        start_ns=1_000_000_000,
        end_ns=1_250_000_000,
        attributes=attrs or {},
    )
    base.update(kw)
    return RawSpan(**base)  # type: ignore[arg-type]


# -- OpenTelemetry GenAI ---------------------------------------------------------------------------


def test_current_gen_ai_chat_span_gives_model_call_with_parts_messages() -> None:
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}],
        },
    ]
    outputs = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Sunny."}],
            "finish_reason": "stop",
        }
    ]
    span = summarise(
        raw(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024",
                "gen_ai.usage.input_tokens": 31,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": "Be brief."}]
                ),
                "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps(outputs),
            },
        )
    )
    assert span.kind == "model" and span.source == "gen_ai"
    call = span.detail
    assert isinstance(call, ModelCall)
    assert (call.model, call.response_model, call.provider) == ("gpt-4o", "gpt-4o-2024", "openai")
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (31, 7, 38)
    assert call.finish_reasons == ("stop",)
    assert call.duration_s == pytest.approx(0.25)
    assert list(call.input_messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    assert list(call.output_messages) == [
        {"role": "assistant", "content": "Sunny.", "finish_reason": "stop"}
    ]
    # the message payloads are kept once, parsed: not again among the attributes
    assert "gen_ai.input.messages" not in span.attributes
    assert span.attributes["gen_ai.request.model"] == "gpt-4o"
    assert span.flags == ()


def test_older_flattened_gen_ai_prompt_and_completion_attributes() -> None:
    span = summarise(
        raw(
            "openai.chat",
            {
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.prompt_tokens": 12,
                "gen_ai.usage.completion_tokens": 5,
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "2+2?",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.finish_reason": "tool_calls",
                "gen_ai.completion.0.tool_calls.0.id": "c9",
                "gen_ai.completion.0.tool_calls.0.name": "add",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"a": 2, "b": 2}',
            },
        )
    )
    call = span.detail
    assert isinstance(call, ModelCall)
    assert (call.model, call.provider, call.input_tokens, call.output_tokens) == (
        "gpt-4o-mini",
        "openai",
        12,
        5,
    )
    assert list(call.input_messages) == [{"role": "user", "content": "2+2?"}]
    assert list(call.output_messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c9", "name": "add", "arguments": {"a": 2, "b": 2}}],
            "finish_reason": "tool_calls",
        }
    ]
    assert call.requested_tools == ("add",)


def test_gen_ai_messages_read_from_span_events() -> None:
    span = summarise(
        raw(
            "chat m",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
            events=(
                SpanEvent("gen_ai.system.message", {"content": "sys"}),
                SpanEvent("gen_ai.user.message", {"content": "hi"}),
                SpanEvent(
                    "gen_ai.choice",
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": json.dumps({"role": "assistant", "content": "hello"}),
                    },
                ),
            ),
        )
    )
    call = span.detail
    assert isinstance(call, ModelCall)
    assert list(call.input_messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert list(call.output_messages) == [
        {"role": "assistant", "content": "hello", "finish_reason": "stop"}
    ]


def test_operation_details_event_carries_current_messages() -> None:
    span = summarise(
        raw(
            "chat m",
            {"gen_ai.operation.name": "chat"},
            events=(
                SpanEvent(
                    "gen_ai.client.inference.operation.details",
                    {
                        "gen_ai.input.messages": json.dumps(
                            [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
                        )
                    },
                ),
            ),
        )
    )
    assert isinstance(span.detail, ModelCall)
    assert list(span.detail.input_messages) == [{"role": "user", "content": "q"}]


def test_gen_ai_execute_tool_span_parses_arguments_and_result() -> None:
    span = summarise(
        raw(
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": '{"temp": 21}',
            },
        )
    )
    tool = span.detail
    assert span.kind == "tool"
    assert tool == ToolCall(
        span_id="a1",
        name="get_weather",
        arguments={"city": "Paris"},
        arguments_raw='{"city": "Paris"}',
        result={"temp": 21},
        call_id="call_1",
        duration_s=0.25,
        error=None,
    )


def test_pydantic_ai_older_tool_attribute_names() -> None:
    span = summarise(
        raw(
            "running tool",
            {"gen_ai.tool.name": "lookup", "tool_arguments": '{"q": 1}', "tool_response": "found"},
        )
    )
    assert isinstance(span.detail, ToolCall)
    assert (span.detail.name, span.detail.arguments, span.detail.result) == (
        "lookup",
        {"q": 1},
        "found",
    )


def test_invoke_agent_span_is_an_agent_step() -> None:
    span = summarise(
        raw(
            "invoke_agent weather",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"},
        )
    )
    assert span.kind == "agent"
    assert span.detail == AgentStep(span_id="a1", name="weather", kind="agent", duration_s=0.25)


# -- OpenInference ---------------------------------------------------------------------------------


def test_openinference_llm_span_with_flattened_messages_and_tool_calls() -> None:
    p = "llm.output_messages.0.message"
    span = summarise(
        raw(
            "ChatOpenAI",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o",
                "llm.provider": "openai",
                "llm.token_count.prompt": 40,
                "llm.token_count.completion": 9,
                "llm.token_count.total": 49,
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "You help.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "Paris?",
                f"{p}.role": "assistant",
                f"{p}.tool_calls.0.tool_call.id": "call_7",
                f"{p}.tool_calls.0.tool_call.function.name": "get_weather",
                f"{p}.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
            },
        )
    )
    call = span.detail
    assert span.source == "openinference"
    assert isinstance(call, ModelCall)
    assert (call.model, call.provider, call.input_tokens, call.output_tokens) == (
        "gpt-4o",
        "openai",
        40,
        9,
    )
    assert [m["role"] for m in call.input_messages] == ["system", "user"]
    assert call.input_messages[1]["content"] == "Paris?"
    assert list(call.output_messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_7", "name": "get_weather", "arguments": {"city": "Paris"}}],
        }
    ]


def test_openinference_tool_and_chain_spans() -> None:
    tool = summarise(
        raw(
            "get_weather",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "input.value": '{"city": "Paris"}',
                "output.value": "sunny",
            },
        )
    )
    assert isinstance(tool.detail, ToolCall)
    assert (tool.detail.name, tool.detail.arguments, tool.detail.result) == (
        "get_weather",
        {"city": "Paris"},
        "sunny",
    )
    chain = summarise(raw("LangGraph", {"openinference.span.kind": "CHAIN"}))
    assert (chain.kind, chain.source, chain.detail) == ("chain", "openinference", None)


# -- the OpenAI Agents SDK -------------------------------------------------------------------------


def test_agents_sdk_function_generation_handoff_spans() -> None:
    def export(data: dict[str, object], **kw: object) -> dict[str, object]:
        base: dict[str, object] = {
            "object": "trace.span",
            "id": "span_1",
            "trace_id": "trace_1",
            "parent_id": "span_0",
            "started_at": "2026-11-26T10:00:00.000000+00:00",
            "ended_at": "2026-11-26T10:00:00.500000+00:00",
            "span_data": data,
            "error": None,
        }
        base.update(kw)
        return base

    fn = summarise(
        raw_from_agents_export(
            export({"type": "function", "name": "add", "input": '{"a":1}', "output": "2"})
        )
    )
    assert fn.kind == "tool" and fn.source == "openai_agents" and fn.parent_id == "span_0"
    assert isinstance(fn.detail, ToolCall)
    assert (fn.detail.name, fn.detail.arguments, fn.detail.result) == ("add", {"a": 1}, 2)
    assert fn.duration_s == pytest.approx(0.5)
    gen = summarise(
        raw_from_agents_export(
            export(
                {
                    "type": "generation",
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "hi"}],
                    "output": [
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "add", "arguments": '{"a":1}'},
                                }
                            ],
                        }
                    ],
                    "usage": {"input_tokens": 10, "output_tokens": 3},
                }
            )
        )
    )
    assert isinstance(gen.detail, ModelCall)
    assert (gen.detail.model, gen.detail.input_tokens, gen.detail.output_tokens) == (
        "gpt-4o",
        10,
        3,
    )
    assert gen.detail.requested_tools == ("add",)
    hand = summarise(
        raw_from_agents_export(
            export({"type": "handoff", "from_agent": "triage", "to_agent": "billing"})
        )
    )
    assert hand.detail == AgentStep(
        span_id="span_1",
        name="triage -> billing",
        kind="handoff",
        from_agent="triage",
        to_agent="billing",
        duration_s=0.5,
    )
    failed = summarise(
        raw_from_agents_export(
            export(
                {"type": "function", "name": "boom", "input": "{}", "output": None},
                error={"message": "Error running tool", "data": {"error": "bad"}},
            )
        )
    )
    assert failed.error == 'Error running tool: {"error": "bad"}'
    assert isinstance(failed.detail, ToolCall) and failed.detail.error == failed.error


# -- unknown and malformed -------------------------------------------------------------------------


def test_unknown_span_is_kept_generic_with_its_attributes() -> None:
    span = summarise(raw("db.query", {"db.system": "sqlite", "rows": 3}))
    assert (span.kind, span.source, span.detail) == ("span", "unknown", None)
    assert dict(span.attributes) == {"db.system": "sqlite", "rows": 3}


def test_non_json_arguments_are_kept_as_text_and_flagged() -> None:
    span = summarise(
        raw(
            "t",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f",
                "gen_ai.tool.call.arguments": "{city: Paris",
            },
        )
    )
    assert isinstance(span.detail, ToolCall)
    assert span.detail.arguments == "{city: Paris"
    assert span.flags == ("arguments-not-json",)


def test_huge_payloads_are_cut_and_flagged() -> None:
    limits = TraceLimits(max_chars=100, max_json_chars=1_000, max_attributes=3)
    huge = json.dumps({"blob": "x" * 5_000})
    attrs: dict[str, object] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "f",
        "gen_ai.tool.call.arguments": huge,
        "gen_ai.tool.call.result": "y" * 500,
        "extra.1": 1,
        "extra.2": 2,
    }
    span = summarise(raw("t", attrs), limits)
    assert isinstance(span.detail, ToolCall)
    cut = huge[:100] + "…[cut: 4912 more chars]"
    assert span.detail.arguments == cut  # too large to parse: the text, cut
    assert span.detail.arguments_raw == cut
    assert span.detail.result == "y" * 100 + "…[cut: 400 more chars]"
    assert "too-large:arguments" in span.flags
    assert "truncated:result" in span.flags
    assert len(span.attributes) == 3
    assert "attributes-dropped:3" in span.flags


def test_malformed_message_attributes_never_raise() -> None:
    span = summarise(
        raw(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": "[not json",
                "gen_ai.output.messages": json.dumps({"role": "assistant"}),
                "gen_ai.usage.input_tokens": "many",
            },
        )
    )
    call = span.detail
    assert isinstance(call, ModelCall)
    assert (call.input_messages, call.output_messages, call.input_tokens) == ((), (), None)
    assert set(span.flags) == {
        "messages-not-json:gen_ai.input.messages",
        "bad-message:gen_ai.output.messages",
        "not-a-count:gen_ai.usage.input_tokens",
    }


def test_bad_limits_are_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match=r"TraceLimits.max_chars must be a whole number >= 1, got 0"
    ):
        TraceLimits(max_chars=0)


def test_current_form_messages_are_bounded_per_content_and_count() -> None:
    limits = TraceLimits(max_chars=10, max_items=3)
    many = [{"role": "user", "parts": [{"type": "text", "content": "z" * 50}]}] * 7
    span = summarise(
        raw(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "s" * 50}]),
                "gen_ai.input.messages": json.dumps(many),
            },
        ),
        limits,
    )
    call = span.detail
    assert isinstance(call, ModelCall)
    assert list(call.input_messages) == [
        {"role": "system", "content": "s" * 10 + "…[cut: 40 more chars]"},
        {"role": "user", "content": "z" * 10 + "…[cut: 40 more chars]"},
        {"role": "user", "content": "z" * 10 + "…[cut: 40 more chars]"},
    ]
    assert set(span.flags) == {
        "truncated:system_instructions",
        "truncated:gen_ai.input.messages",
        "truncated:input",
    }


def test_traceloop_tool_agent_and_workflow_spans() -> None:
    tool = summarise(
        raw(
            "get_weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": '{"city": "Paris"}',
                "traceloop.entity.output": '"sunny"',
            },
        )
    )
    assert (tool.kind, tool.source) == ("tool", "traceloop")
    assert isinstance(tool.detail, ToolCall)
    assert (tool.detail.name, tool.detail.arguments, tool.detail.result) == (
        "get_weather",
        {"city": "Paris"},
        "sunny",
    )
    agent = summarise(raw("a", {"traceloop.span.kind": "agent", "traceloop.entity.name": "triage"}))
    assert isinstance(agent.detail, AgentStep) and agent.detail.name == "triage"
    flow = summarise(raw("w", {"traceloop.span.kind": "workflow"}))
    assert (flow.kind, flow.detail) == ("chain", None)


def test_a_span_whose_reader_breaks_is_kept_generic_and_flagged() -> None:
    class Weird(dict):  # type: ignore[type-arg]
        def get(self, *a: object) -> object:
            raise RuntimeError("boom")

    span = summarise(raw("odd", Weird({"gen_ai.operation.name": "chat"})))
    assert (span.kind, span.source, span.detail) == ("span", "unknown", None)
    assert "unreadable:RuntimeError" in span.flags


def test_a_cut_value_never_equals_the_real_value_it_was_cut_from() -> None:
    # a trace's values are compared with expected ones (arguments exact, results, messages):
    # what is left of a cut value must not pass for a shorter real one
    limits = TraceLimits(max_chars=10, max_items=3)
    arguments = {"sql": "select 1 -- then drop table users", "ids": [1, 2, 3, 4, 5]}
    tool = summarise(
        raw(
            "t",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f",
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": "all rows deleted, 10,000 of them",
            },
        ),
        limits,
    )
    call = tool.detail
    assert isinstance(call, ToolCall)
    assert call.arguments["sql"] != "select 1 -"
    assert str(call.arguments["sql"]).startswith("select 1 -")
    assert call.arguments["ids"] != [1, 2, 3]
    assert call.result != "all rows d"
    assert call.arguments_raw != json.dumps(arguments)[:10]
    chat = summarise(
        raw(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "z" * 50}]}] * 7
                ),
            },
        ),
        limits,
    )
    model = chat.detail
    assert isinstance(model, ModelCall)
    assert model.input_messages[0]["content"] != "z" * 10
    assert list(model.input_messages) != [{"role": "user", "content": "z" * 50}] * 3


def test_a_value_that_cannot_be_shown_keeps_its_span_flagged() -> None:
    # the Agents SDK's custom spans export the user's own objects as they are
    class Opaque:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    span = summarise(
        raw_from_agents_export(
            {"id": "s", "trace_id": "t", "span_data": {"type": "custom", "data": {"x": Opaque()}}}
        )
    )
    assert span.kind == "span"
    assert any(f.startswith("unreadable") for f in span.flags)


@pytest.mark.parametrize("bad", [-100_000, -1.0, "-5", "9" * 5_000, "²", float("nan"), True])
def test_a_token_count_that_is_no_count_is_flagged_and_the_call_kept(bad: object) -> None:
    # a negative count took tokens off the trace's total (a tokens budget passed); a count
    # no int() reads made the whole model call a generic span (gone from model_calls)
    span = summarise(
        raw(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": bad,
                "gen_ai.usage.output_tokens": 7,
            },
        )
    )
    assert span.kind == "model"
    call = span.detail
    assert isinstance(call, ModelCall)
    assert (call.input_tokens, call.output_tokens) == (None, 7)
    assert "not-a-count:gen_ai.usage.input_tokens" in span.flags
    agents = summarise(
        raw_from_agents_export(
            {
                "id": "g",
                "trace_id": "t",
                "span_data": {"type": "generation", "usage": {"input_tokens": bad}},
            }
        )
    )
    assert isinstance(agents.detail, ModelCall)
    assert agents.detail.input_tokens is None


def test_secrets_in_span_attributes_and_errors_are_not_kept() -> None:
    # HTTP instrumentation records the URL whole (Gemini's ?key=), header capture the
    # Authorization header; a span's attributes are shown (assertion messages) and stored
    span = summarise(
        raw(
            "GET",
            {
                "url.full": "https://generativelanguage.googleapis.com/v1/models?key=AIzaSyTopSecret1",
                "http.request.header.authorization": ("Bearer sk-proj-TopSecretTopSecret2",),
                "app.config": '{"endpoint": "https://bob:TopSecret3@proxy.internal:8080/v1"}',
                "server.address": "generativelanguage.googleapis.com",
            },
            error="connection refused by https://bob:TopSecret4@proxy.internal:8080/v1",
        )
    )
    shown = repr(span)
    assert "TopSecret" not in shown
    assert span.attributes["server.address"] == "generativelanguage.googleapis.com"
    assert "generativelanguage.googleapis.com/v1/models" in str(span.attributes["url.full"])
    assert span.error is not None and "proxy.internal:8080" in span.error
    tool = summarise(
        raw(
            "execute_tool fetch",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"},
            error="401 from https://api.example.com/v1?api_key=TopSecret5",
        )
    )
    assert isinstance(tool.detail, ToolCall)
    assert "TopSecret" not in str(tool.detail.error)


@pytest.mark.parametrize(
    ("prefix", "attrs"),
    [
        (
            "llm.input_messages",
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.2.message.role": "user",
                "llm.input_messages.2.message.content": "third",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "first",
            },
        ),
        (
            "gen_ai.prompt",
            {
                "gen_ai.system": "openai",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": "second",
                "gen_ai.prompt.3.role": "user",
                "gen_ai.prompt.3.content": "fourth",
            },
        ),
    ],
)
def test_flattened_messages_read_in_index_order_and_a_missing_index_is_flagged(
    prefix: str, attrs: dict[str, object]
) -> None:
    span = summarise(raw("chat", attrs))
    call = span.detail
    assert isinstance(call, ModelCall)
    assert len(call.input_messages) == 2  # in index order, none invented
    assert [m["content"] for m in call.input_messages] == [
        str(attrs[k]) for k in sorted(attrs, key=lambda k: k.split(".")) if "content" in k
    ]
    assert f"gap:{prefix}" in span.flags  # a message the span does not hold: not a whole list


def test_response_items_that_are_not_messages_are_flagged_unless_reasoning() -> None:
    # a Responses API output of a built-in tool's call (web search) is no message and no
    # function call: left out, flagged (the model may have acted in a way not read)
    def response(output: list[dict[str, object]]) -> Span:
        return summarise(
            raw_from_agents_export(
                {
                    "id": "s",
                    "trace_id": "t",
                    "span_data": {"type": "response", "model": "m", "output": output},
                }
            )
        )

    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "x"}],
    }
    plain = response([{"type": "reasoning", "summary": []}, said])
    assert plain.flags == () and plain.detail.output_messages == (
        {"role": "assistant", "content": "x"},
    )
    searched = response([{"type": "web_search_call", "id": "w", "status": "completed"}, said])
    assert searched.flags == ("item-not-read:openai_agents.output",)
    assert len(searched.detail.output_messages) == 1
