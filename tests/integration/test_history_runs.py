"""Run history (issue 10): numbered saved runs under <cache dir>/runs/, concurrent saves,
--llm-eval-history / --llm-eval-no-history, baseline resolution, and JUnit properties."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest

from pytest_llmeval.stores.history import (
    list_runs,
    load_run,
)

TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("word", ["alpha", "beta", "gamma", "delta"])
def test_words(word):
    assert_score("exact_match", output=word, expected="alpha", min=0.0)
    assert_score("exact_match", output=word, expected=word, min=0.5)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_eval=TESTS)
    pytester.makeini("[pytest]\n")
    return pytester


def _runs(p: pytest.Pytester) -> list[int]:
    return list_runs(p.path / ".llmeval" / "runs")


def test_every_llm_eval_run_is_saved_and_history_n_keeps_the_last_n(
    project: pytest.Pytester,
) -> None:
    project.runpytest("--llm-eval").assert_outcomes(passed=4)
    assert _runs(project) == [1]
    run = load_run(project.path / ".llmeval" / "runs", 1)
    assert len(run["report"]["records"]) == 8
    assert set(run["git"]) == {"commit", "dirty", "branch"}
    assert run["judge"]["model"]
    for _ in range(3):
        result = project.runpytest("--llm-eval", "--llm-eval-history=2", "-v")
    result.stdout.fnmatch_lines(["llm-eval: saved run 4 in *runs"])
    assert _runs(project) == [1, 3, 4]  # 1: the first passing run, the baseline 'last' names
    project.runpytest("--llm-eval", "--llm-eval-no-history")
    project.runpytest("--llm-eval", "--llm-eval-history=0")
    project.runpytest()  # without --llm-eval nothing is scored or saved
    assert _runs(project) == [1, 3, 4]


def test_history_records_git_commit_dirty_flag_and_branch(project: pytest.Pytester) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=project.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "evalbranch")
    git("-c", "user.email=a@b", "-c", "user.name=t", "add", "test_eval.py", "tox.ini")
    git("-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q", "-m", "x")
    project.runpytest("--llm-eval")
    run = load_run(project.path / ".llmeval" / "runs", 1)
    assert run["git"] == {
        "commit": git("rev-parse", "HEAD"),
        "dirty": False,
        "branch": "evalbranch",
    }
    (project.path / "test_eval.py").write_text(TESTS + "\n# changed\n")
    project.runpytest("--llm-eval")
    assert load_run(project.path / ".llmeval" / "runs", 2)["git"]["dirty"] is True


def test_saved_on_the_xdist_controller_only(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess("--llm-eval", "-n", "2")
    result.assert_outcomes(passed=4)
    assert _runs(project) == [1]
    assert len(load_run(project.path / ".llmeval" / "runs", 1)["report"]["records"]) == 8


@pytest.mark.parametrize("xdist", [False, True])
def test_junit_xml_carries_the_scores_as_properties(project: pytest.Pytester, xdist: bool) -> None:
    args = ["--llm-eval", "--junitxml=out.xml"]
    if xdist:
        pytest.importorskip("xdist")
        result = project.runpytest_subprocess(*args, "-n", "2")
    else:
        result = project.runpytest(*args)
    result.assert_outcomes(passed=4)
    root = ET.parse(project.path / "out.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_words[beta]"].iter("property")}
    assert props == {
        "llm_eval:exact_match": "0.0",
        "llm_eval:exact_match:bound": ">= 0",
        "llm_eval:exact_match#1": "1.0",
        "llm_eval:exact_match#1:bound": ">= 0.5",
    }


def test_no_properties_without_junitxml(project: pytest.Pytester) -> None:
    project.makeconftest(
        """
def pytest_runtest_logreport(report):
    if report.when == "teardown" and report.user_properties:
        raise AssertionError(report.user_properties)
"""
    )
    project.runpytest("--llm-eval").assert_outcomes(passed=4)
