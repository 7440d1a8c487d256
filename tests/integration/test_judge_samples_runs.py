"""``judge_samples`` in a real run (issue 20): each ask reaches the record, the JSON report's
``judge_stability`` and the terminal's "judge stability" section; the same with xdist; a
labelled case asked K times is one labelled output in the agreement."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_llmeval.testing import OpenAITestServer, text, tool_call

YES = text("Yes", top_logprobs=[("Yes", -0.05), ("No", -3.0)], usage=(100, 1))
NO = text("No", top_logprobs=[("No", -0.05), ("Yes", -3.0)], usage=(100, 1))

# The judge says Yes to "good" and No to "bad"; to "shaky" it says Yes except on seed 1 (the
# second ask). People pass the good and the shaky answers and fail the bad ones.
ROWS = [
    {"id": "g1", "output": "good one", "human": True},
    {"id": "g2", "output": "good two", "human": True},
    {"id": "s1", "output": "shaky one", "human": True},
    {"id": "b1", "output": "bad one", "human": False},
    {"id": "b2", "output": "bad two", "human": False},
]

TEST = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_answer(case):
    assert_score("l3score", input="question?", expected="fine", output=case.output,
                 min=0.5, label=case.human, judge_samples=3, judge_reduce="majority")
"""


def _reply(body: dict[str, Any]) -> Any:
    said = json.dumps(body["messages"])
    if "shaky" in said:
        return NO if body.get("seed") == 1 else YES
    return YES if "good" in said else NO


