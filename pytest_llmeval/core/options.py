"""Every option of the plugin in one table, and the one rule that reads a value.

Each row (:class:`Option`) is one option: its command-line flag, ini key and environment twin
(any of them may be absent: ``llm_eval_prices`` is ini-only, ``LLM_EVAL_REDIS_PASSWORD``
env-only), its type, choices, default, help text and help group, and a parser or check where
the type alone does not say what a good value is. The pytest layer registers every row with
pytest and reads values through :func:`resolve` (:mod:`pytest_llmeval.plugin.options`); code
that runs outside pytest reads the environment twins through :func:`env_value`.

**The rule** (:func:`resolve`): the command line, else the ini file, else the environment, else
the default. A blank value (empty, or only spaces) counts as not given at every level, so
``--llm-eval-shard=$SHARD`` with ``SHARD`` unset falls through to the ini file, and the spaces
around a value are not part of it; a secret is used byte for byte (only an empty one is
blank). Two rows differ on purpose: the CLI's ``--llm-eval-gate`` values add to the ini's
``llm_eval_gates`` (``adds_to_ini``), and a boolean's environment twin is on for ``1``,
``true`` or ``yes`` only (:data:`ENV_TRUE`).

**One error format** (:class:`OptionError`): every spelling of the option, the problem (which
quotes the value, never a secret's), and where the value came from::

    --llm-eval-rpm / ini llm_eval_rpm / env LLM_EVAL_RPM: '0' is not a positive whole number
    per minute (e.g. 500; leave it unset for no limit) (given by env LLM_EVAL_RPM)

The table is in the order ``pytest --help`` lists the options (tests/unit/core/test_options.py
holds it
to the options of the release before the table). Standard library only: the core is imported by
everything, pytest by nothing below the pytest layer.

Why this module is long: it is the table, one row of about ten lines per option (54 of them,
help texts included); one table in one place is its job, so it is not split.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, final

from pytest_llmeval.core.limits import parse_burst, parse_rate

__all__ = [
    "CACHE_MODES",
    "ENV_TRUE",
    "JUDGE_MODES",
    "JUDGE_PROVIDERS",
    "OPTION",
    "OPTIONS",
    "STEP_SUMMARY_CHOICES",
    "VERDICT_POLICIES",
    "Option",
    "OptionError",
    "Resolved",
    "env_value",
    "parse_alpha",
    "parse_on_off",
    "parse_prices",
    "parse_shard",
    "resolve",
]

CACHE_MODES = ("use", "replay", "refresh", "off")
JUDGE_MODES = ("tool", "json", "text")
#: How the judge endpoint is addressed: ``openai`` (any OpenAI-compatible base URL) or ``azure``
#: (Azure OpenAI: the SDK's AzureOpenAI client, deployment = the judge model name).
JUDGE_PROVIDERS = ("openai", "azure")
#: what a gate that is inconclusive, or whose every case was skipped, does to the exit status
VERDICT_POLICIES = ("fail", "pass")
#: whether --llm-eval-markdown's summary is also appended to $GITHUB_STEP_SUMMARY
STEP_SUMMARY_CHOICES = ("on", "off")
#: the values of a boolean option's environment twin that turn it on (anything else is off)
ENV_TRUE = frozenset({"1", "true", "yes"})

Kind = Literal["bool", "int", "float", "str", "choice", "lines"]
KINDS: tuple[str, ...] = ("bool", "int", "float", "str", "choice", "lines")
#: the source of a value no level gave
DEFAULT = "default"


# -- parsers and checks ------------------------------------------------------------------------
# A parser turns the text of a value into the value or raises ValueError with the problem
# (quoting the text); a check looks at a value of the right type and returns the problem or None.


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n), 1 <= i <= n. Raises ValueError saying what is wrong."""
    i_text, sep, n_text = text.strip().partition("/")
    try:
        if not sep:
            raise ValueError
        index, count = int(i_text), int(n_text)
    except ValueError:
        raise ValueError(f"{text!r} is not I/N (e.g. 2/3: the second of three shards)") from None
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"{text!r}: I/N needs N >= 1 and I from 1 to N (e.g. 1/{max(count, 1)})")
    return index, count


