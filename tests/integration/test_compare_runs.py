"""Comparing two runs (issue 10): the paired tests against scipy, their error rates on simulated
runs, record matching, and the plugin's --llm-eval-baseline / --llm-eval-fail-on-regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from case_files import read_report, write_dataset
from paths import ROOT
from verdict_projects import OFF, gated_project, run_cli

CONFTEST = """
from pytest_llmeval import Score, Scorer

class Exact(Scorer):
    name = "exact_match_test"
    required_inputs = ("output", "expected")

    def compute(self, inputs, ctx):
        return Score(value=1.0 if inputs["output"] == inputs["expected"] else 0.0)

def pytest_llmeval_register_scorers(registry, config):
    registry.register(Exact, replace=True)
"""


TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_answers(case):
    assert_score("exact_match_test", output=case.output, expected=case.expected)
"""


def _write_cases(path: Path, wrong: set[int], n: int = 30) -> None:
    rows = [
        {
            "id": f"q{i}",
            "expected": f"answer {i}",
            "output": f"wrong {i}" if i in wrong else f"answer {i}",
        }
        for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_eval=TESTS)
    pytester.makeini("[pytest]\n")
    _write_cases(pytester.path / "cases.jsonl", wrong=set())
    return pytester


def test_a_significant_regression_fails_the_run_and_prints_the_table(
    project: pytest.Pytester,
) -> None:
    first = project.runpytest("--llm-eval", "--llm-eval-cache=off")
    first.assert_outcomes(passed=30)
    assert first.ret == 0
    _write_cases(project.path / "cases.jsonl", wrong=set(range(0, 30, 2)))  # 15 wrong
    result = project.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-baseline=last",
        "--llm-eval-fail-on-regression",
    )
    result.assert_outcomes(passed=30)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*= llm-eval comparison =*",
            "run 1 -> this run (alpha 0.05*",
            "scorer * n * baseline * current * diff * 95% CI * p * flips * verdict",
            "exact_match_test * 30 * 1.000 * 0.500 * -0.500 * [[]-0.*, -0.*[]] * <0.001 * -0/+0 "
            "* REGRESSED",
            "exact_match_test: 15 case(s) regressed, biggest first:",
            "  test_eval.py::test_answers[[]q0[]]: 1 -> 0 (-1)",
            "      was: answer 0",
            "      now: wrong 0",
            "regression: exact_match_test mean 1.000 -> 0.500 (p=* < 0.05); failing the run*",
        ]
    )
    # without the flag the comparison is shown but the run passes
    again = project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=1")
    assert again.ret == 0
    again.stdout.fnmatch_lines(["*REGRESSED*"])


def test_a_non_significant_drop_passes_and_says_so(project: pytest.Pytester) -> None:
    project.runpytest("--llm-eval", "--llm-eval-cache=off").assert_outcomes(passed=30)
    _write_cases(project.path / "cases.jsonl", wrong={4})
    result = project.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-baseline=last",
        "--llm-eval-fail-on-regression=0.05",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "exact_match_test * 30 * 1.000 * 0.967 * -0.033 * 1 * -0/+0 * lower, not significant",
            "exact_match_test: got worse (-0.03333) but not significantly (p=1 >= 0.05); "
            "not a regression",
        ]
    )
    assert "failing the run" not in result.stdout.str()


