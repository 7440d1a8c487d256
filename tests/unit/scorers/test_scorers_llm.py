"""The Autoevals classifier scorers (pytest_llmeval/scorers/llm.py), through the scripted
OpenAI-compatible test server with the real ``openai`` client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_llmeval import score
from pytest_llmeval.core.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.judge.prompt import choose_nonce
from pytest_llmeval.scorers.llm import (
    Battle,
    ClassifierScorer,
    Factuality,
    Humor,
    render_template,
)
from pytest_llmeval.testing import OpenAITestServer, text, tool_call

# The decision structure of each scorer, written out independently of the classes: the choices
# in the order the judge sees them and what each scores (SCORERS.md).
CHOICE_SCORES: dict[str, dict[str, float]] = {
    "factuality": {"A": 0.4, "B": 0.6, "C": 1.0, "D": 0.0, "E": 1.0},
    "battle": {"Yes": 1.0, "No": 0.0},
    "closed_qa": {"Y": 1.0, "N": 0.0},
    "humor": {"Yes": 1.0, "No": 0.0, "Unsure": 0.5},
    "security": {"Yes": 0.0, "No": 1.0, "Unsure": 0.5},
    "sql": {"Correct": 1.0, "Incorrect": 0.0},
    "summary": {"A": 0.0, "B": 1.0},
    "translation": {"Y": 1.0, "N": 0.0},
    "possible": {"A": 0.0, "B": 1.0},
}

# Inputs per scorer, each a distinctive marker so we can find it in the rendered prompt.
INPUTS: dict[str, dict[str, Any]] = {
    "factuality": {"input": "Q-capital", "expected": "EXP-paris", "output": "OUT-paris-city"},
    "battle": {"instructions": "INSTR-write", "output": "OUT-resp1", "expected": "EXP-resp2"},
    "closed_qa": {"input": "Q-task", "output": "OUT-sub", "criteria": "CRIT-polite"},
    "humor": {"output": "OUT-joke"},
    "security": {"output": "OUT-rm-rf"},
    "sql": {"input": "Q-users", "expected": "EXP-select", "output": "OUT-select"},
    "summary": {"input": "IN-long-text", "expected": "EXP-sumA", "output": "OUT-sumB"},
    "translation": {
        "language": "LANG-German",
        "input": "IN-hallo",
        "expected": "EXP-hello",
        "output": "OUT-hi",
    },
    "possible": {"input": "Q-impossible", "output": "OUT-attempt"},
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "factuality": ("input", "expected", "output"),
    "battle": ("output", "expected"),
    "closed_qa": ("input", "output", "criteria"),
    "humor": ("output",),
    "security": ("output",),
    "sql": ("input", "expected", "output"),
    "summary": ("input", "expected", "output"),
    "translation": ("language", "input", "expected", "output"),
    "possible": ("input", "output"),
}

CASES = [
    (name, choice, value)
    for name, table in CHOICE_SCORES.items()
    for choice, value in table.items()
]


def _score(name: str, inputs: dict[str, Any], **options: Any) -> Any:
    fields = dict(inputs)
    output = fields.pop("output", None)
    return score(name, output=output, **fields, **options)


def _prompt(server: OpenAITestServer, index: int = -1) -> str:
    messages = server.requests_to("chat")[index].body["messages"]
    assert len(messages) >= 1
    content = messages[0]["content"]
    assert isinstance(content, str)
    return content


@pytest.mark.parametrize(("name", "choice", "expected_value"), CASES)
def test_each_choice_gives_its_score_and_the_request_is_a_forced_select_choice(
    judge_server: OpenAITestServer,
    judge_ctx: ScoringContext,
    name: str,
    choice: str,
    expected_value: float,
) -> None:
    judge_server.enqueue(tool_call({"reasons": f"step 1, step 2, so {choice}", "choice": choice}))

    result = _score(name, INPUTS[name])

    assert result.value == expected_value
    assert result.rationale == f"step 1, step 2, so {choice}"
    assert result.metadata["choice"] == choice
    assert result.usage is not None and result.usage.calls == 1

    (req,) = judge_server.requests_to("chat")
    body = req.body
    assert body["model"] == "test-judge"
    assert body["temperature"] == 0.0
    assert body["tool_choice"] == {"type": "function", "function": {"name": "select_choice"}}
    (tool,) = body["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "select_choice"
    params = tool["function"]["parameters"]
    assert params["required"] == ["reasons", "choice"]
    assert params["properties"]["reasons"]["type"] == "string"
    assert params["properties"]["choice"]["enum"] == list(CHOICE_SCORES[name])
    assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
    prompt = _prompt(judge_server)
    for value in INPUTS[name].values():
        assert value in prompt
    assert "select_choice" in prompt
    assert ", ".join(CHOICE_SCORES[name]) in prompt


@pytest.mark.parametrize("name", sorted(CHOICE_SCORES))
def test_declared_inputs_directions_and_range(name: str) -> None:
    cls = default_registry.get(name)
    assert issubclass(cls, ClassifierScorer)
    assert cls.required_inputs == REQUIRED[name]
    assert cls.uses_judge is True
    assert cls.higher_is_better is True
    assert cls.score_range == (0.0, 1.0)
    assert dict(cls.choice_scores) == CHOICE_SCORES[name]


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("Factuality", "factuality"), ("ClosedQA", "closed_qa"), ("SQL", "sql"),
     ("Sql", "sql"), ("Translation", "translation"), ("Possible", "possible")],
)  # fmt: skip
def test_reference_spellings_resolve(spelling: str, name: str) -> None:
    assert default_registry.get(spelling).name == name


@pytest.mark.parametrize(
    ("name", "field"), [(n, f) for n, fields in REQUIRED.items() for f in fields]
)
def test_a_missing_input_is_an_input_error_naming_the_field(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, name: str, field: str
) -> None:
    inputs = {k: v for k, v in INPUTS[name].items() if k != field}
    with pytest.raises(ScorerInputError) as info:
        _score(name, inputs)
    assert info.value.field == field
    assert info.value.scorer == name
    assert field in str(info.value)
    assert judge_server.requests_to("chat") == []


def test_battle_takes_input_in_place_of_instructions(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "r1 is clearer", "choice": "Yes"}))
    result = score("battle", input="INSTR-from-input", output="R1", expected="R2")
    assert result.value == 1.0
    assert "INSTR-from-input" in _prompt(judge_server)


def test_battle_without_instructions_or_input_names_instructions(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("battle", output="R1", expected="R2")
    assert info.value.field == "instructions"
    assert "input=" in str(info.value)
    assert judge_server.requests_to("chat") == []


def test_without_chain_of_thought_the_tool_asks_only_for_the_choice(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"choice": "B"}))
    result = _score("factuality", INPUTS["factuality"], use_cot=False)
    assert result.value == 0.6
    assert result.rationale is None
    params = judge_server.requests_to("chat")[0].body["tools"][0]["function"]["parameters"]
    assert set(params["properties"]) == {"choice"}
    assert params["required"] == ["choice"]
    assert params["properties"]["choice"]["enum"] == ["A", "B", "C", "D", "E"]
    assert "reasons" not in _prompt(judge_server)


def test_an_invalid_choice_is_asked_again_once_then_a_judge_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"reasons": "hmm", "choice": "Maybe"}),
        tool_call({"reasons": "hmm", "choice": "Perhaps"}),
    )
    with pytest.raises(JudgeError) as info:
        _score("humor", INPUTS["humor"])
    assert info.value.scorer == "humor"
    assert "invalid twice" in str(info.value)
    reqs = judge_server.requests_to("chat")
    assert len(reqs) == 2
    # The re-ask repeats the conversation and says what was wrong.
    second = reqs[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert "Maybe" in second[1]["content"]
    assert "select_choice" in second[2]["content"]


def test_an_invalid_choice_then_a_valid_one_scores_the_valid_one(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(
        tool_call({"reasons": "x", "choice": "maybe"}),
        tool_call({"reasons": "not funny", "choice": "No"}, usage=(30, 7)),
    )
    result = _score("humor", INPUTS["humor"])
    assert result.value == 0.0
    assert result.rationale == "not funny"
    assert result.usage is not None
    assert result.usage.calls == 2
    assert len(judge_server.requests_to("chat")) == 2


def test_malformed_tool_arguments_twice_are_a_judge_error(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call('{"choice": "Y"'), tool_call("not json"))
    with pytest.raises(JudgeError):
        _score("closed_qa", INPUTS["closed_qa"])
    assert len(judge_server.requests_to("chat")) == 2


def test_usage_comes_from_the_reply(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "same", "choice": "Correct"}, usage=(120, 15)))
    result = _score("sql", INPUTS["sql"])
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (120, 15)
    assert result.usage.calls == 1


def test_per_scorer_judge_options_reach_the_request(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "ok", "choice": "Y"}))
    result = _score("translation", INPUTS["translation"], model="other-judge", temperature=0.3)
    assert result.value == 1.0
    body = judge_server.requests_to("chat")[0].body
    assert body["model"] == "other-judge"
    assert body["temperature"] == 0.3


def test_json_mode_puts_the_schema_in_the_prompt_and_reads_the_json_reply(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(text(json.dumps({"reasons": "harmless", "choice": "No"})))
    result = _score("security", INPUTS["security"], mode="json")
    assert result.value == 1.0
    assert result.rationale == "harmless"
    body = judge_server.requests_to("chat")[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert "tools" not in body
    assert '"Unsure"' in body["messages"][-1]["content"]


def test_values_are_rendered_once_and_non_strings_as_json(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "C"}))
    score(
        "factuality",
        input={"q": "größe", "n": [1, 2]},
        expected="literal {{output}} stays",
        output=42,
    )
    prompt = _prompt(judge_server)
    # The blocks' suffix comes from the rendered values, in the template's order.
    nonce = choose_nonce(['{"q": "größe", "n": [1, 2]}', "literal {{output}} stays", "42"])
    assert f'<question_{nonce}>\n{{"q": "größe", "n": [1, 2]}}\n</question_{nonce}>' in prompt
    assert (
        f"<expert_answer_{nonce}>\nliteral {{{{output}}}} stays\n</expert_answer_{nonce}>" in prompt
    )
    assert f"<submitted_answer_{nonce}>\n42\n</submitted_answer_{nonce}>" in prompt


def test_render_template_joins_a_context_list_and_rejects_unknown_placeholders() -> None:
    block = "<c>\n{{context}}\n</c>\n{{data_notice}}"
    nonce = choose_nonce(["a\n\nb"])
    assert render_template(block, {"context": ["a", "b"]}).startswith(
        f"<c_{nonce}>\na\n\nb\n</c_{nonce}>\n"
    )
    with pytest.raises(KeyError):
        render_template("{{missing}}", {})
    with pytest.raises(KeyError):
        render_template("<m>\n{{missing}}\n</m>\n{{data_notice}}", {})
    # An input outside a block would be undelimited: refused.
    with pytest.raises(ValueError, match="'x' is outside a block"):
        render_template("{{ x }}", {"x": "v"})


def test_use_cot_must_be_a_bool() -> None:
    with pytest.raises(ScorerConfigError) as info:
        Factuality(use_cot="yes")
    assert info.value.option == "use_cot"


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ScorerConfigError) as info:
        Humor(choices=["Yes"])
    assert info.value.option == "choices"


def test_cache_identity_has_the_prompt_hash_and_the_judge(judge_ctx: ScoringContext) -> None:
    cot = Factuality().identity(judge_ctx)
    plain = Factuality(use_cot=False).identity(judge_ctx)
    other = Battle().identity(judge_ctx)
    assert len(cot["extra"]["prompt_sha256"]) == 64
    assert cot["extra"]["prompt_sha256"] != plain["extra"]["prompt_sha256"]
    assert cot["extra"]["prompt_sha256"] != other["extra"]["prompt_sha256"]
    assert cot["extra"]["judge"]["model"] == "test-judge"
    assert cot["extra"]["judge"]["temperature"] == 0.0
    assert Factuality(model="m2").identity(judge_ctx)["extra"]["judge"]["model"] == "m2"
    # Stable across instances (a cache key must not change between runs).
    assert Factuality().identity(judge_ctx) == cot


# -- reference fidelity: closed_qa, possible, sql and translation ask Autoevals 0.4.1's question
# (in our words). Per scorer: phrases of our wording that carry the reference's question, and
# phrases of the version-2 question that must be gone.
REFERENCE_QUESTION: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "closed_qa": (
        (
            "Does the submission meet the criterion?",
            "Judge the criterion and nothing else",
            "a submission that does not answer the task, or answers it only in part, still meets "
            "the criterion unless the criterion itself asks for that",
            "Choose Y (yes) or N (no).",
        ),
        ("answer the task and satisfy",),
    ),
    "possible": (
        (
            "Does the answer say that the task is impossible, or does it offer a solution?",
            "a direct answer, instructions, steps in sequence, a list",
            "Only an answer that states that the task cannot be done is (A)",
            "even when it declines the task or the solution is wrong",
            "(A) The answer states that the task is impossible.",
            "(B) The answer gives a solution or instructions for the task (right or wrong), or "
            "otherwise does not say that the task is impossible (for example, it declines to "
            "help).",
            "Choose A or B.",
        ),
        ("refuses it", "without attempting it"),
    ),
    "sql": (
        (
            "Compare what the submitted SQL computes with what the expert SQL computes.",
            "the names and order of the output columns do not matter",
            "Correct: run against the database, the two queries give the same result, apart from "
            "how the output columns are named or ordered.",
            "or the submitted SQL would stop with an error when run",
            "Choose Correct or Incorrect.",
        ),
        ("on any database", "order of equivalent clauses"),
    ),
    "translation": (
        (
            "Does the submitted translation have the same meaning as the expert translation?",
            "Differences of style and punctuation do not matter.",
            "uses the same nouns and the same tenses as the expert translation",
            "none of its verbs or adjectives changes the meaning",
            "Choose Y (yes) or N (no).",
        ),
        ("Wording may differ.",),
    ),
}


@pytest.mark.parametrize(
    ("name", "choice", "expected_value"),
    [case for case in CASES if case[0] in REFERENCE_QUESTION],
)
def test_the_four_audited_classifiers_ask_the_reference_question(
    judge_server: OpenAITestServer,
    judge_ctx: ScoringContext,
    name: str,
    choice: str,
    expected_value: float,
) -> None:
    judge_server.enqueue(tool_call({"reasons": "checked", "choice": choice}))

    result = _score(name, INPUTS[name])

    # The choice -> score mapping is Autoevals' (unchanged by the new wording).
    assert result.value == expected_value
    assert result.metadata["choice"] == choice
    prompt = _prompt(judge_server)
    present, gone = REFERENCE_QUESTION[name]
    for phrase in present:
        assert phrase in prompt, phrase
    for phrase in gone:
        assert phrase not in prompt, phrase
    # The judge step's layout: the question is part of the fixed instructions, before the case's
    # data blocks (a prefix shared by every case); the choices are offered in the reference's
    # order, in the prompt and in the tool's enum.
    assert prompt.index(present[0]) < prompt.index(INPUTS[name]["output"])
    assert f"exactly one of: {', '.join(CHOICE_SCORES[name])}." in prompt
    body = judge_server.requests_to("chat")[0].body
    enum = body["tools"][0]["function"]["parameters"]["properties"]["choice"]["enum"]
    assert enum == list(CHOICE_SCORES[name])


def test_the_translation_prompt_names_the_source_language(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "wrong tense", "choice": "N"}))
    result = score(
        "translation",
        language="Spanish",
        input="Mañana iré al mercado.",
        expected="Tomorrow I will go to the market.",
        output="Yesterday I went to the market.",
    )
    assert result.value == 0.0
    prompt = _prompt(judge_server)
    nonce = choose_nonce(
        [
            "Spanish",
            "Mañana iré al mercado.",
            "Tomorrow I will go to the market.",
            "Yesterday I went to the market.",
        ]
    )
    assert f"<source_language_{nonce}>\nSpanish\n</source_language_{nonce}>" in prompt
    assert "translated into English" in prompt


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("factuality", "3"),
        ("battle", "3"),
        ("humor", "3"),
        ("security", "3"),
        ("summary", "3"),
        ("closed_qa", "4"),
        ("possible", "4"),
        ("sql", "4"),
        ("translation", "4"),
    ],
)
def test_versions_mark_the_changed_questions(
    judge_ctx: ScoringContext, name: str, version: str
) -> None:
    # 3: the judge step's layout; 4: the question changed (reference fidelity; cache entries of
    # older versions are not reused).
    scorer = default_registry.get(name)()
    assert scorer.version == version
    assert scorer.identity(judge_ctx)["version"] == version
