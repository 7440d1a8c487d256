"""The judge holds its limits whatever the endpoint does: deadlines, reply size, impossible usage,
missing credentials, parameters a model refuses. Through the real ``openai`` client against the
scripted test server."""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from judge_limits_support import YES

from pytest_llmeval import score
from pytest_llmeval.core.errors import BudgetExceededError, JudgeError
from pytest_llmeval.core.settings import JudgeSettings, Secret
from pytest_llmeval.core.usage import JudgeClock, UsageLedger
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge import params
from pytest_llmeval.judge.client import JudgeClient
from pytest_llmeval.testing import (
    OpenAITestServer,
    delay,
    raw,
    text,
    tool_call,
    trickle,
)

T = TypeVar("T")


MSGS = [{"role": "user", "content": "Is the sky blue?"}]


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasons": {"type": "string"}, "choice": {"type": "string", "enum": ["A", "B"]}},
    "required": ["reasons", "choice"],
}


def run(ctx: ScoringContext, coro: Coroutine[Any, Any, T]) -> T:
    return ctx.run(coro)


def client_for(ctx: ScoringContext, **changes: Any) -> JudgeClient:
    """A client on the test server with ``changes`` to the run's judge settings."""
    prices = changes.pop("prices", None)
    settings = dataclasses.replace(ctx.settings.judge, **changes)
    return JudgeClient(settings, ledger=ctx.ledger, prices=prices)


def structured(client: JudgeClient) -> Coroutine[Any, Any, Any]:
    return client.structured(MSGS, name="select_choice", description="Pick", schema=SCHEMA)


def test_trickled_reply_is_cut_off_at_the_call_timeout(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """One byte every 0.1 s never leaves the socket silent for a read timeout; the whole call
    must still end at its timeout (the old client waited for the last byte: ~30 s here)."""
    judge_server.enqueue(text("warm"), trickle(0.1, text("x" * 100)))
    client = client_for(judge_ctx, timeout=1.0, max_tries=1)
    run(judge_ctx, client.chat(MSGS))  # the SDK is loaded: only the call is timed
    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"no reply within the timeout of 1 s") as info:
        run(judge_ctx, client.chat(MSGS))
    elapsed = time.monotonic() - t0
    assert elapsed < 2.5, elapsed
    assert "after 1 tries" in str(info.value)
    run(judge_ctx, client.close())


