"""Records carry what was judged (issue 10): the scorer's inputs, JSON-safe, cut to
--llm-eval-record-chars with the cut marked, never an option or a key."""

from __future__ import annotations

import json

import pytest


def test_the_json_report_carries_the_inputs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_eval="""
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
def test_one():
    assert_score("exact_match", output="a long answer here", expected="a long answer here")
"""
    )
    pytester.runpytest("--llm-eval", "--llm-eval-report=r.json", "--llm-eval-record-chars=6")
    (rec,) = json.loads((pytester.path / "r.json").read_text())["records"]
    assert rec["inputs"] == {
        "output": {"text": "a long", "truncated": 12},
        "expected": {"text": "a long", "truncated": 12},
    }
    r = pytester.runpytest("--llm-eval", "--llm-eval-record-chars=-1")
    r.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-record-chars / ini llm_eval_record_chars: must be >= 0, not -1 "
            "(0 keeps no inputs) (given by --llm-eval-record-chars)"
        ]
    )
