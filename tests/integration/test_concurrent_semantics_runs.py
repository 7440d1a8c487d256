"""Async dataset cases keep the semantics of plain pytest where a review found them broken:
timeouts that the case swallows, ``caplog``/``capsys``/``monkeypatch``, hanging async fixtures,
suite gates with the async assertions, tasks a case leaves behind, return values, ``-x`` with
``xfail(raises=...)``. Each behaviour is compared with what pytest does for the same sync test,
through real pytest runs (pytester)."""

from __future__ import annotations

import json

import pytest
from case_files import read_events as _events
from case_files import write_cases as _cases

from pytest_llmeval.testing import OpenAITestServer, delay, text

HEADER = """
import asyncio, logging, os, time
import pytest
from pytest_llmeval import assert_score, assert_score_async


def event(text):
    with open("events.txt", "a") as f:
        f.write(text + "\\n")
"""


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)


def test_a_case_that_swallows_its_timeout_is_still_its_error(pytester: pytest.Pytester) -> None:
    """A body that catches the timeout's cancellation and returns was a PASS: it is the case's
    ERROR. One that catches it and goes on waiting is cancelled again, then reported as stuck
    and left behind; the other cases pass."""
    _cases(pytester, ["ok", "swallows", "persists", "ok2"])
    pytester.makepyfile(
        test_t=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_t(case):
    if case.id == "swallows":
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            pass  # e.g. a library that swallows cancellation
        return
    if case.id == "persists":
        while True:
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                event("cancelled persists")
    await assert_score_async("exact_match", output=case.expected, expected=case.expected, min=1)
"""
    )
    result = _run(pytester, "--llm-eval", "-v", "--llm-eval-case-timeout=0.5")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_t[[]ok[]] PASSED*",
            "*test_t[[]swallows[]] ERROR*",
            "*test_t[[]persists[]] ERROR*",
            "*test_t[[]ok2[]] PASSED*",
        ]
    )
    out = result.stdout.str()
    assert "test_t[swallows]: the case did not finish within --llm-eval-case-timeout=0.5s" in out
    assert "test_t[persists]: the case did not finish within --llm-eval-case-timeout=0.5s and " in (
        out
    )
    assert "went on after being cancelled" in out
    # cancelled again 5 times, a second apart (and once more when the run ends)
    assert _events(pytester).count("cancelled persists") >= 5
    # the summary names the timeouts as such, not as an unknown scorer
    result.stdout.fnmatch_lines(["(case timeout)  2  *  0       0       2 *"])
    # the error shows the message, not the plugin's or pytest's internals
    assert "def pytest_pyfunc_call" not in out and "_pytest/runner.py" not in out


def test_a_hanging_async_fixture_is_its_cases_error_and_blocks_no_other_case(
    pytester: pytest.Pytester,
) -> None:
    """The timeout bounds async fixtures too (the run hung for good). The cases held up
    meanwhile (pytest's setup phase of the hanging case holds the others) are not blamed."""
    _cases(pytester, ["c0", "c1", "c2", "c3"])
    pytester.makepyfile(
        test_h=HEADER
        + """
@pytest.fixture
async def conn(case):
    if case.id == "c1":
        await asyncio.sleep(3600)  # a connection that never answers
    return case.id


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_h(case, conn):
    await asyncio.sleep(0.05)
    event("ran " + case.id)
"""
    )
    result = _run(pytester, "-v", "--llm-eval-case-timeout=1")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*test_h[[]c1[]] ERROR*"])
    assert (
        "async fixture 'conn' did not finish within --llm-eval-case-timeout=1s and was cancelled"
        in result.stdout.str()
    )
    assert sorted(_events(pytester)) == ["ran c0", "ran c2", "ran c3"]


CAPLOG = """
@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_logs(case, caplog):
    await asyncio.sleep(0.05 if case.id == "c0" else 0.01)
    logging.getLogger("app").error("app broke on %s", case.id)
    await asyncio.sleep(0.05)
    seen = [r.getMessage() for r in caplog.records]
    event(case.id + " saw " + ",".join(seen))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
"""


@pytest.mark.smoke
@pytest.mark.parametrize("kw", ["", ", concurrency=3"])
def test_caplog_sees_the_cases_own_records_during_its_body(
    pytester: pytest.Pytester, kw: str
) -> None:
    """The same body as a sync test fails (caplog has the ERROR): so does every case, at
    either concurrency, and each case sees its own record only."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(test_logs=HEADER + CAPLOG.format(kw=kw))
    result = _run(pytester)
    result.assert_outcomes(failed=3)
    assert sorted(_events(pytester)) == [
        "c0 saw app broke on c0",
        "c1 saw app broke on c1",
        "c2 saw app broke on c2",
    ]
    result.stdout.fnmatch_lines(["*Captured log call*", "ERROR *app broke on c*"])


def test_at_concurrency_1_capsys_and_monkeypatch_work_as_in_pytest(
    pytester: pytest.Pytester,
) -> None:
    """Each case is set up, run and torn down before the next (no look-ahead): monkeypatch's
    changes are the case's alone and undone before the next test; capsys reads the case's own
    output."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_one=HEADER
        + """
@pytest.fixture
def env(case, monkeypatch):
    monkeypatch.setenv("APP_MODE", "mode-" + case.id)
    event("setup " + case.id)
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval_dataset("cases.jsonl")
async def test_env(case, env, capsys):
    print("hello", case.id)
    await asyncio.sleep(0.01)
    assert os.environ["APP_MODE"] == "mode-" + case.id
    assert capsys.readouterr().out == f"hello {case.id}\\n"


def test_after():
    assert "APP_MODE" not in os.environ, os.environ.get("APP_MODE")
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    assert _events(pytester) == [
        "setup c0",
        "teardown c0",
        "setup c1",
        "teardown c1",
        "setup c2",
        "teardown c2",
    ]


@pytest.mark.parametrize(
    ("fixture", "requested_by", "why"),
    [
        ("monkeypatch", "fixture 'env'", "changes process-wide state"),
        ("capsys", "the test", "captures the process's one sys.stdout"),
        ("capfd", "the test", "captures the process's one standard output"),
    ],
)
def test_process_wide_fixtures_with_concurrency_are_a_collection_error(
    pytester: pytest.Pytester, fixture: str, requested_by: str, why: str
) -> None:
    """Overlapping cases would share one monkeypatch state (a change outlived the test) or one
    sys.stdout: say so at collection, naming the fixture and who asks for it."""
    _cases(pytester, ["c0", "c1"])
    arg = "env" if fixture == "monkeypatch" else fixture
    source = (
        HEADER
        + """
@pytest.fixture
def env(case, monkeypatch):
    monkeypatch.setenv("APP_MODE", "mode-" + case.id)


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_c(case, {arg}):
    await asyncio.sleep(0.01)
"""
    )
    pytester.makepyfile(test_mp=source.format(kw=", concurrency=2", arg=arg))
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = result.stdout.str()
    assert (
        f"test_mp.py::test_c: llm_eval_dataset(concurrency=2): the '{fixture}' fixture "
        f"(requested by {requested_by}) {why}"
    ) in out
    assert "concurrency=1" in out
    # concurrency from the command-line option: the same collection error (also under xdist,
    # where an error raised after collection was lost: the worker died)
    pytester.makepyfile(test_mp=source.format(kw="", arg=arg))
    for extra in ((), ("-n", "2")):
        result = _run(pytester, "--llm-eval-case-concurrency=4", *extra)
        # (xdist reports a worker's collection error with exit status 1)
        expected = pytest.ExitCode.TESTS_FAILED if extra else pytest.ExitCode.INTERRUPTED
        assert result.ret == expected, result.stdout.str()
        assert (
            f"test_mp.py::test_c: --llm-eval-case-concurrency=4: the '{fixture}' fixture "
            f"(requested by {requested_by}) {why}"
        ) in " ".join(result.stdout.str().split())
    # and at concurrency 1 the same test runs
    result = _run(pytester)
    result.assert_outcomes(passed=2)


def test_output_of_a_cases_child_tasks_is_the_cases_and_leftover_tasks_are_cancelled(
    pytester: pytest.Pytester,
) -> None:
    """``asyncio.gather`` children print into their case's captured output (they went to the
    terminal); a task the case leaves running is cancelled when its body ends (it changed state
    under a later test)."""
    _cases(pytester, ["c0", "c1", "c2", "c3"])
    pytester.makepyfile(
        test_child=HEADER
        + """
STATE = {"v": "clean"}


async def work(cid):
    await asyncio.sleep(0.01)
    print("child output of", cid)


async def background():
    try:
        await asyncio.sleep(0.3)
        STATE["v"] = "dirty"
    except asyncio.CancelledError:
        event("background cancelled")
        raise


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_child(case):
    if case.id == "c0":
        asyncio.get_running_loop().create_task(background())
    await asyncio.gather(work(case.id), asyncio.sleep(0.2 if case.id == "c0" else 0.02))
    print("own output of", case.id)
    assert case.id != "c2"


def test_later():
    time.sleep(0.5)
    assert STATE["v"] == "clean"
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=4, failed=1)
    out = result.stdout.str()
    section = out[out.index("Captured stdout call") :]
    assert section.splitlines()[1:3] == ["child output of c2", "own output of c2"]
    assert "child output of c0" not in out  # passed cases' output stays captured
    assert _events(pytester) == ["background cancelled"]


