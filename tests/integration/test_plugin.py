"""Plugin behaviour, through real pytest runs in temporary directories (pytester)."""

from __future__ import annotations

import json
import sqlite3

import pytest

CONFTEST = """
import os
import pytest_llmeval
from pytest_llmeval import Score, Scorer

class Overlap(Scorer):
    '''Share of expected words present in the output; appends to CALLS_FILE on each compute.'''
    name = "overlap"
    required_inputs = ("output", "expected")

    def compute(self, inputs, ctx):
        calls = os.environ.get("CALLS_FILE")
        if calls:
            with open(calls, "a") as fh:
                fh.write("x\\n")
        exp = inputs["expected"].split()
        out = set(inputs["output"].split())
        hit = sum(1 for w in exp if w in out)
        return Score(value=hit / len(exp), rationale=f"{hit} of {len(exp)} words")

class BrokenJudge(Scorer):
    name = "broken_judge"
    uses_judge = True

    def compute(self, inputs, ctx):
        raise pytest_llmeval.JudgeError("server said 500 three times", scorer=self.name,
                                        endpoint="http://127.0.0.1:9", model="m", cause="500")

def pytest_llmeval_register_scorers(registry, config):
    registry.register(Overlap, replace=True)
    registry.register(BrokenJudge, replace=True)
"""

DATA = "\n".join(
    json.dumps(r)
    for r in [
        {"id": "cats", "output": "cats sit on mats", "expected": "cats sit"},
        {"id": "dogs", "output": "dogs bark", "expected": "dogs run fast"},
        {"output": "a b c", "expected": "a b c"},
    ]
)

TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl")
def test_overlap(case):
    assert_score("overlap", output=case.output, expected=case.expected, min=0.5)

def test_plain():
    assert 1 + 1 == 2
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "cases.jsonl").write_text(DATA + "\n")
    pytester.makepyfile(test_eval=TESTS)
    pytester.makeini("[pytest]\n")
    calls = pytester.path / "calls.txt"
    pytester._monkeypatch.setenv("CALLS_FILE", str(calls))
    return pytester


def calls(p: pytest.Pytester) -> int:
    f = p.path / "calls.txt"
    return len(f.read_text().splitlines()) if f.exists() else 0


def test_llm_eval_tests_are_skipped_with_a_reason_by_default(project: pytest.Pytester) -> None:
    result = project.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)  # one skipped item per test, dataset unread
    result.stdout.fnmatch_lines(["*run only with `pytest --llm-eval`*"])
    assert calls(project) == 0


def test_ini_switch_runs_them(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nllm_eval = true\n")
    project.runpytest().assert_outcomes(passed=3, failed=1)


def test_dataset_rows_become_tests_in_file_order(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_eval.py::test_overlap[[]cats[]]",
            "test_eval.py::test_overlap[[]dogs[]]",
            "test_eval.py::test_overlap[[]3[]]",
            "test_eval.py::test_plain",
        ]
    )


def test_failure_reads_like_pytest_with_scorer_score_bound_reason(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--llm-eval")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*overlap score 0.3333 is not >= 0.5 (higher is better)",
            "*case: data/cases.jsonl:2",
            "*rationale: 1 of 3 words",
        ]
    )


