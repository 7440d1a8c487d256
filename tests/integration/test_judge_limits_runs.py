"""The judge holds its limits whatever the endpoint does: deadlines, reply size, impossible usage,
missing credentials, parameters a model refuses. Through the real ``openai`` client against the
scripted test server."""

from __future__ import annotations

import time

import pytest
from judge_limits_support import YES

from pytest_llmeval.testing import (
    OpenAITestServer,
    delay,
    text,
)


def test_n_tests_against_a_hung_judge_do_not_each_wait(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(delay(30.0, YES))
    pytester.makepyfile(
        """
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.parametrize("i", range(6))
        def test_judged(i):
            assert_score("l3score", input=f"q{i}?", expected="a", output="a", min=0.5)
        """
    )
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")
    t0 = time.monotonic()
    result = pytester.runpytest(
        "--llm-eval-timeout=0.5", "--llm-eval-max-tries=1", "-p", "no:randomly"
    )
    elapsed = time.monotonic() - t0
    result.assert_outcomes(errors=6)
    assert len(judge_server.requests) == 3
    out = result.stdout.str()
    assert out.count("timed out on the last 3 judge requests") >= 3
    assert elapsed < 15, elapsed


def test_a_reply_over_the_cap_is_an_error_in_a_test_and_never_printed(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(
        text("Yes" + " very long" * 30_000, top_logprobs=[("Yes", -0.1), ("No", -2.5)])
    )
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("l3score", input="q?", expected="a", output="a", min=0.5)
        """
    )
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")
    result = pytester.runpytest("-v")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "300003 characters long, over the cap of 200000" in out
    assert len(out) < 50_000
    assert "very long very long very long" not in out


def test_missing_key_is_an_error_in_a_test_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("factuality", input="q?", expected="a", output="a", min=0.5)
        """
    )
    pytester._monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester._monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    t0 = time.monotonic()
    result = pytester.runpytest("--llm-eval-cache=off")
    assert time.monotonic() - t0 < 20
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no API key is set for OpenAI's API*"])
    assert "after 4 tries" not in result.stdout.str()


def test_options_reach_the_settings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval.engine.context import get_context

        def test_settings():
            judge = get_context().settings.judge
            assert (judge.overall_timeout, judge.max_reply_chars) == (45.0, 1234)
        """
    )
    pytester.makeini("[pytest]\nllm_eval_max_reply_chars = 1234\n")
    pytester.runpytest("--llm-eval-scoring-timeout=45").assert_outcomes(passed=1)
    bad = pytester.runpytest("--llm-eval-scoring-timeout=0")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-scoring-timeout / ini llm_eval_scoring_timeout: must be positive, "
            "not 0.0 (given by --llm-eval-scoring-timeout)"
        ]
    )