def parse_alpha(text: str) -> float:
    """A significance level strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (e.g. 0.05)") from None
    if not 0.0 < value < 1.0:
        raise ValueError(f"{text!r} must be strictly between 0 and 1")
    return value


def parse_on_off(text: str) -> str:
    """``on`` or ``off``, in any case."""
    switch = text.lower()
    if switch not in STEP_SUMMARY_CHOICES:
        raise ValueError(
            f"{text!r} is not one of {', '.join(STEP_SUMMARY_CHOICES)} (on: also append the "
            "Markdown summary to $GITHUB_STEP_SUMMARY when it is set; off: do not)"
        )
    return switch


def parse_prices(lines: list[str]) -> Mapping[str, tuple[float, ...]]:
    """``MODEL INPUT_USD OUTPUT_USD [CACHED_INPUT_USD]`` lines -> {model: prices}."""
    prices: dict[str, tuple[float, ...]] = {}
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (3, 4):
            raise ValueError(
                f"{line!r} must be 'MODEL INPUT_USD OUTPUT_USD [CACHED_INPUT_USD]' (USD per "
                "million tokens)"
            )
        try:
            numbers = tuple(float(p) for p in parts[1:])
        except ValueError:
            raise ValueError(f"{line!r}: prices must be numbers") from None
        if not all(math.isfinite(n) and n >= 0 for n in numbers):
            raise ValueError(f"{line!r}: prices must be finite and not negative")
        prices[parts[0]] = numbers
    return MappingProxyType(prices)


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be positive, not {value!r}"


def _at_least(low: int, note: str = "") -> Callable[[int], str | None]:
    def check(value: int) -> str | None:
        return None if value >= low else f"must be >= {low}, not {value!r}{note}"

    return check


# -- the row -----------------------------------------------------------------------------------


@final
@dataclass(frozen=True)
class Option:
    """One option: where it is given, what it is, what it defaults to."""

    #: the pytest ``dest`` (the ini key too, but for llm_eval_gate/llm_eval_gates); an env-only
    #: row is named after its variable, in lower case
    name: str
    help: str
    kind: Kind = "str"
    flag: str | None = None
    ini: str | None = None
    env: str | None = None
    #: the environment twin when the judge provider is ``azure`` (the SDK's own variables)
    azure_env: str | None = None
    #: the value when no level gives one (already of the row's type)
    default: Any = None
    choices: tuple[str, ...] = ()
    #: the ``pytest --help`` group of the flag
    group: str = "llm-eval"
    #: the ini key's help when it differs from the flag's
    ini_help: str | None = None
    metavar: str | None = None
    #: the value of the flag given without one (``--llm-eval-fail-on-regression``)
    const: Any = None
    parse: Callable[[Any], Any] | None = None
    check: Callable[[Any], str | None] | None = None
    #: choices checked by argparse too (False keeps a flag's metavar and error as they were)
    cli_choices: bool = True
    #: lines: the command line's values are added to the ini's instead of replacing them
    adds_to_ini: bool = False
    #: never shown: not in an error, not in a repr; only an empty value is blank
    secret: bool = False
    #: three valid texts (command line, ini, environment) for the precedence test, where the
    #: type alone does not give them
    samples: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"option {self.name!r}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not (self.flag or self.ini or self.env):
            raise ValueError(f"{where}: no flag, ini key or environment variable")
        if (self.kind == "choice") != bool(self.choices):
            raise ValueError(f"{where}: choices go with kind 'choice', and only with it")
        if self.flag is not None and not self.flag.startswith("--llm-eval"):
            raise ValueError(f"{where}: flag {self.flag!r} must start with --llm-eval")
        if self.kind == "choice" and self.default is not None and self.default not in self.choices:
            raise ValueError(f"{where}: default {self.default!r} is not one of its choices")
        if self.secret and (self.parse or self.check or self.choices):
            # an error message quotes the value; a secret's must have none to raise
            raise ValueError(f"{where}: a secret has no parser, check or choices")
        if self.adds_to_ini and self.kind != "lines":
            raise ValueError(f"{where}: only lines add to the ini's")

    @property
    def names(self) -> tuple[str, ...]:
        """Its spellings: ``--llm-eval-rpm``, ``ini llm_eval_rpm``, ``env LLM_EVAL_RPM``."""
        return tuple(
            n
            for n in (
                self.flag,
                f"ini {self.ini}" if self.ini else None,
                f"env {self.env}" if self.env else None,
            )
            if n
        )

    @property
    def label(self) -> str:
        return " / ".join(self.names)

    def message(self, problem: str, source: str) -> str:
        """The one error format: every spelling, the problem, where the value came from."""
        given = f" (given by {source})" if len(self.names) > 1 or source not in self.names else ""
        return f"{self.label}: {problem}{given}"


class OptionError(ValueError):
    """A bad value of an option, named as :meth:`Option.message` names it."""

    def __init__(self, option: Option, problem: str, source: str) -> None:
        super().__init__(option.message(problem, source))
        self.option = option
        self.problem = problem
        self.source = source


@final
@dataclass(frozen=True, repr=False)
class Resolved:
    """An option's value and where it came from: its flag, ``ini <key>``, ``env <NAME>`` or
    ``default``. ``raw`` is the value as given (the text, or what argparse made of it);
    ``items`` are a list option's values, each with its source."""

    option: Option
    value: Any
    source: str
    raw: Any = None
    items: tuple[tuple[str, str], ...] = ()

    @property
    def given(self) -> bool:
        return self.source != DEFAULT

    def __repr__(self) -> str:
        shown = "'***'" if self.option.secret and self.value else repr(self.value)
        return f"Resolved({self.option.name}={shown} from {self.source})"


