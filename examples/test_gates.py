"""Suite gates over repeated samples: no judge, no network, run with `pytest --llm-eval`.

`flaky_calculator` stands in for an LLM app: it usually answers right, but sometimes slips (an
off-by-one, swapped digits), more often on harder questions. Its slips are seeded by case and
sample, so every run gives the same answers and the same verdicts, while the five samples of a
case still disagree the way a model at temperature > 0 does.

Each case runs five times (`repeat=5`: ids `add-small-s0` ... `add-small-s4`). A sample that
misses its per-case bound does not fail by itself: the gates decide, over all cases and samples.
"""

from __future__ import annotations

import operator
import random
import re

import pytest

from pytest_llmeval import assert_score

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv}


def flaky_calculator(question: str, seed: str) -> int:
    """The right answer most of the time; a seeded slip otherwise (harder sums slip more)."""
    m = re.search(r"(-?\d+) ([-+*/]) (-?\d+)", question)
    if m is None:
        raise ValueError(f"cannot read the sum in {question!r}")
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    right = _OPS[op](a, b)
    rng = random.Random(seed)
    slip_rate = 0.1 if max(abs(a), abs(b)) < 100 else 0.3
    if rng.random() >= slip_rate:
        return int(right)
    if rng.random() < 0.5:
        return int(right) + rng.choice((-1, 1))
    digits = str(abs(right))
    swapped = digits[::-1] if len(digits) > 1 else digits + "0"
    return int(swapped) * (1 if right >= 0 else -1)


@pytest.fixture
def calculator(case, llm_eval_sample):  # type: ignore[no-untyped-def]
    """The app under test, seeded per case and sample so the run is reproducible."""
    return lambda question: flaky_calculator(question, seed=f"{case.id}/{llm_eval_sample}")


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/arithmetic.jsonl", repeat=5)
# a case passes when most of its samples are exactly right; 70% of the cases must pass
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.7, reducer="majority")
# the mean closeness must be above 0.6 with 95% confidence (not just the point estimate)
@pytest.mark.llm_eval_gate("numeric_diff", min_mean=0.6, confidence=0.95)
def test_calculator(case, calculator):  # type: ignore[no-untyped-def]
    answer = calculator(case.input)
    assert_score("exact_match", output=answer, expected=case.expected, min=1)
    assert_score("numeric_diff", output=answer, expected=case.expected, min=0.99)
