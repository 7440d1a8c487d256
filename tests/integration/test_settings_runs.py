from __future__ import annotations

import pytest


def test_plugin_settings_from_cli_ini_and_env(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\n"
        "llm_eval_judge_model = ini-model\n"
        "llm_eval_concurrency = 3\n"
        "llm_eval_api_key_env = MY_JUDGE_KEY\n"
        "llm_eval_prices =\n    ini-model 1.5 6\n"
    )
    pytester.makepyfile(
        """
        from pathlib import Path
        from pytest_llmeval import get_context

        def test_settings(pytestconfig):
            st = get_context().settings
            assert st.judge.model == "cli-model"          # CLI beats ini
            assert st.judge.concurrency == 3              # ini
            assert st.judge.api_key.get() == "sk-from-MY_JUDGE_KEY"
            assert st.prices == {"ini-model": (1.5, 6.0)}
            assert st.budget_usd == 0.25
            assert st.cache_mode == "refresh"
            assert st.cache_dir == Path(str(pytestconfig.rootpath)) / "cachedir"
            assert st.sandbox_enabled is True
        """
    )
    pytester._monkeypatch.setenv("MY_JUDGE_KEY", "sk-from-MY_JUDGE_KEY")
    result = pytester.runpytest(
        "--llm-eval-judge-model=cli-model",
        "--llm-eval-budget=0.25",
        "--llm-eval-cache=refresh",
        "--llm-eval-cache-dir=cachedir",
        "--llm-eval-allow-code-execution",
    )
    result.assert_outcomes(passed=1)


def test_bad_prices_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllm_eval_prices =\n    only-two 1\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*'only-two 1' must be 'MODEL INPUT_USD OUTPUT_USD ?CACHED_INPUT_USD?'*"]
    )
