"""Small pytest projects and commands the verdict tests share (gates, comparison, merge)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from case_files import write_dataset
from paths import ROOT

#: a plugin run without the result cache (each run scores afresh) and without pytest's cache
OFF = ("--llm-eval", "--llm-eval-cache=off", "-p", "no:cacheprovider")


GATED = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.9)
def test_q(case):
    bad = os.environ.get("ATK_BAD") == "1" and case.n % 3 != 0
    assert_score("exact_match", output="b" if bad else "a", expected="a", min=0)
"""


def gated_project(p: pytest.Pytester) -> None:
    write_dataset(p.path / "data" / "cases.jsonl", [{"id": f"c{i:02d}", "n": i} for i in range(9)])
    p.makepyfile(test_q=GATED)


def run_cli(p: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", *args],
        cwd=p.path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
