"""``judge_samples=K`` (issue 20): the judge asked K times, each ask its own cache entry and
seed, reduced by ``mean`` or ``majority``; each verdict recorded."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import assert_score_async, score, score_async
from pytest_llmeval.core.errors import JudgeError, ScorerConfigError
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.testing import OpenAITestServer, error, tool_call
from tests.helpers.judges import judge_test_settings

QA = {"input": "What is 2+2?", "output": "4", "criteria": "correct"}


def choice(c: str) -> Any:
    return tool_call({"reasons": f"because {c}", "choice": c})


@pytest.fixture
def cached_ctx(judge_server: OpenAITestServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = dataclasses.replace(
        judge_test_settings(judge_server.base_url, tmp_path), cache_mode="use"
    )
    c = ScoringContext(settings)
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


def seeds(server: OpenAITestServer) -> list[Any]:
    return [r.body.get("seed") for r in server.requests_to("chat")]


def test_k_asks_reduced_by_the_mean_each_verdict_recorded(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"), choice("N"), choice("Y"))
    s = score("closed_qa", **QA, judge_samples=3)
    assert s.value == pytest.approx(2 / 3)
    asks = s.metadata["judge_samples"]
    assert [a["value"] for a in asks] == [1.0, 0.0, 1.0]
    assert [a["choice"] for a in asks] == ["Y", "N", "Y"]
    assert [a["seed"] for a in asks] == [0, 1, 2]
    assert seeds(judge_server) == [0, 1, 2]  # each ask sent its own seed
    assert s.metadata["judge_reduce"] == "mean"
    assert s.usage is not None and s.usage.calls == 3
    assert s.rationale is not None and s.rationale.startswith(
        "3 judge samples (1, 0, 1), mean 0.6667"
    )
    # each ask is its own cache entry: a second call asks nothing and gives the same asks back
    again = score("closed_qa", **QA, judge_samples=3)
    assert again.cached and again.value == s.value
    assert [a["value"] for a in again.metadata["judge_samples"]] == [1.0, 0.0, 1.0]
    assert len(judge_server.requests_to("chat")) == 3
    # one ask more asks only the new one; the first ask is a plain call's entry
    judge_server.enqueue(choice("N"))
    four = score("closed_qa", **QA, judge_samples=4)
    assert four.value == pytest.approx(0.5) and len(judge_server.requests_to("chat")) == 4
    assert score("closed_qa", **QA).cached


def test_majority_takes_the_verdict_more_than_half_reach_and_a_tie_fails(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"), choice("N"), choice("Y"))
    s = score("closed_qa", **QA, judge_samples=3, judge_reduce="majority")
    assert s.value == 1.0 and s.metadata["choice"] == "Y"
    judge_server.enqueue(choice("Y"), choice("N"), choice("N"), choice("Y"))
    tie = score("closed_qa", **{**QA, "output": "four"}, judge_samples=4, judge_reduce="majority")
    assert tie.value == 0.0  # two of four pass: not more than half


def test_majority_follows_a_lower_is_better_scorer() -> None:
    from pytest_llmeval.core.scores import Score
    from pytest_llmeval.engine.assertions import _Sampling

    class Low:
        name = "toxic"
        higher_is_better = False

    plan = _Sampling("toxic", 3, "majority", None)
    scores = [Score(value=v) for v in (0.9, 0.1, 0.2)]
    # two of three asks are at most 0.2: against max=0.3 the majority passes
    assert plan.reduce(Low(), scores, 0.0).value == 0.2  # type: ignore[arg-type]
    scores = [Score(value=v) for v in (0.9, 0.8, 0.2)]
    assert plan.reduce(Low(), scores, 0.0).value == 0.8  # type: ignore[arg-type]


def test_a_failed_ask_is_the_error_of_the_scoring_and_nothing_is_kept_for_it(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Y"), *[error(500, "boom")] * 3)
    with pytest.raises(JudgeError):
        score("closed_qa", **QA, judge_samples=2)
    judge_server.enqueue(choice("N"))
    s = score("closed_qa", **QA, judge_samples=2)  # the first ask is cached, the second asked
    assert [a["cached"] for a in s.metadata["judge_samples"]] == [True, False]
    assert s.value == 0.5


def test_the_async_forms_ask_concurrently_and_record(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    async def main() -> None:
        judge_server.enqueue(choice("N"), choice("N"), choice("N"))
        s = await score_async("closed_qa", **QA, judge_samples=3)
        assert s.value == 0.0 and sorted(seeds(judge_server)) == [0, 1, 2]
        r = await assert_score_async("closed_qa", **QA, judge_samples=3, max=0.5)
        assert r.cached and r.passed is True

    asyncio.run(main())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"judge_samples": 0}, "judge_samples.*not a whole number >= 1"),
        ({"judge_samples": True}, "judge_samples.*not a whole number"),
        ({"judge_samples": 2.0}, "judge_samples.*not a whole number"),
        ({"judge_samples": 10**9}, "judge_samples.*more asks than 100"),
        ({"judge_samples": 3, "judge_reduce": "median"}, "judge_reduce.*'median'.*mean, majority"),
        ({"judge_reduce": "mean"}, "judge_reduce.*without judge_samples"),
    ],
)
def test_bad_sampling_options_name_the_scorer_and_option(
    cached_ctx: ScoringContext, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ScorerConfigError, match=match) as info:
        score("closed_qa", **QA, **kwargs)
    assert "closed_qa" in str(info.value)


def test_a_scorer_without_a_judge_refuses_judge_samples(cached_ctx: ScoringContext) -> None:
    with pytest.raises(ScorerConfigError, match="without one"):
        score("exact_match", output="a", expected="a", judge_samples=3)


def test_without_a_seed_the_asks_still_have_their_own_entries(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    settings = judge_test_settings(judge_server.base_url, tmp_path, seed=None)
    c = ScoringContext(dataclasses.replace(settings, cache_mode="use"))
    prev = set_context(c)
    try:
        judge_server.enqueue(choice("Y"), choice("N"))
        s = score("closed_qa", **QA, judge_samples=2)
        assert s.value == 0.5 and seeds(judge_server) == [None, None]
        assert "seed" not in s.metadata["judge_samples"][0]
        again = score("closed_qa", **QA, judge_samples=2)
        assert again.cached and [a["value"] for a in again.metadata["judge_samples"]] == [1.0, 0.0]
    finally:
        set_context(prev)
        c.close()


# -- swap=True: a pairwise judge asked in both orders ---------------------------------------

BATTLE = {"instructions": "Say hi", "output": "OUT-hello there", "expected": "EXP-hi"}


def test_swap_asks_in_both_orders_and_reads_the_second_back(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Yes"), choice("No"))  # output wins, then loses as response 2
    s = score("battle", **BATTLE, swap=True)
    assert s.value == 1.0
    swap = s.metadata["swap"]
    assert (swap["first"], swap["second"], swap["second_mirrored"], swap["consistent"]) == (
        1.0,
        0.0,
        1.0,
        True,
    )
    assert (swap["first_choice"], swap["second_choice"]) == ("Yes", "No")
    first, second = (json.dumps(r.body["messages"]) for r in judge_server.requests_to("chat"))
    # the two texts changed places in the second prompt
    assert first.index("OUT-hello") < first.index("EXP-hi")
    assert second.index("EXP-hi") < second.index("OUT-hello")
    assert s.usage is not None and s.usage.calls == 2


def test_a_judge_that_prefers_the_first_text_is_position_inconsistent(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(choice("Yes"), choice("Yes"))
    s = score("battle", **BATTLE, swap=True)
    assert s.value == 0.5 and s.metadata["swap"]["consistent"] is False
    assert s.rationale is not None and "POSITION-INCONSISTENT" in s.rationale
    # each order is its own cache entry
    again = score("battle", **BATTLE, swap=True)
    assert again.cached and again.value == 0.5 and len(judge_server.requests_to("chat")) == 2


def test_swap_and_judge_samples_together(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    judge_server.enqueue(*[choice("Yes"), choice("No")] * 2)
    s = score("battle", **BATTLE, swap=True, judge_samples=2)
    assert len(judge_server.requests_to("chat")) == 4
    assert s.metadata["swap"]["first"] == 0.5 and s.metadata["swap"]["second"] == 0.5
    assert s.value == 0.5 and s.metadata["swap"]["consistent"] is True


def test_swap_on_a_user_classifier_over_two_fields(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    from pytest_llmeval import llm_classifier

    llm_classifier(
        "kinder_reply",
        "Is {{a}} kinder than {{b}}?",
        {"Y": 1.0, "N": 0.0},
        use_cot=False,
        swap_fields=("a", "b"),
        register=False,
    )
    cls = llm_classifier(
        "kinder_reply_x",
        "Is {{a}} kinder than {{b}}?",
        {"Y": 1.0, "N": 0.0},
        use_cot=False,
        swap_fields=["a", "b"],
        register=False,
    )
    judge_server.enqueue(tool_call({"choice": "Y"}), tool_call({"choice": "N"}))
    s = score(cls, a="A-please", b="B-go away", swap=True)
    assert s.value == 1.0 and s.metadata["swap"]["fields"] == ["a", "b"]
    second = json.dumps(judge_server.requests_to("chat")[1].body["messages"])
    assert second.index("B-go away") < second.index("A-please")


def test_bad_swaps_say_what_to_do(cached_ctx: ScoringContext) -> None:
    from pytest_llmeval import llm_classifier

    with pytest.raises(ScorerConfigError, match="compares no two of its inputs") as info:
        score("closed_qa", **QA, swap=True)
    assert "closed_qa" in str(info.value) and "battle" in str(info.value)
    with pytest.raises(ScorerConfigError, match=r"'swap' is str 'yes'"):
        score("battle", **BATTLE, swap="yes")
    with pytest.raises(ScorerConfigError, match="which the prompt does not use"):
        llm_classifier("k2", "Is {{a}} kind?", {"Y": 1.0, "N": 0.0}, swap_fields=("a", "b"))
    with pytest.raises(ScorerConfigError, match="two different field names"):
        llm_classifier("k3", "Is {{a}} kind?", {"Y": 1.0, "N": 0.0}, swap_fields="ab")
    assert score("exact_match", output="a", expected="a", swap=False).value == 1.0


def test_swap_refuses_a_scorer_with_an_unbounded_range(cached_ctx: ScoringContext) -> None:
    # lo + hi - s on [0, inf) reads every second answer back as inf: min= would always pass
    from pytest_llmeval import assert_score
    from pytest_llmeval.core.scores import Score
    from pytest_llmeval.engine.scoring import Scorer

    class Margin(Scorer):
        name = "pairwise_margin"
        score_range = (0.0, float("inf"))
        uses_judge = True
        swap_fields = ("output", "expected")
        required_inputs = ("output", "expected")

        def compute(self, inputs: Any, ctx: Any) -> Score:
            return Score(value=0.0 if inputs["output"] == "bad" else 5.0)

    with pytest.raises(ScorerConfigError, match="unbounded"):
        assert_score(Margin, output="bad", expected="good", swap=True, min=1.0)


def test_a_split_verdict_claims_no_one_choice(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    # the agreement's choice table reads metadata["choice"]: a mean of Y and N (0.5), or two
    # orders that disagree, is not the first ask's "Y"
    judge_server.enqueue(choice("Y"), choice("N"))
    split = score("closed_qa", **QA, judge_samples=2)
    assert split.value == 0.5 and "choice" not in split.metadata
    judge_server.enqueue(choice("Y"), choice("Y"))
    same = score("closed_qa", **{**QA, "output": "four"}, judge_samples=2)
    assert same.metadata["choice"] == "Y"
    judge_server.enqueue(choice("Yes"), choice("Yes"))
    inconsistent = score("battle", **BATTLE, swap=True)
    assert inconsistent.value == 0.5 and "choice" not in inconsistent.metadata
    judge_server.enqueue(choice("Yes"), choice("No"))
    consistent = score("battle", **{**BATTLE, "output": "OUT-hey"}, swap=True)
    assert consistent.metadata["choice"] == "Yes"


def test_swap_refuses_choices_that_cannot_be_read_back(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    # "same" (0.3) read back in the other order is 0.7, no choice: a judge that said "same"
    # in both orders would get 0.5 and pass min=0.5, though it said 0.3 twice
    from pytest_llmeval import assert_score, llm_classifier

    cls = llm_classifier(
        "kinder_lopsided",
        "Is {{a}} kinder than {{b}}?",
        {"better": 1.0, "same": 0.3, "worse": 0.0},
        use_cot=False,
        swap_fields=("a", "b"),
        register=False,
    )
    judge_server.set_default(lambda body: tool_call({"choice": "same"}))
    with pytest.raises(ScorerConfigError, match="no mirror"):
        assert_score(cls, a="A", b="B", swap=True, min=0.5)
    assert judge_server.requests_to("chat") == []
    fair = llm_classifier(
        "kinder_fair",
        "Is {{a}} kinder than {{b}}?",
        {"better": 1.0, "same": 0.5, "worse": 0.0},
        use_cot=False,
        swap_fields=("a", "b"),
        register=False,
    )
    assert score(fair, a="A", b="B", swap=True).value == 0.5


def test_a_failed_ask_or_order_carries_what_the_answered_ones_paid(
    judge_server: OpenAITestServer, cached_ctx: ScoringContext
) -> None:
    # the case's record shows the judge calls of the asks that answered before one failed
    judge_server.enqueue(choice("Y"), *[error(500, "boom")] * 3)
    with pytest.raises(JudgeError) as info:
        score("closed_qa", **QA, judge_samples=2)
    alone = 0  # (a failed try is no answered call)
    assert info.value.llm_eval_usage.calls == alone + 1  # type: ignore[attr-defined]
    judge_server.enqueue(choice("Yes"), *[error(500, "boom")] * 3)
    with pytest.raises(JudgeError) as info:
        score("battle", **BATTLE, swap=True)
    assert info.value.llm_eval_usage.calls == alone + 1  # type: ignore[attr-defined]

    async def main() -> None:
        judge_server.set_default(
            lambda body: error(500, "boom") if body.get("seed") == 1 else choice("Y")
        )
        with pytest.raises(JudgeError) as info:
            await score_async("closed_qa", **{**QA, "output": "four"}, judge_samples=3)
        assert info.value.llm_eval_usage.calls == alone + 2  # type: ignore[attr-defined]

    asyncio.run(main())
