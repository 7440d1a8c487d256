"""pytest hooks only: options, ini, markers, dataset parametrization, fixtures, and shipping each
test's score records on its teardown report. No scoring logic lives here.

Records reach the controller the same way with and without xdist: a ``pytest_runtest_makereport``
wrapper puts the test's records, as one JSON string, on the teardown report; the controller-only
:class:`LLMEvalSession` collects them in ``pytest_runtest_logreport``. A str always survives
execnet, and every test reported before a worker crash keeps its records.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import _pytest as _pytest_pkg
import pytest

from pytest_llmeval.core.errors import DatasetError, LLMEvalError
from pytest_llmeval.core.errors import Skipped as ScoringSkipped
from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.core.model import KNOWN_INSTRUMENTS
from pytest_llmeval.core.records import ScoreRecord, TestRecorder, current_recorder
from pytest_llmeval.core.redaction import redact_text
from pytest_llmeval.core.settings import (
    CACHE_MODES,
    JUDGE_MODES,
    Settings,
)
from pytest_llmeval.engine.context import ScoringContext, get_context, set_context
from pytest_llmeval.engine.dataset import Case, load_dataset
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.plugin import hookspecs
from pytest_llmeval.plugin.concurrent import ConcurrentCases, check_marker, prepared_recorder_key
from pytest_llmeval.plugin.controller import (
    INSTRUMENTS_ATTR,
    RECORDS_ATTR,
    RunController,
    session_key,
)
from pytest_llmeval.plugin.identity import _sample_of, function_identity, record_identity
from pytest_llmeval.plugin.keys import (
    ERROR_ATTR,
    GATED_MISS_ATTR,
    RATE_FILE_KEY,
    SPEND_FILE_KEY,
    VerdictPolicies,
    context_key,
    gate_failure_key,
    gate_rules_key,
    gate_table_key,
    previous_context_key,
    rate_file_key,
    recorder_key,
    shipped_key,
    spend_key,
    verdict_policies_key,
)
from pytest_llmeval.plugin.options import (
    _OPTIONS,
    _add_gate_options,
    _enabled,
    _is_worker,
    _number,
    _opt,
    build_settings,
)
from pytest_llmeval.plugin.progress import progress_key

if TYPE_CHECKING:
    from pytest_llmeval.analysis.gates import GateRule, TestGates
    from pytest_llmeval.plugin.progress import Progress
    from pytest_llmeval.stores.ratelimit import FileBucket, RateLimiter
    from pytest_llmeval.stores.redis_store import TieredStore
    from pytest_llmeval.stores.spend import SharedSpend


_SKIP_REASON = (
    "llm_eval test: LLM evaluations run only with `pytest --llm-eval` "
    "(or `llm_eval = true` in the ini file)"
)


# -- options -------------------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    # Run history, baseline comparison and JUnit properties (issue 10) live in their own module.
    from pytest_llmeval.plugin import history

    if not pluginmanager.has_plugin("llm-eval-history"):
        pluginmanager.register(history, "llm-eval-history")
    # Sharded runs (--llm-eval-shard i/n, issue 11) too.
    from pytest_llmeval.plugin import shard

    if not pluginmanager.has_plugin("llm-eval-shard"):
        pluginmanager.register(shard, "llm-eval-shard")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llm-eval", "LLM evaluation (pytest-llmeval)")
    group.addoption(
        "--llm-eval",
        action="store_true",
        default=None,
        dest="llm_eval",
        help="run tests marked llm_eval (skipped otherwise)",
    )
    parser.addini(
        "llm_eval", "run tests marked llm_eval (like --llm-eval)", type="bool", default=False
    )
    for suffix, ini, help_text, kind, _default in _OPTIONS:
        kwargs: dict[str, Any] = {"dest": ini, "default": None, "help": help_text}
        if kind == "choice":
            kwargs["choices"] = CACHE_MODES
        elif kind == "choice-mode":
            kwargs["choices"] = JUDGE_MODES
        elif kind == "int":
            kwargs["type"] = int
        elif kind == "float":
            kwargs["type"] = float
        group.addoption(f"--llm-eval-{suffix}", **kwargs)
        parser.addini(ini, help_text, type="string", default=None)
    group.addoption(
        "--llm-eval-cache-required",
        action="store_true",
        default=None,
        dest="llm_eval_cache_required",
        help="fail the run when the shared (Redis) result store cannot be reached at start",
    )
    parser.addini(
        "llm_eval_cache_required",
        "fail the run when the shared (Redis) result store cannot be reached at start",
        type="bool",
        default=False,
    )
    group.addoption(
        "--llm-eval-allow-code-execution",
        action="store_true",
        default=None,
        dest="llm_eval_allow_code_execution",
        help="allow python_unit_testing to run model-written code in its sandbox",
    )
    parser.addini(
        "llm_eval_allow_code_execution",
        "allow python_unit_testing to run model-written code in its sandbox",
        type="bool",
        default=False,
    )
    group.addoption(
        "--llm-eval-allow-weak-sandbox",
        action="store_true",
        default=None,
        dest="llm_eval_allow_weak_sandbox",
        help="where namespaces are unavailable, let python_unit_testing run code in the WEAK "
        "audit-hook fallback (same user; the code can defeat the hooks) instead of refusing",
    )
    parser.addini(
        "llm_eval_allow_weak_sandbox",
        "let python_unit_testing use the weak audit-hook fallback where namespaces are unavailable",
        type="bool",
        default=False,
    )
    parser.addini(
        "llm_eval_api_key_env",
        "name of the environment variable holding the judge's API key (default OPENAI_API_KEY; "
        "AZURE_OPENAI_API_KEY with the azure judge provider)",
        type="string",
        default="",
    )
    parser.addini(
        "llm_eval_prices",
        "per-model prices, one 'MODEL INPUT_USD OUTPUT_USD [CACHED_INPUT_USD]' line each (USD per "
        "million tokens; cached prompt tokens cost INPUT_USD when CACHED_INPUT_USD is not given)",
        type="linelist",
        default=[],
    )
    parser.addini(
        "llm_eval_judges",
        "globs of judge spec files (.json/.yaml) to load at session start, relative to the ini "
        "file's directory; their judges are usable by name in every test",
        type="linelist",
        default=[],
    )
    _add_gate_options(group, parser)
    group.addoption(
        "--llm-eval-no-progress",
        action="store_true",
        default=None,
        dest="llm_eval_no_progress",
        help="no live status line (cases done, in flight, judge calls, spend, ETA) on a terminal",
    )
    parser.addini(
        "llm_eval_no_progress",
        "no live status line on a terminal (like --llm-eval-no-progress)",
        type="bool",
        default=False,
    )


# -- configuration -------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "llm_eval: an LLM evaluation test; skipped unless pytest runs with --llm-eval",
    )
    config.addinivalue_line(
        "markers",
        "llm_eval_dataset(path, id_field='id', concurrency=None): parametrize the test's `case` "
        "argument with the rows of a .jsonl, .csv or .json file (path relative to the test "
        "file), one test per row; an async test runs up to `concurrency` cases at once",
    )
    _configure_gates(config)
    settings = build_settings(config)
    cache = None
    if settings.cache_mode != "off":
        cache = config.hook.pytest_llmeval_make_cache(
            config=config, directory=settings.cache_dir, mode=settings.cache_mode
        )
        if cache is None:
            cache = _shared_store(config, settings)
            if cache is not None:
                from pytest_llmeval.plugin.redis_outage import RedisOutage

                # Results stored only locally while Redis is away are pushed at the end.
                config.pluginmanager.register(RedisOutage(config, cache), _OUTAGE_PLUGIN)
    ctx = ScoringContext(
        settings,
        cache=cache,
        spend=_run_spend(config, settings),
        limiter=_rate_limiter(config, settings),
    )
    config.stash[context_key] = ctx
    config.stash[previous_context_key] = set_context(ctx)
    config.hook.pytest_llmeval_register_scorers.call_historic(
        kwargs={"registry": default_registry, "config": config}
    )
    _load_ini_judges(config)
    config.pluginmanager.register(_concurrent_cases(config), "llm-eval-concurrent-cases")
    config.stash[shipped_key] = set()
    if not _is_worker(config):
        from pytest_llmeval.plugin.plan import PlanTracker

        collector = config.pluginmanager.get_plugin("llm-eval-plan")
        tracker = PlanTracker(config, collector)
        config.pluginmanager.register(tracker, "llm-eval-plan-tracker")
        session = RunController(config, tracker)
        config.stash[session_key] = session
        config.pluginmanager.register(session, "llm-eval-session")
        if config.pluginmanager.has_plugin("xdist"):
            from pytest_llmeval.plugin.xdist_sched import SharesPlugin

            config.pluginmanager.register(SharesPlugin(config), "llm-eval-xdist-shares")
        _start_progress(config, ctx)


_OUTAGE_PLUGIN = "llm-eval-redis-outage"


def _start_progress(config: pytest.Config, ctx: ScoringContext) -> Progress | None:
    """Controller side: the live status line, when a person watches a terminal (issue 14)."""
    if not _enabled(config) or config.get_verbosity() < 0:
        return None
    off = config.getoption("llm_eval_no_progress", default=None)
    if off is None:
        off = bool(config.getini("llm_eval_no_progress"))
    if off:
        return None
    xdist = bool(getattr(config.option, "numprocesses", None)) or getattr(
        config.option, "dist", "no"
    ) not in ("no", None)
    if config.getoption("capture", default="fd") == "no" and not xdist:
        return None  # tests print straight to the terminal: the line would get in their way
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    writer = reporter._tw
    isatty = getattr(writer._file, "isatty", None)
    if not writer.hasmarkup or not callable(isatty) or not isatty():
        return None
    from pytest_llmeval.plugin.progress import Progress

    progress = Progress(config, writer, ctx.settings.budget_usd)
    cases = config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
    if cases is not None and not xdist:
        progress.local_running = cases.in_flight
    if ctx.ledger.shared is not None or not xdist:
        progress.live_spend = lambda: ctx.ledger.spent_usd
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
    url = _opt(config, "llm_eval_cache_url") or os.environ.get("LLM_EVAL_CACHE_URL") or None
    if url is None:
        return None
    from pytest_llmeval.stores.cache import ResultCache
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore, RedisUnavailable, TieredStore

    prefix = _opt(config, "llm_eval_cache_prefix")
    required = config.getoption("llm_eval_cache_required", default=None)
    if required is None:
        required = bool(config.getini("llm_eval_cache_required"))
    try:
        remote = RedisStore(
            url,
            prefix="llmeval:" if prefix is None else prefix,
            ttl=_number(config, "llm_eval_cache_ttl", int),
            password=os.environ.get("LLM_EVAL_REDIS_PASSWORD") or None,
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
    patterns = [p for p in config.getini("llm_eval_judges") if p.strip()]
    if not patterns:
        return
    from pytest_llmeval.scorers.custom import load_classifiers

    root = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        load_classifiers(*patterns, root=root)
    except LLMEvalError as exc:
        raise pytest.UsageError(f"ini llm_eval_judges: {exc}") from None


def _concurrent_cases(config: pytest.Config) -> ConcurrentCases:
    limits: dict[str, Any] = {}
    for ini, kind in (("llm_eval_case_concurrency", int), ("llm_eval_case_timeout", float)):
        value = _number(config, ini, kind)
        if value is not None and value <= 0:
            raise pytest.UsageError(f"--{ini.replace('_', '-')} must be positive, not {value}")
        limits[ini] = value
    return ConcurrentCases(
        config,
        make_recorder=_case_recorder,
        default_concurrency=limits["llm_eval_case_concurrency"] or 1,
        timeout=limits["llm_eval_case_timeout"],
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
    url = _opt(config, "llm_eval_cache_url") or os.environ.get("LLM_EVAL_CACHE_URL") or None
    if url is None:
        return None
    from pytest_llmeval.stores.ratelimit import RateLimitWarning, RedisBucket, fail_fast
    from pytest_llmeval.stores.redis_store import RedisStore, RedisUnavailable

    prefix = _opt(config, "llm_eval_cache_prefix")
    try:
        store = RedisStore(
            url,
            prefix="llmeval:" if prefix is None else prefix,
            password=os.environ.get("LLM_EVAL_REDIS_PASSWORD") or None,
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


def pytest_unconfigure(config: pytest.Config) -> None:
    outage = config.pluginmanager.get_plugin(_OUTAGE_PLUGIN)
    if outage is not None:
        config.pluginmanager.unregister(outage)
    progress = config.stash.get(progress_key, None)
    if progress is not None:
        progress.close()
        config.pluginmanager.unregister(progress)
        del config.stash[progress_key]
    ctx = config.stash.get(context_key, None)
    if ctx is None:
        return
    try:
        ctx.close()
    finally:
        spend = config.stash.get(spend_key, None)
        if spend is not None:
            spend.remove()
            del config.stash[spend_key]
        rate_file = config.stash.get(rate_file_key, None)
        if rate_file is not None:
            rate_file.remove()
            del config.stash[rate_file_key]
    set_context(config.stash.get(previous_context_key, None))
    del config.stash[context_key]
    cases = config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
    if cases is not None:
        cases.pytest_unconfigure()  # stop its loop whatever the hook order
        config.pluginmanager.unregister(cases)
    shares = config.pluginmanager.get_plugin("llm-eval-xdist-shares")
    if shares is not None:
        shares.pytest_unconfigure()  # remove its directory whatever the hook order
        config.pluginmanager.unregister(shares)
    session = config.stash.get(session_key, None)
    if session is not None:
        config.pluginmanager.unregister(session)
        del config.stash[session_key]
    for name in ("llm-eval-plan-tracker", "llm-eval-plan", "llm-eval-gate-hooks"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


# -- collection ----------------------------------------------------------------------------


#: The keywords ``@pytest.mark.llm_eval_dataset(...)`` accepts. Any other keyword is a collection
#: error (a typo must not be ignored silently); a new marker option is added here.
DATASET_MARKER_KEYWORDS: tuple[str, ...] = ("path", "id_field", "repeat", "concurrency")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Worker side (and the only process): one test per dataset row. Without ``--llm-eval`` an
    ``llm_eval`` test stays one unparametrized item (skipped by
    :func:`pytest_collection_modifyitems`) and its dataset is not read, so eval data never
    breaks a plain ``pytest`` run. The marker itself is checked either way: that is code."""
    markers = list(metafunc.definition.iter_markers("llm_eval_dataset"))
    if not markers:
        return
    where = f"{metafunc.definition.path}::{metafunc.definition.name}"
    if len(markers) > 1:
        raise pytest.Collector.CollectError(
            f"{where}: more than one llm_eval_dataset marker; use one dataset per test"
        )
    mark = markers[0]
    unknown = [k for k in mark.kwargs if k not in DATASET_MARKER_KEYWORDS]
    if unknown:
        raise pytest.Collector.CollectError(
            f"{where}: @pytest.mark.llm_eval_dataset got unknown keyword "
            f"{', '.join(repr(k) for k in unknown)}; it accepts: "
            f"{', '.join(DATASET_MARKER_KEYWORDS)}"
        )
    check_marker(metafunc, dict(mark.kwargs), where)
    if "case" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{where}: @pytest.mark.llm_eval_dataset needs the test to take a `case` argument"
        )
    if not mark.args and "path" not in mark.kwargs:
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset needs a path, e.g. "
            "@pytest.mark.llm_eval_dataset('data/cases.jsonl')"
        )
    if len(mark.args) > 1 or (mark.args and "path" in mark.kwargs):
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset takes one path (positional or path=...); "
            "pass other options by keyword"
        )
    if metafunc.definition.get_closest_marker("llm_eval") is not None and not _enabled(
        metafunc.config
    ):
        # Skipped anyway: reading the file now would turn a missing or malformed eval dataset
        # into a collection error of the team's ordinary `pytest` run.
        return
    raw = mark.args[0] if mark.args else mark.kwargs["path"]
    id_field = str(mark.kwargs.get("id_field", "id"))
    path = Path(raw)
    if not path.is_absolute():
        path = metafunc.definition.path.parent / path
    try:
        display = os.path.relpath(path, metafunc.config.rootpath)
    except ValueError:  # another drive on Windows
        display = str(path)
    try:
        cases = load_dataset(path, id_field=id_field, display=display)
    except DatasetError as exc:
        raise pytest.Collector.CollectError(f"llm_eval_dataset for {where}: {exc}") from None
    _parametrize_cases(metafunc, mark, cases)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _enabled(config):
        return
    skip = pytest.mark.skip(reason=_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("llm_eval") is not None:
            item.add_marker(skip)


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Case:
    """Placeholder that explains how `case` gets its value (a dataset marker)."""
    if request.node.get_closest_marker("llm_eval_dataset") is not None:
        # An llm_eval test left unparametrized because evaluations are off: its skip mark
        # normally stops it before fixtures; this covers runs without the skipping plugin.
        pytest.skip(_SKIP_REASON)
    raise pytest.UsageError(
        "the `case` argument is filled from a dataset: add "
        "@pytest.mark.llm_eval_dataset('path/to/cases.jsonl') to the test"
    )


@pytest.fixture
def llm_eval_context(request: pytest.FixtureRequest) -> ScoringContext:
    """The run's scoring context (settings, judge clients, cache)."""
    return get_context()


# -- recording -----------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # A concurrent case set up ahead of its protocol already has its recorder (its fixtures
    # may have recorded): use it once.
    recorder = item.stash.get(prepared_recorder_key, None)
    if recorder is None:
        recorder = _new_recorder(item)
    else:
        del item.stash[prepared_recorder_key]
    item.stash[recorder_key] = recorder
    token = current_recorder.set(recorder)
    try:
        return (yield)
    finally:
        current_recorder.reset(token)


def item_recorder(item: pytest.Item) -> TestRecorder | None:
    """The item's recorder: its protocol's or, for a concurrent case set up ahead of its
    protocol (its setup reports are made then), the one prepared for it."""
    prepared = item.stash.get(prepared_recorder_key, None)
    return prepared if prepared is not None else item.stash.get(recorder_key, None)


def _new_recorder(item: pytest.Item) -> TestRecorder:
    file, test, case_id, where = record_identity(item)
    return TestRecorder(file, test, case_id, where, sample=_sample_of(item))


_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # pytest_llmeval/, not plugin/


def _library_dirs() -> tuple[Path, ...]:
    """The standard library and site-packages folders (frames there are nobody's own code)."""
    import site
    import sysconfig

    found = {Path(os.__file__).resolve().parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            found.add(Path(path).resolve())
    try:
        found.update(Path(p).resolve() for p in site.getsitepackages())
    except AttributeError:  # some virtualenv builds lack it
        pass
    return tuple(found)


def _frame_path(tb: TracebackType) -> Path | None:
    try:
        return Path(tb.tb_frame.f_code.co_filename).resolve()
    except (ValueError, OSError):
        return None


_PYTEST_DIRS = (Path(pytest.__file__).resolve().parent, Path(_pytest_pkg.__file__).resolve().parent)


def _is_pytest_frame(tb: TracebackType) -> bool:
    path = _frame_path(tb)
    return path is not None and (
        any(path.is_relative_to(d) for d in _PYTEST_DIRS) or "pluggy" in path.parts
    )


def _hide_package_frames(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An error of ours (unknown scorer, bad option or input, judge failure) is shown from the
    user's own frames: the message says what to do, and pytest-llmeval's internal frames (and
    the standard library's under them, e.g. the future a judge call ran in: dozens of lines per
    test) say nothing to the user. A user's own code called from ours (a custom scorer) stays.
    ``--fulltrace`` shows everything.

    The frames are unlinked from the raw traceback chain: pytest rebuilds its traceback from
    the raw entries when it cuts it at the test function, so filtering its Traceback object
    would not last."""
    if item.config.getoption("fulltrace", False):
        return
    chain: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        chain.append(tb)
        tb = tb.tb_next
    libraries: tuple[Path, ...] | None = None
    kept: list[TracebackType] = []
    entered = False  # past the first frame of ours
    for t in chain:
        path = _frame_path(t)
        if path is not None and path.is_relative_to(_PACKAGE_DIR):
            entered = True
            continue
        if entered and path is not None:
            if libraries is None:
                libraries = _library_dirs()
            if any(path.is_relative_to(d) for d in libraries):
                continue
        kept.append(t)
    if not kept or kept[0] is not chain[0] or len(kept) == len(chain):
        return
    if all(_is_pytest_frame(t) for t in kept):
        # Raised by this plugin outside any user code (a concurrent case's timeout, handed
        # over in its call phase): hiding our frames would leave only pytest's own, which pytest
        # then shows in full. Keep the chain: pytest cuts its own frames and shows ours.
        return
    for before, after in itertools.pairwise(kept):
        before.tb_next = after
    kept[-1].tb_next = None
    # rebuild pytest's view from the shortened chain (it may have been computed already)
    excinfo.traceback = type(excinfo.traceback)(excinfo.tb)


def _count_unrecorded_error(item: pytest.Item, error: LLMEvalError) -> None:
    """Every test ERROR caused by pytest-llmeval shows in the llm-eval summary: an error raised
    before any scoring was recorded (assert_scores rejecting its options, say) gets a record, so
    the summary's error count agrees with pytest's."""
    recorder = item_recorder(item)
    if recorder is None or any(r.error is not None for r in recorder.records):
        return
    name = getattr(error, "scorer", None) or getattr(error, "name", None) or "?"
    recorder.add(
        ScoreRecord(
            file=recorder.file,
            test=recorder.test,
            case_id=recorder.case_id,
            scorer=str(name),
            index=recorder.next_index(str(name)),
            score=None,
            min=None,
            max=None,
            passed=None,
            cached=False,
            duration_s=0.0,
            error=f"{type(error).__name__}: {error}",
            where=recorder.where,
        )
    )


def _case_recorder(item: pytest.Item) -> TestRecorder:
    """The recorder of a concurrent case being set up: its protocol's, when that is running,
    else a new one that its protocol will take up."""
    recorder = item.stash.get(recorder_key, None)
    if recorder is not None and current_recorder.get() is recorder:
        return recorder
    recorder = _new_recorder(item)
    gates = item.config.pluginmanager.get_plugin("llm-eval-gate-hooks")
    if isinstance(gates, GateHooks):
        gates.prime(recorder)  # its body may start before its protocol's wrapper runs
    item.stash[prepared_recorder_key] = recorder
    return recorder


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """A scorer that asks for a skip (:class:`ScoringSkipped`; scorers know nothing of pytest)
    skips the test, whether its body ran here or as a concurrent case replayed here."""
    __tracebackhide__ = True
    try:
        return (yield)
    except ScoringSkipped as exc:
        # reported at the test, like a skip raised in its body (not at this wrapper)
        raise pytest.skip.Exception(str(exc), _use_item_location=True) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    excinfo = call.excinfo
    ours = (
        excinfo is not None
        and isinstance(excinfo.value, LLMEvalError)
        and not isinstance(excinfo.value, AssertionError)
    )
    if ours:
        assert excinfo is not None
        _hide_package_frames(item, excinfo)  # before the report renders the traceback
    report = yield
    if ours:
        assert excinfo is not None and isinstance(excinfo.value, LLMEvalError)
        # A judge that failed (or bad input, or a replay miss) is an ERROR of the test, not a
        # quality FAIL: the score is unknown. The flag crosses xdist with the report.
        setattr(report, ERROR_ATTR, f"{type(excinfo.value).__name__}")
        if report.failed:  # not when xfail turned it into an expected failure
            _count_unrecorded_error(item, excinfo.value)
    if call.when == "teardown":
        recorder = item_recorder(item)
        if recorder is not None and recorder.records:
            setattr(
                report,
                RECORDS_ATTR,
                json.dumps([r.to_json() for r in recorder.records], allow_nan=False),
            )
            _ship_instruments(item.config, recorder, report)
    return report


def _ship_instruments(config: pytest.Config, recorder: TestRecorder, report: Any) -> None:
    """Put on the teardown report each instrument of the test's records that this process has
    not shipped before: the controller learns each instrument once per process, from the first
    report that needs it (a report that arrives carries its records, so never a record without
    its instrument; a crashed worker's lost reports lose both)."""
    shipped = config.stash.get(shipped_key, None)
    if shipped is None:
        return
    new = {}
    for r in recorder.records:
        digest = r.instrument
        if digest is not None and digest not in shipped:
            inst = KNOWN_INSTRUMENTS.get(digest)
            if inst is not None:
                new[digest] = inst.to_json()
                shipped.add(digest)
    if new:
        setattr(report, INSTRUMENTS_ATTR, json.dumps(new, allow_nan=False))


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, str | tuple[str, dict[str, bool]]] | None:
    if report.when == "call" and report.failed and getattr(report, ERROR_ATTR, None):
        return "error", "E", ("ERROR", {"red": True})
    return None


# -- suite gates and repeated samples (issue 9) ------------------------------------------------
#
# Worker side (and the only process): GateHooks finds each test function's gates at collection
# (a bad gate is a collection error) and softens the per-case misses of the scorers the test's
# own markers gate; the PlanCollector (plan.py) notes which gated items were selected. Controller
# side: the RunController (controller.py) judges the gates from the run at the end of the session.


def _configure_gates(config: pytest.Config) -> None:
    """Both sides: markers, the run's gates (a malformed one is a usage error), the verdict
    policies, the gate hooks and the plan collector."""
    from pytest_llmeval.analysis.gates import (
        INCONCLUSIVE_POLICIES,
        SKIPPED_POLICIES,
        parse_gate_option,
    )
    from pytest_llmeval.core.errors import GateError
    from pytest_llmeval.plugin.plan import PlanCollector

    config.addinivalue_line(
        "markers",
        "llm_eval_gate(scorer, *, min_mean=None, max_mean=None, min_pass_rate=None, "
        "max_pass_rate=None, confidence=None, reducer='mean', max_errors=0): a suite gate on the "
        "records of `scorer` over all cases and samples of this test; stackable",
    )
    config.addinivalue_line(
        "markers", "llm_eval_sample(k): (set by llm_eval_dataset repeat=) the sample index"
    )
    rules: list[GateRule] = []
    sources = [("--llm-eval-gate", t) for t in config.getoption("llm_eval_gate", None) or []]
    sources += [("ini llm_eval_gates", t) for t in config.getini("llm_eval_gates") or []]
    for origin, text in sources:
        if not text.strip():
            continue
        try:
            rules.append(parse_gate_option(text, origin))
        except GateError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[gate_rules_key] = rules
    table: dict[tuple[str, str], TestGates] = {}
    config.stash[gate_table_key] = table
    repeat = _number(config, "llm_eval_repeat", int)
    if repeat is not None and repeat < 1:
        raise pytest.UsageError(
            f"--llm-eval-repeat / ini llm_eval_repeat must be >= 1, not {repeat}"
        )
    policies = {}
    for name, allowed in (
        ("inconclusive", INCONCLUSIVE_POLICIES),
        ("skipped", SKIPPED_POLICIES),
    ):
        value = _opt(config, f"llm_eval_{name}") or "fail"
        if value not in allowed:
            raise pytest.UsageError(
                f"--llm-eval-{name} / ini llm_eval_{name}: {value!r}; use fail or pass"
            )
        policies[name] = value
    accepted = config.getoption("llm_eval_accept_incomparable", default=None) or []
    accepted = accepted or list(config.getini("llm_eval_accept_incomparable") or [])
    config.stash[verdict_policies_key] = VerdictPolicies(
        inconclusive=policies["inconclusive"],
        skipped=policies["skipped"],
        accept_incomparable=tuple(
            dict.fromkeys(a.strip() for item in accepted for a in item.split(",") if a.strip())
        ),
    )
    strict = config.getoption("llm_eval_strict_cases", default=None)
    if strict is None:
        strict = bool(config.getini("llm_eval_strict_cases"))
    config.pluginmanager.register(GateHooks(config, bool(strict)), "llm-eval-gate-hooks")
    config.pluginmanager.register(
        PlanCollector(config, table, record_identity, function_identity, _planned_kind),
        "llm-eval-plan",
    )


def _planned_kind(item: pytest.Item) -> bool | None:
    """Whether an item's fate counts: True for an llm_eval item of a run with evaluations on,
    False for one skipped because they are off (a plain ``pytest`` run judges no llm_eval
    gate), None for any other test (its gates, if a run gate gives it some, still count)."""
    if item.get_closest_marker("llm_eval") is None:
        return None
    return _enabled(item.config)


def _test_gates(config: pytest.Config, file: str, test: str) -> TestGates:
    from pytest_llmeval.analysis.gates import TestGates

    return config.stash[gate_table_key].setdefault((file, test), TestGates())


def _definition_identity(metafunc: pytest.Metafunc) -> tuple[str, str]:
    file, _, test = metafunc.definition.nodeid.partition("::")
    return file, test


def _parametrize_cases(metafunc: pytest.Metafunc, mark: pytest.Mark, cases: list[Case]) -> None:
    """One test per dataset row, or per row and sample with ``repeat`` (marker, else
    ``--llm-eval-repeat``): ids ``<case>-s<k>``, k from 0, the sample index also being the
    ``sample`` of each record and the ``llm_eval_sample`` fixture."""
    where = f"{metafunc.definition.path}::{metafunc.definition.name}"
    if "repeat" in mark.kwargs:
        repeat = mark.kwargs["repeat"]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise pytest.Collector.CollectError(
                f"{where}: @pytest.mark.llm_eval_dataset(repeat={repeat!r}): repeat is the "
                "number of samples per case, a whole number >= 1"
            )
    else:
        repeat = _number(metafunc.config, "llm_eval_repeat", int) or 1
    file, test = _definition_identity(metafunc)
    gates = _test_gates(metafunc.config, file, test)
    gates.total = len(cases)
    gates.repeat = repeat
    if repeat == 1:
        metafunc.parametrize("case", cases, ids=[c.id for c in cases])
        return
    metafunc.parametrize(
        "case",
        [
            pytest.param(c, id=f"{c.id}-s{k}", marks=pytest.mark.llm_eval_sample(k))
            for c in cases
            for k in range(repeat)
        ],
    )


@pytest.fixture
def llm_eval_sample(request: pytest.FixtureRequest) -> int:
    """The sample index of this run of a dataset case (0 to repeat-1; 0 without repeat), e.g. to
    seed a fake nondeterministic app reproducibly."""
    return _sample_of(request.node)


def _mark_text(mark: pytest.Mark) -> str:
    args = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()]
    return f"@pytest.mark.llm_eval_gate({', '.join(args)})"


class GateHooks:
    """Both sides: collect and check each test function's gates; soften gated per-case misses;
    ship gate info on teardown reports."""

    def __init__(self, config: pytest.Config, strict: bool) -> None:
        self.config = config
        self.strict = strict
        self._resolved: dict[str, GateRule] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Worker side (and the only process): a test function's gates, from its
        ``llm_eval_gate`` markers and the run's matching ``--llm-eval-gate`` patterns. A bad
        gate is a collection error naming the marker (or option) and the test."""
        from pytest_llmeval.analysis.gates import make_spec, resolve_spec
        from pytest_llmeval.core.errors import GateError

        file, test = _definition_identity(metafunc)
        name = f"{file}::{test}"
        specs = []
        marker_scorers = set()
        try:
            for mark in metafunc.definition.iter_markers("llm_eval_gate"):
                source = f"{_mark_text(mark)} on {name}"
                if not mark.args:
                    raise GateError(source, "needs the scorer's name as its first argument")
                if len(mark.args) > 1:
                    raise GateError(source, "takes one scorer; stack one marker per scorer")
                spec = make_spec(mark.args[0], mark.kwargs, source)
                specs.append(resolve_spec(spec, default_registry))
                marker_scorers.add(specs[-1].scorer)
            # Run gates are the evaluation run's (--llm-eval): a plain `pytest` judges none.
            rules = self.config.stash[gate_rules_key] if _enabled(self.config) else []
            for rule in rules:
                if rule.matches(file, test):
                    resolved = self._resolved.get(rule.spec.source)
                    if resolved is None:
                        resolved = dataclasses.replace(
                            rule, spec=resolve_spec(rule.spec, default_registry)
                        )
                        self._resolved[rule.spec.source] = resolved
                    specs.append(resolved.spec)
        except GateError as exc:
            raise pytest.Collector.CollectError(f"{exc} (test {name})") from None
        if specs:
            gates = _test_gates(metafunc.config, file, test)
            gates.specs = specs
            gates.marker_scorers = frozenset(marker_scorers)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Iterator[None]:
        """Worker side: tell the test's recorder which scorers a gate decides (runs inside the
        wrapper that creates the recorder)."""
        recorder = item.stash.get(recorder_key, None)
        if recorder is not None:
            self.prime(recorder)
        return (yield)

    def prime(self, recorder: TestRecorder) -> None:
        """Tell a test's recorder which scorers a gate decides. Also called for a concurrent
        case's recorder made before its protocol (its body may start ahead). Only the gates of
        the test's own markers soften its per-case misses: a run gate (``--llm-eval-gate``, ini
        ``llm_eval_gates``) adds a verdict and never turns a failing case into a pass."""
        gates = self.config.stash[gate_table_key].get((recorder.file, recorder.test))
        if gates is not None and gates.specs:
            recorder.gated = gates.scorers
            recorder.soft = frozenset() if self.strict else gates.marker_scorers

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Worker side, innermost wrapper (so the records it adds ship with the others): mark a
        passed call with gated misses; at teardown, an error record for each gated scorer a
        failed test never reached (an unscored sample, never a pass)."""
        from pytest_llmeval.analysis.gates import UNREACHED

        report = yield
        recorder = item_recorder(item)
        if recorder is None or not recorder.gated:
            return report
        if call.when in ("setup", "call"):
            if report.failed and call.excinfo is not None:
                text = " ".join(call.excinfo.exconly().split())
                item.stash[gate_failure_key] = redact_text(text)[:300]  # redacted, then cut
            if call.when == "call" and report.passed and recorder.gated_misses:
                setattr(report, GATED_MISS_ATTR, "; ".join(recorder.gated_misses))
            return report
        if call.when != "teardown":
            return report
        failure = item.stash.get(gate_failure_key, None)
        if failure is not None:
            seen = {r.scorer for r in recorder.records}
            for scorer in sorted(recorder.gated - seen):
                recorder.add(
                    ScoreRecord(
                        file=recorder.file,
                        test=recorder.test,
                        case_id=recorder.case_id,
                        scorer=scorer,
                        index=recorder.next_index(scorer),
                        score=None,
                        min=None,
                        max=None,
                        passed=None,
                        cached=False,
                        duration_s=0.0,
                        error=f"the test failed before scoring {scorer}: {failure}",
                        where=recorder.where,
                        metadata=UNREACHED,
                        sample=recorder.sample,
                        gated=True,
                    )
                )
        return report

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, str | tuple[str, dict[str, bool]]] | None:
        """Both sides: a passed test with gated misses reads ``PASSED (gated miss)`` with -v."""
        if report.when == "call" and report.passed and getattr(report, GATED_MISS_ATTR, None):
            return "passed", "g", ("PASSED (gated miss)", {"yellow": True})
        return None
