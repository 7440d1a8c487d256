"""Where the usage of judge calls is counted: the collector of the scoring in progress (a context
variable that follows a scoring across threads and event loops), the run's ledger, and the clock
of time spent waiting on the judge."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol, final

from pytest_llmeval.core import aio as _aio
from pytest_llmeval.core.scores import Usage
from pytest_llmeval.core.slots import SlotDemand


@final
class JudgeClock:
    """The judge time of one scoring: the wall-clock time during which at least one of its
    judge calls was waiting on the endpoint (a request in flight, or a wait between tries).

    Time spent queueing for a free concurrency slot or for the run's rate limit
    (``--llm-eval-rpm``/``--llm-eval-tpm``) does not count: a batch of a thousand scorings must
    not time out behind its own queue. Parallel calls of one scoring (several
    questions at once) count once, not once each. So a per-scoring deadline checked against
    :meth:`elapsed` before each request, with the request bounded by what is left, holds
    whatever the server does.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._since = 0.0
        self._spent = 0.0

    def elapsed(self) -> float:
        with self._lock:
            if self._active:
                return self._spent + (time.monotonic() - self._since)
            return self._spent

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Count the time inside the block (once, however many blocks overlap)."""
        with self._lock:
            if self._active == 0:
                self._since = time.monotonic()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._spent += time.monotonic() - self._since


_NO_USAGE = Usage()  # immutable: every collector starts from the same zero


@final
class UsageCollector:
    """The judge usage of one scoring (all its calls, also when it ends in an error) and its
    judge time (for the per-scoring deadline)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = _NO_USAGE
        self.clock = JudgeClock()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.total = self.total + usage


#: The collector of the scoring running in this context (set by the assertion functions).
current_usage: ContextVar[UsageCollector | None] = ContextVar("llm_eval_usage", default=None)
_aio.PROPAGATED.append(current_usage)


class SpendTotal(Protocol):
    """A run-wide sum of dollars shared by processes (:class:`pytest_llmeval.stores.spend.
    SharedSpend` is the one the plugin uses)."""

    @property
    def path(self) -> object: ...

    def add(self, usd: float) -> float: ...

    def total(self) -> float: ...


@final
class UsageLedger:
    """This process's totals of judge usage; the budget is checked against :attr:`spent_usd`.

    With ``shared`` (a pytest run, xdist workers included) the dollars also go to the run's
    shared spend file and :attr:`spent_usd` is the whole run's spend.
    """

    def __init__(self, shared: SpendTotal | None = None) -> None:
        self._lock = threading.Lock()
        self._total = Usage()
        self.shared = shared
        #: why the shared spend could not be used (then only this process's spend counts)
        self.shared_error: str | None = None
        #: endpoint -> judge requests in a row that ended in timeouts (reset by any reply); the
        #: judge client stops waiting on an endpoint that never answers (see its _call)
        self.stalls: dict[str, int] = {}
        #: judge slots asked for in this process, and what waiting for them cost
        self.slots = SlotDemand()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self._total = self._total + usage
        collector = current_usage.get()
        if collector is not None:
            collector.add(usage)
        if self.shared is not None and usage.cost_usd:
            try:
                self.shared.add(usage.cost_usd)
            except OSError as exc:
                # The call is paid and its result stands; only the run-wide sum is lost.
                self._shared_failed(exc)

    @property
    def total(self) -> Usage:
        with self._lock:
            return self._total

    @property
    def spent_usd(self) -> float:
        """The run's spend when shared (never less than this process's own), else this
        process's."""
        own = self.total.cost_usd or 0.0
        if self.shared is None:
            return own
        try:
            return max(float(self.shared.total()), own)
        except OSError as exc:
            self._shared_failed(exc)
            return own

    def _shared_failed(self, exc: OSError) -> None:
        first = self.shared_error is None
        self.shared_error = f"{self.shared.path if self.shared else '?'}: {exc}"
        if first:
            import warnings

            warnings.warn(
                f"llm-eval: the run's spend file could not be used ({self.shared_error}); "
                "--llm-eval-budget now counts this process's judge calls only",
                RuntimeWarning,
                stacklevel=3,
            )
