"""The end of a run, through real pytest runs (pytester): the llm-eval summary, the JSON report
and what the user sees when something goes wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmeval.testing import OpenAITestServer, error

LONG_REASON = "because " + "x" * 4992  # 5000 characters

CONFTEST = f"""
from pytest_llmeval import Score, Scorer

class Verbose(Scorer):
    '''Always 0.1, with a 5000-character rationale (a judge that writes pages).'''
    name = "verbose"
    required_inputs = ("output",)

    def compute(self, inputs, ctx):
        return Score(value=0.1, rationale={LONG_REASON!r})

def pytest_llmeval_register_scorers(registry, config):
    registry.register(Verbose, replace=True)
"""

TESTS = """
from pytest_llmeval import assert_score

def test_good():
    assert_score("levenshtein", output="abc", expected="abc", min=1)

def test_wordy():
    assert_score("verbose", output="x", min=0.5)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_eval=TESTS)
    pytester.makeini("[pytest]\n")
    return pytester


def _lines(result: pytest.RunResult) -> list[str]:
    return result.outlines


def _index(lines: list[str], prefix: str) -> int:
    found = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    assert found, f"no line starts with {prefix!r}"
    return found[0]


# -- where the JSON report went ---------------------------------------------------------------


def test_the_terminal_says_where_the_json_report_was_written(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval-cache=off", "--llm-eval-report", "out/r.json")
    result.assert_outcomes(passed=1, failed=1)
    path = project.path / "out" / "r.json"
    assert json.loads(path.read_text())["aggregates"]["verbose"]["failed"] == 1
    lines = _lines(result)
    assert f"llm-eval: JSON report written to {path}" in lines
    # after the summary
    assert _index(lines, "llm-eval: JSON report written") > _index(lines, "failing scores:")
    # the summary's cut rationale points at the report, which keeps it whole
    assert any(line.endswith("… (4840 more chars; see the JSON report)") for line in lines)
    (rec,) = [r for r in json.loads(path.read_text())["records"] if r["scorer"] == "verbose"]
    assert rec["rationale"] == LONG_REASON


def test_without_a_report_the_cut_rationale_says_how_to_keep_it(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval-cache=off", "-v")
    lines = _lines(result)
    (reason,) = [line for line in lines if line.lstrip().startswith("reason: because")]
    assert reason == (
        "      reason: "
        + LONG_REASON[:1000]
        + "… (4000 more chars; --llm-eval-report keeps it whole)"
    )
    assert not any("JSON report written" in line for line in lines)


# -- a JSON report that cannot be written ------------------------------------------------------


def _assert_summary_then_error(result: pytest.RunResult, path: Path, os_error: str) -> None:
    lines = _lines(result)
    error = _index(lines, "llm-eval: could not write the JSON report to")
    assert lines[error] == (
        f"llm-eval: could not write the JSON report to {path}: {os_error} "
        "(no report was written; a previous report at that path is unchanged)"
    )
    assert _index(lines, "scorer ") < error  # the summary table came first
    assert any(line.startswith("verbose ") for line in lines[:error])
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert lines[-1].startswith("=") and "1 failed, 1 passed" in lines[-1]


def test_report_folder_is_a_file(project: pytest.Pytester) -> None:
    (project.path / "afile").write_text("not a folder")
    target = project.path / "afile" / "r.json"
    result = project.runpytest("--llm-eval-cache=off", "-k", "good", f"--llm-eval-report={target}")
    result.assert_outcomes(passed=1, deselected=1)
    # the tests passed, but the run did not do what was asked: non-zero
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    lines = _lines(result)
    error = _index(lines, "llm-eval: could not write the JSON report to")
    assert lines[error].startswith(
        f"llm-eval: could not write the JSON report to {target}: "
        f"[Errno 20] Not a directory: '{project.path / 'afile'}'"
    )
    assert _index(lines, "levenshtein ") < error
    assert (project.path / "afile").read_text() == "not a folder"


def test_report_path_is_a_directory(project: pytest.Pytester) -> None:
    target = project.path / "reports"
    target.mkdir()
    result = project.runpytest("--llm-eval-cache=off", f"--llm-eval-report={target}")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # already non-zero: kept
    _assert_summary_then_error(result, target, f"[Errno 21] Is a directory: '{target}'")
    assert os.listdir(target) == []


@pytest.fixture
def restore_file_size_limit() -> Iterator[None]:
    resource = pytest.importorskip("resource")
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, before)


def test_a_write_that_fails_midway_keeps_the_old_report(
    project: pytest.Pytester, restore_file_size_limit: None
) -> None:
    # Disk full, honestly simulated: a file-size limit (RLIMIT_FSIZE) makes the OS refuse the
    # report's bytes past 300 while it is being written. It is set by the inner run just before
    # the write (its output is captured in memory, the cache is off) and lifted afterwards.
    project.makeconftest(
        CONFTEST
        + """
import resource

def pytest_llmeval_update_json_report(config, report):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    config._llm_eval_test_fsize = (soft, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, hard))

def pytest_unconfigure(config):
    saved = getattr(config, "_llm_eval_test_fsize", None)
    if saved is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, saved)
"""
    )
    target = project.path / "r.json"
    target.write_text('{"old": "report"}\n')
    result = project.runpytest_inprocess("--llm-eval-cache=off", f"--llm-eval-report={target}")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    _assert_summary_then_error(result, target, "[Errno 27] File too large")
    assert target.read_text() == '{"old": "report"}\n'  # the previous report is intact
    assert not [p.name for p in project.path.iterdir() if p.name.startswith(".r.json.")]


# -- errors the user caused: short, and counted ------------------------------------------------


@pytest.mark.smoke
def test_unknown_scorer_is_a_short_error_without_internal_frames(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_typo="""
        from pytest_llmeval import assert_score

        def test_typo():
            assert_score("levenstein", output="a", expected="b")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    lines = _lines(result)
    start = _index(lines, "_____") + 1  # the "ERROR at call of test_typo" header
    section = lines[start : start + _index(lines[start:], "=")]
    assert section == [
        "",
        "    def test_typo():",
        '>       assert_score("levenstein", output="a", expected="b")',
        "E       pytest_llmeval.core.errors.UnknownScorerError: unknown scorer 'levenstein'; "
        "did you mean 'levenshtein'? Register custom scorers with @pytest_llmeval.scorer or the "
        "pytest_llmeval_register_scorers hook.",
        "",
        "test_typo.py:4: UnknownScorerError",
    ]
    # --fulltrace still shows where it came from
    full = pytester.runpytest("--fulltrace").stdout.str()
    assert "pytest_llmeval/engine/registry.py" in full


def test_options_assert_scores_rejects_are_counted_in_the_summary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_scores

        ROWS = [{"output": "a", "expected": "a"}]

        def test_rate_out_of_range():
            assert_scores("levenshtein", ROWS, min=0.5, min_pass_rate=2)

        def test_threshold():
            assert_scores("levenshtein", ROWS, threshold=0.5)

        def test_fine():
            assert_scores("levenshtein", ROWS, min=0.5)
        """
    )
    report = pytester.path / "r.json"
    result = pytester.runpytest("--llm-eval-cache=off", f"--llm-eval-report={report}")
    result.assert_outcomes(passed=1, errors=2)
    row = next(line for line in _lines(result) if line.startswith("levenshtein "))
    # scorer n mean min max passed failed errors ...
    assert row.split()[:8] == ["levenshtein", "3", "1.000", "1.000", "1.000", "1", "0", "2"]
    agg = json.loads(report.read_text())["aggregates"]["levenshtein"]
    assert agg["errors"] == 2
    errors = sorted(
        (r["test"], r["error"].split(":")[0])
        for r in json.loads(report.read_text())["records"]
        if r["error"]
    )
    assert errors == [
        ("test_rate_out_of_range", "ScorerConfigError"),
        ("test_threshold", "ScorerConfigError"),
    ]


def test_a_recorded_error_is_not_counted_twice(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_missing_input():
            assert_score("levenshtein", output="a")
        """
    )
    report = pytester.path / "r.json"
    result = pytester.runpytest("--llm-eval-cache=off", f"--llm-eval-report={report}")
    result.assert_outcomes(errors=1)
    records = json.loads(report.read_text())["records"]
    assert [(r["scorer"], r["error"].split(":")[0]) for r in records] == [
        ("levenshtein", "ScorerInputError")
    ]


def test_an_expected_failure_is_not_counted_as_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from pytest_llmeval import assert_scores

        @pytest.mark.xfail(reason="documents a rejected option")
        def test_threshold():
            assert_scores("levenshtein", [{"output": "a", "expected": "a"}], threshold=0.5)
        """
    )
    report = pytester.path / "r.json"
    result = pytester.runpytest("--llm-eval-cache=off", f"--llm-eval-report={report}")
    result.assert_outcomes(xfailed=1)
    assert json.loads(report.read_text())["records"] == []


def _error_section(result: pytest.RunResult) -> list[str]:
    lines = _lines(result)
    start = _index(lines, "_____") + 1
    return lines[start : start + _index(lines[start:], "=")]


def test_a_judge_error_is_shown_from_the_test_without_library_frames(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    # the judge call runs on the background loop and its error comes back through a future:
    # neither our frames nor concurrent.futures' belong in the user's report
    judge_server.enqueue(error(400, "model 'nope' does not exist"))
    pytester.makepyfile(
        test_judged=f"""
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("l3score", input="q?", expected="a", output="a", min=0.5,
                         base_url="{judge_server.base_url}", model="nope", max_tries=1)
        """
    )
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = pytester.runpytest("--llm-eval-cache=off")
    result.assert_outcomes(errors=1)
    section = _error_section(result)
    assert section[-1] == "test_judged.py:4: JudgeError"
    assert any(line.startswith(">       assert_score(") for line in section)
    (message,) = [line for line in section if line.startswith("E   ")]
    assert "JudgeError" in message and "does not exist" in message
    assert not [line for line in section if "concurrent" in line or "pytest_llmeval/" in line]
    assert len(section) < 15


@pytest.mark.smoke
def test_a_custom_scorers_own_frame_stays_in_the_traceback(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_llmeval import Score, Scorer, ScorerInputError

        class Picky(Scorer):
            name = "picky"
            required_inputs = ("output",)

            def compute(self, inputs, ctx):
                raise ScorerInputError(self.name, "output", "must not be empty")

        def pytest_llmeval_register_scorers(registry, config):
            registry.register(Picky, replace=True)
        """
    )
    pytester.makepyfile(
        test_picky="""
        from pytest_llmeval import assert_score

        def test_picky():
            assert_score("picky", output="")
        """
    )
    result = pytester.runpytest("--llm-eval-cache=off")
    result.assert_outcomes(errors=1)
    section = _error_section(result)
    assert section[-1] == "conftest.py:8: ScorerInputError"
    assert any("raise ScorerInputError" in line for line in section)
    assert any('assert_score("picky", output="")' in line for line in section)
    assert not [line for line in section if "pytest_llmeval/" in line]


def test_the_run_is_let_go_of_before_pytests_last_garbage_collections(
    pytester: pytest.Pytester,
) -> None:
    """Issue 24: once the session is over and written, the run controller holds no records, run
    model or view (pytest's cleanup collects garbage several times after every unconfigure
    hook: a record per case still held there is walked each time). What was written stays
    right: the JSON report has every record."""
    pytester.makeconftest(
        """
import json, pytest
from pytest_llmeval.plugin.controller import session_key

SEEN = []

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    SEEN.append(session.config.stash[session_key])

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    c = SEEN[0]
    with open("held.json", "w") as fh:
        json.dump([len(c.records), c.run is None, c.view is None, len(c.instruments)], fh)
"""
    )
    pytester.makepyfile(
        test_a="""
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(5))
def test_one(i):
    assert_score("exact_match", output=str(i), expected=str(i), min=1)
"""
    )
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "--llm-eval-report=r.json")
    result.assert_outcomes(passed=5)
    assert len(json.loads((pytester.path / "r.json").read_text())["records"]) == 5
    assert json.loads((pytester.path / "held.json").read_text()) == [0, True, True, 0]


STATUS_PROBE = """
import pytest

def pytest_sessionfinish(session):
    has = session.config.pluginmanager.get_plugin("llm-eval-status") is not None
    print(f"status hook registered: {has}")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_the_status_hook_is_registered_by_the_first_flagged_report(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """A run whose reports carry no plugin-error flag never asks the status hook of each report
    (it is not registered); a plugin error (an unknown scorer here, an ERROR not a FAIL) registers
    it before the terminal logs the flagged report, in the only process and in the xdist
    controller that receives it from a worker: the test reads ERROR, counted as an error."""
    pytester.makeconftest(STATUS_PROBE)
    pytester.makepyfile(
        test_clean="""
        from pytest_llmeval import assert_score

        def test_a():
            assert_score("levenshtein", output="a", expected="a", min=1)

        def test_b():
            assert_score("levenshtein", output="a", expected="b", min=1)
        """
    )
    clean = pytester.runpytest_subprocess("-s", "-p", "no:randomly", *workers)
    clean.assert_outcomes(passed=1, failed=1)
    assert "status hook registered: False" in clean.stdout.str()

    pytester.makepyfile(
        test_clean="""
        from pytest_llmeval import assert_score

        def test_a():
            assert_score("levenshtein", output="a", expected="a", min=1)

        def test_typo():
            assert_score("levenstein", output="a", expected="b")
        """
    )
    flagged = pytester.runpytest_subprocess("-s", "-p", "no:randomly", "-rA", *workers)
    flagged.assert_outcomes(passed=1, errors=1)
    out = flagged.stdout.str()
    assert "status hook registered: True" in out
    assert "ERROR test_clean.py::test_typo" in out


PLANT_ON_CALL = """
import pytest
from pytest_llmeval.core.records import ScoreRecord, records_to_wire

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        planted = ScoreRecord(
            file="test_plant.py", test="test_a", case_id=None, scorer="planted", index=0,
            score=0.0, min=1.0, max=None, passed=False, cached=False, duration_s=0.0,
        )
        report.llm_eval_records = records_to_wire([planted])
    return report
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_records_riding_on_a_report_other_than_teardown_are_taken_not_dropped(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """The controller reads records at teardown, where the plugin puts them; records that come
    on another report (a call report here, in the only process and from an xdist worker) are
    read all the same: a failing record is never lost by where it travelled."""
    pytester.makeconftest(PLANT_ON_CALL)
    pytester.makepyfile(
        test_plant="""
        from pytest_llmeval import assert_score

        def test_a():
            assert_score("levenshtein", output="a", expected="a", min=1)
        """
    )
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--llm-eval", f"--llm-eval-report={report}", *workers
    )
    result.assert_outcomes(passed=1)
    records = json.loads(report.read_text())["records"]
    assert sorted((r["scorer"], r["passed"]) for r in records) == [
        ("levenshtein", True),
        ("planted", False),
    ]
