"""The RAG scorers (pytest_llmeval/scorers/rag.py), through the scripted OpenAI-compatible test
server with the real ``openai`` client: the exact judge calls each scorer makes, the score derived
from scripted replies (expected numbers worked out by hand here), the concurrency of one case's
independent calls, and the edge cases."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from pytest_llmeval import score
from pytest_llmeval.context import ScoringContext
from pytest_llmeval.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.registry import default_registry
from pytest_llmeval.scorers import rag
from pytest_llmeval.testing import (
    ChatReply,
    OpenAITestServer,
    RecordedRequest,
    delay,
    embeddings,
    tool_call,
)

# -- helpers ----------------------------------------------------------------------------------


def _chat(server: OpenAITestServer) -> list[RecordedRequest]:
    return server.requests_to("chat")


def _tool(req: RecordedRequest) -> str:
    """The forced tool of a chat request (checking that it is forced and offered)."""
    body = req.body
    name = body["tool_choice"]["function"]["name"]
    assert body["tool_choice"]["type"] == "function"
    assert [t["function"]["name"] for t in body["tools"]] == [name]
    return str(name)


def _prompt(req: RecordedRequest) -> str:
    messages = req.body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"
    return str(messages[0]["content"])


def _params(req: RecordedRequest) -> dict[str, Any]:
    params = req.body["tools"][0]["function"]["parameters"]
    assert isinstance(params, dict)
    return params


def _route(table: dict[str, ChatReply], *, wait: float = 0.0) -> Callable[[dict[str, Any]], Any]:
    """A chat default that picks the reply by a marker found in the prompt (concurrent calls
    arrive in any order), optionally after ``wait`` seconds (to observe concurrency)."""

    def reply(body: dict[str, Any]) -> Any:
        content = body["messages"][0]["content"]
        for marker, item in table.items():
            if marker in content:
                return delay(wait, item) if wait else item
        raise AssertionError(f"no scripted reply for prompt {content[:200]!r}")

    return reply


def _unit(cos: float) -> list[float]:
    """A 2-d unit vector at cosine ``cos`` to (1, 0)."""
    return [cos, math.sqrt(1.0 - cos * cos)]


def _vectors(table: dict[str, Sequence[float]]) -> Callable[[str], Sequence[float]]:
    """A deterministic text -> vector function for the embeddings endpoint."""

    def fn(text: str) -> Sequence[float]:
        if text not in table:
            raise AssertionError(f"no scripted vector for {text!r}")
        return table[text]

    return fn


def _rescaled(cos: float, expected_min: float = 0.7) -> float:
    """embedding_similarity's rescaling, written out for the expected values."""
    return max((min(cos, 1.0) - expected_min) / (1.0 - expected_min), 0.0)


# -- declarations -------------------------------------------------------------------------------

DECLARED = {
    "context_entity_recall": ("ContextEntityRecall", ("expected", "context")),
    "context_relevancy": ("ContextRelevancy", ("input", "context")),
    "context_recall": ("ContextRecall", ("input", "expected", "context")),
    "context_precision": ("ContextPrecision", ("input", "expected", "context")),
    "faithfulness": ("Faithfulness", ("input", "output", "context")),
    "answer_relevancy": ("AnswerRelevancy", ("input", "output", "context")),
    "answer_correctness": ("AnswerCorrectness", ("input", "expected", "output")),
}


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_registry_names_inputs_and_direction(name: str) -> None:
    alias, required = DECLARED[name]
    cls = default_registry.get(name)
    assert default_registry.get(alias) is cls
    assert cls.__module__ == "pytest_llmeval.scorers.rag"
    assert cls.required_inputs == required
    assert cls.optional_inputs == ()
    assert cls.uses_judge is True
    assert cls.higher_is_better is True
    assert cls.score_range == (0.0, 1.0)


def test_render_fills_placeholders_in_one_pass() -> None:
    out = rag.render("q={{question}} c={{context}}", question="{{context}}", context="C")
    assert out == "q={{context}} c=C"


