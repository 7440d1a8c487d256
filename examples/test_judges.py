"""LLM-judge scorers. `scripts/run-examples.sh` points them at a local llama.cpp judge
(OPENAI_BASE_URL); with a real OpenAI key they run against OpenAI instead."""

from __future__ import annotations

import pytest

from pytest_llmeval import assert_score


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/faq.jsonl")
def test_l3score_accepts_correct_answers(case, support_bot):  # type: ignore[no-untyped-def]
    answer = support_bot(case.input)
    assert_score("L3Score", input=case.input, expected=case.expected, output=answer, min=0.5)


@pytest.mark.llm_eval
def test_l3score_rejects_a_wrong_answer():
    assert_score(
        "l3score",
        input="What is the capital of France?",
        expected="Paris",
        output="The capital of France is Berlin.",
        max=0.5,
    )


@pytest.mark.llm_eval
def test_factuality_of_a_consistent_answer(support_bot):  # type: ignore[no-untyped-def]
    question = "Who wrote Hamlet?"
    assert_score(
        "Factuality",
        input=question,
        expected="William Shakespeare",
        output=support_bot(question),
        min=0.4,
    )
