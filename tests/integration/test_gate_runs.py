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

import json
from typing import Any

import pytest
from case_files import read_report, write_dataset
from verdict_projects import OFF

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
    assert lines[1] == (
        "per scorer: mean score and pass rate (share of cases meeting their bound), each with a "
        "confidence interval [low, high]; a case's repeated samples are combined into one score"
    )
    assert lines[2] == "test_qa.py::test_qa"
    em = next(line for line in lines if line.startswith("  exact_match:"))
    iv = next(s for s in report["statistics"] if s["scorer"] == "exact_match")["pass_rate"]
    assert em.startswith("  exact_match: 5 cases, 10 samples, mean 0.700 [")
    mean = next(s for s in report["statistics"] if s["scorer"] == "exact_match")["mean"]
    # the same interval the gate's mean check uses (t over the case scores, range-bounded)
    assert mean["method"] in ("t", "t+range") and mean["n"] == 5
    assert f"pass rate 0.600 [{iv['low']:.3f}, {iv['high']:.3f}] (95% wilson)" in em
    assert em.endswith("; flaky: b")


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
            # levenshtein: a stored scorer (exact_match stores nothing)
            assert_score("levenshtein", output="x", expected=case.expected, min=1)
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


ROW_BOUND = """
from pytest_llmeval import assert_scores

def test_rows():
    rows = [{"output": "a", "expected": "b"}, {"output": "a", "expected": "a"}]
    assert_scores("exact_match", rows, min=1)
"""


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


VACUOUS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_mean=-1)
@pytest.mark.parametrize("i", range(3))
def test_q(i):
    assert_score("exact_match", output="b", expected="a", min=1)
"""


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


SUBSET = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=1.0)
@pytest.mark.parametrize("i", range(10))
def test_q(i):
    assert_score("exact_match", output="a" if i < 2 else "b", expected="a", min=1)
"""


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


def test_a_case_whose_second_assertion_missed_is_not_a_passing_case(
    pytester: pytest.Pytester,
) -> None:
    """Attack: two assertions of one scorer in a gated test, the second misses its bound in one
    case. The gate averages the case's two records (1 and 0) into 0.5, which meets the bound
    0.5, so ``min_pass_rate=1.0`` said PASS (exit 0) while the summary counted 1 failed
    assertion: an assertion's miss became a passing case."""
    pytester.makepyfile(test_two=TWO_ASSERTIONS)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    (gate,) = read_report(pytester)["gates"]
    assert gate["verdict"] == "fail", gate["result"]["cases"]
    assert result.ret == 1


def test_assert_scores_with_a_per_row_bound_fails_on_a_row_below_it(
    pytester: pytest.Pytester,
) -> None:
    """Attack: ``assert_scores(scorer, rows, min=1)`` without an aggregate bound. The row that
    scored 0 is recorded as failed (summary: passed=1 failed=1) but nothing is asserted: the
    test passes. A bound that is given and missed must fail (or be refused as meaningless)."""
    pytester.makepyfile(test_rows=ROW_BOUND)
    result = pytester.runpytest(*OFF)
    assert result.ret != 0
    result.assert_outcomes(failed=1)


def test_samples_of_a_case_with_a_non_ascii_id_stay_one_case(pytester: pytest.Pytester) -> None:
    """Attack: dataset ids with non-ASCII letters (``é1``), ``repeat=3`` and a second
    parametrization. pytest escapes the id (``\\xe91-s0``), the plugin no longer recognises the
    case in it and keeps the whole id, sample suffix included, as the case id: each sample is
    its own case. The majority gate then judged 6 one-sample cases (2 pass: 0.333 >= 0.3, PASS,
    exit 0) instead of 2 cases that each failed 2 of 3 samples (pass rate 0)."""
    write_dataset(pytester.path / "data" / "cases.jsonl", [{"id": "é1"}, {"id": "é2"}])
    pytester.makepyfile(test_q=NON_ASCII)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    report = read_report(pytester)
    assert len({r["case_id"] for r in report["records"]}) == 2
    (gate,) = report["gates"]
    assert gate["result"]["n_cases"] == 2
    assert gate["verdict"] == "fail"
    assert result.ret == 1


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


