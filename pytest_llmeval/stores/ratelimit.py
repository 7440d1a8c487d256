"""One rate limit for the run and the fleet: ``--llm-eval-rpm`` and ``--llm-eval-tpm``.

A token bucket per dimension (requests, tokens), shared by every process that judges:

- **one machine**: the bucket lives in a small file created by the pytest controller (its path
  reaches each xdist worker in ``workerinput``, as the budget's spend file does) and is updated
  under an exclusive ``flock``. The clock is ``time.monotonic()``, which is system-wide on POSIX.
- **a fleet**: with a Redis store (``--llm-eval-cache-url``) the bucket is a Redis hash under
  ``<prefix>ratelimit``, updated atomically by one Lua script (``EVALSHA``, ``EVAL`` when the
  server does not know it yet) on the server's clock (``TIME``): every machine using the same
  URL and prefix shares one limit. If Redis fails mid-run, the process warns once and goes on
  with the file bucket (its machine's limit only), never unlimited and never failing a test.

The bucket of each dimension holds ``burst`` seconds of its rate (``--llm-eval-rate-burst``,
default 1 s; at least one request): it starts full, so a run may start that many requests at
once, and then refills at rpm/60 requests and tpm/60 tokens a second. In any window of ``w``
seconds at most ``capacity + rate * w`` requests start. A request whose token estimate is larger
than the whole token bucket goes when the bucket is full and leaves it in debt.

Tokens: before each request the client reserves an estimate (the request body's characters / 4
for the prompt, plus ``max_tokens`` or :data:`COMPLETION_ESTIMATE` for the reply) and settles
with the usage the reply reports (a refund or a debt); a request refused with an HTTP 4xx gives
its tokens back, a request that timed out or failed otherwise keeps its estimate.

The wait is not judge time: like the wait for a free concurrency slot it does not count against
the per-scoring deadline (``--llm-eval-scoring-timeout``) nor the per-request timeout, so a
queue behind the limit never turns into judge errors. The run's total wait is kept in the file
(xdist workers included) for the status line and the terminal summary.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import struct
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, final

from pytest_llmeval.core.limits import RateLimits, parse_burst, parse_rate

__all__ = [
    "COMPLETION_ESTIMATE",
    "FileBucket",
    "MemoryBucket",
    "RateLimitWarning",
    "RateLimiter",
    "RateLimits",
    "RedisBucket",
    "Reservation",
    "parse_burst",
    "parse_rate",
]

#: Tokens reserved for a chat reply when the request sets no ``max_tokens`` (a judge's verdict
#: is short; the reservation is settled with the reply's real usage).
COMPLETION_ESTIMATE = 256
#: Characters per token of the prompt estimate.
CHARS_PER_TOKEN = 4
#: Longest single sleep while waiting (the bucket is asked again after it: others may have
#: given tokens back meanwhile).
MAX_POLL_S = 1.0

#: time of the last update, requests, tokens; then the run's seconds waited, requests that
#: waited, and processes that gave up the Redis bucket
_FORMAT = "<6d"
_SIZE = struct.calcsize(_FORMAT)
_PREFIX = "llmeval-rate-"


class RateLimitWarning(UserWarning):
    """The shared rate limit could not be used as configured (it still holds more narrowly)."""


class BrokenBucketError(Exception):
    """A bucket answered something no bucket state can mean (a NaN, negative or endless wait):
    the limiter takes the next bucket instead of waiting on it."""


# -- settings ------------------------------------------------------------------------------------


# -- the bucket arithmetic (the Lua script below does the same) ---------------------------------


def _refill(
    state: tuple[float, float, float], now: float, limits: RateLimits
) -> tuple[float, float, float]:
    last, requests, tokens = state
    rate_r, cap_r, rate_k, cap_k = limits.args()
    if last < 0:  # a fresh bucket starts full
        return now, cap_r, cap_k
    dt = max(0.0, now - last)
    return now, min(cap_r, requests + dt * rate_r), min(cap_k, tokens + dt * rate_k)


def _take(
    state: tuple[float, float, float], now: float, limits: RateLimits, tokens_needed: float
) -> tuple[tuple[float, float, float], float]:
    """(new state, 0.0) when one request of ``tokens_needed`` tokens may start now, else
    (refilled state, seconds until it may)."""
    now, requests, tokens = _refill(state, now, limits)
    rate_r, _cap_r, rate_k, cap_k = limits.args()
    wait = 0.0
    if rate_r and requests < 1.0:
        wait = (1.0 - requests) / rate_r
    need = min(tokens_needed, cap_k)
    if rate_k and tokens < need:
        wait = max(wait, (need - tokens) / rate_k)
    if wait > 0:
        return (now, requests, tokens), wait
    if rate_r:
        requests -= 1.0
    if rate_k:
        tokens = max(-limits.token_debt, tokens - tokens_needed)
    return (now, requests, tokens), 0.0


def _give(
    state: tuple[float, float, float],
    now: float,
    limits: RateLimits,
    requests_back: float,
    tokens_back: float,
) -> tuple[float, float, float]:
    """Refund (positive) or charge (negative) requests and tokens, capped at the capacities."""
    now, requests, tokens = _refill(state, now, limits)
    _rate_r, cap_r, _rate_k, cap_k = limits.args()
    tokens = max(-limits.token_debt, min(cap_k, tokens + tokens_back))
    return now, min(cap_r, requests + requests_back), tokens


# -- buckets -------------------------------------------------------------------------------------


class Bucket(Protocol):
    #: whether a call may block on the network (then it runs in a thread)
    remote: bool

    def take(self, tokens: float) -> float:
        """0.0 when one request of ``tokens`` may start (and it is counted), else seconds to
        wait before asking again."""
        ...

    def give(self, requests: float, tokens: float) -> None:
        """Give back (or, negative, charge) requests and tokens."""
        ...


@final
class MemoryBucket:
    """A bucket for this process alone (no ``fcntl``, or a worker that cannot reach the run's
    file)."""

    remote = False

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._state = (-1.0, 0.0, 0.0)

    def take(self, tokens: float) -> float:
        with self._lock:
            self._state, wait = _take(self._state, time.monotonic(), self.limits, tokens)
            return wait

    def give(self, requests: float, tokens: float) -> None:
        with self._lock:
            self._state = _give(self._state, time.monotonic(), self.limits, requests, tokens)

    def __repr__(self) -> str:
        return f"MemoryBucket({self.limits.describe()})"


@final
class FileBucket:
    """The run's bucket in one small file under ``flock`` (every process of a run on this
    machine); also where the run's total wait is added up."""

    remote = False
    errors: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, path: str | os.PathLike[str], limits: RateLimits) -> None:
        self.path = Path(path)
        self.limits = limits
        self._warned = False

    @classmethod
    def create(cls, limits: RateLimits) -> FileBucket:
        """A new, full bucket file in the temporary directory (the caller removes it). Files of
        runs whose process is gone are removed first."""
        from pytest_llmeval.stores.spend import remove_stale_files

        remove_stale_files(Path(tempfile.gettempdir()), _PREFIX)
        fd, name = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", suffix=".bin")
        try:
            os.write(fd, struct.pack(_FORMAT, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0))
        finally:
            os.close(fd)
        return cls(name, limits)

    def _update(self, change: Any) -> Any:
        import fcntl

        with self.path.open("r+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                data = fh.read(_SIZE)
                if len(data) != _SIZE:
                    raise OSError(
                        f"the run's rate-limit file {self.path} is damaged ({len(data)} bytes)"
                    )
                values = list(struct.unpack(_FORMAT, data))
                self._check(values)
                result = change(values)
                fh.seek(0)
                fh.write(struct.pack(_FORMAT, *values))
                fh.flush()
                return result
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _check(self, values: list[float]) -> None:
        """Reset what no process of the run can have written (another program, a damaged
        disk): the bucket to fresh (full), the run's totals to zero; one warning."""
        problems = []
        last, requests, tokens = values[0:3]
        if last != -1.0:  # -1: fresh, never taken from
            problem = self.limits.state_problem(last, requests, tokens, time.monotonic())
            if problem is not None:
                problems.append(problem)
                values[0:3] = [-1.0, 0.0, 0.0]
        for i, what in ((3, "seconds waited"), (4, "requests that waited"), (5, "fallbacks")):
            if not (math.isfinite(values[i]) and 0 <= values[i] < 1e15):
                problems.append(f"{what} {values[i]!r}")
                values[i] = 0.0
        if problems and not self._warned:
            self._warned = True
            warnings.warn(
                RateLimitWarning(
                    f"llm-eval: the run's rate-limit file {self.path} held "
                    f"{'; '.join(problems)}, which no process of the run writes; it is reset "
                    "(the bucket full, the totals from zero)"
                ),
                stacklevel=1,
            )

    def take(self, tokens: float) -> float:
        def change(values: list[float]) -> float:
            state, wait = _take(
                (values[0], values[1], values[2]), time.monotonic(), self.limits, tokens
            )
            values[0:3] = state
            return wait

        return float(self._update(change))

    def give(self, requests: float, tokens: float) -> None:
        def change(values: list[float]) -> None:
            state = (values[0], values[1], values[2])
            values[0:3] = _give(state, time.monotonic(), self.limits, requests, tokens)

        self._update(change)

    def levels(self) -> tuple[float, float]:
        """(requests, tokens) in the bucket now (refilled up to now; not a take)."""

        def change(values: list[float]) -> tuple[float, float]:
            state = _refill((values[0], values[1], values[2]), time.monotonic(), self.limits)
            return state[1], state[2]

        result: tuple[float, float] = self._update(change)
        return result

    def add_wait(self, seconds: float) -> None:
        def change(values: list[float]) -> None:
            values[3] += seconds
            values[4] += 1

        self._update(change)

    def add_fallback(self) -> None:
        """Count a process that gave up the Redis bucket for this file."""

        def change(values: list[float]) -> None:
            values[5] += 1

        self._update(change)

    def totals(self) -> tuple[float, int, int]:
        """(seconds waited, requests that waited, processes that gave up Redis) in the whole run
        so far; zeros when the file is gone."""
        import fcntl

        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return 0.0, 0, 0
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                data = fh.read(_SIZE)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        if len(data) != _SIZE:
            return 0.0, 0, 0
        values = [
            v if math.isfinite(v) and 0 <= v < 1e15 else 0.0 for v in struct.unpack(_FORMAT, data)
        ]
        return float(values[3]), int(values[4]), int(values[5])

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"FileBucket({str(self.path)!r}, {self.limits.describe()})"


# KEYS[1]: the bucket's hash. ARGV: request rate/s, request capacity, token rate/s, token
# capacity, op ("take" or "give"), tokens (take: needed; give: tokens back), requests back (give),
# the largest token debt. Returns {seconds to wait as a string (a Lua number would become an
# integer reply), "" or what was broken}. A state no client of ours writes (by hand, another
# program: not finite, out of [0, capacity] or beyond the largest debt, updated in the future,
# fields missing, another type) is reset to a full bucket and said, never used: a negative
# count would hold every request for ages, a NaN would let all through.
_LUA = """
local key = KEYS[1]
local rate_r = tonumber(ARGV[1])
local cap_r = tonumber(ARGV[2])
local rate_k = tonumber(ARGV[3])
local cap_k = tonumber(ARGV[4])
local op = ARGV[5]
local tokens_arg = tonumber(ARGV[6])
local requests_back = tonumber(ARGV[7])
local min_k = -tonumber(ARGV[8])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local broken = ''
local last, r, k
local kind = redis.call('TYPE', key)['ok']
local function within(x, lo, hi)
  return x ~= nil and x == x and x >= lo and x <= hi
end
local function show(v)
  if not v then return 'nil' end
  return string.sub(v, 1, 24)
end
if kind == 'hash' then
  local st = redis.call('HMGET', key, 't', 'r', 'k')
  last = tonumber(st[1])
  r = tonumber(st[2])
  k = tonumber(st[3])
  local slack = 1e-6
  if not (within(last, 0, now + 1) and within(r, -slack, cap_r + slack)
          and within(k, min_k * (1 + slack) - slack, cap_k * (1 + slack) + slack)) then
    broken = 't=' .. show(st[1]) .. ' r=' .. show(st[2]) .. ' k=' .. show(st[3])
  end
elseif kind ~= 'none' then
  broken = 'a ' .. kind .. ', not a hash'
  redis.call('DEL', key)
end
if kind ~= 'hash' or broken ~= '' then
  last = now
  r = cap_r
  k = cap_k
end
if last > now then last = now end
local dt = now - last
r = math.min(cap_r, r + dt * rate_r)
k = math.min(cap_k, k + dt * rate_k)
local wait = 0
if op == 'take' then
  if rate_r > 0 and r < 1 then
    wait = (1 - r) / rate_r
  end
  local need = math.min(tokens_arg, cap_k)
  if rate_k > 0 and k < need then
    wait = math.max(wait, (need - k) / rate_k)
  end
  if wait <= 0 then
    if rate_r > 0 then r = r - 1 end
    if rate_k > 0 then k = math.max(min_k, k - tokens_arg) end
  end
else
  r = math.min(cap_r, r + requests_back)
  k = math.max(min_k, math.min(cap_k, k + tokens_arg))
end
redis.call('HSET', key, 't', string.format('%.6f', now), 'r', string.format('%.17g', r),
  'k', string.format('%.17g', k))
local full = 0
if rate_r > 0 then full = math.max(full, (cap_r - r) / rate_r) end
if rate_k > 0 then full = math.max(full, (cap_k - k) / rate_k) end
redis.call('PEXPIRE', key, math.ceil((full + 60) * 1000))
return {string.format('%.6f', wait), broken}
"""


def fail_fast(client: Any) -> None:
    """No retries on ``client``: a Redis that is gone means the file bucket at once, not seconds
    of redis-py's default backing off and trying again before a judge request."""
    if hasattr(client, "set_retry"):
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client.set_retry(Retry(NoBackoff(), 0))


@final
class RedisBucket:
    """The fleet's bucket: a Redis hash under ``key``, changed only by :data:`_LUA`."""

    remote = True

    def __init__(self, client: Any, key: str, limits: RateLimits, url: str) -> None:
        import redis

        self.client = client
        self.key = key
        self.limits = limits
        self.url = url  # without its password (redact_url)
        self.errors: tuple[type[BaseException], ...] = (
            redis.RedisError,
            OSError,
            BrokenBucketError,
        )
        fail_fast(client)
        self._script = client.register_script(_LUA)
        self._warned = False

    def _run(self, op: str, tokens: float, requests: float) -> float:
        args = [*(repr(float(a)) for a in self.limits.args()), op, repr(float(tokens))]
        args += [repr(float(requests)), repr(self.limits.token_debt)]
        raw = self._script(keys=[self.key], args=args)
        try:
            wait_raw, broken_raw = raw
        except (TypeError, ValueError):
            raise BrokenBucketError(f"answered {str(raw)[:60]!r}, not a wait") from None
        broken = broken_raw.decode() if isinstance(broken_raw, bytes) else str(broken_raw)
        if broken and not self._warned:
            self._warned = True
            warnings.warn(
                RateLimitWarning(
                    f"llm-eval: the rate-limit bucket {self.key!r} in Redis {self.url} was broken "
                    f"({broken}: no process of ours writes that); it is reset (full). Anyone "
                    "who can write the Redis can change the fleet's limit: see the trust model in "
                    "docs/guides/caching.md"
                ),
                stacklevel=1,
            )
        text = wait_raw.decode() if isinstance(wait_raw, bytes) else str(wait_raw)
        try:
            return float(text)
        except ValueError:
            raise BrokenBucketError(f"answered {text[:60]!r}, not a wait") from None

    def take(self, tokens: float) -> float:
        return self._run("take", tokens, 0.0)

    def give(self, requests: float, tokens: float) -> None:
        self._run("give", tokens, requests)

    def close(self) -> None:
        try:
            self.client.close()
        except self.errors:
            pass

    def __repr__(self) -> str:
        return f"RedisBucket({self.url!r}, key={self.key!r}, {self.limits.describe()})"


# -- the limiter ---------------------------------------------------------------------------------


@final
@dataclass(frozen=True)
class Reservation:
    """What one request took from the bucket: one request and ``tokens`` tokens."""

    tokens: float


@final
class RateLimiter:
    """Gates each judge request: :meth:`acquire` before it is sent (waiting as long as the
    bucket says), :meth:`settle` once its outcome is known.

    ``bucket`` is the run's (file) or the fleet's (Redis) bucket; ``fallback`` the file (or
    memory) bucket that takes over, with one :class:`RateLimitWarning`, when Redis fails.
    ``stats`` is the run's file, where the waits of every process are added up."""

    def __init__(
        self,
        limits: RateLimits,
        bucket: Bucket,
        *,
        fallback: Bucket | None = None,
        stats: FileBucket | None = None,
        scope: str = "this process",
    ) -> None:
        self.limits = limits
        #: the bucket in use: ``bucket`` until it fails, then ``fallback``, then this process's
        #: own (a failing bucket never fails a judge request, nor leaves it unlimited)
        self.bucket = bucket
        self._next: list[Bucket] = [b for b in (fallback,) if b is not None]
        if not isinstance(bucket, MemoryBucket):
            self._next.append(MemoryBucket(limits))
        self.fallback = fallback
        self.stats = stats
        self.scope = scope
        self._lock = threading.Lock()
        #: this process's waits: seconds in all, and how many requests waited
        self.waited_s = 0.0
        self.waits = 0
        #: why the shared bucket was given up (the error's type), or None
        self.fell_back: str | None = None

    # -- bucket calls, with the fall-backs -----------------------------------------------------

    def _fail_over(self, failed: Bucket, exc: BaseException) -> Bucket:
        """Give up ``failed`` for the next bucket, with one warning (unless another thread
        already did)."""
        with self._lock:
            if self.bucket is not failed or not self._next:
                return self.bucket
            self.bucket = self._next.pop(0)
            self.fell_back = self.fell_back or type(exc).__name__
            replacement = self.bucket
        if isinstance(failed, RedisBucket) and self.stats is not None:
            try:
                self.stats.add_fallback()
            except OSError:
                pass  # only the summary's count is lost
        if isinstance(replacement, FileBucket):
            self.scope = "this machine's run (file lock)"
        else:
            self.scope = "this process"
        if isinstance(exc, BrokenBucketError):
            what = f"the rate-limit bucket {failed!r} {exc}"
        elif isinstance(failed, FileBucket):
            what = f"the run's rate-limit file {failed.path} could not be used ({exc})"
        elif type(exc).__name__ == "NoPermissionError" or "NOPERM" in str(exc):
            what = (
                f"the Redis user may not run the rate-limit script in Redis "
                f"{getattr(failed, 'url', '')} (NOPERM: a read-only user)"
            )
        else:
            what = (
                f"the shared rate limit in Redis {getattr(failed, 'url', '')} failed "
                f"({type(exc).__name__})"
            )
        warnings.warn(
            RateLimitWarning(
                f"llm-eval: {what}; judge requests are now limited to "
                f"{self.limits.describe()} for {self.scope} only"
                + (", not for the fleet" if isinstance(failed, RedisBucket) else "")
            ),
            stacklevel=1,  # maybe called from a thread: no caller of interest
        )
        return replacement

    def _call(self, op: str, *args: float) -> float:
        bucket = self.bucket
        while True:
            try:
                wait = float(getattr(bucket, op)(*args) or 0.0)
            except Exception as exc:
                if not isinstance(exc, getattr(bucket, "errors", ())):
                    raise
                replacement = self._fail_over(bucket, exc)
                if replacement is bucket:
                    raise
                bucket = replacement
                continue
            if 0.0 <= wait <= self.limits.longest_wait:  # NaN is not
                return wait
            # No sound state means this wait: waiting on it could hang the run (or, for NaN,
            # let every request through). The next bucket takes over.
            replacement = self._fail_over(
                bucket, BrokenBucketError(f"answered a wait of {wait!r} s")
            )
            if replacement is bucket:
                return min(max(wait, 0.0), MAX_POLL_S) if math.isfinite(wait) else MAX_POLL_S
            bucket = replacement

    async def _async_call(self, op: str, *args: float) -> float:
        if self.bucket.remote:
            return await asyncio.to_thread(self._call, op, *args)
        return self._call(op, *args)

    # -- the request's life ------------------------------------------------------------------

    async def acquire(self, tokens: float) -> Reservation:
        """Wait until one request of about ``tokens`` tokens may start; count it."""
        need = float(tokens) if self.limits.tpm else 0.0
        waited = 0.0
        while True:
            wait = await self._async_call("take", need)
            if wait <= 0:
                break
            pause = min(wait, MAX_POLL_S) * (1.0 + 0.05 * random.random()) + 0.001
            await asyncio.sleep(pause)
            waited += pause
        if waited > 0:
            with self._lock:
                self.waited_s += waited
                self.waits += 1
            if self.stats is not None:
                try:
                    self.stats.add_wait(waited)
                except OSError:
                    pass  # only the summary's total is lost
        return Reservation(need)

    async def settle(
        self, reservation: Reservation, *, sent: bool, used_tokens: int | None
    ) -> None:
        """The request's outcome: not sent gives all back; sent with a known usage gives back
        (or charges) the difference from the estimate; sent with no usage keeps the estimate."""
        requests_back = 0.0 if sent else 1.0
        tokens_back = 0.0
        if self.limits.tpm:
            if not sent:
                tokens_back = reservation.tokens
            elif used_tokens is not None:
                tokens_back = reservation.tokens - used_tokens
        if not self.limits.rpm:
            requests_back = 0.0
        if requests_back == 0.0 and tokens_back == 0.0:
            return
        await self._async_call("give", requests_back, tokens_back)

    def run_waited(self) -> tuple[float, int]:
        """(seconds, requests) waited by the whole run (every process sharing the file), or by
        this process without a file."""
        total, count, _fallbacks = self.run_totals()
        return total, count

    def run_totals(self) -> tuple[float, int, int]:
        """:meth:`run_waited` and the processes of the run that gave up the Redis bucket."""
        own_fallback = int(self.fell_back is not None)
        if self.stats is not None:
            try:
                total, count, fallbacks = self.stats.totals()
                return (
                    max(total, self.waited_s),
                    max(count, self.waits),
                    max(fallbacks, own_fallback),
                )
            except OSError:
                pass
        return self.waited_s, self.waits, own_fallback

    def close(self) -> None:
        for bucket in (self.bucket, self.fallback):
            closer = getattr(bucket, "close", None)
            if closer is not None:
                closer()

    def __repr__(self) -> str:
        return f"RateLimiter({self.limits.describe()}, {self.bucket!r})"


def estimate_tokens(body: dict[str, Any], what: str) -> int:
    """Tokens reserved for one request: its JSON body's characters / :data:`CHARS_PER_TOKEN`
    for the prompt, plus for a chat request its ``max_tokens`` (or
    ``max_completion_tokens``, else :data:`COMPLETION_ESTIMATE`) for the reply."""
    import json

    try:
        chars = len(json.dumps(body, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        chars = len(str(body))
    prompt = math.ceil(chars / CHARS_PER_TOKEN)
    if what != "chat":
        return prompt
    reply = body.get("max_tokens") or body.get("max_completion_tokens")
    if not isinstance(reply, int) or isinstance(reply, bool) or reply <= 0:
        reply = COMPLETION_ESTIMATE
    return prompt + reply