def test_gated_async_cases_leave_the_verdict_to_the_gate_as_sync_ones_do(
    pytester: pytest.Pytester,
) -> None:
    """Under a suite gate a per-case miss is the gate's (a sync test's case passes, marked
    'g'): the same for assert_score_async and for a sync assert_score in an async case, also
    for cases whose body starts ahead of their protocol."""
    _cases(pytester, [f"c{i}" for i in range(10)])
    body = """
    await asyncio.sleep(0.01)
    out = "no" if case.id == "c3" else case.expected
"""
    pytester.makepyfile(
        test_g=HEADER
        + f"""
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.8)
def test_sync(case):
    out = "no" if case.id == "c3" else case.expected
    assert_score("exact_match", output=out, expected=case.expected, min=1)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.8)
async def test_async(case):{body}
    await assert_score_async("exact_match", output=out, expected=case.expected, min=1)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.8)
async def test_async_sync_assert(case):{body}
    assert_score("exact_match", output=out, expected=case.expected, min=1)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.95)
async def test_async_gate_fails(case):{body}
    await assert_score_async("exact_match", output=out, expected=case.expected, min=1)
"""
    )
    result = _run(pytester, "--llm-eval", "-rA")
    result.assert_outcomes(passed=40)
    result.stdout.fnmatch_lines(
        [
            "PASS test_g.py::test_async exact_match: mean 0.900 >= 0.8: pass",
            "    10 cases, 10 samples, 0 unscored",
            "FAIL test_g.py::test_async_gate_fails exact_match: mean 0.900 >= 0.95: fail",
            "    10 cases, 10 samples, 0 unscored",
            "PASS test_g.py::test_async_sync_assert exact_match: mean 0.900 >= 0.8: pass",
            "    10 cases, 10 samples, 0 unscored",
            "PASS test_g.py::test_sync exact_match: mean 0.900 >= 0.8: pass",
        ]
    )
    # every case counted as run (cases set up ahead of their protocol read as skipped)
    assert "gate over" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the failing gate fails the run


