"""Suite gates and repeated samples (issue 9), through real pytest runs (pytester).

The project below has a fake app whose answer for a case and sample is written in the dataset
(``outputs[sample]``), so every score, verdict and interval is known in advance:

case  outputs   exact_match per sample   case score (mean)  case passes min=1
a     x x       1 1                      1.0                yes
b     x y       1 0                      0.5 (flaky)        no
c     y y       0 0                      0.0                no
d     x x       1 1                      1.0                yes
e     x x       1 1                      1.0                yes

mean over cases 0.7, pass rate 3/5 = 0.6.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

CONFTEST = """
import pytest

class AppDown(Exception):
    pass

@pytest.fixture
def app(case, llm_eval_sample):
    def answer(question):
        out = case.outputs[llm_eval_sample]
        if out == "SKIP":
            pytest.skip(f"no answer for {case.id}")
        if out == "RAISE":
            raise AppDown(f"app failed on {case.id} sample {llm_eval_sample}")
        return out
    return answer
"""

ROWS = [
    {"id": "a", "input": "qa", "outputs": ["x", "x"], "expected": "x"},
    {"id": "b", "input": "qb", "outputs": ["x", "y"], "expected": "x"},
    {"id": "c", "input": "qc", "outputs": ["y", "y"], "expected": "x"},
    {"id": "d", "input": "qd", "outputs": ["x", "x"], "expected": "x"},
    {"id": "e", "input": "qe", "outputs": ["x", "x"], "expected": "x"},
]

TEST_QA = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/qa.jsonl", repeat=2)
{gates}
def test_qa(case, app):
    answer = app(case.input)
    assert_score("exact_match", output=answer, expected=case.expected, min=1)
    assert_score("levenshtein", output=answer, expected=case.expected, min=0)
"""

GATE = '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, min_pass_rate=0.8)'


def _project(p: pytest.Pytester, gates: str = GATE, rows: list[dict[str, Any]] = ROWS) -> None:
    p.makeconftest(CONFTEST)
    (p.path / "data").mkdir(exist_ok=True)
    (p.path / "data" / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    p.makepyfile(test_qa=TEST_QA.format(gates=gates))
    p.makeini("[pytest]\n")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    _project(pytester)
    return pytester


def _run(p: pytest.Pytester, *args: str, subprocess: bool = False) -> tuple[Any, dict[str, Any]]:
    out = p.path / "report.json"
    if out.exists():
        out.unlink()
    argv = ("--llm-eval", "--llm-eval-cache=off", f"--llm-eval-report={out}", *args)
    result = p.runpytest_subprocess(*argv) if subprocess else p.runpytest(*argv)
    return result, json.loads(out.read_text())


def _section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if f" {title} " in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start:end]


def _gate(report: dict[str, Any], scorer: str = "exact_match") -> dict[str, Any]:
    (gate,) = [g for g in report["gates"] if g["scorer"] == scorer]
    return gate


# -- verdicts and exit status ---------------------------------------------------------------


@pytest.mark.smoke
def test_failing_gate_exits_1_while_every_case_test_passes(project: pytest.Pytester) -> None:
    result, report = _run(project, "-v")
    result.assert_outcomes(passed=10)
    assert result.ret == 1
    # the misses are visible per case, and the test still passed
    result.stdout.fnmatch_lines(
        [
            "*test_qa.py::test_qa[[]b-s1[]] PASSED (gated miss)*",
            "*test_qa.py::test_qa[[]c-s0[]] PASSED (gated miss)*",
        ]
    )
    result.stdout.no_fnmatch_line("*test_qa[[]a-s0[]] PASSED (gated miss)*")
    gates = _section(result.outlines, "llm-eval gates")
    assert gates[1] == (
        "FAIL test_qa.py::test_qa exact_match: mean 0.700 >= 0.6: pass; "
        "pass rate 0.600 >= 0.8: fail"
    )
    assert gates[2] == "    5 cases, 10 samples, 0 unscored"
    assert gates[3] == "    flaky: b"
    assert gates[-1] == "gates: 1 fail: the run fails"
    summary = _section(result.outlines, "llm-eval summary")
    assert "gated misses (counted by their gate):" in summary
    assert "  test_qa.py::test_qa[c-s1] exact_match = 0 (bound >= 1)" in summary
    assert "failing scores:" not in summary
    gate = _gate(report)
    assert gate["verdict"] == "fail" and report["run"]["exitstatus"] == 1
    checks = {c["metric"]: c for c in gate["result"]["checks"]}
    assert checks["mean"]["interval"]["estimate"] == pytest.approx(0.7)
    assert (checks["mean"]["verdict"], checks["pass_rate"]["verdict"]) == ("pass", "fail")
    assert checks["pass_rate"]["interval"]["estimate"] == pytest.approx(0.6)
    assert gate["result"]["n_cases"] == 5 and gate["result"]["n_samples"] == 10
    assert gate["result"]["flaky"] == ["test_qa.py::test_qa[b]"]