def test_baseline_last_without_saved_runs_says_so(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-baseline=last",
        "--llm-eval-fail-on-regression",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--llm-eval-baseline=last: no saved run yet; nothing compared*"])


def test_bad_baseline_values_are_usage_errors(project: pytest.Pytester) -> None:
    r = project.runpytest("--llm-eval", "--llm-eval-baseline=7")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--llm-eval-baseline=7: no saved run 7 in *no run is saved yet*"])
    r = project.runpytest("--llm-eval", "--llm-eval-baseline=nothere.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*nothere.json is not a file*"])
    r = project.runpytest("--llm-eval", "--llm-eval-fail-on-regression")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--llm-eval-fail-on-regression needs a baseline*"])
    r = project.runpytest(
        "--llm-eval", "--llm-eval-baseline=last", "--llm-eval-fail-on-regression=2"
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    (project.path / "bad.json").write_text('{"x": 1}')
    r = project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=bad.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stdout.fnmatch_lines(["*the baseline cannot be used:*bad.json*no 'records' list*"])


def test_compare_command_line(project: pytest.Pytester) -> None:
    project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=a.json")
    _write_cases(project.path / "cases.jsonl", wrong=set(range(10)))
    project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=b.json")
    root = str(ROOT)
    env_cmd = [sys.executable, "-m", "pytest_llmeval", "compare", "a.json", "b.json"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": root}
        return subprocess.run(
            [*env_cmd, *extra], cwd=project.path, capture_output=True, text=True, env=env
        )

    plain = run()
    assert plain.returncode == 0, plain.stderr
    assert "a.json -> b.json (alpha 0.05" in plain.stdout
    assert "REGRESSED" in plain.stdout
    assert "regression: exact_match_test mean 1.000 -> 0.667" in plain.stdout
    assert run("--fail-on-regression").returncode == 1
    assert run("--fail-on-regression=0.001").returncode == 0  # p is about 0.002 (exact, 10)
    # no result on 30 cases can reach p < 1e-7 (at best 2 / 2**16): nothing concluded, failed
    strict = run("--fail-on-regression=0.0000001")
    assert strict.returncode == 1
    assert "too few for any result to reach p < 1e-07" in strict.stdout
    as_json = json.loads(run("--json").stdout)
    assert as_json["scorers"][0]["verdict"] == "regressed"
    assert as_json["scorers"][0]["p_value"] == pytest.approx(2 / 1024)
    env_cmd[-1] = "nope.json"
    bad = run()
    assert bad.returncode == 2
    assert "nope.json: cannot read" in bad.stderr


GATED_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", repeat=3)
@pytest.mark.llm_eval_gate("exact_match_test", min_mean=0.2)
def test_answers(case):
    assert_score("exact_match_test", output=case.output, expected=case.expected, min=1)
"""


def test_repeated_samples_and_gates_are_compared(project: pytest.Pytester) -> None:
    project.makepyfile(test_eval=GATED_TESTS)
    first = project.runpytest("--llm-eval", "--llm-eval-cache=off")
    first.assert_outcomes(passed=90)
    run = json.loads((project.path / ".llmeval" / "runs" / "0001.json").read_text())
    assert {r["sample"] for r in run["report"]["records"]} == {0, 1, 2}
    assert run["report"]["gates"][0]["verdict"] == "pass"
    _write_cases(project.path / "cases.jsonl", wrong=set(range(12)))
    result = project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=last")
    result.stdout.fnmatch_lines(
        [
            # 30 cases of 3 samples each: the paired unit is the case
            "exact_match_test * 30 * 1.000 * 0.600 * -0.400 * * -12/+0 * REGRESSED",
            "gate exact_match_test (test_eval.py::test_answers) * 30 * 1.000 * 0.600 * -0.400 "
            "* -12/+0 * REGRESSED",
            "exact_match_test: 12 pass->fail, 0 fail->pass (exact McNemar p=<0.001)",
        ]
    )


def test_a_changed_dataset_lists_the_cases_on_one_side_only(project: pytest.Pytester) -> None:
    project.runpytest("--llm-eval", "--llm-eval-cache=off").assert_outcomes(passed=30)
    rows = [{"id": f"q{i}", "expected": f"answer {i}", "output": f"answer {i}"} for i in range(28)]
    rows += [{"id": "new1", "expected": "x", "output": "x"}]
    (project.path / "cases.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = project.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=1")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "exact_match_test * 28 * 1.000 * 1.000 * +0.000 * * unchanged",
            "exact_match_test: 2 case(s) only in the baseline: "
            "test_eval.py::test_answers[[]q28[]], test_eval.py::test_answers[[]q29[]]",
            "exact_match_test: 1 case(s) only in the current run: "
            "test_eval.py::test_answers[[]new1[]]",
        ]
    )


def test_the_json_and_html_reports_carry_the_comparison(project: pytest.Pytester) -> None:
    """The comparison reaches --llm-eval-report and --llm-eval-html, with the baseline's side of
    every matched case (score, verdict, judged output), and a saved run renders as HTML."""
    project.runpytest("--llm-eval", "--llm-eval-cache=off").assert_outcomes(passed=30)
    _write_cases(project.path / "cases.jsonl", wrong={3})
    result = project.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-baseline=last",
        "--llm-eval-report=r.json",
        "--llm-eval-html=r.html",
    )
    result.assert_outcomes(passed=30)
    report = json.loads((project.path / "r.json").read_text())
    cmp = report["comparison"]
    assert cmp["baseline"]["label"] == "run 1"
    assert cmp["baseline"]["path"].endswith("0001.json")
    assert [s["scorer"] for s in cmp["scorers"]] == ["exact_match_test"]
    assert len(cmp["cases"]) == 30
    (q3,) = [c for c in cmp["cases"] if c["current"]["case_id"] == "q3"]
    assert (q3["baseline"]["score"], q3["delta"]) == (1.0, -1.0)
    assert q3["baseline"]["inputs"]["output"] == "answer 3"
    html = (project.path / "r.html").read_text()
    assert '"baseline_label"' in html and "answer 3" in html
    # a saved run (the second one) renders like a report
    from pytest_llmeval.__main__ import main

    saved = project.path / ".llmeval" / "runs" / "0002.json"
    assert main(["report", str(saved), "-o", str(project.path / "saved.html")]) == 0
    assert "answer 3" in (project.path / "saved.html").read_text()


UNBOUNDED = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range({n}))
def test_q(i):
    bad = os.environ.get("ATK_BAD") == "1" and {bad_if}
    assert_score("exact_match", output="b" if bad else "a", expected="a")
"""


FLIPPED = """
import os
from pytest_llmeval import scorer

@scorer(name="my_quality", higher_is_better=os.environ.get("ATK_DIR") != "low")
def my_quality(output, expected):
    return 1.0 if output == expected else 0.0
"""


QUALITY = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(20))
def test_q(i):
    bad = os.environ.get("ATK_BAD") == "1"
    assert_score("my_quality", output="b" if bad else "a", expected="a")
"""


PASS_RATE = """
import os
import pytest
from pytest_llmeval import assert_score, scorer

@scorer(name="val")
def val(output):
    return float(output)

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("val", min_pass_rate=0.5)
@pytest.mark.parametrize("i", range(30))
def test_q(i):
    if os.environ.get("ATK_BAD") == "1":
        out = 0.59 if i % 2 else 1.0  # half the cases now miss the bound, the rest go up
    else:
        out = 0.61  # every case passes
    assert_score("val", output=str(out), min=0.6)
"""


def test_a_total_collapse_on_five_cases_fails_under_fail_on_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a small suite (5 cases) whose scores are recorded, not bounded, and guarded by
    ``--llm-eval-fail-on-regression``. Every case drops from 1 to 0; the smallest p-value 5
    cases can give is 2/32 = 0.0625 >= 0.05, so the run said 'got worse (-1) but not
    significantly (p=0.0625 >= 0.05); not a regression', exit 0. A comparison that can never
    show a regression at its size cannot stand for 'no regression'."""
    pytester.makepyfile(test_q=UNBOUNDED.format(n=5, bad_if="True"))
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=5)
    monkeypatch.setenv("ATK_BAD", "1")
    result = pytester.runpytest(
        *OFF, "--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression"
    )
    assert result.ret == 1


