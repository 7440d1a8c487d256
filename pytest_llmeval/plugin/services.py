"""What a session sets up at configure time and tears down at unconfigure: the live progress
line, the shared (Redis) result store and its outage handling, judges from the ini file, the
concurrent-cases runner, the run's shared spend file and its rate limiter (in memory, a file
shared by xdist workers, or a Redis bucket shared by machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_llmeval.plugin.gates import _case_recorder

if TYPE_CHECKING:
    from pytest_llmeval.plugin.progress import Progress
    from pytest_llmeval.stores.ratelimit import RateLimiter
    from pytest_llmeval.stores.redis_store import TieredStore
    from pytest_llmeval.stores.spend import SharedSpend

import os
from typing import Any

import pytest

from pytest_llmeval.core.errors import LLMEvalError
from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.core.settings import (
    Settings,
)
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.plugin import pytest_compat as compat
from pytest_llmeval.plugin.concurrent import ConcurrentCases
from pytest_llmeval.plugin.keys import (
    RATE_FILE_KEY,
    SPEND_FILE_KEY,
    rate_file_key,
    spend_key,
)
from pytest_llmeval.plugin.options import _enabled, _is_worker, host_option, value
from pytest_llmeval.plugin.progress import progress_key

_OUTAGE_PLUGIN = "llm-eval-redis-outage"


def _start_progress(config: pytest.Config, ctx: ScoringContext) -> Progress | None:
    """Controller side: the live status line, when a person watches a terminal (issue 14)."""
    if not _enabled(config) or config.get_verbosity() < 0:
        return None
    if value(config, "llm_eval_no_progress"):
        return None
    xdist = bool(host_option(config, "numprocesses")) or host_option(config, "dist", "no") not in (
        "no",
        None,
    )
    if host_option(config, "capture", "fd") == "no" and not xdist:
        return None  # tests print straight to the terminal: the line would get in their way
    writer = compat.terminal_writer(config)
    if writer is None:
        return None
    isatty = getattr(compat.terminal_file(writer), "isatty", None)
    if not writer.hasmarkup or not callable(isatty) or not isatty():
        return None
    from pytest_llmeval.plugin.progress import Progress

    progress = Progress(config, writer, ctx.settings.budget_usd)
    cases = config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
    if cases is not None and not xdist:
        progress.local_running = cases.in_flight
    if ctx.ledger.shared is not None or not xdist:
        progress.live_spend = lambda: ctx.ledger.spent_usd
    if not xdist:
        slots = ctx.ledger.slots

        def own_slot_wait() -> tuple[float, int] | None:
            waits = slots.waits()
            return None if waits is None else (waits.seconds, waits.limit)

        progress.live_slot_wait = own_slot_wait
    limiter = ctx.limiter
    if limiter is not None:
        progress.live_rate_wait = lambda: limiter.run_waited()[0]
    config.stash[progress_key] = progress
    config.pluginmanager.register(progress, "llm-eval-progress")
    return progress


def _shared_store(config: pytest.Config, settings: Settings) -> TieredStore | None:
    """The local SQLite store in front of Redis when a cache URL is set, else None (the
    context opens the local store alone). Redis unreachable at start: one warning and the local
    store alone, or a usage error with ``--llm-eval-cache-required``."""
    url = value(config, "llm_eval_cache_url")
    if url is None:
        return None
    from pytest_llmeval.stores.cache import ResultCache
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore, RedisUnavailable, TieredStore

    required = value(config, "llm_eval_cache_required")
    try:
        remote = RedisStore(
            url,
            prefix=value(config, "llm_eval_cache_prefix"),
            ttl=value(config, "llm_eval_cache_ttl"),
            password=value(config, "llm_eval_redis_password"),
        )
    except ImportError:
        raise pytest.UsageError(
            '--llm-eval-cache-url needs redis-py: pip install redis (or pip install ".[redis]" in '
            "the pytest-llmeval-suite checkout)"
        ) from None
    except LLMEvalError as exc:
        raise pytest.UsageError(str(exc)) from None
    local = ResultCache(settings.cache_dir, read_only=settings.cache_mode == "replay")
    try:
        remote.connect()
    except RedisUnavailable as exc:
        if required:
            remote.close()
            raise pytest.UsageError(f"{exc} (--llm-eval-cache-required)") from None
        if not _is_worker(config):  # the run says it once, not once per xdist worker
            config.issue_config_time_warning(
                CacheWarning(
                    f"{exc}; this run uses the local result cache only until Redis answers "
                    "(tried again every few seconds); results computed meanwhile are pushed to "
                    "it at the end of the run if it is back, else later with: python -m "
                    "pytest_llmeval cache push --url URL"
                ),
                stacklevel=2,
            )
        return TieredStore(local, remote, down=str(exc))
    return TieredStore(local, remote)


def _load_ini_judges(config: pytest.Config) -> None:
    """Register the judges of the ini ``llm_eval_judges`` globs (on every process, so xdist
    workers know them too); a bad spec stops the run with the file and field it names."""
    patterns = list(value(config, "llm_eval_judges"))
    if not patterns:
        return
    from pytest_llmeval.scorers.custom import load_classifiers

    root = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        load_classifiers(*patterns, root=root)
    except LLMEvalError as exc:
        raise pytest.UsageError(f"ini llm_eval_judges: {exc}") from None


def _concurrent_cases(config: pytest.Config) -> ConcurrentCases:
    return ConcurrentCases(
        config,
        make_recorder=_case_recorder,
        default_concurrency=value(config, "llm_eval_case_concurrency"),
        timeout=value(config, "llm_eval_case_timeout"),
    )


def _run_spend(config: pytest.Config, settings: Settings) -> SharedSpend | None:
    """With a budget: the run's shared spend (created by the controller, whose path reaches
    each xdist worker in ``workerinput``), so the budget holds for the whole run."""
    from pytest_llmeval.stores.spend import SharedSpend, shared_spend_supported

    if settings.budget_usd is None or not shared_spend_supported():
        return None
    if _is_worker(config):
        path = config.workerinput.get(SPEND_FILE_KEY)  # type: ignore[attr-defined]
        if not path:
            return None
        if not os.path.exists(path):  # e.g. a remote worker (--tx ssh=...)
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"llm-eval: this xdist worker cannot reach the run's spend file {path}; "
                    "--llm-eval-budget applies to this worker's own calls only"
                ),
                stacklevel=2,
            )
            return None
        return SharedSpend(path)
    spend = SharedSpend.create()
    config.stash[spend_key] = spend
    return spend


def _rate_limiter(config: pytest.Config, settings: Settings) -> RateLimiter | None:
    """With ``--llm-eval-rpm``/``--llm-eval-tpm``: the run's limiter. Its bucket is the run's
    file (created by the controller, whose path reaches each xdist worker in ``workerinput``)
    or, with a Redis cache URL, the fleet's bucket in Redis with the file behind it. Redis
    unreachable at start: one warning (from the controller) and the file alone."""
    from pytest_llmeval.stores.ratelimit import (
        FileBucket,
        MemoryBucket,
        RateLimiter,
        RateLimitWarning,
    )
    from pytest_llmeval.stores.spend import shared_spend_supported

    limits = settings.rate_limits
    if not limits.active:
        return None
    local: FileBucket | MemoryBucket
    file: FileBucket | None = None
    scope = "this machine's run (file lock)"
    if not shared_spend_supported():
        local, scope = MemoryBucket(limits), "each process (no fcntl on this platform)"
    elif _is_worker(config):
        path = config.workerinput.get(RATE_FILE_KEY)  # type: ignore[attr-defined]
        if path and os.path.exists(path):
            local = file = FileBucket(path, limits)
        else:  # e.g. a remote worker (--tx ssh=...)
            local, scope = MemoryBucket(limits), "this xdist worker only"
            config.issue_config_time_warning(
                RateLimitWarning(
                    f"llm-eval: this xdist worker cannot reach the run's rate-limit file {path}; "
                    "--llm-eval-rpm/--llm-eval-tpm apply to this worker's own requests only"
                ),
                stacklevel=2,
            )
    else:
        local = file = FileBucket.create(limits)
        config.stash[rate_file_key] = file
    remote = _redis_bucket(config, limits)
    if remote is None:
        return RateLimiter(limits, local, stats=file, scope=scope)
    return RateLimiter(
        limits,
        remote,
        fallback=local,
        stats=file,
        scope=f"every machine sharing Redis {remote.url} (key {remote.key!r})",
    )


def _redis_bucket(config: pytest.Config, limits: RateLimits) -> Any | None:
    """The fleet's bucket in the Redis of ``--llm-eval-cache-url`` (key ``<prefix>ratelimit``),
    or None: no URL, or Redis unreachable (said once, by the controller)."""
    url = value(config, "llm_eval_cache_url")
    if url is None:
        return None
    from pytest_llmeval.stores.ratelimit import RateLimitWarning, RedisBucket, fail_fast
    from pytest_llmeval.stores.redis_store import RedisStore, RedisUnavailable

    try:
        store = RedisStore(
            url,
            prefix=value(config, "llm_eval_cache_prefix"),
            password=value(config, "llm_eval_redis_password"),
            timeout=2.0,
        )
    except ImportError:
        raise pytest.UsageError(
            '--llm-eval-cache-url needs redis-py: pip install redis (or pip install ".[redis]" in '
            "the pytest-llmeval-suite checkout)"
        ) from None
    except LLMEvalError as exc:
        raise pytest.UsageError(str(exc)) from None
    fail_fast(store.client)
    try:
        store.connect()
    except RedisUnavailable as exc:
        store.close()
        if not _is_worker(config):
            config.issue_config_time_warning(
                RateLimitWarning(
                    f"{exc}; --llm-eval-rpm/--llm-eval-tpm hold for this machine's run only "
                    f"({limits.describe()}, file lock), not for the fleet"
                ),
                stacklevel=2,
            )
        return None
    return RedisBucket(store.client, store.prefix + "ratelimit", limits, store.url)
