"""Agents and tool calls: no judge, no network, run with `pytest --llm-eval`.

`travel_agent` stands in for an LLM agent: given a request it returns the chat transcript in
OpenAI format (assistant messages with `tool_calls`, tool results, a final answer), the same
shape `client.chat.completions.create(..., tools=...)` gives you turn by turn. The scorers read
the `tool_calls` straight out of those messages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_llmeval import assert_score


def travel_agent(request: str) -> list[dict[str, Any]]:
    """A scripted agent: looks up flights, checks the weather when asked, books when asked."""
    city = request.rstrip(".?!").split()[-1]
    plan: list[tuple[str, dict[str, Any]]] = [("search_flights", {"to": city, "passengers": 1})]
    if "weather" in request:
        plan.append(("get_weather", {"city": city}))
    if "book" in request:
        plan.append(("book_flight", {"to": city, "seat": "aisle"}))
    messages: list[dict[str, Any]] = [{"role": "user", "content": request}]
    for n, (name, args) in enumerate(plan):
        call_id = f"call_{n}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
    messages.append({"role": "assistant", "content": f"All set for {city}."})
    return messages


REQUESTS = [
    ("find me a flight to Lisbon", ["search_flights"]),
    ("check the weather and find a flight to Oslo", ["search_flights", "get_weather"]),
    ("find and book a flight to Rome", ["search_flights", "book_flight"]),
]


@pytest.mark.llm_eval
@pytest.mark.parametrize(("request_text", "tools"), REQUESTS, ids=["flight", "weather", "book"])
def test_calls_the_right_tools_in_order(request_text: str, tools: list[str]) -> None:
    transcript = travel_agent(request_text)
    # every expected tool, in the expected order, and nothing else
    assert_score("tool_correctness", output=transcript, expected=tools, match="order", min=1)


@pytest.mark.llm_eval
def test_books_with_the_right_arguments() -> None:
    transcript = travel_agent("find and book a flight to Rome")
    expected = [
        {"name": "search_flights", "arguments": {"to": "Rome", "passengers": 1}},
        {"name": "book_flight", "arguments": {"to": "Rome", "seat": "window"}},
    ]
    # names must match; arguments are compared like json_diff: the seat differs, so the
    # booking call scores below 1 and the mean over the two calls stays above 0.75
    assert_score("tool_call_accuracy", output=transcript, expected=expected, min=0.75)
    # exact arguments: the booking call counts 0, so half the calls are right
    assert_score(
        "tool_call_accuracy", output=transcript, expected=expected, arguments="exact", max=0.5
    )


@pytest.mark.llm_eval
def test_no_tool_for_small_talk() -> None:
    transcript = [
        {"role": "user", "content": "hello!"},
        {"role": "assistant", "content": "Hi! Where would you like to go?"},
    ]
    assert_score("tool_correctness", output=transcript, expected=[], min=1)
