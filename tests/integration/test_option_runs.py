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

import re
from typing import Any

import pytest
from option_surface import surface
from options_support import HOUSE

from pytest_llmeval.core.options import (
    DEFAULT,
    OPTION,
    OPTIONS,
    Option,
)

#: what changed on purpose, (dest, attribute) -> (house, now): the significance level is checked
#: by the table's parser at configure time instead of by an argparse type, so its text is
#: checked like every other option's (exit status 4 either way, the same message)
INTENDED = {("llm_eval_fail_on_regression", "type"): ("_alpha", None)}


def _house_s(items: list[dict[str, Any]], key: str, known: set[str]) -> list[dict[str, Any]]:
    """The entries of ``items`` that house had: an option added since is a row more, not a
    change (it is checked like every row by the tests below)."""
    return [item for item in items if item[key] in known]


def test_flags_and_ini_keys_are_those_of_house(pytester: pytest.Pytester) -> None:
    now = surface(pytester.parseconfig())
    assert now["group"] == HOUSE["group"]
    options = _house_s(now["options"], "dest", {o["dest"] for o in HOUSE["options"]})
    assert [o["flags"] for o in options] == [o["flags"] for o in HOUSE["options"]]
    for before, after in zip(HOUSE["options"], options, strict=True):
        for key, was in before.items():
            expected = INTENDED.get((before["dest"], key), (was, was))
            assert (was, after[key]) == expected, (before["dest"], key)
    assert _house_s(now["ini"], "name", {i["name"] for i in HOUSE["ini"]}) == HOUSE["ini"]
    added = {o["dest"] for o in now["options"]} - {o["dest"] for o in HOUSE["options"]}
    assert added <= set(OPTION), added  # and anything new is a row of the table


def test_help_lists_the_flags_and_ini_keys_in_their_order(pytester: pytest.Pytester) -> None:
    text = pytester.runpytest("--help").stdout.str()
    flags = {o["flags"][0] for o in HOUSE["options"]}
    found = [m.group(1) for m in re.finditer(r"^  (--llm-eval[a-z-]*)", text, re.MULTILINE)]
    assert [f for f in found if f in flags] == [o["flags"][0] for o in HOUSE["options"]]
    assert set(found) == {o.flag for o in OPTIONS if o.flag}
    names = {i["name"] for i in HOUSE["ini"]}
    inis = [m.group(1) for m in re.finditer(r"^  (llm_eval[a-z_]*) \(", text, re.MULTILINE)]
    assert [i for i in inis if i in names] == [i["name"] for i in HOUSE["ini"]]
    assert set(inis) == {o.ini for o in OPTIONS if o.ini}


def test_a_run_without_options_has_the_default_settings(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch
) -> None:
    from pytest_llmeval.core.settings import Settings
    from pytest_llmeval.plugin.options import build_settings

    config = pytester.parseconfig()
    assert build_settings(config) == Settings(cache_dir=config.rootpath / ".llmeval")
    assert Settings.from_env({}) == Settings()


def _samples(option: Option) -> tuple[str, str, str]:
    """Three valid texts, for the command line, the ini file and the environment."""
    if option.samples:
        return option.samples[0], option.samples[1], option.samples[2]
    if option.kind in ("int", "float"):
        return "3", "4", "5"
    if option.kind == "choice":
        others = [c for c in option.choices if c != option.default]
        return others[0], others[-1] if len(others) > 1 else option.default, others[0]
    if option.kind == "bool":
        return "", "false", "1"  # the flag, an ini false, the environment's on
    return f"cli-{option.name}", f"ini-{option.name}", f"env-{option.name}"


def _expected(option: Option, text: str, source: str) -> Any:
    if option.kind == "bool":
        return source == "cli" or text in ("1", "true")
    if option.kind == "lines":
        return option.parse([text]) if option.parse else (text,)
    if option.parse is not None:
        return option.parse(text)
    if option.kind == "int":
        return int(text)
    if option.kind == "float":
        return float(text)
    return text


def _arg(option: Option, text: str) -> str:
    assert option.flag is not None
    return option.flag if option.kind == "bool" else f"{option.flag}={text}"


SCENARIOS = {
    "the command line beats the ini file and the environment": ("cli", "ini", "env"),
    "the ini file beats the environment": ("ini", "env"),
    "the environment beats the default": ("env",),
    "the default": (),
}