def test_a_selected_case_that_ran_without_scoring_is_unscored(pytester: pytest.Pytester) -> None:
    """Attack: the app regresses to empty answers for 5 of 10 cases and the test scores only
    non-empty answers (``if answer: assert_score(...)``). The gate said 'PASS ... pass rate
    1.000 >= 0.9', '5 cases, 0 unscored', 'gate over 5 of 10 cases (5 ran without a
    exact_match record)', exit 0. The guarantee is a gate over the selected cases, with an
    unscored case counted against max_errors: a case that ran and never scored is unscored."""
    pytester.makepyfile(test_q=CONDITIONAL)
    result = pytester.runpytest(*OFF, "--llm-eval-report=report.json")
    (gate,) = read_report(pytester)["gates"]
    assert gate["verdict"] == "error"
    assert gate["result"]["n_errors"] == 5
    assert result.ret == 1


def test_a_k_subset_of_a_parametrized_gated_test_says_so(pytester: pytest.Pytester) -> None:
    """Attack: ``-k`` keeps the 2 good cases of 10 of a gated test that has no dataset (a plain
    parametrize). The gate said 'PASS ... 2 cases, 2 samples, 0 unscored' with no word of the 8
    deselected cases (its note was null). The README promises a subset gate says so ('gate over
    2 of N cases (... not selected ...)')."""
    pytester.makepyfile(test_q=SUBSET)
    pytester.runpytest(*OFF, "--llm-eval-report=report.json", "-k", "test_q[0] or test_q[1]")
    (gate,) = read_report(pytester)["gates"]
    assert gate["note"] is not None
    assert "gate over 2 of 10 cases" in gate["note"]
    assert "not selected" in gate["note"]


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
    assert read_report(pytester)["verdict"]["passed"] is False
    assert result.ret != 0


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


SKIPPING = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_mean=0.9)
def test_gated(case):
    pytest.skip("the app is down")
"""


TAMPER = """
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if getattr(report, "llm_eval_plan", None):
        report.llm_eval_plan = "{not json"
    return report
"""


TAMPER_RECORDS = """
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if getattr(report, "llm_eval_records", None) and "c1" in item.nodeid:
        report.llm_eval_records = '[{"file": 1}]'
    return report
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
    (gate,) = read_report(pytester)["gates"]
    assert gate["verdict"] == "error" and gate["test"] == "test_a.py::test_answer"
    assert "matched no selected test" in gate["problem"]
    assert "nearest test ids: test_a.py::test_answers" in gate["problem"]
    result.stdout.fnmatch_lines(["ERROR test_a.py::test_answer exact_match", "*nearest test ids*"])
    # a pattern whose tests were deselected says so (and still judges nothing: an error)
    result = pytester.runpytest(
        *args, "-k", "plain", "--llm-eval-gate", "test_a.py::test_answers:exact_match:min_mean=0.5"
    )
    assert result.ret == 1
    (gate,) = read_report(pytester)["gates"]
    assert "it matches test_a.py::test_answers, not selected in this run" in gate["problem"]


def test_cases_lost_to_a_crashed_worker_are_unscored_never_not_selected(
    pytester: pytest.Pytester,
) -> None:
    """Finding 3: 7 of 10 gated cases crash their xdist worker (os._exit): the gate said PASS
    over the 3 that ran, calling the others 'not selected'."""
    pytest.importorskip("xdist")
    rows = [{"id": f"c{i}", "output": "x", "crash": i < 7} for i in range(10)]
    write_dataset(pytester.path / "data" / "cases.jsonl", rows)
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
    (gate,) = read_report(pytester)["gates"]
    assert gate["verdict"] == "error", gate
    assert gate["result"]["n_cases"] == 10 and gate["result"]["n_errors"] == 7
    assert (
        "7 never reported, counted as unscored: 7 samples: an xdist worker crashed"
        in (gate["note"])
    )
    assert "not selected" not in gate["note"]
    result.stdout.fnmatch_lines(["ERROR test_crash.py::test_gated exact_match*"])


