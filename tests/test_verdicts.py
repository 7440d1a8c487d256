"""Verdicts that cannot be talked into a pass (issue 19): each way an adversarial user made a
gate, a baseline comparison, a merge or ``compare`` say "pass" for a regression, through real
pytest runs (pytester), ``python -m pytest_llmeval merge`` and ``compare``.

Each test names the finding it guards; every one of them failed on the code before the fix.
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

#: a custom lower-is-better scorer, known only where the test module runs (xdist workers, and
#: not ``merge``/``compare``): its direction must travel with its records
DISTANCE = """
from pytest_llmeval import scorer

@scorer(name="my_distance", higher_is_better=False, score_range=(0.0, 1.0))
def my_distance(output, expected):
    return abs(float(output) - float(expected))
"""


def _dataset(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _report(p: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((p.path / name).read_text())
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


# -- 1. run gates only tighten -------------------------------------------------------------------

FAILING = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("answer", ["x", "y", "y", "y", "y", "x"])
def test_answers(answer):
    assert_score("exact_match", output=answer, expected="x", min=1)

def test_plain():
    assert_score("exact_match", output="y", expected="x", min=1)
"""


def test_a_run_gate_never_turns_failing_cases_into_passes(pytester: pytest.Pytester) -> None:
    """Finding 1: --llm-eval-gate on a test without a gate marker turned its 4 failures into
    'gated misses' (passed, exit 0); an ini pattern turned a plain test's failure into a pass."""
    pytester.makepyfile(test_a=FAILING)
    result = pytester.runpytest(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-gate",
        "test_a.py::*:exact_match:min_mean=0.1",
    )
    result.assert_outcomes(passed=2, failed=5)
    assert result.ret == 1
    pytester.makeini("[pytest]\nllm_eval_gates =\n    *:exact_match:max_mean=0.9\n")
    result = pytester.runpytest("--llm-eval", "--llm-eval-cache=off")
    result.assert_outcomes(passed=2, failed=5)
    result.stdout.no_fnmatch_line("*PASSED (gated miss)*")
    assert result.ret == 1


# -- 2. a run gate that judges nothing ----------------------------------------------------------


def test_a_run_gate_matching_no_test_is_an_error_naming_the_nearest(
    pytester: pytest.Pytester,
) -> None:
    """Finding 2: a typo in a run gate's pattern was a note and exit 0."""
    pytester.makepyfile(test_a=FAILING.replace('"y", "y", "y", "y"', '"x", "x", "x", "x"'))
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=report.json")
    typo = "test_a.py::test_answer:exact_match:min_mean=0.5"
    result = pytester.runpytest(*args, "-k", "not plain", "--llm-eval-gate", typo)
    result.assert_outcomes(passed=6, deselected=1)
    assert result.ret == 1
    (gate,) = _report(pytester)["gates"]
    assert gate["verdict"] == "error" and gate["test"] == "test_a.py::test_answer"
    assert "matched no selected test" in gate["problem"]
    assert "nearest test ids: test_a.py::test_answers" in gate["problem"]
    result.stdout.fnmatch_lines(["ERROR test_a.py::test_answer exact_match", "*nearest test ids*"])
    # a pattern whose tests were deselected says so (and still judges nothing: an error)
    result = pytester.runpytest(
        *args, "-k", "plain", "--llm-eval-gate", "test_a.py::test_answers:exact_match:min_mean=0.5"
    )
    assert result.ret == 1
    (gate,) = _report(pytester)["gates"]
    assert "it matches test_a.py::test_answers, not selected in this run" in gate["problem"]


# -- 3. cases lost to a crashed worker -----------------------------------------------------------

CRASHING = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.5)
def test_gated(case):
    if case.crash:
        os._exit(3)
    assert_score("exact_match", output=case.output, expected="x", min=1)
"""


def test_cases_lost_to_a_crashed_worker_are_unscored_never_not_selected(
    pytester: pytest.Pytester,
) -> None:
    """Finding 3: 7 of 10 gated cases crash their xdist worker (os._exit): the gate said PASS
    over the 3 that ran, calling the others 'not selected'."""
    pytest.importorskip("xdist")
    rows = [{"id": f"c{i}", "output": "x", "crash": i < 7} for i in range(10)]
    _dataset(pytester.path / "data" / "cases.jsonl", rows)
    pytester.makepyfile(test_crash=CRASHING)
    result = pytester.runpytest_subprocess(
        "--llm-eval",
        "--llm-eval-cache=off",
        "--llm-eval-report=report.json",
        "-n",
        "2",
        "--max-worker-restart=20",
    )
    assert result.ret == 1
    (gate,) = _report(pytester)["gates"]
    assert gate["verdict"] == "error", gate
    assert gate["result"]["n_cases"] == 10 and gate["result"]["n_errors"] == 7
    assert (
        "7 never reported, counted as unscored: 7 samples: an xdist worker crashed"
        in (gate["note"])
    )
    assert "not selected" not in gate["note"]
    result.stdout.fnmatch_lines(["ERROR test_crash.py::test_gated exact_match*"])


# -- 4. every case skipped -----------------------------------------------------------------------

SKIPPING = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.9)
def test_gated(case):
    pytest.skip("the app is down")
"""


