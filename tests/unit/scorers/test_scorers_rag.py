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
from pytest_llmeval.core.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.judge.prompt import choose_nonce, render_prompt
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
    template = "<q>\n{{question}}\n</q>\n<c>\n{{context}}\n</c>\n{{data_notice}}"
    out = render_prompt(template, {"question": "{{context}}", "context": "C"})
    nonce = choose_nonce(["{{context}}", "C"])
    assert out.startswith(
        f"<q_{nonce}>\n{{{{context}}}}\n</q_{nonce}>\n<c_{nonce}>\nC\n</c_{nonce}>\n"
    )
    # Every prompt of the module renders, with each field in a block.
    for prompt in (rag.RECALL.template, rag.PRECISION.template):
        out = render_prompt(
            prompt, {"question": "Q1", "context": "C1", "answer": "A1"}, {"tool_only": "T"}
        )
        nonce = choose_nonce(["Q1", "C1", "A1"])
        assert f"<context_{nonce}>\nC1\n</context_{nonce}>" in out


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
    result = score("faithfulness", output="OUT-faith", input="Q-faith", context=["CTX-a", "CTX-b"])
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
    assert (
        "1. Paris is the capital of France.\n2. Paris has 30 million people.\n3. Paris is big."
        in prompt
    )
    # The tool schema is the same for every case (prompt caching): the count is checked by the
    # judge step instead (see test_faithfulness_needs_one_verdict_per_statement).
    arr = _params(second)["properties"]["verdicts"]
    assert "minItems" not in arr and "maxItems" not in arr
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
    assert "`verdicts` has 1 items for 2 claims" in str(info.value)
    reqs = _chat(judge_server)
    assert len(reqs) == 3
    # The re-ask states the problem; the tools array is the first request's, unchanged.
    assert "give exactly one per claim" in reqs[2].body["messages"][-1]["content"]
    assert reqs[2].body["tools"] == reqs[1].body["tools"]


# -- context_entity_recall ----------------------------------------------------------------------


def _angle(degrees: float) -> list[float]:
    rad = math.radians(degrees)
    return [math.cos(rad), math.sin(rad)]


ENTITY_ANGLES = {"Paris": 0.0, "Eiffel Tower": 100.0, "France": 20.0, "1889": 95.0}


