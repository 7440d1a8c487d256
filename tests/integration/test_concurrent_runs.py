"""Concurrent dataset cases through real pytest runs (pytester): async ``llm_eval_dataset`` tests
run their cases at once on one loop, and every case keeps pytest's semantics (its own outcome,
report, captured output, JUnit entry, fixtures; ``-x``, ``-k``, ``--lf``, xdist, Ctrl-C).

Concurrency is proven from the cases' own recorded start/end times (how many overlapped), not
from wall-clock thresholds."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from case_files import max_overlap as _max_overlap
from case_files import read_events as _events
from case_files import write_cases as _cases
from paths import EXAMPLES

from pytest_llmeval.testing import OpenAITestServer, delay, text

HEADER = """
import asyncio, json, os, time
import pytest
from pytest_llmeval import assert_score_async, score_async


def log_times(case_id, start, end):
    with open("times.jsonl", "a") as f:
        f.write(json.dumps({"id": case_id, "start": start, "end": end, "pid": os.getpid()}) + "\\n")


def event(text):
    with open("events.txt", "a") as f:
        f.write(text + "\\n")
"""


def _times(p: pytest.Pytester) -> list[dict[str, float]]:
    path = p.path / "times.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


SLEEPER = (
    HEADER
    + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl"{kw})
async def test_sleep(case):
    start = time.time()
    await asyncio.sleep(0.2)
    log_times(case.id, start, time.time())
    await assert_score_async("exact_match", output=case.expected, expected=case.expected, min=1)
"""
)


IDS20 = [f"c{i:02d}" for i in range(20)]


def test_twenty_cases_run_ten_at_a_time(pytester: pytest.Pytester) -> None:
    _cases(pytester, IDS20)
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=10"))
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=20)
    times = _times(pytester)
    assert sorted(t["id"] for t in times) == IDS20
    assert _max_overlap(times) == 10  # as many as allowed, never more
    result.stdout.fnmatch_lines(["exact_match *20 *1.000*"])  # every case's record arrived


def test_without_concurrency_cases_run_one_by_one(pytester: pytest.Pytester) -> None:
    _cases(pytester, IDS20[:4])
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ""))
    pytester.runpytest("--llm-eval", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    assert _max_overlap(_times(pytester)) == 1


def test_the_command_line_option_sets_concurrency_for_all(pytester: pytest.Pytester) -> None:
    _cases(pytester, IDS20[:6])
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ""))
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-case-concurrency=3"
    )
    result.assert_outcomes(passed=6)
    assert _max_overlap(_times(pytester)) == 3


def test_the_marker_wins_over_the_option(pytester: pytest.Pytester) -> None:
    _cases(pytester, IDS20[:6])
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=2"))
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-case-concurrency=6"
    )
    result.assert_outcomes(passed=6)
    assert _max_overlap(_times(pytester)) == 2


OUTCOMES = (
    HEADER
    + """
import logging, sys

@pytest.fixture
def resource(case):
    if case.id == "fixture_error":
        raise RuntimeError("fixture broke for " + case.id)
    yield case.id
    if case.id == "teardown_error":
        raise RuntimeError("teardown broke for " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=8)
async def test_outcome(case, resource, request):
    # the slowest case is first, so every other case finishes before it is reported
    await asyncio.sleep(0.3 if case.id == "passes" else 0.01)
    print("stdout of", case.id)
    print("stderr of", case.id, file=sys.stderr)
    logging.getLogger("app").warning("log of %s", case.id)
    assert resource == case.id  # each case has its own fixture value
    if case.id == "fails":
        await assert_score_async("exact_match", output="no", expected="yes", min=1)
    if case.id == "raises":
        raise ValueError("boom in " + case.id)
    if case.id == "skips":
        pytest.skip("skipped " + case.id)
    if case.id == "xfails":
        request.applymarker(pytest.mark.xfail(reason="known bad", strict=True))
        raise ValueError("expected failure")
    await assert_score_async("exact_match", output=case.id, expected=case.id, min=1)
"""
)


OUTCOME_IDS = [
    "passes",
    "fails",
    "raises",
    "skips",
    "xfails",
    "fixture_error",
    "teardown_error",
    "passes_too",
]