# -- context_relevancy --------------------------------------------------------------------------

PASSAGES = ["Paris is the capital of France.", "It has the Eiffel Tower."]


def test_context_relevancy_one_call_and_length_ratio(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call(
            {"sentences": [{"reason": "names the capital", "sentence": PASSAGES[0]}]},
            usage=(40, 9),
        )
    )
    result = score(
        "context_relevancy", output=None, input="What is the capital of France?", context=PASSAGES
    )
    # The context is joined with "\n": 31 + 1 + 24 = 56 characters, 31 of them selected.
    assert result.value == pytest.approx(31 / 56, abs=1e-12)
    assert result.metadata["relevant_sentences"] == [
        {"sentence": PASSAGES[0], "reason": "names the capital"}
    ]
    assert result.metadata["context_chars"] == 56
    assert result.usage is not None
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        1,
        40,
        9,
    )
    (req,) = _chat(judge_server)
    assert _tool(req) == "select_relevant_sentences"
    prompt = _prompt(req)
    assert "What is the capital of France?" in prompt
    assert "Paris is the capital of France.\nIt has the Eiffel Tower." in prompt
    items = _params(req)["properties"]["sentences"]["items"]
    assert set(items["required"]) == {"reason", "sentence"}


def test_context_relevancy_is_clamped_to_one(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    long = "Paris is the capital of France, a country in western Europe."
    judge_server.enqueue(tool_call({"sentences": [{"reason": "r", "sentence": long}]}))
    result = score("context_relevancy", output=None, input="Q?", context="Paris, France.")
    assert result.value == 1.0
    assert result.metadata["raw_ratio"] == pytest.approx(len(long) / len("Paris, France."))


def test_context_relevancy_with_no_relevant_sentence_is_zero(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"sentences": []}))
    result = score("context_relevancy", output=None, input="Q?", context="Unrelated text.")
    assert result.value == 0.0
    assert len(_chat(judge_server)) == 1


# -- empty context ------------------------------------------------------------------------------

EMPTY_CONTEXT_CASES = {
    "context_relevancy": {"input": "Q?"},
    "context_recall": {"input": "Q?", "expected": "Paris."},
    "context_precision": {"input": "Q?", "expected": "Paris."},
    "faithfulness": {"input": "Q?", "output": "Paris."},
}


@pytest.mark.parametrize("empty", ["", [], "  \n ", ["", ""]])
@pytest.mark.parametrize("name", sorted(EMPTY_CONTEXT_CASES))
def test_an_empty_context_scores_zero_without_a_judge_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, name: str, empty: Any
) -> None:
    fields = dict(EMPTY_CONTEXT_CASES[name])
    output = fields.pop("output", None)
    result = score(name, output=output, context=empty, **fields)
    assert result.value == 0.0
    assert result.metadata["empty_context"] is True
    assert result.usage is not None and result.usage.calls == 0
    assert judge_server.requests == []


# -- bad inputs ---------------------------------------------------------------------------------

ALL_INPUTS = {
    "context_entity_recall": {"expected": "Paris.", "context": "Paris."},
    "context_relevancy": {"input": "Q?", "context": "Paris."},
    "context_recall": {"input": "Q?", "expected": "Paris.", "context": "Paris."},
    "context_precision": {"input": "Q?", "expected": "Paris.", "context": "Paris."},
    "faithfulness": {"input": "Q?", "output": "Paris.", "context": "Paris."},
    "answer_relevancy": {"input": "Q?", "output": "Paris.", "context": "Paris."},
    "answer_correctness": {"input": "Q?", "expected": "Paris.", "output": "Paris."},
}


def _score_fields(name: str, fields: dict[str, Any], **options: Any) -> Any:
    fields = dict(fields)
    output = fields.pop("output", None)
    return score(name, output=output, **fields, **options)


