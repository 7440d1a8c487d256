"""One background event loop per process, so sync code (tests, ``score()``) can run judge
coroutines while the judge client, its connection pool and its concurrency limit live on for
the whole run. Works whether or not the caller already runs an event loop (async tests)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop, started on first use (daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="pytest-llmeval-loop", daemon=True
            )
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and wait for its result (re-raising its error).

    The coroutine sees the caller's values of the variables in :data:`PROPAGATED` (e.g. the
    scoring's usage collector); no other context variable crosses (an async library's own
    markers must not)."""
    loop = background_loop()
    if threading.current_thread() is _thread:
        raise RuntimeError("run_sync called from the background loop itself; await instead")
    values = [(var, var.get()) for var in PROPAGATED]
    future = asyncio.run_coroutine_threadsafe(_with_values(values, coro), loop)
    return future.result()


#: Context variables whose caller's value a coroutine run by :func:`run_sync` sees.
PROPAGATED: list[contextvars.ContextVar[Any]] = []


async def _with_values(
    values: list[tuple[contextvars.ContextVar[Any], Any]], coro: Coroutine[Any, Any, T]
) -> T:
    for var, value in values:  # the task runs in its own context copy: these stay local
        var.set(value)
    return await coro


async def run_on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop from a coroutine running on another loop (an async
    test's), without blocking that loop. On the background loop itself it is simply awaited.

    Judge coroutines go through here so that sync tests, ``score_many`` and concurrent async
    cases share one judge client, connection pool and concurrency limit. Cancelling the caller
    cancels the coroutine. The caller's values of :data:`PROPAGATED` cross, as in
    :func:`run_sync`."""
    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    values = [(var, var.get()) for var in PROPAGATED]
    future = asyncio.run_coroutine_threadsafe(_with_values(values, coro), loop)
    return await asyncio.wrap_future(future)


def shutdown() -> None:
    """Stop the background loop (end of session)."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = _thread = None
    if loop is not None and thread is not None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
