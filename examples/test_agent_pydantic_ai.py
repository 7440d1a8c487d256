"""A real pydantic-ai agent, asserted from the spans it emits (run with `pytest --llm-eval`).

The agent is pydantic-ai's own `Agent` with a tool and `instrument = True`: it emits
OpenTelemetry spans in the GenAI semantic conventions, which `llm_eval_trace` captures in
memory. Its model is an OpenAI-compatible endpoint: here the scripted server that ships with
pytest-llmeval (`pytest_llmeval.testing`), started on 127.0.0.1 and told what the model answers
(first a `get_weather` call, then the answer), so the example needs no API key and no network.
Point `base_url` at your provider and drop the script to test your agent against a real model.
Needs the `otel` extra and `pydantic-ai-slim[openai]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmeval import Trace, assert_score
from pytest_llmeval.testing import OpenAITestServer, text, tool_call

pytest.importorskip("opentelemetry.sdk.trace", reason="pip install 'pytest-llmeval-suite[otel]'")
pydantic_ai = pytest.importorskip("pydantic_ai", reason="pip install 'pydantic-ai-slim[openai]'")

pytestmark = pytest.mark.llm_eval

FORECASTS = {"Paris": "sunny", "Oslo": "snow"}


@pytest.fixture
def model_server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer(model="gpt-4o-mini") as server:
        yield server


def weather_agent(base_url: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(
        "gpt-4o-mini", provider=OpenAIProvider(base_url=base_url, api_key="not-needed")
    )
    agent = Agent(model, name="weather", system_prompt="Answer with the forecast.")
    agent.instrument = True  # pydantic-ai's OpenTelemetry spans, GenAI conventions

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, str]:
        """Today's forecast for a city."""
        return {"city": city, "forecast": FORECASTS[city]}

    return agent


def test_the_agent_looks_up_the_weather_once_and_stays_in_budget(
    llm_eval_trace: Trace, model_server: OpenAITestServer
) -> None:
    model_server.enqueue(
        tool_call({"city": "Paris"}, name="get_weather", usage=(180, 20)),
        text("It is sunny in Paris.", usage=(230, 9)),
    )
    agent = weather_agent(model_server.base_url)
    answer = agent.run_sync("What is the weather in Paris?")
    assert answer.output == "It is sunny in Paris."

    # the trajectory, from the spans pydantic-ai emitted
    assert_score(
        "trajectory_match",
        output=llm_eval_trace,
        expected=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
        min=1,
    )
    assert_score(
        "trace_budget",
        output=llm_eval_trace,
        max_model_calls=2,
        max_tool_calls=1,
        max_total_tokens=500,
        max_tool_errors=0,
        min=1,
    )
    # the tool's own result, as the trace recorded it
    (call,) = llm_eval_trace.tool_calls
    assert call.result == {"city": "Paris", "forecast": "sunny"}
