"""No secret reaches an output (issue 19, finding 16).

A judge base URL with a password in its user-info and an API key in its query, an API key in the
environment, a Redis URL with a password: real runs against the project's test server and a real
redis-server, with every output there is (terminal, logs at DEBUG, the JSON and HTML reports,
JUnit XML, the saved run, a shard report and its merge, the SQLite cache, the cache CLI). Each
test asserts that no secret is anywhere, and that the redacted form is shown where the URL is (so
that it cannot pass by showing nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from secrets_support import BASIC, ENV_KEY, PASSWORD, SECRETS, URL_KEY

from pytest_llmeval.testing import OpenAITestServer, error


def test_azure_endpoint_with_credentials_works_and_is_shown_redacted(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    """Azure's resource endpoint takes the same path: its query goes with every request next to
    api-version, its user-info is basic auth, and a failure names it redacted."""
    import dataclasses

    from judges import judge_test_settings

    from pytest_llmeval import score
    from pytest_llmeval.core.errors import JudgeError
    from pytest_llmeval.core.settings import Secret
    from pytest_llmeval.engine.context import ScoringContext, set_context
    from pytest_llmeval.testing import tool_call

    url = f"http://user:{PASSWORD}@127.0.0.1:{judge_server.port}?sig={URL_KEY}"
    base = judge_test_settings(url, tmp_path, max_tries=1)
    judge = dataclasses.replace(
        base.judge,
        provider="azure",
        model="dep",
        api_key=Secret(ENV_KEY),
        api_version="2024-10-21",
    )
    ctx = ScoringContext(dataclasses.replace(base, judge=judge))
    prev = set_context(ctx)
    try:
        judge_server.enqueue(tool_call({"reasons": "r", "choice": "correct"}))
        assert score("qa_correctness", input="q", context="c", output="o").value == 1.0
        (request,) = judge_server.requests_to("chat")
        assert request.path == "/openai/deployments/dep/chat/completions"
        assert request.query == {"sig": [URL_KEY], "api-version": ["2024-10-21"]}
        assert request.headers["authorization"] == f"Basic {BASIC}"
        assert request.headers["api-key"] == ENV_KEY
        judge_server.enqueue(error(500, f"upstream {url} failed"))
        with pytest.raises(JudgeError) as info:
            score("qa_correctness", input="q2", context="c", output="o")
    finally:
        set_context(prev)
        ctx.close()
    shown = f"http://***@127.0.0.1:{judge_server.port}?sig=***"
    assert info.value.endpoint == shown
    assert str(info.value).endswith(f"(last cause: HTTP 500: upstream {shown} failed)")
    for secret in SECRETS:
        assert secret not in str(info.value) + repr(ctx.settings)


@pytest.mark.parametrize("extra", [0, 5000])
def test_a_long_error_text_is_redacted_before_it_is_cut(
    judge_ctx: Any, judge_server: OpenAITestServer, extra: int
) -> None:
    """The cause keeps the first 1000 characters of the endpoint's text. Cut first, a URL across
    the cut would lose its "@" and keep the start of its password in the open."""
    from pytest_llmeval.core.errors import JudgeError

    url = f"http://user:{PASSWORD}@h.example/v1?api_key={URL_KEY}"
    # "HTTP 400: " + filler puts the 1000th character inside the password ("s3c|retpass")
    filler = "x" * (1000 - len("HTTP 400: ") - len("http://user:") - 3)
    judge_server.enqueue(error(400, f"{filler}{url} {'y' * extra}"))
    client = judge_ctx.judge()
    with pytest.raises(JudgeError) as info:
        judge_ctx.run(client.chat([{"role": "user", "content": "hi"}]))
    cause = info.value.cause or ""
    assert cause.startswith(f"HTTP 400: {filler}http://***@h.ex... (")
    assert cause.endswith(" more characters)")
    for fragment in (PASSWORD[:3], URL_KEY[:3]):
        assert fragment not in cause


def test_reprs_of_settings_clients_and_errors_hide_url_secrets(tmp_path: Path) -> None:
    from pytest_llmeval.core.errors import JudgeError
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.judge.client import JudgeClient

    url = f"http://user:{PASSWORD}@127.0.0.1:9/v1?api_key={URL_KEY}"
    shown = "http://***@127.0.0.1:9/v1?api_key=***"
    judge = JudgeSettings(base_url=url, api_key=Secret(ENV_KEY))
    settings = Settings(judge=judge, cache_dir=tmp_path)
    assert judge.base_url == url  # the real URL is still there to be used
    assert f"base_url={shown!r}" in repr(judge) and f"base_url={shown!r}" in repr(settings)
    client = JudgeClient(judge)
    assert client.endpoint == shown and repr(client) == (
        f"JudgeClient(model='gpt-4o-mini', endpoint={shown!r})"
    )
    ctx = ScoringContext(settings)
    try:
        texts = [repr(judge), repr(settings), repr(client), repr(ctx.judge()), str(ctx.judge())]
    finally:
        ctx.close()
    # a scorer given the URL as its judge option
    from pytest_llmeval.engine.registry import default_registry

    scorer = default_registry.get("factuality")(base_url=url, api_key=ENV_KEY)
    assert repr(scorer) == f"Factuality(use_cot=True, base_url={shown!r})"
    texts.append(repr(scorer))
    err = JudgeError(f"failed with key {ENV_KEY}", endpoint=url, cause=f"HTTP 401 from {url}")
    assert err.endpoint == shown
    assert str(err) == (
        f"judge error (endpoint {shown}): failed with key *** (last cause: HTTP 401 from {shown})"
    )
    texts += [str(err), repr(err), err.cause or ""]
    for item in texts:
        for secret in (PASSWORD, URL_KEY, ENV_KEY):
            assert secret not in item, item


def test_a_short_key_is_not_masked_out_of_words() -> None:
    """A local server's key "test" is no secret: the endpoint's "test server" stays readable.
    A real key is masked wherever the endpoint quotes it."""
    from pytest_llmeval.core.settings import JudgeSettings, Secret
    from pytest_llmeval.judge.client import JudgeClient

    short = JudgeClient(JudgeSettings(api_key=Secret("test")))
    assert short._redact("HTTP 404: test server: no route") == "HTTP 404: test server: no route"
    real = JudgeClient(JudgeSettings(api_key=Secret("Lq7-xZ90")))
    assert real._redact("HTTP 401: key Lq7-xZ90 is revoked") == "HTTP 401: key *** is revoked"


def test_redis_store_reprs_and_texts_hide_the_password(redis_server_auth: Any) -> None:
    from pytest_llmeval.core.limits import RateLimits
    from pytest_llmeval.stores.ratelimit import RateLimiter, RedisBucket
    from pytest_llmeval.stores.redis_store import RedisStore

    password = redis_server_auth.password
    port = redis_server_auth.port
    store = RedisStore(f"redis://:{password}@127.0.0.1:{port}/0?password={password}")
    try:
        store.connect()
        shown = f"redis://***@127.0.0.1:{port}/0?password=***"
        assert store.url == shown and repr(store).startswith(f"RedisStore({shown!r}")
        bucket = RedisBucket(store.client, "llmeval:ratelimit", RateLimits(rpm=60.0), store.url)
        limiter = RateLimiter(RateLimits(rpm=60.0), bucket)
        texts = [repr(store), repr(bucket), repr(limiter)]
        assert all(shown in t for t in texts)
        texts.append(store.describe(RuntimeError(f"AUTH {password} failed")))
        assert texts[-1] == "RuntimeError: AUTH *** failed"
        for t in texts:
            assert password not in t, t
    finally:
        store.close()
