"""One rate limit for the run and the fleet (--llm-eval-rpm, --llm-eval-tpm): the bucket's
arithmetic, four xdist workers against the test server, two "machines" sharing a real
redis-server, tokens reserved and settled, Redis failing mid-run, and bad values."""

from __future__ import annotations

import asyncio
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from ratelimit_support import YES, _arrivals, posix_only

from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.plugin.progress import format_status
from pytest_llmeval.stores.ratelimit import (
    FileBucket,
    RateLimiter,
    RateLimitWarning,
    _give,
    _take,
    estimate_tokens,
)
from pytest_llmeval.testing import OpenAITestServer, text


def test_bucket_arithmetic() -> None:
    limits = RateLimits(rpm=120, tpm=600, burst_s=1.0)  # 2 requests/s, 10 tokens/s; holds 2, 10
    assert (limits.request_capacity, limits.token_capacity) == (2.0, 10.0)
    state = (-1.0, 0.0, 0.0)  # fresh: full
    state, wait = _take(state, 100.0, limits, 4)
    assert (state, wait) == ((100.0, 1.0, 6.0), 0.0)
    state, wait = _take(state, 100.0, limits, 4)
    assert (state, wait) == ((100.0, 0.0, 2.0), 0.0)
    state, wait = _take(state, 100.0, limits, 4)  # no request left, and 2 tokens short
    assert state == (100.0, 0.0, 2.0) and wait == pytest.approx(0.5)
    state, wait = _take(state, 100.5, limits, 4)  # half a second: one request, 7 tokens back
    assert state == (100.5, 0.0, 3.0) and wait == 0.0
    # a reply used 1 token, not 4: 3 given back; one that used 9: 5 charged (a debt)
    assert _give(state, 100.5, limits, 0, 3) == (100.5, 0.0, 6.0)
    assert _give(state, 100.5, limits, 0, -5) == (100.5, 0.0, -2.0)
    # never above the capacity, whatever is given back
    assert _give(state, 200.0, limits, 1, 50) == (200.0, 2.0, 10.0)
    # a request larger than the whole bucket goes when it is full, leaving a debt
    state, wait = _take((200.0, 2.0, 9.0), 200.0, limits, 25)
    assert wait == pytest.approx(0.1)
    state, wait = _take((200.0, 2.0, 10.0), 200.0, limits, 25)
    assert (state, wait) == ((200.0, 1.0, -15.0), 0.0)
    # a limit on tokens alone never counts requests, and the reverse
    only_tokens = RateLimits(tpm=600)
    assert _take((0.0, 0.0, 10.0), 0.0, only_tokens, 10)[1] == 0.0
    assert _take((0.0, 0.0, 0.0), 0.0, RateLimits(rpm=60), 10**9) == ((0.0, 0.0, 0.0), 1.0)
    assert limits.describe() == "120 rpm (burst 2), 600 tpm (burst 10)"
    assert RateLimits(rpm=30).describe() == "30 rpm (burst 1)"  # at least one request


