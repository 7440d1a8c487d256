"""moderation: flagged / threshold rules through the moderations endpoint of the test server."""

from __future__ import annotations

import pytest

from pytest_llmeval import JudgeError, ScorerConfigError, default_registry, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.scorers.moderation import Moderation
from pytest_llmeval.testing import OpenAITestServer, error, moderation


def test_not_flagged_scores_one(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(moderation(False, {"hate": 0.2}))
    result = score("moderation", output="A friendly sentence.")
    assert result.value == 1.0
    assert result.metadata["flagged"] is False
    assert result.metadata["category_scores"]["hate"] == 0.2
    assert result.usage is not None and result.usage.calls == 1
    body = judge_server.requests_to("moderations")[0].body
    assert body == {"input": "A friendly sentence."}  # no model: the endpoint's default


def test_flagged_scores_zero(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(moderation(True, {"violence": 0.97}, {"violence": True}))
    result = score("Moderation", output="something violent", model="omni-moderation-latest")
    assert result.value == 0.0
    assert result.rationale == "flagged (violence)"
    assert result.metadata["categories"]["violence"] is True
    assert judge_server.requests[0].body["model"] == "omni-moderation-latest"


def test_threshold_overrides_the_flag(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        moderation(False, {"hate": 0.6, "violence": 0.1}),
        moderation(True, {"hate": 0.6, "violence": 0.1}, {"hate": True}),
        moderation(False, {"hate": 0.5}),
    )
    below = score("moderation", output="x", threshold=0.5)
    assert below.value == 0.0
    assert below.metadata["over"] == ["hate"]
    above = score("moderation", output="x", threshold=0.7)
    assert above.value == 1.0  # flagged by the endpoint, but no score above 0.7
    equal = score("moderation", output="x", threshold=0.5)
    assert equal.value == 1.0  # strictly greater than the threshold


def test_non_string_output_is_sent_as_json(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    score("moderation", output={"a": "b"})
    assert judge_server.requests[0].body["input"] == '{"a": "b"}'


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True, float("nan")])
def test_bad_threshold(bad: object) -> None:
    with pytest.raises(ScorerConfigError, match="'moderation': option 'threshold'"):
        Moderation(threshold=bad)


def test_missing_output(judge_ctx: ScoringContext) -> None:
    from pytest_llmeval import ScorerInputError

    with pytest.raises(ScorerInputError, match="'moderation': input 'output'"):
        score("moderation", output=None)


def test_endpoint_failure_is_a_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(error(404, "no moderations here", endpoint="moderations"))
    with pytest.raises(JudgeError, match="HTTP 404: no moderations here"):
        score("moderation", output="x")


def test_registry_and_identity(judge_ctx: ScoringContext) -> None:
    assert default_registry.get("Moderation") is Moderation
    ident = Moderation(threshold=0.3, model="omni-moderation-latest").identity(judge_ctx)
    assert ident["options"]["threshold"] == 0.3
    assert ident["extra"]["moderation_model"] == "omni-moderation-latest"