def test_context_entity_recall_two_concurrent_extractions_then_list_contains(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(
        _route(
            {
                "EXP-ent": tool_call({"entities": ["Paris", "France", "1889"]}, usage=(30, 6)),
                "CTX-ent": tool_call({"entities": ["Paris", "Eiffel Tower"]}, usage=(50, 8)),
            },
            wait=0.6,
        )
    )
    judge_server.set_default(
        embeddings(_vectors({t: _angle(a) for t, a in ENTITY_ANGLES.items()})),
        endpoint="embeddings",
    )
    result = score(
        "context_entity_recall",
        output=None,
        expected="EXP-ent: the tower opened in Paris, France in 1889.",
        context=["CTX-ent: Paris", "has the Eiffel Tower."],
    )
    # Similarities (context entity x expected entity), rescaled from 0.7: Paris-Paris 1;
    # Eiffel Tower-1889 at 5 degrees; every other pair is below 0.7 or worse than these. The
    # optimal one-to-one assignment takes those two; France stays unmatched; D = 3 expected.
    expected_value = (1.0 + _rescaled(math.cos(math.radians(5.0)))) / 3
    assert result.value == pytest.approx(expected_value, abs=1e-9)
    assert result.metadata["expected_entities"] == ["Paris", "France", "1889"]
    assert result.metadata["context_entities"] == ["Paris", "Eiffel Tower"]
    pairs = {(p["output"], p["expected"]) for p in result.metadata["list_contains"]["pairs"]}
    assert pairs == {("Paris", "Paris"), ("Eiffel Tower", "1889")}

    chats = _chat(judge_server)
    assert [_tool(r) for r in chats] == ["extract_entities", "extract_entities"]
    # The context's prompt first (the calls arrive in any order).
    prompts = sorted((_prompt(r) for r in chats), key=lambda p: "CTX-ent" not in p)
    assert "CTX-ent: Paris\nhas the Eiffel Tower." in prompts[0] and "EXP-ent" not in prompts[0]
    assert "EXP-ent: the tower" in prompts[1] and "CTX-ent" not in prompts[1]
    # Both extractions were in flight at once.
    a, b = chats
    assert a.finished_at is not None and b.received_at < a.finished_at
    assert judge_server.max_in_flight >= 2
    # One batched embeddings request for the distinct entities; the pairwise scorings hit the cache.
    (emb,) = judge_server.requests_to("embeddings")
    assert sorted(emb.body["input"]) == sorted(ENTITY_ANGLES)
    assert emb.body["model"] == "text-embedding-3-small"
    assert result.usage is not None
    assert result.usage.calls == 3
    # The test server counts the words of embedded texts as their prompt tokens.
    assert result.usage.prompt_tokens == 30 + 50 + sum(len(t.split()) for t in ENTITY_ANGLES)
    assert result.usage.completion_tokens == 6 + 8


def test_context_entity_recall_embedding_model_option_reaches_the_endpoint(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(
        _route(
            {
                "EXP-m": tool_call({"entities": ["Paris"]}),
                "CTX-m": tool_call({"entities": ["Paris"]}),
            }
        )
    )
    result = score(
        "context_entity_recall",
        output=None,
        expected="EXP-m Paris",
        context="CTX-m Paris",
        embedding_model="openai:my-embedder",
    )
    assert result.value == pytest.approx(1.0, abs=1e-9)
    (emb,) = judge_server.requests_to("embeddings")
    assert emb.body["model"] == "my-embedder"
    assert emb.body["input"] == ["Paris"]


def test_context_entity_recall_with_a_string_pairwise_scorer_uses_it(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(
        _route(
            {
                "EXP-lev": tool_call({"entities": ["Paris", "Lyon"]}),
                "CTX-lev": tool_call({"entities": ["Paris"]}),
            }
        )
    )
    result = score(
        "context_entity_recall",
        output=None,
        expected="EXP-lev",
        context="CTX-lev",
        pairwise_scorer="levenshtein",
    )
    # Paris-Paris = 1 (levenshtein), Lyon unmatched, D = 2 expected entities.
    assert result.value == pytest.approx(0.5, abs=1e-12)
    assert judge_server.requests_to("embeddings") == []


@pytest.mark.parametrize(
    ("expected_entities", "context_entities", "value"),
    [([], [], 1.0), (["Paris"], [], 0.0), ([], ["Paris"], 0.0)],
)
def test_context_entity_recall_with_no_entities_follows_list_contains(
    judge_server: OpenAITestServer,
    judge_ctx: ScoringContext,
    expected_entities: list[str],
    context_entities: list[str],
    value: float,
) -> None:
    judge_server.set_default(
        _route(
            {
                "EXP-none": tool_call({"entities": expected_entities}),
                "CTX-none": tool_call({"entities": context_entities}),
            }
        )
    )
    result = score("context_entity_recall", output=None, expected="EXP-none", context="CTX-none")
    assert result.value == value
    assert len(_chat(judge_server)) == 2
    assert judge_server.requests_to("embeddings") == []


def test_context_entity_recall_does_not_send_blank_texts(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"entities": ["Paris"]}))
    result = score("context_entity_recall", output=None, expected="EXP Paris", context=[])
    assert result.value == 0.0
    assert result.metadata["context_entities"] == []
    assert result.metadata["empty_context"] is True
    (req,) = _chat(judge_server)
    assert "EXP Paris" in _prompt(req)

    judge_server.clear()
    both_blank = score("context_entity_recall", output=None, expected=" ", context="")
    assert both_blank.value == 1.0  # list_contains: both lists empty
    assert judge_server.requests == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("no_such_scorer", "unknown scorer"),
        # the one resolution's message (pytest_llmeval.engine.registry.resolve_scorer)
        (5, "must be a registered scorer name, a Scorer class or a Scorer instance"),
    ],
)
def test_context_entity_recall_bad_pairwise_scorer_is_a_config_error(
    value: Any, problem: str
) -> None:
    with pytest.raises(ScorerConfigError) as info:
        rag.ContextEntityRecall(pairwise_scorer=value)
    assert info.value.option == "pairwise_scorer"
    assert problem in str(info.value)


