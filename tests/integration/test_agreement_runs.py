"""Judge agreement in a real run (issue 20): labels from a dataset reach the records, the JSON
report's ``agreement`` section and the terminal's "judge agreement" section, the same with
xdist as without."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_llmeval.testing import OpenAITestServer, text

YES = text("Yes", top_logprobs=[("Yes", -0.05), ("No", -3.0)], usage=(100, 1))
NO = text("No", top_logprobs=[("No", -0.05), ("Yes", -3.0)], usage=(100, 1))

# The judge answers Yes exactly when the output says "good". People passed p0-p4 and failed
# f0-f4; the judge is wrong on p4 (people pass a "bad" answer) and on f3, f4 (people fail a
# "good" one). u0-u5 are unlabelled: the judge passes u0-u3.
ROWS = (
    [{"id": f"p{i}", "output": "good" if i < 4 else "bad", "human": True} for i in range(5)]
    + [{"id": f"f{i}", "output": "good" if i >= 3 else "bad", "human": False} for i in range(5)]
    + [{"id": f"u{i}", "output": "good" if i < 4 else "bad", "human": None} for i in range(6)]
)

TEST = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_answer(case):
    assert_score("l3score", input="question?", expected="fine", output=case.output,
                 min=0.5, label=case.human)
"""


def _reply(body: dict[str, Any]) -> Any:
    return YES if "good" in json.dumps(body["messages"]) else NO


