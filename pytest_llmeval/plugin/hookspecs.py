"""pytest-llmeval's own hooks, for conftest files and other plugins.

Each docstring says on which side it runs (every process, or the xdist controller only) and
carries a ready-to-paste ``conftest.py`` example.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmeval.engine.registry import ScorerRegistry


@pytest.hookspec(historic=True)
def pytest_llmeval_register_scorers(registry: ScorerRegistry, config: pytest.Config) -> None:
    """Register custom scorers. Runs on every process (controller and each xdist worker), once
    per plugin or conftest, also for conftest files found later during collection.

    Example ``conftest.py``::

        import pytest_llmeval


        class Politeness(pytest_llmeval.Scorer):
            name = "politeness"
            required_inputs = ("output",)

            def compute(self, inputs, ctx):
                polite = any(w in inputs["output"].lower() for w in ("please", "thank"))
                return pytest_llmeval.Score(value=1.0 if polite else 0.0)


        def pytest_llmeval_register_scorers(registry, config):
            registry.register(Politeness)
    """


@pytest.hookspec(firstresult=True)
def pytest_llmeval_make_cache(config: pytest.Config, directory: Any, mode: str) -> Any | None:
    """Return the result store to use instead of the built-in SQLite one (an object with
    ``get(key) -> dict | None``, ``put(key, scorer, value)`` and ``close()``), or None to keep
    the default. Runs on every process; mode is use, replay or refresh (never off). The store
    need not handle the mode: the plugin wraps it (refresh never reads it, replay never writes
    it and makes a judge scorer's miss an error), so it only has to get and put.

    Example ``conftest.py`` (an in-memory store, e.g. for hermetic tests)::

        class MemoryStore:
            def __init__(self):
                self.data = {}

            def get(self, key):
                return self.data.get(key)

            def put(self, key, scorer, value):
                self.data[key] = value

            def close(self):
                pass


        def pytest_llmeval_make_cache(config, directory, mode):
            return MemoryStore()
    """


def pytest_llmeval_update_json_report(config: pytest.Config, report: dict[str, Any]) -> None:
    """Change the JSON report (``--llm-eval-report``) before it is written: add run metadata,
    drop fields. Runs on the xdist controller (or the only process) only.

    Example ``conftest.py``::

        import os


        def pytest_llmeval_update_json_report(config, report):
            report["run"]["build"] = os.environ.get("BUILD_ID")
    """