@pytest.mark.parametrize("levels", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_every_option_resolves_cli_then_ini_then_env_then_default(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch, levels: tuple[str, ...]
) -> None:
    """Every row of the table given at each of ``levels`` (pytest parses the command line and
    the ini file), read back through the pytest layer: the highest level given wins."""
    from pytest_llmeval.plugin.options import resolved

    args, ini = [], ["[pytest]"]
    for option in OPTIONS:
        cli_text, ini_text, env_text = _samples(option)
        if "cli" in levels and option.flag:
            args.append(_arg(option, cli_text))
        if "ini" in levels and option.ini:
            ini.append(f"{option.ini} = {ini_text}")
        if "env" in levels and option.env:
            clean_env.setenv(option.env, env_text)
    pytester.makeini("\n".join(ini) + "\n")
    config = pytester.parseconfig(*args)
    wrong = []
    for option in OPTIONS:
        texts = dict(zip(("cli", "ini", "env"), _samples(option), strict=True))
        spelled = {"cli": option.flag, "ini": option.ini, "env": option.env}
        winner = next((level for level in levels if spelled[level]), None)
        got = resolved(config, option.name)
        if winner is None:
            want: tuple[Any, str] = (option.default, DEFAULT)
        else:
            source = {"cli": option.flag, "ini": f"ini {option.ini}", "env": f"env {option.env}"}
            want = (_expected(option, texts[winner], winner), source[winner] or "")
            if option.adds_to_ini and winner == "cli" and "ini" in levels:
                want = ((texts["cli"], texts["ini"]), want[1])  # the gates of both
        if (got.value, got.source) != want:
            wrong.append(f"{option.name}: {got.value!r} from {got.source}, want {want}")
    assert not wrong, "\n".join(wrong)


def test_the_azure_twin_and_a_renamed_key_variable(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch
) -> None:
    from pytest_llmeval.plugin.options import build_settings

    clean_env.setenv("OPENAI_BASE_URL", "http://openai.example/v1")
    clean_env.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    clean_env.setenv("OPENAI_API_KEY", "sk-openai")
    clean_env.setenv("AZURE_OPENAI_API_KEY", "sk-azure")
    clean_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    clean_env.setenv("MY_JUDGE_KEY", "sk-mine")
    openai = build_settings(pytester.parseconfig()).judge
    assert (openai.base_url, openai.api_key and openai.api_key.get(), openai.api_version) == (
        "http://openai.example/v1",
        "sk-openai",
        None,
    )
    azure = build_settings(pytester.parseconfig("--llm-eval-judge-provider=azure")).judge
    assert (azure.base_url, azure.api_key and azure.api_key.get(), azure.api_version) == (
        "https://res.openai.azure.com",
        "sk-azure",
        "2024-10-21",
    )
    pytester.makeini("[pytest]\nllm_eval_api_key_env = MY_JUDGE_KEY\n")
    for provider in ("openai", "azure"):
        config = pytester.parseconfig(f"--llm-eval-judge-provider={provider}")
        key = build_settings(config).judge.api_key
        assert key is not None and key.get() == "sk-mine"


def test_a_blank_value_is_no_value_at_every_level(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch
) -> None:
    """``--opt=$UNSET`` falls through to the ini file, a blank ini value to the environment, a
    blank variable to the default; a secret is used byte for byte (only empty is blank)."""
    from pytest_llmeval.plugin.options import build_settings, resolved

    pytester.makeini("[pytest]\nllm_eval_judge_model = ini-model\nllm_eval_cache_dir =\n")
    clean_env.setenv("LLM_EVAL_CACHE_DIR", "env-cache")
    clean_env.setenv("LLM_EVAL_RPM", "   ")
    clean_env.setenv("LLM_EVAL_REDIS_PASSWORD", " pass ")
    config = pytester.parseconfig("--llm-eval-judge-model=", "--llm-eval-shard=")
    settings = build_settings(config)
    assert settings.judge.model == "ini-model"
    assert settings.cache_dir == config.rootpath / "env-cache"
    assert not settings.rate_limits.active
    assert not resolved(config, "llm_eval_shard").given
    assert resolved(config, "llm_eval_redis_password").value == " pass "
    clean_env.setenv("LLM_EVAL_REDIS_PASSWORD", "")
    assert resolved(config, "llm_eval_redis_password").value is None


def test_an_ini_false_beats_the_environment_s_on(
    pytester: pytest.Pytester, clean_env: pytest.MonkeyPatch
) -> None:
    """An opt-in the ini file turns off explicitly stays off whatever the environment says
    (it was on: an ini false could not be told from an unset key)."""
    from pytest_llmeval.plugin.options import build_settings

    clean_env.setenv("LLM_EVAL_SANDBOX", "1")
    clean_env.setenv("LLM_EVAL_ALLOW_WEAK_SANDBOX", "yes")
    assert build_settings(pytester.parseconfig()).sandbox_enabled is True
    pytester.makeini(
        "[pytest]\nllm_eval_allow_code_execution = false\nllm_eval_allow_weak_sandbox = false\n"
    )
    settings = build_settings(pytester.parseconfig())
    assert (settings.sandbox_enabled, settings.sandbox_allow_weak) == (False, False)
    settings = build_settings(pytester.parseconfig("--llm-eval-allow-code-execution"))
    assert (settings.sandbox_enabled, settings.sandbox_allow_weak) == (True, False)


def test_gate_values_add_to_the_ini_s_and_keep_their_sources(
    pytester: pytest.Pytester,
) -> None:
    from pytest_llmeval.plugin.options import resolved, value

    pytester.makeini(
        "[pytest]\nllm_eval_gates =\n    a.py::t:s:min_mean=1\n"
        "llm_eval_accept_incomparable =\n    ini-scorer\n"
    )
    config = pytester.parseconfig(
        "--llm-eval-gate=b.py::t:s:min_mean=1",
        "--llm-eval-gate= ",
        "--llm-eval-accept-incomparable=x",
    )
    assert resolved(config, "llm_eval_gate").items == (
        ("--llm-eval-gate", "b.py::t:s:min_mean=1"),
        ("ini llm_eval_gates", "a.py::t:s:min_mean=1"),
    )
    assert value(config, "llm_eval_accept_incomparable") == ("x",)  # the command line's only


@pytest.mark.parametrize(
    ("args", "ini", "env", "message"),
    [
        pytest.param(
            ["--llm-eval-timeout=nan"],
            "",
            {},
            "--llm-eval-timeout / ini llm_eval_timeout: nan is not a finite number "
            "(given by --llm-eval-timeout)",
            id="nan-timeout",
        ),
        pytest.param(
            [],
            "llm_eval_budget = inf",
            {},
            "--llm-eval-budget / ini llm_eval_budget: inf is not a finite number "
            "(given by ini llm_eval_budget)",
            id="infinite-budget",
        ),
        pytest.param(
            [],
            "llm_eval_concurrency = lots",
            {},
            "--llm-eval-concurrency / ini llm_eval_concurrency: 'lots' is not a whole number "
            "(given by ini llm_eval_concurrency)",
            id="not-a-number",
        ),
        pytest.param(
            ["--llm-eval-max-tries=0"],
            "",
            {},
            "--llm-eval-max-tries / ini llm_eval_max_tries: must be positive, not 0 "
            "(given by --llm-eval-max-tries)",
            id="not-positive",
        ),
        pytest.param(
            [],
            "llm_eval = maybe",
            {},
            "--llm-eval / ini llm_eval: invalid truth value 'maybe' (given by ini llm_eval)",
            id="not-a-boolean",
        ),
        pytest.param(
            [],
            "",
            {"LLM_EVAL_SHARD": "two/3"},
            "--llm-eval-shard / ini llm_eval_shard / env LLM_EVAL_SHARD: 'two/3' is not I/N "
            "(e.g. 2/3: the second of three shards) (given by env LLM_EVAL_SHARD)",
            id="env-shard",
        ),
        pytest.param(
            ["--llm-eval-fail-on-regression=2", "--llm-eval-baseline=last"],
            "",
            {},
            "--llm-eval-fail-on-regression: '2' must be strictly between 0 and 1",
            id="alpha",
        ),
        pytest.param(
            [],
            "",
            {"LLM_EVAL_JUDGE_PROVIDER": "azur"},
            "--llm-eval-judge-provider / ini llm_eval_judge_provider / env "
            "LLM_EVAL_JUDGE_PROVIDER: 'azur' is not one of openai, azure "
            "(given by env LLM_EVAL_JUDGE_PROVIDER)",
            id="provider",
        ),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_its_option_and_source(
    pytester: pytest.Pytester,
    clean_env: pytest.MonkeyPatch,
    args: list[str],
    ini: str,
    env: dict[str, str],
    message: str,
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    for name, text in env.items():
        clean_env.setenv(name, text)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: {message}"