# -- answer_relevancy ---------------------------------------------------------------------------

QUESTION = "Q-rel: what is the capital of France?"
GENERATED = {
    "Which city is the capital of France?": 0.95,
    "What is France's capital?": 0.9,
    "Where is the Eiffel Tower?": 0.8,
}


def _question_vectors() -> Callable[[str], Sequence[float]]:
    table: dict[str, Sequence[float]] = {QUESTION: [1.0, 0.0]}
    table.update({q: _unit(c) for q, c in GENERATED.items()})
    return _vectors(table)


def test_answer_relevancy_three_concurrent_generations_at_temperature_half(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        *(
            delay(0.6, tool_call({"question": q, "noncommittal": 0}, usage=(20, 5)))
            for q in GENERATED
        )
    )
    judge_server.set_default(embeddings(_question_vectors()), endpoint="embeddings")
    result = score(
        "answer_relevancy",
        output="OUT-rel: Paris is the capital.",
        input=QUESTION,
        context=["CTX-rel one", "CTX-rel two"],
    )
    # mean of the rescaled cosines: ((0.95-0.7) + (0.9-0.7) + (0.8-0.7)) / 0.3 / 3
    expected_value = sum(_rescaled(c) for c in GENERATED.values()) / 3
    assert expected_value == pytest.approx(0.6111111111, abs=1e-9)
    assert result.value == pytest.approx(expected_value, abs=1e-9)
    questions = result.metadata["questions"]
    assert sorted(q["question"] for q in questions) == sorted(GENERATED)
    assert all(q["noncommittal"] == 0 for q in questions)
    by_question = dict(
        zip((q["question"] for q in questions), result.metadata["similarity"], strict=True)
    )
    for q, cos in GENERATED.items():
        assert by_question[q] == pytest.approx(_rescaled(cos), abs=1e-9)
    assert result.metadata["temperature"] == 0.5

    chats = _chat(judge_server)
    assert len(chats) == 3
    for req in chats:
        assert _tool(req) == "generate_question"
        assert req.body["temperature"] == 0.5
        prompt = _prompt(req)
        assert "OUT-rel: Paris is the capital." in prompt
        assert "CTX-rel one\nCTX-rel two" in prompt
        assert "Q-rel" not in prompt  # the question is what the judge must reconstruct
    assert judge_server.max_in_flight == 3
    # The run's seed is 0: each sample gets its own seed so that the three can differ.
    assert sorted(r.body["seed"] for r in chats) == [0, 1, 2]
    last_start = max(r.received_at for r in chats)
    assert all(r.finished_at is not None and last_start < r.finished_at for r in chats)
    (emb,) = judge_server.requests_to("embeddings")
    assert sorted(emb.body["input"]) == sorted([*GENERATED, QUESTION])
    assert result.usage is not None
    assert result.usage.calls == 4
    assert result.usage.prompt_tokens == 3 * 20 + sum(
        len(t.split()) for t in [*GENERATED, QUESTION]
    )
    assert result.usage.completion_tokens == 3 * 5


def test_answer_relevancy_any_noncommittal_question_scores_zero(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"question": "Which city is the capital of France?", "noncommittal": 0}),
        tool_call({"question": "What is France's capital?", "noncommittal": 1}),
        tool_call({"question": "Where is the Eiffel Tower?", "noncommittal": 0}),
    )
    result = score("answer_relevancy", output="I'm not sure.", input=QUESTION, context="C")
    assert result.value == 0.0
    assert result.metadata["noncommittal"] is True
    assert sum(q["noncommittal"] for q in result.metadata["questions"]) == 1
    assert len(_chat(judge_server)) == 3
    assert judge_server.requests_to("embeddings") == []


