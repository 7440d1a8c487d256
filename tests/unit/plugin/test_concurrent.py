"""Concurrent dataset cases through real pytest runs (pytester): async ``llm_eval_dataset`` tests
run their cases at once on one loop, and every case keeps pytest's semantics (its own outcome,
report, captured output, JUnit entry, fixtures; ``-x``, ``-k``, ``--lf``, xdist, Ctrl-C).

Concurrency is proven from the cases' own recorded start/end times (how many overlapped), not
from wall-clock thresholds."""

from __future__ import annotations

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


def test_a_phase_wakes_the_case_loop_only_when_a_step_waits_on_the_gate() -> None:
    """The end of every setup/call/teardown phase used to post a wake-up to the case loop (a
    cross-thread write and a loop iteration per phase) even when no case step was waiting."""
    import asyncio

    from pytest_llmeval.plugin.concurrent import _Gate

    class RecordingLoop:
        def __init__(self) -> None:
            self.posted: list[object] = []

        def is_closed(self) -> bool:
            return False

        def call_soon_threadsafe(self, callback: object) -> None:
            self.posted.append(callback)

    gate = _Gate()
    recording = RecordingLoop()
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
