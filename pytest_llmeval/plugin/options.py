"""The option table (:mod:`pytest_llmeval.core.options`) in pytest: every row registered with
pytest (its flag in the ``llm-eval`` group, its ini key), every value read through the core's
one rule (command line, else ini, else environment, else default) from a ``pytest.Config``, a
bad value a usage error in the core's one format, and the run's settings built from them.

Nothing else in the package calls ``addoption``/``addini``/``getoption``/``getini`` or reads an
``LLM_EVAL_*`` variable (tests/unit/core/test_options.py walks the code to hold it so); pytest's own
options (``--maxfail``, ``--capture``, ...) are read through :func:`host_option`.

Adding an option: a row in the core's table, then ``value(config, "llm_eval_<name>")`` where it
is used (docs/architecture.md shows one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.core.options import OPTION, OPTIONS, Option, OptionError, Resolved, resolve
from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings

__all__ = [
    "build_settings",
    "host_option",
    "register",
    "resolved",
    "value",
]

#: the pytest ini type of each kind of row
_INI_TYPES = {"bool": "bool", "lines": "linelist"}


def _argparse(option: Option) -> dict[str, Any]:
    """The ``addoption`` keywords of a row: a flag is ``store_true`` with None for "not given",
    a list is ``append``, a number is typed by argparse unless the row parses its own text."""
    kwargs: dict[str, Any] = {"dest": option.name, "default": None, "help": option.help}
    if option.kind == "bool":
        kwargs["action"] = "store_true"
    elif option.kind == "lines":
        kwargs.update(action="append", default=[])
    elif option.kind in ("int", "float") and option.parse is None:
        kwargs["type"] = int if option.kind == "int" else float
    if option.kind == "choice" and option.cli_choices:
        kwargs["choices"] = option.choices
    if option.metavar is not None:
        kwargs["metavar"] = option.metavar
    if option.const is not None:
        kwargs.update(nargs="?", const=option.const)
    return kwargs


def register(parser: pytest.Parser) -> None:
    """Every row's flag (in its help group) and ini key, in the table's order."""
    for option in OPTIONS:
        if option.flag is not None:
            parser.getgroup(option.group).addoption(option.flag, **_argparse(option))
        if option.ini is not None:
            kind = _INI_TYPES.get(option.kind, "string")
            # None, not False or "": an ini key that is not set must be told from one set to
            # false or left empty, or it would hide the environment twin below it
            parser.addini(
                option.ini,
                option.ini_help or option.help,
                type=kind,  # type: ignore[arg-type]
                default=[] if kind == "linelist" else None,
            )


def _ini(config: pytest.Config, option: Option) -> Any:
    if option.ini is None:
        return None
    try:
        raw = config.getini(option.ini)
    except ValueError as exc:  # pytest's word on a boolean it cannot read
        raise pytest.UsageError(option.message(str(exc), f"ini {option.ini}")) from None
    if isinstance(raw, str):
        return raw.strip()
    return raw


def resolved(
    config: pytest.Config, name: str, *, azure: bool = False, env_name: str | None = None
) -> Resolved:
    """The value of option ``name`` and where it came from (see :func:`core.options.resolve`);
    a bad value is a usage error."""
    option = OPTION[name]
    cli = config.getoption(option.name, default=None) if option.flag is not None else None
    try:
        return resolve(
            option,
            cli=cli,
            ini=_ini(config, option),
            environ=os.environ,
            azure=azure,
            env_name=env_name,
        )
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def value(
    config: pytest.Config, name: str, *, azure: bool = False, env_name: str | None = None
) -> Any:
    """The value of option ``name``: command line, else ini, else environment, else default."""
    return resolved(config, name, azure=azure, env_name=env_name).value


def host_option(config: pytest.Config, name: str, default: Any = None) -> Any:
    """One of pytest's own options (or a plugin's: xdist's ``numprocesses``) by its dest, not
    ours; ``default`` when no plugin defines it."""
    return config.getoption(name, default)


def concurrency_source(config: pytest.Config) -> str:
    """Where the run's judge limit was set (``--llm-eval-concurrency``, ``ini ...``, ``env ...``),
    for the messages about judge slots."""
    given = resolved(config, "llm_eval_concurrency")
    return given.source if given.given else "JudgeSettings(concurrency=...)"


_enabled_key = pytest.StashKey[bool]()


def _enabled(config: pytest.Config) -> bool:
    """Whether evaluations are on (``--llm-eval``, ini or environment), resolved once per run:
    it is asked for every item (a run does not change its mind)."""
    known = config.stash.get(_enabled_key, None)
    if known is None:
        known = config.stash[_enabled_key] = bool(value(config, "llm_eval"))
    return known


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _has_workers(config: pytest.Config) -> bool:
    """This process hands its tests to xdist workers: xdist's own test for its distributed
    session (a distribution mode and nodes to run on; not with ``--collect-only``), read from
    options its ``pytest_cmdline_main`` has settled before any plugin is configured. Without
    workers (``-n 0``, xdist not installed or ``-p no:xdist``) no hook for the workers' reports
    or scheduler is registered: each would be one more call for every report of the run."""
    return (
        not _is_worker(config)
        and host_option(config, "dist", "no") not in ("no", None)
        and bool(host_option(config, "tx"))
        and not host_option(config, "collectonly", False)
    )


def _worker_count(config: pytest.Config) -> int:
    n = host_option(config, "numprocesses")
    if isinstance(n, int):
        return n
    return 0


def build_settings(config: pytest.Config) -> Settings:
    """The run's settings from its options."""
    provider = value(config, "llm_eval_judge_provider")
    azure = provider == "azure"
    key = value(
        config, "openai_api_key", azure=azure, env_name=value(config, "llm_eval_api_key_env")
    )
    judge = JudgeSettings(
        provider=provider,
        api_version=value(config, "openai_api_version") if azure else None,
        base_url=value(config, "llm_eval_judge_base_url", azure=azure),
        model=value(config, "llm_eval_judge_model"),
        api_key=Secret(key) if key else None,
        mode=value(config, "llm_eval_judge_mode"),
        concurrency=value(config, "llm_eval_concurrency"),
        timeout=value(config, "llm_eval_timeout"),
        max_tries=value(config, "llm_eval_max_tries"),
        overall_timeout=value(config, "llm_eval_scoring_timeout"),
        max_reply_chars=value(config, "llm_eval_max_reply_chars"),
    )
    cache_dir = Path(value(config, "llm_eval_cache_dir"))
    if not cache_dir.is_absolute():
        cache_dir = config.rootpath / cache_dir
    return Settings(
        judge=judge,
        cache_dir=cache_dir,
        cache_mode=value(config, "llm_eval_cache"),
        budget_usd=value(config, "llm_eval_budget"),
        prices=dict(value(config, "llm_eval_prices")),
        embedding_model=value(config, "llm_eval_embedding_model"),
        sandbox_enabled=bool(value(config, "llm_eval_allow_code_execution")),
        sandbox_allow_weak=bool(value(config, "llm_eval_allow_weak_sandbox")),
        rate_limits=RateLimits(
            rpm=value(config, "llm_eval_rpm"),
            tpm=value(config, "llm_eval_tpm"),
            burst_s=value(config, "llm_eval_rate_burst"),
        ),
        record_chars=value(config, "llm_eval_record_chars"),
    )