@pytest.mark.smoke
@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist-n2"])
def test_each_case_keeps_its_own_outcome_report_output_and_junit_entry(
    pytester: pytest.Pytester, workers: int
) -> None:
    _cases(pytester, OUTCOME_IDS)
    pytester.makepyfile(test_outcomes=OUTCOMES)
    junit = pytester.path / "junit.xml"
    args = [
        "--llm-eval",
        "-p",
        "no:cacheprovider",
        "-v",
        "-rA",
        f"--junitxml={junit}",
        "-o",
        "junit_logging=system-out",
    ]
    if workers:
        pytest.importorskip("xdist")
        # xdist checks that each report belongs to the item its worker is running
        result = pytester.runpytest_subprocess(*args, "-n", str(workers), "--dist", "loadfile")
    else:
        result = pytester.runpytest(*args)
    # passes, teardown_error (its call passed) and passes_too pass; teardown_error and
    # fixture_error are errors; fails and raises fail; one skip, one xfail
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=2)
    # the terminal lists the cases in their dataset order, whatever order they finished in
    result.stdout.fnmatch_lines(
        [
            "*test_outcome[[]passes[]]*",
            "*test_outcome[[]fails[]]*",
            "*test_outcome[[]raises[]]*",
            "*test_outcome[[]skips[]]*",
            "*test_outcome[[]xfails[]]*",
            "*test_outcome[[]fixture_error[]]*",
            "*test_outcome[[]teardown_error[]]*",
            "*test_outcome[[]teardown_error[]]*",
            "*test_outcome[[]passes_too[]]*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*PASSED*test_outcome[[]passes[]]*",
            "*FAILED*test_outcome[[]fails[]]*",
            "*FAILED*test_outcome[[]raises[]]*",
            "*SKIPPED*test_outcome[[]skips[]]*",
            "*XFAIL*test_outcome[[]xfails[]]*",
            "*ERROR*test_outcome[[]fixture_error[]]*",
            "*ERROR*test_outcome[[]teardown_error[]]*",
            "*PASSED*test_outcome[[]passes_too[]]*",
        ]
        if workers
        else [
            "*test_outcome[[]passes[]] PASSED*",
            "*test_outcome[[]fails[]] FAILED*",
            "*test_outcome[[]raises[]] FAILED*",
            "*test_outcome[[]skips[]] SKIPPED*",
            "*test_outcome[[]xfails[]] XFAIL*",
            "*test_outcome[[]fixture_error[]] ERROR*",
            "*test_outcome[[]teardown_error[]] PASSED*",
            "*test_outcome[[]teardown_error[]] ERROR*",
            "*test_outcome[[]passes_too[]] PASSED*",
        ]
    )
    out = result.stdout.str()
    assert "exact_match score 0 is not >= 1" in out
    assert "ValueError: boom in raises" in out
    assert "RuntimeError: fixture broke for fixture_error" in out
    assert "RuntimeError: teardown broke for teardown_error" in out
    # each case's printed output is in its own report section, and only there
    for case_id in ("passes", "passes_too", "fails"):
        assert out.count(f"stdout of {case_id}\n") == 1, case_id
        assert out.count(f"stderr of {case_id}\n") == 1, case_id
        assert out.count(f"log of {case_id}\n") == 1, case_id
    if not workers:
        result.stdout.fnmatch_lines(
            [
                "*_ test_outcome[[]passes_too[]] _*",
                "*- Captured stdout call -*",
                "stdout of passes_too",
                "*- Captured stderr call -*",
                "stderr of passes_too",
                "*- Captured log call -*",
                "WARNING *app*log of passes_too",
            ]
        )

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {tc.get("name"): tc for tc in suite.iter("testcase")}
    assert sorted(cases) == sorted(f"test_outcome[{i}]" for i in OUTCOME_IDS)
    assert cases["test_outcome[passes]"].find("failure") is None
    assert cases["test_outcome[fails]"].find("failure") is not None
    assert cases["test_outcome[raises]"].find("failure") is not None
    assert cases["test_outcome[skips]"].find("skipped") is not None
    assert cases["test_outcome[fixture_error]"].find("error") is not None
    assert cases["test_outcome[teardown_error]"].find("error") is not None
    system_out = cases["test_outcome[passes_too]"].findtext("system-out") or ""
    assert "stdout of passes_too" in system_out
    assert "stdout of passes\n" not in system_out