def test_passing_gate_keeps_the_run_green(pytester: pytest.Pytester) -> None:
    _project(pytester, '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, min_pass_rate=0.6)')
    result, report = _run(pytester)
    result.assert_outcomes(passed=10)
    assert result.ret == 0
    assert _gate(report)["verdict"] == "pass" and report["run"]["exitstatus"] == 0
    assert _section(result.outlines, "llm-eval gates")[-1] == "gates: 1 pass"


def test_without_a_gate_misses_fail_their_tests(pytester: pytest.Pytester) -> None:
    _project(pytester, gates="")
    result, report = _run(pytester)
    result.assert_outcomes(passed=7, failed=3)
    assert report["gates"] == [] and not any(r["gated"] for r in report["records"])


def test_strict_cases_restores_per_case_failures(project: pytest.Pytester) -> None:
    result, report = _run(project, "--llm-eval-strict-cases")
    result.assert_outcomes(passed=7, failed=3)
    assert _gate(report)["verdict"] == "fail"  # the gate is still judged
    result.stdout.fnmatch_lines(["*exact_match score 0 is not >= 1*"])
    project.makeini("[pytest]\nllm_eval_strict_cases = true\n")
    _run(project)[0].assert_outcomes(passed=7, failed=3)


def test_the_json_report_records_samples_and_gated_misses(project: pytest.Pytester) -> None:
    _, report = _run(project)
    em = [r for r in report["records"] if r["scorer"] == "exact_match"]
    assert [(r["case_id"], r["sample"], r["score"], r["passed"], r["gated"]) for r in em] == [
        ("a", 0, 1.0, True, True),
        ("a", 1, 1.0, True, True),
        ("b", 0, 1.0, True, True),
        ("b", 1, 0.0, False, True),
        ("c", 0, 0.0, False, True),
        ("c", 1, 0.0, False, True),
        ("d", 0, 1.0, True, True),
        ("d", 1, 1.0, True, True),
        ("e", 0, 1.0, True, True),
        ("e", 1, 1.0, True, True),
    ]
    lev = [r for r in report["records"] if r["scorer"] == "levenshtein"]
    assert not any(r["gated"] for r in lev)  # only the gated scorer is softened
    gate = _gate(report)
    assert gate["test"] == "test_qa.py::test_qa"
    assert gate["source"] == (
        "@pytest.mark.llm_eval_gate('exact_match', min_mean=0.6, min_pass_rate=0.8) "
        "on test_qa.py::test_qa"
    )
    assert gate["spec"]["min_mean"] == 0.6 and gate["spec"]["min_pass_rate"] == 0.8
    assert gate["note"] is None and gate["problem"] is None
    assert report["gate_policy"] == {"inconclusive": "fail", "skipped": "fail"}
    stats = {s["scorer"]: s for s in report["statistics"]}
    assert set(stats) == {"exact_match", "levenshtein"}
    em_stats = stats["exact_match"]
    assert em_stats["test"] == "test_qa.py::test_qa"
    assert (em_stats["n_cases"], em_stats["n_samples"]) == (5, 10)
    assert em_stats["mean"]["estimate"] == pytest.approx(0.7)
    assert em_stats["pass_rate"]["estimate"] == pytest.approx(0.6)
    assert em_stats["pass_rate"]["method"] == "wilson"
    assert em_stats["flaky"] == ["test_qa.py::test_qa[b]"]


