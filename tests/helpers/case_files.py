"""Helpers of the concurrent-case tests (test_concurrent*.py): the dataset file they write and
what the cases themselves record (events, start/end times), read back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest


def write_cases(p: pytest.Pytester, ids: list[str], name: str = "cases.jsonl") -> None:
    """A dataset of one row per id: ``{"id": i, "input": "q-<i>", "expected": i}``."""
    rows = [json.dumps({"id": i, "input": f"q-{i}", "expected": i}) for i in ids]
    (p.path / name).write_text("\n".join(rows) + "\n")


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> None:
    """A JSONL dataset of ``rows`` at ``path`` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def read_report(p: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    """The JSON report a pytester run wrote."""
    data: dict[str, Any] = json.loads((p.path / name).read_text("utf-8"))
    return data


def read_events(p: pytest.Pytester) -> list[str]:
    """The lines the cases appended to events.txt, in order."""
    path = p.path / "events.txt"
    return path.read_text().splitlines() if path.exists() else []


def max_overlap(entries: Sequence[Mapping[str, Any]]) -> int:
    """The largest number of cases whose [start, end) intervals share one instant."""
    points = sorted(
        [(float(e["start"]), 1) for e in entries] + [(float(e["end"]), -1) for e in entries]
    )
    best = now = 0
    for _, step in points:  # an end sorts before a start at the same instant
        now += step
        best = max(best, now)
    return best


#: The conftest of an inner run whose main thread gets a Ctrl-C (a real SIGINT, raised in the
#: main thread) at one chosen point, given by the environment variable ``CTRL_C_AT`` as
#: ``kind[:n]`` (the n-th such point once armed, default the first):
#:
#: - ``gate-acquire`` / ``gate-release``: right after the main thread takes / gives back the
#:   concurrent runner's gate (its ``_lock``, wrapped here);
#: - ``futures-wait``: between the locks ``concurrent.futures.wait`` takes on its futures, one
#:   taken and the next not yet (the main thread waits there for cases in flight);
#: - ``condition-wait``: inside ``threading.Condition.wait``, its lock given up but its
#:   ``try`` not entered yet (a ``Future.result()``/``Event.wait()`` in the main thread).
#:
#: Python runs a signal handler between two bytecodes of the main thread, wherever that thread
#: is: these are the points where the plugin's own code (or the standard library under it) is
#: between two steps that must go together. ``ARMED`` (set by the test) starts the count, so
#: that the points taken while the run starts up do not count. Each point taken is written to
#: ``injected.txt`` (a test asserts it was reached: a point that moved must fail, not pass).
CTRL_C_CONFTEST = '''
import os, signal, sys, threading

import pytest

KIND, _, NTH = os.environ.get("CTRL_C_AT", "").partition(":")
NTH = int(NTH or 1)
ARMED = threading.Event()
MAIN = threading.get_ident()
_state = {"count": 0, "fired": False}


def event(text):
    with open("events.txt", "a") as f:
        f.write(text + "\\n")


def _hit(kind):
    """Whether this is the chosen point (the n-th of its kind once armed)."""
    if _state["fired"] or kind != KIND or not ARMED.is_set():
        return False
    if threading.get_ident() != MAIN:
        return False
    _state["count"] += 1
    return _state["count"] == NTH


def _fire():
    _state["fired"] = True
    sys.setprofile(None)
    with open("injected.txt", "a") as f:
        f.write(KIND + "\\n")
    signal.raise_signal(signal.SIGINT)  # its handler runs right here, in the main thread


class _Lock:
    """The runner's gate lock, with a Ctrl-C right after the main thread takes or gives it."""

    def __init__(self, lock):
        self._real = lock

    def acquire(self, blocking=True, timeout=-1):
        got = self._real.acquire(blocking, timeout)
        if got and _hit("gate-acquire"):
            _fire()
        return got

    def release(self):
        self._real.release()
        if _hit("gate-release"):
            _fire()

    def locked(self):
        return self._real.locked()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _profile(frame, what, arg):
    if _state["fired"] or not ARMED.is_set():
        return
    if what == "c_return" and getattr(arg, "__name__", "") == "acquire":
        owner = frame.f_locals.get("self")
        if type(owner).__name__ == "_AcquireFutures" and len(owner.futures) >= 2:
            if _hit("futures-wait"):
                _fire()
    elif (what == "c_return" and getattr(arg, "__name__", "") == "_release_save"
          and frame.f_code.co_name == "wait") or (
        what == "return" and frame.f_code.co_name == "_release_save"
        and frame.f_back is not None and frame.f_back.f_code.co_name == "wait"
    ):
        if _hit("condition-wait"):
            _fire()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    runner = session.config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
    if KIND.startswith("gate-"):
        runner.gate._lock = _Lock(runner.gate._lock)
    elif KIND in ("futures-wait", "condition-wait"):
        sys.setprofile(_profile)


def pytest_runtest_call(item):
    if os.environ.get("ARM_AT_CALL"):
        ARMED.set()
'''


def read_injected(p: pytest.Pytester) -> list[str]:
    """The Ctrl-C points the inner run of :data:`CTRL_C_CONFTEST` reached."""
    path = p.path / "injected.txt"
    return path.read_text().splitlines() if path.exists() else []
