"""The judge step (pytest_llmeval/judge/step.py): the prompt layout that providers' prompt
caching can serve, the one bad-verdict policy of claims-then-verdicts, template checks, the
prompts as package data, and the step as a public API, through the test server."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

import pytest
from judge_parity import CONV, TRAJECTORY, reply
from paths import ROOT

from pytest_llmeval import JudgeError, Score, Scorer, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge.prompt import data_notice
from pytest_llmeval.judge.step import (
    JudgeStep,
    choice_step,
    load_prompts,
    step_identity,
)
from pytest_llmeval.testing import OpenAITestServer, text, tool_call
from pytest_llmeval.testing.openai_server import ChatReply

# Two cases per scorer whose every value differs.
PAIRS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "factuality": (
        {"input": "Q-one?", "expected": "E-one", "output": "O-one"},
        {"input": "Q-two, longer?", "expected": "E-two", "output": "O-two is different"},
    ),
    "qa_correctness": (
        {"input": "Q-one?", "context": "C-one", "output": "O-one"},
        {"input": "Q-two?", "context": ["C-two", "C-2b"], "output": "O-two"},
    ),
    "hallucination": (
        {"output": "O-one states things.", "context": "C-one"},
        {"output": "O-two states other things.", "context": "C-two"},
    ),
    "faithfulness": (
        {"input": "Q-one?", "output": "O-one", "context": "C-one"},
        {"input": "Q-two?", "output": "O-two", "context": "C-two"},
    ),
    "context_recall": (
        {"input": "Q-one?", "expected": "E-one", "context": "C-one"},
        {"input": "Q-two?", "expected": "E-two", "context": "C-two"},
    ),
    "conversation_relevancy": ({"messages": CONV}, {"messages": [*CONV[:3]]}),
    "task_completion": ({"output": TRAJECTORY}, {"output": TRAJECTORY[:2], "input": "T-two"}),
}


def _json_reply(body: dict[str, Any]) -> ChatReply:
    """``reply`` for json mode: the tool and schema read back from the prompt, the arguments
    sent as the reply's text."""
    if "response_format" not in body:
        return reply(body)
    content = body["messages"][-1]["content"]
    tool = re.search(r"arguments of the function `(\w+)`", content)
    start = content.index("matching this JSON schema:\n")
    schema, _ = json.JSONDecoder().raw_decode(content, start + len("matching this JSON schema:\n"))
    assert tool is not None
    fake = {
        "tool_choice": {"function": {"name": tool.group(1)}},
        "tools": [{"function": {"parameters": schema}}],
    }
    [(_, raw)] = reply(fake).tool_calls or ()
    return text(raw)