def test_a_subset_run_never_becomes_the_baseline_last(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: after a full passing run, one passing run of a single case (a node id given, as
    with -k) is saved and becomes 'last'. The regressed full run (29 of 30 cases 1 -> 0) is then
    compared on that one case only ('29 case(s) only in the current run', 'unchanged') and
    passes --llm-eval-fail-on-regression, exit 0. A shard is refused as 'last' because its
    gates were partial; a -k subset is as partial."""
    pytester.makepyfile(test_q=UNBOUNDED.format(n=30, bad_if="i > 0"))
    pytester.runpytest(*OFF).assert_outcomes(passed=30)
    pytester.runpytest(*OFF, "test_q.py::test_q[0]").assert_outcomes(passed=1)
    monkeypatch.setenv("ATK_BAD", "1")
    result = pytester.runpytest(*OFF, "--llm-eval-baseline=last", "--llm-eval-fail-on-regression")
    result.stdout.no_fnmatch_line("*baseline: run 2 *")
    assert result.ret == 1


def test_an_unchecked_run_of_a_regressed_commit_does_not_become_the_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the regressed commit fails its check against 'last' (exit 1, saved, passed over:
    fine). Then the same commit is run once without --llm-eval-baseline (another CI job, or a
    developer sharing the cache): it has no comparison, so it 'passed', is saved and becomes
    'last'. The check re-run now compares the regressed commit with itself: 'unchanged', exit
    0. The README says re-running a regressed commit keeps failing against the last good run."""
    pytester.makepyfile(test_q=UNBOUNDED.format(n=30, bad_if="i > 0"))
    check = (*OFF, "--llm-eval-baseline=last", "--llm-eval-fail-on-regression")
    pytester.runpytest(*OFF).assert_outcomes(passed=30)
    monkeypatch.setenv("ATK_BAD", "1")
    assert pytester.runpytest(*check).ret == 1
    assert pytester.runpytest(*OFF).ret == 0  # unchecked: no baseline asked for
    result = pytester.runpytest(*check)
    assert result.ret == 1


def test_duplicated_items_cannot_hide_regressed_cases(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: 8 of 12 cases drop from 1 to 0 (p = 2/256). Run with ``--keep-duplicates`` and
    the regressed cases' node ids given again: each of them runs twice, its two records are
    'ambiguous' ('a report that merged parametrizations of one case'), never paired, and the 4
    unchanged cases decide: 'unchanged', exit 0 under --llm-eval-fail-on-regression."""
    pytester.makepyfile(test_q=UNBOUNDED.format(n=12, bad_if="i in range(1, 9)"))
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=12)
    monkeypatch.setenv("ATK_BAD", "1")
    again = [f"test_q.py::test_q[{i}]" for i in range(1, 9)]
    result = pytester.runpytest(
        *OFF,
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
        "--keep-duplicates",
        "test_q.py",
        *again,
    )
    result.assert_outcomes(passed=20)
    assert result.ret == 1


def test_a_scorer_whose_direction_flipped_is_another_instrument(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the same custom scorer function, re-declared ``higher_is_better=False``. The
    direction is not part of the scorer's identity, so the instrument digest (and cache key)
    is unchanged, the comparison takes the current run's direction and every case that fell
    from 1 to 0 is listed as 'improved': exit 0 under --llm-eval-fail-on-regression (and
    ``compare --fail-on-regression`` exits 0 too). Subprocess runs: this process's registry
    and instrument table must not carry the first run's scorer into the second."""
    pytester.makeconftest(FLIPPED)
    pytester.makepyfile(test_q=QUALITY)
    pytester.runpytest_subprocess(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=20)
    monkeypatch.setenv("ATK_BAD", "1")
    monkeypatch.setenv("ATK_DIR", "low")
    result = pytester.runpytest_subprocess(
        *OFF,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    (s,) = read_report(pytester)["comparison"]["scorers"]
    assert s["verdict"] != "improved"
    assert result.ret == 1
    assert run_cli(
        pytester, "compare", "base.json", "report.json", "--fail-on-regression"
    ).returncode


def test_a_pass_rate_collapse_of_a_pass_rate_gate_is_a_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a ``min_pass_rate`` gate; the change makes 15 of 30 cases miss their bound
    (exact McNemar p < 0.001, '-15/+0' flips) while the other 15 score higher. The gate's
    comparison row compares means only: 0.610 -> 0.795 'improved', exit 0 under
    --llm-eval-fail-on-regression. For a pass-rate gate, a significant fall of the pass rate
    is its regression."""
    pytester.makepyfile(test_q=PASS_RATE)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=30)
    monkeypatch.setenv("ATK_BAD", "1")
    result = pytester.runpytest(
        *OFF,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    (gate_row,) = read_report(pytester)["comparison"]["gates"]
    assert gate_row["flips_worse"] == 15
    assert result.ret == 1


def test_compare_alpha_is_not_overridden_by_fail_on_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: ``compare A B --alpha 0.2 --fail-on-regression``: the bare flag's default 0.05
    silently replaces the --alpha given, so a drop with p = 0.0625 is 'lower, not significant',
    exit 0, although ``--fail-on-regression=0.2`` exits 1 on the same files."""
    pytester.makepyfile(test_q=UNBOUNDED.format(n=12, bad_if="i in range(1, 6)"))
    pytester.runpytest(*OFF, "--llm-eval-report=a.json").assert_outcomes(passed=12)
    monkeypatch.setenv("ATK_BAD", "1")
    pytester.runpytest(*OFF, "--llm-eval-report=b.json").assert_outcomes(passed=12)
    explicit = run_cli(pytester, "compare", "a.json", "b.json", "--fail-on-regression=0.2")
    assert explicit.returncode == 1, explicit.stdout  # 5 of 12 cases 1 -> 0: p = 2/32
    both = run_cli(
        pytester, "compare", "a.json", "b.json", "--alpha", "0.2", "--fail-on-regression"
    )
    assert both.returncode == 1, both.stdout


@pytest.mark.parametrize(
    "spec",
    [
        {"min_mean": None},  # a gate without any bound
        {"score_range": [1.0, 0.0]},  # a range with low > high
    ],
    ids=["no-bound", "inverted-range"],
)
def test_a_report_with_a_malformed_gate_is_refused_not_a_traceback(
    pytester: pytest.Pytester, spec: dict[str, Any]
) -> None:
    """Attack: a report whose plan holds a gate the schema lets through but the gate check
    refuses (no bound at all; score_range [1, 0]). ``compare BASE CUR`` died with a ValueError
    traceback from GateSpec.validate (exit 1, which also reads as 'regressed'); so did
    ``merge``. A bad file is exit 2 naming the file and the field."""
    gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    data = read_report(pytester, "base.json")
    data["plan"][0]["gates"][0].update(spec)
    (pytester.path / "bad.json").write_text(json.dumps(data), "utf-8")
    result = run_cli(pytester, "compare", "base.json", "bad.json", "--fail-on-regression")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2
    assert "bad.json" in result.stderr and "plan[0].gates[0]" in result.stderr


def test_compare_does_not_take_one_shard_for_the_whole_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the regressed run is split in 3 shards; shard 1 happens to hold only cases the
    change left alone. ``python -m pytest_llmeval compare base.json shard-1.json
    --fail-on-regression`` said 'unchanged' with '6 case(s) only in the baseline', exit 0, and
    nothing about the file being one shard of a run (pytest itself calls a shard's comparison
    PARTIAL). A shard report is not a run to compare: refuse it, or fail."""
    gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    monkeypatch.setenv("ATK_BAD", "1")
    pytester.runpytest(*OFF, "--llm-eval-shard", "1/3", "--llm-eval-report=shard-1.json")
    shard = read_report(pytester, "shard-1.json")
    assert {r["case_id"] for r in shard["records"]} == {"c00", "c03", "c06"}
    result = run_cli(pytester, "compare", "base.json", "shard-1.json", "--fail-on-regression")
    assert result.returncode != 0, result.stdout
    assert "shard" in (result.stdout + result.stderr)


PARAMETRIZED = """
import pytest
from pytest_llmeval import assert_score

BROKEN = {broken!r}

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
@pytest.mark.parametrize("model", ["small", "large"])
def test_models(case, model):
    answer = "y" if model in BROKEN else "x"
    assert_score("exact_match", output=answer, expected="x", min=0)
"""


QUALITY_BY_FLAG = """
import pytest
from pytest_llmeval import assert_score

GOOD = {good}

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(12))
def test_quality(i):
    assert_score("exact_match", output="x" if GOOD else "y", expected="x", min=0)
"""


REPEATED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", repeat={repeat})
def test_sampled(case, llm_eval_sample):
    answer = "x" if llm_eval_sample == 0 else "y"  # sample 0 right, every later one wrong
    assert_score("exact_match", output=answer, expected="x", min=0)
"""


VERSIONED = """
import pytest
from pytest_llmeval import assert_score, scorer

@scorer(name="tone", version={version!r})
def tone(output):
    return 1.0

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(8))
def test_tone(i):
    assert_score("tone", output="ok", min=0)
"""


def _good_record(**changes: Any) -> dict[str, Any]:
    rec = {
        "file": "test_q.py",
        "test": "test_quality",
        "case_id": "0",
        "scorer": "exact_match",
        "index": 0,
        "sample": 0,
        "score": 1.0,
        "passed": None,
    }
    rec.update(changes)
    return rec


MALFORMED = {
    "dict case id": (
        json.dumps({"records": [_good_record(case_id={"a": 1})]}),
        "records[0].case_id",
    ),
    "index 1e999": (
        json.dumps({"records": [_good_record()]}).replace('"index": 0', '"index": 1e999'),
        "not valid JSON (the number 1e999 does not fit a float)",
    ),
    "sample zz": (json.dumps({"records": [_good_record(sample="zz")]}), "records[0].sample"),
    "NaN score": (
        json.dumps({"records": [_good_record()]}).replace('"score": 1.0', '"score": NaN'),
        "not valid JSON (NaN is not a number JSON allows",
    ),
    "deep": ('{"records": [' * 1 + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
    "records not a list": (json.dumps({"records": {"a": 1}}), "records"),
    "newer version": (json.dumps({"version": 99, "records": []}), "written by a newer"),
}


@pytest.mark.smoke
def test_each_parametrization_of_a_dataset_case_is_compared_on_its_own(
    pytester: pytest.Pytester,
) -> None:
    """Finding 5: both parametrizations of a dataset case shared one record identity; the first
    won, and a regressed parametrization compared as 'unchanged'."""
    write_dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"q{i}"} for i in range(12)])
    pytester.makepyfile(test_m=PARAMETRIZED.format(broken=[]))
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=24)
    base = read_report(pytester, "base.json")
    keys = [(r["test"], r["case_id"]) for r in base["records"]]
    assert len(keys) == len(set(keys)) == 24
    pytester.makepyfile(test_m=PARAMETRIZED.format(broken=["large"]))
    result = pytester.runpytest(
        *args,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    assert result.ret == 1
    (s,) = read_report(pytester)["comparison"]["scorers"]
    assert s["verdict"] == "regressed" and s["n"] == 24
    assert len(s["regressed"]) == 12
    assert all("large" in c["case"] for c in s["regressed"])


def test_a_failing_run_never_becomes_the_baseline(pytester: pytest.Pytester) -> None:
    """Finding 6: a regressed run became 'last', so re-running the same regressed commit said
    'unchanged', exit 0."""
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=True))
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=last")
    strict = (*args, "--llm-eval-fail-on-regression")
    assert pytester.runpytest(*strict).ret == 0  # nothing saved yet: this one becomes it
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=False))
    first = pytester.runpytest(*strict)
    assert first.ret == 1
    retry = pytester.runpytest(*strict)  # the same regressed commit, again
    assert retry.ret == 1
    retry.stdout.fnmatch_lines(
        [
            "baseline: run 1 (the first saved run that passed; *0001.json) (passed over: "
            "run 2: failed: regression: exact_match mean 1.000 -> 0.000*",
            "*REGRESSED*",
        ]
    )
    # without --llm-eval-fail-on-regression the regressed run exits 0, and is still no baseline
    assert pytester.runpytest(*args).ret == 0
    again = pytester.runpytest(*strict)
    assert again.ret == 1
    again.stdout.fnmatch_lines(["*run 4: had a significant regression*"])


