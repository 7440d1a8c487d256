"""Judges you define: a classifier and a G-Eval rubric judge from the spec files in judges/,
used by name like any built-in scorer. `scripts/run-examples.sh` points them at a local
llama.cpp judge; the cases are clear-cut and the bounds lenient, so a small model passes them."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_llmeval
from pytest_llmeval import assert_score, score

# Registers "polite_reply" and "helpful_answer". (The ini setting `llm_eval_judges = judges/*.json`
# does the same for every test of a project.)
pytest_llmeval.load_classifiers("judges/*.json", root=Path(__file__).parent)

QUESTION = "Hello, when will my order #1234 arrive?"


@pytest.mark.llm_eval
def test_a_polite_reply_is_polite():
    assert_score(
        "polite_reply",
        input=QUESTION,
        output="Thank you for your patience! Your order #1234 ships today and should arrive "
        "within three days. Have a lovely day!",
        min=1,
    )


@pytest.mark.llm_eval
def test_a_helpful_answer_beats_an_evasive_one(support_bot):  # type: ignore[no-untyped-def]
    question = "What is the capital of France?"
    helpful = score("helpful_answer", input=question, output=support_bot(question))
    evasive = score(
        "helpful_answer", input=question, output="Bananas are a good source of potassium."
    )
    assert helpful.value > evasive.value, (helpful.rationale, evasive.rationale)
