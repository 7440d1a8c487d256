"""Async judged scorings read and write the result store on the store thread (issue 24): a slow
store call must not stop the other cases on the case loop, and what is stored is unchanged."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from pytest_llmeval import Score, score_async
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.engine.scoring import Scorer


class Judged(Scorer):
    """A judge scorer stand-in (it calls no judge): the output's length over ten."""

    name = "judged_store_thread"
    uses_judge = True
    required_inputs = ("output",)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=len(inputs["output"]) / 10)


class WaitingStore:
    """A store whose every call waits until the case loop has run a step of another coroutine
    (``loop_ran``): made on the case loop, that call would wait for itself (and give up)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        self.loop_ran = threading.Event()
        self.calls: list[tuple[str, str, bool]] = []

    def _wait(self, what: str, key: str) -> None:
        self.calls.append((what, threading.current_thread().name, self.loop_ran.wait(10)))

    def get(self, key: str) -> dict[str, Any] | None:
        self._wait("get", key)
        return self.data.get(key)

    def put(self, key: str, scorer: str, value: Mapping[str, Any]) -> None:
        self._wait("put", key)
        self.data[key] = dict(value)

    def close(self) -> None:
        pass


def test_a_waiting_store_call_does_not_stop_the_case_loop(tmp_path: Any) -> None:
    store = WaitingStore()
    ctx = ScoringContext(Settings(cache_dir=tmp_path / "c"), cache=store)
    prev = set_context(ctx)

    async def other_case() -> None:
        await asyncio.sleep(0)
        store.loop_ran.set()

    async def main() -> tuple[Score, Score]:
        ticking = asyncio.ensure_future(other_case())
        first = await score_async(Judged, output="abc")
        await ticking
        again = await score_async(Judged, output="abc")
        return first, again

    try:
        first, again = asyncio.run(main())
    finally:
        set_context(prev)
        ctx.close()
    assert (first.value, first.cached) == (0.3, False)
    assert (again.value, again.cached) == (0.3, True)  # stored, then read back
    assert [c[0] for c in store.calls] == ["get", "put", "get"]
    # every call ran on the store thread, none waited in vain
    assert all(name.startswith("llm-eval-store") and ran for _, name, ran in store.calls), (
        store.calls
    )
    assert ctx._store_pools == {}  # closed with the context


def test_the_store_thread_keeps_the_callers_context_and_order(tmp_path: Any) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("v", default="unset")
    ctx = ScoringContext(Settings(cache_dir=tmp_path / "c"))
    seen: list[str] = []
    var.set("case-7")
    futures = [ctx.store_call(lambda i=i: seen.append(f"{var.get()}:{i}")) for i in range(5)]
    for f in futures:
        f.result(timeout=10)
    ctx.close()
    assert seen == [f"case-7:{i}" for i in range(5)]  # one caller: in order