def test_pruning_never_deletes_the_run_last_names(pytester: pytest.Pytester) -> None:
    """A sibling of finding 6: a streak of failing runs must not prune the last passing run away
    (the comparison would then find nothing to compare with, and pass)."""
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=True))
    base = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-history=2")
    assert pytester.runpytest(*base).ret == 0
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=False))
    strict = (*base, "--llm-eval-baseline=last", "--llm-eval-fail-on-regression")
    for _ in range(3):
        assert pytester.runpytest(*strict).ret == 1
    from pytest_llmeval.stores.history import list_runs

    assert list_runs(pytester.path / ".llmeval" / "runs") == [1, 3, 4]


def test_a_change_of_repeat_compares_every_sample(pytester: pytest.Pytester) -> None:
    """Finding 7: repeat 1 -> 5 compared sample 0 only (80 new samples ignored): 'unchanged'."""
    write_dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"q{i}"} for i in range(20)])
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.makepyfile(test_r=REPEATED.format(repeat=1))
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=20)
    pytester.makepyfile(test_r=REPEATED.format(repeat=5))
    result = pytester.runpytest(
        *args,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    assert result.ret == 1
    cmp = read_report(pytester)["comparison"]
    (s,) = cmp["scorers"]
    assert s["verdict"] == "regressed"
    assert (s["baseline_mean"], s["current_mean"]) == (1.0, pytest.approx(0.2))
    assert (s["samples_only_baseline"], s["samples_only_current"]) == (0, 80)
    assert any("80 only in this run (repeat changed?)" in n for n in cmp["notes"])
    result.stdout.fnmatch_lines(["*80 only in this run (repeat changed?)*"])


def test_a_changed_instrument_is_incomparable_unless_accepted(pytester: pytest.Pytester) -> None:
    """Finding 8: the scorer's version (or judge, prompt, options) changed between baseline and
    current: compared silently as if the same instrument."""
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.makepyfile(test_t=VERSIONED.format(version="1"))
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=8)
    pytester.makepyfile(test_t=VERSIONED.format(version="2"))
    strict = (
        *args,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    result = pytester.runpytest(*strict)
    assert result.ret == 1
    (s,) = read_report(pytester)["comparison"]["scorers"]
    assert s["verdict"] == "incomparable" and s["instrument"] == "changed"
    assert s["change"] == "unchanged"
    assert s["instrument_changes"] == ['version: "1" -> "2"']
    result.stdout.fnmatch_lines(
        [
            "*INCOMPARABLE: another instrument*",
            'tone: instrument changed: version: "1" -> "2"',
            "tone: measured with another instrument than the baseline*"
            "--llm-eval-accept-incomparable=tone*",
        ]
    )
    # without --llm-eval-fail-on-regression it is shown, and does not fail
    assert pytester.runpytest(*args, "--llm-eval-baseline=base.json").ret == 0
    # accepted explicitly: compared (no regression here), exit 0
    accepted = pytester.runpytest(*strict, "--llm-eval-accept-incomparable=tone")
    assert accepted.ret == 0
    (s,) = read_report(pytester)["comparison"]["scorers"]
    assert s["verdict"] == "unchanged" and s["accepted"] is True
    accepted.stdout.fnmatch_lines(["*unchanged (instrument changed: accepted)*"])


def test_nothing_compared_is_not_no_regression(pytester: pytest.Pytester) -> None:
    """Finding 9: ids renamed (or a junk baseline): 'no matched cases', exit 0 under
    --llm-eval-fail-on-regression."""
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=True))
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=12)
    pytester.makepyfile(
        test_q=QUALITY_BY_FLAG.format(good=False).replace(
            "range(12)", "[f'r{n}' for n in range(12)]"
        )
    )
    strict = (*args, "--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression")
    result = pytester.runpytest(*strict)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "exact_match: no case was scored in both runs (12 only in the baseline, 12 only in "
            "this run*nothing compared is not 'no regression'*"
        ]
    )
    # a valid report of another suite (its scorer is not in this run at all)
    junk = {
        "records": [
            {
                "file": "x.py",
                "test": "t",
                "case_id": None,
                "scorer": "other",
                "score": 0.5,
                "passed": None,
            }
        ],
    }
    (pytester.path / "junk.json").write_text(json.dumps(junk))
    result = pytester.runpytest(
        *args, "--llm-eval-baseline=junk.json", "--llm-eval-fail-on-regression"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["other: scored in the baseline (1 cases) but not in this run*"])


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_baseline_is_a_clear_error_and_the_run_is_still_reported(
    pytester: pytest.Pytester, kind: str
) -> None:
    """Finding 15: a malformed baseline crashed pytest_sessionfinish (no summary, no JSON
    report) and `compare` exited 1 with a traceback."""
    text, field = MALFORMED[kind]
    (pytester.path / "bad.json").write_text(text)
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=True))
    result = pytester.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=bad.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes(passed=12)
    line = next(x for x in result.outlines if "the baseline cannot be used:" in x)
    assert "bad.json" in line and field in line, line
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    report = read_report(pytester)  # the run's own results are written all the same
    assert len(report["records"]) == 12
    assert report["verdict"]["passed"] is False
    assert "bad.json" in report["comparison"]["error"]
    compared = run_cli(pytester, "compare", "bad.json", "report.json")
    assert compared.returncode == 2
    assert "Traceback" not in compared.stderr and field in compared.stderr
    merged = run_cli(pytester, "merge", "bad.json", "-o", "m.json")
    assert merged.returncode == 2 and "Traceback" not in merged.stderr


def test_a_tampered_score_outside_its_instruments_range_is_refused(
    pytester: pytest.Pytester,
) -> None:
    """A sibling of 11/15: a report whose score lies outside the range its own instrument
    declares (10.0 for a [0, 1] scorer) is refused, not compared."""
    pytester.makepyfile(test_q=QUALITY_BY_FLAG.format(good=True))
    pytester.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=base.json")
    data = read_report(pytester, "base.json")
    data["records"][3]["score"] = 10.0
    (pytester.path / "tampered.json").write_text(json.dumps(data))
    compared = run_cli(pytester, "compare", "tampered.json", "base.json")
    assert compared.returncode == 2
    assert "records[3].score" in compared.stderr and "outside its range [0.0, 1.0]" in (
        compared.stderr
    )
