"""Assertions on a captured trace through real pytest runs (issue 21, part 3): an agent that emits
GenAI spans in-process, captured by ``llm_eval_trace`` under ``--llm-eval``, asserted with
``trajectory_match``, ``trace_budget`` and the judged ``task_completion`` (against the project's
test server); the result cache across runs: the same trajectory again is a hit, a trajectory
that differs in one tool argument is a miss and a new judgement. Each run is a subprocess (the
capture installs a process-wide tracer provider)."""

from __future__ import annotations

import pytest
from paths import ROOT

from pytest_llmeval.testing import OpenAITestServer, text, tool_call

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pinned in the dev extra)")

AGENT = """
import json
import os

from opentelemetry import trace as trace_api
from pytest_llmeval import assert_score

CITY = os.environ["AGENT_CITY"]


def agent():
    tracer = trace_api.get_tracer("agent")
    args = {"city": CITY}
    with tracer.start_as_current_span("invoke_agent weather") as span:
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        span.set_attribute("gen_ai.agent.name", "weather")
        with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", "gpt-4o-mini")
            chat.set_attribute("gen_ai.usage.input_tokens", 50)
            chat.set_attribute("gen_ai.usage.output_tokens", 10)
            chat.set_attribute("gen_ai.input.messages", json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Weather?"}]}]))
            chat.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                           "arguments": args}]}]))
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "get_weather")
            tool.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
            tool.set_attribute("gen_ai.tool.call.result", json.dumps({"forecast": "sunny"}))


def test_agent(llm_eval_trace):
    agent()
    assert_score("trajectory_match", output=llm_eval_trace, mode="in_order",
                 expected=[{"name": "get_weather", "arguments": {"city": "Paris"}}], min=1)


def test_agent_budget(llm_eval_trace):
    agent()
    assert_score("trace_budget", output=llm_eval_trace, max_tool_calls=1,
                 max_total_tokens=60, max_cost_usd=0.0001, max_tool_errors=0, min=1)
    assert_score("trace_budget", output=llm_eval_trace, max_total_tokens=59, min=1)


def test_agent_judged(llm_eval_trace):
    agent()
    assert_score("task_completion", output=llm_eval_trace, min=1)


def test_nothing_captured(llm_eval_trace):
    assert_score("trajectory_match", output=llm_eval_trace, expected=[], min=1)
"""


def _setup(pytester: pytest.Pytester, server: OpenAITestServer) -> None:
    pytester.makepyfile(test_agent=AGENT)
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the subprocess imports this checkout's package, whichever one is installed
    pytester._monkeypatch.setenv("PYTHONPATH", str(ROOT))


def _run(pytester: pytest.Pytester, city: str) -> pytest.RunResult:
    pytester._monkeypatch.setenv("AGENT_CITY", city)
    return pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-rA")


def test_trace_assertions_their_failures_and_the_cache_across_runs(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _setup(pytester, judge_server)
    judge_server.set_default(tool_call({"reasons": "the weather was looked up", "choice": "A"}))
    first = _run(pytester, "Paris")
    # the budget test fails on its second, tighter budget; the empty trace is an ERROR
    first.assert_outcomes(passed=2, failed=1, errors=1)
    first.stdout.fnmatch_lines(
        [
            "*trace_budget score 0 is not >= 1*",
            "*over budget: total tokens 60 > max 59 (+1)*",
            "*'trajectory_match': input 'output' is a trace with no spans*instrumentation seems"
            " missing*",
        ]
    )
    assert len(judge_server.requests_to("chat")) == 1

    # the same trajectory again: the judge's verdict is read from the cache
    again = _run(pytester, "Paris")
    again.assert_outcomes(passed=2, failed=1, errors=1)
    assert len(judge_server.requests_to("chat")) == 1

    # one tool argument differs: trajectory_match fails, the judge is asked again
    judge_server.set_default(tool_call({"reasons": "wrong city", "choice": "C"}))
    changed = _run(pytester, "Rome")
    changed.assert_outcomes(passed=0, failed=3, errors=1)
    changed.stdout.fnmatch_lines(
        [
            "*trajectory_match score 0 is not >= 1*",
            "*task_completion score 0 is not >= 1*",
        ]
    )
    assert len(judge_server.requests_to("chat")) == 2
    assert "Rome" in judge_server.requests_to("chat")[-1].body["messages"][0]["content"]


PYDANTIC_AI = """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pytest_llmeval import assert_score, score


def test_agent(llm_eval_trace):
    model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=BASE_URL, api_key="t"))
    agent = Agent(model, name="weather")
    agent.instrument = True

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {"city": city, "forecast": "sunny"}

    assert agent.run_sync("Weather in Paris?").output == "It is sunny in Paris."
    trace = llm_eval_trace
    expected = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    # the trace itself, no conversion
    assert_score("trajectory_match", output=trace, expected=expected, min=1)
    assert_score("tool_call_accuracy", output=trace, expected=expected, min=1)
    assert_score("tool_correctness", output=trace, expected=["get_weather"], min=1)
    assert score("trajectory_match", output=trace,
                 expected=[{"name": "get_weather", "arguments": {"city": "Rome"}}]).value == 0
    # 50 + 10 and 70 + 8 tokens over two model calls; gpt-test priced by the scorer
    assert_score("trace_budget", output=trace, max_model_calls=2, max_tool_calls=1,
                 max_total_tokens=138, max_tool_errors=0, max_cost_usd=138e-6,
                 prices={"gpt-test": (1.0, 1.0)}, min=1)
    assert score("trace_budget", output=trace, max_total_tokens=137).value == 0
    assert score("trace_usage", output=trace, measure="total_tokens").value == 138
"""


def test_a_pydantic_ai_agent_asserted_from_its_trace(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("pydantic_ai")
    judge_server.enqueue(
        tool_call({"city": "Paris"}, name="get_weather", usage=(50, 10)),
        text("It is sunny in Paris.", usage=(70, 8)),
    )
    pytester.makepyfile(test_agent=PYDANTIC_AI.replace("BASE_URL", repr(judge_server.base_url)))
    pytester._monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
