"""Results written while Redis was away, pushed at the end of the run (issue 11).

Each process's :class:`~pytest_llmeval.stores.redis_store.TieredStore` notes the keys it stored only
locally while Redis did not answer. An xdist worker hands its keys to the controller in
``workeroutput``; the controller (or the only process) pushes them all once, at the end of the
session, from the local store (shared by the workers of one machine) to Redis with ``SET NX``,
so a result another process or machine already pushed is left alone and nothing is written
twice. The terminal summary says how many were pushed, or that they remain in the local store
and how to push them later (``python -m pytest_llmeval cache push``).
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from pytest_llmeval.core.redaction import MASK
from pytest_llmeval.stores.redis_store import PushOutcome, TieredStore, push_keys

__all__ = ["UNPUSHED_KEY", "RedisOutage"]

#: ``workeroutput`` key: the keys a worker stored only locally while Redis did not answer
UNPUSHED_KEY = "llm_eval_unpushed"


class RedisOutage:
    """Registered on every process of a run with a Redis store (see ``plugin.pytest_configure``)."""

    def __init__(self, config: pytest.Config, store: TieredStore) -> None:
        self.config = config
        self.store = store
        self.from_workers: set[str] = set()
        self.outcome: PushOutcome | None = None

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Worker: hand the unpushed keys to the controller (xdist sends its output after every
        plain hook). Controller or only process: push them all (last, so a conftest hook that
        brings Redis back runs first)."""
        if self.is_worker:
            if self.store.unpushed:
                self.config.workeroutput[UNPUSHED_KEY] = sorted(  # type: ignore[attr-defined]
                    self.store.unpushed
                )
            return
        self.push()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Controller: collect a finished worker's unpushed keys."""
        output = getattr(node, "workeroutput", None) or {}
        keys = output.get(UNPUSHED_KEY)
        if isinstance(keys, list):
            self.from_workers.update(k for k in keys if isinstance(k, str))

    def push(self) -> None:
        """Push every key stored only locally during the run."""
        keys = self.store.unpushed | self.from_workers
        if not keys:
            return
        from pytest_llmeval.stores.cache import ResultCache

        local = self.store.local
        if not isinstance(local, ResultCache):  # pragma: no cover - the plugin makes a ResultCache
            self.outcome = PushOutcome(remaining=len(keys), error="the local store is not SQLite")
            return
        self.outcome = push_keys(local, self.store.remote, keys)
        if self.outcome.error is None:
            self.store.unpushed.clear()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line, problem in self.summary_lines():
            terminalreporter.write_line(line, yellow=problem, bold=problem)

    def summary_lines(self) -> list[tuple[str, bool]]:
        """(line, is a problem) for the terminal summary; none when Redis never went away."""
        out = self.outcome
        if out is None:
            return []
        remote = self.store.remote
        lines: list[tuple[str, bool]] = []
        total = out.pushed + out.present + out.missing + out.remaining
        if out.pushed or out.present:
            text = (
                f"llm-eval: Redis result store {remote.url} did not answer during part of the "
                f"run; {_results(out.pushed)} computed meanwhile pushed to it now"
            )
            if out.present:
                text += f" ({out.present} already there)"
            lines.append((text, False))
        if out.remaining:
            how_many = (
                ("the result" if total == 1 else f"the {total} results")
                if out.remaining == total
                else f"{out.remaining} of the {total} results"
            )
            local = getattr(self.store.local, "directory", None)
            command = ["python", "-m", "pytest_llmeval", "cache", "push"]
            if local is not None:
                command += ["--dir", str(local)]
            command += ["--url", remote.url, "--prefix", remote.prefix]
            # The URL is shown without its secrets: say what goes back in.
            fill_in = (
                f" (put the URL's user-info back where it shows {MASK}, e.g. :PASSWORD)"
                if f"{MASK}@" in remote.url
                else ""
            )
            lines.append(
                (
                    f"llm-eval: Redis result store {remote.url} is still unavailable "
                    f"({out.error}); {how_many} computed while it was away "
                    f"{'remains' if out.remaining == 1 else 'remain'} in the local result cache "
                    f"only; push when it is back: {shlex.join(command)}{fill_in}",
                    True,
                )
            )
        if out.missing:
            lines.append(
                (
                    f"llm-eval: {_results(out.missing)} computed while Redis was away could not "
                    "be read back from the local result cache and were not pushed",
                    True,
                )
            )
        return lines


def _results(n: int) -> str:
    return f"{n} result" + ("" if n == 1 else "s")