@pytest.mark.smoke
def test_terminal_summary_table_and_failing_cases(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval")
    result.stdout.fnmatch_lines(
        [
            "*= llm-eval summary =*",
            "scorer * n * mean * min * max * passed * failed * errors * cached * calls *"
            " tokens * cost * time",
            "overlap * 3 * 0.778 * 0.333 * 1.000 * 2 * 1 * 0 * 0 * 0 * 0 * - *",
            "3 scores, 0 from cache, 0 judge calls",
            "failing scores:",
            "  test_eval.py::test_overlap[[]dogs[]] overlap = 0.3333 (bound >= 0.5)",
            "      reason: 1 of 3 words",
        ]
    )


def test_quiet_summary_is_one_line_per_scorer(project: pytest.Pytester) -> None:
    result = project.runpytest("--llm-eval", "-q")
    result.stdout.fnmatch_lines(["overlap: n=3 mean=0.778 passed=2 failed=1"])
    result.stdout.no_fnmatch_line("failing scores:")


@pytest.mark.smoke
def test_second_run_is_served_from_the_cache(project: pytest.Pytester) -> None:
    project.runpytest("--llm-eval")
    assert calls(project) == 3
    result = project.runpytest("--llm-eval")
    assert calls(project) == 3
    result.stdout.fnmatch_lines(["3 scores, 3 from cache, 0 judge calls"])
    project.runpytest("--llm-eval", "--llm-eval-cache=refresh")
    assert calls(project) == 6
    project.runpytest("--llm-eval", "--llm-eval-cache=off")
    assert calls(project) == 9


def test_subset_run_never_removes_entries(project: pytest.Pytester) -> None:
    project.runpytest("--llm-eval")
    db = project.path / ".llmeval" / "results.sqlite3"

    def count() -> int:
        return int(sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0])

    assert count() == 3
    project.runpytest("--llm-eval", "-k", "cats")
    assert count() == 3


def test_replay_miss_of_a_judge_scorer_is_an_error_not_a_failure(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_judged="""
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("broken_judge", output="x", min=0.5)
        """
    )
    result = project.runpytest("--llm-eval", "--llm-eval-cache=replay")
    # The judge scorer's miss is an ERROR (no call attempted, not the JudgeError of a call);
    # the judge-free scorer computes as usual: 2 pass, 1 fails, the plain test passes.
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*CacheMissError*broken_judge*--llm-eval-cache=use*"])
    assert "server said 500" not in result.stdout.str()
    assert calls(project) == 3


