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
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from case_files import read_report
from verdict_projects import OFF, gated_project, run_cli

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


def test_a_shard_report_without_its_plan_is_refused_by_merge(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack (a shard report edited, or cut, before merge): a version-2 shard report without
    its 'plan' section still validates (the schema requires only 'records'); ``merge`` of
    three such shards judged no gate at all, 'verdict: PASS (0 gate(s) over the whole run)',
    exit 0, while the same shards with their plans fail the gate (mean 0.333 < 0.9). A report
    that says it is version 2 must carry what version 2 decides with."""
    gated_project(pytester)
    monkeypatch.setenv("ATK_BAD", "1")
    for i in (1, 2, 3):
        pytester.runpytest(*OFF, "--llm-eval-shard", f"{i}/3", f"--llm-eval-report=s{i}.json")
    whole = run_cli(pytester, "merge", "s1.json", "s2.json", "s3.json", "-o", "m.json")
    assert whole.returncode == 1, whole.stdout  # the gate fails over the whole run
    for i in (1, 2, 3):
        data = read_report(pytester, f"s{i}.json")
        del data["plan"]
        (pytester.path / f"t{i}.json").write_text(json.dumps(data), "utf-8")
    cut = run_cli(pytester, "merge", "t1.json", "t2.json", "t3.json", "-o", "mt.json")
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
    gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    monkeypatch.setenv("ATK_BAD", "1")
    pytester.runpytest(*OFF, "--llm-eval-report=other.json").assert_outcomes(passed=9)
    check = ("--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression")
    for i in (1, 2, 3):
        pytester.runpytest(
            *OFF, *check, "--llm-eval-shard", f"{i}/3", f"--llm-eval-report=s{i}.json"
        )
    shards = ("s1.json", "s2.json", "s3.json")
    assert run_cli(pytester, "merge", *shards, "-o", "m.json").returncode == 1  # the regression
    result = run_cli(pytester, "merge", *shards, "-o", "m2.json", "--baseline", "other.json")
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
    merged = run_cli(pytester, "merge", "s1.json", "s2.json", "-o", "merged.json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "REGRESSED [lower is better]" in merged.stdout
    compared = run_cli(pytester, "compare", "base.json", "full.json", "--fail-on-regression")
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "REGRESSED [lower is better]" in compared.stdout
    verdicts = [
        json.loads((pytester.path / name).read_text())["comparison"]["scorers"][0]
        for name in ("full.json", "merged.json")
    ]
    assert [(v["verdict"], v["higher_is_better"], v["direction_source"]) for v in verdicts] == [
        ("regressed", False, "declared")
    ] * 2


#: a run gate (wildcard) on top of the markers: merge must judge it too
RUN_GATE = ("--llm-eval-gate", "test_qa.py::test_q*:levenshtein:min_pass_rate=0.4")


def _shard(root: Path, i: int, n: int, *args: str) -> subprocess.CompletedProcess[str]:
    return _pytest(root, f"--llm-eval-shard={i}/{n}", f"--llm-eval-report=shard-{i}.json", *args)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One unsharded run and its three shards, run once for the module."""
    root = _project(tmp_path_factory.mktemp("sharded"))
    full = _pytest(root, "--llm-eval-report=full.json", *RUN_GATE)
    shards = [_shard(root, i, 3, *RUN_GATE) for i in (1, 2, 3)]
    return {"root": root, "full": full, "shards": shards}


def _copy_shards(runs: dict[str, Any], tmp_path: Path) -> list[Path]:
    out = []
    for i in (1, 2, 3):
        path = tmp_path / f"shard-{i}.json"
        path.write_text((runs["root"] / f"shard-{i}.json").read_text())
        out.append(path)
    return out


def _refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, *paths: Path) -> str:
    status, out, err = _merge(capsys, *paths, "-o", tmp_path / "out.json")
    assert status == 2 and out == ""
    assert not (tmp_path / "out.json").exists()
    assert err.startswith("error: ")
    return err