def test_a_case_that_returns_a_value_warns_as_pytest_does(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["c0", "c1"])
    pytester.makepyfile(
        test_r=HEADER
        + """
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_r(case):
    await asyncio.sleep(0.01)
    return case.id == "c0"
"""
    )
    result = _run(pytester, "-W", "error::pytest.PytestReturnNotNoneWarning")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*PytestReturnNotNoneWarning: Test functions should return None, but *test_r[[]c0[]]*"]
    )


@pytest.mark.smoke
def test_exitfirst_counts_an_xfail_with_the_wrong_exception_as_a_failure(
    pytester: pytest.Pytester,
) -> None:
    """``xfail(raises=TypeError)`` failing with ValueError is a failure: ``-x`` starts no new
    case after it (it counted as expected and the next cases started)."""
    _cases(pytester, [f"c{i:02d}" for i in range(12)])
    pytester.makepyfile(
        test_x=HEADER
        + """
@pytest.mark.xfail(raises=TypeError, strict=False)
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_x(case):
    event("started " + case.id)
    await asyncio.sleep(0.3 if case.id != "c00" else 0.0)
    if case.id == "c00":
        raise ValueError("not the expected failure")
"""
    )
    result = _run(pytester, "-x")
    result.assert_outcomes(failed=1)
    started = _events(pytester)
    # c00 fails at once; c01 was in flight with it and look-ahead may have begun c02 and c03
    # before the failure was known; no case after that
    assert started[0] == "started c00"
    assert len(started) <= 4, started