@pytest.mark.parametrize(
    ("name", "field"), [(n, f) for n in sorted(DECLARED) for f in DECLARED[n][1]]
)
def test_a_missing_input_names_scorer_and_field(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, name: str, field: str
) -> None:
    fields = {k: v for k, v in ALL_INPUTS[name].items() if k != field}
    with pytest.raises(ScorerInputError) as info:
        _score_fields(name, fields)
    assert (info.value.scorer, info.value.field) == (name, field)
    assert judge_server.requests == []


@pytest.mark.parametrize(
    "name", [n for n in sorted(DECLARED) if "context" in DECLARED[n][1]]
)  # fmt: skip
@pytest.mark.parametrize(
    ("bad", "problem"),
    [(42, "must be a string or a list of strings, not int"),
     (["ok", 3], "item 1 is int, not a string"),
     ({"a": "b"}, "must be a string or a list of strings, not dict")],
)  # fmt: skip
def test_a_context_that_is_not_text_is_an_input_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, name: str, bad: Any, problem: str
) -> None:
    fields = {**ALL_INPUTS[name], "context": bad}
    with pytest.raises(ScorerInputError) as info:
        _score_fields(name, fields)
    assert info.value.field == "context"
    assert problem in str(info.value)
    assert judge_server.requests == []


def test_a_text_input_of_an_odd_type_is_an_input_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("context_precision", output=None, input=object(), expected="E", context="C")
    assert info.value.field == "input"
    assert "must be text, not object" in str(info.value)


# -- context_recall -----------------------------------------------------------------------------


def test_context_recall_one_call_mean_of_attributions(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    statements = [
        {"statement": "Paris is the capital.", "reason": "stated", "attributed": 1},
        {"statement": "Paris has 2.1 million people.", "reason": "absent", "attributed": 0},
        {"statement": "Paris is in France.", "reason": "stated", "attributed": 1},
    ]
    judge_server.enqueue(tool_call({"statements": statements}))
    result = score(
        "context_recall",
        output="ignored",
        input="Q-recall",
        expected="EXP-recall",
        context=["CTX-one", "CTX-two"],
    )
    assert result.value == pytest.approx(2 / 3, abs=1e-12)
    assert result.metadata["statements"] == statements
    assert "Paris has 2.1 million people." in (result.rationale or "")
    (req,) = _chat(judge_server)
    assert _tool(req) == "attribute_statements"
    prompt = _prompt(req)
    for marker in ("Q-recall", "EXP-recall", "CTX-one\nCTX-two"):
        assert marker in prompt
    assert "ignored" not in prompt
    item = _params(req)["properties"]["statements"]["items"]
    assert item["properties"]["attributed"]["enum"] == [0, 1]


def test_context_recall_without_statements_is_zero(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"statements": []}))
    result = score("context_recall", output=None, input="Q", expected="Hmm.", context="C")
    assert result.value == 0.0
    assert result.metadata["no_statements"] is True
    assert result.usage is not None and result.usage.calls == 1


def test_context_recall_with_a_blank_expected_is_zero_without_a_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    result = score("context_recall", output=None, input="Q", expected="   ", context="C")
    assert result.value == 0.0
    assert result.metadata["no_statements"] is True
    assert judge_server.requests == []


def test_a_verdict_outside_zero_one_is_asked_again_then_a_judge_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    bad = {"statements": [{"statement": "s", "reason": "r", "attributed": 2}]}
    judge_server.enqueue(tool_call(bad), tool_call(bad))
    with pytest.raises(JudgeError) as info:
        score("context_recall", output=None, input="Q", expected="E", context="C")
    assert "attribute_statements" in str(info.value)
    assert len(_chat(judge_server)) == 2


def test_a_reasked_reply_counts_both_calls_in_usage(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    bad = {"statements": [{"statement": "s", "reason": "r", "attributed": "yes"}]}
    good = {"statements": [{"statement": "s", "reason": "r", "attributed": 1}]}
    judge_server.enqueue(tool_call(bad, usage=(10, 2)), tool_call(good, usage=(15, 3)))
    result = score("context_recall", output=None, input="Q", expected="E", context="C")
    assert result.value == 1.0
    assert result.usage is not None
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        2,
        25,
        5,
    )


