"""The option table (issue 22, part 2): one table owns every option, one rule reads a value.

- The surface is the one users had: every flag, ini key, environment twin, default, choice,
  help text and their order as on branch ``house`` before the table (tests/data/
  options_house.json, written from pytest's own parser by tests/helpers/option_surface.py).
- The rule holds for every row, generated from the table: the command line beats the ini file,
  which beats the environment, which beats the default (pytest's real parsing, in-process).
- A bad value is a usage error in one format naming every spelling and where it came from.
- Nothing outside core/options.py and plugin/options.py registers or reads an option or an
  ``LLM_EVAL_*`` variable (an AST walk of the package).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from typing import Any

import pytest
from options_support import HOUSE
from paths import PACKAGE

from pytest_llmeval.core.options import (
    OPTION,
    OPTIONS,
    OptionError,
    env_value,
    resolve,
)


def test_environment_twins_are_those_of_house() -> None:
    twins = {o.name: o.env for o in OPTIONS if o.env and (o.flag or o.ini)}
    assert {name: twins.get(name) for name in HOUSE["env"]} == HOUSE["env"]
    # an option house had without a twin has none now (a twin is a new way in: a decision)
    assert not {name for name in twins if name in HOUSE["defaults"]} - set(HOUSE["env"])
    azure = {o.name: o.azure_env for o in OPTIONS if o.azure_env and (o.flag or o.ini)}
    assert azure == HOUSE["azure_env"]
    env_only = {n for o in OPTIONS if not (o.flag or o.ini) for n in (o.env, o.azure_env) if n}
    assert set(HOUSE["env_only"]) <= env_only
    named = {n for o in OPTIONS for n in (o.env, o.azure_env) if n and n.startswith("LLM_EVAL_")}
    assert set(HOUSE["env_names"]) <= named


def test_defaults_are_those_of_house() -> None:
    for name, was in HOUSE["defaults"].items():
        option = OPTION[name]
        default = list(option.default) if option.kind == "lines" else option.default
        assert default == was, name


def test_defaults_agree_with_the_settings_they_feed() -> None:
    """The table's defaults and the dataclasses' are one value each: a run without options
    gets ``Settings()``."""
    from pytest_llmeval.core import model
    from pytest_llmeval.core.limits import RateLimits
    from pytest_llmeval.core.settings import JudgeSettings, Settings
    from pytest_llmeval.stores.history import DEFAULT_KEEP

    judge, settings, limits = JudgeSettings(), Settings(), RateLimits()
    pairs = {
        "llm_eval_judge_model": judge.model,
        "llm_eval_judge_provider": judge.provider,
        "llm_eval_judge_mode": judge.mode,
        "llm_eval_judge_base_url": judge.base_url,
        "llm_eval_concurrency": judge.concurrency,
        "llm_eval_timeout": judge.timeout,
        "llm_eval_max_tries": judge.max_tries,
        "llm_eval_scoring_timeout": judge.overall_timeout,
        "llm_eval_max_reply_chars": judge.max_reply_chars,
        "llm_eval_cache": settings.cache_mode,
        "llm_eval_cache_dir": str(settings.cache_dir),
        "llm_eval_budget": settings.budget_usd,
        "llm_eval_embedding_model": settings.embedding_model,
        "llm_eval_allow_code_execution": settings.sandbox_enabled,
        "llm_eval_allow_weak_sandbox": settings.sandbox_allow_weak,
        "llm_eval_record_chars": settings.record_chars,
        "llm_eval_rpm": limits.rpm,
        "llm_eval_tpm": limits.tpm,
        "llm_eval_rate_burst": limits.burst_s,
        "llm_eval_history": DEFAULT_KEEP,
    }
    assert {name: OPTION[name].default for name in pairs} == pairs
    assert dict(OPTION["llm_eval_prices"].default) == dict(settings.prices)
    assert OPTION["llm_eval_inconclusive"].choices == model.INCONCLUSIVE_POLICIES
    assert OPTION["llm_eval_skipped"].choices == model.SKIPPED_POLICIES


def test_the_sandbox_reads_the_variable_the_table_names() -> None:
    """scorers/sandbox.py reads its testing switch itself (the sandboxed child runs that file
    alone); it must be the table's name."""
    from pytest_llmeval.scorers import sandbox
    from pytest_llmeval.stores import redis_store

    assert OPTION["llm_eval_sandbox_force_weak"].env == sandbox.FORCE_WEAK_ENV
    assert (
        redis_store.HMAC_ENV == OPTION["llm_eval_cache_hmac_key"].env == ("LLM_EVAL_CACHE_HMAC_KEY")
    )


def test_the_error_format_names_every_spelling_and_the_source() -> None:
    rpm = OPTION["llm_eval_rpm"]
    with pytest.raises(OptionError) as info:
        resolve(rpm, environ={"LLM_EVAL_RPM": "-1"})
    assert str(info.value) == (
        "--llm-eval-rpm / ini llm_eval_rpm / env LLM_EVAL_RPM: '-1' is not a positive whole "
        "number per minute (e.g. 500; leave it unset for no limit) (given by env LLM_EVAL_RPM)"
    )
    assert (info.value.option, info.value.source) == (rpm, "env LLM_EVAL_RPM")
    with pytest.raises(ValueError, match=r"^ini llm_eval_prices: 'm 1' must be 'MODEL"):
        resolve(OPTION["llm_eval_prices"], ini=["m 1"])  # one spelling: no "(given by ...)"