def test_ctrl_c_at_concurrency_1_cancels_the_body_before_its_teardown(
    pytester: pytest.Pytester,
) -> None:
    """A test of concurrency 1 runs its body in its call phase: Ctrl-C there cancels the body,
    whose cleanup runs before its fixtures are torn down; the summary is printed."""
    _cases(pytester, ["a", "b"])
    pytester.makepyfile(
        test_k=HEADER
        + """
import signal


@pytest.fixture
async def res(case):
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
async def test_k(case, res):
    await asyncio.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        event("cancelled " + case.id)
        raise
"""
    )
    result = _run(pytester, "--llm-eval")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "*no tests ran*"])
    assert _events(pytester) == ["cancelled a", "teardown a"]


@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_async_fixtures_whose_value_is_none_set_up_once(pytester: pytest.Pytester, kw: str) -> None:
    """``yield`` with no value (or ``return None``) made pytest run the fixture a second time
    itself and error the test; ``--setup-plan`` ran async fixtures' code."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_n=HEADER
        + f"""
@pytest.fixture
async def db(case):
    event("setup " + case.id)
    yield
    event("teardown " + case.id)


@pytest.fixture
async def nothing():
    event("nothing")


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_n(case, db, nothing):
    assert db is None and nothing is None
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=3)
    events = _events(pytester)
    for cid in ("c0", "c1", "c2"):
        assert events.count("setup " + cid) == events.count("teardown " + cid) == 1
    assert events.count("nothing") == 3
    (pytester.path / "events.txt").unlink()
    result = _run(pytester, "--setup-plan")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED or "no tests ran" in (
        result.stdout.str()
    )
    assert _events(pytester) == []  # planned, not run


def test_an_async_fixture_waiting_on_what_a_running_case_holds_does_not_deadlock(
    pytester: pytest.Pytester,
) -> None:
    """A case's next setup waited for its fixture while holding the gate the running case
    needed to release the shared lock: the run hung for good."""
    _cases(pytester, ["c0", "c1", "c2", "c3"])
    pytester.makepyfile(
        test_d=HEADER
        + """
POOL = None


@pytest.fixture
async def user(case):
    global POOL
    POOL = POOL or asyncio.Semaphore(1)  # e.g. a shared client's one connection
    async with POOL:
        await asyncio.sleep(0.01)
        logging.getLogger("fixture").warning("fixture of %s", case.id)
    return "u-" + case.id


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_d(case, user):
    async with POOL:
        logging.getLogger("case").warning("case %s holds the pool", case.id)
        await asyncio.sleep(0.2)
    assert user == "u-" + case.id
    assert case.id != "c3"
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=3, failed=1)
    out = result.stdout.str()
    # c3's report has its own case record, and no other case's record leaked into a setup log
    section = out[out.index("Captured log call") :]
    assert "case c3 holds the pool" in section
    setup_logs = out[out.index("Captured log setup") : out.index("Captured log call")]
    assert "holds the pool" not in setup_logs


def test_run_in_executor_logs_reach_their_case(pytester: pytest.Pytester) -> None:
    """A record logged in a ``run_in_executor`` thread was lost at concurrency 2 (the case passed;
    the same test fails at concurrency 1 and as a sync test)."""
    _cases(pytester, ["c0", "c1"])
    pytester.makepyfile(
        test_r=HEADER
        + """
def work(cid):
    logging.getLogger("app").error("failure in worker thread of %s", cid)


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_thread_logs(case, caplog):
    await asyncio.get_running_loop().run_in_executor(None, work, case.id)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
"""
    )
    result = _run(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*failure in worker thread of c0*"])


@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_system_exit_in_an_async_fixture_or_a_child_task_is_that_cases_alone(
    pytester: pytest.Pytester, kw: str
) -> None:
    """SystemExit in an async fixture or a gathered child task stopped the case loop itself:
    the run hung. Now it is that case's error or failure, as in plain pytest."""
    _cases(pytester, ["ok", "fixture_exits", "child_exits", "ok2"])
    pytester.makepyfile(
        test_e=HEADER
        + f"""
import sys


@pytest.fixture
async def res(case):
    if case.id == "fixture_exits":
        sys.exit(3)
    return case.id


async def child(cid):
    await asyncio.sleep(0.01)
    if cid == "child_exits":
        sys.exit(2)


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_e(case, res):
    await asyncio.gather(child(case.id), asyncio.sleep(0.02))
"""
    )
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_e[[]ok[]] PASSED*",
            "*test_e[[]fixture_exits[]] ERROR*",
            "*test_e[[]child_exits[]] FAILED*",
            "*test_e[[]ok2[]] PASSED*",
        ]
    )


