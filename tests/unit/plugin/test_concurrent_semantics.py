"""Async dataset cases keep the semantics of plain pytest where a review found them broken:
timeouts that the case swallows, ``caplog``/``capsys``/``monkeypatch``, hanging async fixtures,
suite gates with the async assertions, tasks a case leaves behind, return values, ``-x`` with
``xfail(raises=...)``. Each behaviour is compared with what pytest does for the same sync test,
through real pytest runs (pytester)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_llmeval.testing import OpenAITestServer, text

#: how long one thread of a test waits for another (a guard against a hang, not a time limit:
#: the suite may run beside other CPU-heavy work)
_PATIENCE = 300


def test_a_case_step_waiting_for_the_gate_goes_before_steps_that_come_later() -> None:
    """Which of several identical judged scorings in flight pays the judge (the others read its
    result) is the first to get there: the first case, as one after the other, if the cases'
    steps pass the gate in the order they came to it. A step that found the gate held waited
    for the wake-up the gate's opening sends; a step scheduled before that wake-up ran first,
    found the gate open and went ahead (seen under load: repeat sample s1 paid the judge and s0
    read the cache, the records differed from concurrency 1)."""
    import asyncio
    import threading
    from typing import Any, cast

    from pytest_llmeval.plugin.concurrent import _Case, _Gate, _gated

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    gate = _Gate()
    gate.loop = loop
    order: list[str] = []

    async def first_step(name: str) -> None:
        order.append(name)

    def case() -> _Case:
        return _Case(cast(Any, None), None, gated=True)

    created = threading.Event()
    go_on = threading.Event()
    tasks: list[asyncio.Task[None]] = []

    def start_s1_then_stall() -> None:
        # (case loop) s1's first step is scheduled now, before the wake-up the gate's opening
        # will schedule; this callback then holds the loop until the main thread has opened it
        tasks.append(loop.create_task(_gated(first_step("s1"), case(), gate)))
        created.set()
        go_on.wait(10)

    try:
        with gate.phase():
            s0 = asyncio.run_coroutine_threadsafe(_gated(first_step("s0"), case(), gate), loop)
            for _ in range(1000):  # s0 waits for the gate (a barrier, not a sleep)
                if gate._waiters:
                    break
                threading.Event().wait(0.01)
            assert gate._waiters, "s0 never waited for the gate"
            loop.call_soon_threadsafe(start_s1_then_stall)
            assert created.wait(10)
        go_on.set()
        s0.result(10)
        for _ in range(1000):
            if len(order) == 2:
                break
            threading.Event().wait(0.01)
        assert order == ["s0", "s1"]
    finally:
        go_on.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_an_identical_judged_scoring_that_just_finished_elsewhere_is_read_not_paid_again(
    judge_server: OpenAITestServer, tmp_path: Path
) -> None:
    """``score_async`` from two threads' event loops (one scoring context): B looks in the cache
    while A's judge call is in flight (a miss), A stores its result and leaves the in-flight
    table, then B finds nobody in flight and called the judge a second time for the same key.
    B now looks again when a scoring finished meanwhile, and reads A's result."""
    import asyncio
    import contextvars
    import dataclasses
    import threading

    from judges import judge_test_settings

    from pytest_llmeval import score_async
    from pytest_llmeval.engine.context import ScoringContext, set_context
    from pytest_llmeval.stores.cache import ResultCache

    b_missed = threading.Event()
    a_done = threading.Event()
    # which scoring asks (judged scorings read the store on a store thread, in their context)
    who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")

    class MissesWaitForA(ResultCache):
        """The real store; B's miss returns only once A is done (the interleaving)."""

        def get(self, key: str) -> dict[str, Any] | None:
            value = super().get(key)
            if value is None and who.get() == "B":
                b_missed.set()
                # (A's whole scoring, the openai import on its judge thread included, can take
                # a minute on a machine busy with other work: the wait only guards a hang)
                assert a_done.wait(_PATIENCE)
            return value

    settings = dataclasses.replace(
        judge_test_settings(judge_server.base_url, tmp_path), cache_mode="use"
    )
    ctx = ScoringContext(settings, cache=MissesWaitForA(tmp_path / "cache"))
    previous = set_context(ctx)
    judge_server.set_default(text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)]))
    scores: dict[str, Any] = {}

    def scoring(name: str) -> None:
        who.set(name)
        scores[name] = asyncio.run(score_async("l3score", input="q", output="a", expected="a"))

    try:
        b = threading.Thread(target=scoring, args=("B",), name="B")
        b.start()
        assert b_missed.wait(_PATIENCE)  # B's lookup missed; it goes on once A is done
        scoring("A")  # A: a miss, nobody in flight, the judge, stored, out of the table
        a_done.set()
        b.join(_PATIENCE)
        assert not b.is_alive()
    finally:
        a_done.set()
        set_context(previous)
        ctx.close()
    assert len(judge_server.requests_to("chat")) == 1
    assert (scores["A"].cached, scores["B"].cached) == (False, True)
    assert scores["A"].value == scores["B"].value
