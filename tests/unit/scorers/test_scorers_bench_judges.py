"""Arthur Bench's judge scorers (pytest_llmeval/scorers/bench_judges.py) through the scripted
OpenAI-compatible test server with the real ``openai`` client."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmeval import score
from pytest_llmeval.core.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.scorers.bench_judges import (
    REPLY_RESERVE_TOKENS,
    Hallucination,
    SummaryQuality,
    estimate_tokens,
    tokenizer_name,
    truncate_to_tokens,
)
from pytest_llmeval.testing import OpenAITestServer, tool_call

FORCED = {"type": "function", "function": {"name": "select_choice"}}


def _body(server: OpenAITestServer, index: int = 0) -> dict[str, Any]:
    body = server.requests_to("chat")[index].body
    assert isinstance(body, dict)
    return body


def _prompt(server: OpenAITestServer, index: int = 0) -> str:
    content = _body(server, index)["messages"][0]["content"]
    assert isinstance(content, str)
    return content


# ----------------------------------------------------------------------------- qa_correctness


@pytest.mark.parametrize(("verdict", "value"), [("correct", 1.0), ("incorrect", 0.0)])
def test_qa_correctness_each_verdict_and_the_request(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, verdict: str, value: float
) -> None:
    judge_server.enqueue(tool_call({"reasons": "context says 1889", "choice": verdict}))
    result = score(
        "qa_correctness",
        input="Q-when-built",
        context=["CTX-eiffel-1889", "CTX-paris"],
        output="OUT-1889",
    )
    assert result.value == value
    assert result.rationale == "context says 1889"
    assert result.metadata["choice"] == verdict

    body = _body(judge_server)
    assert body["model"] == "test-judge"
    assert body["temperature"] == 0.0
    assert body["tool_choice"] == FORCED
    params = body["tools"][0]["function"]["parameters"]
    assert params["properties"]["choice"]["enum"] == ["correct", "incorrect", "not_applicable"]
    prompt = _prompt(judge_server)
    assert "Q-when-built" in prompt and "OUT-1889" in prompt
    assert "CTX-eiffel-1889\n\nCTX-paris" in prompt  # passages joined, not a Python list


def test_qa_correctness_declares_its_inputs_and_needs_no_reference() -> None:
    cls = default_registry.get("QACorrectness")
    assert cls.name == "qa_correctness"
    assert cls.required_inputs == ("input", "context", "output")
    assert "expected" not in cls.input_fields()
    assert cls.higher_is_better is True


@pytest.mark.parametrize("field", ["input", "context", "output"])
def test_qa_correctness_missing_input(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, field: str
) -> None:
    inputs: dict[str, Any] = {"input": "q", "context": "c", "output": "o"}
    del inputs[field]
    with pytest.raises(ScorerInputError) as info:
        score("qa_correctness", **{"output": None, **inputs})
    assert info.value.field == field
    assert judge_server.requests_to("chat") == []


def test_qa_correctness_invalid_verdict_is_a_judge_error_never_a_score(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"reasons": "?", "choice": "invalid"}),
        tool_call({"reasons": "?", "choice": "0.5"}),
    )
    with pytest.raises(JudgeError) as info:
        score("qa_correctness", input="q", context="c", output="o")
    assert info.value.scorer == "qa_correctness"
    assert len(judge_server.requests_to("chat")) == 2


# ----------------------------------------------------------------------------- summary_quality


@pytest.mark.parametrize(
    ("verdict", "value"), [("reference", 0.0), ("candidate", 1.0), ("tie", 0.5)]
)
def test_summary_quality_each_verdict_and_the_request(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, verdict: str, value: float
) -> None:
    judge_server.enqueue(tool_call({"reasons": "B covers more", "choice": verdict}))
    result = score("summary_quality", input="SRC-text", expected="REF-sum", output="CAND-sum")
    assert result.value == value
    assert result.rationale == "B covers more"
    assert result.metadata == {"choice": verdict, "truncated": False}
    body = _body(judge_server)
    assert body["tool_choice"] == FORCED
    assert body["tools"][0]["function"]["parameters"]["properties"]["choice"]["enum"] == [
        "reference",
        "candidate",
        "tie",
    ]
    prompt = _prompt(judge_server)
    assert "SRC-text" in prompt and "REF-sum" in prompt and "CAND-sum" in prompt
    # The reference comes before the candidate, each under its own label.
    assert prompt.index("REF-sum") < prompt.index("CAND-sum")


def test_summary_quality_cuts_a_long_source_from_its_end(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    words = [f"w{i:04d}" for i in range(2000)]  # each "wNNNN" estimates at 2 tokens
    source = "START " + " ".join(words) + " FINALWORD"
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "tie"}))
    result = score(
        "summary_quality",
        input=source,
        expected="ref",
        output="cand",
        context_window=1000,
    )
    assert result.value == 0.5
    assert result.metadata["truncated"] is True
    prompt = _prompt(judge_server)
    assert "START w0000 w0001" in prompt
    assert "FINALWORD" not in prompt
    # The whole prompt fits in the window less the reply reserve, and nearly fills it.
    budget = 1000 - REPLY_RESERVE_TOKENS
    assert budget - 4 <= estimate_tokens(prompt) <= budget
    kept = result.metadata["source_tokens_kept"]
    assert isinstance(kept, int) and 0 < kept < estimate_tokens(source)


def test_summary_quality_default_window_keeps_a_source_that_fits(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    source = " ".join(["word"] * 3000) + " LAST"  # 3001 tokens by the estimate: fits in 3946
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "candidate"}))
    result = score("summary_quality", input=source, expected="ref", output="cand")
    assert result.metadata["truncated"] is False
    assert "LAST" in _prompt(judge_server)


def test_summary_quality_summaries_too_long_for_the_window_are_an_input_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score(
            "summary_quality",
            input="src",
            expected="x " * 400,
            output="y " * 400,
            context_window=600,
        )
    assert "context_window" in str(info.value)
    assert judge_server.requests_to("chat") == []


@pytest.mark.parametrize("window", [100, 150, "4096", 4096.0, True])
def test_summary_quality_context_window_must_be_an_int_above_the_reserve(window: Any) -> None:
    with pytest.raises(ScorerConfigError) as info:
        SummaryQuality(context_window=window)
    assert info.value.option == "context_window"


def test_summary_quality_identity_names_the_tokenizer(judge_ctx: ScoringContext) -> None:
    ident = SummaryQuality().identity(judge_ctx)
    assert ident["extra"]["tokenizer"] == tokenizer_name()
    assert ident["extra"]["judge"]["model"] == "test-judge"
    assert ident["options"]["context_window"] == 4096


def test_summary_quality_missing_reference(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("summary_quality", input="src", output="cand")
    assert info.value.field == "expected"


# ----------------------------------------------------------------------------- token estimate


@pytest.mark.skipif(tokenizer_name() != "approx-4chars-v1", reason="tiktoken is in use")
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("the cat sat", 3),
        ("Hello, world!", 6),  # Hello 2, "," 1, world 2, "!" 1
        ("internationalization", 5),
        ("你好", 2),
        ("café", 2),  # "caf" 1 + "é" 1
        ("  spaces   only  ", 3),  # spaces 2, only 1
    ],
)
def test_estimate_tokens_follows_its_documented_rule(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.skipif(tokenizer_name() != "approx-4chars-v1", reason="tiktoken is in use")
def test_truncate_to_tokens_keeps_the_longest_prefix_that_fits() -> None:
    text = "one two three, four"  # 1 + 1 + 2 + 1 + 1 tokens
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 3) == "one two"
    assert truncate_to_tokens(text, 4) == "one two three"
    assert truncate_to_tokens(text, 5) == "one two three,"
    assert truncate_to_tokens(text, 0) == ""
    for n in range(8):
        cut = truncate_to_tokens(text, n)
        assert text.startswith(cut)
        assert estimate_tokens(cut) <= n


# ----------------------------------------------------------------------------- hallucination


def _verdicts(*items: tuple[str, str]) -> dict[str, Any]:
    return {"verdicts": [{"reasons": r, "verdict": v} for v, r in items]}


def test_hallucination_scores_1_and_lists_the_unsupported_claims(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"claims": ["The tower is in Paris.", "It was built in 1920."]}, usage=(50, 10)),
        tool_call(
            _verdicts(("supported", "context says Paris"), ("unsupported", "context says 1889")),
            usage=(80, 20),
        ),
    )
    result = score(
        "hallucination",
        output="OUT-The tower is in Paris and was built in 1920.",
        context="CTX-The Eiffel Tower in Paris was completed in 1889.",
    )
    assert result.value == 1.0
    assert result.metadata["claims"] == ["The tower is in Paris.", "It was built in 1920."]
    assert result.metadata["unsupported_claims"] == ["It was built in 1920."]
    assert result.metadata["verdicts"] == [
        {
            "claim": "The tower is in Paris.",
            "verdict": "supported",
            "reasons": "context says Paris",
        },
        {
            "claim": "It was built in 1920.",
            "verdict": "unsupported",
            "reasons": "context says 1889",
        },
    ]
    assert result.rationale is not None and "It was built in 1920." in result.rationale
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (130, 30)
    assert result.usage.calls == 2

    first, second = judge_server.requests_to("chat")
    assert first.body["tool_choice"] == {"type": "function", "function": {"name": "list_claims"}}
    assert "OUT-The tower is in Paris" in first.body["messages"][0]["content"]
    assert "CTX-" not in first.body["messages"][0]["content"]
    assert second.body["tool_choice"] == {"type": "function", "function": {"name": "judge_claims"}}
    schema = second.body["tools"][0]["function"]["parameters"]["properties"]["verdicts"]
    # The same schema for every case (prompt caching); the step checks one verdict per claim.
    assert "minItems" not in schema and "maxItems" not in schema
    assert "(2 verdicts)" in second.body["messages"][0]["content"]
    assert schema["items"]["properties"]["verdict"]["enum"] == ["supported", "unsupported"]
    prompt2 = second.body["messages"][0]["content"]
    assert "CTX-The Eiffel Tower" in prompt2
    assert "1. The tower is in Paris.\n2. It was built in 1920." in prompt2
    assert second.body["model"] == "test-judge" and second.body["temperature"] == 0.0


def test_hallucination_all_supported_scores_0(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"claims": ["Paris is in France."]}),
        tool_call(_verdicts(("supported", "stated"))),
    )
    result = score("hallucination", output="Paris is in France.", context="Paris, France.")
    assert result.value == 0.0
    assert result.metadata["unsupported_claims"] == []
    assert result.rationale == "all 1 claims are supported by the context"


def test_hallucination_no_claims_scores_0_after_one_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"claims": []}))
    result = score("hallucination", output="Hello! How can I help?", context="anything")
    assert result.value == 0.0
    assert result.metadata["claims"] == []
    assert len(judge_server.requests_to("chat")) == 1


def test_hallucination_blank_output_makes_no_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    result = score("hallucination", output="   ", context="anything")
    assert result.value == 0.0
    assert result.usage is not None and result.usage.calls == 0
    assert judge_server.requests_to("chat") == []


def test_hallucination_wrong_number_of_verdicts_is_reasked_then_a_judge_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"claims": ["a", "b"]}),
        tool_call(_verdicts(("supported", "x"))),
        tool_call(_verdicts(("supported", "x"), ("supported", "y"), ("supported", "z"))),
    )
    with pytest.raises(JudgeError) as info:
        score("hallucination", output="a and b", context="c")
    assert info.value.scorer == "hallucination"
    assert len(judge_server.requests_to("chat")) == 3


def test_hallucination_invalid_verdict_is_a_judge_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"claims": ["a"]}),
        tool_call(_verdicts(("invalid", "x"))),
        tool_call(_verdicts(("partly", "x"))),
    )
    with pytest.raises(JudgeError):
        score("hallucination", output="a", context="c")


def test_hallucination_declares_lower_is_better_and_its_inputs() -> None:
    cls = default_registry.get("Hallucination")
    assert cls is Hallucination
    assert cls.higher_is_better is False
    assert cls.required_inputs == ("output", "context")
    assert cls.score_range == (0.0, 1.0)


def test_hallucination_missing_context(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("hallucination", output="a claim")
    assert info.value.field == "context"
    assert judge_server.requests_to("chat") == []


def test_hallucination_identity_has_a_prompt_hash_and_the_judge(judge_ctx: ScoringContext) -> None:
    ident = Hallucination().identity(judge_ctx)
    assert len(ident["extra"]["prompt_sha256"]) == 64
    assert ident["extra"]["judge"]["model"] == "test-judge"