def test_token_estimate() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 5}
    assert estimate_tokens(body, "chat") == -(-len(json.dumps(body)) // 4) + 5
    del body["max_tokens"]
    assert estimate_tokens(body, "chat") == estimate_tokens(body, "embeddings") + 256


def test_status_line_shows_the_wait() -> None:
    line = format_status(
        done=3,
        total=10,
        in_flight=2,
        judge_calls=3,
        cached=0,
        spent=0.0,
        budget=None,
        eta=None,
        rate_wait=65.0,
    )
    assert line.endswith(" | $0.0000 | rate-limited 1m05s")


@posix_only
def test_a_limit_on_tokens_settles_with_the_reported_usage(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    """18000 tpm = 300 tokens a second, bucket of 300. Each reply reports 300 tokens used, so
    after the first two requests one starts per second; by the estimate alone (about 30 tokens
    each) all six would go at once."""
    from judges import judge_test_settings

    from pytest_llmeval.engine.context import ScoringContext

    limits = RateLimits(tpm=18000)
    bucket = FileBucket.create(limits)
    try:
        limiter = RateLimiter(limits, bucket, stats=bucket)
        ctx = ScoringContext(judge_test_settings(judge_server.base_url, tmp_path), limiter=limiter)
        client = ctx.judge()
        messages = [{"role": "user", "content": "Is it so?"}]
        judge_server.set_default(text("Yes", usage=(299, 1)))

        async def five() -> None:
            for _ in range(6):
                await client.chat(messages, max_tokens=1)

        ctx.run(five())
        times = _arrivals(judge_server)
        span = max(times) - min(times)
        assert span >= 4.1 - 0.8, times  # about 0.1 s, then 1 s per request: 4.1 s
        assert limiter.waits == 5 and limiter.run_waited()[1] == 5

        # A reply that used fewer tokens than reserved gives the difference back: the bucket is
        # full again at once, not after the estimate has trickled back.
        limits10 = RateLimits(tpm=6000, burst_s=10)  # 100 tokens/s, holds 1000
        big = FileBucket.create(limits10)
        limiter10 = RateLimiter(limits10, big)
        client.limiter = limiter10
        judge_server.set_default(text("Yes", usage=(10, 0)))
        long_messages = [{"role": "user", "content": "y" * 2000}]
        estimate = estimate_tokens(
            {**client._chat_kwargs(long_messages, None), "max_tokens": 1}, "chat"
        )
        assert estimate > 500
        ctx.run(client.chat(long_messages, max_tokens=1))
        assert big.levels()[1] >= 990.0  # 1000 - 10 used (refilled up to the cap)
        # ... and one that used more is a debt the next requests wait out
        judge_server.set_default(text("Yes", usage=(3000, 0)))
        ctx.run(client.chat(long_messages, max_tokens=1))
        assert big.levels()[1] < -1500.0
        big.remove()
        ctx.close()
    finally:
        bucket.remove()


def test_the_wait_is_not_judge_time_and_every_try_waits(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    """60 rpm, burst 1: one request a second. Four calls of one scoring wait about 3 s in all
    for the limit, three times its 1 s of judge time, and still succeed: the wait is queueing,
    like the wait for a concurrency slot. A 429 retried goes through the limit again."""
    from judges import judge_test_settings

    from pytest_llmeval.core.usage import UsageCollector, current_usage
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.testing import error

    limits = RateLimits(rpm=60)
    bucket = FileBucket.create(limits)
    try:
        limiter = RateLimiter(limits, bucket, stats=bucket)
        settings = judge_test_settings(judge_server.base_url, tmp_path, overall_timeout=1.0)
        ctx = ScoringContext(settings, limiter=limiter)
        client = ctx.judge()
        judge_server.set_default(YES)
        messages = [{"role": "user", "content": "Is it so?"}]
        collector = UsageCollector()

        async def one_scoring() -> None:
            current_usage.set(collector)
            for _ in range(4):
                await client.chat(messages, max_tokens=1)

        ctx.run(one_scoring())
        assert collector.total.calls == 4
        assert collector.clock.elapsed() < 1.0  # the judge time: the requests alone
        # about 3 s of waits; less when a loaded machine makes the requests themselves slow
        # (the bucket refills meanwhile), as the arrivals' margin below allows
        assert limiter.waited_s >= 3.0 - 0.6 and limiter.waits == 3
        times = _arrivals(judge_server)
        # the bucket allows no less than 3 s; an arrival may lag its start (a loaded machine)
        assert times[3] - times[0] >= 3.0 - 0.6

        judge_server.clear()
        judge_server.enqueue(error(429, "slow down", retry_after=0.0))
        ctx.run(client.chat(messages, max_tokens=1))
        assert [r.status for r in judge_server.requests_to("chat")] == [429, 200]
        assert limiter.waits == 5  # the first try and the retry each waited for a request
        ctx.close()
    finally:
        bucket.remove()


def test_the_lua_bucket_does_the_same_arithmetic(redis_server: Any) -> None:
    import redis

    from pytest_llmeval.stores.ratelimit import RedisBucket

    limits = RateLimits(rpm=120, tpm=600)  # holds 2 requests and 10 tokens
    client = redis.Redis(port=redis_server.port)
    key = "t-lua:ratelimit"
    client.delete(key)
    bucket = RedisBucket(client, key, limits, redis_server.url)
    assert bucket.take(4) == 0.0 and bucket.take(4) == 0.0
    wait = bucket.take(4)  # no request left (0.5 s), 2 tokens short (0.2 s)
    assert 0.45 <= wait <= 0.5
    level = client.hgetall(key)
    assert float(level[b"r"]) == pytest.approx(0.0, abs=0.05)
    assert float(level[b"k"]) == pytest.approx(2.0, abs=0.5)
    bucket.give(0, -20)  # a reply that used 20 tokens more than reserved: a debt
    assert float(client.hget(key, "k")) == pytest.approx(-18.0, abs=0.5)
    assert bucket.take(4) == pytest.approx(2.2, abs=0.1)  # (4 + 18) / 10 tokens a second
    bucket.give(1, 100)  # never above the capacities
    level = client.hgetall(key)
    assert float(level[b"r"]) <= 2.0 and float(level[b"k"]) <= 10.0
    client.delete(key)
    client.close()


@posix_only
def test_redis_down_mid_run_falls_back_to_the_file_with_one_warning(own_redis: Any) -> None:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from pytest_llmeval.stores.ratelimit import RedisBucket

    limits = RateLimits(rpm=120)
    client = redis.Redis(port=own_redis.port, socket_connect_timeout=1, socket_timeout=1)
    remote = RedisBucket(client, "t-down:ratelimit", limits, own_redis.url)
    file = FileBucket.create(limits)
    try:
        limiter = RateLimiter(limits, remote, fallback=file, stats=file)

        async def take(n: int) -> None:
            for _ in range(n):
                await limiter.acquire(0)

        asyncio.run(take(2))  # the burst, from Redis
        assert client.hexists("t-down:ratelimit", "t")
        assert file.levels()[0] == 2.0  # the file bucket untouched: still full
        with pytest.warns(RateLimitWarning) as caught:
            no_retry = Retry(NoBackoff(), 0)  # redis-py would retry the vanished connection
            redis.Redis(port=own_redis.port, retry=no_retry).shutdown(nosave=True)
            time.sleep(0.2)
            asyncio.run(take(3))  # two from the full file bucket, then a wait
        messages = [str(w.message) for w in caught if w.category is RateLimitWarning]
        assert len(messages) == 1, messages
        assert messages[0] == (
            f"llm-eval: the shared rate limit in Redis {own_redis.url} failed (ConnectionError); "
            "judge requests are now limited to 120 rpm (burst 2) for this machine's run "
            "(file lock) only, not for the fleet"
        )
        assert limiter.bucket is file and limiter.fell_back == "ConnectionError"
        assert file.totals()[2] == 1  # the summary says that a process fell back
        assert limiter.waits == 1 and limiter.waited_s >= 0.4  # still limited, never unlimited
    finally:
        file.remove()


@posix_only
def test_a_file_that_goes_away_leaves_this_process_limited_with_one_warning() -> None:
    limits = RateLimits(rpm=120)
    file = FileBucket.create(limits)
    limiter = RateLimiter(limits, file, stats=file)

    async def take(n: int) -> None:
        for _ in range(n):
            await limiter.acquire(0)

    asyncio.run(take(1))
    file.remove()  # e.g. a temporary directory cleaned under a running worker
    with pytest.warns(RateLimitWarning) as caught:
        asyncio.run(take(3))  # a full bucket of its own: two at once, then a wait
    messages = [str(w.message) for w in caught if w.category is RateLimitWarning]
    assert messages == [
        f"llm-eval: the run's rate-limit file {file.path} could not be used ([Errno 2] No such "
        f"file or directory: '{file.path}'); judge requests are now limited to 120 rpm "
        "(burst 2) for this process only"
    ]
    assert limiter.waits == 1 and limiter.waited_s >= 0.4
    assert limiter.run_waited() == (limiter.waited_s, 1)  # the file's total is gone


def test_settings_from_the_environment() -> None:
    from pytest_llmeval.core.settings import Settings

    env = {"LLM_EVAL_RPM": "600", "LLM_EVAL_TPM": "90000", "LLM_EVAL_RATE_BURST": "2.5"}
    assert Settings.from_env(env).rate_limits == RateLimits(rpm=600, tpm=90000, burst_s=2.5)
    assert not Settings.from_env({}).rate_limits.active
    with pytest.raises(ValueError, match=r"env LLM_EVAL_TPM: '1e5' is not a positive whole"):
        Settings.from_env({"LLM_EVAL_TPM": "1e5"})


def test_the_lua_bucket_keeps_its_own_debt_bounded(redis_server: Any) -> None:
    """A charge larger than an hour of the token rate leaves a debt of an hour, not more: the
    state the script writes is always one it accepts when it reads it back."""
    import redis

    from pytest_llmeval.core.limits import MAX_DEBT_S
    from pytest_llmeval.stores.ratelimit import RedisBucket

    limits = RateLimits(rpm=60, tpm=600)  # 10 tokens a second
    client = redis.Redis(port=redis_server.port)
    key = "t-debt:ratelimit"
    client.delete(key)
    bucket = RedisBucket(client, key, limits, redis_server.url)
    bucket.give(0, -1e9)  # a reply that used a billion tokens more than reserved
    assert float(client.hget(key, "k")) == pytest.approx(-MAX_DEBT_S * 10, rel=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "broken": no warning
        wait = bucket.take(1)
    assert MAX_DEBT_S * 0.99 <= wait <= MAX_DEBT_S + 1
    client.delete(key)
    client.close()


@posix_only
@pytest.mark.parametrize(
    ("values", "shown"),
    [
        pytest.param((0.0, -1e18, 10.0, 0.0, 0.0, 0.0), "requests -1e+18", id="negative"),
        pytest.param((0.0, math.nan, 10.0, 0.0, 0.0, 0.0), "requests nan", id="nan"),
        pytest.param((0.0, 1.0, -math.inf, 0.0, 0.0, 0.0), "tokens -inf", id="infinite-debt"),
        pytest.param((1e18, 1.0, 1.0, 0.0, 0.0, 0.0), "last update 1e+18", id="future"),
        pytest.param((0.0, 1.0, 1.0, -5.0, 0.0, 0.0), "seconds waited -5", id="negative-wait"),
        pytest.param((0.0, 1.0, 1.0, 0.0, math.nan, 0.0), "requests that waited nan", id="count"),
    ],
)
def test_a_broken_file_bucket_is_reset_with_one_warning(values: Any, shown: str) -> None:
    import struct

    limits = RateLimits(rpm=120, tpm=600)
    file = FileBucket.create(limits)
    try:
        file.path.write_bytes(struct.pack("<6d", *values))
        limiter = RateLimiter(limits, file, stats=file)

        async def take(n: int) -> None:
            for _ in range(n):
                await limiter.acquire(1)

        started = time.monotonic()
        with pytest.warns(RateLimitWarning) as caught:
            asyncio.run(take(2))  # a fresh, full bucket: the burst of 2 at once
        assert time.monotonic() - started < 30
        # only ours: garbage collection may emit a stray ResourceWarning here under load
        messages = [str(w.message) for w in caught if w.category is RateLimitWarning]
        assert len(messages) == 1 and shown in messages[0], messages
        assert f"the run's rate-limit file {file.path} held " in messages[0]
        assert "it is reset" in messages[0]
        assert limiter.bucket is file  # reset, still the run's bucket
        waited, waits, fallbacks = file.totals()
        assert math.isfinite(waited) and waited >= 0 and waits >= 0 and fallbacks == 0
    finally:
        file.remove()


def test_a_bucket_that_answers_an_absurd_wait_is_given_up_not_waited_on() -> None:
    """Whatever a bucket answers, the limiter never waits on NaN, a negative or a wait far
    beyond any the limits can ask for: it takes the next bucket, with a warning."""

    class Liar:
        remote = False
        errors: tuple[type[BaseException], ...] = ()

        def __init__(self, wait: float) -> None:
            self.wait = wait

        def take(self, tokens: float) -> float:
            return self.wait

        def give(self, requests: float, tokens: float) -> None:
            return None

    limits = RateLimits(rpm=120)
    for wait in (math.nan, -1.0, 1e12, math.inf):
        limiter = RateLimiter(limits, Liar(wait))  # type: ignore[arg-type]
        with pytest.warns(RateLimitWarning, match="answered a wait of"):
            asyncio.run(limiter.acquire(0))
        assert type(limiter.bucket).__name__ == "MemoryBucket"