def test_records_of_async_assertions_land_on_their_own_case(pytester: pytest.Pytester) -> None:
    ids = IDS20[:8]
    _cases(pytester, ids)
    pytester.makepyfile(
        test_rec=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=8)
async def test_rec(case):
    # interleave: the cases suspend between their two scorings
    await assert_score_async("exact_match", output=case.expected, expected=case.id, min=1)
    await asyncio.sleep(0.05 * (8 - int(case.id[1:])))
    await assert_score_async("exact_match", output=case.expected, expected=case.id)
"""
    )
    report = pytester.path / "r.json"
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", f"--llm-eval-report={report}"
    )
    result.assert_outcomes(passed=8)
    records = json.loads(report.read_text())["records"]
    assert sorted((r["case_id"], r["index"]) for r in records) == sorted(
        (i, n) for i in ids for n in (0, 1)
    )
    assert all(r["score"] == 1.0 for r in records)  # output == expected only on its own case
    result.stdout.fnmatch_lines(["exact_match *16 *1.000*"])


@pytest.mark.smoke
def test_function_fixtures_per_case_broader_ones_shared_async_ones_on_the_case_loop(
    pytester: pytest.Pytester,
) -> None:
    _cases(pytester, ["a", "b", "c"])
    pytester.makepyfile(
        test_fx=HEADER
        + """
@pytest.fixture(scope="module")
def shared():
    event("module setup")
    yield object()
    event("module teardown")


@pytest.fixture
async def client(case, shared):
    event("client setup " + case.id)
    yield {"case": case.id, "loop": asyncio.get_running_loop(), "module_fixture": shared}
    await asyncio.sleep(0)
    event("client teardown " + case.id)


@pytest.fixture
async def token(client):
    return "token-" + client["case"]


SHARED = []


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_fx(case, client, token, shared):
    assert client["case"] == case.id and token == "token-" + case.id
    assert client["loop"] is asyncio.get_running_loop()  # the fixture ran on the test's loop
    SHARED.append(shared)
    assert all(s is shared for s in SHARED)
    event("call start " + case.id)
    await asyncio.sleep(0.2)
    event("call end " + case.id)


def test_after():
    event("after")
"""
    )
    pytester.runpytest("--llm-eval", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    events = _events(pytester)
    assert events[0] == "module setup"
    assert [e for e in events if e.startswith("client setup")] == [
        "client setup a",
        "client setup b",
        "client setup c",
    ]
    # all three were set up before any call ended: they ran at once
    first_end = events.index(next(e for e in events if e.startswith("call end")))
    assert events.index("client setup c") < first_end
    # teardown per case, in case order, each after its own call
    teardowns = [e for e in events if e.startswith("client teardown")]
    assert teardowns == ["client teardown a", "client teardown b", "client teardown c"]
    for case_id in "abc":
        assert events.index(f"call end {case_id}") < events.index(f"client teardown {case_id}")
    assert events[-2:] == ["after", "module teardown"]
    assert events.count("module setup") == 1


def test_an_async_fixture_that_fails_errors_its_case_alone(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["a", "b", "c"])
    pytester.makepyfile(
        test_fx=HEADER
        + """
@pytest.fixture
async def app(case):
    await asyncio.sleep(0)
    if case.id == "b":
        raise ConnectionError("app for b is down")
    return case.id


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_fx(case, app):
    assert app == case.id
"""
    )
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*test_fx[[]a[]] PASSED*", "*test_fx[[]b[]] ERROR*", "*test_fx[[]c[]] PASSED*"]
    )
    assert "ConnectionError: app for b is down" in result.stdout.str()


@pytest.mark.smoke
def test_exitfirst_starts_no_new_case_after_a_failure(pytester: pytest.Pytester) -> None:
    _cases(pytester, IDS20[:10])
    pytester.makepyfile(
        test_x=HEADER
        + """