def test_statistics_section_in_the_terminal(project: pytest.Pytester) -> None:
    result, report = _run(project)
    lines = _section(result.outlines, "llm-eval statistics")
    assert lines[1].startswith("over cases, each case's samples reduced (mean, or its gate's")
    assert lines[2] == "test_qa.py::test_qa"
    em = next(line for line in lines if line.startswith("  exact_match:"))
    iv = next(s for s in report["statistics"] if s["scorer"] == "exact_match")["pass_rate"]
    assert em.startswith("  exact_match: 5 cases, 10 samples, mean 0.700 [")
    mean = next(s for s in report["statistics"] if s["scorer"] == "exact_match")["mean"]
    # the same interval the gate's mean check uses (t over the case scores, range-bounded)
    assert mean["method"] in ("t", "t+range") and mean["n"] == 5
    assert f"pass rate 0.600 [{iv['low']:.3f}, {iv['high']:.3f}] (95% wilson)" in em
    assert em.endswith("; flaky: b")


# -- xdist ---------------------------------------------------------------------------------


@pytest.mark.smoke
def test_same_verdicts_and_numbers_with_and_without_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    runs = [
        _run(project, "-v", *args, subprocess=True)
        for args in (("-n", "0"), ("-n", "2"), ("-p", "no:xdist"))
    ]
    for result, _ in runs:
        result.assert_outcomes(passed=10)
        assert result.ret == 1
        # the per-case status crosses xdist with the report
        assert len([line for line in result.outlines if "PASSED (gated miss)" in line]) == 3
    reports = [r for _, r in runs]
    assert reports[1]["run"]["workers"] == 2
    assert reports[0]["gates"] == reports[1]["gates"] == reports[2]["gates"]
    assert reports[0]["statistics"] == reports[1]["statistics"] == reports[2]["statistics"]
    assert _gate(reports[1])["verdict"] == "fail"

    def samples(report: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(r["case_id"], r["scorer"], r["sample"], r["score"]) for r in report["records"]]

    assert samples(reports[0]) == samples(reports[1]) == samples(reports[2])
    sections = [
        _section(r.outlines, "llm-eval gates") + _section(r.outlines, "llm-eval statistics")
        for r, _ in runs
    ]
    assert sections[0] == sections[1] == sections[2]


# -- errors are never softened -------------------------------------------------------------


