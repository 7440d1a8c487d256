"""Concurrent dataset cases: the cases of an ``async def`` test marked ``llm_eval_dataset`` run
at once (up to ``concurrency`` of them) on one event loop, each keeping pytest's semantics.

How it works, and why:

- Each case stays an ordinary pytest item with its own setup, call and teardown reports, logged
  inside that item's own ``pytest_runtest_protocol`` call, in item order. The terminal, JUnit,
  ``-x``, ``--lf`` and xdist (whose worker checks that a report belongs to the item it is
  running) see nothing unusual. What changes is *when* the work happens: when the protocol of
  a case runs, the next cases of the same test are set up and their coroutines started ahead
  ("look-ahead"), and the protocol then waits for its own coroutine.
- Setup and teardown run in the main thread, one at a time, through pytest's own
  ``call_and_report``. pytest keeps per-run fixture state that assumes one item at a time: the
  ``SetupState`` stack and each function-scoped ``FixtureDef``'s cached value and finalizers.
  After a case's setup that state is *detached* (its stack entry and fixture values are put
  aside) so the next case sets up fresh fixtures, and it is re-attached just before the case's
  teardown. Broader-scoped fixtures are untouched: they are shared as usual.
- The coroutines run on one event loop in a helper thread ("case loop"), each in its own
  context (the per-test recorder is a context variable: records land on the right item).
  The call phase of a case, in the main thread, only hands over the finished coroutine's
  outcome: pytest's ``pytest_runtest_call`` machinery (capture, xfail, reports) is unchanged.
- A gate keeps case code and main-thread phases apart: a case's coroutine advances one step at
  a time with the gate held and ``sys.stdout``/``sys.stderr`` pointing at that case's buffers
  (replayed into its call phase: per-case captured output), and never while pytest is in a
  setup/teardown/call phase in the main thread (whose capture swaps those globals). The case
  loop itself never blocks on the gate, so async fixtures (run on the case loop during a
  phase) go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import io
import logging
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_llmeval.errors import CaseTimeoutError
from pytest_llmeval.progress import RUNNING_ATTR
from pytest_llmeval.records import TestRecorder, current_recorder

if TYPE_CHECKING:
    from _pytest.fixtures import FixtureDef, SubRequest

__all__ = ["ConcurrentCases", "check_marker", "prepared_recorder_key"]

#: The recorder of a case set up ahead of its protocol (the plugin's protocol wrapper reuses it).
prepared_recorder_key = pytest.StashKey[TestRecorder]()

#: The case whose coroutine is running in this context (case loop tasks only).
_current_case: contextvars.ContextVar[_Case | None] = contextvars.ContextVar(
    "pytest_llmeval_case", default=None
)

_OTHER_ASYNC_PLUGIN = (
    "it is also claimed by {who}; pytest-llmeval runs async dataset tests itself. Remove the "
    "test's {marker} marker (or that plugin's auto mode for this test) so its cases can run "
    "concurrently, or drop concurrency= to let {who} run them one by one"
)


def check_marker(metafunc: pytest.Metafunc, kwargs: dict[str, Any], where: str) -> None:
    """Collection-time checks of ``llm_eval_dataset(..., concurrency=N)``."""
    if "concurrency" not in kwargs:
        return
    n = kwargs["concurrency"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset concurrency={n!r} is not a whole number >= 1; give the "
            "number of cases in flight at once, e.g. concurrency=8"
        )
    if not inspect.iscoroutinefunction(metafunc.function):
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset(concurrency={n}) needs an `async def` test. A sync test "
            "body blocks the process, so its cases can never run at once: make the test "
            "`async def` and await your app and `assert_score_async`, or drop concurrency="
        )
    other = _other_async_plugin(metafunc.definition, metafunc.fixturenames)
    if other is not None and n > 1:
        who, marker = other
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset(concurrency={n}): "
            + _OTHER_ASYNC_PLUGIN.format(who=who, marker=marker)
        )


def _other_async_plugin(node: pytest.Item, fixturenames: list[str]) -> tuple[str, str] | None:
    """(plugin, marker) of another async plugin that runs this test, or None."""
    if node.get_closest_marker("asyncio") is not None:
        return "pytest-asyncio", "@pytest.mark.asyncio"
    if "anyio_backend" in fixturenames:
        return "anyio", "@pytest.mark.anyio"
    return None


def _concurrency_kw(item: pytest.Item) -> int | None:
    mark = item.get_closest_marker("llm_eval_dataset")
    if mark is None:
        return None
    value = mark.kwargs.get("concurrency")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _group_key(item: pytest.Item) -> tuple[str, str]:
    parent = item.parent.nodeid if item.parent is not None else ""
    return parent, str(getattr(item, "originalname", item.name))


# -- the gate --------------------------------------------------------------------------------


class _Gate:
    """Mutual exclusion of case steps (case loop) and pytest phases (main thread).

    The main thread blocks to enter (steps are short); the case loop never blocks: a step that
    finds the gate closed waits on an asyncio future that the phase's end resolves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters_lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def try_enter(self) -> bool:
        return self._lock.acquire(blocking=False)

    def leave(self) -> None:
        self._lock.release()

    def opened(self) -> asyncio.Future[None]:
        """(case loop) A future done once the gate is open again."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._waiters_lock:
            self._waiters.append(fut)
        if not self._lock.locked():  # opened between the failed try and the append
            self._wake()
        return fut

    def _wake(self) -> None:
        with self._waiters_lock:
            waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    @contextlib.contextmanager
    def phase(self) -> Iterator[None]:
        """(main thread) Hold the gate for one pytest phase."""
        self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()
            # Wake the case loop only for steps waiting on the gate: a step that fails to enter
            # after this check registers its waiter and, finding the gate open, wakes itself.
            with self._waiters_lock:
                waiting = bool(self._waiters)
            loop = self.loop
            if waiting and loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._wake)
                except RuntimeError:  # the loop is closing
                    pass


class _Gated:
    """Drive a case's coroutine one step at a time, each step with the gate held and the
    case's own stdout/stderr buffers installed."""

    def __init__(self, coro: Coroutine[Any, Any, Any], case: _Case, gate: _Gate) -> None:
        self._coro = coro
        self._case = case
        self._gate = gate

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, case, gate = self._coro, self._case, self._gate
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            while not gate.try_enter():
                try:
                    yield from gate.opened()
                except BaseException as exc:  # e.g. cancelled while waiting: the case gets it
                    to_throw = exc
            out, err = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = case.out, case.err
            try:
                if to_throw is not None:
                    thrown, to_throw = to_throw, None
                    yielded = coro.throw(thrown)
                else:
                    yielded = coro.send(to_send)
            except StopIteration as stop:
                return stop.value
            finally:
                sys.stdout, sys.stderr = out, err
                gate.leave()
            try:
                to_send = yield yielded
            except BaseException as exc:
                to_throw = exc
                to_send = None


