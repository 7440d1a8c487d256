"""Run history (issue 10): numbered saved runs under <cache dir>/runs/, concurrent saves,
--llm-eval-history / --llm-eval-no-history, baseline resolution, and JUnit properties."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from pytest_llmeval.core.errors import BaselineError
from pytest_llmeval.stores.history import (
    list_runs,
    load_run,
    prune_runs,
    resolve_baseline,
    run_path,
    save_run,
)


def _report(tag: str) -> dict[str, object]:
    return {"version": 1, "run": {"tag": tag}, "records": []}


def test_runs_are_numbered_in_order(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    assert list_runs(d) == []
    assert [save_run(d, _report(str(i))) for i in range(3)] == [1, 2, 3]
    assert list_runs(d) == [1, 2, 3]
    run = load_run(d, 2)
    assert run["number"] == 2 and run["report"]["run"] == {"tag": "1"}
    assert run["format"] == "pytest-llmeval-run"
    assert sorted(p.name for p in d.iterdir()) == ["0001.json", "0002.json", "0003.json"]


def test_a_claimed_number_is_skipped(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    save_run(d, _report("a"))
    (d / "0002.claim").touch()  # a concurrent run is writing 2 (or crashed doing so)
    assert save_run(d, _report("b")) == 3
    assert list_runs(d) == [1, 3]


def _save_many(args: tuple[str, int]) -> list[int]:
    directory, k = args
    return [save_run(Path(directory), _report(f"{k}-{i}")) for i in range(5)]


def test_concurrent_saves_never_overwrite_each_other(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(6) as pool:
        results = pool.map(_save_many, [(str(d), k) for k in range(6)])
    numbers = [n for r in results for n in r]
    assert sorted(numbers) == list(range(1, 31))  # 30 saves, 30 distinct numbers, no gap
    tags = {json.loads(run_path(d, n).read_text())["report"]["run"]["tag"] for n in numbers}
    assert len(tags) == 30  # every save is its own, complete file
    assert not [p for p in d.iterdir() if not p.name.endswith(".json")]  # no claim or temp left


def test_prune_keeps_the_newest_and_the_baseline(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    for i in range(5):
        save_run(d, _report(str(i)))
    # none of these runs was checked against a baseline: `last` names the first (the bootstrap),
    # and pruning keeps it
    assert prune_runs(d, 2) == [2, 3]
    assert list_runs(d) == [1, 4, 5]
    assert save_run(d, _report("x")) == 6  # numbers are not reused
    checked = {
        "passed": True,
        "failure": None,
        "checked": True,
        "regressions": 0,
        "problems": 0,
        "shard": False,
        "selection": None,
    }
    save_run(d, _report("checked"), summary=checked)  # run 7 passed its check
    save_run(d, _report("y"))
    assert prune_runs(d, 1) == [1, 4, 5, 6]  # the baseline is now run 7
    assert list_runs(d) == [7, 8]


def test_resolve_baseline(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    assert resolve_baseline("last", d, tmp_path).path is None
    assert resolve_baseline("last", d, tmp_path).choice == "no saved run yet"
    save_run(d, _report("a"))
    save_run(d, _report("b"))
    # neither was checked against a baseline: the first that passed is the reference
    assert resolve_baseline("last", d, tmp_path).path == run_path(d, 1)
    assert resolve_baseline("last", d, tmp_path).passed_over == (
        (2, "never checked against a baseline"),
    )
    assert resolve_baseline("1", d, tmp_path).path == run_path(d, 1)
    with pytest.raises(BaselineError, match=r"no saved run 9 .*saved runs: 1\.\.2"):
        resolve_baseline("9", d, tmp_path)
    (tmp_path / "r.json").write_text("{}")
    assert resolve_baseline("r.json", d, tmp_path).path == tmp_path / "r.json"