def test_a_gate_whose_every_case_was_skipped_does_not_pass(pytester: pytest.Pytester) -> None:
    """Finding 4: all cases skipped: no gate section, exit 0."""
    _dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"c{i}"} for i in range(4)])
    pytester.makepyfile(test_skip=SKIPPING)
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=report.json")
    result = pytester.runpytest(*args)
    result.assert_outcomes(skipped=4)
    assert result.ret == 1
    (gate,) = _report(pytester)["gates"]
    assert gate["verdict"] == "skipped"
    assert gate["problem"] == "all 4 selected item(s) were skipped: the gate judged nothing"
    result.stdout.fnmatch_lines(
        [
            "SKIPPED test_skip.py::test_gated exact_match",
            "gates: 1 skipped: the run fails",
            "*--llm-eval-skipped=pass lets them pass*",
        ]
    )
    # the user decides, as with inconclusive
    result = pytester.runpytest(*args, "--llm-eval-skipped=pass")
    assert result.ret == 0
    assert _report(pytester)["gates"][0]["verdict"] == "skipped"
    # a plain `pytest` (evaluations off) judges no llm_eval gate: nothing to say, exit 0
    result = pytester.runpytest("--llm-eval-cache=off")
    assert result.ret == 0
    result.stdout.no_fnmatch_line("*llm-eval gates*")


# -- 5. a dataset test that is also parametrized -------------------------------------------------

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


@pytest.mark.smoke
def test_each_parametrization_of_a_dataset_case_is_compared_on_its_own(
    pytester: pytest.Pytester,
) -> None:
    """Finding 5: both parametrizations of a dataset case shared one record identity; the first
    won, and a regressed parametrization compared as 'unchanged'."""
    _dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"q{i}"} for i in range(12)])
    pytester.makepyfile(test_m=PARAMETRIZED.format(broken=[]))
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=24)
    base = _report(pytester, "base.json")
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
    (s,) = _report(pytester)["comparison"]["scorers"]
    assert s["verdict"] == "regressed" and s["n"] == 24
    assert len(s["regressed"]) == 12
    assert all("large" in c["case"] for c in s["regressed"])


# -- 6. --llm-eval-baseline=last ----------------------------------------------------------------

QUALITY = """
import pytest
from pytest_llmeval import assert_score

GOOD = {good}

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(12))
def test_quality(i):
    assert_score("exact_match", output="x" if GOOD else "y", expected="x", min=0)
"""


def test_a_failing_run_never_becomes_the_baseline(pytester: pytest.Pytester) -> None:
    """Finding 6: a regressed run became 'last', so re-running the same regressed commit said
    'unchanged', exit 0."""
    pytester.makepyfile(test_q=QUALITY.format(good=True))
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-baseline=last")
    strict = (*args, "--llm-eval-fail-on-regression")
    assert pytester.runpytest(*strict).ret == 0  # nothing saved yet: this one becomes it
    pytester.makepyfile(test_q=QUALITY.format(good=False))
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
    pytester.makepyfile(test_q=QUALITY.format(good=True))
    base = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-history=2")
    assert pytester.runpytest(*base).ret == 0
    pytester.makepyfile(test_q=QUALITY.format(good=False))
    strict = (*base, "--llm-eval-baseline=last", "--llm-eval-fail-on-regression")
    for _ in range(3):
        assert pytester.runpytest(*strict).ret == 1
    from pytest_llmeval.stores.history import list_runs

    assert list_runs(pytester.path / ".llmeval" / "runs") == [1, 3, 4]


# -- 7. repeat changed between runs ---------------------------------------------------------------

REPEATED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", repeat={repeat})
def test_sampled(case, llm_eval_sample):
    answer = "x" if llm_eval_sample == 0 else "y"  # sample 0 right, every later one wrong
    assert_score("exact_match", output=answer, expected="x", min=0)
