"""JudgeClient through the real ``openai`` client against the scripted test server."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_llmeval.core.errors import BudgetExceededError, JudgeError, ScorerConfigError
from pytest_llmeval.core.settings import JudgeSettings, Secret
from pytest_llmeval.core.usage import UsageLedger
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge.client import ChatResult, JudgeClient, extract_json
from pytest_llmeval.testing import (
    OpenAITestServer,
    delay,
    embeddings,
    error,
    moderation,
    text,
    tool_call,
    tool_call_in_content,
)

T = TypeVar("T")
SECRET = "sk-test-SECRET"
MSGS = [{"role": "user", "content": "Is the sky blue?"}]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasons": {"type": "string"}, "choice": {"type": "string", "enum": ["A", "B"]}},
    "required": ["reasons", "choice"],
}


def run(ctx: ScoringContext, coro: Coroutine[Any, Any, T]) -> T:
    return ctx.run(coro)


def structured(client: JudgeClient, scorer: str | None = "demo") -> Coroutine[Any, Any, Any]:
    return client.structured(
        MSGS, name="select_choice", description="Pick one", schema=SCHEMA, scorer=scorer
    )


# -- chat ------------------------------------------------------------------------------------


def test_chat_sends_model_messages_sampling_and_logprobs(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    tops = [("Yes", -0.1), ("No", -2.5), ("yes", -4.0), ("The", -5.0), ("I", -6.0), ("X", -7.0)]
    judge_server.enqueue(text("Yes", top_logprobs=tops, usage=(12, 1)))
    client = judge_ctx.judge()
    result = run(
        judge_ctx, client.chat(MSGS, scorer="demo", max_tokens=3, logprobs=True, top_logprobs=5)
    )
    [req] = judge_server.requests
    assert req.endpoint == "chat"
    assert req.body["model"] == "test-judge"
    assert req.body["messages"] == MSGS
    assert req.body["temperature"] == 0.0
    assert req.body["seed"] == 0
    assert req.body["max_tokens"] == 3
    assert req.body["logprobs"] is True
    assert req.body["top_logprobs"] == 5
    assert "tools" not in req.body
    assert req.headers["authorization"] == f"Bearer {SECRET}"
    assert result == ChatResult(
        content="Yes",
        top_logprobs=tops[:5],
        usage=result.usage,
        model="test-judge",
    )
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 1)
    assert result.usage.calls == 1


def test_chat_temperature_override_and_seed_left_out_when_none(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.enqueue(text("hello"))
    client = judge_ctx.judge({"seed": None})  # None means: keep the run's seed (0)
    assert client.settings.seed == 0
    noseed = JudgeClient(JudgeSettings(**{**_fields(client.settings), "seed": None}))
    run(judge_ctx, noseed.chat(MSGS, temperature=0.7))
    body = judge_server.requests[0].body
    assert body["temperature"] == 0.7
    assert "seed" not in body
    assert "logprobs" not in body
    run(judge_ctx, noseed.close())


def _fields(s: JudgeSettings) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


def test_chat_reply_without_logprobs_gives_none(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text("Yes"))
    result = run(judge_ctx, judge_ctx.judge().chat(MSGS, logprobs=True, top_logprobs=5))
    assert result.content == "Yes"
    assert result.top_logprobs is None


# -- structured replies ----------------------------------------------------------------------


def test_structured_tool_mode_forces_the_tool_and_parses_arguments(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(tool_call({"reasons": "same facts", "choice": "A"}, usage=(50, 7)))
    result = run(judge_ctx, structured(judge_ctx.judge()))
    assert result.arguments == {"reasons": "same facts", "choice": "A"}
    assert result.raw_text == '{"reasons": "same facts", "choice": "A"}'
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls) == (
        50,
        7,
        1,
    )
    body = judge_server.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "select_choice", "description": "Pick one", "parameters": SCHEMA},
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "select_choice"}}
    assert body["messages"] == MSGS
    assert "response_format" not in body
    assert (body["model"], body["temperature"], body["seed"]) == ("test-judge", 0.0, 0)


def test_structured_temperature_override(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "A"}))
    client = judge_ctx.judge({"seed": 42})
    run(
        judge_ctx,
        client.structured(
            MSGS, name="select_choice", description="d", schema=SCHEMA, temperature=0.5
        ),
    )
    body = judge_server.requests[0].body
    assert (body["temperature"], body["seed"]) == (0.5, 42)


def test_structured_accepts_a_tool_call_written_as_json_content(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    # llama.cpp's server returns {"name": ..., "arguments": {...}} as text in some modes.
    judge_server.enqueue(
        tool_call_in_content({"reasons": "r", "choice": "B"}, name="select_choice")
    )
    result = run(judge_ctx, structured(judge_ctx.judge()))
    assert result.arguments == {"reasons": "r", "choice": "B"}
    assert len(judge_server.requests) == 1


def test_structured_accepts_bare_arguments_as_content(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text('Sure: {"reasons": "r", "choice": "A"}'))
    result = run(judge_ctx, structured(judge_ctx.judge()))
    assert result.arguments == {"reasons": "r", "choice": "A"}


def test_malformed_tool_arguments_are_re_asked_once(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        tool_call('{"reasons": "r", "choice": ', usage=(10, 5)),
        tool_call({"reasons": "r", "choice": "B"}, usage=(20, 5)),
    )
    result = run(judge_ctx, structured(judge_ctx.judge()))
    assert result.arguments["choice"] == "B"
    assert result.usage.calls == 2
    assert result.usage.prompt_tokens == 30
    first, second = judge_server.requests
    assert second.body["messages"][: len(MSGS)] == MSGS
    assistant, correction = second.body["messages"][len(MSGS) :]
    assert assistant == {"role": "assistant", "content": '{"reasons": "r", "choice": '}
    assert correction["role"] == "user"
    assert "not valid JSON" in correction["content"]
    assert "select_choice" in correction["content"]
    assert second.body["tool_choice"] == first.body["tool_choice"]


def test_schema_violations_twice_raise_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        tool_call({"reasons": "r", "choice": "Z"}),
        tool_call({"choice": "A"}),
    )
    client = judge_ctx.judge()
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, structured(client, scorer="factuality"))
    msg = str(info.value)
    assert "'factuality'" in msg
    assert "'test-judge'" in msg
    assert judge_server.base_url in msg
    assert "'reasons' is a required property" in msg
    assert info.value.scorer == "factuality"
    assert len(judge_server.requests) == 2
    # The re-ask quoted the first problem.
    assert (
        "'Z' is not one of ['A', 'B']" in judge_server.requests[1].body["messages"][-1]["content"]
    )


def test_wrong_function_name_is_invalid(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        tool_call({"reasons": "r", "choice": "A"}, name="other"),
        tool_call({"reasons": "r", "choice": "A"}, name="other"),
    )
    with pytest.raises(JudgeError, match="called function 'other' instead of 'select_choice'"):
        run(judge_ctx, structured(judge_ctx.judge()))


def test_json_mode_uses_response_format_and_states_the_schema(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text('{"reasons": "fine", "choice": "A"}'))
    client = judge_ctx.judge({"mode": "json"})
    result = run(judge_ctx, structured(client))
    assert result.arguments == {"reasons": "fine", "choice": "A"}
    body = judge_server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert "tools" not in body and "tool_choice" not in body
    [msg] = body["messages"]  # the instruction extends the user turn, no second user turn
    assert msg["content"].startswith("Is the sky blue?")
    assert '"enum": [' in msg["content"] and "select_choice" in msg["content"]


def test_text_mode_extracts_the_first_json_object(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        text('Let me see. ```json\n{"reasons": "x {y}", "choice": "B"}\n``` and {"other": 1}')
    )
    client = judge_ctx.judge({"mode": "text"})
    result = run(judge_ctx, structured(client))
    assert result.arguments == {"reasons": "x {y}", "choice": "B"}
    body = judge_server.requests[0].body
    assert "response_format" not in body and "tools" not in body
    assert "JSON schema" in body["messages"][-1]["content"]


def test_text_mode_without_json_is_re_asked_then_an_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text("I think A."), text("Definitely A."))
    with pytest.raises(JudgeError, match="contains no JSON object"):
        run(judge_ctx, structured(judge_ctx.judge({"mode": "text"})))
    assert len(judge_server.requests) == 2


def test_unknown_mode_is_a_config_error(judge_ctx: ScoringContext) -> None:
    with pytest.raises(ScorerConfigError, match="'mode' is 'xml'"):
        run(judge_ctx, structured(judge_ctx.judge({"mode": "xml"})))


def test_extract_json() -> None:
    assert extract_json('noise {"a": [1, {"b": 2}]} tail {"c": 3}') == {"a": [1, {"b": 2}]}
    assert extract_json('{broken {"ok": true}') == {"ok": True}
    assert extract_json("[1, 2]") == [1, 2]
    assert extract_json("no json here") is None


# -- retries, timeouts, errors ---------------------------------------------------------------


def test_429_retry_after_is_honoured(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(error(429, "slow down", retry_after=0.6), text("ok"))
    result = run(judge_ctx, judge_ctx.judge().chat(MSGS))
    assert result.content == "ok"
    first, second = judge_server.requests
    assert (first.status, second.status) == (429, 200)
    assert first.finished_at is not None
    # The client waited (at least) the Retry-After before trying again, not the 0.01 s backoff.
    assert second.received_at - first.finished_at >= 0.55


def test_500_is_retried(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(error(500), error(503), text("ok"))
    result = run(judge_ctx, judge_ctx.judge().chat(MSGS))
    assert result.content == "ok"
    assert [r.status for r in judge_server.requests] == [500, 503, 200]


def test_timeout_is_retried(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(delay(3.0, text("late")), text("on time"))
    result = run(judge_ctx, judge_ctx.judge({"timeout": 0.4}).chat(MSGS))
    assert result.content == "on time"
    assert len(judge_server.requests) == 2


def test_exhausted_retries_name_endpoint_model_and_cause_without_the_key(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(*(error(500, f"backend down (key {SECRET})") for _ in range(3)))
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, judge_ctx.judge().chat(MSGS, scorer="l3score"))
    msg = str(info.value)
    assert len(judge_server.requests) == 3  # max_tries=3
    assert "after 3 tries" in msg
    assert judge_server.base_url in msg and "'test-judge'" in msg and "'l3score'" in msg
    assert "HTTP 500: backend down" in msg
    assert SECRET not in msg and SECRET not in repr(info.value)
    # No chained SDK exception (it holds the request, headers included) in the traceback.
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    assert info.value.cause is not None and SECRET not in info.value.cause


def test_exhausted_timeouts(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(*(delay(3.0, text("late")) for _ in range(2)))
    client = judge_ctx.judge({"timeout": 0.3, "max_tries": 2})
    with pytest.raises(JudgeError, match=r"after 2 tries.*no reply within the timeout of 0\.3 s"):
        run(judge_ctx, client.chat(MSGS))


def test_connection_errors_are_retried_then_reported(judge_ctx: ScoringContext) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = judge_ctx.judge({"base_url": url, "max_tries": 2})
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, client.chat(MSGS))
    msg = str(info.value)
    assert "after 2 tries" in msg and "connection error" in msg and url in msg


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_non_retryable_errors_fail_at_once(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer, status: int
) -> None:
    judge_server.enqueue(error(status, f"Incorrect API key provided: {SECRET}"))
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, judge_ctx.judge().chat(MSGS))
    assert len(judge_server.requests) == 1
    msg = str(info.value)
    assert f"HTTP {status}" in msg and "was rejected" in msg
    assert SECRET not in msg


def test_retry_after_beyond_the_overall_timeout_gives_up_at_once(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(error(429, retry_after=30), text("never"))
    client = judge_ctx.judge({"overall_timeout": 2.0})
    with pytest.raises(JudgeError, match="scoring timeout of 2 s") as info:
        run(judge_ctx, client.chat(MSGS))
    assert "HTTP 429" in str(info.value)
    assert len(judge_server.requests) == 1


def test_key_never_in_repr(judge_ctx: ScoringContext) -> None:
    client = judge_ctx.judge()
    assert SECRET not in repr(client)
    assert SECRET not in repr(client.settings)
    assert "test-judge" in repr(client)


def test_no_key_placeholder_for_local_endpoints(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = JudgeSettings(base_url=judge_server.base_url, model="local", api_key=None)
    client = JudgeClient(settings)
    judge_server.enqueue(text("ok"))
    run(judge_ctx, client.chat(MSGS))
    run(judge_ctx, client.close())
    assert judge_server.requests[0].headers["authorization"] == "Bearer no-key"


# -- usage, cost, budget ---------------------------------------------------------------------


def test_usage_and_cost_from_the_run_price_table(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    # Priced by the run's table (the built-in OpenAI list applies to api.openai.com only).
    judge_server.enqueue(text("a", usage=(1000, 200)), text("b", usage=(1000, 200)))
    client = JudgeClient(
        JudgeSettings(**{**_fields(judge_ctx.settings.judge), "model": "gpt-4o-mini"}),
        ledger=judge_ctx.ledger,
        prices={"gpt-4o-mini": (0.15, 0.60)},
    )
    result = run(judge_ctx, client.chat(MSGS))
    assert result.usage.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    assert judge_server.requests[0].body["model"] == "gpt-4o-mini"
    unknown = run(judge_ctx, judge_ctx.judge().chat(MSGS))  # "test-judge" has no price
    assert unknown.usage.cost_usd is None
    total = judge_ctx.ledger.total
    assert (total.prompt_tokens, total.completion_tokens, total.calls) == (2000, 400, 2)
    assert total.cost_usd == pytest.approx(0.00027)
    run(judge_ctx, client.close())


def test_price_overrides_win(judge_server: OpenAITestServer, judge_ctx: ScoringContext) -> None:
    ledger = UsageLedger()
    client = JudgeClient(
        judge_ctx.settings.judge, ledger=ledger, prices={"test-judge": (2.0, 10.0)}
    )
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "A"}, usage=(500_000, 100_000)))
    result = run(judge_ctx, structured(client))
    assert result.usage.cost_usd == pytest.approx(1.0 + 1.0)
    assert ledger.spent_usd == pytest.approx(2.0)
    run(judge_ctx, client.close())


def test_budget_stops_new_calls_before_they_start(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    ledger = UsageLedger()
    client = JudgeClient(
        judge_ctx.settings.judge,
        ledger=ledger,
        budget_usd=0.5,
        prices={"test-judge": (1.0, 1.0)},
    )
    judge_server.enqueue(text("a", usage=(400_000, 200_000)), text("b"))
    run(judge_ctx, client.chat(MSGS))  # spends 0.60
    with pytest.raises(BudgetExceededError) as info:
        run(judge_ctx, client.chat(MSGS, scorer="factuality"))
    assert isinstance(info.value, JudgeError)
    msg = str(info.value)
    assert "$0.5000" in msg and "$0.6000" in msg and "'factuality'" in msg
    assert len(judge_server.requests) == 1  # the second call never reached the server
    with pytest.raises(BudgetExceededError):
        run(judge_ctx, client.embed(["x"]))
    run(judge_ctx, client.close())


# -- concurrency -----------------------------------------------------------------------------


def test_concurrency_limit_is_respected(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(text("ok"))
    judge_server.latency = 0.3
    client = judge_ctx.judge({"concurrency": 3})

    async def many() -> list[ChatResult]:
        return list(await asyncio.gather(*(client.chat(MSGS) for _ in range(12))))

    results = run(judge_ctx, many())
    assert [r.content for r in results] == ["ok"] * 12
    assert judge_server.max_in_flight == 3


def test_clients_work_on_more_than_one_loop(judge_server: OpenAITestServer, tmp_path: Path) -> None:
    judge_server.set_default(text("ok"))
    client = JudgeClient(JudgeSettings(base_url=judge_server.base_url, model="m"))

    async def once() -> str | None:
        return (await client.chat(MSGS)).content

    assert asyncio.run(once()) == "ok"
    assert asyncio.run(once()) == "ok"


# -- embeddings and moderation ---------------------------------------------------------------


def test_embed_returns_vectors_in_order(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(embeddings([[1.0, 0.0], [0.0, 2.5]]))
    vectors, usage = run(judge_ctx, judge_ctx.judge().embed(["first", "second text"]))
    assert vectors == [[1.0, 0.0], [0.0, 2.5]]
    body = judge_server.requests[0].body
    assert body["input"] == ["first", "second text"]
    assert body["model"] == "text-embedding-3-small"
    assert body["encoding_format"] == "float"
    assert usage.prompt_tokens == 3 and usage.calls == 1
    # a local server is not priced from OpenAI's list (see test_judge_hardening)
    assert usage.cost_usd is None
    assert run(judge_ctx, judge_ctx.judge().embed([])) == ([], usage.__class__())


def test_embed_model_override(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    vectors, _ = run(judge_ctx, judge_ctx.judge().embed(["abc"], model="my-embedder"))
    assert judge_server.requests[0].body["model"] == "my-embedder"
    assert len(vectors[0]) == 64  # the server's default hashed embedding


def test_moderate(judge_ctx: ScoringContext, judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(moderation(True, {"hate": 0.91}, {"hate": True}))
    result = run(judge_ctx, judge_ctx.judge().moderate("some text", model="omni-moderation-latest"))
    assert result.flagged is True
    assert result.categories["hate"] is True and result.categories["violence"] is False
    assert result.category_scores["hate"] == 0.91
    assert result.usage.calls == 1 and result.usage.cost_usd is None
    body = judge_server.requests[0].body
    assert body == {"input": "some text", "model": "omni-moderation-latest"}


# -- import cost -----------------------------------------------------------------------------


def test_importing_the_package_does_not_import_openai() -> None:
    code = (
        "import sys, pytest_llmeval, pytest_llmeval.judge, pytest_llmeval.judge.client, "
        "pytest_llmeval.testing; print('openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_secret_settings_fixture_sanity(judge_ctx: ScoringContext) -> None:
    assert judge_ctx.settings.judge.api_key == Secret(SECRET)


# -- replies out of format -------------------------------------------------------------------


def test_reply_that_is_not_json_is_a_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    from pytest_llmeval.testing import raw

    judge_server.enqueue(raw("<html>proxy error</html>"), raw('{"choices": []}'))
    with pytest.raises(JudgeError, match=r"not in the OpenAI format: not JSON \('<html>proxy"):
        run(judge_ctx, judge_ctx.judge().chat(MSGS))
    with pytest.raises(JudgeError, match="no message in 'choices'"):
        run(judge_ctx, judge_ctx.judge().chat(MSGS))


def test_base64_embeddings_are_decoded(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    # An endpoint that ignores encoding_format="float" and answers in base64 anyway.
    import base64
    import json
    import struct

    from pytest_llmeval.testing import raw

    vec = base64.b64encode(struct.pack("<2f", 0.5, -1.0)).decode()
    body = {"data": [{"index": 0, "embedding": vec}], "model": "e", "usage": {"prompt_tokens": 1}}
    judge_server.enqueue(raw(json.dumps(body), endpoint="embeddings"))
    vectors, _ = run(judge_ctx, judge_ctx.judge().embed(["x"]))
    assert vectors == [[0.5, -1.0]]


def test_moderation_reply_without_results(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    from pytest_llmeval.testing import raw

    judge_server.enqueue(raw('{"results": []}', endpoint="moderations"))
    with pytest.raises(JudgeError, match="moderations reply is not in the OpenAI format"):
        run(judge_ctx, judge_ctx.judge().moderate("x"))


def test_retry_after_header_forms() -> None:
    import email.utils
    import time

    from pytest_llmeval.judge.client import _retry_after

    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert _retry_after({}) is None
    assert _retry_after({"retry-after": "soon"}) is None
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (_retry_after({"retry-after": when}) or 0) <= 31


def test_concurrency_limit_is_shared_by_clients_of_one_run(
    judge_server: OpenAITestServer, judge_ctx: ScoringContext
) -> None:
    judge_server.set_default(text("ok"))
    judge_server.latency = 0.3
    clients = [judge_ctx.judge({"concurrency": 2, "seed": i}) for i in range(4)]
    assert len({id(c) for c in clients}) == 4  # distinct settings, distinct clients

    async def many() -> list[ChatResult]:
        calls = [c.chat(MSGS) for c in clients for _ in range(2)]
        return list(await asyncio.gather(*calls))

    assert len(run(judge_ctx, many())) == 8
    assert judge_server.max_in_flight == 2
    assert sorted(r.body["seed"] for r in judge_server.requests) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_redaction_of_key_like_text(judge_ctx: ScoringContext) -> None:
    client = judge_ctx.judge()
    text_in = f"bad key {SECRET}; other sk-proj-abcd1234; disk-space fine; task-12345"
    out = client._redact(text_in)
    assert SECRET not in out and "sk-proj-abcd1234" not in out
    assert "disk-space fine; task-12345" in out


def test_rejected_tool_call_suggests_another_mode(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(error(400, "tool_choice object is not supported"))
    with pytest.raises(JudgeError, match="use judge mode 'json' or 'text'") as info:
        run(judge_ctx, structured(judge_ctx.judge()))
    assert "HTTP 400: tool_choice object is not supported" in str(info.value)


@pytest.mark.parametrize(
    ("url", "plain"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost/v1", True),
        ("http://[::1]:9000/v1", True),
        ("http://127.0.0.53/v1", True),
        ("http://localhost./v1", True),
        ("http://[0:0:0:0:0:0:0:1]/v1", True),
        ("https://127.0.0.1/v1", False),
        ("http://127.evil.example/v1", False),
        ("http://127.0.0.1.nip.io/v1", False),
        ("http://judge.internal/v1", False),
        ("http://10.0.0.5/v1", False),
        ("https://api.openai.com/v1", False),
        (None, False),
    ],
)
def test_plain_loopback_endpoints_skip_tls_setup(url: str | None, plain: bool) -> None:
    from pytest_llmeval.judge.client import _make_sdk_client, _plain_loopback

    assert _plain_loopback(url) is plain
    sdk = _make_sdk_client(JudgeSettings(base_url=url or "https://api.openai.com/v1"))
    # A local plain-HTTP judge gets a client that follows no redirect (so it can never reach
    # an unverified https:// host); every other endpoint keeps the SDK's verified default.
    assert sdk._client.follow_redirects is (not plain)
    ssl_context = sdk._client._transport._pool._ssl_context
    if not plain:
        assert ssl_context.verify_mode == ssl.CERT_REQUIRED
