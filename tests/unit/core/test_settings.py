from __future__ import annotations

from pathlib import Path

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


def test_default_cache_dir_is_relative(tmp_path: Path) -> None:
    assert Settings().cache_dir == Path(".llmeval")
