"""Assertions on an agent's trace: no judge, no network, run with `pytest --llm-eval`.

`weather_agent` stands in for an instrumented agent (pydantic-ai with `agent.instrument = True`, the
OpenAI Agents SDK, LangGraph through OpenInference...): as it works it emits OpenTelemetry
spans in the GenAI semantic conventions, one for the agent run, one per model call (model,
messages, tokens) and one per tool run (name, arguments, result). The `llm_eval_trace` fixture
captures them in memory and the scorers assert on the trajectory. Needs the `otel` extra.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_llmeval import assert_score

trace_api = pytest.importorskip(
    "opentelemetry.trace", reason="pip install 'pytest-llmeval-suite[otel]'"
)

pytestmark = pytest.mark.llm_eval

FORECASTS = {"Paris": "sunny", "Rome": "cloudy", "Oslo": "snow"}


def get_weather(city: str) -> dict[str, Any]:
    if city not in FORECASTS:
        raise LookupError(f"no forecast for {city}")
    return {"city": city, "forecast": FORECASTS[city]}


def _chat(tracer: Any, request: str, calls: list[dict[str, Any]], text: str | None) -> None:
    """One (scripted) model call, recorded as the GenAI instrumentations record it."""
    parts: list[dict[str, Any]] = [
        {"type": "tool_call", "id": f"call_{i}", "name": c["name"], "arguments": c["arguments"]}
        for i, c in enumerate(calls)
    ]
    if text is not None:
        parts.append({"type": "text", "content": text})
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
        span.set_attribute("gen_ai.usage.input_tokens", 120)
        span.set_attribute("gen_ai.usage.output_tokens", 15)
        span.set_attribute(
            "gen_ai.input.messages",
            json.dumps([{"role": "user", "parts": [{"type": "text", "content": request}]}]),
        )
        span.set_attribute(
            "gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}])
        )


def weather_agent(request: str) -> str:
    """A scripted agent: one get_weather call per city named, then an answer."""
    tracer = trace_api.get_tracer("weather-agent")
    cities = [c for c in FORECASTS if c in request]
    calls: list[dict[str, Any]] = [
        {"name": "get_weather", "arguments": {"city": c}} for c in cities
    ]
    with tracer.start_as_current_span("invoke_agent weather") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.agent.name", "weather")
        _chat(tracer, request, calls, None)
        found = []
        for i, call in enumerate(calls):
            with tracer.start_as_current_span("execute_tool get_weather") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "get_weather")
                span.set_attribute("gen_ai.tool.call.id", f"call_{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(call["arguments"]))
                result = get_weather(**call["arguments"])
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
                found.append(f"{result['forecast']} in {result['city']}")
        answer = "It is " + " and ".join(found) + "."
        _chat(tracer, request, [], answer)
    return answer


def test_the_agent_calls_the_weather_tool_once_per_city(llm_eval_trace: Any) -> None:
    assert weather_agent("Weather in Paris and Rome?") == "It is sunny in Paris and cloudy in Rome."
    assert llm_eval_trace.tool_names == ("get_weather", "get_weather")
    # the exact trajectory: these calls, in this order, with these arguments
    assert_score(
        "trajectory_match",
        output=llm_eval_trace,
        expected=[
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"city": "Rome"}},
        ],
        min=1,
    )
    # or looser: both cities, any order
    assert_score(
        "trajectory_match",
        output=llm_eval_trace,
        mode="any_order",
        expected=[
            {"name": "get_weather", "arguments": {"city": "Rome"}},
            {"name": "get_weather", "arguments": {"city": "Paris"}},
        ],
        min=1,
    )
    # the agent scorers take the trace too
    assert_score("tool_correctness", output=llm_eval_trace, expected=["get_weather"], min=1)


def test_the_agent_stays_within_budget(llm_eval_trace: Any) -> None:
    weather_agent("Weather in Oslo?")
    assert_score(
        "trace_budget",
        output=llm_eval_trace,
        max_tool_calls=2,
        max_model_calls=2,
        max_total_tokens=1_000,
        max_cost_usd=0.001,  # gpt-4o-mini from the built-in price table
        max_tool_errors=0,
        min=1,
    )
    # one quantity as a lower-is-better score: a threshold is a maximum
    assert_score("trace_usage", output=llm_eval_trace, measure="total_tokens", threshold=1_000)
