"""Concurrent dataset cases through real pytest runs (pytester): async ``llm_eval_dataset`` tests
run their cases at once on one loop, and every case keeps pytest's semantics (its own outcome,
report, captured output, JUnit entry, fixtures; ``-x``, ``-k``, ``--lf``, xdist, Ctrl-C).

Concurrency is proven from the cases' own recorded start/end times (how many overlapped), not
from wall-clock thresholds."""

from __future__ import annotations

from typing import Any, cast

import pytest


def test_async_assertions_record_like_their_sync_forms(ctx: object) -> None:
    import asyncio

    from pytest_llmeval import (
        LLMEvalAssertionError,
        ascore,
        assert_score_async,
        assert_scores_async,
        score_async,
    )
    from pytest_llmeval.core.records import TestRecorder, current_recorder

    assert ascore is score_async
    recorder = TestRecorder("t.py", "test_x", "c1", "cases.jsonl:1")

    async def body() -> None:
        s = await score_async("exact_match", output="a", expected="a")
        assert s.value == 1.0
        ok = await assert_score_async("exact_match", output="a", expected="a", min=1)
        assert ok.passed is True
        with pytest.raises(LLMEvalAssertionError, match="exact_match score 0 is not >= 1"):
            await assert_score_async("exact_match", output="a", expected="b", min=1)
        rows = [{"output": "x", "expected": "x"}, {"output": "x", "expected": "y"}]
        with pytest.raises(LLMEvalAssertionError, match=r"pass rate 0\.5 < min_pass_rate 1"):
            await assert_scores_async("exact_match", rows, min=1, min_pass_rate=1)

    token = current_recorder.set(recorder)
    try:
        asyncio.run(body())
    finally:
        current_recorder.reset(token)
    # score()/score_async() record nothing; each assertion (and each batch row) one record
    assert [(r.scorer, r.index, r.score, r.passed) for r in recorder.records] == [
        ("exact_match", 0, 1.0, True),
        ("exact_match", 1, 0.0, False),
        ("exact_match", 2, 1.0, True),
        ("exact_match", 3, 0.0, False),
    ]
    assert {r.case_id for r in recorder.records} == {"c1"}


class _RecordingLoop:
    """Stands in for the case loop: keeps what the main thread posts to it."""

    def __init__(self) -> None:
        self.posted: list[object] = []

    def is_closed(self) -> bool:
        return False

    def call_soon_threadsafe(self, callback: object) -> None:
        self.posted.append(callback)


def test_a_phase_wakes_the_case_loop_only_when_a_step_waits_on_the_gate() -> None:
    """The end of every setup/call/teardown phase used to post a wake-up to the case loop (a
    cross-thread write and a loop iteration per phase) even when no case step was waiting."""
    import asyncio

    from pytest_llmeval.plugin.concurrent import _Gate

    gate = _Gate()
    recording = _RecordingLoop()
    gate.loop = recording  # type: ignore[assignment]
    with gate.phase():
        assert not gate.try_enter()  # a step cannot enter during a phase
    assert recording.posted == []
    assert gate.try_enter()
    gate.leave()

    loop = asyncio.new_event_loop()
    try:
        waiter: asyncio.Future[None] = loop.create_future()
        gate._waiters.append((gate.ticket(), waiter))  # a step that found the gate closed
        with gate.phase():
            pass
        assert recording.posted == [gate._wake]
        gate._wake()
        assert waiter.done()
    finally:
        loop.close()


def _counted_wakes(gate: Any) -> list[int]:
    """The gate's wake-ups from now on, each as the number of steps it found waiting."""
    wakes: list[int] = []
    wake = gate._wake

    def counted_wake() -> None:
        wakes.append(len(gate._waiters))
        wake()

    gate._wake = counted_wake
    return wakes


class _FlagNotYetSet:
    """A gate lock as CPython's looks while the main thread has taken it but not yet got the
    GIL back: a step cannot acquire it, and ``locked()`` (the lock object's flag, set once the
    taker runs again) still says False."""

    def __init__(self) -> None:
        import threading

        self.real = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.real.acquire(blocking, timeout)

    def release(self) -> None:
        self.real.release()

    def locked(self) -> bool:
        return False


