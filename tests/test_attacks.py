"""Attacks on the verdict layer after issue 19, each one still ending in a pass it should not
(or in a crash), written as the test the fix must make pass.

Every test here fails on the code it was written against (main at 3f329d8): that is the finding.
Each docstring names the attack and what the product said. The projects are small pytester
projects run through real pytest, ``python -m pytest_llmeval merge`` and ``compare``; the bad
app of a run is chosen with an environment variable read at call time (``ATK_BAD``), so one
test file serves the good and the regressed run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

OFF = ("--llm-eval", "--llm-eval-cache=off", "-p", "no:cacheprovider")


def _dataset(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _report(p: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((p.path / name).read_text("utf-8"))
    return data


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


# -- gates ---------------------------------------------------------------------------------------

TWO_ASSERTIONS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=1.0)
@pytest.mark.parametrize("i", range(4))
def test_two(i):
    assert_score("exact_match", output="x", expected="x", min=0.5)
    assert_score("exact_match", output="y" if i == 0 else "x", expected="x", min=0.5)
"""


def test_a_case_whose_second_assertion_missed_is_not_a_passing_case(
    pytester: pytest.Pytester,
) -> None:
    """Attack: two assertions of one scorer in a gated test, the second misses its bound in one
    case. The gate averages the case's two records (1 and 0) into 0.5, which meets the bound
    0.5, so ``min_pass_rate=1.0`` said PASS (exit 0) while the summary counted 1 failed
    assertion: an assertion's miss became a passing case."""
    pytester.makepyfile(test_two=TWO_ASSERTIONS)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    (gate,) = _report(pytester)["gates"]
    assert gate["verdict"] == "fail", gate["result"]["cases"]
    assert result.ret == 1


ROWS = """
from pytest_llmeval import assert_scores

def test_rows():
    rows = [{"output": "a", "expected": "b"}, {"output": "a", "expected": "a"}]
    assert_scores("exact_match", rows, min=1)
"""


def test_assert_scores_with_a_per_row_bound_fails_on_a_row_below_it(
    pytester: pytest.Pytester,
) -> None:
    """Attack: ``assert_scores(scorer, rows, min=1)`` without an aggregate bound. The row that
    scored 0 is recorded as failed (summary: passed=1 failed=1) but nothing is asserted: the
    test passes. A bound that is given and missed must fail (or be refused as meaningless)."""
    pytester.makepyfile(test_rows=ROWS)
    result = pytester.runpytest(*OFF)
    assert result.ret != 0
    result.assert_outcomes(failed=1)


NON_ASCII = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", repeat=3)
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.3, reducer="majority")
@pytest.mark.parametrize("model", ["m"])
def test_q(case, model, llm_eval_sample):
    answer = "a" if llm_eval_sample == 0 else "b"  # 1 of 3 samples right: every case fails
    assert_score("exact_match", output=answer, expected="a", min=1)
"""


def test_samples_of_a_case_with_a_non_ascii_id_stay_one_case(pytester: pytest.Pytester) -> None:
    """Attack: dataset ids with non-ASCII letters (``é1``), ``repeat=3`` and a second
    parametrization. pytest escapes the id (``\\xe91-s0``), the plugin no longer recognises the
    case in it and keeps the whole id, sample suffix included, as the case id: each sample is
    its own case. The majority gate then judged 6 one-sample cases (2 pass: 0.333 >= 0.3, PASS,
    exit 0) instead of 2 cases that each failed 2 of 3 samples (pass rate 0)."""
    _dataset(pytester.path / "data" / "cases.jsonl", [{"id": "é1"}, {"id": "é2"}])
    pytester.makepyfile(test_q=NON_ASCII)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    report = _report(pytester)
    assert len({r["case_id"] for r in report["records"]}) == 2
    (gate,) = report["gates"]
    assert gate["result"]["n_cases"] == 2
    assert gate["verdict"] == "fail"
    assert result.ret == 1


VACUOUS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_mean=-1)
@pytest.mark.parametrize("i", range(3))
def test_q(i):
    assert_score("exact_match", output="b", expected="a", min=1)
"""


def test_a_gate_bound_outside_the_scorers_range_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    """Attack: ``llm_eval_gate("exact_match", min_mean=-1)``: a bound below the lowest score
    [0, 1] can never fail. The README says a bound outside the scorer's range is a collection
    error; it was accepted, softened every case's miss ('ggg') and PASSED (exit 0) with every
    case scoring 0."""
    pytester.makepyfile(test_q=VACUOUS)
    result = pytester.runpytest(*OFF)
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED


CONDITIONAL = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.9)
@pytest.mark.parametrize("i", range(10))
def test_q(i):
    answer = "a" if i < 5 else ""  # the regressed app answers nothing for half the cases
    if answer:
        assert_score("exact_match", output=answer, expected="a", min=1)
