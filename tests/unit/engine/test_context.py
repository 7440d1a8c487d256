from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from pytest_llmeval.core import aio as _aio
from pytest_llmeval.core.scores import Usage
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext, configure, get_context, set_context


def test_run_executes_on_one_background_loop_thread() -> None:
    ctx = ScoringContext(Settings(cache_mode="off"))

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert ctx.run(where()) == "pytest-llmeval-loop"
    assert _aio.background_loop() is _aio.background_loop()


def test_run_reraises_the_coroutine_error() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        ScoringContext(Settings(cache_mode="off")).run(boom())


def test_run_works_inside_an_async_test_loop() -> None:
    ctx = ScoringContext(Settings(cache_mode="off"))

    async def inner() -> int:
        return 7

    async def outer() -> int:
        # a sync scorer called from async code: must not deadlock or need nest_asyncio
        return await asyncio.to_thread(ctx.run, inner())

    assert asyncio.run(outer()) == 7


def test_ledger_totals_across_threads() -> None:
    ctx = ScoringContext(Settings(cache_mode="off"))
    threads = [
        threading.Thread(target=lambda: ctx.ledger.add(Usage(1, 2, 1, 0.001))) for _ in range(50)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ctx.ledger.total.calls == 50 and ctx.ledger.spent_usd == pytest.approx(0.05)


def test_cache_off_and_lazy_cache(tmp_path: Path) -> None:
    assert ScoringContext(Settings(cache_mode="off")).result_cache() is None
    ctx = ScoringContext(Settings(cache_dir=tmp_path / "c"))
    assert not (tmp_path / "c").exists()  # nothing is opened until a lookup
    cache = ctx.result_cache()
    assert cache is not None and ctx.result_cache() is cache


def test_configure_installs_a_context() -> None:
    prev = get_context()
    try:
        ctx = configure(cache_mode="off")
        assert get_context() is ctx and ctx.settings.cache_mode == "off"
    finally:
        set_context(prev)