def test_steps_that_cannot_enter_while_the_main_thread_takes_the_gate_wait_without_spinning() -> (
    None
):
    """A judged run of 200 concurrent cases took 4 to 14 s instead of 2.5 s in about half the
    runs: the case loop spun (up to a million wake-ups in one run, seconds of CPU) and kept the
    GIL from the main thread. A step that found the gate closed asked the lock whether it was
    held; in the moment after the main thread took it, before the main thread ran again, the
    lock said "open", so every waiting step woke all the waiting steps again, round after
    round. Now a step that cannot enter while the main thread takes or holds the gate waits for
    the wake-up the phase's end sends, and none is lost: the steps go on, in order, after it."""
    import asyncio
    import threading

    from pytest_llmeval.plugin.concurrent import _Case, _Gate, _gated

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    gate = _Gate()
    gate.loop = loop
    gate._lock = cast(Any, _FlagNotYetSet())
    wakes = _counted_wakes(gate)
    order: list[str] = []

    async def step(name: str) -> None:
        order.append(name)

    def loop_round() -> None:  # one full round of the case loop (a barrier, not a sleep)
        done = threading.Event()
        loop.call_soon_threadsafe(done.set)
        assert done.wait(10)

    try:
        with gate.phase():
            runs = [
                asyncio.run_coroutine_threadsafe(
                    _gated(step(f"s{i}"), _Case(cast(Any, None), None, gated=True), gate), loop
                )
                for i in range(3)
            ]
            for _ in range(1000):
                if len(gate._waiters) == 3:
                    break
                threading.Event().wait(0.01)
            assert len(gate._waiters) == 3, "the steps never waited for the gate"
            for _ in range(5):
                loop_round()
            # before: a wake-up per waiting step per round, for as long as the phase lasted
            assert wakes == []
            assert order == []
        for run in runs:
            run.result(10)
        assert order == ["s0", "s1", "s2"]
        assert wakes[0] == 3  # the phase's end woke the three
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_gate_lock_left_taken_by_an_exception_makes_steps_wait_without_spinning() -> None:
    """A signal handler that raises right after the main thread took the gate's lock (another
    plugin's SIGALRM timeout, say) leaves the lock taken with the main thread out of the gate.
    The steps that cannot enter then wait, as they did before the main thread marked itself;
    they must not take the free-looking gate for a reason to wake each other every round (a
    review of the fix measured 66,432 wake-ups a second)."""
    import asyncio
    import threading

    from pytest_llmeval.plugin.concurrent import _Case, _Gate, _gated

    class Timeout(BaseException):
        pass

    class RaisesOnceTaken(_FlagNotYetSet):
        armed = True

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            taken = self.real.acquire(blocking, timeout)
            if taken and self.armed:
                self.armed = False
                raise Timeout  # the lock stays taken
            return taken

        def locked(self) -> bool:
            return self.real.locked()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    gate = _Gate()
    gate.loop = loop
    lock = RaisesOnceTaken()
    gate._lock = cast(Any, lock)
    wakes = _counted_wakes(gate)

    async def step() -> None:
        pass

    try:
        with pytest.raises(Timeout), gate.phase():
            pytest.fail("the phase ran")
        assert lock.real.locked() and not gate.held and not gate._main
        run = asyncio.run_coroutine_threadsafe(
            _gated(step(), _Case(cast(Any, None), None, gated=True), gate), loop
        )
        for _ in range(1000):
            if gate._waiters:
                break
            threading.Event().wait(0.01)
        assert gate._waiters, "the step never waited for the gate"
        for _ in range(5):  # five full rounds of the case loop (a barrier, not a sleep)
            done = threading.Event()
            loop.call_soon_threadsafe(done.set)
            assert done.wait(10)
        assert wakes == []
        lock.real.release()  # given back: the next phase's end lets the step in
        with gate.phase():
            pass
        run.result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_ctrl_c_while_the_main_thread_waits_for_the_gate_wakes_the_steps_that_wait() -> None:
    """Steps that found the gate closed while the main thread was taking it leave their wake-up
    to the main thread: a Ctrl-C that ends the wait before it took the gate must send it (else
    those steps wait forever: the run's teardown hangs)."""
    import asyncio

    from pytest_llmeval.plugin.concurrent import _Gate

    class InterruptedLock(_FlagNotYetSet):
        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            raise KeyboardInterrupt  # as ctrl_c.checkpoint() delivers it between two waits

    gate = _Gate()
    recording = _RecordingLoop()
    gate.loop = recording  # type: ignore[assignment]
    gate._lock = InterruptedLock()  # type: ignore[assignment]
    loop = asyncio.new_event_loop()
    try:
        gate._waiters.append((gate.ticket(), loop.create_future()))  # a step that waits
        with pytest.raises(KeyboardInterrupt), gate.phase():
            pytest.fail("the phase ran without the gate")
        assert gate._main is False
        assert gate.held is False
        assert recording.posted == [gate._wake]
    finally:
        loop.close()