"""


def test_a_change_of_repeat_compares_every_sample(pytester: pytest.Pytester) -> None:
    """Finding 7: repeat 1 -> 5 compared sample 0 only (80 new samples ignored): 'unchanged'."""
    _dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"q{i}"} for i in range(20)])
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
    cmp = _report(pytester)["comparison"]
    (s,) = cmp["scorers"]
    assert s["verdict"] == "regressed"
    assert (s["baseline_mean"], s["current_mean"]) == (1.0, pytest.approx(0.2))
    assert (s["samples_only_baseline"], s["samples_only_current"]) == (0, 80)
    assert any("80 only in this run (repeat changed?)" in n for n in cmp["notes"])
    result.stdout.fnmatch_lines(["*80 only in this run (repeat changed?)*"])


# -- 8. another instrument -------------------------------------------------------------------------

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
    (s,) = _report(pytester)["comparison"]["scorers"]
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
    (s,) = _report(pytester)["comparison"]["scorers"]
    assert s["verdict"] == "unchanged" and s["accepted"] is True
    accepted.stdout.fnmatch_lines(["*unchanged (instrument changed: accepted)*"])


def test_a_different_judge_model_is_named_in_the_instrument_change() -> None:
    """Finding 8 (the judge): two runs that differ only in the judge model of an instrument."""
    from pytest_llmeval.analysis.compare import compare_runs
    from pytest_llmeval.core.model import Instrument, Run
    from pytest_llmeval.core.records import ScoreRecord

    def run(model: str) -> Run:
        inst = Instrument(
            digest=f"{abs(hash(model)) % 16**16:016x}",
            scorer="factuality",
            version="4",
            higher_is_better=True,
            score_range=(0.0, 1.0),
            identity={"name": "factuality", "extra": {"judge": {"model": model}}},
        )
        recs = tuple(
            ScoreRecord(
                "t.py",
                "t",
                f"c{i}",
                "factuality",
                0,
                1.0,
                None,
                None,
                None,
                False,
                0.0,
                instrument=inst.digest,
            )
            for i in range(5)
        )
        return Run(records=recs, instruments={inst.digest: inst})

    (s,) = compare_runs(run("gpt-4o"), run("gpt-4o-mini")).scorers
    assert s.verdict == "incomparable"
    assert s.instrument_changes == ('extra.judge.model: "gpt-4o" -> "gpt-4o-mini"',)
    (s,) = compare_runs(run("gpt-4o"), run("gpt-4o-mini"), accept=["factuality"]).scorers
    assert s.verdict == "unchanged" and s.accepted


# -- 9. nothing compared ---------------------------------------------------------------------------


def test_nothing_compared_is_not_no_regression(pytester: pytest.Pytester) -> None:
    """Finding 9: ids renamed (or a junk baseline): 'no matched cases', exit 0 under
    --llm-eval-fail-on-regression."""
    pytester.makepyfile(test_q=QUALITY.format(good=True))
    args = ("--llm-eval", "--llm-eval-cache=off")
    pytester.runpytest(*args, "--llm-eval-report=base.json").assert_outcomes(passed=12)
    pytester.makepyfile(
        test_q=QUALITY.format(good=False).replace("range(12)", "[f'r{n}' for n in range(12)]")
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


# -- 10. a lower-is-better scorer in merge and compare ------------------------------------------


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


# -- 15. malformed files --------------------------------------------------------------------------


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


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_baseline_is_a_clear_error_and_the_run_is_still_reported(
    pytester: pytest.Pytester, kind: str
) -> None:
    """Finding 15: a malformed baseline crashed pytest_sessionfinish (no summary, no JSON
    report) and `compare` exited 1 with a traceback."""
    text, field = MALFORMED[kind]
    (pytester.path / "bad.json").write_text(text)
    pytester.makepyfile(test_q=QUALITY.format(good=True))
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
    report = _report(pytester)  # the run's own results are written all the same
    assert len(report["records"]) == 12
    assert report["verdict"]["passed"] is False
    assert "bad.json" in report["comparison"]["error"]
    compared = _cli(pytester, "compare", "bad.json", "report.json")
    assert compared.returncode == 2
    assert "Traceback" not in compared.stderr and field in compared.stderr
    merged = _cli(pytester, "merge", "bad.json", "-o", "m.json")
    assert merged.returncode == 2 and "Traceback" not in merged.stderr


def test_a_tampered_score_outside_its_instruments_range_is_refused(
    pytester: pytest.Pytester,
) -> None:
    """A sibling of 11/15: a report whose score lies outside the range its own instrument
    declares (10.0 for a [0, 1] scorer) is refused, not compared."""
    pytester.makepyfile(test_q=QUALITY.format(good=True))
    pytester.runpytest("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=base.json")
    data = _report(pytester, "base.json")
    data["records"][3]["score"] = 10.0
    (pytester.path / "tampered.json").write_text(json.dumps(data))
    compared = _cli(pytester, "compare", "tampered.json", "base.json")
    assert compared.returncode == 2
    assert "records[3].score" in compared.stderr and "outside its range [0.0, 1.0]" in (
        compared.stderr
    )


# -- 17. one name, one meaning ---------------------------------------------------------------------

GATED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", repeat=4)
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.7, reducer="majority")
def test_votes(case, llm_eval_sample):
    answer = "x" if llm_eval_sample < case.right else "y"
    assert_score("exact_match", output=answer, expected="x", min=1)
"""


