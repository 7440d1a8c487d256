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
import math
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval import _pytest_compat as compat
from pytest_llmeval import hookspecs
from pytest_llmeval.concurrent import ConcurrentCases, check_marker, prepared_recorder_key
from pytest_llmeval.context import ScoringContext, get_context, set_context
from pytest_llmeval.controller import INSTRUMENTS_ATTR, RECORDS_ATTR, RunController
from pytest_llmeval.dataset import Case, load_dataset
from pytest_llmeval.errors import DatasetError, LLMEvalError
from pytest_llmeval.model import KNOWN_INSTRUMENTS
from pytest_llmeval.ratelimit import RateLimits
from pytest_llmeval.records import ScoreRecord, TestRecorder, current_recorder
from pytest_llmeval.redaction import redact_text
from pytest_llmeval.registry import default_registry
from pytest_llmeval.settings import (
    CACHE_MODES,
    JUDGE_MODES,
    JUDGE_PROVIDERS,
    JudgeSettings,
    Secret,
    Settings,
)

if TYPE_CHECKING:
    from pytest_llmeval.gates import GateRule, TestGates
    from pytest_llmeval.progress import Progress
    from pytest_llmeval.ratelimit import FileBucket, RateLimiter
    from pytest_llmeval.redis_store import TieredStore
    from pytest_llmeval.spend import SharedSpend

ERROR_ATTR = "llm_eval_error"

recorder_key = pytest.StashKey[TestRecorder]()
context_key = pytest.StashKey[ScoringContext]()
previous_context_key = pytest.StashKey["ScoringContext | None"]()
session_key = pytest.StashKey["RunController"]()
#: the instruments this process has shipped to the controller (once each)
shipped_key = pytest.StashKey[set[str]]()
spend_key = pytest.StashKey["SharedSpend"]()
#: ``workerinput`` key: the path of the run's shared spend file (see :mod:`pytest_llmeval.spend`)
SPEND_FILE_KEY = "llm_eval_spend_file"
rate_file_key = pytest.StashKey["FileBucket"]()
#: ``workerinput`` key: the path of the run's rate-limit file (see :mod:`pytest_llmeval.ratelimit`)
RATE_FILE_KEY = "llm_eval_rate_file"

_SKIP_REASON = (
    "llm_eval test: LLM evaluations run only with `pytest --llm-eval` "
    "(or `llm_eval = true` in the ini file)"
)


# -- options -------------------------------------------------------------------------------

