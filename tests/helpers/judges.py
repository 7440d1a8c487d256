"""Settings for a judge that is the scripted test server."""

from __future__ import annotations

from pathlib import Path


def judge_test_settings(base_url: str, tmp_path: Path, **judge: object):  # type: ignore[no-untyped-def]
    """Settings whose judge is the test server: model "test-judge", key "sk-test-SECRET", short
    timeouts and backoff (retry tests stay quick), cache off. ``judge`` overrides JudgeSettings."""
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings

    fields: dict[str, object] = {
        "base_url": base_url,
        "model": "test-judge",
        "api_key": Secret("sk-test-SECRET"),
        "timeout": 5.0,
        "max_tries": 3,
        "overall_timeout": 30.0,
        "retry_backoff": 0.01,
        "concurrency": 4,
        **judge,
    }
    return Settings(
        judge=JudgeSettings(**fields),  # type: ignore[arg-type]
        cache_mode="off",
        cache_dir=tmp_path / ".llmeval",
    )
