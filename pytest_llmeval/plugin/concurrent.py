"""Concurrent dataset cases: the cases of an ``async def`` test marked ``llm_eval_dataset`` run
at once (up to ``concurrency`` of them) on one event loop, each keeping pytest's semantics.

How it works, and why:

- A test whose concurrency is 1 (the default) runs as pytest runs any test: setup, call,
  teardown, one case after the other. Only its body (and its async fixtures) run on the case
  loop, while the main thread waits inside the call phase: pytest's capture, ``caplog``,
  ``capsys`` and ``monkeypatch`` work as usual. Everything below is about concurrency above 1.
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
  phase) go on. Tasks a case creates (``asyncio.gather``, ``create_task``) inherit its context:
  the case loop's task factory gates them the same way (their output is the case's) and
  tracks them; those still running when the case's body ends are cancelled, as
  ``asyncio.run`` and pytest-asyncio do when a test's loop closes.
- During the body ``caplog`` reads a handler of the case's own (records are routed by context
  to the case that emitted them), replayed into the call phase like the output.
- Fixtures that change process-wide state for one test at a time (``monkeypatch``, ``capsys``,
  ``capfd`` and their binary forms) cannot serve cases that overlap: a test that uses them with
  concurrency above 1 is a collection error saying so.
- A body that outlives ``--llm-eval-case-timeout`` is cancelled and is that case's ERROR,
  also when it swallows the cancellation; one that ignores it for 5 more seconds is reported
  and left behind. Async fixtures are bounded by the same timeout.

Why this module is long: running test cases concurrently inside pytest's sequential protocol is one
mechanism (the gate that lends the main thread, the case loop, fixture hand-offs, replaying output
and outcomes, cancellation and Ctrl-C); its invariants span all of it and are documented here
together.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import contextvars
import inspect
import io
import itertools
import logging
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Coroutine, Generator, Iterator
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from pytest_llmeval.core import aio as _aio
from pytest_llmeval.core.aio import ctrl_c
from pytest_llmeval.core.errors import CaseFixtureError, CaseTimeoutError
from pytest_llmeval.core.errors import Skipped as ScoringSkipped
from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.core.slots import SlotWaits
from pytest_llmeval.plugin import pytest_compat as compat
from pytest_llmeval.plugin.identity import closest_mark
from pytest_llmeval.plugin.keys import prepared_recorder_key
from pytest_llmeval.plugin.options import host_option
from pytest_llmeval.plugin.progress import RUNNING_ATTR, SLOT_WAIT_ATTR

if TYPE_CHECKING:
    from pytest_llmeval.plugin.pytest_compat import FixtureDef, SubRequest

__all__ = ["ConcurrentCases", "check_marker", "prepared_recorder_key"]

T = TypeVar("T")

_NO_VALUE = object()

#: After a timeout: how many times (one second apart) a body that goes on is cancelled again
#: before it is reported as stuck and left behind.
_CANCEL_TRIES = 5
#: How long a case's leftover tasks get to finish their cancellation.
_CHILD_GRACE = 2.0

#: Fixtures that change process-wide state for one test at a time: overlapping cases would see
#: each other's changes and undo them in the wrong order (monkeypatch), or fight over the one
#: sys.stdout (capture fixtures).
_ONE_AT_A_TIME = {
    "monkeypatch": (
        "changes process-wide state (environment variables, attributes, sys.path): cases in "
        "flight at once would see each other's changes, and undo them in the wrong order "
        "(a change can outlive the test). Make the change once for all cases in a fixture of "
        "broader scope (e.g. a module-scoped fixture using `with pytest.MonkeyPatch.context() "
        "as mp:`), or run the cases one at a time (concurrency=1)"
    ),
    "capsys": (
        "captures the process's one sys.stdout, which cases in flight at once share. Each "
        "case's output is captured separately already (shown in its report); to assert on it, "
        "run the cases one at a time (concurrency=1)"
    ),
}
_ONE_AT_A_TIME["mocker"] = _ONE_AT_A_TIME["monkeypatch"].replace(
    "(environment variables, attributes, sys.path)", "(pytest-mock's patches of objects)"
)
for _name in ("capsysbinary", "capfd", "capfdbinary"):
    _ONE_AT_A_TIME[_name] = _ONE_AT_A_TIME["capsys"].replace("sys.stdout", "standard output")
del _name


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
    """Collection-time checks of ``llm_eval_dataset(..., concurrency=N)`` (or of the
    concurrency ``--llm-eval-case-concurrency`` gives it)."""
    if "concurrency" not in kwargs:
        runner = metafunc.config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
        default = getattr(runner, "default_concurrency", 1)
        if (
            default > 1
            and inspect.iscoroutinefunction(metafunc.function)
            and _other_async_plugin(metafunc.definition, metafunc.fixturenames) is None
        ):
            problem = _one_at_a_time_fixture(metafunc.definition)
            if problem is not None:
                raise pytest.Collector.CollectError(
                    f"{where}: --llm-eval-case-concurrency={default}: {problem}; give this "
                    "test concurrency=1 on its llm_eval_dataset marker to keep the option for "
                    "the others"
                )
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
    if n > 1:
        problem = _one_at_a_time_fixture(metafunc.definition)
        if problem is not None:
            raise pytest.Collector.CollectError(
                f"{where}: llm_eval_dataset(concurrency={n}): {problem}"
            )


def _one_at_a_time_fixture(node: pytest.Item) -> str | None:
    """The problem with the first fixture of ``_ONE_AT_A_TIME`` this test uses, or None."""
    info = compat.fixture_info(node)
    for name in info.names_closure:
        why = _ONE_AT_A_TIME.get(name)
        if why is None:
            continue
        by = "the test"
        if name not in info.argnames:
            for other, defs in info.name2fixturedefs.items():
                if any(name in getattr(d, "argnames", ()) for d in defs):
                    by = f"fixture {other!r}"
                    break
        return f"the {name!r} fixture (requested by {by}) {why}"
    return None


def _other_async_plugin(node: pytest.Item, fixturenames: list[str]) -> tuple[str, str] | None:
    """(plugin, marker) of another async plugin that runs this test, or None."""
    if node.get_closest_marker("asyncio") is not None:
        return "pytest-asyncio", "@pytest.mark.asyncio"
    if "anyio_backend" in fixturenames:
        return "anyio", "@pytest.mark.anyio"
    return None


def _concurrency_kw(item: pytest.Item) -> int | None:
    mark = closest_mark(item, "llm_eval_dataset")
    if mark is None:
        return None
    value = mark.kwargs.get("concurrency")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _some_concurrency_above_one(items: list[pytest.Item]) -> bool:
    """Whether any ``llm_eval_dataset`` mark that any of ``items`` can see (its own, or one of
    its parents') asks for a concurrency above 1: without one, :func:`_concurrency_kw` is at
    most 1 for every item. Each distinct mark and node is looked at once (a parametrized
    function's items share their function's marks); per item only C passes."""
    own = attrgetter("own_markers")
    marks = list(itertools.chain.from_iterable(map(own, items)))
    parents = list(map(_PARENT_OF, items))
    nodes = dict(zip(map(id, parents), parents, strict=True))
    seen: set[int] = set()
    for node in nodes.values():
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            marks.extend(node.own_markers)
            node = node.parent
    distinct = dict(zip(map(id, marks), marks, strict=True))
    for mark in distinct.values():
        if mark.name == "llm_eval_dataset":
            value = mark.kwargs.get("concurrency")
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return True
    return False


_PARENT_OF = attrgetter("parent")
_OBJ_OF = attrgetter("obj")


def _any_coroutine(items: list[pytest.Item]) -> bool:
    """Whether any of ``items`` is a test function written as a coroutine (the first thing
    :meth:`ConcurrentCases.owns` asks: without one, no item is the runner's), asked once per
    distinct function (object), not once per item."""
    # (only test functions' objects are asked for, as owns() asks: another item's may not be
    # there to ask for)
    tests = itertools.compress(items, map(isinstance, items, itertools.repeat(pytest.Function)))
    functions = list(map(_OBJ_OF, tests))
    distinct = dict(zip(map(id, functions), functions, strict=True))
    return any(map(inspect.iscoroutinefunction, distinct.values()))


_GroupKey = tuple[str, str, tuple[tuple[str, int], ...]]
_group_key_of = pytest.StashKey[_GroupKey]()


def _group_key(item: pytest.Item) -> _GroupKey:
    """The items whose cases may be in flight together: one test function, and the same values
    of its parameters of broader scope than the function (a module-scoped parametrized fixture
    is torn down for its next value: cases of the old value must all be done by then). Asked
    for every look-ahead item each time a case finishes: worked out once per item."""
    key = item.stash.get(_group_key_of, None)
    if key is None:
        key = item.stash[_group_key_of] = _work_out_group_key(item)
    return key


def _work_out_group_key(item: pytest.Item) -> _GroupKey:
    parent = item.parent.nodeid if item.parent is not None else ""
    callspec = getattr(item, "callspec", None)
    broader = compat.broader_scoped_params(callspec) if callspec is not None else ()
    return parent, str(getattr(item, "originalname", item.name)), broader


# -- the gate --------------------------------------------------------------------------------


class _Gate:
    """Mutual exclusion of case steps (case loop) and pytest phases (main thread).

    The main thread blocks to enter (steps are short); the case loop never blocks: a step that
    finds the gate closed waits on an asyncio future that the phase's end resolves.

    Steps pass in the order they came to the gate: one that found it closed waits with a
    ticket, and a step that comes later (even one scheduled before the wake-up, finding the gate
    open) queues behind it. Otherwise which of several identical judged scorings in flight pays
    the judge (see ``ScoringContext.inflight``) depended on thread timing, not case order.

    The main thread's side is kept whole under Ctrl-C (see :data:`_aio.ctrl_c`): a
    KeyboardInterrupt between taking the lock and the ``try`` that gives it back left it taken
    (the cases cancelled by the interrupt waited for it forever, then so did the teardown that
    followed), and one between giving it back and noting so gave it back twice. Taking and
    giving back, with ``held`` saying which, happen inside ``ctrl_c``; ``held`` is what the
    phase's end goes by."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters_lock = threading.Lock()
        #: (ticket, future) of the steps waiting, in ticket order (changed on the case loop)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._tickets = itertools.count()
        #: (case loop) tickets of the steps woken and not back at the gate yet
        self._woken: set[int] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the main thread holds it for a phase (and has not lent it out)
        self.held = False
        #: the main thread holds the lock or is taking it (set before it waits for it): a step
        #: that cannot enter then waits for the wake-up the phase's end sends
        self._main = False
        #: (case loop) a wake-up a waiting step asked for is scheduled and has not run yet
        self._wake_due = False

    def try_enter(self, ticket: int | None = None) -> bool:
        """(case loop) Enter if open and no step that came earlier waits: a step that has not
        waited (``ticket`` None) goes after all that wait or were woken; one that waited, after
        those with earlier tickets (woken ones come back in ticket order)."""
        if ticket is None:
            if self._woken or self._waiters:
                return False
        elif (self._waiters and self._waiters[0][0] < ticket) or (
            self._woken and min(self._woken) < ticket
        ):
            return False
        return self._lock.acquire(blocking=False)

    def leave(self) -> None:
        self._lock.release()

    def ticket(self) -> int:
        """(case loop) A step's place in the queue, kept until it enters."""
        return next(self._tickets)

    def opened(self, ticket: int) -> asyncio.Future[None]:
        """(case loop) A future done once the gate is open again; hand it to :meth:`back`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._waiters_lock:
            bisect.insort(self._waiters, (ticket, fut), key=_ticket_of)
        if not self._main and not self._wake_due and not self._lock.locked():
            # The main thread neither holds the gate nor is taking it, and the lock is free:
            # opened before the append (its wake-up found no waiter), or this step waits only
            # for its turn. Woken on the loop's next round, once the steps woken before it came
            # back (not now: it would not yield); one wake-up scheduled at a time.
            #
            # While the main thread holds or takes the gate, its end wakes the waiters. Asking
            # only the lock (``locked()``) said "open" while the main thread had taken it but
            # not yet the GIL back: each waiting step then woke all of them again, round after
            # round, on a loop that kept the GIL from the main thread (seconds of a spinning
            # case loop in a judged run of 200 cases; issue 24). A lock held with the main
            # thread out (left taken by an exception right after it was taken) wakes nobody:
            # the steps wait, as they would for its release, rather than spin.
            self._wake_due = True
            loop.call_soon(self._wake)
        return fut

    def back(self, ticket: int, fut: asyncio.Future[None]) -> None:
        """(case loop) The step that waited on ``fut`` goes on (woken, or cancelled)."""
        if fut.done() and not fut.cancelled():
            self._woken.discard(ticket)
        else:
            with self._waiters_lock:
                self._waiters = [w for w in self._waiters if w[1] is not fut]

    def _wake(self) -> None:
        self._wake_due = False
        with self._waiters_lock:
            waiters, self._waiters = self._waiters, []
        for ticket, fut in waiters:  # in ticket order: their steps come back in that order
            if not fut.done():
                fut.set_result(None)
                self._woken.add(ticket)

    @contextlib.contextmanager
    def phase(self) -> Iterator[None]:
        """(main thread) Hold the gate for one pytest phase."""
        try:
            with ctrl_c:
                self._take()
                self.held = True
            # (a Ctrl-C noted meanwhile is delivered here, in the try: the finally opens)
            yield
        finally:
            with ctrl_c:
                if self.held:  # not when a Ctrl-C came before it was taken (or taken back)
                    self.held = False
                    self._open()

    @contextlib.contextmanager
    def lent(self) -> Iterator[bool]:
        """(main thread, in a phase) Open the gate while the phase only waits for the case loop
        (an async fixture): a case holding what the fixture needs (a lock, a pool slot) can go
        on. Yields whether it was lent (not when no phase holds it)."""
        lent = False
        try:
            with ctrl_c:
                if self.held:
                    self.held = False
                    self._open()
                    lent = True
            yield lent
        finally:
            if lent:
                with ctrl_c:
                    self._take()
                    self.held = True

    def _take(self) -> None:
        """(main thread, inside ``ctrl_c``) Take the lock once the case step holding it ends.
        A Ctrl-C meanwhile (a step that never ends) is delivered before it is taken."""
        self._main = True  # (before the wait: steps that cannot enter leave the wake-up to us)
        try:
            while not self._lock.acquire(timeout=_aio.SLICE):
                ctrl_c.checkpoint()
        except BaseException:
            self._main = False
            self._wake_waiting()
            raise

    def _open(self) -> None:
        # (out before the release: a step that fails to enter meanwhile waits for the wake-up
        # below, and one that registers after it finds the lock free and wakes itself)
        self._main = False
        try:
            self._lock.release()
        finally:
            self._wake_waiting()

    def _wake_waiting(self) -> None:
        """(main thread) The gate is open to steps again."""
        # Wake the case loop only for steps waiting on the gate: a step that fails to enter
        # after this check registers its waiter and, finding the main thread gone (``_main``
        # was cleared before the check) and the lock free, wakes itself.
        with self._waiters_lock:
            waiting = bool(self._waiters)
        loop = self.loop
        if waiting and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop is closing
                pass


def _ticket_of(waiter: tuple[int, asyncio.Future[None]]) -> int:
    return waiter[0]


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
            ticket: int | None = None
            while not gate.try_enter(ticket):
                if ticket is None:
                    ticket = gate.ticket()
                fut = gate.opened(ticket)
                case.begin_gate_wait()
                try:
                    yield from fut
                except BaseException as exc:  # e.g. cancelled while waiting: the case gets it
                    to_throw = exc
                finally:
                    gate.back(ticket, fut)
                    case.end_gate_wait()
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


def _task_in(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], ctx: contextvars.Context
) -> asyncio.Task[T]:
    """A task running in ``ctx`` itself (Python 3.11+; 3.10: in a copy of it). Made directly,
    not by the loop's task factory."""
    if sys.version_info >= (3, 11):
        return asyncio.Task(coro, loop=loop, context=ctx)
    return ctx.run(asyncio.Task, coro, loop=loop)  # pragma: no cover - Python 3.10


class _InContext:
    """Drive a coroutine one step at a time inside ``ctx`` itself (``ctx.run`` per step): an
    async fixture's setup and teardown, at different times and in different tasks, share one
    Context, so a variable set in one can be reset in the other (on Python 3.10 too, whose
    tasks only take a copy)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], ctx: contextvars.Context) -> None:
        self._coro = coro
        self._ctx = ctx

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, ctx = self._coro, self._ctx
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            try:
                if to_throw is not None:
                    thrown, to_throw = to_throw, None
                    yielded = ctx.run(coro.throw, thrown)
                else:
                    yielded = ctx.run(coro.send, to_send)
            except StopIteration as stop:
                return stop.value
            try:
                to_send = yield yielded
            except BaseException as exc:
                to_throw = exc
                to_send = None


async def _with_context(coro: Coroutine[Any, Any, Any]) -> tuple[Any, contextvars.Context]:
    """``coro``'s value and the context it left (what an async fixture set)."""
    value = await coro
    return value, contextvars.copy_context()


def _reset_all(tokens: list[contextvars.Token[Any]]) -> None:
    for token in reversed(tokens):
        try:
            token.var.reset(token)
        except (ValueError, RuntimeError):  # already reset, or set in another context
            pass


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The case loop's thread. A task that raises SystemExit or KeyboardInterrupt (an async
    fixture, a case's child task) has asyncio let it out of ``run_forever``: the task holds it
    (its awaiter gets it, e.g. the case, whose error it becomes), so the loop just goes on."""
    asyncio.set_event_loop(loop)
    while not loop.is_closed():
        try:
            loop.run_forever()
            return  # stopped
        except BaseException:
            continue


class _ContextExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each call in a copy of the submitter's context (as ``asyncio.to_thread`` does)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)


async def _gated(coro: Coroutine[Any, Any, Any], case: _Case, gate: _Gate) -> Any:
    """``coro`` run as a case's code: gated, its output the case's."""
    return await _Gated(coro, case, gate)


async def _outcome(body: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """(raised, value) of a case's body. Every exception is kept, KeyboardInterrupt and
    SystemExit included (raised in a task they would stop the case loop itself); a
    cancellation stays one."""
    try:
        return False, await body
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return True, exc


_GATED_CODE = _gated.__code__

#: this module's own context variables (not the user's: never handed from fixture to body)
_OWN_VARS: frozenset[contextvars.ContextVar[Any]] = frozenset({_current_case, current_recorder})


def _not_case_code(record: logging.LogRecord) -> bool:
    """A log filter: records of concurrent cases' code are theirs, not a phase's."""
    case = _current_case.get()
    return case is None or not case.gated


class _CaseLogs(logging.Handler):
    """Keeps the log records emitted by a concurrent case's code, replayed into its call phase;
    its ``caplog`` reads them meanwhile."""

    def emit(self, record: logging.LogRecord) -> None:
        case = _current_case.get()
        if case is not None and case.gated:
            case.logs.append(record)
            handler = case.log_handler
            if handler is not None and record.levelno >= handler.level:
                handler.handle(record)


# -- cases ------------------------------------------------------------------------------------


class _Case:
    """One case set up ahead: its reports, its detached pytest state, its running coroutine."""

    def __init__(self, item: pytest.Item, recorder: TestRecorder | None, gated: bool) -> None:
        self.item = item
        self.recorder = recorder
        #: a concurrent case (its code gated, its output and logs its own), not a sequential one
        self.gated = gated
        #: the tasks its code created, tracked until done (cancelled when the body ends)
        self.children: set[asyncio.Task[Any]] = set()
        self.result: Any = None
        self.log_handler: logging.Handler | None = None
        #: context variables its async fixtures set (its body runs with them)
        self.vars: dict[contextvars.ContextVar[Any], Any] = {}
        self.setup_report: pytest.TestReport | None = None
        self.stack_entry: Any = None
        self.fixture_states: list[compat.DetachedFixture] = []
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

        #: (case loop) its tasks waiting for the gate now, and the time it spent so blocked
        self._gate_waits = 0
        self._gate_waited = 0.0
        self._wait_since = 0.0

    @property
    def running(self) -> bool:
        return self.future is not None and not self.future.done()

    def begin_gate_wait(self) -> None:
        if self._gate_waits == 0:
            self._wait_since = time.monotonic()
        self._gate_waits += 1

    def end_gate_wait(self) -> None:
        self._gate_waits -= 1
        if self._gate_waits == 0:
            self._gate_waited += time.monotonic() - self._wait_since

    def blocked_for(self) -> float:
        """Seconds its code spent waiting for pytest's phases of other cases (not counted
        against its timeout: a slow fixture of another case is not this case's hang)."""
        now = time.monotonic() - self._wait_since if self._gate_waits else 0.0
        return self._gate_waited + now


#: fixture function -> "gen" (async generator), "coro" (coroutine) or "" (neither)
_ASYNC_KIND: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


_RUNTIME = "llm-eval-concurrent-case-hooks"


class _CaseHooks:
    """The run-time hooks of :class:`ConcurrentCases`, registered at the end of collection only
    when the process has an async dataset test to run (see its methods of the same names)."""

    def __init__(self, cases: ConcurrentCases) -> None:
        self.cases = cases

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: FixtureDef[Any], request: SubRequest
    ) -> Generator[None, Any, Any]:
        __tracebackhide__ = True
        return (yield from self.cases._fixture_setup(fixturedef, request))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        __tracebackhide__ = True
        return self.cases._runtest_protocol(item, nextitem)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        __tracebackhide__ = True
        self.cases._runtest_teardown(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        __tracebackhide__ = True
        return (yield from self.cases._runtest_logreport(report))

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        __tracebackhide__ = True
        return self.cases._pyfunc_call(pyfuncitem)


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
        self._log_handler: _CaseLogs | None = None
        #: the case of a concurrency-1 test whose body is running (the status line counts it)
        self._sequential: _Case | None = None
        #: bodies that ignored their timeout's cancellation (cancelled again at the end)
        self._stuck: set[asyncio.Task[Any]] = set()
        #: context variables the async fixtures of an item set, for its body
        self._vars: dict[pytest.Item, dict[contextvars.ContextVar[Any], Any]] = {}
        #: tests whose cases are set up one at a time from now on (see CaseFixtureError)
        self._serial: set[_GroupKey] = set()

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
        # (the cheap question first: most tests are not coroutines)
        if not inspect.iscoroutinefunction(item.obj):
            return False
        if closest_mark(item, "llm_eval_dataset") is None:
            return False
        return _other_async_plugin(item, item.fixturenames) is None

    def concurrency(self, item: pytest.Item) -> int:
        return _concurrency_kw(item) or self.default_concurrency

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A test that another async plugin claims only after collection (its auto mode marks
        items late) cannot honour concurrency=N: say so instead of running it one by one."""
        if not _some_concurrency_above_one(items):
            return  # (the usual run: no item asked item by item)
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
        """Ask for as many judge slots as the most concurrent test runs cases at once (a judge
        limit nobody set must not hold its cases back; one the user set is kept, with a
        warning). xdist worker: tell the controller which runs of items are concurrent cases
        (before the worker reports its collection), so that it queues each worker's share at
        once (:mod:`pytest_llmeval.plugin.xdist_sched`)."""
        items = session.items
        # (most runs have no coroutine test at all: then no item is this runner's, and nothing
        # below needs asking item by item)
        some = _any_coroutine(items)
        if some:
            self._want_judge_slots(items)
        manager = self.config.pluginmanager
        if some and any(map(self.owns, items)) and not manager.has_plugin(_RUNTIME):
            # The run-time hooks, only in a process that has concurrent cases to run: every
            # other test's protocol, fixtures and reports go without them.
            manager.register(_CaseHooks(self), _RUNTIME)
        if not hasattr(self.config, "workerinput"):
            return
        from pytest_llmeval.plugin.xdist_sched import write_groups

        write_groups(self.config, self.concurrent_runs(items) if some else [], len(items))

    def _want_judge_slots(self, items: list[pytest.Item]) -> None:
        from pytest_llmeval.plugin.keys import context_key

        ctx = self.config.stash.get(context_key, None)
        if ctx is None:
            return
        most: dict[str, tuple[int, pytest.Item]] = {}
        for item in items:
            if not self.owns(item):
                continue
            n = self.concurrency(item)
            test = item.nodeid.split("[", 1)[0]
            if n > 1 and n > most.get(test, (0, item))[0]:
                most[test] = (n, item)
        explicit = ctx.settings.judge.concurrency
        for test, (n, item) in most.items():
            ctx.ledger.slots.want(n, test)
            if explicit is not None and n > explicit:
                from pytest_llmeval.core.slots import JudgeSlotsWarning
                from pytest_llmeval.plugin.options import concurrency_source

                source = concurrency_source(self.config)
                item.warn(
                    JudgeSlotsWarning(
                        f"{test} runs {n} cases at once, but judge calls are limited to "
                        f"{explicit} in flight per process ({source}): its cases will queue "
                        f"for the judge. Raise the limit to at least {n}, or leave it unset so "
                        "that it follows the test's concurrency."
                    )
                )

    def concurrent_runs(self, items: list[pytest.Item]) -> list[tuple[int, int, int]]:
        """(start, stop, concurrency) of each run of consecutive items of one test whose cases
        run concurrently (concurrency above 1), two items or more. Under ``--dist loadgroup`` a
        test marked ``xdist_group`` is left to its group."""
        grouped = bool(host_option(self.config, "loadgroup", False))
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
                target=_serve, args=(loop,), name="pytest-llmeval-cases", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
            self.gate.loop = loop
            loop.set_task_factory(self._task_factory)
            # run_in_executor's threads run in the caller's context: their log records reach
            # the case that made the call (asyncio.to_thread does this by itself)
            loop.set_default_executor(_ContextExecutor(thread_name_prefix="pytest-llmeval-case"))
            self._log_handler = _CaseLogs()
            logging.getLogger().addHandler(self._log_handler)
        return self._loop

    def _task_factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        """(case loop) A task a case's code creates is the case's: gated like its body when the
        case is concurrent, and tracked (cancelled if still running when the body ends)."""
        context = kwargs.get("context")
        case = context.get(_current_case) if context is not None else _current_case.get()
        if case is not None and case.gated and getattr(coro, "cr_code", None) is not _GATED_CODE:
            coro = _gated(coro, case, self.gate)
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        if case is not None:
            case.children.add(task)
            task.add_done_callback(case.children.discard)
        return task

    def run_fixture(
        self,
        coro: Coroutine[Any, Any, Any],
        name: str = "",
        context: contextvars.Context | None = None,
        abandoned: Callable[[], None] | None = None,
    ) -> Any:
        """(main thread, during a phase) Run an async fixture's coroutine on the case loop,
        bounded by ``--llm-eval-case-timeout``, in ``context`` (its setup and teardown share one,
        so a context variable it sets can be reset at teardown). ``abandoned`` is called when
        the wait ends without its value (Ctrl-C, the timeout), after the coroutine is
        cancelled."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "an async fixture was requested from inside a running concurrent case (e.g. "
                "request.getfixturevalue() in the test body); name it in the test's arguments "
                "so it is set up before the case starts"
            )
        ctx = context if context is not None else contextvars.copy_context()

        async def in_context() -> Any:
            return await _InContext(coro, ctx)

        with ctrl_c:  # (starting the loop's thread waits on an Event; no coroutine lost)
            future = asyncio.run_coroutine_threadsafe(in_context(), self.loop())
        try:
            with self.gate.lent() as lent:
                # the phase's own log handlers keep only the fixture's records meanwhile
                handlers = self._phase_handlers() if lent else []
                for handler in handlers:
                    handler.addFilter(_not_case_code)
                try:
                    done = _aio.wait_done([future], self.timeout)
                finally:
                    for handler in handlers:
                        handler.removeFilter(_not_case_code)
        except BaseException:
            # e.g. KeyboardInterrupt while waiting: the fixture's coroutine stops too
            future.cancel()
            if abandoned is not None:
                abandoned()
            raise
        if not done:
            future.cancel()
            if abandoned is not None:
                abandoned()
            assert self.timeout is not None
            fixture = f"async fixture {name!r}"
            raise CaseTimeoutError(fixture, self.timeout, what="fixture")
        # (its own exception, a TimeoutError included, is the fixture's error as it is)
        return future.result()

    def _refuse_from_a_case(self, name: str) -> None:
        """A fixture set up from a concurrent case's body (``request.getfixturevalue()``):
        pytest's fixture state is per test, and the cases in flight share it."""
        # by context: threads a case starts (to_thread, run_in_executor) carry it too
        case = _current_case.get()
        if case is not None and case.gated:
            raise CaseFixtureError(
                f"{case.item.nodeid}: fixture {name!r} was requested from the body of a case "
                "running concurrently (request.getfixturevalue()): pytest keeps one fixture "
                "state per test, which the cases in flight share. Name the fixture in the "
                "test's arguments (it is then set up before the case starts), or run the cases "
                "one at a time (concurrency=1)"
            )

    def _guard_request(self, item: pytest.Item) -> None:
        """The test's ``request``: getfixturevalue() from the body is refused before pytest's
        machinery runs (it would fail on its own per-test state with a bare AssertionError)."""
        request = compat.item_request(item)
        if not request:
            return
        original = request.getfixturevalue

        def getfixturevalue(argname: str) -> Any:
            self._refuse_from_a_case(argname)
            return original(argname)

        request.getfixturevalue = getfixturevalue

    def _phase_handlers(self) -> list[logging.Handler]:
        return [h for h in logging.getLogger().handlers if h is not self._log_handler]

    def pytest_unconfigure(self) -> None:
        runtime = self.config.pluginmanager.get_plugin(_RUNTIME)
        if runtime is not None:
            self.config.pluginmanager.unregister(runtime)
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        if loop is None or thread is None:
            return
        for task in list(self._stuck):
            loop.call_soon_threadsafe(task.cancel)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()

    # -- async fixtures ----------------------------------------------------------------------

    def _fixture_setup(
        self, fixturedef: FixtureDef[Any], request: SubRequest
    ) -> Generator[None, Any, Any]:
        """Async fixtures (``async def`` with return or yield) of the cases this runner owns run
        on the case loop, where the case's coroutine will use their values. pytest's own setup
        runs them (arguments, caching, finalizers, skips, ``--setup-plan``) through a sync
        stand-in put in place for the call: a value of None is a value like any other."""
        self._refuse_from_a_case(fixturedef.argname)
        func = fixturedef.func
        try:
            kind = _ASYNC_KIND.get(func)
        except TypeError:  # not weakly referenceable (a method-wrapper): not kept
            kind = None
        if kind is None:
            # (asked at every setup of every fixture of the run: the answer is kept per function)
            kind = (
                "gen"
                if inspect.isasyncgenfunction(func)
                else "coro"
                if inspect.iscoroutinefunction(func)
                else ""
            )
            with contextlib.suppress(TypeError):
                _ASYNC_KIND[func] = kind
        if not kind:
            return (yield)
        is_gen = kind == "gen"
        item = compat.request_item(request)
        if not self.owns(item):
            return (yield)
        fixturefunc: Any = compat.resolve_fixture_function(fixturedef, request)
        name = fixturedef.argname
        assert item is not None
        stand_in: Callable[..., Any]

        # Where the context variables this fixture sets go: for a test run one case at a time,
        # and for a fixture of broader scope (shared by the cases), into this thread's context,
        # where later fixtures and the bodies see them, until the fixture's teardown (as
        # pytest-asyncio does); for a function-scoped fixture of concurrent cases, to that
        # case's body only (its neighbours in flight must not see them).
        shared = self.concurrency(item) <= 1 or fixturedef.scope != "function"

        def setup(
            coro: Coroutine[Any, Any, Any],
            ctx: contextvars.Context,
            abandoned: Callable[[], None] | None = None,
        ) -> Any:
            known = self._vars.setdefault(item, {})
            before = dict(ctx.items())
            value, after = self.run_fixture(_with_context(coro), name, ctx, abandoned)
            changed = {
                var: val
                for var, val in after.items()
                if var not in _OWN_VARS and before.get(var, _NO_VALUE) is not val
            }
            if shared and changed:
                tokens = [var.set(val) for var, val in changed.items()]
                request.addfinalizer(lambda: _reset_all(tokens))
            else:
                known.update(changed)
            return value

        def fixture_context() -> contextvars.Context:
            # The fixture's own context: a copy of this one with the context variables the
            # case's earlier async fixtures set.
            ctx = contextvars.copy_context()
            for var, val in self._vars.get(item, {}).items():
                ctx.run(var.set, val)
            return ctx

        if is_gen:

            def stand_in(**kwargs: Any) -> Iterator[Any]:
                agen = fixturefunc(**kwargs)
                ctx = fixture_context()
                handoff = _Handoff(agen, name)
                value = setup(
                    handoff.first_yield(),
                    ctx,
                    lambda: self.run_fixture(handoff.give_up(), name, ctx),
                )
                yield value
                self.run_fixture(_close_agen(agen, name), name, ctx)

        else:

            def stand_in(**kwargs: Any) -> Any:
                return setup(fixturefunc(**kwargs), fixture_context())

        with compat.fixture_function_replaced(fixturedef, stand_in):
            try:
                return (yield)
            except BaseException:
                # SystemExit from the fixture (let out of the case loop, see _serve): pytest
                # caches no result for it, and from 9.1 on would leave its finalizers behind
                compat.hand_uncached_finalizers_to_node(fixturedef, request)
                raise

    # -- the protocol ------------------------------------------------------------------------

    def _runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if not self.owns(item):
            return None
        if self.concurrency(item) <= 1:
            if self.cases:  # (none expected: look-ahead stays within one test)
                self.abandon(list(self.cases.values()))
            return None  # pytest's own protocol; the body runs in pytest_pyfunc_call
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

    def _runtest_teardown(self, item: pytest.Item) -> None:
        self._vars.pop(item, None)  # (a setup that failed before the body took them)

    def in_flight(self) -> int:
        """Cases of this process whose coroutine is running (the live status line's count)."""
        running = sum(1 for c in list(self.cases.values()) if c.running)
        return running + (1 if self._sequential is not None else 0)

    def _runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """xdist worker: tell the controller's status line how many cases are running (set
        before xdist sends the report)."""
        if hasattr(self.config, "workerinput"):
            setattr(report, RUNNING_ATTR, self.in_flight())
            waits = self._slot_waits()
            if waits is not None:
                setattr(report, SLOT_WAIT_ATTR, [round(waits.seconds, 3), waits.limit])
        yield

    def _slot_waits(self) -> SlotWaits | None:
        from pytest_llmeval.plugin.keys import context_key

        ctx = self.config.stash.get(context_key, None)
        return ctx.ledger.slots.waits() if ctx is not None else None

    def _protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        case = self.cases.get(item)
        if case is None:
            case = self._start(item)
        self._fill(item, nextitem)
        while case.running:
            running = [c.future for c in self.cases.values() if c.running and c.future]
            # (a Ctrl-C is raised between two slices of this wait: see _aio.ctrl_c)
            _aio.wait_done(running)
            self._fill(item, nextitem)
        self._finish(case, nextitem)

    def _start(self, item: pytest.Item) -> _Case:
        """Set up ``item`` now (main thread) and start its coroutine on the case loop."""
        call_and_report = compat.call_and_report
        # Run before and torn down (or abandoned): a fresh request, as pytest's own protocol
        # gives an item that runs again (xdist's work stealing sends it back, reruns).
        compat.renew_request(item)
        recorder = self.make_recorder(item)
        case = _Case(item, recorder, gated=True)
        self.cases[item] = case
        loop = self.loop()
        token = current_recorder.set(recorder)
        try:
            used = None
            with self.gate.phase():
                try:
                    case.setup_report = call_and_report(item, "setup", log=False)
                finally:
                    self._detach(case)  # before any case step can see this case's fixtures
                if case.setup_report.passed:
                    used = _one_at_a_time_in_use(item)
                    if used is not None:
                        # undone before any case in flight steps again; and no other case of
                        # this test set up until this one is torn down (two holding it would
                        # undo each other's changes in the wrong order)
                        _undo_at_once(case)
                        self._serial.add(_group_key(item))
        finally:
            current_recorder.reset(token)
        case.vars = self._vars.pop(item, {})
        if case.setup_report.passed:
            self._case_caplog(case)
            self._guard_request(item)
            if used is not None:
                # requested at run time (request.getfixturevalue): collection could not know
                case.error = CaseFixtureError(
                    f"{item.nodeid}: the {used!r} fixture {_ONE_AT_A_TIME[used]}; its body was "
                    "not run"
                )
                case.future = concurrent.futures.Future()
                case.future.set_result(None)
                return case
        if case.setup_report.passed and not host_option(self.config, "setuponly", False):
            function = cast(pytest.Function, item)  # owns() checked it
            fn: Any = function.obj
            funcargs = function.funcargs
            argnames = compat.fixture_info(function).argnames
            try:
                coro = fn(**{name: funcargs[name] for name in argnames})
            except Exception as exc:  # e.g. a signature the fixtures do not fit
                case.error = exc
                case.future = concurrent.futures.Future()
                case.future.set_result(None)
            else:
                with ctrl_c:  # a coroutine started is one abandon() knows of
                    case.coro = coro
                    case.future = asyncio.run_coroutine_threadsafe(self._run(case, coro), loop)
        return case

    def _case_caplog(self, case: _Case) -> None:
        """During a concurrent case's body its ``caplog`` reads a handler of its own (pytest's
        is there only during a phase); the call phase then gets the records replayed."""
        item = case.item
        records = item.stash.get(compat.caplog_records_key, None)
        if records is None:  # the logging plugin is off (-p no:logging)
            return
        handler = compat.LogCaptureHandler()
        level = getattr(self.config.pluginmanager.get_plugin("logging-plugin"), "log_level", None)
        if level is not None:
            handler.setLevel(level)
        records["call"] = handler.records
        item.stash[compat.caplog_handler_key] = handler
        case.log_handler = handler

    async def _run(self, case: _Case, coro: Coroutine[Any, Any, Any]) -> None:
        """(case loop) Run one case's body to its outcome: in a task of its own (made directly,
        not by the task factory: it is the case, not one of its children), with the case's
        recorder and identity in its context."""
        current_recorder.set(case.recorder)
        _current_case.set(case)
        body = _gated(coro, case, self.gate) if case.gated else coro
        ctx = contextvars.copy_context()
        for var, val in case.vars.items():  # set by its async fixtures
            ctx.run(var.set, val)
        case.start = time.time()
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        task = case.task = _task_in(loop, _outcome(body), ctx)
        try:
            await self._outcome_of(case, task)
        finally:
            case.duration = time.perf_counter() - t0
            case.stop = time.time()
            left = [t for t in case.children if not t.done()]
            for child in left:
                child.cancel()
            if left:
                await asyncio.wait(left, timeout=_CHILD_GRACE)
            case.finished.set()

    async def _outcome_of(self, case: _Case, task: asyncio.Task[tuple[bool, Any]]) -> None:
        """Wait for the body (bounded by the case timeout) and set the case's error or result."""
        timeout = self.timeout
        try:
            if timeout is None:
                await asyncio.wait({task})
            else:
                start = time.monotonic()
                while True:
                    left = start + timeout + case.blocked_for() - time.monotonic()
                    if left <= 0:
                        break
                    done, _ = await asyncio.wait({task}, timeout=left)
                    if done:
                        break
                if not task.done():
                    case.timed_out = True
                    for _ in range(_CANCEL_TRIES):
                        task.cancel()
                        done, _ = await asyncio.wait({task}, timeout=1.0)
                        if done:
                            break
        except asyncio.CancelledError:
            task.cancel()  # this runner itself is cancelled (shutdown): the body goes too
            raise
        nodeid = case.item.nodeid
        if not task.done():
            assert timeout is not None
            case.error = CaseTimeoutError(nodeid, timeout, what="stuck")
            self._stuck.add(task)
            return
        if task.cancelled():
            if case.timed_out:
                assert timeout is not None
                case.error = CaseTimeoutError(nodeid, timeout)
            else:
                case.error = asyncio.CancelledError()
            return
        raised, value = task.result()
        if case.timed_out:
            # it swallowed the cancellation, then returned or raised: the timeout is the cause
            assert timeout is not None
            error = CaseTimeoutError(nodeid, timeout)
            if raised:
                error.__context__ = value
            case.error = error
        elif raised:
            case.error = value
        else:
            case.result = value

    def _fill(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Start the next cases of ``item``'s test, in order, while there is room."""
        limit = self.concurrency(item)
        if _group_key(item) in self._serial:
            return
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
            if _group_key(item) in self._serial:
                return

    def _stopping(self, item: pytest.Item) -> bool:
        """No new case once the session is stopping (``-x``, ``--maxfail``), counting the
        failures of finished cases not reported yet."""
        session = item.session
        if session.shouldfail or session.shouldstop:
            return True
        maxfail = int(host_option(self.config, "maxfail", 0) or 0)
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
        indices = compat.worker_queue(self.config)
        if indices is not None:
            # An xdist worker runs the indices the controller sent it, in order.
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

    def _finish(self, case: _Case, nextitem: pytest.Item | None) -> None:
        """Log the case's setup report, hand its outcome to pytest's call phase, tear it down."""
        call_and_report = compat.call_and_report
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

    def _pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """The call phase of a case: for a concurrent one, replay its output and logs into
        pytest's capture, then return or raise its body's outcome; for a sequential one (a test
        of concurrency 1), run its body now on the case loop."""
        __tracebackhide__ = True
        case = self.cases.get(pyfuncitem)
        if case is None:
            if not self.owns(pyfuncitem):
                return None
            case = self._call_sequential(pyfuncitem)
        elif case.future is None:
            return None
        else:
            sys.stdout.write(case.out.getvalue())
            sys.stderr.write(case.err.getvalue())
            for record in case.logs:
                # Through the logger again, so pytest's log capture of this phase keeps it.
                logging.getLogger(record.name).handle(record)
        if case.error is not None:
            _raise(case.error)
        if case.result is not None:
            warnings.warn(
                pytest.PytestReturnNotNoneWarning(
                    f"Test functions should return None, but {pyfuncitem.nodeid} returned "
                    f"{type(case.result)!r}: the value is ignored. Did you mean `assert` "
                    "instead of `return`?"
                ),
                stacklevel=1,
            )
        return True

    def _call_sequential(self, item: pytest.Function) -> _Case:
        """(main thread, call phase) Run a concurrency-1 case's body on the case loop and wait:
        pytest's capture and fixtures apply to it as to any test."""
        fn: Any = item.obj
        funcargs = item.funcargs
        coro = fn(**{name: funcargs[name] for name in compat.fixture_info(item).argnames})
        case = _Case(item, current_recorder.get(), gated=False)
        case.coro = coro
        case.vars = self._vars.pop(item, {})
        self._sequential = case
        try:
            with ctrl_c:  # a coroutine started is one _cancel() knows of
                case.future = asyncio.run_coroutine_threadsafe(self._run(case, coro), self.loop())
            _aio.wait_done([case.future])
            case.future.result()
        except BaseException:
            # KeyboardInterrupt while waiting: cancel the body and let its cleanup run before
            # the fixtures are torn down
            self._cancel(case)
            raise
        finally:
            self._sequential = None
        return case

    def _cancel(self, case: _Case, wait: float = 10.0) -> None:
        """Cancel a running case's body and wait (at most ``wait`` s) for it to finish."""
        deadline = time.monotonic() + wait
        if self._ask_to_cancel(case, deadline):
            _aio.wait_event(case.finished, max(0.0, deadline - time.monotonic()))

    def _ask_to_cancel(self, case: _Case, deadline: float) -> bool:
        """Cancel a case's body without waiting for it; whether there is a cancellation to
        wait for (not when it never started or had finished)."""
        with ctrl_c:
            future, loop = case.future, self._loop
            if future is None or future.done():
                if future is None and case.coro is not None:
                    case.coro.close()  # made, never started: no "never awaited" warning
                return False
            # Not started on the loop yet: cancelling the future keeps it from starting. Once
            # it runs, the future cannot be cancelled and the task (set first thing) is.
            if case.task is None and future.cancel():
                if case.coro is not None:
                    case.coro.close()  # never started: no "never awaited" warning
                return False
        # (a second Ctrl-C while the body's task is awaited ends this wait)
        while case.task is None and not _aio.wait_event(case.finished, 0.01):
            if time.monotonic() > deadline:
                return False
        task = case.task
        if task is not None and loop is not None and not case.finished.is_set():
            with ctrl_c:
                loop.call_soon_threadsafe(task.cancel)
        return task is not None

    # -- detaching pytest's per-item state ---------------------------------------------------

    def _detach(self, case: _Case) -> None:
        with ctrl_c:  # what is taken from pytest's state is kept, or it is never torn down
            self._detach_now(case)

    def _detach_now(self, case: _Case) -> None:
        item = case.item
        case.stack_entry = compat.detach_setup_entry(item)
        for fixturedef in _function_fixturedefs(item):
            detached = compat.detach_fixture(fixturedef)
            if detached is not None:
                case.fixture_states.append(detached)

    def _attach(self, case: _Case) -> None:
        with ctrl_c:
            self._attach_now(case)

    def _attach_now(self, case: _Case) -> None:
        item = case.item
        for detached in case.fixture_states:
            detached.attach()
        case.fixture_states = []
        if case.stack_entry is not None:
            compat.restore_setup_entry(item, case.stack_entry)
            case.stack_entry = None

    def abandon(self, cases: list[_Case]) -> None:
        """Cancel these cases and tear them down without reports (the session stops: ``-x``,
        Ctrl-C; or the case went to another xdist worker)."""
        deadline = time.monotonic() + 10
        cancelled = [c for c in cases if self._ask_to_cancel(c, deadline)]
        for c in cancelled:
            # wait for the coroutine's own cancellation cleanup before its fixtures go
            _aio.wait_event(c.finished, max(0.0, deadline - time.monotonic()))
        for c in cases:
            with ctrl_c:  # its finalizers are taken off pytest's stack: they are run below
                self._attach(c)
                finalizers = compat.take_setup_finalizers(c.item)
            with self.gate.phase():
                while finalizers:
                    fin = finalizers.pop()
                    try:
                        fin()
                    except BaseException:  # a case pytest will not report: nothing to fail
                        pass
            self.cases.pop(c.item, None)
            _forget_request(c.item)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Cases set up ahead whose protocol never came (e.g. taken by another worker).
        xdist worker: hand what it waited for judge slots to the controller's summary."""
        if self.cases:
            self.abandon(list(self.cases.values()))
        output = getattr(self.config, "workeroutput", None)
        waits = self._slot_waits()
        if output is not None and waits is not None:
            from pytest_llmeval.plugin.keys import SLOT_WAITS_KEY

            output[SLOT_WAITS_KEY] = waits.to_json()


def _raise(error: BaseException) -> None:
    """The case's outcome, raised in its call phase."""
    raise error


def _failed_case(case: _Case) -> bool:
    """A finished case whose call will be reported as a failure: an error that is no skip and
    no expected failure (xfail whose condition holds and whose ``raises`` matches), or a
    strict xfail that passed."""
    if case.future is None or not case.future.done() or not case.finished.is_set():
        return False
    error = case.error
    if isinstance(error, (pytest.skip.Exception, pytest.xfail.Exception, ScoringSkipped)):
        return False
    xfailed = compat.evaluate_xfail_marks(case.item)
    if error is None:
        return xfailed is not None and xfailed.strict
    if xfailed is None:
        return True
    raises: Any = xfailed.raises
    if raises is None:
        return False
    if isinstance(raises, (type, tuple)):
        return not isinstance(error, raises)
    matches = getattr(raises, "matches", None)  # pytest.RaisesExc (pytest 9)
    return not (callable(matches) and matches(error))


def _undo_at_once(case: _Case) -> None:
    """Undo the changes of a case's run-time monkeypatch (or pytest-mock) now: the cases in
    flight must not run under them until its teardown (which undoes nothing more)."""
    for detached in case.fixture_states:
        ok, value = detached.value()
        if not ok:
            continue
        undo = {"monkeypatch": "undo", "mocker": "stopall"}.get(detached.argname)
        if undo is not None and callable(getattr(value, undo, None)):
            getattr(value, undo)()


def _one_at_a_time_in_use(item: pytest.Item) -> str | None:
    """The first fixture of ``_ONE_AT_A_TIME`` set up for this case, or None."""
    request = compat.item_request(item)
    names = compat.request_fixture_defs(request) if request else {}
    return next((name for name in names if name in _ONE_AT_A_TIME), None)


def _function_fixturedefs(item: pytest.Item) -> list[Any]:
    seen: dict[int, Any] = {}
    for defs in compat.fixture_info(item).name2fixturedefs.values():
        for fixturedef in defs:
            seen[id(fixturedef)] = fixturedef
    request = compat.item_request(item)
    if request:
        for fixturedef in compat.request_fixture_defs(request).values():
            seen[id(fixturedef)] = fixturedef
    return [fd for fd in seen.values() if getattr(fd, "scope", None) == "function"]


def _forget_request(item: pytest.Item) -> None:
    """As pytest's runtestprotocol does after teardown: the item's fixture values go away."""
    compat.forget_request(item)


class _Handoff:
    """The setup of an async generator fixture, whose value may never reach pytest: the main
    thread stops waiting for it (Ctrl-C, the fixture timeout) as it yields, and pytest, which
    registers the teardown once it has the value, never tears it down."""

    def __init__(self, agen: Any, name: str) -> None:
        self._agen = agen
        self._name = name
        self._task: asyncio.Task[Any] | None = None
        self._yielded = False

    async def first_yield(self) -> Any:
        """(case loop) The fixture's setup: its first yielded value."""
        self._task = asyncio.current_task()
        value = await self._agen.__anext__()
        self._yielded = True
        return value

    async def give_up(self) -> None:
        """(case loop) The value will not reach pytest: stop the setup (it was started before
        this, on the same loop) and, if it yielded all the same, run the teardown."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        if self._yielded:
            await _close_agen(self._agen, self._name)


async def _close_agen(agen: Any, name: str) -> None:
    try:
        await agen.__anext__()
    except StopAsyncIteration:
        return
    raise RuntimeError(f"async fixture {name!r} yielded more than once; yield exactly once")
