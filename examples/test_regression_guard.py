"""A merge guard in miniature: a baseline recorded on "main", pull requests compared with it, and
the ways a regression could slip through that the guard refuses. No judge, no network.

What a CI job runs on every pull request (see docs/guides/comparing-runs-ci.md and
docs/guides/gates-statistics.md, "What a verdict guarantees"):

    pytest --llm-eval --llm-eval-baseline=last --llm-eval-fail-on-regression

Each step below is a separate pytest process on a small support-bot project written to a
temporary folder ("the repository"); the bot's quality is set per step to stand for a code
change. The checks are the ones a reviewer would make by reading the output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = """
import pytest
from pytest_llmeval import assert_score, scorer

QUALITY = {quality!r}  # how many answers of 12 the bot gets right in this "commit"

@scorer(name="polite", version={version!r})
def polite(output):
    return 1.0 if output.startswith("Thanks") else 0.0

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_bot(case):
    reply = case.expected if int(case.id[1:]) < QUALITY else "no idea"
    answer = "Thanks! " + reply
    assert_score("exact_match", output=reply, expected=case.expected, min=0)
    assert_score("polite", output=answer, min=0)
"""


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"q{i}", "expected": f"answer {i}"}) + "\n" for i in range(12))
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def _commit(repo: Path, quality: int, version: str = "1") -> None:
    (repo / "test_bot.py").write_text(SUITE.format(quality=quality, version=version))


def _pytest(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_EVAL_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--llm-eval",
            "--llm-eval-no-progress",
            "--llm-eval-cache=off",
            *args,
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


GUARD = ("--llm-eval-baseline=last", "--llm-eval-fail-on-regression")


@pytest.mark.llm_eval
def test_a_regression_fails_the_pull_request_and_keeps_failing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _commit(repo, quality=12)
    main = _pytest(repo, *GUARD)
    assert main.returncode == 0, main.stdout  # nothing saved yet: this run becomes the baseline
    assert "no saved run yet; nothing compared" in main.stdout

    _commit(repo, quality=6)  # a pull request that breaks half of the answers
    pr = _pytest(repo, *GUARD)
    assert pr.returncode == 1, pr.stdout
    assert "REGRESSED" in pr.stdout
    print(pr.stdout[pr.stdout.index("llm-eval comparison") - 31 :])

    retry = _pytest(repo, *GUARD)  # the same commit again: the failed run is no baseline
    assert retry.returncode == 1, retry.stdout
    assert "baseline: run 1 (the first saved run that passed" in retry.stdout
    assert "passed over: run 2: failed: regression: exact_match mean 1.000 -> 0.500" in (
        retry.stdout
    )


@pytest.mark.llm_eval
def test_a_changed_instrument_is_not_compared_as_if_it_were_the_same(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _commit(repo, quality=12, version="1")
    assert _pytest(repo, "--llm-eval-report=main.json").returncode == 0
    _commit(repo, quality=12, version="2")  # the scorer changed, not the bot
    pr = _pytest(repo, "--llm-eval-baseline=main.json", "--llm-eval-fail-on-regression")
    assert pr.returncode == 1, pr.stdout
    assert 'polite: instrument changed: version: "1" -> "2"' in pr.stdout
    accepted = _pytest(
        repo,
        "--llm-eval-baseline=main.json",
        "--llm-eval-fail-on-regression",
        "--llm-eval-accept-incomparable=polite",
    )
    assert accepted.returncode == 0, accepted.stdout
    assert "unchanged (instrument changed: accepted)" in accepted.stdout


@pytest.mark.llm_eval
def test_a_broken_or_foreign_baseline_never_passes_for_no_regression(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _commit(repo, quality=12)
    record = {"file": "x.py", "test": "t", "case_id": 7, "scorer": "s", "score": 1, "passed": None}
    (repo / "broken.json").write_text(json.dumps({"records": [record]}))
    run = _pytest(repo, "--llm-eval-baseline=broken.json", "--llm-eval-report=pr.json")
    assert run.returncode == 4, run.stdout  # usage error: the file, the field, and what is wrong
    assert "broken.json (field records[0].case_id)" in run.stdout
    assert len(json.loads((repo / "pr.json").read_text())["records"]) == 24  # results kept
    (repo / "other.json").write_text(json.dumps({"records": []}))
    run = _pytest(repo, "--llm-eval-baseline=other.json", "--llm-eval-fail-on-regression")
    assert run.returncode == 1, run.stdout
    assert "nothing compared" in run.stdout