@pytest.fixture
def sampled(pytester: pytest.Pytester, judge_server: OpenAITestServer) -> pytest.Pytester:
    judge_server.set_default(_reply)
    pytester.makepyfile(test_sampled=TEST)
    (pytester.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    pytester.makeini(
        "[pytest]\nllm_eval = true\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-samples-SECRET")
    return pytester


def _run(p: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = p.path / f"r{len(args)}.json"
    result = p.runpytest(f"--llm-eval-report={out}", *args)
    return result, json.loads(out.read_text())


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["n0", "n2"])
def test_each_ask_is_recorded_and_the_unstable_case_reported(
    sampled: pytest.Pytester, judge_server: OpenAITestServer, workers: tuple[str, ...]
) -> None:
    result, report = _run(sampled, "--llm-eval-cache=off", *workers)
    result.assert_outcomes(passed=3, failed=2)  # the bad answers fail their bound
    assert len(judge_server.requests_to("chat")) == 15
    shaky = next(r for r in report["records"] if r["case_id"] == "s1")
    asks = shaky["metadata"]["judge_samples"]
    assert [a["seed"] for a in asks] == [0, 1, 2]
    assert [a["value"] >= 0.5 for a in asks] == [True, False, True]
    assert shaky["passed"] is True and shaky["judge_calls"] == 3
    stab = report["judge_stability"]["l3score"]
    assert (stab["records"], stab["asks"]) == (5, 15)
    (unstable,) = stab["unstable"]
    assert (unstable["case_id"], unstable["passes"], unstable["fails"]) == ("s1", 2, 1)
    assert stab["flip_rate"] == pytest.approx((1 / 3) / 5)
    result.stdout.fnmatch_lines(
        [
            "*judge stability*",
            "l3score: 5 sampled scoring(s), 15 asks, mean flip rate 0.067; 1 unstable",
            "    test_sampled.py::test_answer[[]s1[]] (cases.jsonl:3): 2 of 3 asks pass "
            "(scores 0.95, 0.0497, 0.95)",
        ]
    )
    # five labelled outputs, each asked three times: five labelled records in the agreement
    agree = report["agreement"]["l3score"]
    assert agree["n"] == 5 and agree["kappa"] == 1.0
    # the instrument says how the judge was asked
    (digest,) = {r["instrument"] for r in report["records"]}
    ident = report["instruments"][digest]["identity"]
    assert (ident["judge_samples"], ident["judge_reduce"]) == (3, "majority")
    assert "sk-samples-SECRET" not in json.dumps(report)


def test_each_ask_is_cached_apart(sampled: pytest.Pytester, judge_server: OpenAITestServer) -> None:
    _run(sampled)
    assert len(judge_server.requests_to("chat")) == 15
    sampled.makepyfile(test_sampled=TEST.replace("judge_samples=3", "judge_samples=4"))
    result, report = _run(sampled)
    result.assert_outcomes(passed=3, failed=2)
    assert len(judge_server.requests_to("chat")) == 20  # only the fourth ask of each case
    shaky = next(r for r in report["records"] if r["case_id"] == "s1")
    assert [a["cached"] for a in shaky["metadata"]["judge_samples"]] == [True, True, True, False]
    assert shaky["judge_calls"] == 1 and shaky["passed"] is True  # 3 of 4 asks pass


BATTLE = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("answer", ["modest answer", "first-loving answer"])
def test_battle(answer):
    assert_score("battle", instructions="Answer kindly", output=answer, expected="reference",
                 swap=True)
"""


def _battle(body: dict[str, Any]) -> Any:
    said = json.dumps(body["messages"])
    yes = tool_call({"reasons": "r", "choice": "Yes"})
    no = tool_call({"reasons": "r", "choice": "No"})
    if "first-loving" in said:
        return yes  # whichever text is first wins: position-inconsistent
    return yes if said.index("modest") < said.index("reference") else no


def test_swapped_asks_reach_the_report(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(_battle)
    pytester.makepyfile(test_battle=BATTLE)
    pytester.makeini("[pytest]\nllm_eval = true\nllm_eval_judge_model = test-judge\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-swap-SECRET")
    result, report = _run(pytester, "--llm-eval-cache=off")
    result.assert_outcomes(passed=2)
    assert len(judge_server.requests_to("chat")) == 4
    stab = report["judge_stability"]["battle"]
    assert stab["swapped"] == 2
    (bad,) = stab["position_inconsistent"]
    assert bad["case_id"] == "first-loving answer" and bad["swap"]["consistent"] is False
    scores = {r["case_id"]: r["score"] for r in report["records"]}
    assert scores == {"modest answer": 1.0, "first-loving answer": 0.5}
    result.stdout.fnmatch_lines(
        [
            "*judge stability*",
            "battle: 2 asked in both orders, 1 position-inconsistent",
            "    test_battle.py::test_battle[[]first-loving answer[]]: 1 in the first order, "
            "1 with output and expected exchanged",
        ]
    )


PANEL = """
import os
import pytest
from pytest_llmeval import Judge, assert_score

JUDGES = [
    Judge("judge-a", base_url=os.environ["JUDGE_A"], api_key="sk-panel-a-SECRET"),
    Judge("judge-b", base_url=os.environ["JUDGE_B"], api_key="sk-panel-b-SECRET", name="b"),
    Judge("judge-c", base_url=os.environ["JUDGE_B"], api_key="sk-panel-c-SECRET", name="c"),
]

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_panel(case):
    assert_score("l3score", input="question?", expected="fine", output=case.output,
                 min=0.5, judges=JUDGES, panel_reduce="majority")
"""


def test_a_panel_in_a_run_reports_each_judge_and_their_agreement(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Judge a says Yes to good answers; judges b and c (another endpoint) also say Yes to
    "shaky" ones: the majority passes s1, and the panel splits on it."""
    with OpenAITestServer() as other:
        judge_server.set_default(lambda body: YES if "good" in json.dumps(body) else NO)
        other.set_default(
            lambda body: YES if "good" in json.dumps(body) or "shaky" in json.dumps(body) else NO
        )
        pytester.makepyfile(test_judges_panel=PANEL)
        (pytester.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
        pytester.makeini("[pytest]\nllm_eval = true\nllm_eval_max_tries = 1\n")
        pytester._monkeypatch.setenv("JUDGE_A", judge_server.base_url)
        pytester._monkeypatch.setenv("JUDGE_B", other.base_url)
        for workers in ((), ("-n", "2")):
            result, report = _run(pytester, "--llm-eval-cache=off", *workers)
            result.assert_outcomes(passed=3, failed=2)
            panel = report["judge_panel"]["l3score"]
            assert panel["records"] == 5
            assert [j["judge"] for j in panel["judges"]][1:] == ["b", "c"]
            assert [j["answers"] for j in panel["judges"]] == [5, 5, 5]
            (split,) = panel["disagreements"]
            assert split["case_id"] == "s1"
            # Fleiss over the five records: four unanimous, one split 1-2
            assert panel["fleiss_kappa"] == pytest.approx(0.732142857142857)  # statsmodels
            result.stdout.fnmatch_lines(
                [
                    "*judge panel*",
                    "l3score: 5 case(s), 3 judges; Fleiss' kappa 0.732 over 5, "
                    "Krippendorff's alpha *",
                    "  b: 5 answers, pass rate 0.600, 505 tokens",
                    "  split verdicts (1):",
                ]
            )
            text = json.dumps(report) + result.stdout.str()
            assert "SECRET" not in text
        assert {r.headers["authorization"] for r in other.requests_to("chat")} == {
            "Bearer sk-panel-b-SECRET",
            "Bearer sk-panel-c-SECRET",
        }
