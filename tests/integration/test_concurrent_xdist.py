"""Concurrent dataset cases under pytest-xdist (real ``-n 2`` runs through pytester): each worker
gets a contiguous share of a concurrent test's cases at once (pytest_llmeval/plugin/xdist_sched.py),
every case runs exactly once whatever ``--dist`` mode, and ``-x`` still stops the run.

Which worker ran a case and when is read from what each case itself wrote (its process id, its
start and end times), never from wall-clock thresholds."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from case_files import max_overlap as _max_overlap
from case_files import write_cases as _cases

pytest.importorskip("xdist")


HEADER = """
import asyncio, json, os, time
import pytest
from pytest_llmeval import assert_score_async


def log(case_id, start, end=None):
    with open("times.jsonl", "a") as f:
        f.write(json.dumps({"id": case_id, "pid": os.getpid(), "start": start, "end": end,
                            "worker": os.environ.get("PYTEST_XDIST_WORKER")}) + "\\n")
"""


# A case logs its start (end None) and its end: a case started twice shows two starts.
CONCURRENT = """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency={conc}){extra_marks}
async def test_conc(case):
    start = time.time()
    log(case.id, start)
    await asyncio.sleep({sleep})
    log(case.id, start, time.time())
    if case.id == "c03":
        assert False, "c03 fails"
    if case.id == "c05":
        pytest.skip("c05 skips")
    await assert_score_async("exact_match", output=case.expected, expected=case.expected, min=1)
"""


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def _log(p: pytest.Pytester) -> list[dict[str, object]]:
    path = p.path / "times.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _starts(p: pytest.Pytester) -> list[dict[str, object]]:
    return [e for e in _log(p) if e["end"] is None]


def _ends(p: pytest.Pytester) -> list[dict[str, object]]:
    return [e for e in _log(p) if e["end"] is not None]


def _by_worker(entries: list[dict[str, object]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in sorted(entries, key=lambda e: str(e["id"])):
        out.setdefault(str(e["worker"]), []).append(str(e["id"]))
    return out


def _junit(path: Path) -> Counter[tuple[str, str]]:
    """(case name, outcome) of every <testcase> in a JUnit XML file."""
    out: Counter[tuple[str, str]] = Counter()
    for tc in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in tc if child.tag in ("failure", "error", "skipped")]
        out[(tc.get("name", ""), kinds[0] if kinds else "passed")] += 1
    return out


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    # TMPDIR inside the test's directory: the controller's groups directory is made there
    return p.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-n", "2", *args)


@pytest.fixture
def tmpdir_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


@pytest.mark.parametrize(
    "dist", [pytest.param("load", marks=pytest.mark.smoke), "worksteal", "loadgroup"]
)
def test_each_worker_gets_a_contiguous_half_and_every_case_runs_once(
    pytester: pytest.Pytester, tmpdir_env: Path, dist: str
) -> None:
    ids = _ids(24)
    _cases(pytester, ids)
    source = HEADER + CONCURRENT.format(conc=6, sleep=0.3, extra_marks="")
    pytester.makepyfile(test_conc=source)
    junit = pytester.path / "junit.xml"
    result = _run(pytester, "--dist", dist, f"--junitxml={junit}", "-v")
    result.assert_outcomes(passed=22, failed=1, skipped=1)
    starts = _starts(pytester)
    assert sorted(str(e["id"]) for e in starts) == ids  # each case started exactly once
    shares = _by_worker(starts)
    # one contiguous half each, in dataset order
    assert sorted(shares.values()) == [ids[:12], ids[12:]], shares
    ends = _ends(pytester)
    for worker in shares:
        mine = [e for e in ends if e["worker"] == worker]
        assert _max_overlap(mine) == 6, (worker, _max_overlap(mine))  # its share, 6 at once
    outcomes = _junit(junit)
    assert outcomes[("test_conc[c03]", "failure")] == 1
    assert outcomes[("test_conc[c05]", "skipped")] == 1
    assert sum(outcomes.values()) == 24
    assert all(n == 1 for n in outcomes.values())
    result.stdout.fnmatch_lines(["*FAILED test_conc.py::test_conc[[]c03[]]*c03 fails*"])
    # the groups directory the workers wrote to is gone
    assert list(tmpdir_env.iterdir()) == []


MIXED = """
@pytest.mark.parametrize("n", range(12))
def test_sync(n):
    time.sleep(0.05 if n % 3 else 0.3)
    with open("sync.txt", "a") as f:
        f.write(f"{n}\\n")


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_more(case):
    start = time.time()
    log("more-" + case.id, start)
    await asyncio.sleep(0.05)
    log("more-" + case.id, start, time.time())