@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_finalizer_of_an_async_fixture_that_raised_system_exit_runs(
    pytester: pytest.Pytester, kw: str
) -> None:
    """pytest 9.1 on: a fixture whose setup raised SystemExit has no cached result, so its
    FixtureDef.finish skipped its finalizers, and the next case's setup of it failed on pytest's
    ``assert not self._finalizers``. The finalizer runs, the later cases pass."""
    _cases(pytester, ["ok", "exits", "ok2"])
    pytester.makepyfile(
        test_f=HEADER
        + f"""
import sys


@pytest.fixture
async def res(case, request):
    request.addfinalizer(lambda: event("finalized " + case.id))
    if case.id == "exits":
        sys.exit(4)
    return case.id


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_f(case, res):
    assert res == case.id
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=2, errors=1)
    assert sorted(_events(pytester)) == ["finalized exits", "finalized ok", "finalized ok2"]


@pytest.mark.smoke
def test_monkeypatch_requested_at_run_time_is_the_cases_error(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["c0", "c1"])
    pytester.makepyfile(
        test_g=HEADER
        + """
@pytest.fixture
def env(request):
    request.getfixturevalue("monkeypatch").setenv("APP_MODE", "x")


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_g(case, env):
    event("ran " + case.id)
"""
    )
    result = _run(pytester)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*CaseFixtureError*the 'monkeypatch' fixture changes process-wide*"]
    )
    assert _events(pytester) == []


@pytest.mark.smoke
def test_look_ahead_stops_where_a_module_scoped_parameter_changes(
    pytester: pytest.Pytester,
) -> None:
    """Cases of the next value of a module-scoped parametrized fixture were set up ahead, which
    tore down the old value while its cases still used it."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_m=HEADER
        + """
class Resource:
    def __init__(self, name):
        self.name, self.closed = name, False


@pytest.fixture(scope="module", params=["A", "B"])
def res(request):
    r = Resource(request.param)
    event("setup " + r.name)
    yield r
    r.closed = True
    event("teardown " + r.name)


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_m(case, res):
    event(f"start {res.name}-{case.id}")
    await asyncio.sleep(0.05 if case.id == "c0" else 0.3)
    assert not res.closed, f"{res.name} closed while case {case.id} used it"
    event(f"end {res.name}-{case.id}")
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=6)
    events = _events(pytester)
    assert events.index("teardown A") > max(events.index(f"end A-c{i}") for i in range(3))
    assert events.index("setup B") > events.index("teardown A")


@pytest.mark.smoke
def test_getfixturevalue_in_a_concurrent_body_is_a_clear_error(pytester: pytest.Pytester) -> None:
    """A fixture set up from a running case's body shared one cached value across cases (and
    raised pytest's internal AssertionError): it is that case's error saying what to do."""
    _cases(pytester, ["c0", "c1"])
    pytester.makepyfile(
        test_v=HEADER
        + """
COUNT = [0]


@pytest.fixture
def counter():
    COUNT[0] += 1
    return COUNT[0]


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_v(case, request):
    await asyncio.sleep(0.01)
    request.getfixturevalue("counter")
"""
    )
    result = _run(pytester)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*CaseFixtureError*fixture 'counter' was requested from the body of a case running*"]
    )


@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_context_variables_of_async_fixtures_reach_the_body_and_reset_at_teardown(
    pytester: pytest.Pytester, kw: str
) -> None:
    """As with pytest-asyncio: a variable an async fixture sets is seen by the body (it saw
    'unset'), and the fixture's reset at teardown works (it raised: another Context)."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_cv=HEADER
        + f"""
import contextvars

TENANT = contextvars.ContextVar("tenant", default="unset")


@pytest.fixture
async def tenant(case):
    token = TENANT.set("tenant-" + case.id)
    yield
    TENANT.reset(token)
    event("reset " + case.id)


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_cv(case, tenant):
    await asyncio.sleep(0.02)
    assert TENANT.get() == "tenant-" + case.id


def test_after():
    assert TENANT.get() == "unset"
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    assert sorted(_events(pytester)) == ["reset c0", "reset c1", "reset c2"]


def test_a_case_fixture_error_sets_the_rest_up_one_at_a_time(pytester: pytest.Pytester) -> None:
    """After a case set up monkeypatch at run time, the next cases were still set up ahead: its
    change leaked past the test. Now the rest of the test's cases are set up one at a time."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_cf=HEADER
        + """
@pytest.fixture
def env(request):
    request.getfixturevalue("monkeypatch").setenv("CF", "1")


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_cf(case, env):
    pass


def test_after():
    assert "CF" not in os.environ
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, errors=3)


@pytest.mark.smoke
def test_setup_show_names_each_cases_own_parameters(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_s=HEADER
        + """
@pytest.fixture(params=["p"])
def fx(request, case):
    return case.id


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_s(case, fx):
    await asyncio.sleep(0.05)
"""
    )
    result = _run(pytester, "--setup-show")
    result.assert_outcomes(passed=3)
    lines = [line.strip() for line in result.stdout.lines if "TEARDOWN F case" in line]
    assert len(lines) == 3
    for cid, line in zip(["c0", "c1", "c2"], lines, strict=True):
        assert f"id='{cid}'" in line, line


def test_a_run_time_monkeypatch_is_undone_before_any_other_case_sees_it(
    pytester: pytest.Pytester,
) -> None:
    """The cases set up after (and running beside) a case that patched the environment at run
    time ran under its patch: a variable like APP_FAKE=1 would let them pass against a fake."""
    _cases(pytester, [f"c{i}" for i in range(6)])
    pytester.makepyfile(
        test_ser=HEADER
        + """
@pytest.fixture
def maybe_env(case, request):
    if case.id == "c2":
        request.getfixturevalue("monkeypatch").setenv("MODE", "patched-by-c2")


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_env(case, maybe_env):
    for _ in range(10):
        await asyncio.sleep(0.02)
        assert os.environ.get("MODE") is None, (case.id, os.environ.get("MODE"))


def test_after():
    assert "MODE" not in os.environ
"""
    )
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=6, errors=1)
    result.stdout.fnmatch_lines(["*test_env[[]c2[]] ERROR*"])


def test_getfixturevalue_from_a_cases_thread_is_refused_too(pytester: pytest.Pytester) -> None:
    """From an ``asyncio.to_thread`` thread the guard was skipped: a case read the value being
    set up for the next case."""
    _cases(pytester, ["c0", "c1", "c2"])
    pytester.makepyfile(
        test_t=HEADER
        + """
@pytest.fixture
def val(case):
    return case.id


@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_thread(case, request):
    got = await asyncio.to_thread(request.getfixturevalue, "val")
    assert got == case.id
"""
    )
    result = _run(pytester)
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*CaseFixtureError*fixture 'val' was requested from the body*"])


@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_context_variables_as_with_pytest_asyncio(pytester: pytest.Pytester, kw: str) -> None:
    """A module-scoped async fixture's variable is seen by every case (it was by the first
    only); at concurrency 1 a sync fixture sees an async fixture's variable, and a sync fixture
    set after it wins, as with pytest-asyncio."""
    _cases(pytester, ["c0", "c1", "c2"])
    sequential = """
