"""qa_correctness's "not applicable" verdict (Bench scores it -1): an explicit outcome, never a
score and never cached: the test's ERROR (default) or a skip (``not_applicable="skip"``)."""

from __future__ import annotations

import pytest
from qa_not_applicable_support import NA

from pytest_llmeval import score
from pytest_llmeval.core.errors import JudgeNotApplicableError, ScorerConfigError
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.testing import OpenAITestServer


def test_not_applicable_raises_with_the_reasons(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(NA)
    with pytest.raises(JudgeNotApplicableError) as info:
        score("qa_correctness", input="When is high tide?", context="Boil pasta.", output="6pm")
    err = info.value
    assert err.scorer == "qa_correctness"
    assert err.reasons == "the context is about cooking, the question about tides"
    assert str(err) == (
        "judge error (scorer 'qa_correctness', model 'test-judge'): the judge found the question "
        "not applicable to the context: the context is about cooking, the question about tides"
    )
    # one call: an allowed verdict, not a malformed reply to re-ask
    assert len(judge_server.requests_to("chat")) == 1
    params = judge_server.requests_to("chat")[0].body["tools"][0]["function"]["parameters"]
    assert params["properties"]["choice"]["enum"] == ["correct", "incorrect", "not_applicable"]
    assert "not_applicable" in judge_server.requests_to("chat")[0].body["messages"][0]["content"]


def test_bad_option_is_a_config_error() -> None:
    with pytest.raises(ScorerConfigError) as info:
        score("qa_correctness", input="q", context="c", output="o", not_applicable="ignore")
    assert info.value.option == "not_applicable"
