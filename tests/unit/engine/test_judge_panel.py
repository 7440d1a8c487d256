"""Judge panels (issue 20): several judges, each at its own endpoint with its own key,
reduced by mean, majority or min; a judge that fails is that judge's error."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import Judge, score, score_async
from pytest_llmeval.core.errors import JudgeError, ScorerConfigError
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.testing import OpenAITestServer, error, tool_call
from tests.helpers.judges import judge_test_settings

QA = {"input": "What is 2+2?", "output": "4", "criteria": "correct"}


def choice(c: str) -> Any:
    return tool_call({"reasons": f"because {c}", "choice": c}, usage=(100, 10))


@pytest.fixture
def second() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as server:
        yield server


@pytest.fixture
def ctx(judge_server: OpenAITestServer, tmp_path: Path) -> Iterator[ScoringContext]:
    settings = judge_test_settings(judge_server.base_url, tmp_path, max_tries=1)
    c = ScoringContext(dataclasses.replace(settings, cache_mode="use"))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


def panel(first: OpenAITestServer, second: OpenAITestServer, third: bool = False) -> list[Any]:
    judges: list[Any] = [
        Judge("judge-a", base_url=first.base_url, api_key="sk-first-SECRET-key"),
        Judge("judge-b", base_url=second.base_url, api_key="sk-second-SECRET-key", name="b"),
    ]
    if third:
        judges.append({"model": "judge-c", "base_url": second.base_url, "api_key": "sk-c-SECRET"})
    return judges


def test_each_judge_asked_at_its_own_endpoint_with_its_own_key(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"))
    second.enqueue(choice("N"))
    s = score("closed_qa", **QA, judges=panel(judge_server, second))
    (a,) = judge_server.requests_to("chat")
    (b,) = second.requests_to("chat")
    assert a.headers["authorization"] == "Bearer sk-first-SECRET-key"
    assert b.headers["authorization"] == "Bearer sk-second-SECRET-key"
    assert (a.body["model"], b.body["model"]) == ("judge-a", "judge-b")
    assert s.value == 0.5  # the mean of 1 and 0
    host = judge_server.base_url.split("//")[1].split("/")[0]
    members = s.metadata["panel"]
    assert [m["judge"] for m in members] == [f"judge-a@{host}", "b"]
    assert [(m["score"], m["choice"]) for m in members] == [(1.0, "Y"), (0.0, "N")]
    assert [(m["prompt_tokens"], m["completion_tokens"]) for m in members] == [(100, 10)] * 2
    assert s.usage is not None and s.usage.calls == 2 and s.usage.prompt_tokens == 200
    assert "SECRET" not in json.dumps(s.metadata) + repr(s) + repr(panel(judge_server, second))
    # each judge's answer is its own cache entry
    again = score("closed_qa", **QA, judges=panel(judge_server, second))
    assert again.cached and again.value == 0.5 and len(second.requests_to("chat")) == 1


@pytest.mark.parametrize(
    ("rule", "answers", "value"),
    [
        ("mean", ("Y", "N", "Y"), 2 / 3),
        ("majority", ("Y", "N", "Y"), 1.0),
        ("majority", ("Y", "N", "N"), 0.0),
        ("min", ("Y", "Y", "N"), 0.0),
        ("min", ("Y", "Y", "Y"), 1.0),
    ],
)
def test_panel_rules(
    judge_server: OpenAITestServer,
    second: OpenAITestServer,
    ctx: ScoringContext,
    rule: str,
    answers: tuple[str, str, str],
    value: float,
) -> None:
    judge_server.enqueue(choice(answers[0]))
    second.set_default(
        lambda body: choice(answers[1] if body["model"] == "judge-b" else answers[2])
    )
    s = score("closed_qa", **QA, judges=panel(judge_server, second, third=True), panel_reduce=rule)
    assert s.value == pytest.approx(value)
    assert s.metadata["panel_reduce"] == rule


def test_a_failing_judge_is_the_case_error_and_the_others_answers_are_kept(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"))
    second.enqueue(error(500, "judge b is down"))
    with pytest.raises(JudgeError) as info:
        score("closed_qa", **QA, judges=panel(judge_server, second))
    text = str(info.value)
    assert "1 of the panel's 2 judges failed" in text and "b: " in text and "down" in text
    assert "panel_errors='survivors'" in text
    second.enqueue(choice("Y"))
    s = score("closed_qa", **QA, judges=panel(judge_server, second))
    assert s.value == 1.0 and len(judge_server.requests_to("chat")) == 1  # judge a was cached
    assert [m["cached"] for m in s.metadata["panel"]] == [True, False]


def test_survivors_only_when_chosen_and_the_failure_is_recorded(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("N"))
    second.enqueue(error(500, "judge b is down"))
    s = score("closed_qa", **QA, judges=panel(judge_server, second), panel_errors="survivors")
    assert s.value == 0.0
    failed = s.metadata["panel"][1]
    assert failed["score"] is None and "judge b is down" in failed["error"]
    assert s.rationale is not None and "1 failed and not counted" in s.rationale
    assert not s.cached
    # no judge answering is an error whatever the rule
    judge_server.enqueue(error(500, "a down"))
    second.enqueue(error(500, "b down"))
    with pytest.raises(JudgeError, match="no judge of the panel answered"):
        score(
            "closed_qa",
            **{**QA, "output": "five"},
            judges=panel(judge_server, second),
            panel_errors="survivors",
        )


def test_the_async_form_asks_the_judges_concurrently(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"))
    second.enqueue(choice("Y"))
    s = asyncio.run(score_async("closed_qa", **QA, judges=panel(judge_server, second)))
    assert s.value == 1.0 and len(s.metadata["panel"]) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"judges": ["only-one"]}, "a panel needs two or more"),
        ({"judges": "gpt-4o"}, "not a list of judges"),
        ({"judges": ["a", 3]}, "judge 2 is int"),
        ({"judges": ["a", {"base_url": "http://x"}]}, "judge 2 has no model"),
        ({"judges": ["a", {"model": "b", "colour": "red"}]}, "unknown option 'colour'"),
        ({"judges": ["a", "a"]}, "names the judge 'a' twice"),
        ({"judges": ["a", "b"], "panel_reduce": "median"}, "panel_reduce.*'median'"),
        ({"judges": ["a", "b"], "panel_errors": "ignore"}, "panel_errors.*'ignore'"),
        ({"panel_reduce": "mean"}, "panel_reduce.*without judges"),
        ({"judges": ["a", "b"], "model": "c"}, "'model' is given with judges="),
    ],
)
def test_bad_panels_say_what_to_do(ctx: ScoringContext, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ScorerConfigError, match=match) as info:
        score("closed_qa", **QA, **kwargs)
    assert "closed_qa" in str(info.value)


def test_a_deterministic_scorer_takes_no_panel(ctx: ScoringContext) -> None:
    with pytest.raises(ScorerConfigError, match="without one"):
        score("exact_match", output="a", expected="a", judges=["a", "b"])


def test_a_judge_label_masks_credentials_in_its_endpoint() -> None:
    j = Judge("m", base_url="http://user:pw-SECRET@127.0.0.1:9/v1")
    assert j.label == "m@127.0.0.1:9" and "SECRET" not in json.dumps(j.describe())


def test_min_is_the_strictest_judge_for_a_lower_is_better_scorer() -> None:
    from pytest_llmeval.core.scores import Score
    from pytest_llmeval.engine.panel import Panel

    class Toxicity:
        name = "toxicity"
        higher_is_better = False

    judges = (Judge("a"), Judge("b"), Judge("c"))
    answers = [Score(value=v) for v in (0.1, 0.7, 0.2)]
    strict = Panel("toxicity", judges, "min").combine(Toxicity(), answers, 0.0)  # type: ignore[arg-type]
    assert strict.value == 0.7  # the judge that found it most toxic
    most = Panel("toxicity", judges, "majority").combine(Toxicity(), answers, 0.0)  # type: ignore[arg-type]
    assert most.value == 0.2  # two of three judges say at most 0.2


def test_a_judge_repr_and_label_mask_credentials_in_any_endpoint() -> None:
    with_scheme = Judge("m", base_url="https://user:pw-SECRET@host/v1?api-key=SECRET2")
    assert "SECRET" not in repr(with_scheme) and "host" in repr(with_scheme)
    no_scheme = Judge("m", base_url="user:pw-SECRET@127.0.0.1:9/v1")
    assert "SECRET" not in no_scheme.label and "127.0.0.1:9" in no_scheme.label
    assert "SECRET" not in repr(no_scheme) + json.dumps(no_scheme.describe())


def test_two_judges_asking_the_same_question_are_refused(
    judge_server: OpenAITestServer, ctx: ScoringContext
) -> None:
    # a name or a key is not in the cache key: the second judge would read the first's answer,
    # and a majority of [a, a', b] would count a's verdict twice
    same = [
        Judge("a", base_url=judge_server.base_url, name="a1"),
        Judge("a", base_url=judge_server.base_url, name="a2", api_key="sk-other"),
        "b",
    ]
    with pytest.raises(ScorerConfigError, match="same question"):
        score("closed_qa", **QA, judges=same, panel_reduce="majority")
    assert judge_server.requests_to("chat") == []
    judge_server.set_default(lambda body: choice("Y"))
    warm = Judge("a", base_url=judge_server.base_url, name="a2", options={"temperature": 0.7})
    s = score("closed_qa", **QA, judges=[same[0], warm])
    assert [m["cached"] for m in s.metadata["panel"]] == [False, False]


def test_the_panel_instrument_does_not_depend_on_which_judge_answered(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    from pytest_llmeval.engine.assertions import _instrument_of, _score_sync

    judges = [Judge("a", base_url=judge_server.base_url), Judge("b", base_url=second.base_url)]
    kwargs = {"criteria": "c", "judges": judges, "panel_errors": "survivors"}
    judge_server.enqueue(choice("Y"), error(500, "judge a is down"))
    second.set_default(lambda body: choice("Y"))
    both, _ = _score_sync("closed_qa", {"input": "q", "output": "4"}, kwargs, ctx)
    only_b, s = _score_sync("closed_qa", {"input": "q", "output": "5"}, kwargs, ctx)
    assert s.metadata["panel"][0]["score"] is None  # judge a failed, b survived
    assert _instrument_of(both, ctx, kwargs).digest == _instrument_of(only_b, ctx, kwargs).digest


def test_a_split_panel_mean_claims_no_one_choice(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"))
    second.enqueue(choice("N"))
    s = score("closed_qa", **QA, judges=panel(judge_server, second))
    assert s.value == 0.5 and "choice" not in s.metadata
    judge_server.enqueue(choice("Y"))
    second.enqueue(choice("N"))
    five = {**QA, "output": "5"}
    strict = score("closed_qa", **five, judges=panel(judge_server, second), panel_reduce="min")
    assert strict.value == 0.0 and strict.metadata["choice"] == "N"


def test_a_panel_error_carries_what_the_judges_that_answered_paid(
    judge_server: OpenAITestServer, second: OpenAITestServer, ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"))
    second.enqueue(error(500, "judge b is down"))
    with pytest.raises(JudgeError) as info:
        score("closed_qa", **QA, judges=panel(judge_server, second))
    spent = info.value.llm_eval_usage  # type: ignore[attr-defined]
    assert spent.calls == 1 and spent.prompt_tokens == 100  # a's answer (cached for next time)