# -- the table ---------------------------------------------------------------------------------

_SHARD_HELP = (
    "run shard I of N (1-based) of the suite, split by case: every sample and parametrization "
    "of a dataset case lands in one shard; its gates are partial: merge the shards' JSON "
    "reports with `python -m pytest_llmeval merge` (env LLM_EVAL_SHARD)"
)

#: every option, in ``pytest --help`` order
OPTIONS: tuple[Option, ...] = (
    # -- the run history and the baseline comparison
    Option(
        "llm_eval_no_history",
        "do not save this run under <cache dir>/runs/",
        kind="bool",
        flag="--llm-eval-no-history",
        default=False,
    ),
    Option(
        "llm_eval_history",
        "saved runs to keep (the newest N; default 100; 0 saves none)",
        kind="int",
        flag="--llm-eval-history",
        ini="llm_eval_history",
        ini_help="saved runs to keep under <cache dir>/runs/ (default 100; 0 saves none)",
        metavar="N",
        default=100,
        check=_at_least(0, " (0 saves no run)"),
    ),
    Option(
        "llm_eval_baseline",
        "compare this run with a saved run (the last one, or its number) or a JSON report",
        flag="--llm-eval-baseline",
        metavar="last|NUMBER|PATH",
    ),
    Option(
        "llm_eval_fail_on_regression",
        "with --llm-eval-baseline: exit non-zero when a scorer's mean gets worse with "
        "p < ALPHA (default 0.05; write --llm-eval-fail-on-regression=0.01)",
        kind="float",
        flag="--llm-eval-fail-on-regression",
        metavar="ALPHA",
        const=0.05,
        parse=parse_alpha,
        samples=("0.01", "0.02", "0.03"),
    ),
    # -- sharded runs
    Option(
        "llm_eval_shard",
        _SHARD_HELP,
        flag="--llm-eval-shard",
        ini="llm_eval_shard",
        env="LLM_EVAL_SHARD",
        metavar="I/N",
        parse=parse_shard,
        samples=("1/3", "2/3", "3/3"),
    ),
    # -- evaluation runs, the cache, the reports
    Option(
        "llm_eval",
        "run tests marked llm_eval (skipped otherwise)",
        kind="bool",
        flag="--llm-eval",
        ini="llm_eval",
        ini_help="run tests marked llm_eval (like --llm-eval)",
        default=False,
    ),
    Option(
        "llm_eval_cache",
        "result cache mode: use (default), replay (read only; a miss is "
        "an error), refresh (recompute and overwrite) or off",
        kind="choice",
        flag="--llm-eval-cache",
        ini="llm_eval_cache",
        choices=CACHE_MODES,
        default="use",
    ),
    Option(
        "llm_eval_cache_dir",
        "directory of the result cache (default .llmeval under the rootdir)",
        flag="--llm-eval-cache-dir",
        ini="llm_eval_cache_dir",
        env="LLM_EVAL_CACHE_DIR",
        default=".llmeval",
    ),
    Option(
        "llm_eval_cache_url",
        "share results in Redis: redis://host:port/db or rediss:// (env LLM_EVAL_CACHE_URL; "
        "password in the URL or LLM_EVAL_REDIS_PASSWORD); the local cache stays in front",
        flag="--llm-eval-cache-url",
        ini="llm_eval_cache_url",
        env="LLM_EVAL_CACHE_URL",
        secret=True,  # the URL may hold the password
    ),
    Option(
        "llm_eval_cache_prefix",
        'prefix of the result keys in Redis (default "llmeval:")',
        flag="--llm-eval-cache-prefix",
        ini="llm_eval_cache_prefix",
        default="llmeval:",
    ),
    Option(
        "llm_eval_cache_ttl",
        "expire results in Redis after N seconds",
        kind="int",
        flag="--llm-eval-cache-ttl",
        ini="llm_eval_cache_ttl",
        # the Redis store checks it when there is one (a TTL without Redis is not used)
    ),
    Option(
        "llm_eval_report",
        "write a JSON report of every score to this path",
        flag="--llm-eval-report",
        ini="llm_eval_report",
    ),
    Option(
        "llm_eval_html",
        "write a self-contained HTML report (cards, gates, case table) to this path",
        flag="--llm-eval-html",
        ini="llm_eval_html",
    ),
    # -- the judge
    Option(
        "llm_eval_markdown",
        "write a Markdown summary (scorers, gates, the comparison with the baseline, regressed "
        "cases; sized for a pull-request comment) to this path; also appended to "
        "$GITHUB_STEP_SUMMARY when that is set (env LLM_EVAL_MARKDOWN)",
        flag="--llm-eval-markdown",
        ini="llm_eval_markdown",
        env="LLM_EVAL_MARKDOWN",
    ),
    Option(
        "llm_eval_markdown_step_summary",
        "on (default) or off: whether --llm-eval-markdown's summary is also appended to "
        "$GITHUB_STEP_SUMMARY when that is set (env LLM_EVAL_MARKDOWN_STEP_SUMMARY)",
        kind="choice",
        flag="--llm-eval-markdown-step-summary",
        ini="llm_eval_markdown_step_summary",
        env="LLM_EVAL_MARKDOWN_STEP_SUMMARY",
        choices=STEP_SUMMARY_CHOICES,
        default="on",
        parse=parse_on_off,
        cli_choices=False,
    ),
    Option(
        "llm_eval_judge_model",
        "judge model name (default: env LLM_EVAL_JUDGE_MODEL or gpt-4o-mini)",
        flag="--llm-eval-judge-model",
        ini="llm_eval_judge_model",
        env="LLM_EVAL_JUDGE_MODEL",
        default="gpt-4o-mini",
    ),
    Option(
        "llm_eval_judge_base_url",
        "OpenAI-compatible endpoint of the judge (default: env OPENAI_BASE_URL)",
        flag="--llm-eval-judge-base-url",
        ini="llm_eval_judge_base_url",
        env="OPENAI_BASE_URL",
        azure_env="AZURE_OPENAI_ENDPOINT",
        secret=True,  # the URL may hold credentials
    ),
    Option(
        "llm_eval_judge_provider",
        "how the judge endpoint is addressed: openai (default; any OpenAI-compatible base URL) or "
        "azure (Azure OpenAI: AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY, OPENAI_API_VERSION; "
        "the judge model is the deployment); default env LLM_EVAL_JUDGE_PROVIDER",
        kind="choice",
        flag="--llm-eval-judge-provider",
        ini="llm_eval_judge_provider",
        env="LLM_EVAL_JUDGE_PROVIDER",
        choices=JUDGE_PROVIDERS,
        default="openai",
        cli_choices=False,
    ),
    Option(
        "llm_eval_judge_mode",
        "how structured replies are obtained: tool (forced "
        "tool call, default), json (JSON mode) or text (parse the reply)",
        kind="choice",
        flag="--llm-eval-judge-mode",
        ini="llm_eval_judge_mode",
        choices=JUDGE_MODES,
        default="tool",
    ),
    Option(
        "llm_eval_concurrency",
        "judge calls in flight at once per process (default: 8, or as many as the most "
        "concurrent test or batch runs cases at once)",
        kind="int",
        flag="--llm-eval-concurrency",
        ini="llm_eval_concurrency",
        default=None,
        check=_positive,
    ),
    Option(
        "llm_eval_timeout",
        "seconds before one judge call times out (default 60)",
        kind="float",
        flag="--llm-eval-timeout",
        ini="llm_eval_timeout",
        default=60.0,
        check=_positive,
    ),
    Option(
        "llm_eval_max_tries",
        "tries per judge call, first included (default 4)",
        kind="int",
        flag="--llm-eval-max-tries",
        ini="llm_eval_max_tries",
        default=4,
        check=_positive,
    ),
    Option(
        "llm_eval_scoring_timeout",
        "seconds of judge time one scoring may take in all: every call, retry and wait between "
        "tries, not the wait for a concurrency slot or the rate limit (default 120)",
        kind="float",
        flag="--llm-eval-scoring-timeout",
        ini="llm_eval_scoring_timeout",
        default=120.0,
        check=_positive,
    ),
    Option(
        "llm_eval_max_reply_chars",
        "longest judge reply accepted, in characters; a longer one is a judge error "
        "(default 200000)",
        kind="int",
        flag="--llm-eval-max-reply-chars",
        ini="llm_eval_max_reply_chars",
        default=200_000,
        check=_positive,
    ),
    Option(
        "llm_eval_budget",
        "USD: stop starting judge calls once the whole run (xdist workers included; on "
        "non-POSIX systems each process) has spent this much",
        kind="float",
        flag="--llm-eval-budget",
        ini="llm_eval_budget",
    ),
    Option(
        "llm_eval_rpm",
        "judge requests per minute for the whole run: xdist workers share it (file lock) and, "
        "with --llm-eval-cache-url, every machine using the same Redis prefix (env LLM_EVAL_RPM; "
        "default no limit)",
        kind="int",
        flag="--llm-eval-rpm",
        ini="llm_eval_rpm",
        env="LLM_EVAL_RPM",
        parse=parse_rate,
    ),
    Option(
        "llm_eval_tpm",
        "judge tokens per minute for the whole run, shared like --llm-eval-rpm; each request "
        "reserves an estimate and settles with the usage its reply reports (env LLM_EVAL_TPM)",
        kind="int",
        flag="--llm-eval-tpm",
        ini="llm_eval_tpm",
        env="LLM_EVAL_TPM",
        parse=parse_rate,
    ),
    Option(
        "llm_eval_rate_burst",
        "seconds of the --llm-eval-rpm/--llm-eval-tpm rate that may start at once (default 1; "
        "at least one request; env LLM_EVAL_RATE_BURST)",
        kind="float",
        flag="--llm-eval-rate-burst",
        ini="llm_eval_rate_burst",
        env="LLM_EVAL_RATE_BURST",
        default=1.0,
        parse=parse_burst,
    ),
    # -- dataset tests
    Option(
        "llm_eval_case_concurrency",
        "cases of one async dataset test in flight at once per process (default 1; the "
        "marker's concurrency= wins)",
        kind="int",
        flag="--llm-eval-case-concurrency",
        ini="llm_eval_case_concurrency",
        default=1,
        check=_positive,
    ),
    Option(
        "llm_eval_record_chars",
        "characters of each scorer input (output, expected, ...) a score record keeps for the "
        "reports; longer ones are cut and marked (default 4000; 0 keeps none)",
        kind="int",
        flag="--llm-eval-record-chars",
        ini="llm_eval_record_chars",
        default=4000,
        check=_at_least(0, " (0 keeps no inputs)"),
    ),
    Option(
        "llm_eval_trace_spans",
        "spans of a test's llm_eval_trace its score records keep for the reports (the span "
        "tree; the rest are counted as cut; default 100; 0 keeps only the counts)",
        kind="int",
        flag="--llm-eval-trace-spans",
        ini="llm_eval_trace_spans",
        default=100,
        check=_at_least(0, " (0 keeps no span tree)"),
    ),
    Option(
        "llm_eval_trace_chars",
        "characters of each text of a traced span (name, tool arguments, result, error) the "
        "reports keep; longer ones are cut and marked (default 500)",
        kind="int",
        flag="--llm-eval-trace-chars",
        ini="llm_eval_trace_chars",
        default=500,
        check=_at_least(1),
    ),
    Option(
        "llm_eval_case_timeout",
        "seconds one async dataset case may run before it is cancelled and reported as that "
        "case's error (default: no limit)",
        kind="float",
        flag="--llm-eval-case-timeout",
        ini="llm_eval_case_timeout",
        check=_positive,
    ),
    Option(
        "llm_eval_embedding_model",
        "local embedding model (hub id or directory) for embedding scorers",
        flag="--llm-eval-embedding-model",
        ini="llm_eval_embedding_model",
    ),
    # -- opt-ins
    Option(
        "llm_eval_cache_required",
        "fail the run when the shared (Redis) result store cannot be reached at start",
        kind="bool",
        flag="--llm-eval-cache-required",
        ini="llm_eval_cache_required",
        default=False,
    ),
    Option(
        "llm_eval_allow_code_execution",
        "allow python_unit_testing to run model-written code in its sandbox",
        kind="bool",
        flag="--llm-eval-allow-code-execution",
        ini="llm_eval_allow_code_execution",
        env="LLM_EVAL_SANDBOX",
        default=False,
    ),
    Option(
        "llm_eval_allow_weak_sandbox",
        "where namespaces are unavailable, let python_unit_testing run code in the WEAK "
        "audit-hook fallback (same user; the code can defeat the hooks) instead of refusing",
        kind="bool",
        flag="--llm-eval-allow-weak-sandbox",
        ini="llm_eval_allow_weak_sandbox",
        ini_help="let python_unit_testing use the weak audit-hook fallback where namespaces are "
        "unavailable",
        env="LLM_EVAL_ALLOW_WEAK_SANDBOX",
        default=False,
    ),
    Option(
        "llm_eval_otel_events",
        "emit each score as an OpenTelemetry GenAI evaluation event (gen_ai.evaluation.result) "
        "on the process's LoggerProvider, linked to the test's llm_eval_trace when it has one "
        "(needs the otel extra)",
        kind="bool",
        flag="--llm-eval-otel-events",
        ini="llm_eval_otel_events",
        ini_help="emit each score as an OpenTelemetry GenAI evaluation event (like "
        "--llm-eval-otel-events)",
        default=False,
    ),
    # -- ini only
    Option(
        "llm_eval_api_key_env",
        "name of the environment variable holding the judge's API key (default OPENAI_API_KEY; "
        "AZURE_OPENAI_API_KEY with the azure judge provider)",
        ini="llm_eval_api_key_env",
    ),
    Option(
        "llm_eval_prices",
        "per-model prices, one 'MODEL INPUT_USD OUTPUT_USD [CACHED_INPUT_USD]' line each (USD per "
        "million tokens; cached prompt tokens cost INPUT_USD when CACHED_INPUT_USD is not given)",
        kind="lines",
        ini="llm_eval_prices",
        default=MappingProxyType({}),
        parse=parse_prices,
        samples=("m 1 2", "m 3 4", "m 5 6"),
    ),
    Option(
        "llm_eval_judges",
        "globs of judge spec files (.json/.yaml) to load at session start, relative to the ini "
        "file's directory; their judges are usable by name in every test",
        kind="lines",
        ini="llm_eval_judges",
        default=(),
    ),
    # -- gates and verdicts
    Option(
        "llm_eval_gate",
        "a suite gate for the test functions matching FILE::TEST (fnmatch, as in node ids), "
        "e.g. 'tests/test_qa.py::test_qa:factuality:min_mean=0.7,confidence=0.95'; "
        "repeatable; adds to the tests' own llm_eval_gate markers",
        kind="lines",
        flag="--llm-eval-gate",
        ini="llm_eval_gates",
        ini_help="suite gates, one FILE::TEST:SCORER:KEY=VALUE,... per line (like --llm-eval-gate)",
        metavar="FILE::TEST:SCORER:KEY=VALUE,...",
        default=(),
        adds_to_ini=True,
    ),
    Option(
        "llm_eval_strict_cases",
        "in gated tests, fail each case that misses its bound too (default: the gate decides)",
        kind="bool",
        flag="--llm-eval-strict-cases",
        ini="llm_eval_strict_cases",
        ini_help="in gated tests, fail each case that misses its bound too",
        default=False,
    ),
    Option(
        "llm_eval_repeat",
        "run each dataset case N times (samples) unless its llm_eval_dataset marker sets repeat=",
        kind="int",
        flag="--llm-eval-repeat",
        ini="llm_eval_repeat",
        ini_help="samples per dataset case (like --llm-eval-repeat)",
        metavar="N",
        default=1,
        check=_at_least(1),
    ),
    Option(
        "llm_eval_inconclusive",
        "exit status of a run whose gates are inconclusive at their confidence: fail "
        "(default) or pass",
        kind="choice",
        flag="--llm-eval-inconclusive",
        ini="llm_eval_inconclusive",
        ini_help="fail (default) or pass: what an inconclusive gate does",
        choices=VERDICT_POLICIES,
        default="fail",
    ),
    Option(
        "llm_eval_skipped",
        "exit status of a run with a gate whose every selected case was skipped (it judged "
        "nothing): fail (default) or pass",
        kind="choice",
        flag="--llm-eval-skipped",
        ini="llm_eval_skipped",
        ini_help="fail (default) or pass: what a gate whose every case was skipped does",
        choices=VERDICT_POLICIES,
        default="fail",
    ),
    Option(
        "llm_eval_accept_incomparable",
        "with --llm-eval-fail-on-regression: compare SCORER with the baseline although it was "
        "measured with another instrument (judge model, version, prompt, options, code), or "
        "accept that it is missing from this run; 'all' for every scorer; repeatable",
        kind="lines",
        flag="--llm-eval-accept-incomparable",
        ini="llm_eval_accept_incomparable",
        ini_help="scorers whose changed instrument the baseline comparison accepts (one per "
        "line; 'all')",
        metavar="SCORER",
        default=(),
    ),
    # -- the terminal
    Option(
        "llm_eval_no_progress",
        "no live status line (cases done, in flight, judge calls, spend, ETA) on a terminal",
        kind="bool",
        flag="--llm-eval-no-progress",
        ini="llm_eval_no_progress",
        ini_help="no live status line on a terminal (like --llm-eval-no-progress)",
        default=False,
    ),
    # -- the environment only
    Option(
        "openai_api_key",
        "the judge's API key (ini llm_eval_api_key_env names another variable)",
        env="OPENAI_API_KEY",
        azure_env="AZURE_OPENAI_API_KEY",
        secret=True,
    ),
    Option(
        "openai_api_version",
        "Azure OpenAI's api-version (with the azure judge provider)",
        env="OPENAI_API_VERSION",
    ),
    Option(
        "llm_eval_redis_password",
        "the Redis password, when the cache URL has none",
        env="LLM_EVAL_REDIS_PASSWORD",
        secret=True,
    ),
    Option(
        "llm_eval_cache_hmac_key",
        "the secret that signs every Redis entry written and checks every one read",
        env="LLM_EVAL_CACHE_HMAC_KEY",
        secret=True,
    ),
    Option(
        "github_step_summary",
        "the file GitHub Actions appends a step's summary to (set by the runner); "
        "--llm-eval-markdown's summary is appended to it too",
        env="GITHUB_STEP_SUMMARY",
    ),
    Option(
        # read by scorers/sandbox.py itself (value 1): that file is also the sandboxed child's
        # program and imports nothing of the package
        "llm_eval_sandbox_force_weak",
        "testing: 1 makes Linux namespaces count as unavailable, so the sandbox's weak mode can "
        "be tried on a machine that has them",
        env="LLM_EVAL_SANDBOX_FORCE_WEAK",
    ),
)