def test_scoring_deadline_holds_over_retries_of_a_trickling_server(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    """Ten tries of one second each would take ten seconds; the scoring's deadline (2 s) ends
    it, whatever the server does."""
    from judges import judge_test_settings

    from pytest_llmeval.engine.context import set_context

    judge_server.set_default(trickle(0.2, YES))
    settings = judge_test_settings(
        judge_server.base_url, tmp_path, timeout=1.0, max_tries=10, overall_timeout=2.0
    )
    ctx = ScoringContext(settings)
    prev = set_context(ctx)
    try:
        t0 = time.monotonic()
        with pytest.raises(JudgeError, match=r"scoring timeout of 2 s") as info:
            score("l3score", input="q?", expected="a", output="a")
        elapsed = time.monotonic() - t0
    finally:
        set_context(prev)
        ctx.close()
    assert elapsed < 3.5, elapsed
    assert len(judge_server.requests) in (2, 3)  # 1 s + 1 s (+ a try with nothing left)
    assert "no reply within the" in str(info.value)


def test_scoring_deadline_covers_all_calls_of_a_scoring(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """A re-asked structured reply is two calls; each alone fits the deadline, both do not."""
    from pytest_llmeval.core.usage import UsageCollector, current_usage

    judge_server.enqueue(
        delay(1.2, tool_call('{"reasons": "r", "choice": ')),  # invalid: re-asked
        delay(1.2, tool_call({"reasons": "r", "choice": "A"})),
    )
    client = client_for(judge_ctx, timeout=1.5, overall_timeout=2.0, max_tries=1)

    async def one_scoring() -> Any:
        token = current_usage.set(UsageCollector())
        try:
            return await structured(client)
        finally:
            current_usage.reset(token)

    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"scoring timeout of 2 s"):
        run(judge_ctx, one_scoring())
    assert time.monotonic() - t0 < 2.8
    assert len(judge_server.requests) == 2
    run(judge_ctx, client.close())


def test_waiting_for_a_concurrency_slot_does_not_count(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """One slot, three scorings of 0.6 s each: the last waits 1.2 s for its slot, which is the
    run's own queue, not the server's doing, so a 1 s scoring deadline still holds for each."""
    import asyncio

    from pytest_llmeval.core.usage import UsageCollector, current_usage

    judge_server.set_default(delay(0.6, text("ok")))
    client = client_for(judge_ctx, overall_timeout=1.0, concurrency=1)

    async def one() -> str | None:
        token = current_usage.set(UsageCollector())
        try:
            return (await client.chat(MSGS)).content
        finally:
            current_usage.reset(token)

    async def three() -> list[str | None]:
        return list(await asyncio.gather(one(), one(), one()))

    assert run(judge_ctx, three()) == ["ok", "ok", "ok"]
    run(judge_ctx, client.close())


def test_judge_clock_counts_overlapping_calls_once() -> None:
    clock = JudgeClock()
    with clock.running():
        with clock.running():
            time.sleep(0.2)
        time.sleep(0.1)
    time.sleep(0.2)  # idle: not counted
    assert 0.28 <= clock.elapsed() < 0.45


def test_an_endpoint_that_keeps_timing_out_is_not_waited_on_again(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """N tests against a hung server must not each wait out the timeout: after 3 requests in a
    row ended in timeouts, the next fails at once, without a request, and says why."""
    judge_server.set_default(delay(3.0, text("late")))
    client = client_for(judge_ctx, timeout=0.3, max_tries=1)
    for _ in range(3):
        with pytest.raises(JudgeError, match="no reply within the timeout"):
            run(judge_ctx, client.chat(MSGS))
    assert len(judge_server.requests) == 3
    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"timed out on the last 3 judge requests") as info:
        run(judge_ctx, client.chat(MSGS, scorer="factuality"))
    assert time.monotonic() - t0 < 0.2
    assert len(judge_server.requests) == 3
    assert "--llm-eval-timeout" in str(info.value) and "'factuality'" in str(info.value)
    run(judge_ctx, client.close())


def test_a_reply_in_between_resets_the_stall_count(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    late = delay(3.0, text("late"))
    judge_server.enqueue(late, late, text("ok"), late, late, text("ok again"))
    client = client_for(judge_ctx, timeout=0.3, max_tries=1)
    outcomes = []
    for _ in range(6):
        try:
            outcomes.append(run(judge_ctx, client.chat(MSGS)).content)
        except JudgeError:
            outcomes.append("timeout")
    assert outcomes == ["timeout", "timeout", "ok", "timeout", "timeout", "ok again"]
    run(judge_ctx, client.close())


def test_negative_usage_is_an_unknown_cost_and_keeps_the_budget(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    ledger = UsageLedger()
    client = JudgeClient(
        judge_ctx.settings.judge,
        ledger=ledger,
        budget_usd=0.5,
        prices={"test-judge": (1.0, 1.0)},
    )
    judge_server.enqueue(
        text("a", usage=(-900_000_000_000, 5)),
        text("b", usage=(3, -7)),
        text("c", usage=(400_000, 200_000)),  # $0.60
        text("never"),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = run(judge_ctx, client.chat(MSGS))
        second = run(judge_ctx, client.chat(MSGS))
    assert first.usage.cost_usd is None and first.usage.prompt_tokens == 0
    assert first.usage.completion_tokens == 5
    assert second.usage.cost_usd is None and second.usage.completion_tokens == 0
    impossible = [w for w in caught if "cannot be true" in str(w.message)]
    assert len(impossible) == 1  # once per client, not once per call
    assert "-900000000000" in str(impossible[0].message)
    assert ledger.spent_usd == 0.0
    run(judge_ctx, client.chat(MSGS))
    assert ledger.spent_usd == pytest.approx(0.6)
    with pytest.raises(BudgetExceededError):
        run(judge_ctx, client.chat(MSGS))
    assert len(judge_server.requests) == 3
    run(judge_ctx, client.close())


@pytest.mark.parametrize("bad", [1.5, 10**12, "12", True])
def test_absurd_token_counts_are_not_priced(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer, bad: Any
) -> None:
    reply = {
        "id": "x",
        "object": "chat.completion",
        "model": "test-judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": bad, "completion_tokens": 1},
    }
    judge_server.enqueue(raw(json.dumps(reply)))
    client = client_for(judge_ctx)
    client.prices = {"test-judge": (1.0, 1.0)}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = run(judge_ctx, client.chat(MSGS))
    assert result.content == "ok"
    assert result.usage.cost_usd is None and result.usage.prompt_tokens == 0
    run(judge_ctx, client.close())


def test_a_reply_without_usage_has_an_unknown_cost(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    reply = {"model": "test-judge", "choices": [{"message": {"role": "assistant", "content": "k"}}]}
    judge_server.enqueue(raw(json.dumps(reply)))
    client = client_for(judge_ctx)
    client.prices = {"test-judge": (1.0, 1.0)}
    result = run(judge_ctx, client.chat(MSGS))
    assert (result.usage.calls, result.usage.cost_usd) == (1, None)
    run(judge_ctx, client.close())


def test_a_reply_over_the_cap_is_a_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """The default cap is 200 000 characters."""
    judge_server.enqueue(text("y" * 200_001), text("z" * 200_000))
    client = judge_ctx.judge()
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, client.chat(MSGS, scorer="factuality"))
    msg = str(info.value)
    assert "200001 characters long, over the cap of 200000" in msg
    assert "--llm-eval-max-reply-chars" in msg and "'factuality'" in msg
    assert "yyyyyyyyyy" not in msg
    assert len(judge_server.requests) == 1  # not retried
    assert run(judge_ctx, client.chat(MSGS)).content == "z" * 200_000  # at the cap: fine


def test_tool_arguments_over_the_cap_are_a_judge_error(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(tool_call({"reasons": "r" * 3_000, "choice": "A"}))
    client = client_for(judge_ctx, max_reply_chars=2_000)
    with pytest.raises(JudgeError, match="over the cap of 2000"):
        run(judge_ctx, structured(client))
    run(judge_ctx, client.close())


def test_a_huge_body_is_refused_without_being_read_whole(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """A 20 MB body with the default cap: refused from its announced length, long before the
    body could have arrived (sent at 64 KiB every 50 ms it would take 16 s)."""
    body = json.dumps({"choices": [{"message": {"content": "w" * 20_000_000}}]})
    judge_server.enqueue(text("warm"), trickle(0.05, raw(body), chunk=65_536))
    client = judge_ctx.judge()
    run(judge_ctx, client.chat(MSGS))
    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"announces 200000\d\d bytes, over the cap of 200000"):
        run(judge_ctx, client.chat(MSGS))
    assert time.monotonic() - t0 < 3.0


def test_no_key_for_openai_is_named_before_any_call(
    judge_ctx: ScoringContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = JudgeClient(JudgeSettings(api_key=None, max_tries=1, timeout=2.0))
    t0 = time.monotonic()
    with pytest.raises(JudgeError) as info:
        run(judge_ctx, client.chat(MSGS, scorer="factuality"))
    assert time.monotonic() - t0 < 0.5
    msg = str(info.value)
    assert "no API key is set" in msg and "OPENAI_API_KEY" in msg
    assert "--llm-eval-judge-base-url" in msg and "https://api.openai.com/v1" in msg
    assert "connection error" not in msg
    assert client.is_openai


def test_no_key_is_fine_for_a_local_server(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(text("ok"))
    client = client_for(judge_ctx, api_key=None)
    assert not client.is_openai
    assert run(judge_ctx, client.chat(MSGS)).content == "ok"
    run(judge_ctx, client.close())


def test_default_model_name_on_another_server_is_not_priced_as_openai(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    """Asked for the default "gpt-4o-mini", a local server answers as its own model: that name is
    kept and the cost is unknown, unless the run gives a price."""
    judge_server.enqueue(
        text("a", usage=(1_000_000, 0), model="llama-3.1-8b-instruct"),
        text("b", usage=(1_000_000, 0), model="llama-3.1-8b-instruct"),
    )
    client = client_for(judge_ctx, model="gpt-4o-mini")
    with pytest.warns(RuntimeWarning, match=r"answers as model 'llama-3.1-8b-instruct'.*default"):
        result = run(judge_ctx, client.chat(MSGS))
    assert result.model == "llama-3.1-8b-instruct"
    assert result.usage.cost_usd is None  # not gpt-4o-mini's $0.15
    client.prices = {"llama-3.1-8b-instruct": (0.02, 0.0)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        priced = run(judge_ctx, client.chat(MSGS))
    assert priced.usage.cost_usd == pytest.approx(0.02)
    run(judge_ctx, client.close())


def test_openai_replies_are_priced_from_the_built_in_table() -> None:
    client = JudgeClient(
        JudgeSettings(base_url="https://api.openai.com/v1", api_key=Secret("sk-x")),
        ledger=UsageLedger(),
    )
    usage = client._account(
        {
            "model": "gpt-4o-mini-2024-07-18",
            "usage": {"prompt_tokens": 1000, "completion_tokens": 200},
        }
    )
    assert usage.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)


def test_structured_result_names_the_model_that_answered(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(
        dataclasses.replace(tool_call({"reasons": "r", "choice": "A"}), model="qwen2.5-7b")
    )
    result = run(judge_ctx, structured(judge_ctx.judge()))
    assert result.model == "qwen2.5-7b"


def reasoning_server(server: OpenAITestServer, model: str) -> None:
    """What OpenAI answers for a reasoning model (the 400s of the GPT-5 family)."""
    server.reject_parameter(model, "temperature", code="unsupported_value", allowed=1)
    server.reject_parameter(model, "logprobs", code="unsupported_parameter")
    server.reject_parameter(model, "max_tokens", code="unsupported_parameter")


def test_gpt5_family_gets_no_temperature_and_max_completion_tokens(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    reasoning_server(judge_server, "gpt-5-mini")
    judge_server.enqueue(tool_call({"reasons": "r", "choice": "A"}), text("short"))
    client = client_for(judge_ctx, model="gpt-5-mini")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known up front: no 400, no warning
        result = run(judge_ctx, structured(client))
        chat = run(judge_ctx, client.chat(MSGS, max_tokens=7))
    assert result.arguments["choice"] == "A" and chat.content == "short"
    first, second = judge_server.requests
    assert (first.status, second.status) == (200, 200)
    assert "temperature" not in first.body and first.body["seed"] == 0
    assert "max_tokens" not in second.body and second.body["max_completion_tokens"] == 7
    run(judge_ctx, client.close())


def test_a_refused_parameter_is_dropped_once_and_remembered(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.reject_parameter("house-reasoner", "seed", code="unsupported_parameter")
    judge_server.enqueue(text("one"), text("two"))
    client = client_for(judge_ctx, model="house-reasoner", max_tries=1)
    with pytest.warns(RuntimeWarning, match=r"refused 'seed' for model 'house-reasoner'"):
        assert run(judge_ctx, client.chat(MSGS)).content == "one"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert run(judge_ctx, client.chat(MSGS)).content == "two"
    statuses = [(r.status, "seed" in r.body) for r in judge_server.requests]
    assert statuses == [(400, True), (200, False), (200, False)]
    err = judge_server.requests[0]
    assert err.body["temperature"] == 0.0
    run(judge_ctx, client.close())


def test_the_cache_key_records_what_is_sent(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    from pytest_llmeval.scorers.llm import Factuality

    unchanged = Factuality(model="gpt-4o-mini").identity(judge_ctx)["extra"]["judge"]
    assert unchanged == {"model": "gpt-4o-mini", "temperature": 0.0, "seed": 0, "mode": "tool"}
    gpt5 = Factuality(model="gpt-5").identity(judge_ctx)["extra"]["judge"]
    assert gpt5 == {"model": "gpt-5", "seed": 0, "mode": "tool"}
    assert judge_ctx.judge({"model": "o3-mini"}).identity() == {
        "model": "o3-mini",
        "seed": 0,
        "mode": "tool",
    }

    scorer = Factuality(model="house-reasoner")
    before = scorer.identity_json(judge_ctx)
    assert '"seed":0' in before.replace(" ", "")
    judge_server.reject_parameter("house-reasoner", "seed", code="unsupported_parameter")
    judge_server.enqueue(text("ok"))
    with pytest.warns(RuntimeWarning):
        run(judge_ctx, judge_ctx.judge({"model": "house-reasoner"}).chat(MSGS))
    after = scorer.identity_json(judge_ctx)  # memoised before: recomputed
    assert '"seed"' not in after and after != before


def test_l3score_on_a_model_without_logprobs_names_the_model(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    with pytest.raises(JudgeError) as info:
        score("l3score", input="q?", expected="a", output="a", model="gpt-5-nano")
    msg = str(info.value)
    assert "needs 'logprobs'" in msg and "'gpt-5-nano'" in msg and "'l3score'" in msg
    assert judge_server.requests == []


def test_l3score_when_the_server_refuses_logprobs(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    judge_server.reject_parameter("house-model", "logprobs", code="unsupported_parameter")
    with pytest.raises(JudgeError) as info:
        score("l3score", input="q?", expected="a", output="a", model="house-model")
    msg = str(info.value)
    assert "needs 'logprobs'" in msg and "'house-model'" in msg and "refused it" in msg
    assert "Unsupported parameter: 'logprobs'" in msg
    assert len(judge_server.requests) == 1  # not retried without it
    assert params.learned("house-model") == frozenset()


def test_other_400s_are_not_retried(
    judge_ctx: ScoringContext, judge_server: OpenAITestServer
) -> None:
    from pytest_llmeval.testing import error

    judge_server.enqueue(error(400, "messages: too long"))
    with pytest.raises(JudgeError, match="was rejected"):
        run(judge_ctx, judge_ctx.judge().chat(MSGS))
    assert len(judge_server.requests) == 1


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("gpt-5-nano-2025-08-07", True),
        ("gpt-5.1", True),
        ("openai/gpt-5", True),
        ("o1", True),
        ("o3-mini", True),
        ("o4-mini", True),
        ("gpt-5-chat-latest", False),
        ("gpt-4o-mini", False),
        ("gpt-4.1", False),
        ("omni-moderation-latest", False),
        ("llama-3.1-8b", False),
        ("gpt-50", False),
    ],
)
def test_model_families(model: str, reasoning: bool) -> None:
    dropped = params.unsupported_by_family(model)
    assert ("temperature" in dropped) is reasoning
    assert ("logprobs" in dropped) is reasoning
    assert "seed" not in dropped


def test_defaults_bound_a_hung_scoring() -> None:
    s = JudgeSettings()
    assert s.overall_timeout <= 120.0 < s.timeout * s.max_tries
    assert s.max_reply_chars == 200_000


def _post_raw(server: OpenAITestServer, body: dict[str, Any]) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_server_refuses_parameters_with_openais_error_body(judge_server: OpenAITestServer) -> None:
    reasoning_server(judge_server, "gpt-5")
    judge_server.enqueue(text("kept for the accepted request"))
    msgs = [{"role": "user", "content": "hi"}]
    status, body = _post_raw(judge_server, {"model": "gpt-5", "messages": msgs, "temperature": 0})
    assert status == 400
    assert body == {
        "error": {
            "message": "Unsupported value: 'temperature' does not support 0 with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    status, body = _post_raw(judge_server, {"model": "gpt-5", "messages": msgs, "max_tokens": 5})
    assert (status, body["error"]["param"], body["error"]["code"]) == (
        400,
        "max_tokens",
        "unsupported_parameter",
    )
    assert "Use 'max_completion_tokens' instead." in body["error"]["message"]
    # the allowed value, other models and other parameters pass; the queued reply was kept
    status, body = _post_raw(judge_server, {"model": "gpt-5", "messages": msgs, "temperature": 1})
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "kept for the accepted request"
    judge_server.enqueue(text("other model"))
    status, _ = _post_raw(judge_server, {"model": "gpt-4o", "messages": msgs, "temperature": 0})
    assert status == 200


def test_server_trickle_sends_headers_at_once_and_the_body_slowly(
    judge_server: OpenAITestServer,
) -> None:
    import http.client

    judge_server.enqueue(trickle(0.05, raw(b'{"x": "0123456789"}'), chunk=2))
    conn = http.client.HTTPConnection("127.0.0.1", judge_server.port, timeout=5)
    t0 = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body=b"{}")
    resp = conn.getresponse()
    headers_at = time.monotonic() - t0
    assert resp.status == 200 and resp.getheader("Content-Length") == "19"
    data = resp.read()
    body_at = time.monotonic() - t0
    conn.close()
    assert data == b'{"x": "0123456789"}'
    assert headers_at < 0.2
    assert body_at >= 0.45  # 10 pieces, 50 ms apart
