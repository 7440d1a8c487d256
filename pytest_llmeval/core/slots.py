"""Judge slots: how many judge requests one process has in flight at once.

A limit the user sets (``--llm-eval-concurrency``, ini ``llm_eval_concurrency``,
``JudgeSettings(concurrency=N)``) is kept as set. Left unset, the limit follows demand: it is
:data:`AUTO_FLOOR`, or more when something of the run asks for more calls at once (a
``llm_eval_dataset(concurrency=32)`` test, ``score_many(max_concurrency=32)``), so that a
test's case concurrency is never held back by a smaller judge limit nobody chose. The limit
only grows during a run.

What the slots cost is counted: the requests that had to queue for one and the wall time during
which any request was queued (a union, as with the judge clock: 32 requests queued together for
one second are one second). The live status line and the summary show it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, final

#: judge requests in flight per process when nobody set a limit and nothing asked for more
AUTO_FLOOR = 8


class JudgeSlotsWarning(UserWarning):
    """A judge limit the user set is smaller than a test's (or a batch's) case concurrency."""


@final
@dataclass(frozen=True)
class SlotWaits:
    """What waiting for judge slots cost (one process, or a run's processes summed)."""

    limit: int
    """the largest limit any of these processes had"""
    waited: int
    """judge requests that queued for a slot"""
    seconds: float
    """wall time with at least one request queued (summed over processes)"""
    explicit: bool = False
    """the limit was set by the user (not grown to demand)"""

    def __add__(self, other: SlotWaits) -> SlotWaits:
        return SlotWaits(
            max(self.limit, other.limit),
            self.waited + other.waited,
            self.seconds + other.seconds,
            self.explicit or other.explicit,
        )

    def to_json(self) -> list[Any]:
        return [self.limit, self.waited, round(self.seconds, 6), self.explicit]

    @classmethod
    def from_json(cls, data: Any) -> SlotWaits | None:
        """Read back :meth:`to_json` (from an xdist worker); None for anything malformed."""
        if not isinstance(data, list) or len(data) != 4:
            return None
        limit, waited, seconds, explicit = data
        if (
            type(limit) is not int
            or type(waited) is not int
            or type(seconds) not in (int, float)
            or type(explicit) is not bool
            or limit < 1
            or waited < 0
            or not 0 <= seconds < float("inf")
        ):
            return None
        return cls(limit, waited, float(seconds), explicit)


class SlotDemand:
    """This process's demand for judge slots, and what waiting for them cost (thread-safe: the
    slots live on an event loop, the status line reads from the main thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: the most calls in flight anything asked for, and who asked
        self.wanted = AUTO_FLOOR
        self.wanted_by: str | None = None
        self._waited = 0
        self._queued = 0
        self._queued_since = 0.0
        self._seconds = 0.0
        self._limit = 0
        self._explicit = False

    def want(self, n: int, who: str) -> None:
        """Ask for ``n`` judge calls in flight at once on behalf of ``who``: slots with no limit
        set grow to it (at their next grant)."""
        with self._lock:
            if n > self.wanted:
                self.wanted, self.wanted_by = n, who

    def auto_limit(self) -> int:
        return max(AUTO_FLOOR, self.wanted)

    # -- the accounting (called on the slots' loop) ---------------------------------------------

    def _queue(self, delta: int, limit: int = 0, explicit: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if delta > 0:
                self._waited += 1
                self._limit = max(self._limit, limit)
                self._explicit = self._explicit or explicit
                if self._queued == 0:
                    self._queued_since = now
            self._queued += delta
            if self._queued == 0:
                self._seconds += now - self._queued_since

    def waiting(self) -> tuple[float, int]:
        """(seconds with a request queued, requests that queued), the current wait included."""
        now = time.monotonic()
        with self._lock:
            current = now - self._queued_since if self._queued else 0.0
            return self._seconds + current, self._waited

    def waits(self) -> SlotWaits | None:
        """What waiting cost, or None when no request waited."""
        seconds, waited = self.waiting()
        if not waited:
            return None
        with self._lock:
            return SlotWaits(max(1, self._limit), waited, seconds, self._explicit)


@final
class JudgeSlots:
    """Judge requests in flight on one event loop: first come, first served, up to ``fixed``
    (a limit the user set) or else the demand's automatic limit, read at every grant (a limit
    that grew lets queued requests go at the next release)."""

    def __init__(self, fixed: int | None, demand: SlotDemand) -> None:
        self.fixed = None if fixed is None else max(1, int(fixed))
        self.demand = demand
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self.fixed if self.fixed is not None else self.demand.auto_limit()

    async def __aenter__(self) -> None:
        limit = self.limit
        if not self._waiters and self.in_use < limit:
            self.in_use += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.wake()  # the limit may have grown since the queue formed
        if fut.done():
            return
        self.demand._queue(+1, limit, self.fixed is not None)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted, then cancelled before it could run: give it back
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass  # already dropped by wake()
            raise
        finally:
            self.demand._queue(-1)

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.in_use -= 1
        self.wake()

    def wake(self) -> None:
        """Grant free slots to queued requests, in order (cancelled ones are skipped)."""
        limit = self.limit
        while self._waiters and self.in_use < limit:
            fut = self._waiters.popleft()
            if fut.done():
                continue
            self.in_use += 1
            fut.set_result(None)


def slot_waits_line(waits: SlotWaits, source: str) -> str:
    """The summary's line about judge slots; ``source`` is where a limit the user set came
    from (``--llm-eval-concurrency``, ``ini llm_eval_concurrency``...)."""
    how = (
        f"{waits.limit} per process ({source})"
        if waits.explicit
        else f"{waits.limit} per process (automatic; --llm-eval-concurrency sets it)"
    )
    n = waits.waited
    # the seconds are the queue's wall time (a union), not the sum of each request's wait: said
    # so, since the rate limit's line beside it sums the requests' waits
    return (
        f"judge slots {how}: {n} judge request{'' if n == 1 else 's'} queued for a free slot; "
        f"the queue lasted {waits.seconds:.1f} s in all"
    )
