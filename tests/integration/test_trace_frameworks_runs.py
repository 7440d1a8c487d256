"""Real agents, real instrumentation, through ``llm_eval_trace`` (issue 21, part 5): plain openai
with tools under the official OpenTelemetry GenAI instrumentation, a pydantic-ai agent with
instrumentation on, an OpenAI Agents SDK agent (its own tracing), and a LangGraph agent through
OpenInference's LangChain instrumentation. Each runs against the project's test server
scripted to call ``get_weather`` once and then answer, and each inner test asserts the exact
trajectory: tool names, arguments, results, call ids, model calls, tokens.

Every run is a pytest subprocess under ``--llm-eval`` (the plugin installs the tracer
provider; instrumentors patch process-wide state). Versions: the dev extra's pins."""

from __future__ import annotations

import json
from typing import Any

import pytest
from case_files import write_dataset

from pytest_llmeval.testing import ChatReply, OpenAITestServer, error, text, tool_call

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pinned in the dev extra)")

#: what every inner test checks of its trace, after the framework-specific lines
COMMON = """

def check_trajectory(trace, *, call_id="call_1", result=None):
    assert trace.tool_names == ("get_weather",), trace.render()
    (tool,) = trace.tool_calls
    assert tool.arguments == {"city": "Paris"}
    assert tool.result == (result if result is not None else {"city": "Paris", "forecast": "sunny"})
    assert tool.call_id == call_id
    assert tool.error is None
    first, second = trace.model_calls
    assert (first.model, second.model) == ("gpt-test", "gpt-test")
    assert (first.input_tokens, first.output_tokens) == (50, 10)
    assert (second.input_tokens, second.output_tokens) == (70, 8)
    assert trace.total_tokens == 138
    assert first.requested_tools == ("get_weather",)
    assert first.output_messages[-1]["tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert second.output_messages[-1]["content"] == "It is sunny in Paris."
    assert [m["role"] for m in second.input_messages][-3:] == ["user", "assistant", "tool"]
    # the tool ran between the two model calls, inside the run
    spans = {s.span_id: s for s in trace.spans}
    tool_span = spans[tool.span_id]
    assert spans[first.span_id].end_ns <= tool_span.start_ns <= spans[second.span_id].start_ns
    assert trace.errors == ()
"""


def _run(pytester: pytest.Pytester, server: OpenAITestServer, source: str) -> None:
    server.enqueue(
        tool_call({"city": "Paris"}, name="get_weather", usage=(50, 10)),
        text("It is sunny in Paris.", usage=(70, 8)),
    )
    pytester.makepyfile(test_agent=COMMON + source.replace("BASE_URL", repr(server.base_url)))
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # the agent really ran the tool and sent its result back
    first, second = (r.body for r in server.requests_to("chat"))
    assert first["messages"][-1]["content"] == "Weather in Paris?"
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "sunny" in tool_message["content"]


