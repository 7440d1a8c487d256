"""Dataset parametrization through real pytest runs (pytester): plain `pytest` never reads eval
data, the marker's keywords are checked, `.json` rows and missing case fields end to end."""

from __future__ import annotations

import pytest

PLAIN = """
def test_unit():
    assert 1 + 1 == 2
"""


def _eval_test(
    marker_args: str, body: str = "pass", decorators: str = "@pytest.mark.llm_eval"
) -> str:
    return f"""
import pytest
from pytest_llmeval import assert_score

{decorators}
@pytest.mark.llm_eval_dataset({marker_args})
def test_x(case):
    {body}
"""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "*data/cases.jsonl: dataset file not found*"),
        ('{"id": 1}\n{"id": \n', "*data/cases.jsonl:2: malformed JSON line*"),
        ('{"id": 1}\n{"id": 1}\n', "*data/cases.jsonl:2: duplicate case id '1'*"),
    ],
    ids=["missing", "malformed", "duplicate-ids"],
)
def test_plain_pytest_skips_llm_eval_tests_without_reading_their_dataset(
    pytester: pytest.Pytester, content: str | None, message: str
) -> None:
    (pytester.path / "data").mkdir()
    if content is not None:
        (pytester.path / "data" / "cases.jsonl").write_text(content)
    pytester.makepyfile(test_eval=_eval_test('"data/cases.jsonl"'), test_unit=PLAIN)

    plain = pytester.runpytest("-rs")
    plain.assert_outcomes(passed=1, skipped=1)  # one skipped item for the test, with the reason
    plain.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_eval.py:*run only with `pytest --llm-eval`*"])
    assert "cases.jsonl" not in plain.stdout.str()
    assert plain.ret == pytest.ExitCode.OK

    collected = pytester.runpytest("--collect-only", "-q")
    collected.stdout.fnmatch_lines(["test_eval.py::test_x", "test_unit.py::test_unit"])

    evaluated = pytester.runpytest("--llm-eval")  # with --llm-eval: a collection error, as before
    evaluated.assert_outcomes(errors=1)
    evaluated.stdout.fnmatch_lines([message])


@pytest.mark.parametrize(
    "layout",
    ["module", "class"],
)
def test_llm_eval_marker_on_a_module_or_class_also_skips_unread(
    pytester: pytest.Pytester, layout: str
) -> None:
    if layout == "module":
        source = _eval_test('"nope.jsonl"', decorators="pytestmark = pytest.mark.llm_eval")
    else:
        source = """
import pytest

@pytest.mark.llm_eval
class TestEval:
    @pytest.mark.llm_eval_dataset("nope.jsonl")
    def test_x(self, case):
        pass
"""
    pytester.makepyfile(test_eval=source)
    pytester.runpytest().assert_outcomes(skipped=1)
    pytester.runpytest("--llm-eval").assert_outcomes(errors=1)


def test_dataset_of_a_test_not_marked_llm_eval_is_still_read(pytester: pytest.Pytester) -> None:
    # only llm_eval tests are skipped; a dataset test without that marker runs in plain pytest
    pytester.makepyfile(test_eval=_eval_test('"nope.jsonl"', decorators=""))
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*nope.jsonl: dataset file not found*"])


def test_skip_holds_without_the_skipping_plugin(pytester: pytest.Pytester) -> None:
    # the unparametrized item's `case` fixture skips rather than asking for a dataset marker
    pytester.makepyfile(test_eval=_eval_test('"nope.jsonl"'))
    result = pytester.runpytest("-p", "no:skipping", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*run only with `pytest --llm-eval`*"])


def test_dataset_cases_do_not_resolve_request_for_the_placeholder(
    pytester: pytest.Pytester,
) -> None:
    # The placeholder `case` fixture takes no `request`: pytest keeps a shadowed fixture's
    # `request` in the closure of every case parametrized over it, and resolves it per case
    # (a fixture definition built and its signature read, each time).
    (pytester.path / "cases.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n')
    pytester.makeconftest(
        """
def pytest_collection_finish(session):
    for item in session.items:
        print("NAMES", item.name, sorted(item.fixturenames))
"""
    )
    pytester.makepyfile(test_eval=_eval_test('"cases.jsonl"'))
    result = pytester.runpytest("--llm-eval", "-s", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    names = [line for line in result.outlines if line.startswith("NAMES")]
    assert len(names) == 2
    for line in names:
        assert "'case'" in line and "'request'" not in line, line


@pytest.mark.parametrize("flag", [(), ("--llm-eval",)], ids=["plain", "llm-eval"])
def test_unknown_marker_keyword_is_a_collection_error(
    pytester: pytest.Pytester, flag: tuple[str, ...]
) -> None:
    (pytester.path / "cases.jsonl").write_text('{"id": "a"}\n')
    pytester.makepyfile(test_eval=_eval_test('"cases.jsonl", repeats=3'))
    result = pytester.runpytest(*flag)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_eval.py::test_x: @pytest.mark.llm_eval_dataset got unknown keyword 'repeats';"
            " it accepts: path, id_field, repeat*"
        ]
    )


def test_known_keywords_and_a_second_path(pytester: pytest.Pytester) -> None:
    (pytester.path / "cases.jsonl").write_text('{"key": "k1"}\n{"key": "k2"}\n')
    pytester.makepyfile(
        test_ok=_eval_test('path="cases.jsonl", id_field="key"'),
        test_two=_eval_test('"cases.jsonl", "other.jsonl"'),
    )
    result = pytester.runpytest("--llm-eval", "-q", "--collect-only")
    result.stdout.fnmatch_lines(
        [
            "test_ok.py::test_x[[]k1[]]",
            "test_ok.py::test_x[[]k2[]]",
            "*test_two.py::test_x: llm_eval_dataset takes one path*",
        ]
    )


JSON_DATASET = """{
  "title": "cases",
  "tags": [{"id": "decoy", "output": "x", "expected": "x"}],
  "\\u0063ases": [
    {"id": "good", "output": "same", "expected": "same"},

    {"id": "bad",
     "output": "one", "expected": "two"}
  ]
}
"""


def test_json_dataset_runs_the_real_cases_and_reports_their_lines(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "cases.json").write_text(JSON_DATASET)
    pytester.makepyfile(
        test_eval=_eval_test(
            '"cases.json"',
            'assert_score("exact_match", output=case.output, expected=case.expected, min=1)',
        )
    )
    result = pytester.runpytest("--llm-eval", "--llm-eval-cache", "off", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_x[[]good[]] PASSED*", "*test_x[[]bad[]] FAILED*"])
    result.stdout.fnmatch_lines(["*case: cases.json:7*"])
    assert "decoy" not in result.stdout.str()


def test_missing_case_field_fails_the_test_naming_case_and_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "cases.jsonl").write_text('{"id": "a", "output": "x"}\n')
    pytester.makepyfile(
        test_eval=_eval_test(
            '"cases.jsonl"',
            'assert_score("exact_match", output=case.output, expected=case.expected, min=1)',
        ),
        test_optional=_eval_test(
            '"cases.jsonl"',
            'assert getattr(case, "expected", None) is None and case.get("expected") is None',
        ),
    )
    result = pytester.runpytest("--llm-eval", "--llm-eval-cache", "off")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*AttributeError: dataset case 'a' (cases.jsonl:1) has no field 'expected'; "
            "its fields are: id, output (read an optional field with case.get('expected'))"
        ]
    )