# -- context_precision --------------------------------------------------------------------------


@pytest.mark.parametrize("verdict", [0, 1])
def test_context_precision_is_the_verdict(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, verdict: int
) -> None:
    judge_server.enqueue(tool_call({"reason": f"REASON-{verdict}", "verdict": verdict}))
    result = score(
        "context_precision", output=None, input="Q-prec", expected="EXP-prec", context="CTX-prec"
    )
    assert result.value == float(verdict)
    assert result.rationale == f"REASON-{verdict}"
    assert result.metadata == {"verdict": verdict, "reason": f"REASON-{verdict}"}
    (req,) = _chat(judge_server)
    assert _tool(req) == "judge_context_usefulness"
    prompt = _prompt(req)
    for marker in ("Q-prec", "EXP-prec", "CTX-prec"):
        assert marker in prompt
    params = _params(req)
    assert params["properties"]["verdict"]["enum"] == [0, 1]
    assert params["required"] == ["reason", "verdict"]


# -- faithfulness -------------------------------------------------------------------------------


def test_faithfulness_extracts_then_judges_each_statement(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    stmts = ["Paris is the capital of France.", "Paris has 30 million people.", "Paris is big."]
    verdicts = [
        {"statement": stmts[0], "reason": "stated", "verdict": 1},
        {"statement": stmts[1], "reason": "not stated", "verdict": 0},
        {"statement": stmts[2], "reason": "implied", "verdict": 1},
    ]
    judge_server.enqueue(
        tool_call({"statements": stmts}, usage=(100, 20)),
        tool_call({"verdicts": verdicts}, usage=(150, 40)),
    )
    result = score(
        "faithfulness", output="OUT-faith", input="Q-faith", context=["CTX-a", "CTX-b"]
    )
    assert result.value == pytest.approx(2 / 3, abs=1e-12)
    assert result.metadata["statements"] == stmts
    assert result.metadata["verdicts"] == verdicts
    assert result.usage is not None
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        2,
        250,
        60,
    )
    first, second = _chat(judge_server)
    assert _tool(first) == "extract_statements"
    assert "Q-faith" in _prompt(first) and "OUT-faith" in _prompt(first)
    assert "CTX-a" not in _prompt(first)
    assert _tool(second) == "judge_statements"
    prompt = _prompt(second)
    assert "CTX-a\nCTX-b" in prompt
    assert "1. Paris is the capital of France.\n2. Paris has 30 million people.\n3. Paris is big." in prompt
    arr = _params(second)["properties"]["verdicts"]
    assert (arr["minItems"], arr["maxItems"]) == (3, 3)
    # The verdict call starts only after the statements are back (it needs them).
    assert first.finished_at is not None and second.received_at >= first.finished_at


def test_faithfulness_without_statements_is_zero_and_skips_the_verdict_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"statements": []}))
    result = score("faithfulness", output="Sorry, I can't help.", input="Q", context="C")
    assert result.value == 0.0
    assert result.metadata == {"statements": [], "verdicts": [], "no_statements": True}
    assert len(_chat(judge_server)) == 1


def test_faithfulness_with_a_blank_output_is_zero_without_a_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    result = score("faithfulness", output="", input="Q", context="C")
    assert result.value == 0.0
    assert judge_server.requests == []


def test_faithfulness_needs_one_verdict_per_statement(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    short = {"verdicts": [{"statement": "a", "reason": "r", "verdict": 1}]}
    judge_server.enqueue(tool_call({"statements": ["a", "b"]}), tool_call(short), tool_call(short))
    with pytest.raises(JudgeError) as info:
        score("faithfulness", output="a and b", input="Q", context="C")
    assert "judge_statements" in str(info.value)
    assert len(_chat(judge_server)) == 3