"""


def test_a_selected_case_that_ran_without_scoring_is_unscored(pytester: pytest.Pytester) -> None:
    """Attack: the app regresses to empty answers for 5 of 10 cases and the test scores only
    non-empty answers (``if answer: assert_score(...)``). The gate said 'PASS ... pass rate
    1.000 >= 0.9', '5 cases, 0 unscored', 'gate over 5 of 10 cases (5 ran without a
    exact_match record)', exit 0. The guarantee is a gate over the selected cases, with an
    unscored case counted against max_errors: a case that ran and never scored is unscored."""
    pytester.makepyfile(test_q=CONDITIONAL)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    (gate,) = _report(pytester)["gates"]
    assert gate["verdict"] == "error"
    assert gate["result"]["n_errors"] == 5
    assert result.ret == 1


SUBSET = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=1.0)
@pytest.mark.parametrize("i", range(10))
def test_q(i):
    assert_score("exact_match", output="a" if i < 2 else "b", expected="a", min=1)
"""


def test_a_k_subset_of_a_parametrized_gated_test_says_so(pytester: pytest.Pytester) -> None:
    """Attack: ``-k`` keeps the 2 good cases of 10 of a gated test that has no dataset (a plain
    parametrize). The gate said 'PASS ... 2 cases, 2 samples, 0 unscored' with no word of the 8
    deselected cases (its note was null). The README promises a subset gate says so ('gate over
    2 of N cases (... not selected ...)')."""
    pytester.makepyfile(test_q=SUBSET)
    pytester.runpytest(*OFF, "--llm-eval-report=report.json", "-k", "test_q[0] or test_q[1]")
    (gate,) = _report(pytester)["gates"]
    assert gate["note"] is not None
    assert "gate over 2 of 10 cases" in gate["note"]
    assert "not selected" in gate["note"]


INFINITE = """
import pytest
from pytest_llmeval import assert_score, scorer

@scorer(name="distance", higher_is_better=False, score_range=(0.0, float("inf")))
def distance(output):
    return float("inf") if output == "far" else 1.0

@pytest.mark.llm_eval
@pytest.mark.parametrize("o", ["near", "far"])
def test_q(o):
    assert_score("distance", output=o, max=5)
"""


def test_an_infinite_score_is_the_tests_error_not_an_internal_error(
    pytester: pytest.Pytester,
) -> None:
    """Attack: a custom scorer with an unbounded range returns ``inf``. It passed the range
    check (inf <= inf), then writing the teardown report's records (allow_nan=False) raised
    ValueError: INTERNALERROR, exit 3, no summary, no report. A non-finite score must be the
    test's error (as NaN is)."""
    pytester.makepyfile(test_q=INFINITE)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    assert "INTERNALERROR" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "report.json").is_file()


# -- comparisons ---------------------------------------------------------------------------------

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
    (s,) = _report(pytester)["comparison"]["scorers"]
    assert s["verdict"] != "improved"
    assert result.ret == 1
    assert _cli(pytester, "compare", "base.json", "report.json", "--fail-on-regression").returncode


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
    (gate_row,) = _report(pytester)["comparison"]["gates"]
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
    explicit = _cli(pytester, "compare", "a.json", "b.json", "--fail-on-regression=0.2")
    assert explicit.returncode == 1, explicit.stdout  # 5 of 12 cases 1 -> 0: p = 2/32
    both = _cli(pytester, "compare", "a.json", "b.json", "--alpha", "0.2", "--fail-on-regression")
    assert both.returncode == 1, both.stdout


# -- cache ---------------------------------------------------------------------------------------

CUTOFF = """
import os
from pytest_llmeval import scorer

CUTOFF = float(os.environ.get("ATK_CUTOFF", "3"))

@scorer(name="long_enough")
def long_enough(output):
    return 1.0 if len(output) >= CUTOFF else 0.0
"""

LONG = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
def test_q():
    assert_score("long_enough", output="abcd", min=1)
"""


def test_a_changed_constant_of_a_custom_scorer_is_not_replayed_from_the_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a custom deterministic scorer reads a module constant (``CUTOFF``). Tightening it
    from 3 to 10 changes neither its code fingerprint nor its cache key, so the default cache
    mode replays the old score 1.0: the test passes, and fails only with --llm-eval-cache=off.
    A cached result must be the result of the scorer as it now is."""
    pytester.makeconftest(CUTOFF)
    pytester.makepyfile(test_q=LONG)
    args = ("--llm-eval", "-p", "no:cacheprovider", "--llm-eval-no-history")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    monkeypatch.setenv("ATK_CUTOFF", "10")
    pytester.runpytest_subprocess(*args, "--llm-eval-cache=off").assert_outcomes(failed=1)
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)


