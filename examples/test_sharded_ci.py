"""A CI job matrix in miniature: the gated suite (test_gated_suite.py) run as three shards, each
on "its own machine" (a separate pytest process), then merged into one verdict.

This is what a CI workflow does (see docs/guides/concurrency.md, "Sharded CI runs (merge)"):

    pytest --llm-eval --llm-eval-shard 1/3 --llm-eval-report shard-1.json   # job 1
    pytest --llm-eval --llm-eval-shard 2/3 --llm-eval-report shard-2.json   # job 2
    pytest --llm-eval --llm-eval-shard 3/3 --llm-eval-report shard-3.json   # job 3
    python -m pytest_llmeval merge shard-*.json -o report.json              # the verdict

Each shard's gates see a third of the cases and say PARTIAL; the merge judges the gates over all
cases and samples and gives the same numbers as one unsharded run. No judge, no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUITE = "examples/test_gated_suite.py"
OPTIONS = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-history", "--llm-eval-no-progress")


def _pytest(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLM_EVAL_SHARD"}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider", *OPTIONS, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.llm_eval
def test_three_shards_merge_into_the_verdict_of_one_run(tmp_path: Path) -> None:
    # the three "CI jobs" and one unsharded run for comparison, at the same time
    jobs = [
        _pytest(f"--llm-eval-shard={i}/3", f"--llm-eval-report={tmp_path}/shard-{i}.json")
        for i in (1, 2, 3)
    ]
    whole = _pytest(f"--llm-eval-report={tmp_path}/whole.json")
    outputs = [job.communicate(timeout=300)[0] for job in [*jobs, whole]]
    for job, out in zip(jobs, outputs, strict=False):
        assert job.returncode == 0, out  # a shard's gates are partial: they never fail the job
        assert "gates: PARTIAL, shard" in out

    merge = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "merge"]
        + [str(tmp_path / f"shard-{i}.json") for i in (1, 2, 3)]
        + ["-o", str(tmp_path / "report.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(merge.stdout)  # `pytest -s` shows the merged verdict
    assert merge.returncode == whole.returncode, merge.stdout + merge.stderr

    merged = json.loads((tmp_path / "report.json").read_text())
    unsharded = json.loads((tmp_path / "whole.json").read_text())
    # the same gate verdicts and numbers, and the same statistics, as the unsharded run
    assert merged["gates"] == unsharded["gates"]
    assert merged["statistics"] == unsharded["statistics"]
    assert [g["verdict"] for g in merged["gates"]] == [g["verdict"] for g in unsharded["gates"]]
    assert merged["aggregates"]["exact_match"]["n"] == 8 * 5  # 8 cases x 5 samples
