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

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from case_files import read_report, write_dataset
from merge_support import (  # noqa: F401
    _TIMING,
    CONFTEST,
    OUTPUTS,
    ROWS,
    TEST_QA,
    _comparable,
    _load,
    _merge,
    _project,
    _pytest,
)
from paths import ROOT


def _selected(root: Path, *args: str) -> list[str]:
    proc = _pytest(root, "--collect-only", "-q", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


def _case_of(nodeid: str) -> str:
    """test_qa.py::test_qa[b-s1] -> test_qa.py::test_qa[b] (the samples of a case share its
    key); test_styles[b-upper] stays itself: each parametrization of a dataset case is a case
    of its own (issue 19: they shared one record identity)."""
    name, _, param = nodeid.partition("[")
    if not name.endswith("::test_qa"):
        return nodeid
    return f"{name}[{param.split('-')[0]}]"


COLLECT = ("--collect-only", "-q", "--llm-eval-report=r.json")


def test_the_split_is_by_case_balanced_and_deterministic(tmp_path: Path) -> None:
    root = _project(tmp_path)
    everything = _selected(root)
    assert len(everything) == 8 * 3 + 8 * 2 + 4
    shards = [
        _selected(root, f"--llm-eval-shard={i}/3", "--llm-eval-report=r.json") for i in (1, 2, 3)
    ]
    assert sorted(n for items in shards for n in items) == sorted(
        everything
    )  # each item in exactly one shard
    owner: dict[str, int] = {}
    for i, items in enumerate(shards, 1):
        for nodeid in items:
            # every sample (-s0..-s2) of a case in one shard
            assert owner.setdefault(_case_of(nodeid), i) == i, nodeid
    # the documented rule: round-robin over the sorted llm_eval case keys, then the other tests
    llm = sorted({_case_of(n) for n in everything if "test_plain" not in n})
    plain = sorted(n for n in everything if "test_plain" in n)
    expected = {k: pos % 3 + 1 for pos, k in enumerate([*llm, *plain])}
    assert owner == expected
    sizes = [sum(1 for k in owner.values() if k == i) for i in (1, 2, 3)]
    assert max(sizes) - min(sizes) <= 1  # 28 cases: 10, 9, 9
    assert sizes == [10, 9, 9]
    # the same on a second collection (and any machine: sorted strings, no hash seed)
    assert _selected(root, "--llm-eval-shard=2/3", "--llm-eval-report=r.json") == shards[1]
    # LLM_EVAL_SHARD works like the option
    env_run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--llm-eval", *COLLECT],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "LLM_EVAL_SHARD": "3/3"},
        timeout=120,
    )
    assert [line for line in env_run.stdout.splitlines() if "::" in line] == shards[2]


JUDGED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/qa.jsonl", repeat=2)
@pytest.mark.llm_eval_gate("l3score", min_mean=0.5)
def test_judged(case, app):
    answer = app(case.input)
    assert_score("l3score", input=case.input, expected=case.expected, output=answer, min=0.5)
"""


def test_judged_shards_merge_to_the_unsharded_report(
    pytester: pytest.Pytester, judge_server: Any, capsys: Any
) -> None:
    """With the test server as the judge (its reply depends on the answer judged)."""
    from pytest_llmeval.testing import text

    def reply(body: dict[str, Any]) -> Any:
        """ "Yes" (likely) for the right answer x, "Yes" (unlikely) for a wrong one."""
        prompt = " ".join(str(m.get("content")) for m in body["messages"])
        m = re.search(r"<candidate_answer_\w+>\n(.*?)\n</candidate_answer_", prompt, re.S)
        assert m is not None, prompt
        yes = -0.05 if m.group(1).strip() == "x" else -3.0
        return text("Yes", top_logprobs=[("Yes", yes), ("No", -1.0)], usage=(100, 1))

    judge_server.set_default(reply)
    root = _project(pytester.path)
    (root / "test_qa.py").write_text(JUDGED)
    (root / "pytest.ini").write_text(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-merge-SECRET")
    common = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-history", "-p", "no:randomly")
    full = pytester.runpytest(*common, "--llm-eval-report=full.json")
    calls = len(judge_server.requests)
    assert calls == 16
    for i in (1, 2, 3):
        result = pytester.runpytest(
            *common, f"--llm-eval-shard={i}/3", f"--llm-eval-report=shard-{i}.json"
        )
        assert result.ret == 0
    assert len(judge_server.requests) == 2 * calls  # every sample judged once over the shards
    capsys.readouterr()
    status, out, _ = _merge(
        capsys, *(root / f"shard-{i}.json" for i in (1, 2, 3)), "-o", root / "m.json"
    )
    assert status == full.ret
    a, b = _comparable(_load(root / "full.json")), _comparable(_load(root / "m.json"))
    assert a == b
    assert b["run"]["judge"]["served_models"] == ["test-judge"]
    assert b["aggregates"]["l3score"]["judge_calls"] == 16
    assert len({r["score"] for r in b["records"]}) == 2  # two different judgements
    assert "SECRET" not in (root / "m.json").read_text() + out


OFF = ("--llm-eval", "--llm-eval-cache=off", "-p", "no:cacheprovider")


def _cli(p: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", *args],
        cwd=p.path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


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


def _gated_project(p: pytest.Pytester) -> None:
    write_dataset(p.path / "data" / "cases.jsonl", [{"id": f"c{i:02d}", "n": i} for i in range(9)])
    p.makepyfile(test_q=GATED)


def test_a_shard_report_without_its_plan_is_refused_by_merge(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack (a shard report edited, or cut, before merge): a version-2 shard report without
    its 'plan' section still validates (the schema requires only 'records'); ``merge`` of
    three such shards judged no gate at all, 'verdict: PASS (0 gate(s) over the whole run)',
    exit 0, while the same shards with their plans fail the gate (mean 0.333 < 0.9). A report
    that says it is version 2 must carry what version 2 decides with."""
    _gated_project(pytester)
    monkeypatch.setenv("ATK_BAD", "1")
    for i in (1, 2, 3):
        pytester.runpytest(*OFF, "--llm-eval-shard", f"{i}/3", f"--llm-eval-report=s{i}.json")
    whole = _cli(pytester, "merge", "s1.json", "s2.json", "s3.json", "-o", "m.json")
    assert whole.returncode == 1, whole.stdout  # the gate fails over the whole run
    for i in (1, 2, 3):
        data = read_report(pytester, f"s{i}.json")
        del data["plan"]
        (pytester.path / f"t{i}.json").write_text(json.dumps(data), "utf-8")
    cut = _cli(pytester, "merge", "t1.json", "t2.json", "t3.json", "-o", "mt.json")
    assert cut.returncode == 2, cut.stdout
    assert "plan" in cut.stderr


