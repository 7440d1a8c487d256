"""A project whose cache, report and saved run were written by an older pytest-llmeval
(tests/data/compat/make.py says which): the current code must read them all."""

import pytest

from pytest_llmeval import Score, Scorer, assert_score, assert_scores, scorer

CUTOFF = 0.5


@scorer(name="compat_overlap")
def compat_overlap(output: str, expected: str) -> float:
    a, b = set(output.split()), set(expected.split())
    return len(a & b) / max(1, len(a | b))


class CompatLength(Scorer):
    name = "compat_length"
    required_inputs = ("output",)

    def compute(self, inputs, ctx):
        return Score(value=min(1.0, len(inputs["output"]) / 20), scorer=self.name)


@pytest.mark.llm_eval
@pytest.mark.parametrize("n", [1, 2])
def test_deterministic(n):
    assert_score("exact_match", output=f"a{n}", expected=f"a{n}", min=1)
    assert_score("levenshtein", output=f"kitten{n}", expected=f"sitting{n}", min=0.3)
    assert_score("compat_overlap", output="the cat sat", expected="the cat ran", min=CUTOFF)
    assert_score(CompatLength(), output="x" * (5 * n), min=0.2)


@pytest.mark.llm_eval_dataset("cases.jsonl", repeat=2)
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.5)
def test_dataset(case):
    assert_score("exact_match", output=case.output, expected=case.expected)


@pytest.mark.llm_eval
def test_batch():
    rows = [{"output": f"o{i}", "expected": f"o{i}"} for i in range(3)]
    assert_scores("exact_match", rows, min=1)


@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(2))
def test_judged(i):
    assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)
