"""Judges you define (pytest_llmeval/scorers/custom.py): llm_classifier, g_eval and the JSON/YAML
spec loader, through the scripted OpenAI-compatible test server with the real ``openai`` client."""

from __future__ import annotations

import pytest
from scorers_custom_judges_support import _write

from pytest_llmeval.testing import OpenAITestServer, tool_call


def test_ini_glob_makes_a_judge_usable_by_name(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _write(
        pytester.path / "judges" / "polite.json",
        {
            "name": "cj_ini_polite",
            "prompt": "Is {{output}} polite? Y or N",
            "choice_scores": {"Y": 1, "N": 0},
        },
    )
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_judges = judges/*.json\n"
    )
    pytester.makepyfile(
        test_ini_judge="""
from pytest_llmeval import assert_score

def test_polite():
    assert_score("cj_ini_polite", output="Thank you!", min=1)

def test_rude():
    assert_score("cj_ini_polite", output="Go away.", min=1)
"""
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    judge_server.enqueue(
        tool_call({"reasons": "thanks", "choice": "Y"}), tool_call({"reasons": "no", "choice": "N"})
    )
    result = pytester.runpytest_subprocess("--llm-eval-cache=off", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*cj_ini_polite*0*"])
    assert len(judge_server.requests_to("chat")) == 2


def test_ini_glob_with_a_bad_spec_stops_the_run(pytester: pytest.Pytester) -> None:
    _write(pytester.path / "judges" / "bad.json", {"name": "cj_ini_bad", "prompt": "{{output}}"})
    pytester.makeini("[pytest]\nllm_eval_judges = judges/*.json\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini llm_eval_judges: *bad.json: judge 'cj_ini_bad': field 'choice_scores' is missing*"]
    )
