"""Less noise from the judge: ask it several times, in both orders, or ask a panel.

`scripts/run-examples.sh` runs these against the local judge (a 1.5B model on llama.cpp, the
`local` model alias). Each judge answer is cached like any other, so a second run asks nothing.

* `judge_samples=3` asks the judge three times (each ask its own seed and cache entry; a
  temperature above 0 lets the asks differ: `l3score` always asks at temperature 0, so its asks
  would all agree) and keeps the majority's verdict; the "judge stability" section shows the
  flip rate and any case the asks split on.
* `swap=True` asks `battle` in both orders: a judge that prefers whichever answer it reads
  first is *position-inconsistent*, counted in the same section.
* `judges=[...]` asks a panel. Here both judges are the same local model sampling at
  temperature 0.8 with two seeds (a real panel would put a hosted model beside it, with its own
  `base_url` and `api_key`); `panel_reduce="min"` keeps the strictest, and the "judge panel"
  section gives their agreement and each judge's verdicts and tokens.
"""

from __future__ import annotations

import pytest

from pytest_llmeval import Judge, assert_score

QUESTION = "What is the capital of France?"


@pytest.mark.llm_eval
def test_a_clear_answer_passes_the_majority_of_three_asks(support_bot):  # type: ignore[no-untyped-def]
    assert_score(
        "closed_qa",
        input=QUESTION,
        output=support_bot(QUESTION),
        criteria="Names Paris as the capital of France.",
        min=0.5,
        judge_samples=3,
        judge_reduce="majority",
        temperature=0.8,
        use_cot=False,
    )


@pytest.mark.llm_eval
def test_a_battle_asked_in_both_orders(support_bot):  # type: ignore[no-untyped-def]
    # Our answer against an evasive one: a judge consistent across both orders scores it 1; one
    # that always prefers the first answer it reads scores 0.5 (and is reported); only a judge
    # that prefers the evasive answer in both orders fails it.
    assert_score(
        "battle",
        instructions=QUESTION,
        output=support_bot(QUESTION),
        expected="I am not able to answer questions about geography.",
        min=0.5,
        swap=True,
        use_cot=False,
    )


PANEL = [
    Judge("local", name="seed-0", options={"temperature": 0.8, "seed": 0}),
    Judge("local", name="seed-1", options={"temperature": 0.8, "seed": 1}),
]


@pytest.mark.llm_eval
def test_the_strictest_of_a_panel_passes_a_clear_answer(support_bot):  # type: ignore[no-untyped-def]
    assert_score(
        "closed_qa",
        input=QUESTION,
        output=support_bot(QUESTION),
        criteria="Names Paris as the capital of France.",
        min=0.5,
        judges=PANEL,
        panel_reduce="min",
        use_cot=False,
    )
