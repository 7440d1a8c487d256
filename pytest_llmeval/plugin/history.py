"""The run history as a pytest plugin: what its options say (``--llm-eval-history``,
``--llm-eval-baseline``, ``--llm-eval-fail-on-regression``: rows of the option table), the
baseline resolved at configure time among the runs saved before this one, which tests a run
selected, and the scores as JUnit properties. The saved runs themselves are
:mod:`pytest_llmeval.stores.history`'s."""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.core.errors import BaselineError
from pytest_llmeval.plugin.keys import recorder_key
from pytest_llmeval.plugin.options import (
    _enabled,
    _is_worker,
    build_settings,
    host_option,
    value,
)
from pytest_llmeval.stores.history import (
    BaselineChoice,
    resolve_baseline,
    runs_dir,
)


def selection_of(config: pytest.Config) -> dict[str, Any]:
    """Which tests a run selected, as it was asked: the paths and node ids given (relative to
    the rootdir), -k, -m, --deselect, --lf and --sw. ``last`` only compares runs of the same
    selection: a run of one test must not become the baseline of the whole suite."""
    root = config.rootpath
    here = Path(config.invocation_params.dir)
    args = []
    for arg in config.args:
        path, sep, rest = str(arg).partition("::")
        target = Path(path) if Path(path).is_absolute() else here / path
        try:
            rel = os.path.relpath(target.resolve(), root).replace(os.sep, "/")
        except ValueError:  # another drive
            rel = str(target)
        args.append(rel + sep + rest)
    return {
        "args": sorted(args),
        "keyword": str(host_option(config, "keyword", "") or ""),
        "markexpr": str(host_option(config, "markexpr", "") or ""),
        "deselect": sorted(str(d) for d in (host_option(config, "deselect") or [])),
        "last_failed": bool(host_option(config, "lf", False)),
        "stepwise": bool(
            host_option(config, "stepwise", False) or host_option(config, "stepwise_skip", False)
        ),
    }


def _keep(config: pytest.Config) -> int:
    if value(config, "llm_eval_no_history"):
        return 0
    return int(value(config, "llm_eval_history"))


@dataclass(frozen=True)
class HistorySettings:
    """What the controller needs of this module's options."""

    keep: int
    alpha: float | None
    baseline: BaselineChoice | None


history_key = pytest.StashKey[HistorySettings]()


def pytest_configure(config: pytest.Config) -> None:
    if host_option(config, "xmlpath") and not config.pluginmanager.has_plugin(_JUNIT):
        config.pluginmanager.register(JUnitScores(), _JUNIT)
    if _is_worker(config):
        return
    keep = _keep(config)
    alpha = value(config, "llm_eval_fail_on_regression")
    spec = value(config, "llm_eval_baseline")
    if alpha is not None and spec is None:
        raise pytest.UsageError(
            "--llm-eval-fail-on-regression needs a baseline: add --llm-eval-baseline=last "
            "(or a saved run's number, or a JSON report)"
        )
    baseline = None
    if spec is not None and _enabled(config):
        # Resolved now: "last" is chosen among the runs saved before this one.
        try:
            baseline = resolve_baseline(
                str(spec),
                runs_dir(cache_dir(config)),
                Path(config.invocation_params.dir),
                selection_of(config),
            )
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[history_key] = HistorySettings(keep, alpha, baseline)


def cache_dir(config: pytest.Config) -> Path:
    from pytest_llmeval.plugin.keys import context_key

    ctx = config.stash.get(context_key, None)
    if ctx is not None:
        return Path(ctx.settings.cache_dir)
    return Path(build_settings(config).cache_dir)


_JUNIT = "llm-eval-junit-scores"


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(_JUNIT)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)


class JUnitScores:
    """Any process, registered only with ``--junitxml`` (no hook call per report otherwise)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        return _with_junit_scores(item, call, report)


def _with_junit_scores(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> pytest.TestReport:
    """With ``--junitxml``, the test's scores as ``llm_eval:<scorer>`` properties
    (``llm_eval:<scorer>#<i>`` for the i-th further assertion of one scorer), each with its bound
    as ``llm_eval:<scorer>:bound``, on the teardown report that junitxml reads."""
    if call.when != "teardown":
        return report
    recorder = item.stash.get(recorder_key, None)
    if recorder is None or not recorder.records:
        return report
    from pytest_llmeval.core.model import Run
    from pytest_llmeval.report.junit import JUnitProperties
    from pytest_llmeval.report.view import RunView

    # one test's records: junitxml reads properties per test, from this report
    JUnitProperties(report).write(RunView(Run(records=tuple(recorder.records))))
    return report
