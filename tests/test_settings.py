from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings


def test_secret_never_shows_itself() -> None:
    s = Secret("sk-live-SECRET")
    assert s.get() == "sk-live-SECRET"
    assert "SECRET" not in repr(s) and "SECRET" not in str(s) and "SECRET" not in f"{s}"
    assert s == Secret("sk-live-SECRET") and bool(Secret("")) is False


def test_settings_from_env_and_reprs_hide_the_key() -> None:
    env = {
        "OPENAI_API_KEY": "sk-env-SECRET",
        "OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
        "LLM_EVAL_JUDGE_MODEL": "judge-x",
        "LLM_EVAL_SANDBOX": "1",
    }
    st = Settings.from_env(env)
    assert st.judge.api_key is not None and st.judge.api_key.get() == "sk-env-SECRET"
    assert (st.judge.base_url, st.judge.model, st.sandbox_enabled) == (
        "http://127.0.0.1:1/v1",
        "judge-x",
        True,
    )
    assert "SECRET" not in repr(st) and "SECRET" not in repr(st.judge)
    assert Settings.from_env({}).judge.api_key is None


def test_judge_identity_is_model_and_sampling_only() -> None:
    js = JudgeSettings(
        base_url="http://a/v1", model="m", api_key=Secret("k"), temperature=0.0, seed=7
    )
    assert js.identity() == {"model": "m", "temperature": 0.0, "seed": 7, "mode": "tool"}
    other = js.with_overrides({"base_url": "http://b/v1", "api_key": "k2", "model": None})
    assert other.identity() == js.identity()  # another URL or key: same cache entries
    assert other.api_key == Secret("k2") and other.base_url == "http://b/v1"
    assert js.with_overrides({"temperature": 0.5}).identity()["temperature"] == 0.5


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


def test_default_cache_dir_is_relative(tmp_path: Path) -> None:
    assert Settings().cache_dir == Path(".llmeval")