class _CaseLogs(logging.Handler):
    """Keeps the log records emitted by a case's coroutine, replayed into its call phase."""

    def emit(self, record: logging.LogRecord) -> None:
        case = _current_case.get()
        if case is not None:
            case.logs.append(record)


# -- cases ------------------------------------------------------------------------------------


class _Case:
    """One case set up ahead: its reports, its detached pytest state, its running coroutine."""

    def __init__(self, item: pytest.Item, recorder: TestRecorder) -> None:
        self.item = item
        self.recorder = recorder
        self.setup_report: pytest.TestReport | None = None
        self.stack_entry: Any = None
        self.fixture_states: list[tuple[Any, Any, list[Callable[[], object]]]] = []
        self.future: concurrent.futures.Future[None] | None = None
        self.coro: Coroutine[Any, Any, Any] | None = None
        self.task: asyncio.Task[Any] | None = None
        #: set once the case's coroutine has really finished (cancellation cleanup included)
        self.finished = threading.Event()
        self.out = io.StringIO()
        self.err = io.StringIO()
        self.logs: list[logging.LogRecord] = []
        self.error: BaseException | None = None
        self.timed_out = False
        self.start = 0.0
        self.stop = 0.0
        self.duration = 0.0

    @property
    def running(self) -> bool:
        return self.future is not None and not self.future.done()


