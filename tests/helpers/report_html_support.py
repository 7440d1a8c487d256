"""The HTML report: data embedding and escaping, card statistics, the page in a real headless
Chromium (cards, gate verdicts, filters, sorting, a row's detail, the word diff, no script
injection), the --llm-eval-html option and the ``report`` subcommand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.report.html import write_html

XSS = "</script><script>document.title='XSS'</script><img src=x onerror=\"document.title='X2'\">"


SCORERS = ("exact_match", "llm_judge", "rouge_l")


def _record(i: int, **over: Any) -> dict[str, Any]:
    scorer = SCORERS[i % 3]
    score = round(((i * 37) % 100) / 100, 2)
    err = "JudgeError: the judge timed out" if i % 11 == 5 else None
    rec: dict[str, Any] = {
        "file": "tests/test_qa.py",
        "test": "test_answers",
        "case_id": f"q{i // 3:03d}",
        "scorer": scorer,
        "index": 0,
        "score": None if err else score,
        "min": 0.5,
        "max": None,
        "passed": None if err else score >= 0.5,
        "cached": i % 4 == 0,
        "duration_s": 0.01,
        "rationale": f"rationale {i}",
        "error": err,
        "where": f"tests/data/qa.jsonl:{i // 3 + 1}",
        "metadata": {},
        "prompt_tokens": 100 if scorer == "llm_judge" else 0,
        "completion_tokens": 20 if scorer == "llm_judge" else 0,
        "judge_calls": 1 if scorer == "llm_judge" else 0,
        "cost_usd": 0.0002 if scorer == "llm_judge" else None,
        "inputs": {
            "input": f"question {i}",
            "expected": f"{i} apples",
            "output": XSS if i == 4 else f"there are {i} apples in the basket",
        },
    }
    rec.update(over)
    return rec


def _report(n: int = 60, *, gates: bool = True, comparison: bool = True) -> dict[str, Any]:
    recs = [_record(i) for i in range(n)]
    rep: dict[str, Any] = {
        "version": 1,
        "run": {
            "started": 1_700_000_000.0,
            "duration_s": 4.5,
            "exitstatus": 1,
            "git_commit": "0123456789abcdef",
            "judge": {"model": "judge-model-x"},
        },
        "aggregates": {},
        "records": recs,
    }
    if gates:
        # two gate outcomes as the plugin writes them (GateOutcome.to_json()), one bare
        # GateResult.to_json()
        check = {
            "metric": "mean",
            "side": "min",
            "bound": 0.9,
            "verdict": "fail",
            "needed": None,
            "interval": {"estimate": 0.5, "low": 0.4, "high": 0.6},
            "reason": "",
        }
        rep["gates"] = [
            {
                "test": "tests/test_qa.py::test_answers",
                "scorer": "llm_judge",
                "verdict": "fail",
                "source": "marker",
                "note": None,
                "problem": None,
                "spec": {"scorer": "llm_judge", "min_mean": 0.9, "source": "marker"},
                "result": {
                    "spec": {},
                    "verdict": "fail",
                    "reason": "",
                    "checks": [check],
                    "n_cases": 20,
                    "n_scored": 18,
                    "n_errors": 2,
                    "n_samples": 20,
                    "flaky": [],
                    "cases": [],
                },
            },
            {
                "test": "tests/test_qa.py::test_answers",
                "scorer": "exact_match",
                "verdict": "pass",
                "source": "ini",
                "note": None,
                "problem": None,
                "spec": {"scorer": "exact_match", "min_pass_rate": 0.1},
                "result": None,
            },
            {
                "spec": {"scorer": "rouge_l", "min_mean": 0.5},
                "verdict": "inconclusive",
                "reason": "interval straddles 0.5",
                "checks": [],
                "n_cases": 20,
                "flaky": [],
            },
        ]
        rep["statistics"] = [
            {
                "test": "tests/test_qa.py::test_answers",
                "scorer": "llm_judge",
                "n_cases": 20,
                "n_samples": 20,
                "n_errors": 2,
                "flaky": ["x"],
                "mean": {"estimate": 0.458, "low": 0.327, "high": 0.59},
                "pass_rate": {"estimate": 0.389, "low": 0.203, "high": 0.614},
            },
        ]
    if comparison:
        cases = []
        # records 0..8: the baseline scored 0.1 higher, and said "pears" where now "apples"
        for r in recs[:9]:
            b = dict(r, score=None if r["score"] is None else r["score"] + 0.1)
            b["inputs"] = dict(r["inputs"], output=r["inputs"]["output"].replace("apples", "pears"))
            delta = None if r["score"] is None else -0.1
            cases.append(
                {
                    "key": [r["file"], r["test"], r["case_id"], r["scorer"], r["index"]],
                    "baseline": b,
                    "current": r,
                    "delta": delta,
                }
            )
        rep["comparison"] = {
            "baseline": {"git_commit": "fedcba9876543210", "started": 1_699_000_000.0},
            "scorers": [
                {
                    "scorer": "llm_judge",
                    "baseline_mean": 0.6,
                    "current_mean": 0.5,
                    "diff": -0.1,
                    "ci_low": -0.2,
                    "ci_high": -0.01,
                    "p_value": 0.03,
                    "regressed": [],
                    "improved": [],
                }
            ],
            "cases": cases,
        }
    return rep


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    write_html(path, _report())
    return path
