"""The plugin's options: the table of CLI options with their ini twins, how a value is read
(command line, then ini, then the environment), and the run's settings built from them."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.core.settings import (
    CACHE_MODES,
    JUDGE_MODES,
    JUDGE_PROVIDERS,
    JudgeSettings,
    Secret,
    Settings,
)

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
        "markdown",
        "llm_eval_markdown",
        "write a Markdown summary (scorers, gates, the comparison with the baseline, regressed "
        "cases; sized for a pull-request comment) to this path; also appended to "
        "$GITHUB_STEP_SUMMARY when that is set (env LLM_EVAL_MARKDOWN)",
        "str",
        None,
    ),
    (
        "markdown-step-summary",
        "llm_eval_markdown_step_summary",
        "on (default) or off: whether --llm-eval-markdown's summary is also appended to "
        "$GITHUB_STEP_SUMMARY when that is set (env LLM_EVAL_MARKDOWN_STEP_SUMMARY)",
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
    from pytest_llmeval.core.limits import parse_burst, parse_rate

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


def _worker_count(config: pytest.Config) -> int:
    n = getattr(config.option, "numprocesses", None)
    if isinstance(n, int):
        return n
    return 0


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