@pytest.fixture
def res(case):
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_x(case, res):
    event("start " + case.id)
    if case.id == "c01":
        await asyncio.sleep(0.05)
        assert False, "c01 fails"
    await asyncio.sleep(0.5)
"""
    )
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "-x")
    result.assert_outcomes(passed=1, failed=1)
    events = _events(pytester)
    # three started at once; after c01 failed none was started; c02, in flight when the
    # session stopped, was cancelled and torn down (not reported)
    assert sorted(e for e in events if e.startswith("start")) == [
        "start c00",
        "start c01",
        "start c02",
    ]
    assert sorted(e for e in events if e.startswith("teardown")) == [
        "teardown c00",
        "teardown c01",
        "teardown c02",
    ]


def test_a_hanging_case_times_out_as_its_own_error(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["a", "hangs", "b"])
    pytester.makepyfile(
        test_t=HEADER
        + """
@pytest.fixture
async def res(case):
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_t(case, res):
    start = time.time()
    await asyncio.sleep(120 if case.id == "hangs" else 0.1)
    log_times(case.id, start, time.time())
"""
    )
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "-v", "--llm-eval-case-timeout=0.5"
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_t[[]a[]] PASSED*",
            "*test_t[[]hangs[]] ERROR*",
            "*test_t[[]b[]] PASSED*",
            "*CaseTimeoutError*did not finish within --llm-eval-case-timeout=0.5s*",
        ]
    )
    assert sorted(t["id"] for t in _times(pytester)) == ["a", "b"]
    assert sorted(_events(pytester)) == ["teardown a", "teardown b", "teardown hangs"]


def test_ctrl_c_cancels_cases_in_flight_and_prints_the_summary(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["a", "b", "c", "d"])
    pytester.makepyfile(
        test_k=HEADER
        + """
import signal


@pytest.fixture
async def res(case):
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_k(case, res):
    if case.id == "b":
        await asyncio.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        event("cancelled " + case.id)
        raise
"""
    )
    # (a backstop: a loaded machine takes tens of seconds to start the inner run; where a
    # Ctrl-C used to be lost, see test_concurrent_interrupts.py)
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "*no tests ran*"])
    events = _events(pytester)
    assert sorted(events) == ["cancelled a", "cancelled b", "teardown a", "teardown b"]


SELECT = (
    HEADER
    + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_sel(case):
    event("ran " + case.id)
    await asyncio.sleep(0.01)
    assert not (os.environ.get("FAIL_SOME") and case.id in ("x2", "x4")), "fails " + case.id
"""
)


def test_k_deselect_and_last_failed_select_cases_as_usual(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["x1", "x2", "x3", "x4", "x5"])
    pytester.makepyfile(test_sel=SELECT)
    pytester.runpytest("--llm-eval", "-k", "x1 or x3").assert_outcomes(passed=2)
    assert sorted(_events(pytester)) == ["ran x1", "ran x3"]
    (pytester.path / "events.txt").unlink()

    pytester.runpytest("--llm-eval", "--deselect", "test_sel.py::test_sel[x5]").assert_outcomes(
        passed=4
    )
    assert sorted(_events(pytester)) == ["ran x1", "ran x2", "ran x3", "ran x4"]
    (pytester.path / "events.txt").unlink()

    pytester._monkeypatch.setenv("FAIL_SOME", "1")
    pytester.runpytest("--llm-eval").assert_outcomes(passed=3, failed=2)
    (pytester.path / "events.txt").unlink()
    pytester._monkeypatch.delenv("FAIL_SOME")
    result = pytester.runpytest("--llm-eval", "--lf")
    result.assert_outcomes(passed=2)
    assert sorted(_events(pytester)) == ["ran x2", "ran x4"]


