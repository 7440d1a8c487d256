from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judges import judge_test_settings

#: test data, not tests (tests/data/compat/project is a user project that tests copy and run)
collect_ignore = ["data"]

#: fixtures shared by a layer's unit tests and their integration tests (tests/helpers)
pytest_plugins = [
    "options_support",
    "ratelimit_support",
    "redis_store_support",
    "report_html_support",
]


# -- process-wide state every test starts without ----------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What one test may leave in the process for the next, cleared before and after each: the
    parameters judge models were learned to refuse, the judge-step memo of custom judges. And a
    run of the suite inside GitHub Actions must not write the job's own step summary."""
    for name in (
        "GITHUB_STEP_SUMMARY",
        "LLM_EVAL_MARKDOWN",
        "LLM_EVAL_MARKDOWN_STEP_SUMMARY",
        "MD_SIDE",
        "LLM_EVAL_SHARD",
    ):
        monkeypatch.delenv(name, raising=False)
    _forget()
    yield
    _forget()


def _forget() -> None:
    import sys

    # only modules a test imported (the suite does not import the judge to clear it)
    params = sys.modules.get("pytest_llmeval.judge.params")
    if params is not None:
        params.forget_learned()
    custom = sys.modules.get("pytest_llmeval.scorers.custom")
    if custom is not None:
        custom._steps_memo.clear()


@pytest.fixture
def ctx(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A scoring context with the cache off, installed as the active one for the test."""
    from pytest_llmeval.core.settings import Settings
    from pytest_llmeval.engine.context import ScoringContext, set_context

    c = ScoringContext(Settings(cache_mode="off", cache_dir=tmp_path / ".llmeval"))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


# -- judge fixtures (the scripted OpenAI-compatible server) ------------------------------------


@pytest.fixture
def judge_server():  # type: ignore[no-untyped-def]
    """A running :class:`pytest_llmeval.testing.OpenAITestServer` (127.0.0.1, ephemeral port).

    Queue replies with ``judge_server.enqueue(text(...), tool_call({...}), error(429, ...))``;
    read what was sent in ``judge_server.requests``.
    """
    from pytest_llmeval.testing import OpenAITestServer

    with OpenAITestServer() as server:
        yield server


@pytest.fixture
def judge_ctx(judge_server, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A ScoringContext whose judge is ``judge_server`` (see :func:`judge_test_settings`),
    installed as the active context for the test."""
    from pytest_llmeval.engine.context import ScoringContext, set_context

    c = ScoringContext(judge_test_settings(judge_server.base_url, tmp_path))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


# The real local judge (llama.cpp): local_judge_url, local_judge_ctx (tests/helpers/realjudge.py).
from realjudge import local_judge_ctx, local_judge_model_path, local_judge_url  # noqa: E402, F401


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Any]:
    """A redis-server without a password (tests/helpers/redis_server.py)."""
    from redis_server import start

    yield from start()


@pytest.fixture(scope="session")
def redis_server_auth() -> Iterator[Any]:
    """A redis-server with ``--requirepass`` (tests/helpers/redis_server.py)."""
    from redis_server import start

    yield from start(password="s3cret-Pa55-xyz")


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background of a non-interactive shell (``cmd &``) inherits Ctrl-C
    ignored, and Python then installs no Ctrl-C handler, in it nor in the pytest runs its tests
    start (an ignored signal stays ignored across exec): the Ctrl-C tests would wait for an
    interrupt that never comes. Give this process what a terminal gives; a caught signal is
    reset to the default across exec, so the runs it starts get Python's own handler."""
    if (
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        and threading.current_thread() is threading.main_thread()
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: what every pytest run a test starts is given: langchain-core (the LangGraph tests, dev extra)
#: requires langsmith, whose pytest plugin loads in every pytest process and imports its client
#: (1.3 s of CPU per run here, hundreds of runs in this suite); no test of ours uses it
INNER_ADDOPTS = "-p no:langsmith_plugin"


@pytest.fixture(autouse=True)
def _inner_runs_without_langsmith(request: pytest.FixtureRequest) -> None:
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # it clears PYTEST_ADDOPTS first
        request.getfixturevalue("monkeypatch").setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)