def test_a_secret_is_never_shown() -> None:
    key = OPTION["openai_api_key"]
    got = resolve(key, environ={"OPENAI_API_KEY": "sk-live-SECRET"})
    assert got.value == "sk-live-SECRET" and "SECRET" not in repr(got)
    # a secret row can raise no error (an error quotes the value): the table refuses one
    with pytest.raises(ValueError, match="a secret has no parser, check or choices"):
        dataclasses.replace(key, check=lambda v: "no")


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"kind": "list"}, "kind 'list' is not one of"),
        ({"flag": None, "ini": None, "env": None}, "no flag, ini key or environment variable"),
        ({"kind": "choice"}, "choices go with kind 'choice'"),
        ({"flag": "--eval-x"}, "must start with --llm-eval"),
        ({"kind": "choice", "choices": ("a",), "default": "b"}, "default 'b' is not one of"),
        ({"adds_to_ini": True}, "only lines add to the ini's"),
    ],
)
def test_a_malformed_row_is_refused(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        dataclasses.replace(OPTION["llm_eval_report"], **changes)


def test_outside_pytest_the_environment_twins_are_read_through_the_table() -> None:
    assert env_value("llm_eval_cache_url", {"LLM_EVAL_CACHE_URL": "redis://h/0"}) == "redis://h/0"
    assert env_value("llm_eval_cache_url", {}) is None
    assert env_value("llm_eval_rate_burst", {}) == 1.0
    assert math.isclose(env_value("llm_eval_rate_burst", {"LLM_EVAL_RATE_BURST": "2.5"}), 2.5)


#: the two modules that may: the table and its pytest side
OWNERS = ("core/options.py", "plugin/options.py")


#: module -> why it may spell a variable of the table itself
ALLOWED = {
    "scorers/sandbox.py": "it is also the sandboxed child's whole program (python -I sandbox.py) "
    "and may import nothing of the package; test_the_sandbox_reads_the_variable_the_table_names "
    "holds its name to the table's",
}


OPTION_CALLS = ("addoption", "addini", "getoption", "getini")


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def option_reads(source: str) -> list[str]:
    """Where ``source`` registers or reads an option itself: a call of addoption, addini,
    getoption or getini, a read of ``config.option``, or a string that is exactly the name of a
    variable of the table (or starts one: ``"LLM_EVAL_" + name``). A message that mentions a
    variable is fine."""
    env_names = {n for o in OPTIONS for n in (o.env, o.azure_env) if n}
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in OPTION_CALLS:
                found.append((node.lineno, f".{node.func.attr}()"))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "option"
            and _name_of(node.value) == "config"
        ):
            found.append((node.lineno, "config.option"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value in env_names or re.fullmatch(r"LLM_EVAL_[A-Z0-9_]*", node.value))
        ):
            found.append((node.lineno, repr(node.value)))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_the_checker_finds_every_kind_of_read() -> None:
    source = """
import os
parser.addoption("--x")
parser.addini("x", "help")
config.getoption("x")
config.getini("x")
os.environ.get("LLM_EVAL_RPM")
NAME = "OPENAI_BASE_URL"
os.environ["LLM_EVAL_" + suffix]
message = "set LLM_EVAL_SANDBOX=1 or call configure()"
workers = getattr(self.config.option, "numprocesses", None)
"""
    assert option_reads(source) == [
        "line 3: .addoption()",
        "line 4: .addini()",
        "line 5: .getoption()",
        "line 6: .getini()",
        "line 7: 'LLM_EVAL_RPM'",
        "line 8: 'OPENAI_BASE_URL'",
        "line 9: 'LLM_EVAL_'",
        "line 11: config.option",
    ]


def test_no_module_but_the_table_s_reads_an_option() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in OWNERS or module in ALLOWED:
            continue
        wrong += [f"pytest_llmeval/{module}, {r}" for r in option_reads(path.read_text("utf-8"))]
    assert not wrong, (
        "read these through pytest_llmeval.plugin.options (value, host_option) or "
        "core.options.env_value:\n" + "\n".join(wrong)
    )


def test_merge_reads_the_step_summary_switch_through_the_table(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m pytest_llmeval merge`` has no ini file: the switch's environment twin, read
    by the table's rule (any case, spaces dropped), a bad one in the one format."""
    from pytest_llmeval.cli.merge import main as merge_main

    clean_env.setenv("LLM_EVAL_MARKDOWN_STEP_SUMMARY", "maybe")
    with pytest.raises(SystemExit) as info:
        merge_main(["absent.json", "-o", "m.json"])
    assert info.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(
            "error: --llm-eval-markdown-step-summary / ini llm_eval_markdown_step_summary / env "
            "LLM_EVAL_MARKDOWN_STEP_SUMMARY: 'maybe' is not one of on, off (on: also append the "
            "Markdown summary to $GITHUB_STEP_SUMMARY when it is set; off: do not) (given by env "
            "LLM_EVAL_MARKDOWN_STEP_SUMMARY)"
        )
    )
    off = {"LLM_EVAL_MARKDOWN_STEP_SUMMARY": " OFF "}
    assert env_value("llm_eval_markdown_step_summary", off) == "off"
    assert env_value("llm_eval_markdown_step_summary", {"X": "1"}) == "on"
