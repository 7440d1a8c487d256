"""Sharded runs and their merge (issue 11): ``--llm-eval-shard i/n`` and
``python -m pytest_llmeval merge``, through real pytest runs.

The project's fake app answers from the dataset (``outputs[sample]``), so every score is known:

case  outputs  exact_match per sample  case mean  case passes (min=1)
a     x x x    1 1 1                   1          yes
b     x y x    1 0 1                   2/3        no (flaky)
c     y y y    0 0 0                   0          no
d     x x x    1 1 1                   1          yes
e     x x y    1 1 0                   2/3        no (flaky)
f     x x x    1 1 1                   1          yes
g     y x x    0 1 1                   2/3        no (flaky)
h     x x x    1 1 1                   1          yes

exact_match over the 8 cases: mean 0.75, pass rate 4/8 = 0.5 (the gate wants 0.6: it fails).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.cli.merge import main as merge_main

CONFTEST = """
import pytest

@pytest.fixture
def app(case, llm_eval_sample):
    return lambda question: case.outputs[llm_eval_sample]
"""


OUTPUTS = {
    "a": "xxx",
    "b": "xyx",
    "c": "yyy",
    "d": "xxx",
    "e": "xxy",
    "f": "xxx",
    "g": "yxx",
    "h": "xxx",
}


ROWS = [
    {"id": c, "input": f"q{c}", "outputs": list(o), "expected": "x"} for c, o in OUTPUTS.items()
]


TEST_QA = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/qa.jsonl", repeat=3)
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, min_pass_rate=0.6)
@pytest.mark.llm_eval_gate("levenshtein", min_mean=0.5, confidence=0.9)
def test_qa(case, app):
    answer = app(case.input)
    assert_score("exact_match", output=answer, expected=case.expected, min=1)
    assert_score("levenshtein", output=answer, expected=case.expected, min=0)

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/qa.jsonl")
@pytest.mark.parametrize("style", ["plain", "upper"])
def test_styles(case, style):
    out = case.outputs[0] if style == "plain" else case.outputs[0].upper()
    assert_score("levenshtein", output=out, expected=case.expected, min=0)

@pytest.mark.parametrize("n", range(4))
def test_plain(n):
    assert n >= 0
"""


def _project(root: Path) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_qa.py").write_text(TEST_QA)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real pytest run of the project (in a subprocess: the shards stand for CI machines)."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--llm-eval"]
    argv += ["--llm-eval-cache=off", "--llm-eval-no-history", "-p", "no:randomly", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_EVAL_")}
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


#: run fields that legitimately differ between one run and the merge of its shards
_TIMING = ("started", "finished", "duration_s")


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out.pop("merged", None)
    for key in _TIMING:
        out["run"].pop(key)
    for r in out["records"]:
        r.pop("duration_s")
    for agg in out["aggregates"].values():
        agg.pop("time_s")
    return out


def _merge(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = merge_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err