"""


@pytest.mark.parametrize("dist", ["load", "worksteal"])
def test_concurrent_and_sync_tests_together_run_once_each(
    pytester: pytest.Pytester, tmpdir_env: Path, dist: str
) -> None:
    """Two concurrent tests split across the workers, sync tests scheduled by the chosen mode
    between them: nothing runs twice, nothing is lost (work stealing takes sync tests only)."""
    ids = _ids(16)
    _cases(pytester, ids)
    source = HEADER + CONCURRENT.format(conc=4, sleep=0.2, extra_marks="") + MIXED
    pytester.makepyfile(test_mixed=source)
    result = _run(pytester, "--dist", dist)
    result.assert_outcomes(passed=14 + 12 + 16, failed=1, skipped=1)
    starts = Counter(str(e["id"]) for e in _starts(pytester))
    assert set(starts) == set(ids) | {"more-" + i for i in ids}
    assert set(starts.values()) == {1}
    sync = Counter((pytester.path / "sync.txt").read_text().split())
    assert sync == Counter(str(n) for n in range(12))
    shares = _by_worker(_starts(pytester))
    assert len(shares) == 2
    for share in shares.values():
        assert len([i for i in share if not i.startswith("more-")]) == 8


@pytest.mark.parametrize("dist", ["loadscope", "loadfile"])
def test_scope_modes_keep_the_test_on_one_worker_all_cases_queued_at_once(
    pytester: pytest.Pytester, tmpdir_env: Path, dist: str
) -> None:
    ids = _ids(12)
    _cases(pytester, ids)
    source = HEADER + CONCURRENT.format(conc=12, sleep=0.3, extra_marks="")
    pytester.makepyfile(test_conc=source)
    result = _run(pytester, "--dist", dist)
    result.assert_outcomes(passed=10, failed=1, skipped=1)
    starts = _starts(pytester)
    assert sorted(str(e["id"]) for e in starts) == ids
    assert len(_by_worker(starts)) == 1  # the module is one unit of work
    assert _max_overlap(_ends(pytester)) == 12  # queued together: all in flight at once


def test_loadgroup_keeps_a_marked_concurrent_test_in_its_group(
    pytester: pytest.Pytester, tmpdir_env: Path
) -> None:
    ids = _ids(12)
    _cases(pytester, ids)
    marks = '\n@pytest.mark.xdist_group("together")'
    source = HEADER + CONCURRENT.format(conc=12, sleep=0.3, extra_marks=marks)
    pytester.makepyfile(test_conc=source)
    result = _run(pytester, "--dist", "loadgroup")
    result.assert_outcomes(passed=10, failed=1, skipped=1)
    starts = _starts(pytester)
    assert sorted(str(e["id"]) for e in starts) == ids
    assert len(_by_worker(starts)) == 1
    assert _max_overlap(_ends(pytester)) == 12


@pytest.mark.smoke
def test_exitfirst_takes_back_the_other_workers_queued_cases(
    pytester: pytest.Pytester, tmpdir_env: Path
) -> None:
    """-x under -n 2: the first failure stops the run; the other worker's queued share is
    taken back (its cases started ahead are cancelled), so far fewer than its 30 cases run."""
    ids = _ids(60)
    _cases(pytester, ids)
    pytester.makepyfile(
        test_x=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_x(case):
    start = time.time()
    log(case.id, start)
    if case.id == "c01":
        await asyncio.sleep(0.05)
        assert False, "c01 fails"
    await asyncio.sleep(1.0)
    log(case.id, start, time.time())
"""
    )
    result = _run(pytester, "-x")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    started = Counter(str(e["id"]) for e in _starts(pytester))
    assert set(started.values()) == {1}
    second = [i for i in started if int(i[1:]) >= 30]
    # started ahead at most: 2 x concurrency (look-ahead) plus the two the worker holds, plus
    # what it could start in the time the failure took to arrive; a full share would be 30
    assert len(second) <= 15, sorted(second)
    assert outcomes.get("passed", 0) <= 15