def test_an_app_error_in_a_gated_test_fails_the_run_and_is_unscored(
    pytester: pytest.Pytester,
) -> None:
    rows = [dict(r) for r in ROWS]
    rows[0] = {**rows[0], "outputs": ["x", "RAISE"]}
    _project(
        pytester,
        '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.1, max_errors=1)',
        rows=rows,
    )
    result, report = _run(pytester)
    result.assert_outcomes(passed=9, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*AppDown: app failed on a sample 1*"])
    (rec,) = [
        r
        for r in report["records"]
        if r["case_id"] == "a" and r["sample"] == 1 and r["scorer"] == "exact_match"
    ]
    assert rec["score"] is None and rec["passed"] is None
    assert rec["error"].startswith("the test failed before scoring exact_match: ")
    assert "AppDown: app failed on a sample 1" in rec["error"]
    gate = _gate(report)
    # max_errors=1 allows one unscored case: the gate itself passes, the run fails anyway
    assert gate["verdict"] == "pass"
    assert (gate["result"]["n_errors"], gate["result"]["n_scored"]) == (1, 4)
    assert "    5 cases, 10 samples, 1 unscored" in _section(result.outlines, "llm-eval gates")


def test_unscored_cases_beyond_max_errors_make_the_gate_an_error(
    pytester: pytest.Pytester,
) -> None:
    rows = [dict(r) for r in ROWS]
    rows[3] = {**rows[3], "outputs": ["RAISE", "x"]}
    _project(pytester, '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.1)', rows=rows)
    result, report = _run(pytester)
    assert result.ret == 1
    gate = _gate(report)
    assert gate["verdict"] == "error" and gate["result"]["n_errors"] == 1


def test_a_scorer_input_error_is_an_error_not_a_gated_miss(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(
        test_qa=TEST_QA.format(gates=GATE).replace(
            "output=answer, expected=case.expected, min=1",
            "output={'k': 1} if case.id == 'a' else answer, "
            "expected=3 if case.id == 'a' else case.expected, min=1",
        )
    )
    result, report = _run(pytester)
    result.assert_outcomes(passed=8, errors=2)
    assert result.ret == 1
    errs = [r for r in report["records"] if r["error"] and r["scorer"] == "exact_match"]
    assert [(r["case_id"], r["sample"]) for r in errs] == [("a", 0), ("a", 1)]
    assert all("ScorerInputError" in r["error"] for r in errs)
    assert _gate(report)["result"]["n_errors"] == 1


# -- inconclusive ----------------------------------------------------------------------------


def test_inconclusive_gate_fails_by_default_and_passes_on_request(
    pytester: pytest.Pytester,
) -> None:
    # the 95% t interval of the case scores (1, .5, 0, 1, 1) is about [0.145, 1.0]: it straddles 0.6
    _project(pytester, '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, confidence=0.95)')
    result, report = _run(pytester)
    result.assert_outcomes(passed=10)
    assert result.ret == 1
    gate = _gate(report)
    assert gate["verdict"] == "inconclusive"
    (check,) = gate["result"]["checks"]
    assert check["interval"]["low"] < 0.6 < check["interval"]["high"]
    lines = _section(result.outlines, "llm-eval gates")
    assert lines[1].startswith("INCONCLUSIVE test_qa.py::test_qa exact_match: mean 0.700 [")
    assert lines[1].endswith("(0.95 confidence)")
    policy = "inconclusive gates fail the run (--llm-eval-inconclusive=pass lets them pass)"
    assert lines[-1] == policy
    result, report = _run(pytester, "--llm-eval-inconclusive=pass")
    assert result.ret == 0 and report["run"]["exitstatus"] == 0
    assert report["gate_policy"] == {"inconclusive": "pass", "skipped": "fail"}
    pytester.makeini("[pytest]\nllm_eval_inconclusive = pass\n")
    assert _run(pytester)[0].ret == 0


# -- run gates (command line, ini) ---------------------------------------------------------


def test_command_line_gate_tightens_a_test_without_editing_it(pytester: pytest.Pytester) -> None:
    _project(pytester, gates="")
    result, report = _run(
        pytester, "--llm-eval-gate", "test_qa.py::test_qa:exact_match:min_mean=0.75"
    )
    # a run gate only tightens: the per-case misses still fail their tests, and the gate adds
    # its own verdict (issue 19: it used to turn these 3 failures into passes)
    result.assert_outcomes(passed=7, failed=3)
    assert result.ret == 1
    gate = _gate(report)
    assert gate["source"] == "--llm-eval-gate 'test_qa.py::test_qa:exact_match:min_mean=0.75'"
    assert gate["verdict"] == "fail"


def test_command_line_and_marker_gates_both_apply(project: pytest.Pytester) -> None:
    result, report = _run(
        project, "--llm-eval-gate", "*::test_qa:levenshtein:max_mean=0.5,min_pass_rate=1"
    )
    assert result.ret == 1
    assert {g["scorer"]: g["verdict"] for g in report["gates"]} == {
        "exact_match": "fail",
        "levenshtein": "fail",  # mean 0.7 > 0.5
    }


def test_wildcard_and_ini_gates(pytester: pytest.Pytester) -> None:
    _project(pytester, gates="")
    pytester.makepyfile(
        test_other="""
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.llm_eval
        def test_numbers():
            assert_score("numeric_diff", output=99, expected=100, min=0.9)
        """
    )
    pytester.makeini(
        "[pytest]\nllm_eval_gates =\n"
        "    test_*.py::test_*:exact_match:min_mean=0.5\n"
        "    nothing.py::*:exact_match:min_mean=0.5\n"
    )
    result, report = _run(pytester)
    # test_numbers matches the pattern but never scores exact_match: the wildcard gate covers
    # the tests that do, and is not an error for the others; the gate that matched no test
    # judged nothing, which is an error naming its pattern and the nearest tests (issue 19)
    result.assert_outcomes(passed=8, failed=3)  # run gates never soften per-case misses
    assert [(g["test"], g["verdict"]) for g in report["gates"]] == [
        ("test_qa.py::test_qa", "pass"),
        ("nothing.py::*", "error"),
    ]
    assert report["gates_unmatched"] == ["nothing.py::*"]
    problem = report["gates"][1]["problem"]
    assert problem.startswith("run gate 'nothing.py::*' matched no selected test, so it judged")
    assert "test_other.py::test_numbers" in problem or "test_qa.py::test_qa" in problem
    result.stdout.fnmatch_lines(["ERROR nothing.py::* exact_match", "*matched no selected test*"])
    # dropping the ini gates for one run (-o) is the way to run without them
    result, report = _run(pytester, "-o", "llm_eval_gates=")
    assert report["gates"] == []


def test_wildcard_gate_whose_scorer_no_matching_test_records_is_an_error(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, gates="")
    result, report = _run(pytester, "--llm-eval-gate", "*:numeric_diff:min_mean=0.5")
    result.assert_outcomes(passed=7, failed=3)
    (gate,) = report["gates"]
    assert gate["verdict"] == "error" and gate["test"] == "*"
    assert gate["problem"] == (
        "no records of scorer 'numeric_diff' in any of the 1 test(s) matching '*'"
    )


def test_gate_on_a_scorer_the_test_never_calls_is_an_error_at_the_end(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, gates='@pytest.mark.llm_eval_gate("numeric_diff", min_mean=0.5)')
    result, report = _run(pytester)
    result.assert_outcomes(passed=7, failed=3)
    (gate,) = report["gates"]
    assert gate["verdict"] == "error"
    # the 3 failing items (exact_match is not gated here) never reached numeric_diff either
    problem = (
        "no records of scorer 'numeric_diff' in test test_qa.py::test_qa "
        "(3 samples failed before reaching it)"
    )
    assert gate["problem"] == problem
    lines = _section(result.outlines, "llm-eval gates")
    assert lines[1] == "ERROR test_qa.py::test_qa numeric_diff"
    assert lines[2] == f"    {problem}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("test_qa.py::test_qa:exact_match", "must be FILE::TEST:SCORER:KEY=VALUE*"),
        ("test_qa.py::test_qa:exact_match:min_mean=high", "*min_mean='high' is not a number"),
        ("test_qa.py::test_qa:exact_match:mean=0.5", "*unknown keyword 'mean'*"),
        ("x::y:exact_match:confidence=0.9", "*has no bound*"),
    ],
)
def test_malformed_command_line_gate_is_a_usage_error(
    project: pytest.Pytester, value: str, message: str
) -> None:
    result = project.runpytest("--llm-eval", "--llm-eval-gate", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--llm-eval-gate {value!r}: {message}"])


# -- bad gates are collection errors -------------------------------------------------------


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (
            '@pytest.mark.llm_eval_gate("exact_mach", min_mean=0.6)',
            "*unknown scorer 'exact_mach'; did you mean 'exact_match'?*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_mean=1.5)',
            "*option 'min_mean' is 1.5, above the highest score 1: it can never pass*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_mean="0.6")',
            "*min_mean= is str '0.6', not a number*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, confidence=1.5)',
            "*confidence= is 1.5; give a level strictly between 0 and 1*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, reducer="avg")',
            "*reducer= 'avg' is not a reducer; use one of mean, median*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=90)',
            "*min_pass_rate= is 90, not a fraction in [[]0, 1[]]*",
        ),
        (
            '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, pass_rate=0.9)',
            "*unknown keyword 'pass_rate'; a gate takes min_mean, max_mean*",
        ),
        ('@pytest.mark.llm_eval_gate("exact_match")', "*gate on 'exact_match' has no bound*"),
    ],
)
def test_bad_gate_is_a_collection_error_naming_marker_and_test(
    pytester: pytest.Pytester, gate: str, message: str
) -> None:
    _project(pytester, gates=gate)
    result = pytester.runpytest("--llm-eval")
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [f"*@pytest.mark.llm_eval_gate(*) on test_qa.py::test_qa: {message}"]
    )