def test_merge_with_another_baseline_than_the_shards_compared_with_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the shards compared with base.json (6 of 9 cases 1 -> 0: a regression each shard
    would report). ``merge ... --baseline other.json``, other.json being a report of the
    regressed code, compared with other.json ('unchanged'), printed the comparison under the
    shards' label 'base.json -> this run' and said 'verdict: PASS', exit 0. The identity check
    that refuses a file that is not the shards' baseline ran only without --baseline."""
    _gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    monkeypatch.setenv("ATK_BAD", "1")
    pytester.runpytest(*OFF, "--llm-eval-report=other.json").assert_outcomes(passed=9)
    check = ("--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression")
    for i in (1, 2, 3):
        pytester.runpytest(
            *OFF, *check, "--llm-eval-shard", f"{i}/3", f"--llm-eval-report=s{i}.json"
        )
    shards = ("s1.json", "s2.json", "s3.json")
    assert _cli(pytester, "merge", *shards, "-o", "m.json").returncode == 1  # the regression
    result = _cli(pytester, "merge", *shards, "-o", "m2.json", "--baseline", "other.json")
    assert result.returncode == 2, result.stdout
    assert "other.json" in result.stderr


#: a custom lower-is-better scorer, known only where the test module runs (xdist workers, and
#: not ``merge``/``compare``): its direction must travel with its records
DISTANCE = """
from pytest_llmeval import scorer

@scorer(name="my_distance", higher_is_better=False, score_range=(0.0, 1.0))
def my_distance(output, expected):
    return abs(float(output) - float(expected))
"""


LOWER = """
import pytest
from pytest_llmeval import assert_score

SHIFT = {shift}

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(12))
def test_distance(i):
    assert_score("my_distance", output=SHIFT, expected=0.0, max=1.0)
"""


def test_a_lower_is_better_scorer_regresses_in_pytest_merge_and_compare(
    pytester: pytest.Pytester,
) -> None:
    """Finding 10: merge and compare read a custom lower-is-better scorer (defined where the
    tests run, unknown to them) as higher-is-better: pytest said REGRESSED, merge said improved,
    PASS, exit 0."""
    pytester.makeconftest(DISTANCE)
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-history")
    pytester.makepyfile(test_d=LOWER.format(shift=0.1))
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=12)
    pytester.makepyfile(test_d=LOWER.format(shift=0.6))
    strict = ("--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression")
    full = pytester.runpytest(*args, *strict, "--llm-eval-report=full.json")
    assert full.ret == 1
    for i in (1, 2):
        shard = pytester.runpytest(
            *args, *strict, f"--llm-eval-shard={i}/2", f"--llm-eval-report=s{i}.json"
        )
        assert shard.ret == 0  # partial
    merged = _cli(pytester, "merge", "s1.json", "s2.json", "-o", "merged.json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "REGRESSED [lower is better]" in merged.stdout
    compared = _cli(pytester, "compare", "base.json", "full.json", "--fail-on-regression")
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "REGRESSED [lower is better]" in compared.stdout
    verdicts = [
        json.loads((pytester.path / name).read_text())["comparison"]["scorers"][0]
        for name in ("full.json", "merged.json")
    ]
    assert [(v["verdict"], v["higher_is_better"], v["direction_source"]) for v in verdicts] == [
        ("regressed", False, "declared")
    ] * 2