def test_cache_dir_option_and_corrupt_cache(project: pytest.Pytester) -> None:
    alt = project.path / "alt-cache"
    alt.mkdir()
    (alt / "results.sqlite3").write_bytes(b"garbage" * 500)
    result = project.runpytest(
        "--llm-eval",
        "--llm-eval-cache-dir",
        str(alt),
        "-W",
        "default::pytest_llmeval.stores.cache.CacheWarning",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*unreadable*rebuilding*"])
    assert not (project.path / ".llmeval").exists()
    assert (alt / "results.sqlite3").stat().st_size > 0


def test_judge_failure_is_an_error_with_its_cause(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("broken_judge", output="x", min=0.5)
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*JudgeError: judge error (scorer 'broken_judge', model 'm', endpoint "
            "http://127.0.0.1:9): server said 500 three times (last cause: 500)",
            "scoring errors:",
            "  *.py::test_judged broken_judge: JudgeError: *",
        ]
    )
    assert not (pytester.path / ".llmeval" / "results.sqlite3").exists() or (
        sqlite3.connect(pytester.path / ".llmeval" / "results.sqlite3")
        .execute("SELECT count(*) FROM results")
        .fetchone()[0]
        == 0
    )


def test_unknown_scorer_lists_close_matches(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_typo():
            assert_score("levenstein", output="a", expected="b")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unknown scorer 'levenstein'; did you mean 'levenshtein'*"])


def test_a_nan_bound_is_a_test_error_not_an_internal_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_nan():
            assert_score("levenshtein", output="a", expected="a", min=float("nan"))

        def test_fine():
            assert_score("levenshtein", output="a", expected="a", min=1)
        """
    )
    result = pytester.runpytest("--llm-eval-report", str(pytester.path / "r.json"))
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*scorer 'levenshtein': option 'min' is nan*finite number*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_missing_input_names_scorer_field_and_dataset_row(project: pytest.Pytester) -> None:
    (project.path / "data" / "holes.jsonl").write_text('{"output": "x"}\n')
    project.makepyfile(
        test_holes="""
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.llm_eval_dataset("data/holes.jsonl")
        def test_h(case):
            assert_score("overlap", output=case.output, expected=case.get("expected"))
        """
    )
    result = project.runpytest("test_holes.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*ScorerInputError: data/holes.jsonl:1: scorer 'overlap': input 'expected' is required*"]
    )


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (None, "nope.jsonl", "*data/nope.jsonl: dataset file not found*"),
        ('{"a": 1}\n{"a": \n', "bad.jsonl", "*data/bad.jsonl:2: malformed JSON line*"),
        ("\n", "empty.jsonl", "*data/empty.jsonl: dataset is empty*"),
        ('{"id": 1}\n{"id": 1}\n', "dup.jsonl", "*data/dup.jsonl:2: duplicate case id '1'*"),
        ("a,b\n1,2,3\n", "bad.csv", "*data/bad.csv:2: CSV row has 3 fields*"),
    ],
)
def test_dataset_problems_are_collection_errors(
    pytester: pytest.Pytester, content: str | None, name: str, message: str
) -> None:
    (pytester.path / "data").mkdir()
    if content is not None:
        (pytester.path / "data" / name).write_text(content)
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.llm_eval_dataset("data/{name}")
        def test_x(case):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])


def test_dataset_marker_needs_case_argument(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_eval_dataset("x.jsonl")
        def test_x():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*needs the test to take a `case` argument*"])


def test_case_without_dataset_explains(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(case):\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*add @pytest.mark.llm_eval_dataset*"])


def _report(p: pytest.Pytester, *args: str) -> dict:  # type: ignore[type-arg]
    out = p.path / "report.json"
    if out.exists():
        out.unlink()
    p.runpytest_subprocess("--llm-eval", f"--llm-eval-report={out}", *args)
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _comparable(report: dict) -> tuple:  # type: ignore[type-arg]
    recs = [{k: v for k, v in r.items() if k not in ("duration_s",)} for r in report["records"]]
    aggs = {
        k: {kk: vv for kk, vv in v.items() if kk != "time_s"}
        for k, v in report["aggregates"].items()
    }
    return recs, aggs


def test_json_report_content(project: pytest.Pytester) -> None:
    project._monkeypatch.setenv("OPENAI_API_KEY", "sk-very-SECRET-key")
    report = _report(project)
    assert report["version"] == 2
    assert [(r["case_id"], r["score"], r["passed"]) for r in report["records"]] == [
        ("3", 1.0, True),
        ("cats", 1.0, True),
        ("dogs", pytest.approx(1 / 3), False),
    ]
    rec = report["records"][2]
    assert (rec["file"], rec["test"], rec["scorer"], rec["min"], rec["rationale"]) == (
        "test_eval.py",
        "test_overlap",
        "overlap",
        0.5,
        "1 of 3 words",
    )
    assert rec["where"] == "data/cases.jsonl:2"
    agg = report["aggregates"]["overlap"]
    assert (agg["n"], agg["passed"], agg["failed"]) == (3, 2, 1)
    assert agg["mean"] == pytest.approx(7 / 9)
    run = report["run"]
    assert {"started", "finished", "versions", "git_commit", "exitstatus"} <= set(run)
    assert run["exitstatus"] == 1 and run["versions"]["pytest"]
    text = (project.path / "report.json").read_text()
    db = (project.path / ".llmeval" / "results.sqlite3").read_bytes()
    assert "SECRET" not in text and b"SECRET" not in db


def test_same_summary_and_report_with_and_without_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    serial = _report(project, "-p", "no:xdist", "--llm-eval-cache=off")
    parallel = _report(project, "-n", "2", "--llm-eval-cache=off")
    assert _comparable(serial) == _comparable(parallel)
    assert parallel["run"]["workers"] == 2
    r1 = project.runpytest_subprocess("--llm-eval", "-p", "no:xdist", "--llm-eval-cache=off")
    r2 = project.runpytest_subprocess("--llm-eval", "-n", "2", "--llm-eval-cache=off")

    def section(lines: list[str]) -> list[str]:
        start = next(i for i, line in enumerate(lines) if "llm-eval summary" in line)
        end = next(i for i, line in enumerate(lines) if "short test summary" in line)
        # the time column differs run to run
        return [
            line.rsplit(None, 1)[0] if line.endswith("s") else line for line in lines[start:end]
        ]

    assert section(r1.outlines) == section(r2.outlines)
    assert any(line.startswith("overlap") for line in section(r2.outlines))


def test_register_scorer_hook_from_a_subdirectory_conftest(pytester: pytest.Pytester) -> None:
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "from pytest_llmeval import Score, Scorer\n"
        "class Always(Scorer):\n"
        "    name = 'always_one'\n"
        "    def compute(self, inputs, ctx):\n"
        "        return Score(value=1.0)\n"
        "def pytest_llmeval_register_scorers(registry, config):\n"
        "    registry.register(Always, replace=True)\n"
    )
    (sub / "test_sub.py").write_text(
        "from pytest_llmeval import assert_score\n"
        "def test_a():\n"
        "    assert assert_score('always_one', output='x', min=1).value == 1.0\n"
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_update_json_report_hook(project: pytest.Pytester) -> None:
    project.makeconftest(
        CONFTEST + "\ndef pytest_llmeval_update_json_report(config, report):\n"
        "    report['run']['build'] = 'b-42'\n"
    )
    assert _report(project)["run"]["build"] == "b-42"


def test_the_update_hook_changes_reach_the_records_of_the_report_and_the_saved_run(
    project: pytest.Pytester,
) -> None:
    """Records are written one at a time as they are made unless something may change them:
    with the hook, its changes to the records are in the JSON report and in the history."""
    project.makeconftest(
        CONFTEST + "\ndef pytest_llmeval_update_json_report(config, report):\n"
        "    for r in report['records']:\n"
        "        r['reviewed_by'] = 'qa'\n"
    )
    records = _report(project)["records"]
    assert records and all(r["reviewed_by"] == "qa" for r in records)
    (saved,) = sorted((project.path / ".llmeval" / "runs").glob("0*[0-9].json"))
    kept = json.loads(saved.read_text(encoding="utf-8"))["report"]["records"]
    assert len(kept) == len(records) and all(r["reviewed_by"] == "qa" for r in kept)


def test_make_cache_hook_replaces_the_store(project: pytest.Pytester) -> None:
    project.makeconftest(
        CONFTEST + "\nclass Mem:\n"
        "    data = {}\n"
        "    def get(self, key): return self.data.get(key)\n"
        "    def put(self, key, scorer, value): self.data[key] = value\n"
        "    def close(self): pass\n"
        "def pytest_llmeval_make_cache(config, directory, mode):\n"
        "    return Mem()\n"
    )
    # (no run history either: that is saved under the cache directory too)
    result = project.runpytest("--llm-eval", "--llm-eval-no-history")
    result.assert_outcomes(passed=3, failed=1)
    assert not (project.path / ".llmeval").exists()


def test_options_have_ini_twins(project: pytest.Pytester) -> None:
    result = project.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "*--llm-eval-cache=*",
            "*--llm-eval-report=*",
            "*--llm-eval-budget=*",
            "*llm_eval_cache (string)*",
            "*llm_eval_judge_model (string)*",
        ]
    )


def test_bad_option_values_are_usage_errors(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nllm_eval_cache = sometimes\n")
    result = project.runpytest()
    result.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-cache / ini llm_eval_cache: 'sometimes' is not one of use, replay, "
            "refresh, off (given by ini llm_eval_cache)"
        ]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_editing_a_custom_scorer_reruns_it_instead_of_replaying(pytester: pytest.Pytester) -> None:
    """The cache key holds the custom scorer's code: an edited scorer is not served the result
    cached for its old code; an unchanged one is."""
    body = """
        import pytest_llmeval
        from pytest_llmeval import assert_score

        @pytest_llmeval.scorer(required=("output",))
        def short_answer(output, max_words=5):
            return float(len(output.split()) <= {limit})

        def test_short():
            assert_score("short_answer", output="one two three", min=1)
        """
    pytester.makepyfile(test_custom=body.replace("{limit}", "max_words"))
    pytester.runpytest().assert_outcomes(passed=1)
    again = pytester.runpytest()
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["1 score, 1 from cache*"])
    pytester.makepyfile(test_custom=body.replace("{limit}", "2"))  # the user tightens it
    edited = pytester.runpytest()
    edited.assert_outcomes(failed=1)
    edited.stdout.fnmatch_lines(["1 score, 0 from cache*"])
