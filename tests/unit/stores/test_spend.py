"""The run's shared judge spend: one locked file, exact under concurrent writers."""

from __future__ import annotations

import math
import multiprocessing
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_llmeval.core.scores import Usage
from pytest_llmeval.core.usage import UsageLedger
from pytest_llmeval.stores.spend import SharedSpend, shared_spend_supported

pytestmark = pytest.mark.skipif(not shared_spend_supported(), reason="needs fcntl (POSIX)")


def _add_many(path: str, times: int) -> None:
    spend = SharedSpend(path)
    for _ in range(times):
        spend.add(0.25)


def test_starts_at_zero_adds_and_is_removed() -> None:
    spend = SharedSpend.create()
    try:
        assert spend.total() == 0.0
        assert spend.add(1.5) == 1.5
        assert spend.add(0.25) == 1.75
        assert SharedSpend(spend.path).total() == 1.75  # another handle reads the same total
    finally:
        spend.remove()
    assert not spend.path.exists()
    assert spend.total() == 0.0  # the run is over: nothing spent any more


def test_concurrent_processes_lose_no_addition() -> None:
    spend = SharedSpend.create()
    try:
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_add_many, args=(str(spend.path), 200)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert spend.total() == 4 * 200 * 0.25
    finally:
        spend.remove()


def test_damaged_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "spend.bin"
    path.write_bytes(b"\x00\x01")
    with pytest.raises(OSError, match="spend file is damaged"):
        SharedSpend(path).total()
    path.write_bytes(struct.pack("<d", 2.0))
    assert SharedSpend(path).total() == 2.0


def test_ledger_reports_the_shared_total() -> None:
    spend = SharedSpend.create()
    try:
        spend.add(3.0)  # another process's calls
        ledger = UsageLedger(spend)
        ledger.add(Usage(prompt_tokens=10, completion_tokens=1, calls=1, cost_usd=0.5))
        ledger.add(Usage(prompt_tokens=10, completion_tokens=1, calls=1))  # unpriced model
        assert ledger.spent_usd == 3.5
        assert ledger.total.cost_usd == 0.5  # this process's own usage stays its own
        assert ledger.total.calls == 2
        assert UsageLedger().spent_usd == 0.0
    finally:
        spend.remove()


def test_a_spend_file_that_is_gone_never_loses_a_paid_result(tmp_path: Path) -> None:
    """A worker that cannot reach the file keeps its own count; the call's result stands."""
    ledger = UsageLedger(SharedSpend(tmp_path / "gone.bin"))
    with pytest.warns(RuntimeWarning, match="counts this process's judge calls only"):
        ledger.add(Usage(prompt_tokens=10, completion_tokens=1, calls=1, cost_usd=1.0))
    ledger.add(Usage(prompt_tokens=10, completion_tokens=1, calls=1, cost_usd=1.0))
    assert ledger.spent_usd == 2.0  # its own calls still count against the budget
    assert ledger.shared_error is not None and "gone.bin" in ledger.shared_error


def test_files_of_runs_that_died_are_removed() -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    tmp = Path(tempfile.gettempdir())
    stale = tmp / f"llmeval-spend-{int(dead.stdout)}-abc.bin"
    stale.write_bytes(struct.pack("<d", 1.0))
    mine = tmp / f"llmeval-spend-{os.getpid()}-xyz.bin"  # a live run's file stays
    mine.write_bytes(struct.pack("<d", 1.0))
    spend = SharedSpend.create()
    try:
        assert not stale.exists()
        assert mine.exists()
        assert spend.path.name.startswith(f"llmeval-spend-{os.getpid()}-")
    finally:
        spend.remove()
        mine.unlink()


@pytest.mark.parametrize("value", [math.nan, -math.inf, math.inf, -1.0], ids=str)
def test_a_spend_file_holding_no_amount_is_damaged_never_used(tmp_path: Path, value: float) -> None:
    """NaN made every budget check false (no budget at all); a negative total added to the
    budget. Either is a damaged file: the ledger says so once and counts its own calls."""
    path = tmp_path / "spend.bin"
    path.write_bytes(struct.pack("<d", value))
    with pytest.raises(OSError, match=r"spend file is damaged .*not an amount of dollars"):
        SharedSpend(path).total()
    with pytest.raises(OSError, match="not an amount of dollars"):
        SharedSpend(path).add(1.0)
    ledger = UsageLedger(SharedSpend(path))
    with pytest.warns(RuntimeWarning, match="counts this process's judge calls only"):
        ledger.add(Usage(prompt_tokens=10, completion_tokens=1, calls=1, cost_usd=2.0))
    assert ledger.spent_usd == 2.0  # this process's own calls, never NaN or less than them
