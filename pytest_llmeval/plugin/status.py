"""The words a test's report reads under (``ERROR`` for a test the plugin made an error of,
``PASSED (gated miss)`` with -v), asked of every report the terminal logs.

The hook is registered only once a report needs it: the first report flagged as a plugin error
or a gated miss (in the process that made it, or in the xdist controller that received it,
before the terminal logs it). A run whose reports carry neither flag, most runs, never pays for
a hook call on each of its reports."""

from __future__ import annotations

import pytest

from pytest_llmeval.plugin.keys import ERROR_ATTR, GATED_MISS_ATTR

STATUS_PLUGIN = "llm-eval-status"

__all__ = ["STATUS_PLUGIN", "need_status_hooks"]


class _StatusHooks:
    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, str | tuple[str, dict[str, bool]]] | None:
        when = report.when
        if when != "call":
            return None
        attrs = report.__dict__
        if report.failed and attrs.get(ERROR_ATTR):
            return "error", "E", ("ERROR", {"red": True})
        if report.passed and attrs.get(GATED_MISS_ATTR):
            return "passed", "g", ("PASSED (gated miss)", {"yellow": True})
        return None


def need_status_hooks(config: pytest.Config) -> None:
    """Register the status hook (once per config) before a flagged report is logged."""
    manager = config.pluginmanager
    if manager.get_plugin(STATUS_PLUGIN) is None:
        manager.register(_StatusHooks(), STATUS_PLUGIN)
