"""Unit and property tests of pytest_llmeval.scorers.agents (tool_correctness,
tool_call_accuracy)."""

from __future__ import annotations

import pytest
from paths import EXAMPLES


def test_the_example_passes(pytester: pytest.Pytester) -> None:

    root = EXAMPLES
    pytester.makepyfile(test_example_agent_tools=(root / "test_agent_tools.py").read_text())
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "tool_call_accuracy  2  0.646  0.500  0.792 *",
            "tool_correctness    4  1.000  1.000  1.000 *",
        ]
    )