def test_statistics_and_gates_print_one_number_under_one_name(pytester: pytest.Pytester) -> None:
    """Finding 17: 'exact_match ... pass rate 0.000' in the statistics and, lines below, the
    gate's 'pass rate 0.750 >= 0.7: pass' for the same test and scorer."""
    rows = [{"id": f"q{i}", "right": r} for i, r in enumerate([4, 3, 3, 3, 1, 4, 3, 0])]
    _dataset(pytester.path / "data" / "cases.jsonl", rows)
    pytester.makepyfile(test_v=GATED)
    result = pytester.runpytest(
        "--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=report.json"
    )
    assert result.ret == 0
    report = _report(pytester)
    (stat,) = report["statistics"]
    (gate,) = report["gates"]
    (check,) = gate["result"]["checks"]
    assert stat["reducer"] == "majority"
    assert stat["pass_rate"]["estimate"] == check["interval"]["estimate"] == 0.75
    text = result.stdout.str()
    assert "pass rate (majority) 0.750 [" in text  # statistics
    assert "pass rate (majority) 0.750 >= 0.7: pass" in text  # the gate
    assert "pass rate 0.000" not in text


# -- siblings ------------------------------------------------------------------------------------

TAMPER = """
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if getattr(report, "llm_eval_plan", None):
        report.llm_eval_plan = "{not json"
    return report
"""


def test_an_unreadable_plan_fails_the_run_instead_of_dropping_its_gates(
    pytester: pytest.Pytester,
) -> None:
    """Without the plan no gate knows its cases: the gates must not silently vanish."""
    pytest.importorskip("xdist")
    _dataset(
        pytester.path / "data" / "cases.jsonl",
        [{"id": f"c{i}", "output": "x", "crash": False} for i in range(4)],
    )
    pytester.makepyfile(test_crash=CRASHING)
    pytester.makeconftest(TAMPER)
    result = pytester.runpytest_subprocess("--llm-eval", "--llm-eval-cache=off", "-n", "2")
    result.assert_outcomes(passed=4)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*the plan of gated tests sent with*could not be read*"])


def test_two_records_for_one_sample_are_never_paired() -> None:
    """A report written before every parametrization had its own identity may hold two records
    for one key: which one is 'the' case is unknowable, so it is not paired (and said)."""
    from pytest_llmeval.analysis.compare import compare_reports

    def rec(case: str, score: float) -> dict[str, Any]:
        return {
            "file": "t.py",
            "test": "t",
            "case_id": case,
            "scorer": "s",
            "score": score,
            "passed": None,
        }

    base = {"records": [rec("a", 1.0), rec("a", 0.0), rec("b", 1.0)]}
    cur = {"records": [rec("a", 1.0), rec("b", 1.0)]}
    cmp = compare_reports(base, cur)
    (s,) = cmp.scorers
    assert s.ambiguous == ("t.py::t[a]",) and s.n == 1
    assert any("two records for one sample" in n for n in cmp.notes)


TAMPER_RECORDS = """
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if getattr(report, "llm_eval_records", None) and "c1" in item.nodeid:
        report.llm_eval_records = '[{"file": 1}]'
    return report
"""


def test_unreadable_records_fail_the_run_instead_of_vanishing(pytester: pytest.Pytester) -> None:
    """A record dropped in silence could be the failing one (c1 fails its bound here)."""
    rows = [{"id": f"c{i}", "output": "x" if i != 1 else "y", "crash": False} for i in range(4)]
    _dataset(pytester.path / "data" / "cases.jsonl", rows)
    pytester.makepyfile(test_crash=CRASHING.replace("min_pass_rate=0.5", "min_pass_rate=1"))
    pytester.makeconftest(TAMPER_RECORDS)
    result = pytester.runpytest("--llm-eval", "--llm-eval-cache=off")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*the score records sent with test_crash.py::test_gated[[]c1[]] could not be read*"]
    )