def test_plain_openai_with_tools_under_the_official_instrumentation(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("opentelemetry.instrumentation.genai.openai")
    _run(
        pytester,
        judge_server,
        """
import json
import pytest
from openai import OpenAI
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.util.genai.handler import TelemetryHandler

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


@pytest.fixture
def handler(monkeypatch):
    # content on the spans (the instrumentation records none by default)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield TelemetryHandler()
    instrumentor.uninstrument()


def test_agent(handler, llm_eval_trace):
    client = OpenAI(base_url=BASE_URL, api_key="test")
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with handler.invoke_local_agent(agent_name="weather", request_model="gpt-test"):
        while True:
            reply = client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                with handler.tool(call.function.name) as invocation:  # the tool's own span
                    invocation.tool_call_id = call.id
                    args = json.loads(call.function.arguments)
                    invocation.arguments = args
                    result = {"city": args["city"], "forecast": "sunny"}
                    invocation.tool_result = result
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )
    trace = llm_eval_trace
    check_trajectory(trace)
    assert [s.kind for s in trace.spans] == ["agent", "model", "tool", "model"]
    (agent,) = trace.agent_steps
    assert agent.name == "weather"
    assert {s.source for s in trace.spans} == {"gen_ai"}
    assert [c.provider for c in trace.model_calls] == ["openai", "openai"]
    assert trace.model_calls[0].finish_reasons == ("tool_calls",)
    assert len(trace.roots) == 1 and trace.roots[0].kind == "agent"
""",
    )


def test_pydantic_ai_agent_with_instrumentation(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("pydantic_ai")
    _run(
        pytester,
        judge_server,
        """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pytest_llmeval import assert_score
from pydantic_ai.providers.openai import OpenAIProvider


def test_agent(llm_eval_trace):
    model = OpenAIChatModel(
        "gpt-test", provider=OpenAIProvider(base_url=BASE_URL, api_key="test")
    )
    agent = Agent(model, name="weather")
    agent.instrument = True

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {"city": city, "forecast": "sunny"}

    assert agent.run_sync("Weather in Paris?").output == "It is sunny in Paris."
    trace = llm_eval_trace
    check_trajectory(trace)
    assert [s.kind for s in trace.spans] == ["agent", "model", "tool", "model"]
    assert [s.name for s in trace.spans] == [
        "invoke_agent weather", "chat gpt-test", "execute_tool get_weather", "chat gpt-test"
    ]
    assert trace.agent_steps[0].name == "weather"
    assert trace.find(kind="tool", attributes={"gen_ai.agent.name": "weather"})[0].name == (
        "execute_tool get_weather"
    )
    # the calls, as the agent scorers take them
    calls = [{"name": c.name, "arguments": c.arguments} for c in trace.tool_calls]
    got = assert_score(
        "tool_call_accuracy",
        output=calls,
        expected=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
        min=1,
    )
    assert got.value == 1.0
""",
    )


def test_openai_agents_sdk_agent_through_its_own_tracing(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("agents")
    _run(
        pytester,
        judge_server,
        """
from agents import Agent, Runner, function_tool, set_trace_processors
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

# export nothing (the default processor sends traces to OpenAI); before llm_eval_trace's setup,
# which adds its own processor
set_trace_processors([])


@function_tool
def get_weather(city: str) -> dict:
    \"\"\"Weather of a city.\"\"\"
    return {"city": city, "forecast": "sunny"}


def test_agent(llm_eval_trace):
    client = AsyncOpenAI(base_url=BASE_URL, api_key="test")
    agent = Agent(
        name="weather",
        instructions="Answer briefly.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model="gpt-test", openai_client=client),
    )
    assert Runner.run_sync(agent, "Weather in Paris?").final_output == "It is sunny in Paris."
    trace = llm_eval_trace
    # the SDK's function span records str(output) and no call id
    check_trajectory(trace, call_id=None, result="{'city': 'Paris', 'forecast': 'sunny'}")
    assert trace.agent_steps[0].name == "weather"
    assert {s.source for s in trace.spans} == {"openai_agents"}
    system = {"role": "system", "content": "Answer briefly."}
    assert trace.model_calls[0].input_messages[0] == system
    # the agent span holds the turns, the turns the generations and the tool
    (agent,) = trace.find(kind="agent")
    turns = trace.find("turn")
    assert [t.parent_id for t in turns] == [agent.span_id, agent.span_id]
    tool = trace.find(kind="tool")[0]
    assert trace.parent(tool) is not None and trace.parent(tool).name == "turn"
""",
    )


def test_langgraph_agent_through_openinference(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("langgraph")
    pytest.importorskip("openinference.instrumentation.langchain")
    _run(
        pytester,
        judge_server,
        """
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@tool
def get_weather(city: str) -> dict:
    \"\"\"Weather of a city.\"\"\"
    return {"city": city, "forecast": "sunny"}


@pytest.fixture
def instrumented():
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def test_agent(instrumented, llm_eval_trace):
    model = ChatOpenAI(model="gpt-test", base_url=BASE_URL, api_key="test")
    agent = create_react_agent(model, [get_weather], name="weather")
    result = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert result["messages"][-1].content == "It is sunny in Paris."
    trace = llm_eval_trace
    check_trajectory(trace)
    assert {s.source for s in trace.spans} == {"openinference"}
    # OpenInference keeps only the text of a one-argument tool's input: the arguments come
    # from the model's request with the same call id; the span's own text is kept and flagged
    (tool_span,) = trace.find(kind="tool")
    assert tool_span.detail.arguments == "Paris" and "arguments-not-json" in tool_span.flags
    assert trace.tool_calls[0].arguments_raw == "Paris"
    assert [s.name for s in trace.roots] == ["weather"]
    assert [s.kind for s in trace.roots] == ["chain"]
    assert [a.name for a in trace.agent_steps] == ["agent", "agent"]
    assert trace.count("model") == 2 and trace.count("tool") == 1
""",
    )


def test_openai_agents_sdk_handoff_and_a_failing_tool(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("agents")
    judge_server.enqueue(
        tool_call({}, name="transfer_to_billing", usage=(30, 5)),
        tool_call({"order": "42"}, name="refund", usage=(40, 6)),
        text("Order 42 was not found.", usage=(60, 7)),
    )
    pytester.makepyfile(
        test_handoff="""
from agents import Agent, Runner, function_tool, set_trace_processors
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

set_trace_processors([])


@function_tool
def refund(order: str) -> str:
    \"\"\"Refund an order.\"\"\"
    raise ValueError(f"order {order} not found")


def test_agent(llm_eval_trace):
    client = AsyncOpenAI(base_url=BASE_URL, api_key="test")
    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
    billing = Agent(name="billing", instructions="Refunds.", tools=[refund], model=model)
    triage = Agent(name="triage", instructions="Route.", handoffs=[billing], model=model)
    assert Runner.run_sync(triage, "Refund order 42").final_output == "Order 42 was not found."
    trace = llm_eval_trace
    (handoff,) = trace.handoffs
    assert (handoff.from_agent, handoff.to_agent, handoff.name) == (
        "triage", "billing", "triage -> billing"
    )
    assert [a.name for a in trace.agent_steps if a.kind == "agent"] == ["triage", "billing"]
    assert [c.requested_tools for c in trace.model_calls] == [
        ("transfer_to_billing",), ("refund",), ()
    ]
    (call,) = trace.tool_calls
    assert (call.name, call.arguments) == ("refund", {"order": "42"})
    assert call.error.startswith("Error running tool (non-fatal): ")
    assert [s.name for s in trace.errors] == ["refund"]
    assert (trace.input_tokens, trace.output_tokens) == (130, 18)
    # the refund ran under the billing agent, after the handoff
    (tool_span,) = trace.find(kind="tool")
    assert [s.name for s in trace.ancestors(tool_span)][:2] == ["turn", "billing"]
""".replace("BASE_URL", repr(judge_server.base_url)),
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert len(judge_server.requests_to("chat")) == 3


def _weather_reply(body: dict[str, Any]) -> ChatReply:
    """The server's answer to any weather agent: ask for the city's weather, then answer."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        city = json.loads(last["content"])["city"]
        return text(f"It is sunny in {city}.", usage=(70, 8))
    city = str(last["content"]).removeprefix("Weather in ").rstrip("?")
    return tool_call({"city": city}, name="get_weather", usage=(50, 10))


def test_pydantic_ai_agents_in_concurrent_cases_each_get_their_own_trajectory(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("pydantic_ai")
    judge_server.set_default(_weather_reply)
    judge_server.latency = 0.2  # every call takes a while: the cases' calls interleave
    cities = ["Paris", "Rome", "Oslo", "Lima"]
    write_dataset(pytester.path / "cities.jsonl", [{"id": c.lower(), "input": c} for c in cities])
    pytester.makepyfile(
        test_cities="""
import json
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=BASE_URL, api_key="test"))
agent = Agent(model, name="weather")
agent.instrument = True
IN_FLIGHT, MOST = set(), [0]


@agent.tool_plain
def get_weather(city: str) -> dict:
    return {"city": city, "forecast": "sunny"}


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cities.jsonl", concurrency=4)
async def test_city(case, llm_eval_trace):
    IN_FLIGHT.add(case.id)
    MOST[0] = max(MOST[0], len(IN_FLIGHT))
    result = await agent.run(f"Weather in {case.input}?")
    IN_FLIGHT.discard(case.id)
    assert result.output == f"It is sunny in {case.input}."
    trace = llm_eval_trace
    assert trace.tool_names == ("get_weather",), trace.render()
    assert trace.tool_calls[0].arguments == {"city": case.input}
    assert trace.tool_calls[0].result == {"city": case.input, "forecast": "sunny"}
    assert len(trace.model_calls) == 2 and trace.total_tokens == 138
    assert trace.model_calls[0].input_messages[-1]["content"] == f"Weather in {case.input}?"
    assert len(trace.roots) == 1 and trace.roots[0].name == "invoke_agent weather"
    with open(f"most-{case.id}.json", "w") as f:
        json.dump(MOST[0], f)
""".replace("BASE_URL", repr(judge_server.base_url)),
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert len(judge_server.requests_to("chat")) == 8
    most = max(json.loads((pytester.path / f"most-{c.lower()}.json").read_text()) for c in cities)
    assert most == 4  # the four agents really ran at once


def test_a_failed_model_call_under_the_official_instrumentation(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("opentelemetry.instrumentation.genai.openai")
    judge_server.enqueue(error(400, "model gpt-test does not exist"))
    pytester.makepyfile(
        test_failed="""
import pytest
from openai import BadRequestError, OpenAI
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor


@pytest.fixture
def instrumented():
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def test_agent(instrumented, llm_eval_trace):
    client = OpenAI(base_url=BASE_URL, api_key="test", max_retries=0)
    with pytest.raises(BadRequestError):
        client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}]
        )
    (call,) = llm_eval_trace.model_calls
    assert call.error == "Error code: 400 - model gpt-test does not exist"
    assert (call.input_tokens, call.output_tokens, call.output_messages) == (None, None, ())
    (span,) = llm_eval_trace.errors
    assert span.attributes["error.type"] == "openai.BadRequestError"
    assert llm_eval_trace.total_tokens == 0
""".replace("BASE_URL", repr(judge_server.base_url)),
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
