"""qa_correctness's "not applicable" verdict (Bench scores it -1): an explicit outcome, never a
score and never cached: the test's ERROR (default) or a skip (``not_applicable="skip"``)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from qa_not_applicable_support import NA

from pytest_llmeval.testing import OpenAITestServer

TESTS = """
from pytest_llmeval import assert_score

def test_na():
    assert_score("qa_correctness", input="When is high tide?", context="Boil pasta.",
                 output="6pm", min=0.5{opts})
"""


def _project(p: pytest.Pytester, server: OpenAITestServer, opts: str = "") -> None:
    p.makepyfile(test_na=TESTS.format(opts=opts))
    p.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    p._monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    p._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")


def _cached_rows(p: pytest.Pytester) -> int:
    db = p.path / ".llmeval" / "results.sqlite3"
    if not db.exists():
        return 0
    return int(sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0])


def test_not_applicable_is_the_tests_error_never_cached(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _project(pytester, judge_server)
    judge_server.set_default(NA)
    out = pytester.path / "r.json"
    result = pytester.runpytest(f"--llm-eval-report={out}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*JudgeNotApplicableError*not applicable to the context*cooking*"])
    rec = json.loads(out.read_text())["records"][0]
    assert rec["score"] is None and rec["error"].startswith("JudgeNotApplicableError: ")
    assert _cached_rows(pytester) == 0
    # asked again on the next run (nothing was cached)
    judge_server.clear()
    judge_server.set_default(NA)
    pytester.runpytest().assert_outcomes(errors=1)
    assert len(judge_server.requests_to("chat")) == 1


def test_not_applicable_skip_option(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _project(pytester, judge_server, opts=', not_applicable="skip"')
    judge_server.set_default(NA)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*qa_correctness: the judge found the question not applicable*cooking*"]
    )
    assert _cached_rows(pytester) == 0


BATCH = """
from pytest_llmeval import assert_scores

def test_batch():
    rows = [{"input": "q1", "context": "c1", "output": "o1"},
            {"input": "q2", "context": "c2", "output": "o2"}]
    assert_scores("qa_correctness", rows, min=0.5, not_applicable="skip")
"""


def test_not_applicable_skip_in_a_batch_skips_the_test(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _project(pytester, judge_server)
    pytester.makepyfile(test_na=BATCH)
    judge_server.set_default(NA)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*not applicable to the context*"])
    # the batch's record says why (listed under the summary's scoring errors)
    result.stdout.fnmatch_lines(["*test_batch qa_correctness: Skipped: qa_correctness: the judge*"])
    assert _cached_rows(pytester) == 0


MARKED = """
import sys
import pytest
from pytest_llmeval import assert_score

def _na():
    assert_score("qa_correctness", input="When is high tide?", context="Boil pasta.",
                 output="6pm", min=0.5, not_applicable="skip")

@pytest.fixture
def scored_in_setup():
    _na()

@pytest.mark.xfail(reason="expected to fail")
def test_marked_xfail():
    _na()

def test_in_a_fixture(scored_in_setup):
    pass

def test_after():
    # the scorer's exception is not kept for a post-mortem, as a skip is not
    assert type(getattr(sys, "last_value", None)).__name__ != "Skipped"
"""


def test_a_scorers_skip_is_a_skip_under_xfail_and_in_a_fixture_at_the_tests_line(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """The skip is made before the report (not in a wrapper of the test's call): an xfail mark
    does not turn it into an expected failure, a fixture's scoring skips its test, and the
    skip points at the test, not at the plugin."""
    _project(pytester, judge_server)
    pytester.makepyfile(test_na=MARKED)
    judge_server.set_default(NA)
    result = pytester.runpytest("-rs", "-p", "no:randomly")
    result.assert_outcomes(skipped=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] test_na.py:13: qa_correctness: the judge found*",
            "SKIPPED [[]1[]] test_na.py:17: qa_correctness: the judge found*",
        ]
    )
    assert "pytest_llmeval" not in "\n".join(
        line for line in result.stdout.lines if line.startswith("SKIPPED")
    )
    assert _cached_rows(pytester) == 0
