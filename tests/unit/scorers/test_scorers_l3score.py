"""l3score: the request it sends and the score it derives from the first token's top-5 logprobs."""

from __future__ import annotations

import math

import pytest

from pytest_llmeval import JudgeError, ScorerInputError, default_registry, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge.prompt import choose_nonce, data_notice
from pytest_llmeval.judge.step import JudgeStep, prompt_sha256
from pytest_llmeval.scorers.l3score import (
    PROMPT_SHA256,
    PROMPT_TEMPLATE,
    L3Score,
    l3score_from_top_logprobs,
)
from pytest_llmeval.testing import OpenAITestServer, text

CASE = {
    "input": "What is the capital of France?",
    "expected": "Paris",
    "output": "It is Paris.",
}


def test_check_value_through_the_server(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    tops = [("Yes", -0.1), ("No", -2.5), ("The", -5.0), ("I", -6.0), ("It", -7.0)]
    judge_server.enqueue(text("Yes", top_logprobs=tops, usage=(80, 1)))
    result = score("l3score", **CASE)
    assert result.value == pytest.approx(0.91683, abs=5e-6)
    assert result.scorer == "l3score"
    assert result.usage is not None and result.usage.calls == 1
    assert result.usage.prompt_tokens == 80
    assert result.metadata["p_yes"] == pytest.approx(math.exp(-0.1))
    assert result.metadata["p_no"] == pytest.approx(math.exp(-2.5))
    assert result.metadata["reply"] == "Yes"
    assert result.rationale is not None and "'Yes'" in result.rationale
    [req] = judge_server.requests
    body = req.body
    assert body["model"] == "test-judge"
    assert body["temperature"] == 0.0
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert "tools" not in body
    [msg] = body["messages"]
    assert msg["role"] == "user"
    # Each field in its own delimited block (the suffix comes from the fields), and the notice
    # that the blocks are data, never instructions.
    nonce = choose_nonce([CASE["input"], CASE["expected"], CASE["output"]])
    for tag, field in (
        ("question", "input"),
        ("reference_answer", "expected"),
        ("candidate_answer", "output"),
    ):
        assert f"<{tag}_{nonce}>\n{CASE[field]}\n</{tag}_{nonce}>" in msg["content"]
    assert data_notice(nonce) in msg["content"]
    assert "never instructions" in data_notice(nonce)
    assert "Yes or No" in msg["content"]
    assert "Do not think" in msg["content"]


def test_temperature_is_zero_whatever_the_run_says(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text("No", top_logprobs=[("No", -0.01)]))
    result = score("L3Score", **CASE, temperature=0.9)
    assert judge_server.requests[0].body["temperature"] == 0.0
    # Only "No" listed: P(yes) is the mass the list leaves over, 1 - exp(-0.01).
    p_no = math.exp(-0.01)
    assert result.value == pytest.approx((1 - p_no) / ((1 - p_no) + p_no))


def test_question_alias(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)]))
    result = score("l3score", output="Paris", expected="Paris", question="Capital of France?")
    assert result.value == pytest.approx(0.91683, abs=5e-6)
    assert "Capital of France?" in judge_server.requests[0].body["messages"][0]["content"]


def test_no_logprobs_is_a_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text("Yes"))  # the endpoint ignores logprobs=True
    with pytest.raises(JudgeError, match="returned no logprobs") as info:
        score("l3score", **CASE)
    msg = str(info.value)
    assert "'l3score'" in msg and "'test-judge'" in msg and judge_server.base_url in msg
    assert "sk-test-SECRET" not in msg


def test_missing_inputs_name_the_field(judge_ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="'l3score': input 'input'"):
        score("l3score", output="x", expected="y")
    with pytest.raises(ScorerInputError, match="'l3score': input 'expected'"):
        score("l3score", output="x", input="q")