@pytest.mark.smoke
def test_with_xdist_each_worker_runs_its_share_concurrently(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    _cases(pytester, IDS20)
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=4"))
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "--llm-eval", "-p", "no:cacheprovider", "-n", "2", f"--llm-eval-report={report}", "-v"
    )
    result.assert_outcomes(passed=20)
    times = _times(pytester)
    assert sorted(t["id"] for t in times) == IDS20
    by_worker: dict[float, list[dict[str, float]]] = {}
    for t in times:
        by_worker.setdefault(t["pid"], []).append(t)
    assert len(by_worker) == 2
    overlaps = [_max_overlap(ts) for ts in by_worker.values()]
    assert max(overlaps) >= 2 and max(overlaps) <= 4, overlaps
    records = json.loads(report.read_text())["records"]
    assert sorted(r["case_id"] for r in records) == IDS20


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
def test_sync(case):
    pass
""",
            "*test_sync: llm_eval_dataset(concurrency=4) needs an `async def` test. A sync test "
            "body blocks the process*",
        ),
        (
            """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=0)
async def test_zero(case):
    pass
""",
            "*test_zero: llm_eval_dataset concurrency=0 is not a whole number >= 1*",
        ),
        (
            """
@pytest.mark.anyio
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_anyio(case):
    pass
""",
            "*test_anyio: llm_eval_dataset(concurrency=2): it is also claimed by anyio*",
        ),
    ],
    ids=["sync", "zero", "anyio-marked"],
)
def test_bad_concurrency_is_a_collection_error(
    pytester: pytest.Pytester, source: str, message: str
) -> None:
    _cases(pytester, ["a"])
    pytester.makepyfile(test_bad=HEADER + source)
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    # the marker is checked also without --llm-eval (it is code), the dataset is not read
    plain = pytester.runpytest("-p", "no:cacheprovider")
    plain.assert_outcomes(errors=1)


def test_plain_pytest_skips_async_dataset_tests(pytester: pytest.Pytester) -> None:
    _cases(pytester, ["a", "b"])
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=2"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(skipped=1)
    assert _times(pytester) == []


MIXED = (
    HEADER
    + """
@pytest.mark.anyio
async def test_anyio_own(anyio_backend):
    await asyncio.sleep(0)

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
async def test_anyio_dataset(case):
    await assert_score_async("exact_match", output=case.id, expected=case.expected, min=1)
"""
)


def test_anyio_tests_and_anyio_marked_dataset_tests_stay_anyios(pytester: pytest.Pytester) -> None:
    """anyio's plugin is loaded (autoload): its own tests, and a dataset test marked anyio
    without concurrency=, are run by anyio; our concurrent test runs beside them."""
    _cases(pytester, ["a", "b"])
    pytester.makepyfile(test_mixed=MIXED, test_sleep=SLEEPER.replace("{kw}", ", concurrency=2"))
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1 + 2 + 2)
    assert _max_overlap(_times(pytester)) == 2


ASYNCIO = (
    HEADER
    + """
@pytest.mark.asyncio
async def test_asyncio_own():
    await asyncio.sleep(0)
"""
)


def test_pytest_asyncio_strict_mode_coexists(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_asyncio")
    _cases(pytester, ["a", "b", "c"])
    pytester.makepyfile(test_aio=ASYNCIO, test_sleep=SLEEPER.replace("{kw}", ", concurrency=3"))
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert _max_overlap(_times(pytester)) == 3


def test_pytest_asyncio_auto_mode_claims_async_tests(pytester: pytest.Pytester) -> None:
    """In auto mode pytest-asyncio runs every async test: without concurrency= it runs the
    dataset's cases one by one, as before; with concurrency=N that cannot hold: a collection
    error."""
    pytest.importorskip("pytest_asyncio")
    _cases(pytester, ["a", "b"])
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ""))
    auto = ("--llm-eval", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto")
    pytester.runpytest(*auto).assert_outcomes(passed=2)
    assert _max_overlap(_times(pytester)) == 1
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=2"))
    result = pytester.runpytest(*auto)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*concurrency=2): it is also claimed by pytest-asyncio*"])


def test_judge_calls_of_all_cases_share_the_runs_concurrency_limit(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    ids = IDS20[:8]
    _cases(pytester, ids)
    pytester.makepyfile(
        test_j=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=8)
async def test_j(case):
    start = time.time()
    await assert_score_async(
        "l3score", input="q " + case.id, expected=case.id, output=case.id, min=0.5
    )
    log_times(case.id, start, time.time())
"""
    )
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-concurrent-SECRET")
    judge_server.set_default(
        delay(0.3, text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1)))
    )
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-concurrency=3", "--llm-eval-cache=off"
    )
    result.assert_outcomes(passed=8)
    assert len(judge_server.requests) == 8
    assert judge_server.max_in_flight == 3  # the limit, across every case in flight
    assert _max_overlap(_times(pytester)) == 8  # while all the cases were in flight
    result.stdout.fnmatch_lines(["l3score *8 *", "8 scores, 0 from cache, 8 judge calls*"])


