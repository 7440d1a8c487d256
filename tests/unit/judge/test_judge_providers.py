"""Judge providers: Azure OpenAI through the SDK's AsyncAzureOpenAI client, against the test
server speaking Azure's URL shape (/openai/deployments/{deployment}/chat/completions?api-version=
with the api-key header)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from judge_providers_support import CORRECT, KEY, VERSION, _root
from judges import judge_test_settings

from pytest_llmeval import score
from pytest_llmeval.core.errors import JudgeError
from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.testing import OpenAITestServer, error


@pytest.fixture
def azure_ctx(judge_server: OpenAITestServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    base = judge_test_settings(_root(judge_server), tmp_path, max_tries=1)
    settings = dataclasses.replace(
        base,
        judge=dataclasses.replace(
            base.judge,
            provider="azure",
            model="my-judge-deployment",
            api_key=Secret(KEY),
            api_version=VERSION,
        ),
    )
    ctx = ScoringContext(settings)
    prev = set_context(ctx)
    yield ctx
    set_context(prev)
    ctx.close()


def test_azure_request_shape(judge_server: OpenAITestServer, azure_ctx: ScoringContext) -> None:
    judge_server.enqueue(CORRECT)
    result = score("qa_correctness", input="q", context="c", output="o")
    assert result.value == 1.0
    (req,) = judge_server.requests_to("chat")
    assert req.path == "/openai/deployments/my-judge-deployment/chat/completions"
    assert req.deployment == "my-judge-deployment"
    assert req.api_version == VERSION
    assert req.headers["api-key"] == KEY
    assert "authorization" not in req.headers  # Azure's key header, not a bearer token
    assert "SECRET" not in repr(azure_ctx.judge()) + repr(azure_ctx.settings)


def test_azure_embeddings_use_the_embedding_deployment(
    judge_server: OpenAITestServer, azure_ctx: ScoringContext
) -> None:
    import asyncio

    vectors, _ = asyncio.run(azure_ctx.judge().embed(["a b c"], model="my-embeddings"))
    assert len(vectors) == 1 and len(vectors[0]) > 0
    (req,) = judge_server.requests_to("embeddings")
    assert req.path == "/openai/deployments/my-embeddings/embeddings"
    assert req.api_version == VERSION


def test_azure_error_never_shows_the_key(
    judge_server: OpenAITestServer, azure_ctx: ScoringContext
) -> None:
    judge_server.enqueue(error(401, f"Access denied: invalid subscription key {KEY}"))
    with pytest.raises(JudgeError) as info:
        score("qa_correctness", input="q", context="c", output="o")
    text = str(info.value) + repr(info.value)
    assert "401" in text or "Access denied" in text
    assert KEY not in text
    assert f"endpoint {_root(judge_server)}" in str(info.value)


@pytest.mark.parametrize(
    ("missing", "says"),
    [
        ("base_url", "the resource endpoint (AZURE_OPENAI_ENDPOINT"),
        ("api_key", "the API key (AZURE_OPENAI_API_KEY"),
        ("api_version", "the API version (OPENAI_API_VERSION"),
    ],
)
def test_azure_missing_setting_is_a_clear_error_before_any_call(
    judge_server: OpenAITestServer,
    azure_ctx: ScoringContext,
    monkeypatch: pytest.MonkeyPatch,
    missing: str,
    says: str,
) -> None:
    for var in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(var, raising=False)
    judge = dataclasses.replace(azure_ctx.settings.judge, **{missing: None})
    ctx = ScoringContext(dataclasses.replace(azure_ctx.settings, judge=judge))
    prev = set_context(ctx)
    try:
        with pytest.raises(JudgeError) as info:
            score("qa_correctness", input="q", context="c", output="o")
    finally:
        set_context(prev)
        ctx.close()
    msg = str(info.value)
    assert "the judge provider is azure but " + says in msg
    assert msg.endswith("is not set, so no judge call was made")
    assert KEY not in msg
    assert judge_server.requests == []


def test_settings_from_env_azure() -> None:
    env = {
        "LLM_EVAL_JUDGE_PROVIDER": "azure",
        "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com",
        "AZURE_OPENAI_API_KEY": KEY,
        "OPENAI_API_VERSION": VERSION,
        "OPENAI_API_KEY": "sk-not-this-one",
        "OPENAI_BASE_URL": "http://not-this-one/v1",
        "LLM_EVAL_JUDGE_MODEL": "dep",
    }
    judge = Settings.from_env(env).judge
    assert (judge.provider, judge.base_url, judge.api_version, judge.model) == (
        "azure",
        "https://res.openai.azure.com",
        VERSION,
        "dep",
    )
    assert judge.api_key == Secret(KEY)
    assert KEY not in repr(judge)
    # the default provider is unchanged
    assert Settings.from_env({}).judge == JudgeSettings()


def test_unknown_provider_in_settings_is_refused() -> None:
    with pytest.raises(
        ValueError,
        match=r"env LLM_EVAL_JUDGE_PROVIDER: 'azur' is not one of openai, azure \(given by env",
    ):
        Settings.from_env({"LLM_EVAL_JUDGE_PROVIDER": "azur"})