@pytest.fixture
def labelled(pytester: pytest.Pytester, judge_server: OpenAITestServer) -> pytest.Pytester:
    judge_server.set_default(_reply)
    pytester.makepyfile(test_labelled=TEST)
    (pytester.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    pytester.makeini(
        "[pytest]\nllm_eval = true\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-agreement-SECRET")
    return pytester


def _run(p: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = p.path / f"r{len(args)}.json"
    result = p.runpytest(f"--llm-eval-report={out}", "--llm-eval-cache=off", *args)
    return result, json.loads(out.read_text())


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["n0", "n2"])
def test_agreement_reaches_the_report_and_the_terminal(
    labelled: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    result, report = _run(labelled, *workers)
    # the judge fails p4, f0-f2 and u4, u5: the labels do not change the tests' outcomes
    result.assert_outcomes(passed=10, failed=6)
    labels = {r["case_id"]: r["label"] for r in report["records"]}
    assert labels["p0"] is True and labels["f0"] is False and labels["u0"] is None
    a = report["agreement"]["l3score"]
    assert (a["labelled"], a["n"], a["uses_judge"]) == (10, 10, True)
    assert a["confusion"]["counts"] == [[4, 1], [2, 3]]
    assert a["accuracy"] == pytest.approx(0.7)
    assert a["true_pass_rate"] == pytest.approx(0.8)
    assert a["true_fail_rate"] == pytest.approx(0.6)
    assert a["kappa"] == pytest.approx(0.4)  # observed 0.7, chance 0.5
    assert [d["case_id"] for d in a["disagreements"]] == ["f3", "f4", "p4"]
    assert a["disagreements"][0]["output"] == "good"
    corrected = a["corrected"]
    assert corrected["raw"] == pytest.approx(4 / 6) and corrected["n"] == 6
    # true-pass 4/5 + true-fail 3/5 = 1.4, but five labels a side cannot rule out a judge no
    # better than chance: no corrected rate (its verdicts do not bound it), and it says so
    assert corrected["estimate"] is None and corrected["interval"] is None
    assert "cannot tell the judge from one no better than chance" in corrected["reason"]
    result.stdout.fnmatch_lines(
        [
            "*= judge agreement =*",
            "l3score (judge): 10 labelled, 10 with both verdicts",
            "  accuracy 0.700 [[]0.397, 0.892[]]  kappa 0.400 [[]-0.206, 0.957[]]",
            "  true-pass rate 0.800 [[]*[]] (4/5)  true-fail rate 0.600 [[]*[]] (3/5)",
            "  corrected pass rate: not defined (the labelled records cannot tell the judge "
            "from one no better than chance (true-pass rate 0.800 of 5, true-fail rate 0.600 "
            "of 5: *), so its verdicts do not bound the true pass rate; label more records)",
            "  disagreements (3):",
            "    test_labelled.py::test_answer[[]f3[]] label fail, judge pass (score *",
        ]
    )
    assert "SECRET" not in result.stdout.str()


def test_the_same_agreement_with_and_without_xdist(labelled: pytest.Pytester) -> None:
    _, one = _run(labelled)
    _, two = _run(labelled, "-n", "2")
    assert one["agreement"] == two["agreement"]


def test_compare_shows_the_same_agreement_and_the_same_judge_gates(
    labelled: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``compare`` (which reads both reports and judges the current run's gates from
    its plan): the same agreement as each run's report, and the same gate verdicts."""
    from pytest_llmeval.analysis.compare import compare_reports
    from pytest_llmeval.cli.compare import main as compare_main

    labelled.makepyfile(test_labelled=GATED)
    _, base = _run(labelled)
    _, cur = _run(labelled, "-n", "2")
    cmp = compare_reports(base, cur)
    (gate,) = cur["gates"]
    (name, b, c) = cmp.judges[0]
    assert name == "l3score" and b is not None and c is not None
    assert (
        c.to_json() == cur["agreement"]["l3score"] and b.to_json() == base["agreement"]["l3score"]
    )
    from pytest_llmeval.analysis.gates import evaluate_gates
    from pytest_llmeval.stores.run_files import run_from_json

    (outcome,) = evaluate_gates(run_from_json(cur, "current"))
    assert outcome.verdict == gate["verdict"] == "fail"
    assert [(x.metric, x.verdict) for x in outcome.result.checks] == [
        (x["metric"], x["verdict"]) for x in gate["result"]["checks"]
    ]
    capsys.readouterr()
    for name_ in ("base.json", "cur.json"):
        (labelled.path / name_).write_text(json.dumps(base if name_ == "base.json" else cur))
    compare_main([str(labelled.path / "base.json"), str(labelled.path / "cur.json")])
    out, _ = capsys.readouterr()
    b_name, c_name = (str(labelled.path / n) for n in ("base.json", "cur.json"))
    assert (
        f"l3score: the judge against your labels: {b_name} kappa 0.400 over 10 -> {c_name} "
        "kappa 0.400 over 10"
    ) in out


def test_shards_merge_to_the_same_agreement(
    labelled: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmeval.cli.merge import main as merge_main

    _, whole = _run(labelled)
    for i in (1, 2):
        labelled.runpytest(
            "--llm-eval-cache=off", f"--llm-eval-shard={i}/2", f"--llm-eval-report=s{i}.json"
        )
    capsys.readouterr()
    status = merge_main(
        [str(labelled.path / n) for n in ("s1.json", "s2.json")]
        + ["-o", str(labelled.path / "m.json")]
    )
    out, _ = capsys.readouterr()
    assert status == 1  # six cases fail, as in the whole run
    merged = json.loads((labelled.path / "m.json").read_text())
    assert merged["agreement"] == whole["agreement"]
    assert "judge agreement" in out and "l3score (judge): 10 labelled" in out


def test_a_run_without_labels_has_no_agreement_section(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain="""
from pytest_llmeval import assert_score

def test_x():
    assert_score("exact_match", output="a", expected="a", min=1)
"""
    )
    out = pytester.path / "r.json"
    result = pytester.runpytest("--llm-eval", f"--llm-eval-report={out}")
    result.assert_outcomes(passed=1)
    assert "agreement" not in json.loads(out.read_text())
    assert "judge agreement" not in result.stdout.str()


GATED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
@pytest.mark.llm_eval_gate("l3score", min_true_pass=0.9, min_true_fail=0.5)
def test_answer(case):
    assert_score("l3score", input="question?", expected="fine", output=case.output,
                 min=0.5, label=case.human)
"""


def test_a_gate_on_the_judge_fails_the_run_and_softens_no_miss(
    labelled: pytest.Pytester,
) -> None:
    labelled.makepyfile(test_labelled=GATED)
    result, report = _run(labelled)
    # a gate on the judge alone decides no case: the six cases the judge failed still fail
    result.assert_outcomes(passed=10, failed=6)
    (gate,) = report["gates"]
    assert gate["verdict"] == "fail"
    checks = {c["metric"]: c for c in gate["result"]["checks"]}
    assert checks["true_pass_rate"]["verdict"] == "fail"  # 4 of 5 = 0.8 < 0.9
    assert checks["true_fail_rate"]["verdict"] == "pass"  # 3 of 5 = 0.6 >= 0.5
    assert "the judge disagrees with your labels" in checks["true_pass_rate"]["reason"]
    result.stdout.fnmatch_lines(
        [
            "FAIL test_labelled.py::test_answer l3score: true-pass rate 0.800 >= 0.9: fail; "
            "true-fail rate 0.600 >= 0.5: pass",
            "    the judge disagrees with your labels: its true-pass rate is 0.800, below 0.9",
            "gates: 1 fail: the run fails",
        ]
    )
    assert report["verdict"]["passed"] is False


CORRECTED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
@pytest.mark.llm_eval_gate("l3score", min_pass_rate={bound}, corrected=True{confidence})
def test_answer(case):
    assert_score("l3score", input="question?", expected="fine", output=case.output,
                 min=0.5, label=case.human)
"""


def test_a_gate_decides_on_the_corrected_pass_rate(labelled: pytest.Pytester) -> None:
    """40 labelled cases (the judge passes 19 of the 20 people passed and fails 18 of the 20
    they failed) and 20 unlabelled ones, 16 of which it passes: corrected,
    (0.8 + 0.9 - 1) / (0.95 + 0.9 - 1) = 0.824, its 95% interval [0.534, 1] clears 0.5 and
    straddles 0.65. With only the ten labels of ROWS the correction is not defined (0.8 + 0.6
    cannot be told from chance): inconclusive, never a pass."""
    rows = (
        [{"id": f"p{i}", "output": "good" if i else "bad", "human": True} for i in range(20)]
        + [{"id": f"f{i}", "output": "good" if i < 2 else "bad", "human": False} for i in range(20)]
        + [{"id": f"u{i}", "output": "good" if i < 16 else "bad", "human": None} for i in range(20)]
    )
    (labelled.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for bound, confidence, verdict in (
        (0.65, "", "pass"),
        (0.5, ", confidence=0.95", "pass"),
        (0.65, ", confidence=0.95", "inconclusive"),
        (0.9, "", "fail"),
    ):
        labelled.makepyfile(test_labelled=CORRECTED.format(bound=bound, confidence=confidence))
        result, report = _run(labelled)
        (gate,) = report["gates"]
        assert gate["spec"]["corrected"] is True
        (check,) = gate["result"]["checks"]
        assert (check["metric"], check["verdict"]) == ("corrected_pass_rate", verdict), bound
        assert abs(check["interval"]["estimate"] - 0.7 / 0.85) < 1e-12
        assert report["verdict"]["passed"] is (verdict == "pass")
    result.stdout.fnmatch_lines(
        ["FAIL test_labelled.py::test_answer l3score: corrected pass rate 0.824 >= 0.9: fail"]
    )
    (labelled.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    labelled.makepyfile(test_labelled=CORRECTED.format(bound=0.65, confidence=""))
    result, report = _run(labelled)
    (gate,) = report["gates"]
    assert gate["verdict"] == "inconclusive"
    assert "cannot tell the judge from one no better than chance" in gate["result"]["reason"]
    assert report["verdict"]["passed"] is False


def test_labels_of_one_kind_beside_unlabelled_cases_end_the_run_with_rates_null(
    pytester: pytest.Pytester,
) -> None:
    # people passed the one labelled case: the true-fail rate (0 of 0) is undefined, and was a
    # NaN that the saved run's strict JSON refused at session end (the run crashed)
    rows = [
        {"id": "a", "output": "x", "expected": "x", "label": True},
        {"id": "b", "output": "x", "expected": "x", "label": None},
    ]
    pytester.makefile(".jsonl", cases="\n".join(json.dumps(r) for r in rows))
    pytester.makepyfile(
        """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_n(case):
    assert_score("exact_match", output=case.output, expected=case.expected, label=case.label,
                 min=1)
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-eval", "--llm-eval-report=r.json")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    corrected = json.loads((pytester.path / "r.json").read_text())["agreement"]["exact_match"][
        "corrected"
    ]
    assert (corrected["true_pass_rate"], corrected["true_fail_rate"]) == (1.0, None)
    assert corrected["estimate"] is None and "have 1 passed, 0 failed" in corrected["reason"]
