"""A live status line for ``--llm-eval`` runs on a terminal (controller side).

A judge-bound run can sit for minutes behind one dot. :class:`Progress` keeps one line under
pytest's output: cases done of total, cases in flight, judge calls made and answered from the
cache, spend against the budget, an ETA from the recent rate and, with ``--llm-eval-rpm`` or
``--llm-eval-tpm``, the run's time waited for the rate limit (every process's, from its file).

How it never mixes with pytest's own output, and why:

- The line lives on the terminal row *below* the one pytest is writing (pytest leaves its cursor
  mid-line while dots accumulate). Every byte pytest writes goes through its terminal writer,
  whose file we wrap in :class:`_StatusFile`. Before passing a write on, the wrapper erases the
  status row (``\\r`` + ``ESC[K``) and moves the cursor back to where pytest left it (up one
  row, right to its column). A write of text without a line break that still fits (a dot, a
  ``PASSED``) is instead written in place above the status line, which stays.
- The line is drawn only from hooks on the main thread, after the terminal reporter has written
  (hook wrappers): never from a thread, because during a test pytest's capture may point fd 1 at
  a temporary file. Its content is re-rendered at most every :data:`MIN_INTERVAL` seconds; in
  between, a line erased by pytest's output is restored with the same text.
- It is off when the output is not a terminal (or has no markup: ``TERM=dumb``, ``NO_COLOR``),
  with ``-q``, with ``-s`` outside xdist (tests print straight to the terminal), and with
  ``--llm-eval-no-progress`` / ini ``llm_eval_no_progress``.
- Done and in flight come from ``pytest_runtest_logstart``/``logfinish`` (xdist forwards both);
  the cases of an async dataset test run ahead of their own protocol (:mod:`.concurrent`), so
  each process counts its running cases, and an xdist worker carries that count on its reports
  (:data:`RUNNING_ATTR`). Judge calls, cache
  hits and spend come from the records on teardown reports; with a budget the spend is the run's
  shared spend (live, xdist workers included).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import IO, Any

import pytest

from pytest_llmeval.plugin import pytest_compat as compat

__all__ = ["MIN_INTERVAL", "RUNNING_ATTR", "SLOT_WAIT_ATTR", "Progress", "format_status"]

#: Report attribute (xdist workers): the async dataset cases running in the worker.
RUNNING_ATTR = "llm_eval_running"
#: seconds of waiting for judge slots before the status line mentions it
SLOT_WAIT_SHOWN = 0.5
#: attribute of an xdist worker's reports: [seconds it waited for judge slots, its limit]
SLOT_WAIT_ATTR = "llm_eval_slot_wait"
#: Shortest time between two renderings of the line's content, in seconds.
MIN_INTERVAL = 0.2
#: Completions the ETA's rate is measured over.
RATE_WINDOW = 20

_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def _width(text: str) -> int:
    """Terminal cells ``text`` takes (wide characters count twice)."""
    n = compat.wcswidth(text)
    return n if n >= 0 else len(text)


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_status(
    *,
    done: int,
    total: int | None,
    in_flight: int,
    judge_calls: int,
    cached: int,
    spent: float,
    budget: float | None,
    eta: float | None,
    rate_wait: float | None = None,
    slot_wait: tuple[float, int] | None = None,
) -> str:
    """The status line's text (pure, for tests and the docs). What a person needs first
    comes first, as a narrow terminal cuts the end."""
    head = f"llm-eval: {done}/{total if total is not None else '?'} cases"
    if eta is not None:
        head += f", ETA {_duration(eta)}"
    calls = f"{judge_calls} judge call{'' if judge_calls == 1 else 's'}, {cached} cached"
    spend = f"${spent:.4f}" if spent < 1 else f"${spent:.2f}"
    if budget is not None:
        spend += f"/${budget:.2f}"
    fields = [head, f"{in_flight} in flight", calls, spend]
    if rate_wait is not None:  # --llm-eval-rpm/--llm-eval-tpm: the run's wait for the limit
        fields.append(f"rate-limited {_duration(rate_wait)}")
    if slot_wait is not None and slot_wait[0] >= SLOT_WAIT_SHOWN:
        # (seconds any judge request queued for a slot, the limit): what the run waits on
        fields.append(f"waited for judge slots ({slot_wait[1]}) {_duration(slot_wait[0])}")
    return " | ".join(fields)


class _StatusFile:
    """The terminal writer's file, wrapped: keeps the status row out of pytest's way."""

    def __init__(self, real: IO[str], width: Callable[[], int]) -> None:
        self.real = real
        self.width = width
        #: the column pytest's cursor is at on its own row (what pytest wrote since the last
        #: line break or carriage return, escape sequences excluded)
        self.column = 0
        #: the status text on screen (below pytest's row), or None
        self.shown: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _back(self) -> str:
        """From the end of the status row to where pytest left its cursor, row cleared."""
        return "\r\x1b[K\x1b[A" + (f"\x1b[{self.column}C" if self.column else "")

    def write(self, text: str) -> int:
        visible = _ESCAPE.sub("", text)
        if self.shown is None or not visible:  # not visible: colours, pytest's OSC progress
            self.real.write(text)
        elif (
            "\n" not in visible
            and "\r" not in visible
            and (self.column + len(visible) < self.width() - 1)
        ):
            # In place on pytest's row; the status row stays as it is.
            self.real.write(
                "\x1b[A\r"
                + (f"\x1b[{self.column}C" if self.column else "")
                + text
                + f"\x1b[B\r\x1b[{len(self.shown)}C"
            )
        else:
            self.real.write(self._back())
            self.shown = None
            self.real.write(text)
        self._advance(visible)
        return len(text)

    def _advance(self, visible: str) -> None:
        cut = max(visible.rfind("\n"), visible.rfind("\r"))
        if cut >= 0:
            self.column = _width(visible[cut + 1 :])
        else:
            self.column += _width(visible)

    def flush(self) -> None:
        self.real.flush()

    def show(self, status: str) -> None:
        """Draw ``status`` on the row below pytest's (replacing what is there)."""
        width = self.width()
        if self.column >= width - 1:
            # pytest's line has wrapped (a long node id): where its cursor is, is not known.
            self.hide()
            return
        status = status[: max(width - 1, 0)]
        if self.shown is None:
            self.real.write("\n\r" + status)
        else:
            self.real.write("\r\x1b[K" + status)
        self.shown = status
        self.real.flush()

    def hide(self) -> None:
        if self.shown is not None:
            self.real.write(self._back())
            self.shown = None
            self.real.flush()