#: the rows by name
OPTION: Mapping[str, Option] = MappingProxyType({o.name: o for o in OPTIONS})


# -- the rule ----------------------------------------------------------------------------------


def _blank(option: Option, value: Any) -> bool:
    """Not given: absent, an empty list, or blank text (only empty text for a secret)."""
    if value is None:
        return True
    if isinstance(value, (list, tuple)):
        return not value
    if isinstance(value, str):
        return value == "" if option.secret else not value.strip()
    return False


def _from_text(option: Option, text: str, source: str) -> Any:
    if option.parse is not None:
        return option.parse(text)
    if option.kind == "bool":
        # the environment's word for on; pytest reads ini booleans itself
        return text in ENV_TRUE
    if option.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    if option.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    if option.kind == "choice" and text not in option.choices:
        raise ValueError(f"{text!r} is not one of {', '.join(option.choices)}")
    return text


def _convert(option: Option, raw: Any, source: str) -> Any:
    try:
        if isinstance(raw, str):
            # the spaces around a value are not part of it (a secret's are: byte for byte)
            value = _from_text(option, raw if option.secret else raw.strip(), source)
        elif option.kind == "lines":
            texts = [str(v).strip() for v in raw if not _blank(option, v)]
            value = option.parse(texts) if option.parse is not None else tuple(texts)
        else:  # already typed: argparse's int or float, a flag's const, pytest's ini boolean
            value = raw
        if option.kind == "choice" and value not in option.choices:
            raise ValueError(f"{value!r} is not one of {', '.join(option.choices)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        problem = option.check(value) if option.check is not None else None
    except ValueError as exc:
        raise OptionError(option, str(exc), source) from None
    if problem is not None:
        raise OptionError(option, problem, source)
    return value


def resolve(
    option: Option,
    *,
    cli: Any = None,
    ini: Any = None,
    environ: Mapping[str, str] | None = None,
    azure: bool = False,
    env_name: str | None = None,
) -> Resolved:
    """The value of ``option``: ``cli`` (what argparse made of the flag; None: not given), else
    ``ini`` (pytest's value of the ini key; None: not set), else its environment twin in
    ``environ`` (``azure``: the row's Azure twin; ``env_name``: another variable named by the
    user), else its default. Raises :class:`OptionError` for a bad value."""
    if option.adds_to_ini:
        items = tuple(
            (option.flag or "", str(v).strip()) for v in (cli or ()) if not _blank(option, v)
        )
        items += tuple(
            (f"ini {option.ini}", str(v).strip()) for v in (ini or ()) if not _blank(option, v)
        )
        if not items:
            return Resolved(option, option.default, DEFAULT)
        value = _convert(option, [text for _where, text in items], items[0][0])
        return Resolved(option, value, items[0][0], [t for _w, t in items], items)
    given: list[tuple[str, Any]] = []
    if option.flag is not None:
        given.append((option.flag, cli))
    if option.ini is not None:
        given.append((f"ini {option.ini}", ini))
    name = env_name or (option.azure_env if azure and option.azure_env else option.env)
    if name is not None and environ is not None:
        given.append((f"env {name}", environ.get(name)))
    for source, raw in given:
        if _blank(option, raw):
            continue
        items = (
            tuple((source, str(v).strip()) for v in raw if not _blank(option, v))
            if option.kind == "lines"
            else ()
        )
        return Resolved(option, _convert(option, raw, source), source, raw, items)
    return Resolved(option, option.default, DEFAULT)


def env_value(
    name: str,
    environ: Mapping[str, str] | None = None,
    *,
    azure: bool = False,
    env_name: str | None = None,
) -> Any:
    """An option's value from the environment alone (``os.environ`` unless ``environ``), else
    its default: how code outside pytest reads the table."""
    env = os.environ if environ is None else environ
    return resolve(OPTION[name], environ=env, azure=azure, env_name=env_name).value
