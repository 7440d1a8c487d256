"""The scoring context: what a scorer may ask of the run (judge clients, embedders, an event
loop, the usage ledger) without knowing anything about pytest.

One context is active per process: the plugin installs it at session start; outside pytest the
first call to :func:`get_context` builds one from the environment (or :func:`configure`).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, final

from pytest_llmeval.core import aio as _aio
from pytest_llmeval.core.settings import JudgeSettings, Settings
from pytest_llmeval.core.usage import JudgeClock, UsageCollector, UsageLedger, current_usage
from pytest_llmeval.stores.cache_protocol import ResultStore
from pytest_llmeval.stores.store_modes import NULL_STORE, for_mode

if TYPE_CHECKING:
    from pytest_llmeval.judge.client import JudgeClient
    from pytest_llmeval.judge.embeddings import Embedder
    from pytest_llmeval.stores.ratelimit import RateLimiter
    from pytest_llmeval.stores.spend import SharedSpend

__all__ = [
    "JudgeClock",
    "ScoringContext",
    "UsageCollector",
    "UsageLedger",
    "configure",
    "current_usage",
    "get_context",
    "set_context",
]

T = TypeVar("T")


@final
class ScoringContext:
    """What scorers get besides their inputs."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        cache: ResultStore | None = None,
        spend: SharedSpend | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.ledger = UsageLedger(spend)
        if limiter is None and self.settings.rate_limits.active:
            # Outside pytest (score(), configure()): this process's own bucket.
            from pytest_llmeval.stores.ratelimit import MemoryBucket, RateLimiter

            limits = self.settings.rate_limits
            limiter = RateLimiter(limits, MemoryBucket(limits))
        #: the run's judge rate limit (``--llm-eval-rpm``/``--llm-eval-tpm``), or None
        self.limiter = limiter
        self._lock = threading.Lock()
        #: judged scorings in flight by cache key: an identical one started meanwhile (a repeat
        #: sample, a case with the same inputs, in flight at once) waits for it and reads the
        #: cache, as it would have one after the other, instead of paying the judge again
        self.inflight: dict[str, concurrent.futures.Future[None]] = {}
        self.inflight_lock = threading.Lock()
        #: how many of those finished (under ``inflight_lock``, after storing their result): a
        #: scoring that looked in the cache before one finished looks again before it pays
        self.inflight_done = 0
        self._judges: dict[Any, JudgeClient] = {}
        self._embedders: dict[Any, Embedder] = {}
        #: per calling thread, the thread its async judged scorings use the store on
        self._store_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
        # A store given here (from pytest_llmeval_make_cache) is the bare store: the mode
        # wrapper goes on now, once.
        self._cache: ResultStore | None = (
            None if cache is None else for_mode(cache, self.settings.cache_mode)
        )

    def result_cache(self) -> ResultStore | None:
        """The process's result store, its cache mode applied (see :mod:`store_modes`), or None
        when the cache is off. Built once, on first use."""
        cache = self._cache
        if cache is not None:  # the common case, without taking the lock
            return None if cache is NULL_STORE else cache
        if self.settings.cache_mode == "off":
            return None
        with self._lock:
            if self._cache is None:
                self._cache = for_mode(self._open_store(), self.settings.cache_mode)
            cache = self._cache
        return None if cache is NULL_STORE else cache

    def _open_store(self) -> ResultStore:
        """The built-in store: the SQLite file in the cache directory. Replay only reads: it
        opens read-only (a committed cache, a read-only mount in CI)."""
        from pytest_llmeval.stores.cache import ResultCache

        return ResultCache(self.settings.cache_dir, read_only=self.settings.cache_mode == "replay")

    def store_call(self, fn: Callable[..., T], /, *args: Any) -> concurrent.futures.Future[T]:
        """``fn(*args)`` on the store thread of the calling thread, in the caller's context
        variables: an async judged scoring reads and writes the store there, so that a slow
        store call (SQLite checkpointing its log, a Redis round trip) does not stop every case
        on its loop. One store thread per calling thread (per case loop): a loop's store calls
        run in the order it made them (which of identical scorings in flight pays the judge
        follows case order, not thread timing), and one loop's slow call never holds up
        another loop's."""
        caller = threading.get_ident()
        pool = self._store_pools.get(caller)
        if pool is None:
            with self._lock:
                pool = self._store_pools.get(caller)
                if pool is None:
                    pool = self._store_pools[caller] = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix="llm-eval-store"
                    )
        return pool.submit(contextvars.copy_context().run, fn, *args)

    def close(self) -> None:
        """Release the cache connection and judge clients (end of session)."""
        with self._lock:
            cache, self._cache = self._cache, None
            judges = list(self._judges.values())
            self._judges.clear()
            pools, self._store_pools = list(self._store_pools.values()), {}
        for pool in pools:
            # (a store thread's own SQLite connection is thread-local: freed as its thread ends)
            pool.shutdown(wait=True)
        if cache is not None:
            cache.close()
        if self.limiter is not None:
            self.limiter.close()
        for client in judges:
            closer = getattr(client, "close", None)
            if closer is not None:
                try:
                    self.run(closer())
                except Exception:
                    pass

    def judge_settings(self, options: Mapping[str, Any] | None = None) -> JudgeSettings:
        """The run's judge settings with a scorer's judge options applied."""
        return self.settings.judge.with_overrides(options or {})

    def judge(self, options: Mapping[str, Any] | None = None) -> JudgeClient:
        """A judge client for these judge options (one per distinct setting, reused)."""
        from pytest_llmeval.judge.client import JudgeClient

        js = self.judge_settings(options)
        with self._lock:
            client = self._judges.get(js)
            if client is None:
                client = JudgeClient(
                    js,
                    ledger=self.ledger,
                    budget_usd=self.settings.budget_usd,
                    prices=self.settings.prices,
                    limiter=self.limiter,
                )
                self._judges[js] = client
            return client

    def embedder(self, model: str | None = None, **options: Any) -> Embedder:
        """An embedder for ``model`` (default: the run's), loaded lazily and kept per process."""
        from pytest_llmeval.judge.embeddings import make_embedder

        key = (model, tuple(sorted(options.items())))
        with self._lock:
            emb = self._embedders.get(key)
            if emb is None:
                emb = make_embedder(self, model, **options)
                self._embedders[key] = emb
            return emb

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to completion from sync code (on the process's background loop)."""
        return _aio.run_sync(coro)


_lock = threading.Lock()
_current: ScoringContext | None = None


def get_context() -> ScoringContext:
    """The active context; built from the environment on first use outside pytest."""
    global _current
    ctx = _current  # one atomic read: the lock is only needed to build the first one
    if ctx is not None:
        return ctx
    with _lock:
        if _current is None:
            _current = ScoringContext()
        return _current


def set_context(ctx: ScoringContext | None) -> ScoringContext | None:
    """Install ``ctx`` as the active context; return the previous one."""
    global _current
    with _lock:
        prev, _current = _current, ctx
        return prev


def configure(settings: Settings | None = None, **overrides: Any) -> ScoringContext:
    """Set the settings used by :func:`pytest_llmeval.score` outside pytest.

    ``configure(judge=JudgeSettings(base_url=..., model=...), cache_mode="off")``
    """
    import dataclasses

    base = settings if settings is not None else Settings.from_env()
    if overrides:
        base = dataclasses.replace(base, **overrides)
    ctx = ScoringContext(base)
    set_context(ctx)
    return ctx