def _judged_cases(
    pytester: pytest.Pytester, judge_server: OpenAITestServer, n: int, limit: int | None = None
) -> None:
    """``n`` async dataset cases judged by l3score at concurrency ``n``, 0.5 s per reply;
    ``limit``: the ini's llm_eval_concurrency."""
    _cases(pytester, [f"c{i}" for i in range(n)])
    pytester.makepyfile(
        test_j=HEADER
        + f"""
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency={n})
async def test_j(case):
    await assert_score_async(
        "l3score", input="q " + case.id, expected=case.id, output=case.id, min=0.5
    )
"""
    )
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
        + (f"llm_eval_concurrency = {limit}\n" if limit is not None else "")
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-slots-SECRET")
    judge_server.set_default(
        delay(0.5, text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1)))
    )


def test_judge_slots_follow_the_tests_concurrency_when_no_limit_is_set(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """With no --llm-eval-concurrency a concurrency=12 test is not held to the default 8
    judge calls in flight: the limit grows to the test's concurrency, nothing waits, nothing
    is said about slots."""
    _judged_cases(pytester, judge_server, 12)
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "--llm-eval-cache=off")
    result.assert_outcomes(passed=12)
    assert len(judge_server.requests) == 12
    # every case's call is in flight at once (0.5 s each: a gather, not a queue)
    assert judge_server.max_in_flight == 12
    assert "judge slots" not in result.stdout.str()
    assert "JudgeSlotsWarning" not in result.stdout.str()


def test_a_judge_limit_the_user_set_is_kept_with_a_warning_and_its_waits_reported(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """An explicit smaller limit is kept (the user may have a reason: a provider quota), but
    the run says so: a warning naming the test, its concurrency, the limit and where it was
    set, and a summary line with the requests that waited and for how long."""
    _judged_cases(pytester, judge_server, 12, limit=4)
    result = pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-cache=off", "-W", "default"
    )
    result.assert_outcomes(passed=12, warnings=1)
    assert judge_server.max_in_flight == 4
    result.stdout.fnmatch_lines(
        [
            "*JudgeSlotsWarning: test_j.py::test_j runs 12 cases at once, but judge calls are "
            "limited to 4 in flight per process (ini llm_eval_concurrency)*",
            # 8 of the 12 requests queued; the queue lasted about 2 rounds of 0.5 s
            "judge slots 4 per process (ini llm_eval_concurrency): 8 judge requests queued "
            "for a free slot; the queue lasted *s in all",
        ]
    )
    line = next(x for x in result.outlines if x.startswith("judge slots 4"))
    waited = float(line.split("lasted ")[1].split(" s")[0])
    assert 0.9 <= waited < 30, line


