"""How a test's score records reach the controller (issue 24): from xdist workers as JSON on the
teardown report; without xdist handed over as they are, with no JSON round trip. Either way the
run holds the same records, and none is lost when another plugin replaces or never logs the
teardown report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from case_files import read_report, write_dataset

PROJECT = """
import pytest
from pytest_llmeval import Score, assert_score, scorer

@scorer("tagged")
def tagged(output, expected):
    meta = {"pair": (1, 2), "nested": {"k": [1.5]}}
    return Score(1.0 if output == expected else 0.0, metadata=meta)

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
def test_case(case):
    assert_score("exact_match", output=case.output, expected="x", min=1)
    assert_score("tagged", output=case.output, expected="x", min=0)
"""

ROWS = [{"id": f"c{i}", "output": "x" if i % 3 else "y"} for i in range(6)]


def _records(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = [{k: v for k, v in r.items() if k != "duration_s"} for r in report["records"]]
    return sorted(out, key=lambda r: (r["case_id"], r["scorer"]))


def test_the_run_holds_the_same_records_with_and_without_xdist(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    write_dataset(pytester.path / "data" / "cases.jsonl", ROWS)
    pytester.makepyfile(test_t=PROJECT)
    runs = {}
    for label, extra in (("n0", ["-p", "no:xdist"]), ("n2", ["-n", "2"])):
        result = pytester.runpytest_subprocess(
            "--llm-eval", "--llm-eval-cache=off", f"--llm-eval-report={label}.json", *extra
        )
        result.assert_outcomes(passed=4, failed=2)
        runs[label] = read_report(pytester, f"{label}.json")
    n0, n2 = (_records(runs[k]) for k in ("n0", "n2"))
    assert len(n0) == 10 and n0 == n2
    tagged = next(r for r in n0 if r["scorer"] == "tagged")
    assert tagged["metadata"] == {"pair": [1, 2], "nested": {"k": [1.5]}}
    assert tagged["inputs"] == {"output": "x", "expected": "x"}
    failed = {r["case_id"] for r in n0 if r["passed"] is False}
    assert failed == {"c0", "c3"}
    # the history keeps what the report says, record for record
    saved = sorted((pytester.path / ".llmeval" / "runs").glob("0*[0-9].json"))
    assert len(saved) == 2
    kept = json.loads(saved[0].read_text(encoding="utf-8"))["report"]
    assert _records(kept) == n0


NOT_LOGGED = """
import pytest
from _pytest.runner import call_and_report

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # a plugin that runs the test itself and never logs its teardown report
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    if call_and_report(item, "setup").passed:
        call_and_report(item, "call")
    call_and_report(item, "teardown", log=False, nextitem=nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""

REPLACED = """
import pytest
from _pytest.reports import TestReport

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # a plugin that hands on a copy of the report, not the report the hooks made
    return TestReport(**{k: v for k, v in vars(report).items()})
"""


@pytest.mark.parametrize("conftest", [NOT_LOGGED, REPLACED], ids=["not-logged", "replaced"])
def test_no_record_is_lost_whatever_becomes_of_the_teardown_report(
    pytester: pytest.Pytester, conftest: str
) -> None:
    """c0 and c3 fail their bound: were their records lost, the report would show fewer
    failures (and a gate or comparison over it would pass)."""
    write_dataset(pytester.path / "data" / "cases.jsonl", ROWS)
    pytester.makepyfile(test_t=PROJECT)
    pytester.makeconftest(conftest)
    result = pytester.runpytest_subprocess(
        "--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=r.json", "-p", "no:xdist"
    )
    assert result.ret == 1
    records = _records(read_report(pytester, "r.json"))
    assert len(records) == 10
    assert {r["case_id"] for r in records if r["passed"] is False} == {"c0", "c3"}


HOOKS_SEEN = """
def pytest_sessionfinish(session):
    manager = session.config.pluginmanager
    impls = manager.hook.pytest_runtest_logreport.get_hookimpls()
    print("\\nLOGREPORT", sorted(i.plugin_name for i in impls if "llm" in i.plugin_name))
    dsession = manager.get_plugin("dsession")
    if dsession is not None:
        print("SCHEDULER", type(dsession.sched).__name__)
"""

CONCURRENT = """
import asyncio
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", concurrency=3)
async def test_together(case):
    await asyncio.sleep(0)
    assert_score("exact_match", output=case.output, expected="x", min=1)
"""


def test_only_a_controller_with_workers_has_a_hook_for_every_logged_report(
    pytester: pytest.Pytester,
) -> None:
    """Without xdist the makereport wrapper hands each report over as it is made: no hook of
    the plugin runs for each of the 3 reports a test logs. The xdist controller, whose reports
    come from workers, takes them in its logreport hook (and its scheduler learns from them
    which cases are done): with xdist installed but no workers (``-n 0``), neither is there.
    With workers but no concurrent cases, xdist's session gets its own scheduler back once the
    first schedule found nothing to share out (every call it makes goes straight to it); with
    concurrent cases the scheduler in front of it stays and learns from each report."""
    pytest.importorskip("xdist")
    write_dataset(pytester.path / "data" / "cases.jsonl", ROWS)
    pytester.makepyfile(test_t=PROJECT)
    pytester.makeconftest(HOOKS_SEEN)
    for extra, seen in (
        (["-p", "no:xdist"], "LOGREPORT []"),
        (["-n", "0"], "LOGREPORT []"),
        (["-n", "2"], "LOGREPORT ['llm-eval-worker-reports']"),
    ):
        result = pytester.runpytest_subprocess(
            "--llm-eval", "--llm-eval-cache=off", "-s", "-p", "no:randomly", *extra
        )
        result.assert_outcomes(passed=4, failed=2)
        assert seen in result.stdout.lines, extra
    assert "SCHEDULER LoadScheduling" in result.stdout.lines
    pytester.makepyfile(test_t=CONCURRENT)
    result = pytester.runpytest_subprocess(
        "--llm-eval", "--llm-eval-cache=off", "-s", "-p", "no:randomly", "-n", "2"
    )
    result.assert_outcomes(passed=4, failed=2)
    shares = "LOGREPORT ['llm-eval-worker-reports', 'llm-eval-xdist-share-reports']"
    assert shares in result.stdout.lines
    assert "SCHEDULER CaseShares" in result.stdout.lines