# -- files read ----------------------------------------------------------------------------------

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
    _dataset(p.path / "data" / "cases.jsonl", [{"id": f"c{i:02d}", "n": i} for i in range(9)])
    p.makepyfile(test_q=GATED)


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
    _gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    data = _report(pytester, "base.json")
    data["plan"][0]["gates"][0].update(spec)
    (pytester.path / "bad.json").write_text(json.dumps(data), "utf-8")
    result = _cli(pytester, "compare", "base.json", "bad.json", "--fail-on-regression")
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
    _gated_project(pytester)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=9)
    monkeypatch.setenv("ATK_BAD", "1")
    pytester.runpytest(*OFF, "--llm-eval-shard", "1/3", "--llm-eval-report=shard-1.json")
    shard = _report(pytester, "shard-1.json")
    assert {r["case_id"] for r in shard["records"]} == {"c00", "c03", "c06"}
    result = _cli(pytester, "compare", "base.json", "shard-1.json", "--fail-on-regression")
    assert result.returncode != 0, result.stdout
    assert "shard" in (result.stdout + result.stderr)


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
        data = _report(pytester, f"s{i}.json")
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


SECRET_OPTIONS = """
from pytest_llmeval import scorer

@scorer(name="remote_check")
def remote_check(output, password="", token="", headers=None):
    return 1.0
"""

SECRET_TEST = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
def test_q():
    assert_score(
        "remote_check",
        output="x",
        min=1,
        password="hunter2-Pa55word-xyz",
        token="sk-proj-abcdefghijklmnop1234567890",
        headers={"Authorization": "Bearer tok-9876543210-secret"},
    )
"""


def test_a_custom_scorers_secret_options_never_reach_reports_history_or_cache(
    pytester: pytest.Pytester,
) -> None:
    """Leak: a custom scorer that calls a service takes its credentials as options
    (``password=``, ``token=``, ``headers={"Authorization": ...}``). The cache's key parts hide
    options with such names, but the report's ``instruments`` section (and the saved run) wrote
    all three in clear, and the cache's key parts kept the nested Authorization header: only an
    option named ``api_key`` is kept out of a scorer's public identity."""
    pytester.makeconftest(SECRET_OPTIONS)
    pytester.makepyfile(test_q=SECRET_TEST)
    pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-report=report.json"
    ).assert_outcomes(passed=1)
    secrets = (b"hunter2-Pa55word-xyz", b"sk-proj-abcdefghijklmnop1234567890", b"tok-9876543210")
    written = [pytester.path / "report.json", *sorted((pytester.path / ".llmeval").rglob("*"))]
    leaks = [
        (path.name, secret.decode())
        for path in written
        if path.is_file()
        for secret in secrets
        if secret in path.read_bytes()
    ]
    assert leaks == []


EXITING = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(30))
def test_q(i):
    bad = os.environ.get("ATK_BAD") == "1"
    if bad and i == 3:
        pytest.exit("the service quota is used up", returncode=0)
    assert_score("exact_match", output="b" if bad else "a", expected="a")
"""


def test_a_run_cut_short_by_pytest_exit_is_not_a_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a fixture or helper ends the session with ``pytest.exit(..., returncode=0)``
    after 3 of 30 cases (say, on a used-up quota). The comparison paired those 3 ('unchanged',
    '27 case(s) only in the baseline'), the verdict was passed with 'stopped': false, exit 0
    under --llm-eval-fail-on-regression, and the run was saved as a passing run ('last'). A
    gated test is safe (its unreported cases are unscored); a compared-only one is not."""
    pytester.makepyfile(test_q=EXITING)
    pytester.runpytest(*OFF, "--llm-eval-report=base.json").assert_outcomes(passed=30)
    monkeypatch.setenv("ATK_BAD", "1")
    result = pytester.runpytest(
        *OFF,
        "--llm-eval-report=report.json",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    assert _report(pytester)["verdict"]["passed"] is False
    assert result.ret != 0


RUN_GATE_INI = """
[pytest]
llm_eval_gates =
    test_q.py::*:exact_match:min_pass_rate=0.5
"""

PLAIN_AND_EVAL = """
import pytest
from pytest_llmeval import assert_score

def test_unit():
    assert 1 + 1 == 2

@pytest.mark.llm_eval
def test_eval():
    assert_score("exact_match", output="a", expected="a", min=1)
"""


def test_ini_run_gates_do_not_fail_a_plain_pytest_run(pytester: pytest.Pytester) -> None:
    """A wrong fail, not a pass: with ``llm_eval_gates`` in the ini, a plain ``pytest`` (no
    --llm-eval: the llm_eval tests skip) printed 'ERROR test_q.py::* exact_match', 'gates: 1
    error: the run fails' and exited 1. Evaluations off judge no llm_eval gate; a team's unit
    test run must not fail on the eval suite's gates."""
    pytester.makeini(RUN_GATE_INI)
    pytester.makepyfile(test_q=PLAIN_AND_EVAL)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0
