"""Files written by an older pytest-llmeval still work (tests/data/compat; written_by.txt names
the commit, make.py how): its result cache is hit by every scoring (replay mode, where a miss is
an error, with no judge to call), its JSON report and saved run load as baselines and compare as
the same instruments, unchanged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from paths import DATA, ROOT

COMPAT = DATA / "compat"

#: nothing listens there: a judge call would be an error
NO_JUDGE = "http://127.0.0.1:9/v1"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    for item in (COMPAT / "project").iterdir():
        shutil.copy(item, pytester.path / item.name)
    (pytester.path / ".llmeval").mkdir()
    shutil.copy(COMPAT / "results.sqlite3", pytester.path / ".llmeval" / "results.sqlite3")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", NO_JUDGE)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-compat")
    return pytester


def test_an_old_cache_is_hit_by_every_stored_scoring(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "--llm-eval", "--llm-eval-cache=replay", "--llm-eval-report=r.json", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=11)
    records = json.loads((project.path / "r.json").read_text())["records"]
    assert len(records) == 19
    # every scorer that stores is read from the old cache; exact_match stores nothing since
    # issue 24 (its comparison costs less than a lookup): computed, with the old values
    stored = [r for r in records if r["scorer"] != "exact_match"]
    assert len(stored) == 8 and all(r["cached"] for r in stored), stored
    assert not any(r["cached"] for r in records if r["scorer"] == "exact_match")
    old = json.loads((COMPAT / "report.json").read_text())["records"]
    assert sorted((r["test"], r["case_id"], r["scorer"], r["score"]) for r in records) == sorted(
        (r["test"], r["case_id"], r["scorer"], r["score"]) for r in old
    )
    result.stdout.fnmatch_lines(["19 scores, 8 from cache, 0 judge calls*"])


def test_an_old_report_and_saved_run_are_baselines_of_the_same_instruments(
    project: pytest.Pytester,
) -> None:
    shutil.copy(COMPAT / "report.json", project.path / "old.json")
    runs = project.path / ".llmeval" / "runs"
    runs.mkdir()
    shutil.copy(COMPAT / "run-0001.json", runs / "0001.json")
    for baseline in ("old.json", "last"):
        result = project.runpytest(
            "--llm-eval",
            "--llm-eval-cache=replay",
            f"--llm-eval-baseline={baseline}",
            "--llm-eval-fail-on-regression",
            "--llm-eval-report=new.json",
        )
        result.assert_outcomes(passed=11)
        assert result.ret == 0, baseline
        # every scorer and the gate paired on every case, as the same instrument, unchanged
        result.stdout.fnmatch_lines(
            [
                "compat_length * 2 * 0.375 * 0.375 * +0.000 * unchanged",
                "compat_overlap * 2 * 0.500 * 0.500 * +0.000 * unchanged",
                "exact_match * 8 * 0.875 * 0.875 * +0.000 * unchanged",
                "l3score * 2 * 0.917 * 0.917 * +0.000 * unchanged",
                "levenshtein * 2 * 0.625 * 0.625 * +0.000 * unchanged",
                "gate exact_match (test_compat.py::test_dataset) * 3 * unchanged",
            ]
        )
        comparison = result.stdout.str().split("llm-eval comparison")[1]
        assert "incomparable" not in comparison.lower()
        assert "instrument changed" not in comparison
    command = [sys.executable, "-m", "pytest_llmeval", "compare"]
    env_path = {"PYTHONPATH": str(ROOT)}
    for old in ("old.json", str(runs / "0001.json")):
        done = subprocess.run(
            [*command, old, "new.json", "--json", "--fail-on-regression"],
            cwd=project.path,
            capture_output=True,
            text=True,
            env={**__import__("os").environ, **env_path},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        verdicts = {s["name"]: s["verdict"] for s in json.loads(done.stdout)["scorers"]}
        assert verdicts == {
            "compat_length": "unchanged",
            "compat_overlap": "unchanged",
            "exact_match": "unchanged",
            "l3score": "unchanged",
            "levenshtein": "unchanged",
        }