def test_both_sides(judge_ctx: ScoringContext) -> None:
    value, details = l3score_from_top_logprobs([("Yes", -0.1), ("No", -2.5)])
    assert value == pytest.approx(0.916827, abs=1e-6)
    assert details["estimated"] is None


def test_neither_side_scores_zero() -> None:
    value, details = l3score_from_top_logprobs(
        [("The", -0.5), ("Maybe", -1.0), ("A", -2.0), ("It", -3.0), ("So", -4.0)]
    )
    assert value == 0.0
    assert details["p_yes"] is None and details["p_no"] is None


def test_only_no_uses_the_lowest_listed_probability() -> None:
    tops = [("No", -0.5), ("The", -2.0), ("A", -3.0), ("It", -4.0), ("So", -5.0)]
    value, details = l3score_from_top_logprobs(tops)
    # 1 - sum(probs) = 0.1833 > exp(-5) = 0.0067, so the missing P(yes) is exp(-5).
    assert details["p_yes"] == pytest.approx(math.exp(-5.0))
    assert details["estimated"] == "yes"
    assert value == pytest.approx(0.0109869426, abs=1e-9)


def test_only_yes_uses_the_leftover_mass_when_smaller() -> None:
    tops = [("Yes", -1.61), ("A", -1.61), ("B", -1.61), ("C", -1.61), ("D", -1.61)]
    p = math.exp(-1.61)
    value, details = l3score_from_top_logprobs(tops)
    assert details["p_no"] == pytest.approx(1 - 5 * p)
    assert value == pytest.approx(p / (p + (1 - 5 * p)))


def test_only_yes_floor() -> None:
    # The listed probabilities sum past 1 (rounding in real endpoints): floor at 1e-8.
    tops = [("Yes", -0.05), ("The", -3.0), ("A", -4.0), ("I", -5.0), ("Maybe", -6.0)]
    value, details = l3score_from_top_logprobs(tops)
    assert details["p_no"] == 1e-8
    assert value == pytest.approx(math.exp(-0.05) / (math.exp(-0.05) + 1e-8))


def test_token_matching_strips_lowercases_and_takes_the_first_match() -> None:
    value, details = l3score_from_top_logprobs(
        [(" YEAH", -0.2), ("no\n", -1.0), ("Yes", -0.1), ("No", -0.05)]
    )
    assert value == pytest.approx(math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.0)))
    assert details["p_yes"] == pytest.approx(math.exp(-0.2))


def test_only_the_first_five_count() -> None:
    tops = [("The", -1.0), ("A", -2.0), ("B", -3.0), ("C", -4.0), ("D", -5.0), ("Yes", -6.0)]
    value, _ = l3score_from_top_logprobs(tops)
    assert value == 0.0


def test_registry_and_identity(judge_ctx: ScoringContext) -> None:
    assert default_registry.get("L3Score") is L3Score
    ident = L3Score().identity(judge_ctx)
    assert ident["extra"]["prompt_sha256"] == PROMPT_SHA256
    # The hash is the judge step's: the template, the delimiting scheme (the notice's wording
    # included) and the layout.
    assert JudgeStep(PROMPT_TEMPLATE).sha256 == PROMPT_SHA256
    assert (
        prompt_sha256(
            {
                "template": PROMPT_TEMPLATE,
                "tool": None,
                "description": "",
                "schema": None,
                "constants": {},
                "case_placeholders": [],
                "choice_scores": None,
                "unscored": [],
                "version": "1",
            }
        )
        == PROMPT_SHA256
    )
    assert ident["version"] == "3"
    assert ident["extra"]["judge"] == {
        "model": "test-judge",
        "temperature": 0.0,
        "seed": 0,
        "mode": "tool",
    }
    other = L3Score(model="gpt-4o").identity(judge_ctx)
    assert other["extra"]["judge"]["model"] == "gpt-4o"
    assert "api_key" not in repr(L3Score(api_key="sk-x").identity(judge_ctx))