def _run(server: OpenAITestServer, name: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    server.clear()
    server.set_default(_json_reply)
    fields = dict(inputs)
    score(name, output=fields.pop("output", None), **fields)
    return [r.body for r in server.requests_to("chat")]


def _case_start(content: str) -> int:
    """Where the case begins: the first data block's opening tag."""
    m = re.search(r"^<[A-Za-z][A-Za-z0-9_]*_[0-9a-f]{8,}>$", content, re.MULTILINE)
    assert m is not None, content
    return m.start()


def _values(inputs: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for v in inputs.values():
        out.extend([v] if isinstance(v, str) else [x for x in v if isinstance(x, str)])
    return out


@pytest.mark.parametrize("mode", ["tool", "json"])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_two_cases_share_the_instructions_and_the_tools_byte_for_byte(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext, name: str, mode: str
) -> None:
    one, two = PAIRS[name]
    if mode == "json":
        one, two = {**one, "mode": "json"}, {**two, "mode": "json"}
    first = _run(judge_server, name, one)
    second = _run(judge_server, name, two)
    # The same kinds of calls, in the same order (the verdict call is the last for the
    # two-step scorers; turn judges make one call per turn, compared pairwise).
    for a, b in zip(first, second, strict=False):
        assert a.get("tools") == b.get("tools")
        if mode == "json":
            assert "tools" not in a and a["response_format"] == {"type": "json_object"}
        [msg_a] = a["messages"]
        [msg_b] = b["messages"]
        prefix_a = msg_a["content"][: _case_start(msg_a["content"])]
        prefix_b = msg_b["content"][: _case_start(msg_b["content"])]
        assert prefix_a == prefix_b
        assert len(prefix_a) > 150
        for value in (*_values(one), *_values(two)):
            if len(value) > 3 and value not in ("json",):
                assert value not in prefix_a
        if mode == "json":  # the schema is stated before the case, not after it
            assert "matching this JSON schema" in prefix_a
            assert "matching this JSON schema" not in msg_a["content"][len(prefix_a) :]


@pytest.mark.parametrize(
    ("name", "inputs", "first", "bad"),
    [
        (
            "faithfulness",
            {"input": "Q", "output": "a and b", "context": "C"},
            {"statements": ["a", "b"]},
            {"verdicts": [{"statement": s, "reason": "r", "verdict": 2} for s in "ab"]},
        ),
        (
            "hallucination",
            {"output": "a and b", "context": "C"},
            {"claims": ["a", "b"]},
            {"verdicts": [{"reasons": "r", "verdict": "probably"} for _ in "ab"]},
        ),
    ],
)
def test_a_malformed_verdict_is_a_judge_error_never_a_score(
    judge_server: OpenAITestServer,
    judge_ctx: ScoringContext,
    name: str,
    inputs: dict[str, Any],
    first: dict[str, Any],
    bad: dict[str, Any],
) -> None:
    judge_server.enqueue(tool_call(first), tool_call(bad), tool_call(bad))
    fields = dict(inputs)
    with pytest.raises(JudgeError) as info:
        score(name, output=fields.pop("output"), **fields)
    assert "invalid twice" in str(info.value) and "verdict" in str(info.value)
    assert len(judge_server.requests_to("chat")) == 3  # claims, verdicts, the one re-ask


def test_the_step_refuses_a_bad_template_when_it_is_made() -> None:
    # The data notice is the step's to add: a template that forgets it still gets it.
    bare = JudgeStep("Judge this.\n\n<text>\n{{output}}\n</text>")
    rendered = bare.render({"output": "O"})
    nonce = re.findall(r"<text_([0-9a-f]+)>", rendered)[0]
    assert rendered.endswith(f"</text_{nonce}>\n\n{data_notice(nonce)}")
    with pytest.raises(ValueError, match="outside a block"):
        JudgeStep("Judge {{output}}.\n\n<text>\n{{output}}\n</text>\n\n{{data_notice}}")
    with pytest.raises(KeyError, match="tool"):
        JudgeStep("Call `{{tool}}`.\n\n<t>\n{{output}}\n</t>\n\n{{data_notice}}")


def test_a_per_case_paragraph_goes_after_the_case_and_instructions_stay_fixed() -> None:
    step = JudgeStep(
        "Check the claims.\n\n<claims>\n{{claims}}\n</claims>\n\n{{data_notice}}\n\n"
        "Give {{count}} verdicts.",
        case_placeholders=("count",),
    )
    one = step.render({"claims": "1. a"}, {"count": "1"})
    two = step.render({"claims": "1. b\n2. c"}, {"count": "2"})
    assert one.startswith("Check the claims.\n\n<claims_")
    assert one.endswith("Give 1 verdicts.") and two.endswith("Give 2 verdicts.")
    assert step.instructions() == "Check the claims."
    assert step.fields == ("claims",)


def test_prompts_are_package_data_loaded_once() -> None:
    folder = ROOT / "pytest_llmeval" / "prompts"
    families = sorted(p.stem for p in folder.glob("*.yaml"))
    assert families == [
        "agents",
        "autoevals",
        "bench",
        "classifier",
        "conversation",
        "g_eval",
        "l3score",
        "rag",
    ]
    for family in families:
        assert load_prompts(family) is load_prompts(family)  # parsed once
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^pytest_llmeval = \[.*"prompts/\*\.yaml".*\]$', section, re.MULTILINE)
    # Every built-in classifier's template and choices come from its family's file.
    from pytest_llmeval.scorers import bench_judges, llm

    assert llm.Factuality.template == load_prompts("autoevals")["factuality"]["template"]
    assert bench_judges.QACorrectness.choice_scores == {"correct": 1.0, "incorrect": 0.0}


# -- the public step: a judge scorer of your own ------------------------------------------------

TONE = choice_step(
    "Is the reply polite?\n\n<reply>\n{{output}}\n</reply>\n\n{{data_notice}}",
    {"Yes": 1.0, "No": 0.0},
)


class StepPolite(Scorer):
    name: ClassVar[str] = "step_polite_test"
    required_inputs: ClassVar[tuple[str, ...]] = ("output",)
    uses_judge: ClassVar[bool] = True

    def extra_identity(self, ctx: ScoringContext) -> dict[str, Any]:
        return step_identity(self, ctx, TONE)

    async def acompute(self, inputs: dict[str, Any], ctx: ScoringContext) -> Score:
        verdict = await TONE.classify(self, ctx, {"output": inputs["output"]})
        return verdict.score(self.name)


def test_a_scorer_built_on_the_public_step(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(tool_call({"reasons": "rude words", "choice": "No"}))
    result = StepPolite().compute({"output": "Go away."}, judge_ctx)
    assert (result.value, result.rationale) == (0.0, "rude words")
    assert result.metadata == {"choice": "No"}
    body = judge_server.requests_to("chat")[0].body
    assert body["tools"][0]["function"]["parameters"]["properties"]["choice"]["enum"] == [
        "Yes",
        "No",
    ]
    assert body["messages"][0]["content"].startswith("Is the reply polite?\n\nAnswer by calling")
    ident = StepPolite().identity(judge_ctx)["extra"]
    assert ident["prompt_sha256"] == TONE.sha256 and ident["judge"]["model"] == "test-judge"


def test_a_judge_you_define_cannot_name_a_field_the_answer_instruction_uses() -> None:
    from pytest_llmeval import ScorerConfigError, llm_classifier

    for field in ("choices", "tool"):
        with pytest.raises(ScorerConfigError, match=f"uses the field {{{{{field}}}}}"):
            llm_classifier(
                "step_reserved", f"Is {{{{output}}}} fine? {{{{{field}}}}}", {"Y": 1, "N": 0}
            )
