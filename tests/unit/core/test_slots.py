"""Judge slots: first come first served, a limit that follows demand unless set, cancellation
that never leaks a slot, and the accounting of waits (core/slots.py)."""

from __future__ import annotations

import asyncio
import math

import pytest

from pytest_llmeval.core.slots import (
    AUTO_FLOOR,
    JudgeSlots,
    SlotDemand,
    SlotWaits,
    slot_waits_line,
)


async def _hold(slots: JudgeSlots, order: list[int], i: int, release: asyncio.Event) -> None:
    async with slots:
        order.append(i)
        await release.wait()


def test_the_automatic_limit_is_the_floor_until_something_asks_for_more() -> None:
    demand = SlotDemand()
    assert JudgeSlots(None, demand).limit == AUTO_FLOOR == 8
    demand.want(3, "t::small")
    assert JudgeSlots(None, demand).limit == 8  # never below the floor
    demand.want(32, "t::big")
    demand.want(12, "t::medium")  # only grows
    assert JudgeSlots(None, demand).limit == 32
    assert demand.wanted_by == "t::big"
    assert JudgeSlots(5, demand).limit == 5  # a limit the user set is kept


def test_requests_beyond_the_limit_queue_in_order_and_are_counted() -> None:
    async def main() -> tuple[list[int], SlotWaits | None, int]:
        demand = SlotDemand()
        slots = JudgeSlots(2, demand)
        release = asyncio.Event()
        order: list[int] = []
        tasks = [asyncio.create_task(_hold(slots, order, i, release)) for i in range(5)]
        await asyncio.sleep(0.05)
        in_use = slots.in_use
        assert order == [0, 1]
        release.set()
        await asyncio.gather(*tasks)
        return order, demand.waits(), in_use

    order, waits, in_use = asyncio.run(main())
    assert in_use == 2
    assert order == [0, 1, 2, 3, 4]
    assert waits is not None
    assert (waits.limit, waits.waited, waits.explicit) == (2, 3, True)
    assert 0.04 <= waits.seconds < 5


def test_a_limit_that_grows_lets_queued_requests_go_at_once() -> None:
    """A queue formed under the floor drains as soon as demand grows (the next arrival wakes
    it; no request waits for a release that the old limit would have needed)."""

    async def main() -> int:
        demand = SlotDemand()
        slots = JudgeSlots(None, demand)
        release = asyncio.Event()
        order: list[int] = []
        tasks = [asyncio.create_task(_hold(slots, order, i, release)) for i in range(10)]
        await asyncio.sleep(0.02)
        assert len(order) == 8
        demand.want(12, "t::grown")
        tasks.append(asyncio.create_task(_hold(slots, order, 10, release)))
        await asyncio.sleep(0.02)
        running = len(order)
        release.set()
        await asyncio.gather(*tasks)
        return running

    assert asyncio.run(main()) == 11


def test_cancelled_waiters_never_leak_or_block_a_slot() -> None:
    async def main() -> tuple[int, list[int]]:
        demand = SlotDemand()
        slots = JudgeSlots(1, demand)
        release = asyncio.Event()
        order: list[int] = []
        first = asyncio.create_task(_hold(slots, order, 0, release))
        await asyncio.sleep(0.01)
        queued = asyncio.create_task(_hold(slots, order, 1, release))
        await asyncio.sleep(0.01)
        queued.cancel()  # cancelled while queued
        await asyncio.gather(queued, return_exceptions=True)
        release.set()
        await first
        # granted by the release, then cancelled before it ran: the slot comes back
        release.clear()
        holder = asyncio.create_task(_hold(slots, order, 2, release))
        await asyncio.sleep(0.01)
        granted = asyncio.create_task(_hold(slots, order, 3, release))
        await asyncio.sleep(0.01)
        release.set()
        await holder
        granted.cancel()
        await asyncio.gather(granted, return_exceptions=True)
        late = asyncio.create_task(_hold(slots, order, 4, release))
        await asyncio.wait_for(late, 2)
        return slots.in_use, order

    in_use, order = asyncio.run(main())
    assert in_use == 0
    assert order[:2] == [0, 2] and order[-1] == 4 and 1 not in order


@pytest.mark.parametrize(
    "data",
    [
        None,
        "x",
        [8, 3, 1.0],
        [0, 3, 1.0, False],
        [8, -1, 1.0, False],
        [8, 3, math.nan, False],
        [8, 3, math.inf, False],
        [8, 3, -1.0, False],
        [True, 3, 1.0, False],
        [8, 3, 1.0, "yes"],
        [8.0, 3, 1.0, False],
    ],
)
def test_a_workers_malformed_waits_are_ignored(data: object) -> None:
    assert SlotWaits.from_json(data) is None


def test_waits_round_trip_add_up_and_read_as_a_line() -> None:
    a = SlotWaits(8, 3, 1.25, False)
    b = SlotWaits.from_json(SlotWaits(4, 5, 2.0, True).to_json())
    assert b == SlotWaits(4, 5, 2.0, True)
    total = a + b
    assert total == SlotWaits(8, 8, 3.25, True)
    assert slot_waits_line(SlotWaits(4, 1, 0.5, True), "--llm-eval-concurrency") == (
        "judge slots 4 per process (--llm-eval-concurrency): 1 judge request queued for a free "
        "slot; the queue lasted 0.5 s in all"
    )
    # the seconds are the queue's wall time, not a sum of the requests' waits: the line says so
    assert slot_waits_line(a, "unused") == (
        "judge slots 8 per process (automatic; --llm-eval-concurrency sets it): 3 judge "
        "requests queued for a free slot; the queue lasted 1.2 s in all"
    )