def test_three_shards_merge_to_exactly_the_unsharded_report(
    runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root: Path = runs["root"]
    assert runs["full"].returncode == 1, runs["full"].stdout  # the exact_match gate fails
    for proc in runs["shards"]:
        assert proc.returncode == 0, proc.stdout + proc.stderr  # partial gates do not fail
    status, out, err = _merge(
        capsys, *(root / f"shard-{i}.json" for i in (3, 1, 2)), "-o", root / "merged.json"
    )
    assert (status, err) == (1, "")
    full, merged = _load(root / "full.json"), _load(root / "merged.json")
    # field by field, everything but the timings
    a, b = _comparable(full), _comparable(merged)
    assert list(a) == list(b)
    for key in a:
        assert a[key] == b[key], key
    # and the numbers are the expected ones, not merely equal
    (em,) = [g for g in merged["gates"] if g["scorer"] == "exact_match"]
    assert em["verdict"] == "fail"
    checks = {c["metric"]: c for c in em["result"]["checks"]}
    assert checks["mean"]["interval"]["estimate"] == pytest.approx(0.75)
    assert checks["pass_rate"]["interval"]["estimate"] == pytest.approx(0.5)
    assert em["result"]["flaky"] == [f"test_qa.py::test_qa[{c}]" for c in "beg"]
    assert sorted(
        (g["scorer"], g["source"].startswith("--"), g["verdict"]) for g in merged["gates"]
    ) == [
        ("exact_match", False, "fail"),
        ("levenshtein", False, "pass"),
        ("levenshtein", True, "pass"),
    ]
    assert merged["aggregates"]["exact_match"]["n"] == 24
    assert merged["run"]["exitstatus"] == full["run"]["exitstatus"] == 1
    assert [s["index"] for s in merged["merged"]["shards"]] == [1, 2, 3]
    assert "shard" not in merged
    # the terminal verdict
    assert "FAIL test_qa.py::test_qa exact_match: mean 0.750 >= 0.6: pass; " in out
    assert "pass rate 0.500 >= 0.6: fail" in out
    assert out.rstrip().splitlines()[-1] == "verdict: FAIL: 1 of 3 gate(s) do not pass (1 fail)"


def test_the_merged_report_is_read_by_report_and_compare(runs: dict[str, Any]) -> None:
    root: Path = runs["root"]
    cmd = [sys.executable, "-m", "pytest_llmeval"]
    merged = subprocess.run(
        [*cmd, "merge", *(f"shard-{i}.json" for i in (1, 2, 3)), "-o", "cli.json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert merged.returncode == 1, merged.stderr
    assert "verdict: FAIL" in merged.stdout
    html = subprocess.run(
        [*cmd, "report", "cli.json", "-o", "cli.html"], cwd=root, capture_output=True, text=True
    )
    assert html.returncode == 0, html.stderr
    assert "exact_match" in (root / "cli.html").read_text()
    cmp = subprocess.run(
        [*cmd, "compare", "full.json", "cli.json", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert cmp.returncode == 0, cmp.stderr
    verdicts = {s["name"]: s["verdict"] for s in json.loads(cmp.stdout)["scorers"]}
    assert verdicts == {"exact_match": "unchanged", "levenshtein": "unchanged"}


def test_a_passing_whole_run_exits_0(runs: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    """With the shards' gates loosened in their reports the same merge passes (the verdict is
    recomputed from the gate specs the shards recorded, not copied from them)."""
    paths = []
    for i in (1, 2, 3):
        data = _load(runs["root"] / f"shard-{i}.json")
        for entry in data["plan"]:
            for spec in entry["gates"]:
                if spec["scorer"] == "exact_match":
                    spec["min_pass_rate"] = 0.5
                if spec["confidence"] is not None:
                    spec["confidence"] = None
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(json.dumps(data))
    status, out, _ = _merge(
        capsys, *paths, "-o", tmp_path / "m.json", "--html", tmp_path / "m.html"
    )
    assert status == 0
    assert "test_qa.py::test_qa" in (tmp_path / "m.html").read_text()
    assert out.rstrip().splitlines()[-1] == "verdict: PASS (3 gate(s) over the whole run)"
    assert {g["verdict"] for g in _load(tmp_path / "m.json")["gates"]} == {"pass"}
    assert _load(tmp_path / "m.json")["run"]["exitstatus"] == 0


def test_a_shard_reports_its_gates_as_partial(runs: dict[str, Any]) -> None:
    proc = runs["shards"][0]
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if "llm-eval gates (PARTIAL: shard 1/3)" in line)
    gate_lines = [line for line in lines[head:] if line.startswith("PARTIAL (")]
    assert len(gate_lines) == 3
    # shard 1 holds cases a, d, g: its exact_match gate passes where the whole run's fails
    assert (
        "PARTIAL (pass over this shard's cases) test_qa.py::test_qa exact_match: "
        "mean 0.889 >= 0.6: pass; pass rate 0.667 >= 0.6: pass"
    ) in gate_lines
    assert not any(line.startswith(("FAIL ", "PASS ", "INCONCLUSIVE ")) for line in lines)
    summary = next(line for line in lines if line.startswith("gates: PARTIAL, shard 1 of 3"))
    assert "not the verdict: merge the shard reports" in summary
    assert "the run fails" not in proc.stdout
    report = _load(runs["root"] / "shard-1.json")
    assert {g["verdict"] for g in report["gates"]} == {"partial"}
    assert {g["shard_verdict"] for g in report["gates"]} <= {"pass", "fail", "inconclusive"}
    sec = report["shard"]
    assert (sec["index"], sec["count"], sec["split"]) == (
        1,
        3,
        "round-robin over the sorted case keys",
    )
    assert report["run"]["judge"]["model"]  # the judge settings travel with the shard
    assert sec["settings"]["inconclusive"] == "fail"
    assert [r["pattern"] for r in sec["settings"]["gate_rules"]] == ["test_qa.py::test_q*"]


def test_a_test_failure_still_fails_its_shard(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "test_fails.py").write_text("def test_broken():\n    assert 1 == 2\n")
    results = [_shard(root, i, 2) for i in (1, 2)]
    statuses = sorted(r.returncode for r in results)
    assert statuses == [0, 1]  # the shard that got test_broken fails, the other passes
    assert "test_broken" in next(r.stdout for r in results if r.returncode == 1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("4/3", "'4/3': I/N needs N >= 1 and I from 1 to N"),
        ("0/3", "'0/3': I/N needs N >= 1 and I from 1 to N"),
        ("two/3", "'two/3' is not I/N (e.g. 2/3: the second of three shards)"),
        ("3", "'3' is not I/N"),
    ],
)
def test_a_bad_shard_option_is_a_usage_error(tmp_path: Path, value: str, message: str) -> None:
    root = _project(tmp_path)
    proc = _pytest(root, f"--llm-eval-shard={value}", "--llm-eval-report=r.json")
    assert proc.returncode == 4
    assert f"--llm-eval-shard / ini llm_eval_shard / env LLM_EVAL_SHARD: {message}" in proc.stderr


def test_a_shard_without_a_report_is_a_usage_error(tmp_path: Path) -> None:
    proc = _pytest(_project(tmp_path), "--llm-eval-shard=1/2")
    assert proc.returncode == 4
    assert "add --llm-eval-report (e.g. --llm-eval-report=shard-1.json)" in proc.stderr


def test_more_shards_than_cases_leaves_an_empty_shard_that_passes(tmp_path: Path) -> None:
    root = tmp_path
    (root / "test_one.py").write_text("def test_one():\n    pass\n")
    proc = _shard(root, 2, 2)
    assert proc.returncode == 0, proc.stdout
    assert "llm-eval shard 2/2: no case of the run fell in it" in proc.stdout
    assert _load(root / "shard-2.json")["shard"]["cases_in_shard"] == 0
    if pytest.importorskip("xdist"):  # the same with workers (the controller does not collect)
        proc = _shard(root, 2, 2, "-n", "2")
        assert proc.returncode == 0, proc.stdout
        assert "llm-eval shard 2/2: no case of the run fell in it" in proc.stdout
        assert _load(root / "shard-2.json")["shard"]["cases"] == 1


def test_a_missing_shard_is_an_error(runs: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    s1, _s2, s3 = _copy_shards(runs, tmp_path)
    err = _refused(capsys, tmp_path, s1, s3)
    assert f"shard(s) 2 of 3 missing (given: 1 ({s1}), 3 ({s3})); merge needs every shard's" in err


def test_a_shard_given_twice_is_an_error(runs: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    s1, s2, s3 = _copy_shards(runs, tmp_path)
    again = tmp_path / "again.json"
    again.write_text(s2.read_text())
    err = _refused(capsys, tmp_path, s1, s2, s3, again)
    assert f"shard 2/3 given twice: {s2} and {again}" in err


def test_overlapping_shards_are_an_error_naming_the_case(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, s2, s3 = _copy_shards(runs, tmp_path)
    one, two = _load(s1), _load(s2)
    stolen = next(r for r in one["records"] if r["test"] == "test_qa")
    two["records"].append(stolen)
    s2.write_text(json.dumps(two))
    err = _refused(capsys, tmp_path, s1, s2, s3)
    case = f"test_qa.py::test_qa[{stolen['case_id']}]"
    assert f"case {case} is in two shards: {s1} (shard 1) and {s2} (shard 2)" in err


def test_shards_of_another_n_are_an_error(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, _s2, s3 = _copy_shards(runs, tmp_path)
    root: Path = runs["root"]
    proc = _pytest(root, "--llm-eval-shard=2/4", "--llm-eval-report=n4.json", *RUN_GATE)
    assert proc.returncode == 0, proc.stdout
    err = _refused(capsys, tmp_path, s1, root / "n4.json", s3)
    assert "the shards were split different ways (N differs): " in err
    assert f"{s1} is shard 1/3, {root / 'n4.json'} is shard 2/4, {s3} is shard 3/3" in err


def test_mismatched_judge_settings_are_an_error(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, _s2, s3 = _copy_shards(runs, tmp_path)
    root: Path = runs["root"]
    proc = _pytest(
        root,
        "--llm-eval-shard=2/3",
        "--llm-eval-report=other.json",
        "--llm-eval-judge-model=other-judge",
        *RUN_GATE,
    )
    assert proc.returncode == 0, proc.stdout
    err = _refused(capsys, tmp_path, s1, root / "other.json", s3)
    model = _load(s1)["run"]["judge"]["model"]
    assert (
        f"the shards are not of one run: judge setting 'model' differs ({s1}: {model!r}; "
        f"{root / 'other.json'}: 'other-judge'; {s3}: {model!r})"
    ) in err


def test_mismatched_gate_settings_are_an_error(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, _s2, s3 = _copy_shards(runs, tmp_path)
    root: Path = runs["root"]
    # shard 2 without the run gate, and with inconclusive gates passing
    proc = _pytest(
        root,
        "--llm-eval-shard=2/3",
        "--llm-eval-report=nogate.json",
        "--llm-eval-inconclusive=pass",
    )
    assert proc.returncode == 0, proc.stdout
    err = _refused(capsys, tmp_path, s1, root / "nogate.json", s3)
    assert "the shards are not of one run: setting 'gate_rules' differs" in err


def test_a_report_that_is_not_a_shard_is_an_error(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, s2, _s3 = _copy_shards(runs, tmp_path)
    full = runs["root"] / "full.json"
    err = _refused(capsys, tmp_path, s1, s2, full)
    assert f"{full}: not a shard report (no 'shard' section): run each shard with" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert f"{bad}: not valid JSON" in _refused(capsys, tmp_path, s1, bad)


def test_shards_of_different_collections_are_an_error(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    s1, s2, s3 = _copy_shards(runs, tmp_path)
    data = _load(s3)
    data["shard"]["cases"] += 1
    data["shard"]["collection_digest"] = "0" * 16
    s3.write_text(json.dumps(data))
    err = _refused(capsys, tmp_path, s1, s2, s3)
    assert "differs" in err and "collection digest; run every shard with the same selection" in err


def test_the_comparison_is_recomputed_over_the_whole_run(
    runs: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """Shards compared with a baseline: the merged comparison is the unsharded run's."""
    root = _project(tmp_path)
    base = _pytest(root, "--llm-eval-report=base.json")
    assert base.returncode == 1
    rows = [dict(r, outputs=["x", "x", "x"]) if r["id"] in "ceg" else r for r in ROWS]
    (root / "data" / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    baseline = ("--llm-eval-baseline=base.json",)
    full = _pytest(root, "--llm-eval-report=full.json", *baseline)
    assert full.returncode == 0, full.stdout
    for i in (1, 2, 3):
        assert _shard(root, i, 3, *baseline).returncode == 0
    status, out, _ = _merge(
        capsys, *(root / f"shard-{i}.json" for i in (1, 2, 3)), "-o", root / "m.json"
    )
    assert status == 0
    a, b = _comparable(_load(root / "full.json")), _comparable(_load(root / "m.json"))
    assert a["comparison"] == b["comparison"]
    assert a == b
    verdicts = {s["name"]: s["verdict"] for s in b["comparison"]["scorers"]}
    assert verdicts["exact_match"] in ("improved", "better-not-significant")
    assert "llm-eval comparison" in out
    # the baseline is looked up where the shards found it; gone, it must be given
    (root / "base.json").rename(root / "moved.json")
    err = _refused(capsys, tmp_path, *(root / f"shard-{i}.json" for i in (1, 2, 3)))
    assert "which is not readable here; give it with --baseline PATH" in err
    status, _, _ = _merge(
        capsys,
        *(root / f"shard-{i}.json" for i in (1, 2, 3)),
        "-o",
        root / "m2.json",
        "--baseline",
        root / "moved.json",
    )
    assert status == 0
    assert _load(root / "m2.json")["comparison"]["scorers"] == b["comparison"]["scorers"]


def test_a_shard_under_xdist_reports_what_it_does_alone(runs: dict[str, Any]) -> None:
    """The xdist controller does not collect: the shard's collection facts reach it on the
    workers' reports, and its shard section and gates are those of the -n 0 shard."""
    pytest.importorskip("xdist")
    root: Path = runs["root"]
    proc = _pytest(root, "-n", "2", "--llm-eval-shard=1/3", "--llm-eval-report=x1.json", *RUN_GATE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    alone, xdist = _load(root / "shard-1.json"), _load(root / "x1.json")
    assert xdist["run"]["workers"] == 2
    assert xdist["shard"] == alone["shard"]
    assert xdist["shard"]["collection_digest"] is not None
    assert (xdist["shard"]["cases"], xdist["shard"]["cases_in_shard"]) == (28, 10)
    assert xdist["gates"] == alone["gates"]
    # each parametrization of a dataset case has its own record identity, so the records of
    # an xdist run sort exactly as those of a run without it
    assert _comparable(xdist)["records"] == _comparable(alone)["records"]
    keys = [(r["test"], r["case_id"]) for r in xdist["records"] if r["test"] == "test_styles"]
    assert len(keys) == len(set(keys)) > 0
