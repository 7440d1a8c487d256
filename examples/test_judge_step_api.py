"""The judge step for advanced users: a judge scorer written as a class on the public step
(`pytest_llmeval.judge.step`), with the built-in judges' delimiting, prompt layout, validation,
choice-to-score mapping and cache identity. Most suites want `llm_classifier` instead (see
test_custom_judges.py); this is for a scorer that needs code around its judge call."""

from __future__ import annotations

import pytest

import pytest_llmeval
from pytest_llmeval import Score, Scorer, assert_score
from pytest_llmeval.judge.step import choice_step, step_identity

# Fixed instructions first, then the case's blocks: every case shares the prompt's prefix.
POLITE = choice_step(
    "Is the reply to the customer polite?\n\n<reply>\n{{output}}\n</reply>\n\n{{data_notice}}",
    {"Yes": 1.0, "No": 0.0},
)


@pytest_llmeval.register
class PoliteReply(Scorer):
    name = "polite_reply_step"
    required_inputs = ("output",)
    uses_judge = True
    version = "1"

    def extra_identity(self, ctx):  # type: ignore[no-untyped-def]
        return step_identity(self, ctx, POLITE)  # prompt hash + judge model and sampling

    async def acompute(self, inputs, ctx) -> Score:  # type: ignore[no-untyped-def]
        text = inputs["output"].strip()
        verdict = await POLITE.classify(self, ctx, {"output": text})
        return verdict.score(self.name)


@pytest.mark.llm_eval
def test_a_polite_reply_passes():
    assert_score(
        "polite_reply_step",
        output="Thank you for writing! Your parcel ships today. Have a lovely day!",
        min=1,
    )


@pytest.mark.llm_eval
def test_a_rude_reply_fails():
    assert_score(
        "polite_reply_step", output="Stop bothering me, I don't care about your parcel.", max=0
    )
