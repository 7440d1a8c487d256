"""Is the judge right? A hand-labelled set measures the local judge before its verdicts count.

`data/labelled_answers.jsonl` holds 28 answers to short questions, each with a reference answer.
20 carry a verdict (`"human"`) decided case by case by reading the answer against its reference,
before any judge saw them: 10 give the reference's answer, in other words or with harmless extra
detail (`right-*`, `true`), and 10 are plainly wrong: a wrong fact, a wrong number, an off-topic
or an evasive answer (`wrong-*`, `false`). The other 8 (`"human": null`) have no verdict: the run
corrects the judge's pass rate over them for its measured error rates. Four of those are the
support bot's answers to `data/faq.jsonl`, and `wrong-france` is the wrong answer of
`test_judges.py`: `l3score` is asked the same there, so the result cache answers one of the two
without a second judge call.

`l3score` is the judge here: one short prompt and one token of reply (its score is P(yes) from
the first token's logprobs), the cheapest judge scorer on the small local model
(Qwen2.5-Coder-1.5B, started by `scripts/run-examples.sh`). Each case passes its bound (0.5) when
the judge says the answer matches the reference; `label=case.human` records the labelled verdict
beside the judge's, and the run prints the "judge agreement" section (kappa, true-pass and
true-fail rates, every disagreement, the corrected pass rate) and the gate below. Alone:
`bash scripts/run-examples.sh -k test_judge_agreement`. The corrected pass rate is this test's
alone (each test is corrected with the rates measured on its own labels).
"""

from __future__ import annotations

import pytest

from pytest_llmeval import assert_score


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/labelled_answers.jsonl")
# The bounds come from runs against the local judge (Qwen2.5-Coder-1.5B; three runs from a cold
# cache gave the same scores): kappa 0.800 [0.398, 1.000], true-pass rate 0.800 (8/10: it failed
# right-password at 0.40 and right-wall at 0.42), true-fail rate 1.000 (10/10). Each bound still
# passes with one more disagreement (kappa 0.7, rates 0.7 and 0.9) and fails a judge that does
# clearly worse. The slack is thin on the pass side: right-austen scores 0.517, right-gold 0.549.
# The bounds are point estimates, without `confidence=`: 20 labels bound little (95% intervals:
# kappa 0.40 to 1.00, true-pass rate 0.49 to 0.94), so a 95% gate at useful bounds would say
# "inconclusive" and fail the run.
# `min_pass_rate` is the gate on the scores. Half of these answers are wrong on purpose (15 of the
# 28 are right, by reading them; the judge passed 14), so its bound is low: it fails a judge that
# fails almost everything. Its other job is to take over the per-case misses: a wrong answer the
# judge rightly fails is a gated miss (`g`), counted by the gate, not a red test.
@pytest.mark.llm_eval_gate(
    "l3score", min_pass_rate=0.3, min_kappa=0.6, min_true_pass=0.7, min_true_fail=0.8
)
def test_judge_agrees_with_the_labels(case):  # type: ignore[no-untyped-def]
    assert_score(
        "l3score",
        input=case.input,
        expected=case.expected,
        output=case.output,
        min=0.5,
        label=case.human,
    )
