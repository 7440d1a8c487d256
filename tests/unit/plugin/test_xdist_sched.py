"""Concurrent dataset cases under pytest-xdist (real ``-n 2`` runs through pytester): each worker
gets a contiguous share of a concurrent test's cases at once (pytest_llmeval/plugin/xdist_sched.py),
every case runs exactly once whatever ``--dist`` mode, and ``-x`` still stops the run.

Which worker ran a case and when is read from what each case itself wrote (its process id, its
start and end times), never from wall-clock thresholds."""

from __future__ import annotations

import pytest

pytest.importorskip("xdist")


class _FakeNode:
    """What CaseShares and xdist's LoadScheduling use of a worker controller."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def send_runtest_all(self) -> None:
        raise AssertionError("not expected")

    def send_steal(self, indices: list[int]) -> None:
        raise AssertionError("not expected")

    def shutdown(self) -> None:
        self.shutting_down = True


def test_a_crash_is_not_blamed_on_a_case_whose_reports_had_arrived() -> None:
    """Another case in flight can kill the worker between a case's teardown report and xdist's
    "complete" event for it: that case passed and must be neither reported as the crash (it
    was reported twice, passed and crashed) nor run again; the crash goes to the next case due,
    and the worker's other queued cases go to the live worker."""
    from types import SimpleNamespace

    from xdist.scheduler import LoadScheduling

    from pytest_llmeval.plugin.xdist_sched import CaseShares

    config = SimpleNamespace(
        getvalue=lambda name: ["2*popen"] if name == "tx" else None,
        getoption=lambda name, default=None: None,
    )
    inner = LoadScheduling(config)  # type: ignore[arg-type]
    log = SimpleNamespace(llmevalsched=lambda *args: None)
    collection = [f"test_x.py::test_x[c{i}]" for i in range(8)]
    shares = CaseShares(inner, log, lambda worker, count: [(0, 8, 4)])
    one, two = _FakeNode("gw0"), _FakeNode("gw1")
    for node in (one, two):
        shares.add_node(node)
    for node in (one, two):
        shares.add_node_collection(node, collection)
    shares.schedule()
    assert (one.sent, two.sent) == ([0, 1, 2, 3], [4, 5, 6, 7])
    shares.mark_test_complete(one, 0)
    shares.reported(collection[1])  # c1's teardown report arrived; then gw0 died
    assert shares.remove_node(one) == collection[2]  # the crash: c2, the next case due
    # gw1 was told to finish after its share (nothing else to come): xdist starts a replacement
    # worker, which gets c3; c1 (done) and c2 (the crash) run nowhere again
    assert two.shutting_down and two.sent == [4, 5, 6, 7]
    three = _FakeNode("gw2")
    shares.add_node(three)
    shares.add_node_collection(three, collection)
    shares.schedule()
    assert three.sent == [3]
