"""Example project: a tiny "support bot" under test, and one custom scorer.

The bot is deterministic on purpose, so the examples show the plugin, not a model's mood. In a
real project `support_bot` would call your LLM application.
"""

from __future__ import annotations

import json

import pytest

import pytest_llmeval
from pytest_llmeval import Score, Scorer

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "How many legs does a spider have?": "A spider has eight legs.",
    "Who wrote Hamlet?": "Hamlet was written by William Shakespeare.",
    "What is the boiling point of water at sea level in Celsius?": "100 degrees Celsius.",
}


def answer(question: str) -> str:
    return ANSWERS.get(question, "I don't know.")


def extract_order(text: str) -> str:
    """Pretend LLM extraction: returns a JSON string."""
    words = text.replace(",", "").split()
    qty = next((int(w) for w in words if w.isdigit()), 1)
    item = words[-1].rstrip(".")
    return json.dumps({"item": item, "quantity": qty})


@pytest.fixture
def support_bot():  # type: ignore[no-untyped-def]
    return answer


@pytest.fixture
def order_extractor():  # type: ignore[no-untyped-def]
    return extract_order


class MentionsKeyword(Scorer):
    """1 if the output contains the keyword (case-insensitive), else 0."""

    name = "mentions_keyword"
    required_inputs = ("output", "keyword")

    def compute(self, inputs, ctx):  # type: ignore[no-untyped-def]
        hit = inputs["keyword"].lower() in inputs["output"].lower()
        return Score(
            value=float(hit),
            rationale=f"keyword {inputs['keyword']!r} " + ("found" if hit else "missing"),
        )


def pytest_llmeval_register_scorers(registry, config):  # type: ignore[no-untyped-def]
    registry.register(MentionsKeyword, replace=True)


@pytest_llmeval.scorer(required=("output",))
def short_answer(output: str, max_words: int = 12) -> float:
    """1 when the answer has at most `max_words` words."""
    return float(len(output.split()) <= max_words)
