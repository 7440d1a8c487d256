"""Deterministic scorers over datasets: no judge, no network, run with `pytest --llm-eval`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmeval import assert_score, assert_scores, load_dataset

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
    "required": ["item", "quantity"],
}


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/faq.jsonl")
def test_faq_answers(case, support_bot):  # type: ignore[no-untyped-def]
    answer = support_bot(case.input)
    assert_score("mentions_keyword", output=answer, keyword=case.keyword, min=1)
    assert_score("levenshtein", output=answer, expected=case.expected, min=0.3)
    assert_score("short_answer", output=answer, threshold=1)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/orders.csv")
def test_order_extraction(case, order_extractor):  # type: ignore[no-untyped-def]
    extracted = order_extractor(case.input)
    assert_score("valid_json", output=extracted, schema=ORDER_SCHEMA, min=1)
    assert_score("JSONDiff", output=extracted, expected=case.expected, min=0.9)


@pytest.mark.llm_eval
def test_whole_dataset_at_once(support_bot):  # type: ignore[no-untyped-def]
    rows = [
        {"output": support_bot(c.input), "expected": c.expected}
        for c in load_dataset(Path(__file__).parent / "data" / "faq.jsonl")
    ]
    assert_scores("levenshtein", rows, min=0.3, min_pass_rate=0.75, min_mean=0.4)


def test_exact_match_is_an_assertion_like_any_other():
    assert_score("exact_match", output={"a": 1, "b": [2]}, expected='{"a": 1, "b": [2]}', min=1)
    assert_score("numeric_diff", output=99, expected=100, min=0.99)
