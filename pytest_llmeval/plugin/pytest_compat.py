"""Every private pytest and pytest-xdist API the plugin relies on, in one place.

pytest gives a plugin no public way to run several items of one test at once (concurrent
dataset cases, :mod:`pytest_llmeval.concurrent`), to read an xdist worker's queue, or to keep
ids and tracebacks exactly as pytest writes them. What we use instead is pytest's own private
code: ``_pytest.*`` functions, and private attributes of pytest objects (``item._request``,
``session._setupstate``, ``fixturedef._finalizers``, ...). It lives here and nowhere else
(``tests/unit/plugin/test_pytest_compat.py`` walks every other module's syntax tree to keep it so),
each entry saying what it wraps, since when pytest has it in that form, and what breaks without it.

The supported ranges are declared in pyproject.toml (``pytest>=8.0,<9.2``,
``pytest-xdist>=3.7,<4``); ``scripts/smoke-oldest.sh`` runs the smoke subset on the oldest
(CI runs it beside the whole suite on the newest). A pytest or xdist without one of these
internals is an error naming it (:class:`PytestInternalsError`), never a silent default: a
default would let concurrent cases share fixtures or a ``caplog`` see nothing, and a test that
should fail pass.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _pytest
import pytest

if TYPE_CHECKING:
    # (typing only: re-exported for the hook signatures of the concurrent runner)
    from _pytest.fixtures import FixtureDef as FixtureDef
    from _pytest.fixtures import SubRequest as SubRequest

__all__ = [
    "SUPPORTED_PYTEST",
    "SUPPORTED_XDIST",
    "DetachedFixture",
    "LogCaptureHandler",
    "PytestInternalsError",
    "ascii_escaped_by_config",
    "broader_scoped_params",
    "call_and_report",
    "caplog_handler_key",
    "caplog_records_key",
    "detach_fixture",
    "detach_setup_entry",
    "evaluate_xfail_marks",
    "fixture_function_replaced",
    "fixture_info",
    "forget_request",
    "hand_uncached_finalizers_to_node",
    "item_request",
    "parametrization_id_parts",
    "pytest_source_dirs",
    "rebuild_traceback",
    "renew_request",
    "request_fixture_defs",
    "request_item",
    "resolve_fixture_function",
    "restore_setup_entry",
    "set_terminal_file",
    "take_setup_finalizers",
    "terminal_file",
    "terminal_writer",
    "wcswidth",
    "worker_queue",
]

#: What pyproject.toml declares (the error messages quote them).
SUPPORTED_PYTEST = ">=8.0,<9.2"
SUPPORTED_XDIST = ">=3.7,<4"


class PytestInternalsError(RuntimeError):
    """This pytest (or pytest-xdist) lacks a private API the plugin relies on."""

    def __init__(self, internal: str, what_breaks: str) -> None:
        self.internal = internal
        super().__init__(
            f"pytest-llmeval relies on {internal}, which {what_breaks}; this pytest "
            f"{pytest.__version__} (pytest-xdist {_xdist_version()}) has none. The supported "
            f"versions are pytest{SUPPORTED_PYTEST} and pytest-xdist{SUPPORTED_XDIST}: install "
            "versions in those ranges, or a pytest-llmeval-suite that supports these"
        )


def _xdist_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pytest-xdist")
    except metadata.PackageNotFoundError:
        return "not installed"


def _internal(module: str, name: str, what_breaks: str) -> Any:
    """``module.name``, or a :class:`PytestInternalsError` naming it (not an ImportError
    traceback from the middle of the plugin's import)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise PytestInternalsError(f"{module}.{name}", what_breaks) from None


_MISSING = object()


def _private(obj: object, name: str, owner: str, what_breaks: str) -> Any:
    """``obj.name`` (a private attribute of a pytest object), or the error naming it."""
    value = getattr(obj, name, _MISSING)
    if value is _MISSING:
        raise PytestInternalsError(f"{owner}.{name}", what_breaks)
    return value


# -- functions of _pytest ------------------------------------------------------------------------

#: ``_pytest.runner.call_and_report(item, when, log=True, **kwds) -> TestReport`` (pytest 3 on,
#: this signature through 9.2): one phase (setup, call, teardown) run with pytest's own capture,
#: exception handling and report. Concurrent cases run their phases through it, each case's at
#: its own time; without it a case's setup could not be reported as pytest reports any setup.
call_and_report: Callable[..., pytest.TestReport] = _internal(
    "_pytest.runner", "call_and_report", "runs a concurrent case's setup, call and teardown"
)

#: ``_pytest.skipping.evaluate_xfail_marks(item) -> Xfail | None`` (pytest 6.0 on; ``Xfail``
#: has ``strict`` and ``raises``): whether a finished case will be reported as a failure, which
#: ``--maxfail`` counts before the case's report is made. Without it ``-x`` stops late or early.
evaluate_xfail_marks: Callable[[pytest.Item], Any] = _internal(
    "_pytest.skipping", "evaluate_xfail_marks", "tells whether a finished case counts as failed"
)

#: ``_pytest.fixtures.resolve_fixture_function(fixturedef, request)`` (pytest 3 on, this
#: signature through 9.2): the fixture function bound to the test's instance, as pytest would
#: call it. An async fixture of a concurrent case runs that on the case loop; without it a
#: fixture method of a test class would get no ``self``.
resolve_fixture_function: Callable[..., Any] = _internal(
    "_pytest.fixtures",
    "resolve_fixture_function",
    "binds an async fixture of a concurrent case as pytest would",
)

#: ``_pytest.logging.LogCaptureHandler`` and the item stash keys ``caplog_handler_key`` and
#: ``caplog_records_key`` (stash keys since pytest 7.0): what the ``caplog`` fixture reads. A
#: concurrent case's body runs outside pytest's phases, so its ``caplog`` gets a handler of its
#: own; without them ``caplog`` would see no record and ``assert not caplog.records`` pass.
LogCaptureHandler: type[Any] = _internal(
    "_pytest.logging", "LogCaptureHandler", "gives a concurrent case's caplog its records"
)
caplog_handler_key: pytest.StashKey[Any] = _internal(
    "_pytest.logging", "caplog_handler_key", "gives a concurrent case's caplog its records"
)
caplog_records_key: pytest.StashKey[dict[str, list[Any]]] = _internal(
    "_pytest.logging", "caplog_records_key", "gives a concurrent case's caplog its records"
)

_ascii_escaped: Callable[[str, pytest.Config | None], str] = _internal(
    "_pytest.python",
    "_ascii_escaped_by_config",
    "writes a parametrization id as pytest writes it (a record's case id)",
)


def ascii_escaped_by_config(text: str, config: pytest.Config) -> str:
    """``_pytest.python._ascii_escaped_by_config`` (pytest 5.0 on): ``text`` as pytest writes it
    into an id (non-ASCII escaped unless the ini option that forfeits that is set). A record's
    case id is cut out of pytest's id with it; a rule of our own that drifted from pytest's
    would give one case two ids (two cases in the statistics, one of them never gated)."""
    return str(_ascii_escaped(text, config))


_wcswidth: Callable[[str], int] = _internal(
    "_pytest._io.wcwidth", "wcswidth", "measures the live status line on the terminal"
)


def wcswidth(text: str) -> int:
    """``_pytest._io.wcwidth.wcswidth`` (pytest 6.0 on): terminal cells ``text`` takes, -1 for a
    control character. The live status line is cut to the terminal's width with it (pytest's
    own measure, so the line and pytest's output agree); without it the line wraps."""
    return int(_wcswidth(text))


def pytest_source_dirs() -> tuple[Path, Path]:
    """The folders of ``pytest`` and of its private ``_pytest`` package (the code lives in the
    latter). A frame there is pytest's, not the user's: an error raised outside user code keeps
    its full traceback instead of one with every frame hidden."""
    return (Path(pytest.__file__).resolve().parent, Path(_pytest.__file__).resolve().parent)


def rebuild_traceback(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """pytest's view of ``excinfo``'s frames rebuilt from its raw (edited) traceback chain:
    ``_pytest._code.code.Traceback(tb)`` (constructor taking a raw traceback since pytest 3),
    reached through the type of ``excinfo.traceback``. Without it pytest, which may have built
    its view already, would show the frames that were unlinked."""
    excinfo.traceback = type(excinfo.traceback)(excinfo.tb)


# -- private attributes of items, requests and parametrizations ---------------------------------


def fixture_info(node: pytest.Item) -> Any:
    """``Function._fixtureinfo`` (``FuncFixtureInfo``: ``argnames``, ``names_closure``,
    ``name2fixturedefs``; also on ``metafunc.definition``), pytest 3 on. The fixtures a test
    uses and which of its own arguments they are: a concurrent case's body is called with
    exactly its argnames, and its function-scoped fixtures are detached after its setup."""
    return _private(
        node, "_fixtureinfo", "Function", "lists the fixtures a concurrent case must detach"
    )


def broader_scoped_params(callspec: Any) -> tuple[tuple[str, int], ...]:
    """(name, index) of the parameters of ``callspec`` (``CallSpec2``) whose scope is broader
    than the function, from ``CallSpec2._arg2scope`` (name -> ``Scope`` enum, pytest 7.0 on)
    and the public ``indices``. Cases whose broader-scoped parameters differ must not be in
    flight together: pytest tears the module fixture down for its next value. Without it every
    case of a test would be grouped together, some running on a torn-down fixture."""
    scopes = _private(
        callspec,
        "_arg2scope",
        "CallSpec2",
        "keeps concurrent cases of different module-scoped parameters apart",
    )
    broader = []
    for name, index in callspec.indices.items():
        scope = scopes.get(name)
        value = getattr(scope, "value", None)
        if not isinstance(value, str):
            raise PytestInternalsError(
                f"CallSpec2._arg2scope[{name!r}].value (a Scope)",
                "keeps concurrent cases of different module-scoped parameters apart",
            )
        if value != "function":
            broader.append((name, index))
    return tuple(sorted(broader))


def parametrization_id_parts(callspec: Any) -> list[str]:
    """``CallSpec2._idlist`` (pytest 3 on): the id of each parametrization, in the order pytest
    joins them with ``-`` into the item's id. A record's case id swaps the dataset case's part
    in it (taking out the repeat sample's suffix); without it every sample of a case would
    be a case of its own."""
    parts = _private(
        callspec, "_idlist", "CallSpec2", "names a parametrized dataset case's records"
    )
    return [str(p) for p in parts]


def item_request(item: pytest.Item) -> Any:
    """``Function._request`` (``TopRequest`` since pytest 8.0; False once pytest's protocol
    has torn the item down): the ``request`` the test gets. Without it a concurrent case could
    not refuse ``request.getfixturevalue()`` from its body, nor find the fixtures requested so."""
    return _private(item, "_request", "Function", "holds the fixtures of a concurrent case")


def renew_request(item: pytest.Item) -> None:
    """``Function._initrequest()`` (pytest 3 on) when the item's request was dropped: a fresh
    request, as pytest's protocol gives an item that runs again (work stealing, reruns).
    Without it a case set up a second time would fail on its spent request."""
    if not item_request(item):
        _private(item, "_initrequest", "Function", "sets a case up a second time")()


def forget_request(item: pytest.Item) -> None:
    """As ``_pytest.runner.runtestprotocol`` does after teardown (pytest 3 on): the item's
    request and fixture values go (``_request = False``, ``funcargs = None``). Without it every
    finished concurrent case keeps its fixture values alive until the session ends."""
    item_request(item)  # the attribute must be pytest's, not one made up here
    item._request = False  # type: ignore[attr-defined]
    item.funcargs = None  # type: ignore[attr-defined]


def request_fixture_defs(request: Any) -> dict[str, Any]:
    """``FixtureRequest._fixture_defs`` (name -> ``FixtureDef``, pytest 3 on): every fixture
    set up for the test, those requested at run time (``request.getfixturevalue``) included.
    Without it such a fixture would be shared by the cases in flight, and a run-time
    ``monkeypatch`` would go unseen."""
    defs = _private(
        request, "_fixture_defs", "FixtureRequest", "finds fixtures requested at run time"
    )
    return dict(defs)


def request_item(request: Any) -> pytest.Item:
    """``SubRequest._pyfuncitem`` (pytest 3 on): the test item a fixture is being set up for.
    An async fixture runs on the case loop only for an item the runner owns."""
    item: pytest.Item = _private(
        request, "_pyfuncitem", "SubRequest", "tells whose async fixture is set up"
    )
    return item


# -- per-item fixture state ----------------------------------------------------------------------

_NO_PARAM = object()


@dataclasses.dataclass
class DetachedFixture:
    """A function-scoped fixture's per-item state, taken off its ``FixtureDef`` after a
    concurrent case's setup (so the next case sets the fixture up afresh) and put back before
    its teardown: ``FixtureDef.cached_result`` ((value, cache key, None) or (None, cache key,
    error), this form since pytest 8.0), ``FixtureDef._finalizers`` (a list since pytest 7.0)
    and ``cached_param`` (set by ``--setup-show``, read at teardown). pytest keeps them on the
    one ``FixtureDef`` shared by every item of a test, assuming one item at a time: without this
    the cases in flight would share one fixture value and the first teardown would run all
    their finalizers."""

    fixturedef: Any
    cached: Any
    finalizers: list[Callable[[], object]]
    param: Any = _NO_PARAM

    @property
    def argname(self) -> str:
        return str(self.fixturedef.argname)

    def value(self) -> tuple[bool, Any]:
        """(set up without error, its value)."""
        cached = self.cached
        if cached is None or cached[2] is not None:
            return False, None
        return True, cached[0]

    def attach(self) -> None:
        fixturedef = self.fixturedef
        fixturedef.cached_result = self.cached
        fixturedef._finalizers[:0] = self.finalizers
        if self.param is not _NO_PARAM:
            fixturedef.cached_param = self.param


def detach_fixture(fixturedef: Any) -> DetachedFixture | None:
    """Take a fixture's per-item state off it (see :class:`DetachedFixture`); None when it has
    none (not set up for this item)."""
    cached = _private(
        fixturedef, "cached_result", "FixtureDef", "keeps concurrent cases' fixtures apart"
    )
    own = _private(
        fixturedef, "_finalizers", "FixtureDef", "keeps concurrent cases' fixtures apart"
    )
    if cached is None and not own:
        return None
    detached = DetachedFixture(
        fixturedef, cached, list(own), getattr(fixturedef, "cached_param", _NO_PARAM)
    )
    fixturedef.cached_result = None
    own.clear()
    return detached


#: pytest 9.1 on: ``FixtureDef.finish`` returns at once when ``cached_result`` is None (taken
#: as "already finished"), and ``FixtureDef.execute`` registers its
#: ``pytest_fixture_post_finalizer`` call in ``_finalizers`` before the setup and asserts the list
#: is empty at the next setup. Before 9.1 ``finish`` ran the finalizers whatever the cache held.
_FINISH_SKIPS_UNCACHED = pytest.version_tuple[:2] >= (9, 1)


def hand_uncached_finalizers_to_node(fixturedef: Any, request: Any) -> None:
    """After a fixture's setup raised something pytest's ``pytest_fixture_setup`` does not
    cache (a BaseException that is not an Exception: SystemExit, KeyboardInterrupt): on pytest
    9.1 and later its pending ``FixtureDef._finalizers`` (the post-finalizer hook call, and any
    ``request.addfinalizer`` made before the raise) are moved to the fixture's node
    (``SubRequest.node.addfinalizer``), to run, last first, at that node's teardown. Without it
    ``finish`` skips them (nothing cached) and the next setup of the fixture, the next case's,
    fails on pytest's ``assert not self._finalizers``: one case's SystemExit became an error of
    every later case. Earlier pytest runs them from ``finish`` itself: nothing to do there."""
    if not _FINISH_SKIPS_UNCACHED:
        return
    what = "tears down an async fixture whose setup raised SystemExit"
    if _private(fixturedef, "cached_result", "FixtureDef", what) is not None:
        return
    own: list[Callable[[], object]] = _private(fixturedef, "_finalizers", "FixtureDef", what)
    if not own:
        return
    pending = list(own)
    own.clear()
    node = request.node
    for fin in pending:  # (the node runs its finalizers last first, as finish() would these)
        node.addfinalizer(fin)


@contextmanager
def fixture_function_replaced(fixturedef: Any, func: Callable[..., Any]) -> Iterator[None]:
    """``FixtureDef.func`` (pytest 3 on; declared ``Final`` since 8.1, still a plain attribute)
    replaced for the span of one setup: pytest's own setup (arguments, caching, finalizers,
    skips, ``--setup-plan``) then runs an async fixture through a sync stand-in that runs it
    on the case loop. Without it an async fixture's value would be its unawaited coroutine."""
    original = _private(fixturedef, "func", "FixtureDef", "runs async fixtures on the case loop")
    fixturedef.func = func
    try:
        yield
    finally:
        fixturedef.func = original


# -- the session's setup stack -------------------------------------------------------------------


def _setup_stack(session: pytest.Session) -> dict[Any, Any]:
    """``Session._setupstate.stack`` (a dict node -> (finalizers, setup error) in setup order,
    pytest 7.0 on): the nodes set up and their finalizers. pytest assumes one item on top of
    it at a time."""
    state = _private(session, "_setupstate", "Session", "keeps concurrent cases' teardowns apart")
    stack: dict[Any, Any] = _private(
        state, "stack", "SetupState", "keeps concurrent cases' teardowns apart"
    )
    return stack


def detach_setup_entry(item: pytest.Item) -> Any:
    """Take a case's entry (its finalizers) off the top of the setup stack after its setup, so
    the next case can be set up on its parent; None if it is not on top. Without it pytest
    would tear a case down when the next one is set up."""
    stack = _setup_stack(item.session)
    if stack and next(reversed(stack)) is item:
        return stack.pop(item)
    return None


def restore_setup_entry(item: pytest.Item, entry: Any) -> None:
    """Put a case's entry back on top of the setup stack, before its teardown."""
    _setup_stack(item.session)[item] = entry


def take_setup_finalizers(item: pytest.Item) -> list[Callable[[], object]]:
    """Remove a case's entry from the setup stack and return its finalizers (run last first):
    a case abandoned without reports (``-x``, Ctrl-C, taken by another xdist worker) is torn
    down by the caller."""
    entry = _setup_stack(item.session).pop(item, None)
    if entry is None:
        return []
    finalizers: list[Callable[[], object]] = entry[0]
    return finalizers


# -- the terminal -------------------------------------------------------------------------------


def terminal_writer(config: pytest.Config) -> Any:
    """The terminal reporter's ``TerminalReporter._tw`` (a ``TerminalWriter``, pytest 3 on), or
    None without a terminal reporter. The live status line writes through it (``hasmarkup``,
    ``fullwidth``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    return _private(reporter, "_tw", "TerminalReporter", "draws the live status line")


def terminal_file(writer: Any) -> Any:
    """``TerminalWriter._file`` (pytest 6.0 on): the stream pytest writes to. The status line
    replaces it with a stream that erases the line before pytest's output and draws it again
    after; without it the line and pytest's output would mix."""
    return _private(writer, "_file", "TerminalWriter", "draws the live status line")


def set_terminal_file(writer: Any, file: Any) -> None:
    """Set ``TerminalWriter._file`` (see :func:`terminal_file`)."""
    terminal_file(writer)  # the attribute must be pytest's, not one made up here
    writer._file = file


# -- pytest-xdist's worker ----------------------------------------------------------------------


_interactor_key = pytest.StashKey[Any]()


def worker_queue(config: pytest.Config) -> list[object] | None:
    """(xdist worker) The item indices this worker runs next, in order: xdist's
    ``WorkerInteractor.nextitem_index`` and a snapshot of its ``torun`` queue, read under the
    queue's own lock (``TestQueue.lock()``, pytest-xdist 3.7 on; older versions have a plain
    queue whose work stealing is not atomic). None outside an xdist worker. A concurrent case
    sets up the next cases of its test ahead only if this worker runs them; without it the
    look-ahead would set up cases that another worker runs."""
    if not hasattr(config, "workerinput"):
        return None
    interactor = config.stash.get(_interactor_key, None)
    if interactor is None:
        # (by class name: xdist runs its worker module through execnet, as __channelexec__)
        interactor = next(
            (
                p
                for p in config.pluginmanager.get_plugins()
                if type(p).__name__ == "WorkerInteractor"
            ),
            None,
        )
        if interactor is not None:  # asked each time a case finishes: looked up once
            config.stash[_interactor_key] = interactor
    torun = getattr(interactor, "torun", None)
    lock = getattr(torun, "lock", None)
    if interactor is None or not callable(lock):
        raise PytestInternalsError(
            "xdist.remote.WorkerInteractor.torun.lock() (pytest-xdist 3.7 or later)",
            "tells an xdist worker which concurrent cases it runs next",
        )
    queued: list[object] = [getattr(interactor, "nextitem_index", None)]
    with lock() as items:
        queued.extend(items)
    return queued