class ConcurrentCases:
    """The per-process runner of async dataset cases (a plugin object, see module docs)."""

    def __init__(
        self,
        config: pytest.Config,
        *,
        make_recorder: Callable[[pytest.Item], TestRecorder],
        default_concurrency: int,
        timeout: float | None,
    ) -> None:
        self.config = config
        self.make_recorder = make_recorder
        self.default_concurrency = default_concurrency
        self.timeout = timeout
        self.gate = _Gate()
        self.cases: dict[pytest.Item, _Case] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._index: dict[pytest.Item, int] | None = None
        self._owned: dict[pytest.Item, bool] = {}
        self._interactor: Any = None
        self._log_handler: _CaseLogs | None = None

    # -- which items -------------------------------------------------------------------------

    def owns(self, item: pytest.Item) -> bool:
        """An async dataset test that no other async plugin claims. (Without ``--llm-eval`` an
        ``llm_eval`` one is a single skipped item: its setup skips it, as usual.)

        Asked for every look-ahead item each time a case finishes, so the answer (fixed once
        collection is over) is kept per item."""
        known = self._owned.get(item)
        if known is None:
            known = self._owned[item] = self._owns(item)
        return known

    def _owns(self, item: pytest.Item) -> bool:
        if not isinstance(item, pytest.Function):
            return False
        if item.get_closest_marker("llm_eval_dataset") is None:
            return False
        if not inspect.iscoroutinefunction(item.obj):
            return False
        return _other_async_plugin(item, item.fixturenames) is None

    def concurrency(self, item: pytest.Item) -> int:
        return _concurrency_kw(item) or self.default_concurrency

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A test that another async plugin claims only after collection (its auto mode marks
        items late) cannot honour concurrency=N: say so instead of running it one by one."""
        for item in items:
            n = _concurrency_kw(item)
            if n is None or n <= 1 or not isinstance(item, pytest.Function):
                continue
            other = _other_async_plugin(item, item.fixturenames)
            if other is not None:
                who, marker = other
                raise pytest.UsageError(
                    f"{item.nodeid}: llm_eval_dataset(concurrency={n}): "
                    + _OTHER_ASYNC_PLUGIN.format(who=who, marker=marker)
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """xdist worker: tell the controller which runs of items are concurrent cases (before
        the worker reports its collection), so that it queues each worker's share at once
        (:mod:`pytest_llmeval.xdist_sched`)."""
        if not hasattr(self.config, "workerinput"):
            return
        from pytest_llmeval.xdist_sched import write_groups

        write_groups(self.config, self.concurrent_runs(session.items), len(session.items))

    def concurrent_runs(self, items: list[pytest.Item]) -> list[tuple[int, int, int]]:
        """(start, stop, concurrency) of each run of consecutive items of one test whose cases
        run concurrently (concurrency above 1), two items or more. Under ``--dist loadgroup`` a
        test marked ``xdist_group`` is left to its group."""
        grouped = bool(self.config.getoption("loadgroup", False))
        runs: list[tuple[int, int, int]] = []
        start = 0
        while start < len(items):
            item = items[start]
            stop = start + 1
            limit = self.concurrency(item) if self.owns(item) else 1
            if limit > 1 and grouped and item.get_closest_marker("xdist_group") is not None:
                limit = 1
            if limit > 1:
                key = _group_key(item)
                while (
                    stop < len(items)
                    and _group_key(items[stop]) == key
                    and self.owns(items[stop])
                    and self.concurrency(items[stop]) == limit
                ):
                    stop += 1
                if stop - start >= 2:
                    runs.append((start, stop, limit))
            start = stop
        return runs

    # -- the case loop -----------------------------------------------------------------------

    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="pytest-llmeval-cases", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
            self.gate.loop = loop
            self._log_handler = _CaseLogs()
            logging.getLogger().addHandler(self._log_handler)
        return self._loop

    def run_fixture(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """(main thread, during a phase) Run an async fixture's coroutine on the case loop."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "an async fixture was requested from inside a running concurrent case (e.g. "
                "request.getfixturevalue() in the test body); name it in the test's arguments "
                "so it is set up before the case starts"
            )
        recorder = current_recorder.get()

        async def with_recorder() -> Any:
            current_recorder.set(recorder)
            return await coro

        return asyncio.run_coroutine_threadsafe(with_recorder(), self.loop()).result()

    def pytest_unconfigure(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()

    # -- async fixtures ----------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: FixtureDef[Any], request: SubRequest) -> Any:
        """Async fixtures (``async def`` with return or yield) of the cases this runner owns run
        on the case loop, where the case's coroutine will use their values."""
        func = fixturedef.func
        is_gen = inspect.isasyncgenfunction(func)
        if not (is_gen or inspect.iscoroutinefunction(func)):
            return None
        item = getattr(request, "_pyfuncitem", None)
        if item is None or not self.owns(item):
            return None
        from _pytest.fixtures import resolve_fixture_function

        kwargs = {name: request.getfixturevalue(name) for name in fixturedef.argnames}
        fixturefunc: Any = resolve_fixture_function(fixturedef, request)
        key = fixturedef.cache_key(request)
        try:
            if is_gen:
                agen = fixturefunc(**kwargs)
                value = self.run_fixture(agen.__anext__())
                name = fixturedef.argname
                request.addfinalizer(lambda: self.run_fixture(_close_agen(agen, name)))
            else:
                value = self.run_fixture(fixturefunc(**kwargs))
        except BaseException as exc:
            if isinstance(exc, pytest.skip.Exception):
                # as pytest does: a skip in a fixture is shown at the test, not the fixture
                exc._use_item_location = True
            fixturedef.cached_result = (None, key, (exc, exc.__traceback__))
            raise
        fixturedef.cached_result = (value, key, None)
        return value

    # -- the protocol ------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if not self.owns(item):
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        try:
            self._protocol(item, nextitem)
        except BaseException:
            # KeyboardInterrupt (or an internal error): cancel what is in flight and tear it
            # down, so pytest can still print its summary and finish the session.
            self.abandon(list(self.cases.values()))
            raise
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def in_flight(self) -> int:
        """Cases of this process whose coroutine is running (the live status line's count)."""
        return sum(1 for c in list(self.cases.values()) if c.running)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """xdist worker: tell the controller's status line how many cases are running (set
        before xdist sends the report)."""
        if hasattr(self.config, "workerinput"):
            setattr(report, RUNNING_ATTR, self.in_flight())
        yield

    def _protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        case = self.cases.get(item)
        if case is None:
            case = self._start(item)
        self._fill(item, nextitem)
        while case.running:
            running = [c.future for c in self.cases.values() if c.running and c.future]
            concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            self._fill(item, nextitem)
        self._finish(case, nextitem)

    def _start(self, item: pytest.Item) -> _Case:
        """Set up ``item`` now (main thread) and start its coroutine on the case loop."""
        from _pytest.runner import call_and_report

        if hasattr(item, "_request") and not item._request:
            # Run before and torn down (or abandoned): a fresh request, as pytest's own protocol
            # gives an item that runs again (xdist's work stealing sends it back, reruns).
            item._initrequest()  # type: ignore[attr-defined]
        recorder = self.make_recorder(item)
        case = _Case(item, recorder)
        self.cases[item] = case
        loop = self.loop()
        token = current_recorder.set(recorder)
        try:
            with self.gate.phase():
                case.setup_report = call_and_report(item, "setup", log=False)
        finally:
            current_recorder.reset(token)
            self._detach(case)
        if case.setup_report.passed and not self.config.getoption("setuponly", False):
            function = cast(pytest.Function, item)  # owns() checked it
            fn: Any = function.obj
            funcargs = function.funcargs
            argnames = function._fixtureinfo.argnames
            try:
                coro = fn(**{name: funcargs[name] for name in argnames})
            except Exception as exc:  # e.g. a signature the fixtures do not fit
                case.error = exc
                case.future = concurrent.futures.Future()
                case.future.set_result(None)
            else:
                case.coro = coro
                case.future = asyncio.run_coroutine_threadsafe(self._run(case, coro), loop)
        return case

    async def _run(self, case: _Case, coro: Coroutine[Any, Any, Any]) -> None:
        """(case loop, its own task and context) Run one case's coroutine to its outcome."""
        current_recorder.set(case.recorder)
        _current_case.set(case)
        task = case.task = asyncio.current_task()
        timer = None
        if self.timeout is not None and task is not None:

            def expire() -> None:
                case.timed_out = True
                task.cancel()

            timer = asyncio.get_running_loop().call_later(self.timeout, expire)
        case.start = time.time()
        t0 = time.perf_counter()
        try:
            await _Gated(coro, case, self.gate)
        except asyncio.CancelledError as exc:
            if case.timed_out:
                assert self.timeout is not None
                case.error = CaseTimeoutError(case.item.nodeid, self.timeout)
            else:
                case.error = exc
        except BaseException as exc:
            case.error = exc
        finally:
            if timer is not None:
                timer.cancel()
            case.duration = time.perf_counter() - t0
            case.stop = time.time()
            case.finished.set()

    def _fill(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Start the next cases of ``item``'s test, in order, while there is room."""
        limit = self.concurrency(item)
        upcoming = self._upcoming(item, nextitem, 2 * limit)
        keep = set(upcoming)
        gone = [c for c in self.cases.values() if c.item is not item and c.item not in keep]
        if gone:  # e.g. taken back by xdist's work stealing: it runs elsewhere
            self.abandon(gone)
        running = sum(1 for c in self.cases.values() if c.running)
        for nxt in upcoming:
            if nxt in self.cases:
                continue
            if running >= limit or len(self.cases) >= 2 * limit or self._stopping(item):
                return
            if self._start(nxt).running:
                running += 1

    def _stopping(self, item: pytest.Item) -> bool:
        """No new case once the session is stopping (``-x``, ``--maxfail``), counting the
        failures of finished cases not reported yet."""
        session = item.session
        if session.shouldfail or session.shouldstop:
            return True
        maxfail = int(self.config.getoption("maxfail", 0) or 0)
        if not maxfail:
            return False
        pending = 0
        for c in self.cases.values():
            rep = c.setup_report
            if (rep is not None and rep.failed) or _failed_case(c):
                pending += 1
        return session.testsfailed + pending >= maxfail

    def _upcoming(
        self, item: pytest.Item, nextitem: pytest.Item | None, most: int
    ) -> list[pytest.Item]:
        """The items this process runs right after ``item``, of the same test, in order."""
        seq = self._queue_after(item, nextitem)
        if nextitem is None or not seq or seq[0] is not nextitem:
            seq = [nextitem] if nextitem is not None else []
        key = _group_key(item)
        out: list[pytest.Item] = []
        for nxt in seq:
            if len(out) >= most or not self.owns(nxt) or _group_key(nxt) != key:
                break
            out.append(nxt)
        return out

    def _queue_after(self, item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.Item]:
        items = item.session.items
        interactor = self._xdist_worker()
        if interactor is not None:
            # An xdist worker runs the indices the controller sent it, in order.
            torun = getattr(interactor, "torun", None)
            indices: list[Any] = [getattr(interactor, "nextitem_index", None)]
            if torun is not None:
                with torun.lock() as queue:
                    indices.extend(queue)
            out = []
            for i in indices:
                if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(items):
                    break
                out.append(items[i])
            return out
        if self._index is None or self._index.get(item) is None:
            self._index = {it: i for i, it in enumerate(items)}
        i = self._index.get(item)
        if i is None or i >= len(items) or items[i] is not item:
            return []
        return list(items[i + 1 : i + 1 + 64])

    def _xdist_worker(self) -> Any:
        if not hasattr(self.config, "workerinput"):
            return None
        if self._interactor is None:
            for plugin in self.config.pluginmanager.get_plugins():
                if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
                    self._interactor = plugin
                    break
        return self._interactor

    def _finish(self, case: _Case, nextitem: pytest.Item | None) -> None:
        """Log the case's setup report, hand its outcome to pytest's call phase, tear it down."""
        from _pytest.runner import call_and_report

        item = case.item
        ihook = item.ihook
        session = item.session
        assert case.setup_report is not None
        ihook.pytest_runtest_logreport(report=case.setup_report)
        self._after_log(item)
        if case.future is not None:
            with self.gate.phase():
                report = call_and_report(item, "call", log=False)
            # The call phase only handed over the outcome: the case's own times are the call's.
            report.start, report.stop, report.duration = case.start, case.stop, case.duration
            ihook.pytest_runtest_logreport(report=report)
            self._after_log(item)
        if session.shouldfail or session.shouldstop:
            nextitem = None
        self._attach(case)
        try:
            with self.gate.phase():
                call_and_report(item, "teardown", log=True, nextitem=nextitem)
        finally:
            del self.cases[item]
            _forget_request(item)

    def _after_log(self, item: pytest.Item) -> None:
        session = item.session
        if session.shouldfail or session.shouldstop:
            self.abandon([c for c in self.cases.values() if c.item is not item])

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """The call phase of a case: replay its output and logs into pytest's capture, then
        return or raise its coroutine's outcome."""
        case = self.cases.get(pyfuncitem)
        if case is None or case.future is None:
            return None
        sys.stdout.write(case.out.getvalue())
        sys.stderr.write(case.err.getvalue())
        for record in case.logs:
            # Through the logger again, so pytest's log capture of this phase keeps it.
            logging.getLogger(record.name).handle(record)
        if case.error is not None:
            raise case.error
        return True

    # -- detaching pytest's per-item state ---------------------------------------------------

    def _detach(self, case: _Case) -> None:
        item = case.item
        stack = item.session._setupstate.stack
        if stack and next(reversed(stack)) is item:
            case.stack_entry = stack.pop(item)
        for fixturedef in _function_fixturedefs(item):
            cached = fixturedef.cached_result
            finalizers = list(fixturedef._finalizers)
            if cached is None and not finalizers:
                continue
            case.fixture_states.append((fixturedef, cached, finalizers))
            fixturedef.cached_result = None
            fixturedef._finalizers.clear()

    def _attach(self, case: _Case) -> None:
        item = case.item
        for fixturedef, cached, finalizers in case.fixture_states:
            fixturedef.cached_result = cached
            fixturedef._finalizers[:0] = finalizers
        case.fixture_states = []
        if case.stack_entry is not None:
            item.session._setupstate.stack[item] = case.stack_entry
            case.stack_entry = None

    def abandon(self, cases: list[_Case]) -> None:
        """Cancel these cases and tear them down without reports (the session stops: ``-x``,
        Ctrl-C; or the case went to another xdist worker)."""
        loop = self._loop
        started = [c for c in cases if c.future is not None and not c.future.done()]
        for c in started:
            assert c.future is not None
            # Not started on the loop yet: cancelling the future keeps it from starting. Once
            # it runs, the future cannot be cancelled and the task (set first thing) is.
            if c.task is None and c.future.cancel():
                if c.coro is not None:
                    c.coro.close()  # never started: no "never awaited" warning
                continue
            while c.task is None and not c.finished.wait(0.01):
                pass
            task = c.task
            if task is not None and loop is not None and not c.finished.is_set():
                loop.call_soon_threadsafe(task.cancel)
        deadline = time.monotonic() + 10
        for c in started:
            # wait for the coroutine's own cancellation cleanup before its fixtures go
            if c.task is not None:
                c.finished.wait(max(0.0, deadline - time.monotonic()))
        for c in cases:
            self._attach(c)
            stack = c.item.session._setupstate.stack
            entry = stack.pop(c.item, None)
            with self.gate.phase():
                while entry is not None and entry[0]:
                    fin = entry[0].pop()
                    try:
                        fin()
                    except BaseException:  # a case pytest will not report: nothing to fail
                        pass
            self.cases.pop(c.item, None)
            _forget_request(c.item)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Cases set up ahead whose protocol never came (e.g. taken by another worker)."""
        if self.cases:
            self.abandon(list(self.cases.values()))


def _failed_case(case: _Case) -> bool:
    """A finished case whose outcome will be a failure (not a skip, not an expected one)."""
    if case.future is None or not case.future.done() or case.error is None:
        return False
    if isinstance(case.error, pytest.skip.Exception):
        return False
    return case.item.get_closest_marker("xfail") is None


def _function_fixturedefs(item: pytest.Item) -> list[Any]:
    seen: dict[int, Any] = {}
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for defs in info.name2fixturedefs.values():
            for fixturedef in defs:
                seen[id(fixturedef)] = fixturedef
    request = getattr(item, "_request", None)
    if request:
        for fixturedef in getattr(request, "_fixture_defs", {}).values():
            seen[id(fixturedef)] = fixturedef
    return [fd for fd in seen.values() if getattr(fd, "scope", None) == "function"]


def _forget_request(item: pytest.Item) -> None:
    """As pytest's runtestprotocol does after teardown: the item's fixture values go away."""
    if hasattr(item, "_request"):
        item._request = False
        item.funcargs = None  # type: ignore[attr-defined]


async def _close_agen(agen: Any, name: str) -> None:
    try:
        await agen.__anext__()
    except StopAsyncIteration:
        return
    raise RuntimeError(f"async fixture {name!r} yielded more than once; yield exactly once")