def test_command_line_gate_with_an_unknown_scorer_is_a_collection_error(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--llm-eval", "--llm-eval-gate", "*::test_qa:facts:min_mean=0.5")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*--llm-eval-gate '*::test_qa:facts:min_mean=0.5': unknown scorer 'facts'*"]
    )


@pytest.mark.parametrize("repeat", ["0", "-1", "2.5", "True", "'3'"])
def test_bad_repeat_is_a_collection_error(pytester: pytest.Pytester, repeat: str) -> None:
    _project(pytester)
    pytester.makepyfile(test_qa=TEST_QA.format(gates="").replace("repeat=2", f"repeat={repeat}"))
    result = pytester.runpytest("--llm-eval")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*test_qa.py::test_qa: @pytest.mark.llm_eval_dataset(repeat={repeat}): repeat is the*"]
    )


# -- repeated samples ------------------------------------------------------------------------


@pytest.mark.smoke
def test_repeat_ids_and_sample_indices(pytester: pytest.Pytester) -> None:
    _project(pytester, gates="")
    pytester.makepyfile(
        test_qa=TEST_QA.format(gates="").replace("repeat=2", "repeat=3"),
        test_single="""
        import pytest

        @pytest.mark.llm_eval
        @pytest.mark.llm_eval_dataset("data/qa.jsonl")
        def test_one(case, llm_eval_sample):
            assert llm_eval_sample == 0
        """,
    )
    result = pytester.runpytest("--llm-eval", "--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids[:4] == [
        "test_qa.py::test_qa[a-s0]",
        "test_qa.py::test_qa[a-s1]",
        "test_qa.py::test_qa[a-s2]",
        "test_qa.py::test_qa[b-s0]",
    ]
    assert len([i for i in ids if i.startswith("test_qa.py")]) == 15
    assert "test_single.py::test_one[a]" in ids  # no suffix without repeat
    # --llm-eval-repeat applies to the tests whose marker sets no repeat; the marker wins
    result = pytester.runpytest("--llm-eval", "--collect-only", "-q", "--llm-eval-repeat=2")
    ids = [line for line in result.outlines if "::" in line]
    assert "test_single.py::test_one[a-s1]" in ids
    assert len([i for i in ids if i.startswith("test_qa.py")]) == 15