@pytest.fixture
async def set_b():
    token = B.set("async")
    yield
    B.reset(token)


@pytest.fixture
def reads_b(set_b):
    return B.get()


@pytest.fixture
def overrides_b(set_b):
    token = B.set("sync")
    yield
    B.reset(token)


@pytest.mark.llm_eval_dataset("cases.jsonl")
async def test_sync_fixtures(case, reads_b, overrides_b):
    assert reads_b == "async"
    assert B.get() == "sync"
"""
    pytester.makepyfile(
        test_cv=HEADER
        + f"""
import contextvars

A = contextvars.ContextVar("a", default="default")
B = contextvars.ContextVar("b", default="default")


@pytest.fixture(scope="module")
async def set_a():
    token = A.set("module")
    yield
    A.reset(token)


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_module(case, set_a):
    await asyncio.sleep(0.01)
    assert A.get() == "module"
{sequential if not kw else ""}
"""
    )
    # in another module: the module-scoped fixture is torn down by then
    pytester.makepyfile(
        test_zz="""
from test_cv import A, B


def test_after():
    assert (A.get(), B.get()) == ("default", "default")
"""
    )
    result = _run(pytester)
    result.assert_outcomes(passed=4 if kw else 7)


def test_identical_judged_scorings_in_flight_at_once_pay_the_judge_once(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Repeat samples of a case (same inputs, so the same cache key) in flight together each
    called the judge: 27 calls instead of 10 for 10 cases x 3 samples, and the budget ran out
    faster than at concurrency 1. Now the first one's result serves the others from the cache,
    as one after the other; the records are the same at either concurrency."""
    _cases(pytester, [f"c{i}" for i in range(10)])
    source = (
        HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency={conc}, repeat=3)
