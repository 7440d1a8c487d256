"""Result cache hardening: odd strings in keys, read-only stores, corruption found after opening,
and replay misses that say which part of the key changed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cache_integrity_support import (
    BAD_VALUES,
    REPO,
    _set_values,
    _snapshot,
    _under_read_only_mount,
    needs_ro_mount,
)

SURROGATE_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_exact(case):
    # levenshtein: a stored scorer (exact_match stores nothing)
    assert_score("levenshtein", output=case.output, expected=case.expected, min=1)
"""


def test_lone_surrogate_in_a_jsonl_row_passes_with_the_cache_on(pytester: pytest.Pytester) -> None:
    # json.dumps writes the lone surrogate as the escape \\ud800, which JSON allows
    rows = [
        {"id": "lone", "output": "x\ud800", "expected": "x\ud800"},
        {"id": "plain", "output": "x", "expected": "x"},
    ]
    (pytester.path / "cases.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pytester.makepyfile(test_s=SURROGATE_TESTS)
    pytester.makeini("[pytest]\n")
    pytester.runpytest("--llm-eval", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    db = pytester.path / ".llmeval" / "results.sqlite3"
    assert sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0] == 2
    pytester.runpytest(
        "--llm-eval", "--llm-eval-cache=replay", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=2)


CASE_CONFTEST = """
from pytest_llmeval import Score, Scorer
from pytest_llmeval.judge import judge_identity

class CaseJudge(Scorer):
    name = "case_judge"
    uses_judge = True
    required_inputs = ("output",)

    def extra_identity(self, ctx):
        return judge_identity(self, ctx, "prompt-v1")

    def compute(self, inputs, ctx):
        return Score(value=1.0)

def pytest_llmeval_register_scorers(registry, config):
    registry.register(CaseJudge, replace=True)
"""


CASE_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("faq.jsonl")
def test_faq(case):
    assert_score("case_judge", output=case.output, min=0.5)
"""


def test_replay_run_after_recording_with_another_judge_model_says_so_per_case(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CASE_CONFTEST)
    pytester.makepyfile(test_faq=CASE_TESTS)
    pytester.makeini("[pytest]\n")
    rows = [{"id": f"q{i}", "output": f"answer {i}"} for i in range(3)]
    (pytester.path / "faq.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pytester._monkeypatch.setenv("LLM_EVAL_JUDGE_MODEL", "local")
    pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    pytester._monkeypatch.delenv("LLM_EVAL_JUDGE_MODEL")
    result = pytester.runpytest_subprocess(
        "--llm-eval", "--llm-eval-cache=replay", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(errors=3)
    for line in (1, 2, 3):
        result.stdout.fnmatch_lines(
            [
                f"*scorer 'case_judge': no cached result (case faq.jsonl:{line}): "
                "a recorded entry for this case differs in judge model: recorded 'local', "
                "now 'gpt-4o-mini'.*"
            ]
        )


XDIST_CONFTEST = CASE_CONFTEST


@needs_ro_mount
def test_xdist_replay_run_on_a_read_only_cache_mount(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(XDIST_CONFTEST)
    pytester.makepyfile(test_faq=CASE_TESTS)
    pytester.makeini("[pytest]\n")
    rows = [{"id": f"q{i}", "output": f"answer {i}"} for i in range(4)]
    (pytester.path / "faq.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    cache = pytester.path / ".llmeval"
    before = _snapshot(cache)
    argv = [sys.executable, "-m", "pytest", "--llm-eval", "--llm-eval-cache=replay"]
    argv += ["-p", "no:cacheprovider", "-n", "2", "-q"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        _under_read_only_mount(cache, argv),
        cwd=pytester.path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "4 passed" in proc.stdout
    assert _snapshot(cache) == before


TAMPER_CONFTEST = """
from pytest_llmeval import Score, Scorer

class Low(Scorer):
    '''Scores every output 0.2: a gate with min_mean=0.7 over it must fail.'''
    name = "low"
    required_inputs = ("output",)

    def compute(self, inputs, ctx):
        return Score(value=0.2, rationale="low by design")

class LowJudge(Low):
    name = "low_judge"
    uses_judge = True  # replay stands in for it: an unusable entry is an error

def pytest_llmeval_register_scorers(registry, config):
    registry.register(Low, replace=True)
    registry.register(LowJudge, replace=True)
"""


TAMPER_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("{scorer}", min_mean=0.7)
@pytest.mark.parametrize("i", range(3))
def test_gated(i):
    assert_score("{scorer}", output=f"answer {{i}}")
"""


def _tamper_project(p: pytest.Pytester, scorer: str = "low") -> Path:
    p.makeconftest(TAMPER_CONFTEST)
    p.makepyfile(test_gated=TAMPER_TESTS.format(scorer=scorer))
    p.makeini("[pytest]\n")
    return p.path / ".llmeval" / "results.sqlite3"


def _gate_run(p: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    report = p.path / "report.json"
    report.unlink(missing_ok=True)
    result = p.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", f"--llm-eval-report={report}", *args
    )
    return result, json.loads(report.read_text())


@pytest.mark.parametrize(
    ("stored", "problem"),
    [p for p in BAD_VALUES if p.id in ("out-of-range-int", "string", "nan", "absurd")],
)
def test_a_tampered_sqlite_value_never_passes_a_gate(
    pytester: pytest.Pytester, stored: str, problem: str
) -> None:
    """A stored value that is not a score of this scorer (out of its range, not a number, NaN,
    damaged) is a miss: the score is computed again (0.2) and the gate fails, as it did before
    the store was touched; one warning names the SQLite file, the key and what is wrong."""
    db = _tamper_project(pytester)
    result, report = _gate_run(pytester)
    assert result.ret == 1 and report["gates"][0]["verdict"] == "fail"
    keys = _set_values(db, stored)
    assert len(keys) == 3
    result, report = _gate_run(pytester, "-W", "always::UserWarning")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert result.ret == 1, out
    gate = report["gates"][0]
    assert gate["verdict"] == "fail", gate
    records = report["records"]
    assert [r["score"] for r in records] == [0.2, 0.2, 0.2]
    assert not any(r["cached"] for r in records)
    assert f"SQLite cache {db}" in out
    assert keys[0] in out
    assert problem in out, out
    # recomputed, the entries are right again: the next run reads them
    result, report = _gate_run(pytester)
    assert result.ret == 1 and [r["cached"] for r in report["records"]] == [True] * 3


def test_a_stored_passed_flag_is_never_a_verdict(pytester: pytest.Pytester) -> None:
    """Only the value comes from the store: a ``passed`` field added to it changes nothing."""
    db = _tamper_project(pytester)
    _gate_run(pytester)
    _set_values(db, '{"value": 0.2, "passed": true, "rationale": "low by design"}')
    result, report = _gate_run(pytester)
    assert result.ret == 1 and report["gates"][0]["verdict"] == "fail"
    assert [r["cached"] for r in report["records"]] == [True] * 3


def test_an_unusable_judge_entry_in_replay_is_an_error_saying_how_to_re_record(
    pytester: pytest.Pytester,
) -> None:
    db = _tamper_project(pytester, "low_judge")
    _gate_run(pytester)
    keys = _set_values(db, '{"value": 100}')
    result, report = _gate_run(pytester, "--llm-eval-cache=replay")
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    for k in keys:
        assert (
            f"InvalidCacheEntryError: scorer 'low_judge': the cached result (key {k[:16]}...) "
            "cannot be used: 'value' 100 is outside the scorer's range [0.0, 1.0]"
        ) in out
    assert "--llm-eval-cache=refresh" in out
    assert report["gates"][0]["verdict"] != "pass"


def test_a_nan_in_the_store_is_a_miss_never_an_internal_error(pytester: pytest.Pytester) -> None:
    """Finding 13: NaN written by another tool used to abort the run after the first test."""
    db = _tamper_project(pytester)
    _gate_run(pytester)
    _set_values(db, '{"value": NaN}')
    result, report = _gate_run(pytester, "-n", "2")
    assert "INTERNALERROR" not in result.stdout.str()
    assert len(report["records"]) == 3 and result.ret == 1