def test_a_gate_whose_every_case_was_skipped_does_not_pass(pytester: pytest.Pytester) -> None:
    """Finding 4: all cases skipped: no gate section, exit 0."""
    write_dataset(pytester.path / "data" / "cases.jsonl", [{"id": f"c{i}"} for i in range(4)])
    pytester.makepyfile(test_skip=SKIPPING)
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=report.json")
    result = pytester.runpytest(*args)
    result.assert_outcomes(skipped=4)
    assert result.ret == 1
    (gate,) = read_report(pytester)["gates"]
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
    assert read_report(pytester)["gates"][0]["verdict"] == "skipped"
    # a plain `pytest` (evaluations off) judges no llm_eval gate: nothing to say, exit 0
    result = pytester.runpytest("--llm-eval-cache=off")
    assert result.ret == 0
    result.stdout.no_fnmatch_line("*llm-eval gates*")


MAJORITY_GATED = """
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
    write_dataset(pytester.path / "data" / "cases.jsonl", rows)
    pytester.makepyfile(test_v=MAJORITY_GATED)
    result = pytester.runpytest(
        "--llm-eval", "--llm-eval-cache=off", "--llm-eval-report=report.json"
    )
    assert result.ret == 0
    report = read_report(pytester)
    (stat,) = report["statistics"]
    (gate,) = report["gates"]
    (check,) = gate["result"]["checks"]
    assert stat["reducer"] == "majority"
    assert stat["pass_rate"]["estimate"] == check["interval"]["estimate"] == 0.75
    text = result.stdout.str()
    assert "pass rate (majority) 0.750 [" in text  # statistics
    assert "pass rate (majority) 0.750 >= 0.7: pass" in text  # the gate
    assert "pass rate 0.000" not in text


def test_an_unreadable_plan_fails_the_run_instead_of_dropping_its_gates(
    pytester: pytest.Pytester,
) -> None:
    """Without the plan no gate knows its cases: the gates must not silently vanish."""
    pytest.importorskip("xdist")
    write_dataset(
        pytester.path / "data" / "cases.jsonl",
        [{"id": f"c{i}", "output": "x", "crash": False} for i in range(4)],
    )
    pytester.makepyfile(test_crash=CRASHING)
    pytester.makeconftest(TAMPER)
    result = pytester.runpytest_subprocess("--llm-eval", "--llm-eval-cache=off", "-n", "2")
    result.assert_outcomes(passed=4)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*the plan of gated tests sent with*could not be read*"])


def test_unreadable_records_fail_the_run_instead_of_vanishing(pytester: pytest.Pytester) -> None:
    """A record dropped in silence could be the failing one (c1 fails its bound here). Records
    travel as JSON from xdist workers (without xdist they are handed over as they are)."""
    pytest.importorskip("xdist")
    rows = [{"id": f"c{i}", "output": "x" if i != 1 else "y", "crash": False} for i in range(4)]
    write_dataset(pytester.path / "data" / "cases.jsonl", rows)
    pytester.makepyfile(test_crash=CRASHING.replace("min_pass_rate=0.5", "min_pass_rate=1"))
    pytester.makeconftest(TAMPER_RECORDS)
    result = pytester.runpytest_subprocess("--llm-eval", "--llm-eval-cache=off", "-n", "2")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*the score records sent with test_crash.py::test_gated[[]c1[]] could not be read*"]
    )


def test_one_case_interval_reads_n_a_in_the_terminal_and_the_markdown(
    pytester: pytest.Pytester,
) -> None:
    """One scored case has no mean interval (no spread can be estimated): it is printed as
    ``n/a (1 case)``, never ``[-inf, inf]``, in the statistics, the gates and the Markdown."""
    gate = '@pytest.mark.llm_eval_gate("exact_match", min_mean=0.6, confidence=0.95)'
    _project(pytester, gates=gate, rows=ROWS[:1])
    result, _ = _run(pytester, "--llm-eval-markdown=summary.md")
    stats = _section(result.outlines, "llm-eval statistics")
    em = next(line for line in stats if line.startswith("  exact_match:"))
    assert em.startswith("  exact_match: 1 case, 2 samples, mean 1.000 [n/a (1 case)], pass rate ")
    gates = _section(result.outlines, "llm-eval gates")
    check = "mean 1.000 [n/a (1 case)] >= 0.6: inconclusive"
    assert any(check in line for line in gates), gates
    assert "    1 case, 2 samples, 0 unscored" in gates
    assert "inf" not in "\n".join(stats + gates)
    markdown = (pytester.path / "summary.md").read_text()
    assert "mean 1.000 \\[n/a \\(1 case\\)\\] \\>= 0.6: inconclusive" in markdown, markdown
    assert "inf]" not in markdown