def test_every_sample_keeps_its_record_even_when_the_judgement_is_reused(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, gates="")
    pytester.makepyfile(
        test_qa="""
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.llm_eval
        @pytest.mark.llm_eval_dataset("data/qa.jsonl", repeat=3)
        def test_qa(case, llm_eval_sample):
            assert_score("exact_match", output="x", expected=case.expected, min=1)
        """
    )
    out = pytester.path / "report.json"
    result = pytester.runpytest("--llm-eval", "-k", "a-", f"--llm-eval-report={out}")
    result.assert_outcomes(passed=3, deselected=12)
    records = json.loads(out.read_text())["records"]
    # same input three times: one computation, two cache hits, three records
    assert [(r["case_id"], r["sample"], r["cached"]) for r in records] == [
        ("a", 0, False),
        ("a", 1, True),
        ("a", 2, True),
    ]


def test_a_k_subset_gate_says_it_is_over_a_subset(project: pytest.Pytester) -> None:
    result, report = _run(project, "-k", "a- or b-")
    result.assert_outcomes(passed=4, deselected=6)
    gate = _gate(report)
    assert gate["note"] == "gate over 2 of 5 cases (3 not selected: -k/-m/--deselect subset)"
    assert gate["result"]["n_cases"] == 2
    assert "    gate over 2 of 5 cases (3 not selected: -k/-m/--deselect subset)" in _section(
        result.outlines, "llm-eval gates"
    )
    result, report = _run(project, "-k", "s0")
    assert _gate(report)["note"] == (
        "gate over 5 of 10 samples (5 missing: -k/deselect subset, skipped or unscored samples)"
    )


def test_skipped_gated_tests_have_no_verdict(project: pytest.Pytester) -> None:
    result = project.runpytest()  # no --llm-eval: every llm_eval test is skipped
    assert set(result.parseoutcomes()) == {"skipped"}
    assert result.ret == 0
    assert not any("llm-eval gates" in line for line in result.outlines)


def test_skipped_cases_are_said_and_not_judged(pytester: pytest.Pytester) -> None:
    rows = [dict(r) for r in ROWS]
    rows[1] = {**rows[1], "outputs": ["SKIP", "SKIP"]}
    _project(pytester, rows=rows)
    result, report = _run(pytester)
    result.assert_outcomes(passed=8, skipped=2)
    gate = _gate(report)
    assert gate["note"] == "gate over 4 of 5 cases (1 skipped)"
    # b (the flaky case) is gone: cases a, d, e pass, c fails
    assert gate["result"]["n_cases"] == 4 and gate["verdict"] == "fail"
    assert {c["metric"]: c["interval"]["estimate"] for c in gate["result"]["checks"]} == {
        "mean": pytest.approx(0.75),
        "pass_rate": pytest.approx(0.75),
    }


def test_bad_repeat_and_inconclusive_options_are_usage_errors(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval", "--llm-eval-repeat=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-repeat / ini llm_eval_repeat: must be >= 1, not 0 "
            "(given by --llm-eval-repeat)"
        ]
    )
    project.makeini("[pytest]\nllm_eval_inconclusive = maybe\n")
    result = project.runpytest("--llm-eval")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-inconclusive / ini llm_eval_inconclusive: 'maybe' is not one of "
            "fail, pass (given by ini llm_eval_inconclusive)"
        ]
    )