@pytest.mark.parametrize("dist", ["load", "worksteal", "loadgroup"])
def test_a_worker_that_crashes_mid_share_hands_its_other_cases_and_tests_on(
    pytester: pytest.Pytester, tmpdir_env: Path, dist: str
) -> None:
    """A worker dies while its share is in flight: xdist reports one case as the crash, every
    other case of its share runs elsewhere, once. The crashed worker also held sync tests of the
    wrapped scheduler, queued behind its share: xdist's scheduler takes the first of them for
    the crash; it never started, so it runs again elsewhere (load and worksteal: put back by
    this scheduler; loadgroup, whose scheduler cannot put one item back: its whole unfinished
    work goes back by itself). None is lost, none runs twice."""
    ids = _ids(16)
    _cases(pytester, ids)
    pytester.makepyfile(
        test_crash=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_crash(case):
    start = time.time()
    log(case.id, start)
    await asyncio.sleep(0.2)
    if case.id == "c04" and not os.path.exists("crashed"):
        open("crashed", "w").close()
        os._exit(3)
    log(case.id, start, time.time())
""",
        test_zsync="""
import time
import pytest

@pytest.mark.parametrize("n", range(8))
def test_sync(n):
    time.sleep(0.05)
    with open("sync.txt", "a") as f:
        f.write(f"{n}\\n")
""",
    )
    junit = pytester.path / "junit.xml"
    result = _run(pytester, "--dist", dist, f"--junitxml={junit}")
    result.assert_outcomes(passed=15 + 8, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*test_crash*"])
    sync = Counter((pytester.path / "sync.txt").read_text().split())
    assert sync == Counter(str(n) for n in range(8))  # each sync test ran, once
    outcomes = _junit(junit)
    assert sum(outcomes.values()) == 16 + 8
    assert all(n == 1 for n in outcomes.values())
    not_passed = [name for (name, kind) in outcomes if kind != "passed"]
    assert len(not_passed) == 1 and not_passed[0].startswith("test_crash[")
    ended = Counter(str(e["id"]) for e in _ends(pytester))
    assert set(ended.values()) == {1}  # no case finished twice
    cases = sorted(name for name, _ in outcomes if name.startswith("test_crash["))
    assert cases == [f"test_crash[{i}]" for i in ids]
    passed = {
        name[len("test_crash[") : -1]
        for (name, kind) in outcomes
        if kind == "passed" and name.startswith("test_crash[")
    }
    assert len(passed) == 15 and passed <= set(ended)  # each passed case really ran, once


@pytest.mark.parametrize("dist", ["load", "loadgroup"])
def test_a_crash_after_a_cases_call_report_does_not_report_that_case_twice(
    pytester: pytest.Pytester, tmpdir_env: Path, dist: str
) -> None:
    """The worker dies after a case's call report went out and before its teardown report
    (here its own fixture's teardown kills it; under load, another case in flight can do the
    same between the two reports). The case's outcome is known: it is not reported a second
    time as the crash (that counted it twice, passed and failed); the crash goes to the next
    case due, and every other case runs once elsewhere."""
    ids = _ids(8)
    _cases(pytester, ids)
    pytester.makepyfile(
        test_late=HEADER
        + """
@pytest.fixture
def guard(case):
    yield
    if case.id == "c02" and not os.path.exists("crashed"):
        open("crashed", "w").close()
        os._exit(3)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_late(case, guard):
    start = time.time()
    log(case.id, start)
    await asyncio.sleep(0.05)
    log(case.id, start, time.time())
"""
    )
    junit = pytester.path / "junit.xml"
    result = _run(pytester, "--dist", dist, f"--junitxml={junit}")
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*test_late*"])
    outcomes = _junit(junit)
    names = Counter(name for name, _ in outcomes.elements())
    assert names == Counter(f"test_late[{i}]" for i in ids)  # every case once, none twice
    assert outcomes[("test_late[c02]", "passed")] == 1
    result.assert_outcomes(passed=7, failed=1)
    # c02's scores travel with its teardown report, which never came, and c03 never ran: the
    # run is incomplete
    result.stdout.fnmatch_lines(
        [
            "*worker 'gw*' crashed while running 'test_late.py::test_late[[]c03[]]'",
            "*2 selected llm_eval item(s) never reported (first: *test_late[[]c02[]])*",
        ]
    )
    assert result.ret != 0