#: (option suffix, ini name, help, kind, default). Each CLI option has an ini twin.
_OPTIONS: list[tuple[str, str, str, str, Any]] = [
    (
        "cache",
        "llm_eval_cache",
        "result cache mode: use (default), replay (read only; a miss is "
        "an error), refresh (recompute and overwrite) or off",
        "choice",
        "use",
    ),
    (
        "cache-dir",
        "llm_eval_cache_dir",
        "directory of the result cache (default .llmeval under the rootdir)",
        "str",
        None,
    ),
    (
        "cache-url",
        "llm_eval_cache_url",
        "share results in Redis: redis://host:port/db or rediss:// (env LLM_EVAL_CACHE_URL; "
        "password in the URL or LLM_EVAL_REDIS_PASSWORD); the local cache stays in front",
        "str",
        None,
    ),
    (
        "cache-prefix",
        "llm_eval_cache_prefix",
        'prefix of the result keys in Redis (default "llmeval:")',
        "str",
        None,
    ),
    ("cache-ttl", "llm_eval_cache_ttl", "expire results in Redis after N seconds", "int", None),
    ("report", "llm_eval_report", "write a JSON report of every score to this path", "str", None),
    (
        "html",
        "llm_eval_html",
        "write a self-contained HTML report (cards, gates, case table) to this path",
        "str",
        None,
    ),
    (
        "judge-model",
        "llm_eval_judge_model",
        "judge model name (default: env LLM_EVAL_JUDGE_MODEL or gpt-4o-mini)",
        "str",
        None,
    ),
    (
        "judge-base-url",
        "llm_eval_judge_base_url",
        "OpenAI-compatible endpoint of the judge (default: env OPENAI_BASE_URL)",
        "str",
        None,
    ),
    (
        "judge-provider",
        "llm_eval_judge_provider",
        "how the judge endpoint is addressed: openai (default; any OpenAI-compatible base URL) or "
        "azure (Azure OpenAI: AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY, OPENAI_API_VERSION; "
        "the judge model is the deployment); default env LLM_EVAL_JUDGE_PROVIDER",
        "str",
        None,
    ),
    (
        "judge-mode",
        "llm_eval_judge_mode",
        "how structured replies are obtained: tool (forced "
        "tool call, default), json (JSON mode) or text (parse the reply)",
        "choice-mode",
        None,
    ),
    (
        "concurrency",
        "llm_eval_concurrency",
        "judge calls in flight at once per process (default 8)",
        "int",
        None,
    ),
    (
        "timeout",
        "llm_eval_timeout",
        "seconds before one judge call times out (default 60)",
        "float",
        None,
    ),
    (
        "max-tries",
        "llm_eval_max_tries",
        "tries per judge call, first included (default 4)",
        "int",
        None,
    ),
    (
        "scoring-timeout",
        "llm_eval_scoring_timeout",
        "seconds of judge time one scoring may take in all: every call, retry and wait between "
        "tries, not the wait for a concurrency slot or the rate limit (default 120)",
        "float",
        None,
    ),
    (
        "max-reply-chars",
        "llm_eval_max_reply_chars",
        "longest judge reply accepted, in characters; a longer one is a judge error "
        "(default 200000)",
        "int",
        None,
    ),
    (
        "budget",
        "llm_eval_budget",
        "USD: stop starting judge calls once the whole run (xdist workers included; on "
        "non-POSIX systems each process) has spent this much",
        "float",
        None,
    ),
    (
        "rpm",
        "llm_eval_rpm",
        "judge requests per minute for the whole run: xdist workers share it (file lock) and, "
        "with --llm-eval-cache-url, every machine using the same Redis prefix (env LLM_EVAL_RPM; "
        "default no limit)",
        "str",
        None,
    ),
    (
        "tpm",
        "llm_eval_tpm",
        "judge tokens per minute for the whole run, shared like --llm-eval-rpm; each request "
        "reserves an estimate and settles with the usage its reply reports (env LLM_EVAL_TPM)",
        "str",
        None,
    ),
    (
        "rate-burst",
        "llm_eval_rate_burst",
        "seconds of the --llm-eval-rpm/--llm-eval-tpm rate that may start at once (default 1; "
        "at least one request; env LLM_EVAL_RATE_BURST)",
        "str",
        None,
    ),
    (
        "case-concurrency",
        "llm_eval_case_concurrency",
        "cases of one async dataset test in flight at once per process (default 1; the "
        "marker's concurrency= wins)",
        "int",
        None,
    ),
    (
        "record-chars",
        "llm_eval_record_chars",
        "characters of each scorer input (output, expected, ...) a score record keeps for the "
        "reports; longer ones are cut and marked (default 4000; 0 keeps none)",
        "int",
        None,
    ),
    (
        "case-timeout",
        "llm_eval_case_timeout",
        "seconds one async dataset case may run before it is cancelled and reported as that "
        "case's error (default: no limit)",
        "float",
        None,
    ),
    (
        "embedding-model",
        "llm_eval_embedding_model",
        "local embedding model (hub id or directory) for embedding scorers",
        "str",
        None,
    ),
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    # Run history, baseline comparison and JUnit properties (issue 10) live in their own module.
    from pytest_llmeval import history

    if not pluginmanager.has_plugin("llm-eval-history"):
        pluginmanager.register(history, "llm-eval-history")
    # Sharded runs (--llm-eval-shard i/n, issue 11) too.
    from pytest_llmeval import shard

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


def _opt(config: pytest.Config, ini: str) -> str | None:
    value = config.getoption(ini, default=None)
    if value is not None:
        return str(value)
    raw = config.getini(ini)
    if raw in (None, "", []):
        return None
    return str(raw).strip()


def _number(config: pytest.Config, ini: str, kind: type[float] | type[int]) -> Any:
    text = _opt(config, ini)
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        raise pytest.UsageError(
            f"--{ini.replace('_', '-')} / ini {ini}: {text!r} is not a valid {kind.__name__}"
        ) from None


def _parse_prices(lines: list[str]) -> dict[str, tuple[float, ...]]:
    prices: dict[str, tuple[float, ...]] = {}
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (3, 4):
            raise pytest.UsageError(
                f"ini llm_eval_prices: {line!r} must be 'MODEL INPUT_USD OUTPUT_USD "
                "[CACHED_INPUT_USD]' (USD per million tokens)"
            )
        try:
            numbers = tuple(float(p) for p in parts[1:])
        except ValueError:
            raise pytest.UsageError(
                f"ini llm_eval_prices: {line!r}: prices must be numbers"
            ) from None
        if not all(math.isfinite(n) and n >= 0 for n in numbers):
            raise pytest.UsageError(
                f"ini llm_eval_prices: {line!r}: prices must be finite and not negative"
            )
        prices[parts[0]] = numbers
    return prices


def build_settings(config: pytest.Config, environ: dict[str, str] | None = None) -> Settings:
    """Settings from CLI options, then ini values, then the environment."""
    env = dict(os.environ) if environ is None else environ
    judge = JudgeSettings()
    provider = _opt(config, "llm_eval_judge_provider") or env.get("LLM_EVAL_JUDGE_PROVIDER")
    provider = provider or judge.provider
    if provider not in JUDGE_PROVIDERS:
        raise pytest.UsageError(
            f"--llm-eval-judge-provider / ini llm_eval_judge_provider / env "
            f"LLM_EVAL_JUDGE_PROVIDER: {provider!r} is not one of {', '.join(JUDGE_PROVIDERS)}"
        )
    azure = provider == "azure"
    default_key_env = "AZURE_OPENAI_API_KEY" if azure else "OPENAI_API_KEY"
    key_env = str(config.getini("llm_eval_api_key_env") or default_key_env)
    changes: dict[str, Any] = {
        "provider": provider,
        "api_version": (env.get("OPENAI_API_VERSION") or None) if azure else None,
        "base_url": _opt(config, "llm_eval_judge_base_url")
        or env.get("AZURE_OPENAI_ENDPOINT" if azure else "OPENAI_BASE_URL")
        or None,
        "model": _opt(config, "llm_eval_judge_model")
        or env.get("LLM_EVAL_JUDGE_MODEL")
        or judge.model,
        "api_key": Secret(env[key_env]) if env.get(key_env) else None,
    }
    mode = _opt(config, "llm_eval_judge_mode")
    if mode is not None:
        if mode not in JUDGE_MODES:
            raise pytest.UsageError(f"llm_eval_judge_mode must be one of {JUDGE_MODES}")
        changes["mode"] = mode
    for ini, field, kind in (
        ("llm_eval_concurrency", "concurrency", int),
        ("llm_eval_timeout", "timeout", float),
        ("llm_eval_max_tries", "max_tries", int),
        ("llm_eval_scoring_timeout", "overall_timeout", float),
        ("llm_eval_max_reply_chars", "max_reply_chars", int),
    ):
        value = _number(config, ini, kind)
        if value is not None:
            if value <= 0:
                raise pytest.UsageError(f"--{ini.replace('_', '-')} must be positive")
            changes[field] = value
    judge = dataclasses.replace(judge, **changes)

    cache_mode = _opt(config, "llm_eval_cache") or "use"
    if cache_mode not in CACHE_MODES:
        raise pytest.UsageError(
            f"llm_eval_cache: {cache_mode!r} is not a cache mode; use one of "
            f"{', '.join(CACHE_MODES)}"
        )
    cache_dir_text = _opt(config, "llm_eval_cache_dir") or env.get("LLM_EVAL_CACHE_DIR")
    cache_dir = Path(cache_dir_text) if cache_dir_text else Path(".llmeval")
    if not cache_dir.is_absolute():
        cache_dir = config.rootpath / cache_dir
    allow_code = config.getoption("llm_eval_allow_code_execution", default=None)
    if allow_code is None:
        allow_code = bool(config.getini("llm_eval_allow_code_execution")) or env.get(
            "LLM_EVAL_SANDBOX", ""
        ) in {"1", "true", "yes"}
    allow_weak = config.getoption("llm_eval_allow_weak_sandbox", default=None)
    if allow_weak is None:
        allow_weak = bool(config.getini("llm_eval_allow_weak_sandbox")) or env.get(
            "LLM_EVAL_ALLOW_WEAK_SANDBOX", ""
        ) in {"1", "true", "yes"}
    record_chars = _number(config, "llm_eval_record_chars", int)
    if record_chars is not None and record_chars < 0:
        raise pytest.UsageError("--llm-eval-record-chars must be >= 0 (0 keeps no inputs)")
    return Settings(
        judge=judge,
        cache_dir=cache_dir,
        cache_mode=cache_mode,
        budget_usd=_number(config, "llm_eval_budget", float),
        prices=_parse_prices(list(config.getini("llm_eval_prices"))),
        embedding_model=_opt(config, "llm_eval_embedding_model"),
        sandbox_enabled=bool(allow_code),
        sandbox_allow_weak=bool(allow_weak),
        rate_limits=_rate_limits(config, env),
        **({} if record_chars is None else {"record_chars": record_chars}),
    )


def _rate_limits(config: pytest.Config, env: dict[str, str]) -> RateLimits:
    """``--llm-eval-rpm``, ``--llm-eval-tpm``, ``--llm-eval-rate-burst`` (then ini, then env);
    a bad value is a usage error naming the option."""
    from pytest_llmeval.ratelimit import parse_burst, parse_rate

    values: dict[str, Any] = {}
    for ini, env_name, field, parse in (
        ("llm_eval_rpm", "LLM_EVAL_RPM", "rpm", parse_rate),
        ("llm_eval_tpm", "LLM_EVAL_TPM", "tpm", parse_rate),
        ("llm_eval_rate_burst", "LLM_EVAL_RATE_BURST", "burst_s", parse_burst),
    ):
        text = _opt(config, ini)
        where = f"--{ini.replace('_', '-')} / ini {ini}"
        if text is None and env.get(env_name, "").strip():
            text, where = env[env_name], f"env {env_name}"
        if text is None:
            continue
        try:
            values[field] = parse(text, where)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    return RateLimits(**values)


def _enabled(config: pytest.Config) -> bool:
    flag = config.getoption("llm_eval", default=None)
    if flag is not None:
        return bool(flag)
    return bool(config.getini("llm_eval"))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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
                from pytest_llmeval.redis_outage import RedisOutage

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
        from pytest_llmeval.plan import PlanTracker

        collector = config.pluginmanager.get_plugin("llm-eval-plan")
        tracker = PlanTracker(config, collector)
        config.pluginmanager.register(tracker, "llm-eval-plan-tracker")
        session = RunController(config, tracker)
        config.stash[session_key] = session
        config.pluginmanager.register(session, "llm-eval-session")
        if config.pluginmanager.has_plugin("xdist"):
            from pytest_llmeval.xdist_sched import SharesPlugin

            config.pluginmanager.register(SharesPlugin(config), "llm-eval-xdist-shares")
        _start_progress(config, ctx)


progress_key = pytest.StashKey["Progress"]()
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
    writer = compat.terminal_writer(config)
    if writer is None:
        return None
    isatty = getattr(compat.terminal_file(writer), "isatty", None)
    if not writer.hasmarkup or not callable(isatty) or not isatty():
        return None
    from pytest_llmeval.progress import Progress

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
    from pytest_llmeval.cache import CacheWarning, ResultCache
    from pytest_llmeval.redis_store import RedisStore, RedisUnavailable, TieredStore

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
    from pytest_llmeval.spend import SharedSpend, shared_spend_supported

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
    from pytest_llmeval.ratelimit import FileBucket, MemoryBucket, RateLimiter, RateLimitWarning
    from pytest_llmeval.spend import shared_spend_supported

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
    from pytest_llmeval.ratelimit import RateLimitWarning, RedisBucket, fail_fast
    from pytest_llmeval.redis_store import RedisStore, RedisUnavailable

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


def function_identity(item: pytest.Item) -> tuple[str, str]:
    """(file, test) of an item: the test function as records, gates and shards name it
    (``Class::name`` for a method), without its parametrization."""
    nodeid, name = item.nodeid, item.name
    # The parametrization id may itself contain "::": cut the item's own name off the end first.
    if nodeid.endswith(name):
        prefix = nodeid[: len(nodeid) - len(name)]
    else:
        prefix = nodeid.rpartition("::")[0] + "::"
    file, _, middle = prefix.partition("::")
    return file, middle + getattr(item, "originalname", name)


def _escaped_id(text: str, config: pytest.Config) -> str:
    """``text`` as pytest writes it into an id (non-ASCII escaped, unless the ini option that
    forfeits that is set), by pytest's own rule."""
    return compat.ascii_escaped_by_config(text, config)


def _case_id(item: pytest.Item, callspec: Any, case: Case) -> str:
    """The record's case id of a dataset item: the dataset case's id, or, when the test is also
    parametrized otherwise, pytest's own parametrization id with the dataset case's part written
    as its id and the repeat sample's suffix taken out (``gpt4-q1`` for ``test[gpt4-q1-s2]``),
    so that two parametrizations of one case never share a record identity, and every sample of
    one parametrization keeps it."""
    full = str(getattr(callspec, "id", "") or "")
    parts = compat.parametrization_id_parts(callspec)
    sample = _sample_of(item)
    ours = {case.id, f"{case.id}-s{sample}"}
    ours |= {_escaped_id(x, item.config) for x in ours}
    for i, part in enumerate(parts):
        if part in ours:
            parts[i] = case.id
            return "-".join(parts)
    return full


def record_identity(item: pytest.Item) -> tuple[str, str, str | None, str | None]:
    """(file, test, case id, case location) of an item: records are keyed on these, not on raw
    node ids, so that reports of the same run with and without xdist compare equal. With the
    sample (repeat index) they are unique per node id: every parametrization is its own case."""
    file, test = function_identity(item)
    case_id: str | None = None
    where: str | None = None
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        params = callspec.params
        c = params.get("case")
        if isinstance(c, Case):
            where = c.location
            case_id = c.id if len(params) == 1 else _case_id(item, callspec, c)
        else:
            case_id = callspec.id
    return file, test, case_id, where


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


_PACKAGE_DIR = Path(__file__).resolve().parent


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


_PYTEST_DIRS = compat.pytest_source_dirs()


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
    compat.rebuild_traceback(excinfo)


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


def _worker_count(config: pytest.Config) -> int:
    n = getattr(config.option, "numprocesses", None)
    if isinstance(n, int):
        return n
    return 0


# -- suite gates and repeated samples (issue 9) ------------------------------------------------
#
# Worker side (and the only process): GateHooks finds each test function's gates at collection
# (a bad gate is a collection error) and softens the per-case misses of the scorers the test's
# own markers gate; the PlanCollector (plan.py) notes which gated items were selected. Controller
# side: the RunController (controller.py) judges the gates from the run at the end of the session.

#: call report attribute: the per-case misses a gate will judge (the test itself passed)
GATED_MISS_ATTR = "llm_eval_gated_miss"

gate_table_key = pytest.StashKey["dict[tuple[str, str], TestGates]"]()
gate_rules_key = pytest.StashKey["list[GateRule]"]()
gate_failure_key = pytest.StashKey[str]()


@dataclasses.dataclass(frozen=True)
class VerdictPolicies:
    """``--llm-eval-inconclusive``, ``--llm-eval-skipped``, ``--llm-eval-accept-incomparable``."""

    inconclusive: str = "fail"
    skipped: str = "fail"
    accept_incomparable: tuple[str, ...] = ()


verdict_policies_key = pytest.StashKey[VerdictPolicies]()


def _add_gate_options(group: Any, parser: pytest.Parser) -> None:
    group.addoption(
        "--llm-eval-gate",
        action="append",
        default=[],
        dest="llm_eval_gate",
        metavar="FILE::TEST:SCORER:KEY=VALUE,...",
        help="a suite gate for the test functions matching FILE::TEST (fnmatch, as in node ids), "
        "e.g. 'tests/test_qa.py::test_qa:factuality:min_mean=0.7,confidence=0.95'; "
        "repeatable; adds to the tests' own llm_eval_gate markers",
    )
    parser.addini(
        "llm_eval_gates",
        "suite gates, one FILE::TEST:SCORER:KEY=VALUE,... per line (like --llm-eval-gate)",
        type="linelist",
        default=[],
    )
    group.addoption(
        "--llm-eval-strict-cases",
        action="store_true",
        default=None,
        dest="llm_eval_strict_cases",
        help="in gated tests, fail each case that misses its bound too (default: the gate decides)",
    )
    parser.addini(
        "llm_eval_strict_cases",
        "in gated tests, fail each case that misses its bound too",
        type="bool",
        default=False,
    )
    group.addoption(
        "--llm-eval-repeat",
        dest="llm_eval_repeat",
        type=int,
        default=None,
        metavar="N",
        help="run each dataset case N times (samples) unless its llm_eval_dataset marker sets "
        "repeat=",
    )
    parser.addini("llm_eval_repeat", "samples per dataset case (like --llm-eval-repeat)")
    group.addoption(
        "--llm-eval-inconclusive",
        dest="llm_eval_inconclusive",
        choices=("fail", "pass"),
        default=None,
        help="exit status of a run whose gates are inconclusive at their confidence: fail "
        "(default) or pass",
    )
    parser.addini("llm_eval_inconclusive", "fail (default) or pass: what an inconclusive gate does")
    group.addoption(
        "--llm-eval-skipped",
        dest="llm_eval_skipped",
        choices=("fail", "pass"),
        default=None,
        help="exit status of a run with a gate whose every selected case was skipped (it judged "
        "nothing): fail (default) or pass",
    )
    parser.addini(
        "llm_eval_skipped", "fail (default) or pass: what a gate whose every case was skipped does"
    )
    group.addoption(
        "--llm-eval-accept-incomparable",
        dest="llm_eval_accept_incomparable",
        action="append",
        default=[],
        metavar="SCORER",
        help="with --llm-eval-fail-on-regression: compare SCORER with the baseline although it was "
        "measured with another instrument (judge model, version, prompt, options, code), or "
        "accept that it is missing from this run; 'all' for every scorer; repeatable",
    )
    parser.addini(
        "llm_eval_accept_incomparable",
        "scorers whose changed instrument the baseline comparison accepts (one per line; 'all')",
        type="linelist",
        default=[],
    )


def _configure_gates(config: pytest.Config) -> None:
    """Both sides: markers, the run's gates (a malformed one is a usage error), the verdict
    policies, the gate hooks and the plan collector."""
    from pytest_llmeval.errors import GateError
    from pytest_llmeval.gates import INCONCLUSIVE_POLICIES, SKIPPED_POLICIES, parse_gate_option
    from pytest_llmeval.plan import PlanCollector

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
    from pytest_llmeval.gates import TestGates

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


def _sample_of(item: pytest.Item) -> int:
    mark = item.get_closest_marker("llm_eval_sample")
    return int(mark.args[0]) if mark is not None and mark.args else 0


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
        from pytest_llmeval.errors import GateError
        from pytest_llmeval.gates import make_spec, resolve_spec

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
        from pytest_llmeval.gates import UNREACHED

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
