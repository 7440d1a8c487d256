"""xdist scheduling of concurrent dataset cases: each worker gets its contiguous share of a
concurrent test's cases at once.

Why: a worker's concurrent runner (:mod:`pytest_llmeval.plugin.concurrent`) can only start ahead the
cases already queued on that worker. xdist's ``load`` mode queues a few items at a time and
tops a worker up only when its queue runs low (and not while its last item took 0.1 s or more),
so near the end of every chunk fewer than ``concurrency`` cases are in flight; ``worksteal``
queues everything, but may take back items the runner already started (they then run twice).

How: the controller wraps the scheduler of the chosen ``--dist`` mode (``load``, ``worksteal``,
``loadgroup``) in :class:`CaseShares`. Workers tell the controller which runs of items are
concurrent cases (a small JSON file per worker, written before the worker reports its
collection: xdist's protocol has no message for it). The controller splits each such run into
one contiguous share per worker and queues every share at once; the wrapped scheduler gets the
other items (as a smaller collection, through :class:`_View` handles that translate its
indices) and schedules them as it always does. Shares are never stolen or moved, so a case runs
once. When the session stops early (``-x``, ``--maxfail``), the controller takes back the queued
cases of every worker (xdist's ``steal`` command); cases already started there are cancelled
and torn down unreported, as in one process.

``loadscope`` and ``loadfile`` (and ``each``) keep xdist's own scheduler: they queue a whole
module, class or file on one worker at once, so a concurrent test's cases run there together.
Under ``loadgroup`` a concurrent test marked ``xdist_group`` stays in its group (one worker).
Without the workers' files (e.g. remote ``--tx ssh=`` workers) everything is xdist's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

__all__ = ["GROUPS_DIR_KEY", "CaseShares", "SharesPlugin", "write_groups"]

#: ``workerinput`` key: the directory where each worker writes its concurrent runs of items.
GROUPS_DIR_KEY = "llm_eval_case_groups_dir"

#: xdist modes whose scheduler is wrapped (the others queue whole scopes already).
_WRAPPED = ("load", "worksteal", "loadgroup")

#: At most this many times a refused take-back (the worker moved on meanwhile) is asked again.
_WITHDRAW_ATTEMPTS = 20


# -- worker side ------------------------------------------------------------------------------


def write_groups(config: pytest.Config, runs: list[tuple[int, int, int]], count: int) -> None:
    """(xdist worker) Write ``runs`` ((start, stop, concurrency) index ranges of
    ``session.items``) for the controller, atomically, before the worker reports its
    collection. Nothing to do outside xdist or when the controller asked for none."""
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict):
        return
    directory = workerinput.get(GROUPS_DIR_KEY)
    worker = workerinput.get("workerid")
    if not directory or not worker or not os.path.isdir(directory):
        return
    path = os.path.join(directory, f"{worker}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"count": count, "runs": runs}, fh)
    os.replace(tmp, path)


def _read_groups(directory: str, worker: str, count: int) -> list[tuple[int, int, int]] | None:
    """The runs a worker wrote, or None when absent or not for this collection."""
    try:
        with open(os.path.join(directory, f"{worker}.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("count") != count:
        return None
    runs = data.get("runs")
    if not isinstance(runs, list):
        return None
    out: list[tuple[int, int, int]] = []
    last = 0
    for run in runs:
        if (
            not isinstance(run, list)
            or len(run) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in run)
        ):
            return None
        start, stop, limit = run
        if not last <= start < stop <= count or limit < 1:
            return None
        out.append((start, stop, limit))
        last = stop
    return out


# -- controller side --------------------------------------------------------------------------


class SharesPlugin:
    """(xdist controller) Hands workers the groups directory and wraps the scheduler."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.directory: str | None = None
        self.scheduler: CaseShares | None = None
        self.session: pytest.Session | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="pytest-llmeval-xdist-")
        node.workerinput[GROUPS_DIR_KEY] = self.directory

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        scheduler = yield
        if scheduler is None or not _wrappable(scheduler, config.getvalue("dist")):
            return scheduler
        self.scheduler = CaseShares(scheduler, log, self._groups, self._settled)
        return self.scheduler

    def _settled(self, shares: CaseShares) -> None:
        """The scheduler decided, at the first schedule. Cases in shares: watch the reports (a
        case is done once its outcome is in; a stopping session takes back queued cases).
        Nothing concurrent: the run is xdist's own from here, so xdist's session gets its own
        scheduler back (every call it makes, several per report, then goes straight to it: the
        wrapper only passed them on) and no hook of this plugin runs per report."""
        if shares.split:
            self.config.pluginmanager.register(_ShareReports(self, shares), _SHARE_REPORTS)
            return
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if getattr(dsession, "sched", None) is shares:
            dsession.sched = shares.inner  # type: ignore[union-attr]

    def _groups(self, worker: str, count: int) -> list[tuple[int, int, int]] | None:
        if self.directory is None:
            return None
        return _read_groups(self.directory, worker, count)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_unconfigure(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


#: the plugin name of :class:`_ShareReports`
_SHARE_REPORTS = "llm-eval-xdist-share-reports"


class _ShareReports:
    """(xdist controller, cases in shares only) Each logged report, for the scheduler."""

    def __init__(self, plugin: SharesPlugin, shares: CaseShares) -> None:
        self.plugin = plugin
        self.shares = shares

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A case whose outcome is in is done; once the session stops (``-x``, ``--maxfail``:
        pytest's session counted this report's failure), take back the cases still queued on
        the workers."""
        if report.when != "setup" or not report.passed:
            # Its outcome is known once its call report (or a setup that did not pass) is in:
            # a worker dying before the teardown report must not report that case again as
            # the crash (counted twice, passed and failed)
            self.shares.reported(report.nodeid)
        session = self.plugin.session
        if session is not None and (session.shouldfail or session.shouldstop):
            self.shares.stop()


def _wrappable(scheduler: Any, dist: str) -> bool:
    """Only xdist's own scheduler of a wrapped mode (another plugin's stays as it is)."""
    if dist not in _WRAPPED:
        return False
    from xdist.scheduler import LoadGroupScheduling, LoadScheduling, WorkStealingScheduling

    own = {
        "load": LoadScheduling,
        "worksteal": WorkStealingScheduling,
        "loadgroup": LoadGroupScheduling,
    }
    return type(scheduler) is own[dist]


class _View:
    """The wrapped scheduler's handle on one worker: it speaks in positions of the wrapped
    scheduler's (smaller) collection, translated here to the worker's item indices."""

    def __init__(self, shares: CaseShares, node: Any) -> None:
        self._shares = shares
        self.node = node
        #: the wrapped scheduler has nothing more for this worker (it asked to shut it down)
        self.released = False

    @property
    def shutting_down(self) -> bool:
        return self.released or bool(self.node.shutting_down)

    @property
    def gateway(self) -> Any:
        return self.node.gateway

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        self._shares.inner_send(self, indices)

    def send_runtest_all(self) -> None:
        self._shares.inner_send(self, range(len(self._shares.to_full)))

    def send_steal(self, indices: Sequence[int]) -> None:
        self._shares.inner_steal(self, indices)

    def shutdown(self) -> None:
        self.released = True
        self._shares.released(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.node, name)

    def __repr__(self) -> str:
        return f"<llm-eval view of {self.node!r}>"


class CaseShares:
    """An xdist scheduler (``xdist.scheduler.Scheduling``): concurrent cases in contiguous
    shares queued at once, everything else by the wrapped scheduler (see module docs).

    Until every worker has reported its collection, nodes and collections are only kept; the
    first :meth:`schedule` decides: with no concurrent runs (or collections that differ, which
    the wrapped scheduler reports) the wrapped scheduler gets the real nodes and collections
    and runs the whole session unchanged."""

    def __init__(
        self,
        inner: Any,
        log: Any,
        groups: Any,
        settled: Any = None,
    ) -> None:
        self.inner = inner
        self.log = log.llmevalsched
        self._groups = groups
        #: called with this scheduler once its first schedule decided (split or not)
        self._settled = settled
        self.numnodes: int = inner.numnodes
        self._nodes: list[Any] = []
        self._collections: dict[Any, list[str]] = {}
        self.started = False
        self.split = False
        self.collection: list[str] = []
        self.to_full: list[int] = []  # wrapped scheduler's position -> item index
        self._to_inner: dict[int, int] = {}
        self._concurrent: set[int] = set()
        self._views: dict[Any, _View] = {}
        #: item indices queued on each worker and not completed, in the order sent
        self._order: dict[Any, list[int]] = {}
        self._pending: dict[Any, list[int]] = {}  # concurrent ones only
        self._unassigned: list[int] = []  # concurrent cases of a worker that went down
        self._steals: dict[Any, deque[tuple[str, list[int]]]] = {}
        self._stopping = False
        self._withdraw_attempts: dict[Any, int] = {}
        #: concurrent cases whose teardown report arrived (xdist's "complete" event comes after)
        self._reported: set[int] = set()
        self._index: dict[str, int] | None = None

    # -- the Scheduling protocol -------------------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        if self.started and not self.split:
            # the wrapped scheduler may have let a worker go unused (loadscope-based modes)
            return list(self.inner.nodes)
        return list(self._nodes)

    @property
    def collection_is_completed(self) -> bool:
        if not self.started:
            return len(self._collections) >= self.numnodes
        return bool(self.inner.collection_is_completed)

    @property
    def tests_finished(self) -> bool:
        if not self.started:
            return False
        if not self.split:
            return bool(self.inner.tests_finished)
        if self._unassigned or not self.inner.tests_finished:
            return False
        return all(len(p) < 2 for p in self._pending.values())

    @property
    def has_pending(self) -> bool:
        if not self.started:
            return False
        if not self.split:
            return bool(self.inner.has_pending)
        return bool(self.inner.has_pending or self._unassigned or any(self._pending.values()))

    def add_node(self, node: Any) -> None:
        assert node not in self._nodes
        self._nodes.append(node)
        if not self.started:
            return
        if not self.split:
            self.inner.add_node(node)
            return
        self._add_view(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        if not self.started:
            self._collections[node] = list(collection)
            return
        if not self.split:
            self.inner.add_node_collection(node, collection)
            return
        if list(collection) == self.collection:
            self._collections[node] = list(collection)
            if not self.to_full:
                return  # nothing but concurrent cases: the wrapped scheduler has no items
            collection = [self.collection[i] for i in self.to_full]
        # a different collection goes as it is: the wrapped scheduler reports the difference
        self.inner.add_node_collection(self._views[node], collection)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        if not self.split:
            self.inner.mark_test_complete(node, item_index, duration)
            return
        _discard(self._order.get(node), item_index)
        if item_index in self._concurrent:
            _discard(self._pending.get(node), item_index)
        else:
            self.inner.mark_test_complete(self._views[node], self._to_inner[item_index], duration)
        self._after()

    def mark_test_pending(self, item: str) -> None:
        if not self.split:
            self.inner.mark_test_pending(item)
            return
        index = self.collection.index(item)
        if index in self._concurrent:
            self._unassigned.insert(0, index)
            self._distribute()
        else:
            self.inner.mark_test_pending(item)
        self._after()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        """A worker answered a ``steal`` (take-back) request: the wrapped scheduler's, or this
        scheduler's when the session stops. A worker answers its requests in order."""
        if not self.split:
            self.inner.remove_pending_tests_from_node(node, indices)
            return
        requests = self._steals.get(node)
        who = requests.popleft()[0] if requests else "inner"
        order = self._order.get(node)
        for index in indices:
            _discard(order, index)
        if who == "inner":
            view = self._views.get(node)
            if view is not None:
                inner = [self._to_inner[i] for i in indices if i in self._to_inner]
                self.inner.remove_pending_tests_from_node(view, inner)
        else:
            pending = self._pending.get(node)
            for index in indices:
                _discard(pending, index)  # taken back while stopping: runs nowhere
            if not indices and node in self._views:
                self._withdraw(node)  # it moved on meanwhile: ask again for what is left
        self._after()

    def reported(self, nodeid: str) -> None:
        """A case's outcome arrived (its call report, a setup that did not pass, or its teardown):
        it is done, whatever comes after it."""
        if not self.split:
            return
        if self._index is None:
            self._index = {name: i for i, name in enumerate(self.collection)}
        index = self._index.get(nodeid)
        if index is not None and index in self._concurrent:
            self._reported.add(index)

    def remove_node(self, node: Any) -> str | None:
        """A worker finished or went down: its queued cases (but the one it was running, which
        xdist reports as the crash) go to the other workers."""
        if node not in self._nodes:
            raise KeyError(node)  # as xdist's schedulers do for a node they do not know
        self._nodes.remove(node)
        self._collections.pop(node, None)
        if not self.started:
            return None
        if not self.split:
            crashed: str | None = self.inner.remove_node(node)
            return crashed
        view = self._views.pop(node)
        inner_crash: str | None = None
        if view in self.inner.nodes:
            inner_crash = self.inner.remove_node(view)
        # A case whose reports all arrived is done even if the worker died before telling xdist
        # (another case in flight killed the process): not the crash, not to run again.
        done = self._reported
        order = [i for i in self._order.pop(node, []) if i not in done]
        pending = [i for i in self._pending.pop(node, []) if i not in done]
        self._steals.pop(node, None)
        crashitem = inner_crash
        if order and order[0] in self._concurrent:
            crashitem = self.collection[order[0]]
            pending = [i for i in pending if i != order[0]]
            if inner_crash is not None and not _requeues_whole_work(self.inner):
                # The wrapped scheduler's first item was still queued, never started: it runs
                # again elsewhere. Load and worksteal put it back on request; loadscope-based
                # modes (loadscope, loadfile, loadgroup) cannot put one item back and need not:
                # their remove_node already returned the node's whole unfinished work, this
                # item included, to the queue. Tested in tests/integration/test_concurrent_xdist.py
                # (a crash mid-share with sync tests behind it, under load/worksteal/loadgroup).
                self.inner.mark_test_pending(inner_crash)
        self._unassigned.extend(pending)
        self._unassigned.sort()
        self._distribute()
        self._after()
        return crashitem

    def schedule(self) -> None:
        if self.started:
            self._distribute()
            self.inner.schedule()
            self._after()
            return
        self.started = True
        nodes = [n for n in self._nodes if n in self._collections]
        collections = [self._collections[n] for n in nodes]
        runs = None
        if nodes and all(c == collections[0] for c in collections):
            runs = self._groups(str(nodes[0].gateway.id), len(collections[0]))
        if not runs:
            self._pass_through()
            if self._settled is not None:
                self._settled(self)
            return
        self.split = True
        if self._settled is not None:
            self._settled(self)
        self.collection = collections[0]
        for start, stop, _limit in runs:
            self._concurrent.update(range(start, stop))
        self.to_full = [i for i in range(len(self.collection)) if i not in self._concurrent]
        self._to_inner = {full: pos for pos, full in enumerate(self.to_full)}
        rest = [self.collection[i] for i in self.to_full]
        for node in self._nodes:
            self._add_view(node)
            if node in self._collections:
                self.inner.add_node_collection(self._views[node], rest)
        shares: dict[Any, list[int]] = {node: [] for node in nodes}
        for start, stop, _limit in runs:
            size, extra = divmod(stop - start, len(nodes))
            at = start
            for k, node in enumerate(nodes):
                n = size + (1 if k < extra else 0)
                shares[node].extend(range(at, at + n))
                at += n
        for node, share in shares.items():
            self._send(node, share)
        self.log(
            f"concurrent cases: {len(self._concurrent)} in {len(runs)} run(s), in "
            f"{len(nodes)} contiguous shares; {len(rest)} other items by "
            f"{type(self.inner).__name__}"
        )
        self.inner.schedule()
        if not rest:
            # nothing else to come: each worker may finish as soon as its share is done
            for view in self._views.values():
                view.released = True
        self._after()

    # -- stopping early ----------------------------------------------------------------------

    def stop(self) -> None:
        """The session stops: take back every worker's queued concurrent cases."""
        if self._stopping or not self.split:
            return
        self._stopping = True
        self._unassigned.clear()
        for node in list(self._views):
            self._withdraw(node)

    def _withdraw(self, node: Any) -> None:
        if not self._stopping or node not in self._steals:
            return
        attempts = self._withdraw_attempts.get(node, 0)
        if attempts >= _WITHDRAW_ATTEMPTS:
            return
        # The worker runs its first queued item and knows the next: both left the queue.
        queued = [i for i in self._order.get(node, [])[2:] if i in self._concurrent]
        if not queued:
            return
        self._withdraw_attempts[node] = attempts + 1
        self._steals[node].append(("ours", queued))
        node.send_steal(queued)

    # -- helpers -----------------------------------------------------------------------------

    def _pass_through(self) -> None:
        for node in self._nodes:
            self.inner.add_node(node)
            if node in self._collections:
                self.inner.add_node_collection(node, self._collections[node])
        self.inner.schedule()

    def _add_view(self, node: Any) -> None:
        view = self._views[node] = _View(self, node)
        self._order[node] = []
        self._pending[node] = []
        self._steals[node] = deque()
        self.inner.add_node(view)

    def _send(self, node: Any, indices: list[int]) -> None:
        if not indices:
            return
        self._order[node].extend(indices)
        self._pending[node].extend(indices)
        node.send_runtest_some(indices)

    def inner_send(self, view: _View, positions: Sequence[int]) -> None:
        indices = [self.to_full[p] for p in positions]
        if indices:
            self._order[view.node].extend(indices)
            view.node.send_runtest_some(indices)

    def inner_steal(self, view: _View, positions: Sequence[int]) -> None:
        indices = [self.to_full[p] for p in positions]
        self._steals[view.node].append(("inner", indices))
        view.node.send_steal(indices)

    def released(self, view: _View) -> None:
        self._after()

    def _distribute(self) -> None:
        """Queue the cases of workers that went down on the live ones, in contiguous shares."""
        if not self._unassigned or self._stopping:
            return
        live = [n for n in self._views if not n.shutting_down]
        if not live:
            return  # a replacement worker takes them (schedule() runs again for it)
        todo, self._unassigned = self._unassigned, []
        size, extra = divmod(len(todo), len(live))
        at = 0
        for k, node in enumerate(live):
            n = size + (1 if k < extra else 0)
            self._send(node, todo[at : at + n])
            at += n

    def _after(self) -> None:
        """Shut down the workers that will get nothing more: the wrapped scheduler released
        them and no concurrent case waits for a worker."""
        if self._unassigned:
            return
        for node, view in self._views.items():
            if view.released and not node.shutting_down:
                node.shutdown()


def _requeues_whole_work(scheduler: Any) -> bool:
    """A loadscope-based scheduler (loadscope, loadfile, loadgroup): its ``remove_node`` puts a
    crashed node's unfinished work back in the queue itself."""
    from xdist.scheduler import LoadScopeScheduling

    return isinstance(scheduler, LoadScopeScheduling)


def _discard(values: list[int] | None, value: int) -> None:
    if values is not None:
        with contextlib.suppress(ValueError):
            values.remove(value)