class Progress:
    """Controller-only plugin: the live status line (see the module docs)."""

    def __init__(self, config: pytest.Config, writer: Any, budget: float | None) -> None:
        self.config = config
        self.writer = writer
        self.budget = budget
        self.file = _StatusFile(compat.terminal_file(writer), lambda: int(writer.fullwidth))
        compat.set_terminal_file(writer, self.file)
        self.total: int | None = None
        self.started: set[str] = set()
        self.finished: set[str] = set()
        #: per xdist worker (its gateway id): its running concurrent cases, as last reported
        self.running: dict[str, int] = {}
        self.judge_calls = 0
        self.cached = 0
        self.spent = 0.0
        self.first_start: float | None = None
        self.completions: deque[float] = deque(maxlen=RATE_WINDOW + 1)
        self.rendered_at = 0.0
        self.text: str | None = None
        self.active = True
        #: live counts of this process (single-process runs): running cases, the run's spend
        self.local_running: Callable[[], int] | None = None
        self.live_spend: Callable[[], float] | None = None
        #: the run's seconds waited for --llm-eval-rpm/--llm-eval-tpm (None: no rate limit)
        self.live_rate_wait: Callable[[], float] | None = None
        #: this process's wait for judge slots (seconds, limit), or None when none waited
        self.live_slot_wait: Callable[[], tuple[float, int] | None] | None = None
        #: xdist workers' waits for judge slots (gateway id -> seconds, limit)
        self.slot_waits: dict[str, tuple[float, int]] = {}

    # -- state -------------------------------------------------------------------------------

    def in_flight(self) -> int:
        """Cases started and not finished. A worker's concurrent cases include the one in its
        protocol (already counted as started), whether it is still running or reporting."""
        started = len(self.started - self.finished)
        if self.local_running is not None:
            started = max(started, self.local_running())
        return started + sum(max(n - 1, 0) for n in self.running.values())

    def eta(self, now: float) -> float | None:
        """Seconds left at the rate of the last :data:`RATE_WINDOW` completions, measured up to
        now (a slow case in progress slows the estimate down, as it should)."""
        if self.total is None or self.first_start is None or not self.completions:
            return None
        remaining = self.total - len(self.finished)
        if remaining <= 0:
            return None
        if len(self.completions) > RATE_WINDOW:
            since, count = self.completions[0], RATE_WINDOW
        else:
            since, count = self.first_start, len(self.completions)
        if now <= since:
            return None
        return remaining * (now - since) / count

    def render(self, now: float) -> str:
        spent = self.spent
        if self.live_spend is not None:
            spent = max(spent, self.live_spend())
        return format_status(
            done=len(self.finished),
            total=self.total,
            in_flight=self.in_flight(),
            judge_calls=self.judge_calls,
            cached=self.cached,
            spent=spent,
            budget=self.budget,
            eta=self.eta(now),
            rate_wait=None if self.live_rate_wait is None else self.live_rate_wait(),
            slot_wait=self.slot_wait(),
        )

    def slot_wait(self) -> tuple[float, int] | None:
        """(seconds, largest limit) the run's processes waited for judge slots, or None."""
        waits = list(self.slot_waits.values())
        own = self.live_slot_wait() if self.live_slot_wait is not None else None
        if own is not None:
            waits.append(own)
        if not waits:
            return None
        return sum(w[0] for w in waits), max(w[1] for w in waits)

    def draw(self) -> None:
        """Restore the line if pytest's output erased it; re-render it at most every
        :data:`MIN_INTERVAL` seconds."""
        if not self.active:
            return
        now = time.monotonic()
        fresh = self.text is None or now - self.rendered_at >= MIN_INTERVAL
        if fresh:
            self.text = self.render(now)
            self.rendered_at = now
        elif self.file.shown is not None:
            return
        assert self.text is not None
        if fresh or self.file.shown is None:
            self.file.show(self.text)

    def stop(self) -> None:
        if self.active:
            self.active = False
            self.file.hide()

    def _finish(self, nodeid: str) -> None:
        if nodeid not in self.finished:
            self.finished.add(nodeid)
            self.completions.append(time.monotonic())

    # -- hooks -------------------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total or 0, len(ids))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        yield
        if self.first_start is None:
            self.first_start = time.monotonic()
        self.started.add(nodeid)
        self.draw()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        yield
        source = str(getattr(getattr(getattr(report, "node", None), "gateway", None), "id", ""))
        running = getattr(report, RUNNING_ATTR, None)
        if isinstance(running, int) and source:
            self.running[source] = running
        slot_wait = getattr(report, SLOT_WAIT_ATTR, None)
        if (
            source
            and isinstance(slot_wait, list)
            and len(slot_wait) == 2
            and isinstance(slot_wait[0], (int, float))
            and type(slot_wait[1]) is int
        ):
            self.slot_waits[source] = (float(slot_wait[0]), slot_wait[1])
        from pytest_llmeval.plugin.controller import session_key

        controller = self.config.stash.get(session_key, None)
        if controller is not None:  # the records it took from this report
            for record in controller.records_of(report):
                self.judge_calls += record.judge_calls
                self.cached += 1 if record.cached else 0
                self.spent += record.cost_usd or 0.0
        if report.when not in ("setup", "call"):  # teardown, or a crashed worker's item
            self._finish(report.nodeid)
        self.draw()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        self._finish(nodeid)
        yield
        self.draw()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop()

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self.stop()

    @pytest.hookimpl(tryfirst=True)
    def pytest_internalerror(self) -> None:
        self.stop()

    def close(self) -> None:
        """Erase the line and give the terminal writer its own file back."""
        self.stop()
        if compat.terminal_file(self.writer) is self.file:
            compat.set_terminal_file(self.writer, self.file.real)


progress_key = pytest.StashKey["Progress"]()
