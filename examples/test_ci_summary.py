"""The Markdown summary a CI job posts on a pull request (see docs/guides/reports.md,
"Markdown summary for CI"): a baseline recorded on "main", then a pull request that makes 6 of
16 answers worse, compared with it and summed up in Markdown. No judge, no network.

What the pull request's job runs:

    pytest --llm-eval --llm-eval-baseline=baseline.json --llm-eval-fail-on-regression \\
        --llm-eval-markdown=llm-eval.md

and, inside GitHub Actions, the same Markdown is appended to the job's summary page
($GITHUB_STEP_SUMMARY); a later step posts llm-eval.md as a pull-request comment. Run with
``pytest -s`` to see the Markdown.
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
from pytest_llmeval import assert_score

QUALITY = {quality!r}  # how many of the 16 answers this "commit" gets right

def bot(case):
    if int(case.id[1:]) < QUALITY:
        return case.expected
    return case.expected.split(" then ")[0]  # the second half of the answer is lost

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
@pytest.mark.llm_eval_gate("levenshtein", min_mean=0.8)
def test_support_bot(case):
    assert_score("levenshtein", output=bot(case), expected=case.expected, min=0.9)
"""

TOPICS = ("password", "invoice", "account", "refund", "address", "plan")


def _repo(tmp_path: Path, quality: int) -> Path:
    rows = [
        {
            "id": f"q{i}",
            "expected": f"To change your {TOPICS[i % 6]} open Settings then {TOPICS[i % 6]} "
            f"and follow step {i % 4 + 1}",
        }
        for i in range(16)
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_support.py").write_text(SUITE.format(quality=quality))
    return tmp_path


def _pytest(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
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
            "--llm-eval-no-history",
            *args,
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.llm_eval
def test_a_pull_request_gets_a_markdown_summary(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LLM_EVAL_") and k != "GITHUB_STEP_SUMMARY"
    }
    repo = _repo(tmp_path, quality=16)
    main = _pytest(repo, "--llm-eval-report=baseline.json", env=env)
    assert main.returncode == 0, main.stdout

    # the pull request: 6 of 16 answers lose their second half (the gate still passes)
    _repo(tmp_path, quality=10)
    step = tmp_path / "step-summary.md"
    pr = _pytest(
        repo,
        "--llm-eval-baseline=baseline.json",
        "--llm-eval-fail-on-regression",
        "--llm-eval-markdown=llm-eval.md",
        env={**env, "GITHUB_STEP_SUMMARY": str(step)},
    )
    summary = (repo / "llm-eval.md").read_text(encoding="utf-8")
    print(summary)  # `pytest -s` shows what the pull request would get
    assert pr.returncode == 1, pr.stdout  # a significant regression fails the job
    assert step.read_text(encoding="utf-8") == summary  # the job's summary page has it too

    from markdown_it import MarkdownIt

    # the comparison table as GitHub's renderer reads it: its header ends with "verdict", and
    # the scorer's row follows
    tokens = MarkdownIt("gfm-like").parse(summary)
    cells = [t.content for t in tokens if t.type == "inline"]
    start = cells.index("verdict") + 1
    row = cells[start : start + 13]
    assert row[0] == "`levenshtein`" and row[1] == "16" and row[-1] == "**regressed**"
    assert summary.startswith("## ❌ pytest-llmeval: FAIL\n")
    assert "### Regressed cases" in summary
    assert len(summary) <= 65_536