def test_answer_relevancy_strictness_and_temperature_options(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"question": "Which city is the capital of France?", "noncommittal": 0}),
        tool_call({"question": "Which city is the capital of France?", "noncommittal": 0}),
    )
    judge_server.set_default(embeddings(_question_vectors()), endpoint="embeddings")
    result = score(
        "answer_relevancy",
        output="Paris.",
        input=QUESTION,
        context="",
        strictness=2,
        temperature=0.1,
        embedding_model="openai:emb-x",
    )
    assert result.value == pytest.approx(_rescaled(0.95), abs=1e-9)
    chats = _chat(judge_server)
    assert len(chats) == 2
    assert {r.body["temperature"] for r in chats} == {0.1}
    (emb,) = judge_server.requests_to("embeddings")
    assert emb.body["model"] == "emb-x"
    assert emb.body["input"] == ["Which city is the capital of France?", QUESTION]


def test_answer_relevancy_with_a_blank_output_is_zero_without_a_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    result = score("answer_relevancy", output="  ", input=QUESTION, context="C")
    assert result.value == 0.0
    assert result.metadata["blank_output"] is True
    assert judge_server.requests == []


def test_answer_relevancy_rejects_an_empty_question(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    empty = tool_call({"question": "", "noncommittal": 0})
    judge_server.enqueue(empty, empty)
    with pytest.raises(JudgeError):
        score("answer_relevancy", output="Paris.", input=QUESTION, context="C", strictness=1)


@pytest.mark.parametrize(
    ("option", "value"),
    [("strictness", 0), ("strictness", "3"), ("strictness", True), ("strictness", 1.5),
     ("temperature", 3), ("temperature", "hot"), ("embedding_model", ""),
     ("embedding_model", 5)],
)  # fmt: skip
def test_answer_relevancy_bad_options_are_config_errors(option: str, value: Any) -> None:
    with pytest.raises(ScorerConfigError) as info:
        rag.AnswerRelevancy(**{option: value})
    assert info.value.option == option


# -- answer_correctness -------------------------------------------------------------------------

FACTS = {
    "TP": ["Paris is the capital of France.", "Paris is on the Seine."],
    "FP": ["Paris has 30 million people."],
    "FN": ["Paris hosted the 1900 Olympics."],
}
ANSWER = "OUT-corr: Paris, on the Seine, capital of France, 30 million people."
TRUTH = "EXP-corr: Paris is the capital of France, on the Seine; it hosted the 1900 Olympics."


def _answer_vectors(cos: float) -> Callable[[str], Sequence[float]]:
    return _vectors({ANSWER: [1.0, 0.0], TRUTH: _unit(cos)})


def test_answer_correctness_classification_and_similarity_run_concurrently(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(delay(0.6, tool_call(FACTS, usage=(80, 30))))
    # Both replies are slow, so that run one after the other they could not overlap.
    judge_server.set_default(delay(0.6, embeddings(_answer_vectors(0.85))), endpoint="embeddings")
    result = score("answer_correctness", output=ANSWER, expected=TRUTH, input="Q-corr")
    # F1 = 2 / (2 + 0.5 * (1 + 1)) = 2/3; similarity = (0.85 - 0.7) / 0.3 = 0.5;
    # score = 0.75 * 2/3 + 0.25 * 0.5 = 0.625
    assert result.value == pytest.approx(0.625, abs=1e-9)
    assert result.metadata["factuality"] == FACTS
    assert result.metadata["factuality_score"] == pytest.approx(2 / 3, abs=1e-12)
    assert result.metadata["answer_similarity_score"] == pytest.approx(0.5, abs=1e-9)
    (chat,) = _chat(judge_server)
    assert _tool(chat) == "classify_statements"
    prompt = _prompt(chat)
    for marker in ("Q-corr", "OUT-corr", "EXP-corr"):
        assert marker in prompt
    assert set(_params(chat)["required"]) == {"TP", "FP", "FN"}
    (emb,) = judge_server.requests_to("embeddings")
    assert emb.body["input"] == [ANSWER, TRUTH]
    # The embeddings request was answered while the classification was still running.
    assert chat.finished_at is not None and emb.finished_at is not None
    assert emb.received_at < chat.finished_at and chat.received_at < emb.finished_at
    assert judge_server.max_in_flight == 2
    assert result.usage is not None
    assert result.usage.calls == 2
    assert result.usage.prompt_tokens == 80 + len(ANSWER.split()) + len(TRUTH.split())


def test_answer_correctness_weights(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(tool_call(FACTS))
    judge_server.set_default(embeddings(_answer_vectors(0.85)), endpoint="embeddings")
    result = score(
        "answer_correctness",
        output=ANSWER,
        expected=TRUTH,
        input="Q",
        factuality_weight=1,
        answer_similarity_weight=3,
    )
    assert result.value == pytest.approx((1 * (2 / 3) + 3 * 0.5) / 4, abs=1e-9)


def test_answer_correctness_with_similarity_weight_zero_makes_no_embedding_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call(FACTS))
    result = score(
        "answer_correctness", output=ANSWER, expected=TRUTH, input="Q", answer_similarity_weight=0
    )
    assert result.value == pytest.approx(2 / 3, abs=1e-12)
    assert result.metadata["answer_similarity_score"] is None
    assert judge_server.requests_to("embeddings") == []


def test_answer_correctness_with_factuality_weight_zero_makes_no_judge_call(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(embeddings(_answer_vectors(0.94)), endpoint="embeddings")
    result = score(
        "answer_correctness", output=ANSWER, expected=TRUTH, input="Q", factuality_weight=0
    )
    assert result.value == pytest.approx((0.94 - 0.7) / 0.3, abs=1e-9)
    assert result.metadata["factuality"] is None
    assert _chat(judge_server) == []


def test_answer_correctness_without_any_statement_has_f1_zero(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"TP": [], "FP": [], "FN": []}))
    judge_server.set_default(embeddings(_answer_vectors(1.0)), endpoint="embeddings")
    result = score("answer_correctness", output=ANSWER, expected=TRUTH, input="Q")
    assert result.metadata["no_statements"] is True
    assert result.metadata["factuality_score"] == 0.0
    assert result.value == pytest.approx(0.25, abs=1e-9)


def test_answer_correctness_takes_a_custom_answer_similarity_scorer(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    from pytest_llmeval.scorers.embedding import EmbeddingSimilarity

    judge_server.enqueue(tool_call(FACTS))
    judge_server.set_default(embeddings(_answer_vectors(0.85)), endpoint="embeddings")
    result = score(
        "answer_correctness",
        output=ANSWER,
        expected=TRUTH,
        input="Q",
        answer_similarity=EmbeddingSimilarity(expected_min=0.5),
    )
    # similarity (0.85 - 0.5) / 0.5 = 0.7
    assert result.value == pytest.approx(0.75 * (2 / 3) + 0.25 * 0.7, abs=1e-9)


@pytest.mark.parametrize(
    ("options", "option"),
    [({"factuality_weight": -1}, "factuality_weight"),
     ({"answer_similarity_weight": "big"}, "answer_similarity_weight"),
     ({"answer_similarity_weight": float("nan")}, "answer_similarity_weight"),
     ({"factuality_weight": 0, "answer_similarity_weight": 0}, "factuality_weight"),
     ({"answer_similarity": "levenshtein"}, "answer_similarity")],
)  # fmt: skip
def test_answer_correctness_bad_options_are_config_errors(
    options: dict[str, Any], option: str
) -> None:
    with pytest.raises(ScorerConfigError) as info:
        rag.AnswerCorrectness(**options)
    assert info.value.option == option


# -- identity -------------------------------------------------------------------------------------


def test_identity_carries_prompt_judge_and_embedder(judge_ctx: ScoringContext) -> None:
    ident = rag.AnswerRelevancy().identity(judge_ctx)
    extra = ident["extra"]
    assert extra["judge"]["model"] == "test-judge"
    assert extra["judge"]["temperature"] == 0.5
    assert len(extra["prompt_sha256"]) == 64  # the one prompt hash of the judge step
    assert extra["embedding_similarity"]["extra"]["embedder"]["model"] == "text-embedding-3-small"
    other = rag.AnswerRelevancy(embedding_model="openai:other").identity(judge_ctx)
    assert other != ident
    assert "api_key" not in json.dumps(rag.Faithfulness(api_key="sk-x").identity(judge_ctx))
    # Each scorer's prompts hash differently.
    hashes = {
        cls().identity(judge_ctx)["extra"]["prompt_sha256"]
        for cls in (rag.ContextRelevancy, rag.ContextRecall, rag.ContextPrecision, rag.Faithfulness)
    }
    assert len(hashes) == 4


def test_answer_relevancy_without_a_seed_sends_none(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    import dataclasses

    from pytest_llmeval.engine.context import ScoringContext as Ctx
    from pytest_llmeval.engine.context import set_context

    settings = judge_ctx.settings
    unseeded = Ctx(
        dataclasses.replace(settings, judge=dataclasses.replace(settings.judge, seed=None))
    )
    prev = set_context(unseeded)
    try:
        judge_server.set_default(tool_call({"question": QUESTION, "noncommittal": 0}))
        result = score("answer_relevancy", output="Paris.", input=QUESTION, context="C")
    finally:
        set_context(prev)
        unseeded.close()
    assert result.value == 1.0  # the generated question is the input itself: cosine 1
    assert all("seed" not in r.body for r in _chat(judge_server))
    assert len(_chat(judge_server)) == 3


def test_context_entity_recall_pairwise_scorer_by_name_still_batches_embeddings(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(
        _route(
            {
                "EXP-n": tool_call({"entities": ["Paris", "France"]}),
                "CTX-n": tool_call({"entities": ["Paris", "Eiffel Tower", "1889"]}),
            }
        )
    )
    judge_server.set_default(
        embeddings(_vectors({t: _angle(a) for t, a in ENTITY_ANGLES.items()})),
        endpoint="embeddings",
    )
    result = score(
        "context_entity_recall",
        output=None,
        expected="EXP-n",
        context="CTX-n",
        pairwise_scorer="embedding_similarity",
    )
    # Paris-Paris 1; France's best remaining partner is 1889 (75 degrees) or Eiffel Tower (80):
    # both below 0.7, so 0. D = 2 expected entities.
    assert result.value == pytest.approx(0.5, abs=1e-9)
    (emb,) = judge_server.requests_to("embeddings")
    assert sorted(emb.body["input"]) == sorted(ENTITY_ANGLES)


def test_the_async_path_on_a_caller_loop(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    import asyncio

    from pytest_llmeval import ascore

    judge_server.set_default(
        _route(
            {
                "EXP-as": tool_call({"entities": ["Paris", "France", "1889"]}),
                "CTX-as": tool_call({"entities": ["Paris", "Eiffel Tower"]}),
            }
        )
    )
    judge_server.set_default(
        embeddings(_vectors({t: _angle(a) for t, a in ENTITY_ANGLES.items()})),
        endpoint="embeddings",
    )
    result = asyncio.run(
        ascore("context_entity_recall", output=None, expected="EXP-as", context="CTX-as")
    )
    assert result.value == pytest.approx(
        (1.0 + _rescaled(math.cos(math.radians(5.0)))) / 3, abs=1e-9
    )
    assert len(_chat(judge_server)) == 2


def test_results_round_trip_through_the_result_cache(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    import dataclasses

    from pytest_llmeval.engine.context import ScoringContext as Ctx
    from pytest_llmeval.engine.context import set_context

    cached = Ctx(dataclasses.replace(judge_ctx.settings, cache_mode="use"))
    prev = set_context(cached)
    try:
        stmts = ["Paris is the capital of France."]
        verdicts = [{"statement": stmts[0], "reason": "stated", "verdict": 1}]
        judge_server.enqueue(tool_call({"statements": stmts}), tool_call({"verdicts": verdicts}))
        first = score("faithfulness", output="Paris.", input="Q", context="Paris is the capital.")
        again = score("faithfulness", output="Paris.", input="Q", context="Paris is the capital.")
    finally:
        set_context(prev)
        cached.close()
    assert (first.cached, again.cached) == (False, True)
    assert again.value == first.value == 1.0
    assert again.metadata == first.metadata
    assert len(_chat(judge_server)) == 2
