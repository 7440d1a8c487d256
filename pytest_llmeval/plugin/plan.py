"""The run's plan: which gated items were selected at collection, and what became of each.

A gate must know which of its test's items were selected (after -k, -m, --deselect and the
shard split) to tell "not selected" from "selected and never reported" (a crashed xdist worker, a
run stopped by -x or Ctrl-C): the first narrows the gate and says so, the second is an unscored
case, never a pass. Records alone cannot say it: a lost item has none.

* :class:`PlanCollector` (every process that collects): at the end of collection, the gated items
  (node id -> file, test, case id, sample) and every collected test function's ``FILE::TEST``.
  An xdist worker puts them, as one JSON string, on the first test report it makes: the same
  channel as the records (every worker collects the same items, so any one worker's plan is the
  run's; a worker that crashes after its first report has already sent it).
* :class:`PlanTracker` (the controller, or the only process): each planned item's fate from the
  ordinary test reports (setup/call skipped, teardown arrived, xdist's crash report), and, at the
  end, the :class:`pytest_llmeval.core.model.TestPlan` of each gated test.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.core.model import ItemKey, TestPlan

if TYPE_CHECKING:
    from pytest_llmeval.analysis.gates import TestGates

__all__ = ["PLAN_ATTR", "PlanCollector", "PlanTracker", "PlannedTests"]

#: test report attribute: an xdist worker's plan, on the first report it makes
PLAN_ATTR = "llm_eval_plan"

_NODEID_OF = attrgetter("nodeid")
_is_true = partial(is_, True)

#: why a selected item was never reported
CRASHED = "an xdist worker crashed"
STOPPED = "the run stopped early (-x, --maxfail)"
INTERRUPTED = "the run was interrupted"
UNREPORTED = "no report arrived"


@dataclass
class PlannedTests:
    """What a collection planned: gated items by node id, the gates of their tests (with the
    number of distinct cases each test had before -k narrowed it), every other llm_eval item
    selected (by node id: a run that ends before one of them reports is incomplete), and every
    collected test function."""

    items: dict[str, tuple[str, str, str | None, int]] = field(default_factory=dict)
    tests: dict[tuple[str, str], TestGates] = field(default_factory=dict)
    totals: dict[tuple[str, str], int] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "items": [[n, f, t, c, s] for n, (f, t, c, s) in self.items.items()],
            "tests": [
                {
                    "file": f,
                    "test": t,
                    "gates": [g.to_json() for g in gates.specs],
                    "marker_scorers": sorted(gates.marker_scorers),
                    "total": self.totals.get((f, t), gates.total),
                    "repeat": gates.repeat,
                }
                for (f, t), gates in self.tests.items()
            ],
            "others": self.others,
            "collected": self.collected,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlannedTests:
        from pytest_llmeval.analysis.gates import TestGates
        from pytest_llmeval.core.model import spec_from_json

        out = cls()
        for n, f, t, c, s in data["items"]:
            out.items[str(n)] = (str(f), str(t), c, int(s))
        for e in data["tests"]:
            key = (str(e["file"]), str(e["test"]))
            out.tests[key] = TestGates(
                specs=[spec_from_json(g) for g in e["gates"]],
                total=e["total"],
                repeat=int(e["repeat"]),
                marker_scorers=frozenset(e["marker_scorers"]),
            )
            if e["total"] is not None:
                out.totals[key] = int(e["total"])
        out.others = [str(x) for x in data["others"]]
        out.collected = [str(x) for x in data["collected"]]
        return out


class PlanCollector:
    """Every collecting process: the plan of its collection (see the module docstring)."""

    def __init__(
        self,
        config: pytest.Config,
        gate_table: dict[tuple[str, str], TestGates],
        identity: Any,
        function: Any,
        relevant: Any,
    ) -> None:
        self.config = config
        self.gate_table = gate_table
        self._identity = identity  # item -> (file, test, case id, where)
        self._keys_of = function  # items -> each one's (file, test), cheaper
        self._relevant = relevant  # items -> whether each is an llm_eval item whose verdict counts
        self.planned = PlannedTests()

    def _gated(self, key: tuple[str, str]) -> bool:
        gates = self.gate_table.get(key)
        return gates is not None and bool(gates.specs)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Before -k/-m/--deselect narrow the list: every collected test function (a run gate
        that matches none of the selected ones is told which it could have meant), and how many
        distinct cases each gated test has (a gate over a subset says of how many)."""
        keys = self._keys_of(items)
        cases: dict[tuple[str, str], set[str | None]] = {}
        for key in dict.fromkeys(keys):
            if self._gated(key):
                cases[key] = set()
        if cases:
            for item, key in zip(items, keys, strict=True):
                ids = cases.get(key)
                if ids is not None:
                    ids.add(self._identity(item)[2])
        self.planned.collected = [f"{file}::{test}" for file, test in dict.fromkeys(keys)]
        self.planned.totals = {key: len(ids) for key, ids in cases.items()}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The llm_eval and gated items selected to run, after every narrowing (the shard split
        included)."""
        from pytest_llmeval.plugin.identity import _sample_of

        planned = self.planned
        items = session.items
        keys = self._keys_of(items)
        gated = {key: self._gated(key) for key in dict.fromkeys(keys)}
        kinds = self._relevant(items)
        if not any(gated.values()):
            # (no gate: every llm_eval item is one of the others, picked out in C)
            planned.others.extend(compress(map(_NODEID_OF, items), map(_is_true, kinds)))
            self._send_plan()
            return
        for item, key, relevant in zip(items, keys, kinds, strict=True):
            if gated[key] and relevant is not False:
                file, test, case_id, _where = self._identity(item)
                planned.items[item.nodeid] = (file, test, case_id, _sample_of(item))
                planned.tests[key] = self.gate_table[key]
            elif relevant:
                planned.others.append(item.nodeid)
        self._send_plan()

    def _send_plan(self) -> None:
        """xdist worker: the plan goes with the first report this worker makes."""
        if hasattr(self.config, "workerinput"):
            manager = self.config.pluginmanager
            if manager.get_plugin(_SEND_PLAN) is None:
                manager.register(_PlanSender(self, manager), _SEND_PLAN)


_SEND_PLAN = "llm-eval-send-plan"


class _PlanSender:
    """xdist worker: the plan rides on the first report this worker makes; then this hook is
    gone (it is not called for every report of the run)."""

    def __init__(self, collector: PlanCollector, manager: pytest.PytestPluginManager) -> None:
        self.collector = collector
        self.manager = manager

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self.manager.is_registered(self):
            self.manager.unregister(self)
            setattr(report, PLAN_ATTR, json.dumps(self.collector.planned.to_json()))
        return report


class PlanTracker:
    """Controller side (or the only process): the fate of every planned item, from the test
    reports; :meth:`test_plans` turns it into the run's plan."""

    def __init__(self, config: pytest.Config, local: PlanCollector | None) -> None:
        self.config = config
        self.local = local  # the only process collects itself
        self.remote: PlannedTests | None = None  # an xdist worker's plan
        #: why a worker's plan could not be read (its gates cannot be judged: the run fails)
        self.error: str | None = None
        self.reported: set[str] = set()
        self.skipped: set[str] = set()
        self.crashed: set[str] = set()

    def note(self, report: pytest.TestReport) -> None:
        """Controller side: an item's fate, from its reports: every report a worker sends (the
        xdist controller's logreport hook; xdist reports a crashed item with ``when="???"``),
        or, without xdist, each teardown or skipped report this process makes (the others
        tell nothing)."""
        if self.remote is None:
            # (the report's own attributes: a missing one costs no exception this way)
            payload = report.__dict__.get(PLAN_ATTR)
            if payload:
                try:
                    self.remote = PlannedTests.from_json(json.loads(payload))
                except (ValueError, KeyError, TypeError) as exc:
                    # never judge gates without knowing what was selected: say so, and fail
                    self.error = (
                        f"the plan of gated tests sent with {report.nodeid} could not be read "
                        f"({type(exc).__name__}: {exc}): no gate can be judged"
                    )
        when = report.when
        if when == "teardown":
            self.reported.add(report.nodeid)
        elif report.outcome == "skipped" and when in ("setup", "call"):
            self.skipped.add(report.nodeid)
        elif when not in ("setup", "call"):
            self.crashed.add(report.nodeid)

    def planned(self) -> PlannedTests | None:
        """The collection's plan: an xdist worker's, or the only process's own."""
        if self.remote is not None:
            return self.remote
        return self.local.planned if self.local is not None else None

    def unreported(self) -> list[str]:
        """The planned items (llm_eval or gated) for which no report arrived (the run ended
        before them, or a worker died with them)."""
        planned = self.planned()
        if planned is None:
            return []
        return [n for n in [*planned.items, *planned.others] if n not in self.reported]

    def test_plans(self, *, stopped: bool, interrupted: bool) -> tuple[TestPlan, ...]:
        """The plan of every gated test with a selected item: ran, skipped, or lost (with
        why)."""
        planned = self.planned()
        if planned is None:
            return ()
        why_lost = INTERRUPTED if interrupted else STOPPED if stopped else UNREPORTED
        ran: dict[tuple[str, str], set[ItemKey]] = {}
        skipped: dict[tuple[str, str], set[ItemKey]] = {}
        lost: dict[tuple[str, str], dict[ItemKey, str]] = {}
        for nodeid, (file, test, case_id, sample) in planned.items.items():
            key = (file, test)
            item = (case_id, sample)
            if nodeid in self.crashed:
                lost.setdefault(key, {})[item] = CRASHED
            elif nodeid not in self.reported:
                lost.setdefault(key, {})[item] = why_lost
            elif nodeid in self.skipped:
                skipped.setdefault(key, set()).add(item)
            else:
                ran.setdefault(key, set()).add(item)
        out = []
        for key in sorted(set(ran) | set(skipped) | set(lost)):
            gates = planned.tests[key]
            out.append(
                TestPlan(
                    file=key[0],
                    test=key[1],
                    gates=tuple(gates.specs),
                    marker_scorers=gates.marker_scorers,
                    total=planned.totals.get(key, gates.total),
                    repeat=gates.repeat,
                    ran=frozenset(ran.get(key, ())),
                    skipped=frozenset(skipped.get(key, ())),
                    lost=dict(lost.get(key, {})),
                )
            )
        return tuple(out)

    def collected(self) -> tuple[str, ...]:
        planned = self.planned()
        return tuple(planned.collected) if planned is not None else ()