def test_xdist_workers_waits_for_judge_slots_reach_the_controllers_summary(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Each worker has its own slots (the limit is per process); the summary adds up what
    every worker waited (sent in its workeroutput)."""
    pytest.importorskip("xdist")
    _judged_cases(pytester, judge_server, 12, limit=2)
    result = pytester.runpytest_subprocess(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-cache=off", "-n", "2"
    )
    result.assert_outcomes(passed=12)
    assert judge_server.max_in_flight <= 4
    line = next(x for x in result.outlines if x.startswith("judge slots 2 per process"))
    waited = int(line.split(": ")[1].split(" judge")[0])
    # 12 requests, at most 2 in flight in each of 2 workers: at least 8 queued
    assert 8 <= waited <= 10, line


def test_the_example_passes(pytester: pytest.Pytester) -> None:
    root = EXAMPLES
    pytester.makepyfile(test_example_concurrent=(root / "test_concurrent_cases.py").read_text())
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "capitals.jsonl").write_text(
        (root / "data" / "capitals.jsonl").read_text()
    )
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=8)


def test_case_options_must_be_positive(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    for option in ("--llm-eval-case-concurrency=0", "--llm-eval-case-timeout=-1"):
        result = pytester.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        flag, value = option.split("=")
        result.stderr.fnmatch_lines(
            [f"ERROR: {flag} / ini *: must be positive, not {value}* (given by {flag})"]
        )


def test_the_budget_holds_across_cases_waiting_for_the_judge(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Six cases wait for one judge slot at once; $1 a call and a $2.5 budget allow three
    calls. A budget checked only before the wait would let all six through."""
    _cases(pytester, IDS20[:6])
    pytester.makepyfile(
        test_j=HEADER
        + """
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=6)
async def test_j(case):
    await assert_score_async(
        "l3score", input="q " + case.id, expected=case.id, output=case.id, min=0.5
    )
"""
    )
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
        "llm_eval_prices =\n    test-judge 1000 0\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-concurrent-SECRET")
    judge_server.set_default(
        delay(0.1, text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(1000, 1)))
    )
    result = pytester.runpytest(
        "--llm-eval",
        "-p",
        "no:cacheprovider",
        "--llm-eval-concurrency=1",
        "--llm-eval-cache=off",
        "--llm-eval-budget=2.5",
    )
    assert len(judge_server.requests) == 3
    result.assert_outcomes(passed=3, errors=3)
    result.stdout.fnmatch_lines(["*BudgetExceededError*"])


def test_a_dataset_test_not_marked_llm_eval_runs_concurrently_in_plain_pytest(
    pytester: pytest.Pytester,
) -> None:
    _cases(pytester, IDS20[:4])
    pytester.makepyfile(
        test_sleep=SLEEPER.replace("{kw}", ", concurrency=4").replace("@pytest.mark.llm_eval\n", "")
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)
    assert _max_overlap(_times(pytester)) == 4


def test_each_item_is_classified_once_not_per_look_ahead_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether an item is a concurrent case is fixed once collection is over: it is decided once
    per item, not again for all the look-ahead items each time a case finishes (which made the
    main thread's bookkeeping grow with cases x look-ahead)."""
    import pytest_llmeval.plugin.concurrent as concurrent_mod

    asked: list[str] = []
    real = concurrent_mod._other_async_plugin

    def counting(node: pytest.Item, fixturenames: list[str]) -> tuple[str, str] | None:
        asked.append(node.nodeid)
        return real(node, fixturenames)

    monkeypatch.setattr(concurrent_mod, "_other_async_plugin", counting)
    ids = [f"c{i:02d}" for i in range(40)]
    _cases(pytester, ids)
    pytester.makepyfile(test_sleep=SLEEPER.replace("{kw}", ", concurrency=8"))
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=40)
    assert _max_overlap(_times(pytester)) == 8
    per_case = Counter(n for n in asked if "[" in n)
    assert sorted(per_case) == sorted(f"test_sleep.py::test_sleep[{i}]" for i in ids)
    # once at collection (concurrency= checked per item), once when the runner first meets it
    assert set(per_case.values()) == {2}


@pytest.mark.smoke
def test_a_case_that_runs_again_in_the_same_process_gets_fresh_fixtures(
    pytester: pytest.Pytester,
) -> None:
    """A case torn down (or abandoned when xdist's work stealing took it) and later run again
    in the same process (stolen back, a rerun plugin) must be set up afresh, as pytest's own
    protocol does; it used to crash the run (its fixture request was gone)."""
    _cases(pytester, IDS20[:3])
    pytester.makeconftest(
        """
def pytest_collection_modifyitems(items):
    items.append(items[0])  # c00 runs a second time, after the others
"""
    )
    pytester.makepyfile(
        test_again=HEADER
        + """
@pytest.fixture
def res(case):
    return {"case": case.id}

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
async def test_again(case, res):
    await asyncio.sleep(0.05)
    assert res == {"case": case.id}
    event(case.id)
"""
    )
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert result.ret == 0
    assert sorted(_events(pytester)) == ["c00", "c00", "c01", "c02"]