async def test_j(case):
    await assert_score_async(
        "l3score", input=case.input, output=case.expected, expected=case.expected, min=0.5
    )
"""
    )
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-single-flight-SECRET")
    judge_server.set_default(
        delay(0.2, text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1)))
    )
    records = {}
    for conc in (4, 1):
        judge_server.clear()
        pytester.makepyfile(test_j=source.format(conc=conc))
        report = pytester.path / f"r{conc}.json"
        cache = pytester.path / f"cache{conc}"
        result = pytester.runpytest_subprocess(
            "--llm-eval",
            "-p",
            "no:cacheprovider",
            f"--llm-eval-cache-dir={cache}",
            f"--llm-eval-report={report}",
            timeout=120,
        )
        result.assert_outcomes(passed=30)
        assert len(judge_server.requests_to("chat")) == 10, conc
        result.stdout.fnmatch_lines(["30 scores, 20 from cache, 10 judge calls*"])
        data = json.loads(report.read_text())
        records[conc] = sorted(
            (r["case_id"], r["sample"], r["score"], r["passed"], r["cached"])
            for r in data["records"]
        )
    assert records[4] == records[1]


@pytest.mark.parametrize("timeout", [None, "30"])
@pytest.mark.parametrize("kw", ["", ", concurrency=2"])
def test_an_async_fixture_that_raises_timeouterror_is_that_error(
    pytester: pytest.Pytester, kw: str, timeout: str | None
) -> None:
    """An async fixture's own TimeoutError (``asyncio.wait_for`` giving up on a service) was
    taken for the fixture timeout: reported as the case timeout (with
    ``--llm-eval-case-timeout``), or as an AssertionError inside the plugin (without)."""
    _cases(pytester, ["a"])
    pytester.makepyfile(
        test_f=HEADER
        + f"""
@pytest.fixture
async def service():
    await asyncio.wait_for(asyncio.sleep(10), 0.01)
    yield


@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_f(case, service):
    pass
"""
    )
    args = [] if timeout is None else [f"--llm-eval-case-timeout={timeout}"]
    result = _run(pytester, *args)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_f[[]a[]]*", "E  *TimeoutError*"])
    assert "CaseTimeoutError" not in result.stdout.str()
    assert "AssertionError" not in result.stdout.str()
