"""One background event loop per process, so sync code (tests, ``score()``) can run judge
coroutines while the judge client, its connection pool and its concurrency limit live on for
the whole run. Works whether or not the caller already runs an event loop (async tests).

Also how the main thread waits for other threads so that Ctrl-C always stops it
(:data:`ctrl_c`, :func:`wait_done`, :func:`wait_event`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from types import FrameType, TracebackType
from typing import Any, TypeVar


def _signal_functions() -> tuple[Callable[[int], Any], Callable[[int, Any], Any]]:
    """getsignal and signal: the C functions under signal.py, whose wrappers convert handlers
    to enums (20-40 us a call; the main thread installs and removes its SIGINT handler around
    each piece of its bookkeeping)."""
    try:
        raw = importlib.import_module("_signal")
        return raw.getsignal, raw.signal
    except (ImportError, AttributeError):  # pragma: no cover - another Python
        return signal.getsignal, signal.signal


_getsignal, _setsignal = _signal_functions()

T = TypeVar("T")

#: How long the main thread blocks at most before it looks again for a Ctrl-C (see ctrl_c).
SLICE = 0.1

_Handler = Callable[[int, "FrameType | None"], Any]


class _CtrlC:
    """Ctrl-C in the main thread, kept out of the plugin's own thread bookkeeping.

    Python runs a signal handler in the main thread between two bytecodes, wherever that
    thread is, and the default SIGINT handler raises KeyboardInterrupt right there. Under load
    the thread is descheduled anywhere, so that is anywhere: between taking a lock and the
    ``try`` that gives it back (a lock left taken: the run hangs), between giving one back and
    noting it (given back twice: an INTERNALERROR), or inside the standard library's own lock
    juggling (``concurrent.futures.wait`` leaves a future's lock taken and the thread that
    completes it freezes; ``Condition.wait`` turns the interrupt into "RuntimeError: cannot
    release un-acquired lock", which fails the test and the run goes on).

    Inside ``with ctrl_c:`` (main thread only; it nests) the SIGINT handler only notes the
    Ctrl-C; the previous handler (pytest's default raises KeyboardInterrupt) is called for it
    when the outermost block ends, or earlier at a :meth:`checkpoint`, a point the caller
    chose because nothing is half done there. Outside those blocks the handler is the one
    that was there: user code (fixtures, hooks) and pytest's own phases see SIGINT as usual.
    A SIGINT ignored (SIG_IGN) or left to the OS (SIG_DFL) is not touched.

    A Ctrl-C that does not interrupt the main thread's blocking call (the signal was taken by
    another thread, ``_thread.interrupt_main()``) only runs its handler once that thread runs
    Python code again: so the main thread never blocks for longer than :data:`SLICE` in the
    waits of this module, and a Ctrl-C noted meanwhile is delivered between two slices.
    """

    def __init__(self) -> None:
        self._main = threading.main_thread().ident
        self._depth = 0
        self._pending: tuple[int, FrameType | None] | None = None
        #: the handler ours stands in for while installed
        self._previous: _Handler | None = None

    def __enter__(self) -> None:
        if threading.get_ident() != self._main:
            return
        if self._depth == 0:
            self._install()
        # (a Ctrl-C that lands here finds ours installed and the depth 0: it is delivered at
        # once, as if it came before the block, and nothing of the block was done yet)
        self._depth += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if threading.get_ident() != self._main:
            return
        self._depth -= 1
        if self._depth == 0:
            self._uninstall()
            self.checkpoint()

    def checkpoint(self) -> None:
        """(main thread) Deliver a Ctrl-C noted meanwhile: usually raises KeyboardInterrupt."""
        pending = self._pending
        if pending is not None and threading.get_ident() == self._main:
            self._pending = None
            self._deliver(*pending)

    @property
    def pending(self) -> bool:
        """A Ctrl-C was noted and not delivered yet."""
        return self._pending is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._depth:
            self._pending = (signum, frame)
            return
        self._deliver(signum, frame)

    def _deliver(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous
        if previous is None:  # uninstalled meanwhile: the handler now in place
            current = _getsignal(signal.SIGINT)
            previous = signal.default_int_handler
            if callable(current) and current != self._handle:
                previous = current
        previous(signum, frame)

    def _install(self) -> None:
        try:
            current = _getsignal(signal.SIGINT)
        except ValueError:  # pragma: no cover - no signals in this interpreter
            return
        if current == self._handle or not callable(current):
            return
        self._previous = current
        try:
            _setsignal(signal.SIGINT, self._handle)
        except ValueError:  # pragma: no cover - not the main interpreter
            self._previous = None

    def _uninstall(self) -> None:
        previous = self._previous
        if previous is None:
            return
        try:
            if _getsignal(signal.SIGINT) == self._handle:
                _setsignal(signal.SIGINT, previous)
        except ValueError:  # pragma: no cover
            pass
        # (another handler installed meanwhile, e.g. by a test, stays: it is not ours to undo)
        self._previous = None


#: The process's Ctrl-C guard (signal handlers are per process).
ctrl_c = _CtrlC()


def _wait(ready: Callable[[float | None], bool], timeout: float | None) -> bool:
    """Block until ``ready(t)`` (which waits at most ``t`` seconds, or without limit for None)
    is true, or ``timeout`` seconds pass; whether it became true. In the main thread it waits
    in slices of at most :data:`SLICE` inside ``ctrl_c``, and a Ctrl-C is delivered (usually
    as KeyboardInterrupt) between two slices, never inside the standard library's waiting."""
    if threading.get_ident() != ctrl_c._main:
        return ready(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    with ctrl_c:
        while True:
            ctrl_c.checkpoint()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return ready(0.0)
            if ready(SLICE if left is None else min(SLICE, left)):
                return True


def wait_done(
    futures: Iterable[concurrent.futures.Future[Any]],
    timeout: float | None = None,
    *,
    every: bool = False,
) -> bool:
    """Wait for the first of ``futures`` to be done (``every``: for all of them), at most
    ``timeout`` seconds; whether it happened. Interruptible, see :func:`_wait`."""
    fs = list(futures)
    when = concurrent.futures.ALL_COMPLETED if every else concurrent.futures.FIRST_COMPLETED

    def ready(t: float | None) -> bool:
        done, not_done = concurrent.futures.wait(fs, t, return_when=when)
        return not not_done if every else bool(done) or not fs

    return _wait(ready, timeout)


def wait_event(event: threading.Event, timeout: float | None = None) -> bool:
    """``event.wait(timeout)``, interruptible, see :func:`_wait`."""
    return _wait(event.wait, timeout)


_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop, started on first use (daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            # (starting a thread waits on an Event: see ctrl_c; and a loop started is kept)
            with ctrl_c:
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
    with ctrl_c:  # not a coroutine started and lost to a Ctrl-C before it is known
        future = asyncio.run_coroutine_threadsafe(_with_values(values, coro), loop)
    try:
        wait_done([future])
    except BaseException:
        # Ctrl-C while waiting: the coroutine (a judge call) stops too, not only its caller
        future.cancel()
        raise
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