# -- the pure parts ----------------------------------------------------------------------------


def test_score_record_round_trips_sample_and_gated() -> None:
    from pytest_llmeval.core.records import ScoreRecord

    rec = ScoreRecord("f.py", "t", "c", "exact_match", 0, 0.0, 1.0, None, False, False, 0.1)
    rec = dataclasses.replace(rec, sample=3, gated=True)
    data = json.loads(json.dumps(rec.to_json()))
    assert (data["sample"], data["gated"]) == (3, True)
    assert ScoreRecord.from_json(data) == rec
    old = {k: v for k, v in data.items() if k not in ("sample", "gated")}
    assert (ScoreRecord.from_json(old).sample, ScoreRecord.from_json(old).gated) == (0, False)


def test_parse_gate_option() -> None:
    from pytest_llmeval.analysis.gates import parse_gate_option

    rule = parse_gate_option(
        "tests/test_qa.py::test_qa:factuality:min_mean=0.7, min-pass-rate=0.9,reducer=majority,"
        "max_errors=2,confidence=0.9"
    )
    assert rule.pattern == "tests/test_qa.py::test_qa" and not rule.wildcard
    spec = rule.spec
    assert (spec.scorer, spec.min_mean, spec.min_pass_rate, spec.reducer) == (
        "factuality",
        0.7,
        0.9,
        "majority",
    )
    assert (spec.max_errors, spec.confidence) == (2, 0.9)
    assert rule.matches("tests/test_qa.py", "test_qa")
    assert not rule.matches("tests/test_qa.py", "test_qa2")
    star = parse_gate_option("tests/*::Test*::test_?:exact_match:max_mean=0.5")
    assert star.wildcard and star.matches("tests/a/b.py", "TestX::test_1")


def test_case_samples_group_cases_and_keep_errors_unscored() -> None:
    from pytest_llmeval.analysis.gates import case_samples
    from pytest_llmeval.core.records import ScoreRecord

    def rec(case: str, sample: int, score: float | None, error: str | None = None) -> ScoreRecord:
        passed = None if score is None else score >= 0.5
        return ScoreRecord(
            "f.py", "t", case, "s", 0, score, 0.5, None, passed, False, 0.0, error=error,
            sample=sample,
        )  # fmt: skip

    cases = case_samples([rec("b", 1, 0.2), rec("a", 0, 0.9), rec("b", 0, None, "boom")])
    assert [c.case for c in cases] == ["f.py::t[a]", "f.py::t[b]"]
    b = cases[1]
    assert [(x.sample, x.score, x.passed, x.error) for x in b.samples] == [
        (0, None, None, "boom"),
        (1, 0.2, False, None),
    ]
    assert (b.min, b.max) == (0.5, None)


def test_gate_on_a_scorer_with_an_unbounded_range_reaches_the_json_report(
    pytester: pytest.Pytester,
) -> None:
    # readability scores lie in (-inf, 206.84]: JSON has no infinity, the open end is null
    pytester.makepyfile(
        test_read="""
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.llm_eval
        @pytest.mark.llm_eval_gate("readability", min_mean=50)
        @pytest.mark.parametrize("text", ["The cat sat on the mat. It was happy.", "Dogs run."])
        def test_read(text):
            assert_score("readability", output=text, min=0)
        """
    )
    pytester.makeini("[pytest]\n")
    result, report = _run(pytester)
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    (gate,) = report["gates"]
    assert gate["verdict"] == "pass"
    assert gate["spec"]["score_range"] == [None, 206.84]
    assert gate["result"]["n_cases"] == 2


def test_a_gate_of_a_run_stopped_early_says_so(pytester: pytest.Pytester) -> None:
    _project(pytester, gates='@pytest.mark.llm_eval_gate("levenshtein", min_mean=0.5)')
    result, report = _run(pytester, "-x")  # b-s1 misses exact_match (not gated): stop there
    result.assert_outcomes(passed=3, failed=1)
    gate = _gate(report, "levenshtein")
    # the 3 cases -x left unrun were selected: unscored, never "not selected" (issue 19)
    assert gate["note"] == (
        "gate over 5 of 5 cases (3 never reported, counted as unscored: "
        "6 samples: the run stopped early (-x, --maxfail))"
    )
    assert gate["verdict"] == "error" and gate["result"]["n_errors"] == 4
    assert "max_errors=0" in gate["result"]["reason"]
