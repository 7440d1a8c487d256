"""The plugin with a real judge endpoint (the scripted test server): budget, judge failures as
ERRORs, usage in the summary and report, cache replay without a key, the key never printed."""

from __future__ import annotations

import json
import sqlite3

import pytest
from paths import EXAMPLES

from pytest_llmeval.testing import OpenAITestServer, error, text, tool_call

TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(3))
def test_judged(i):
    assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)
"""

YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(1000, 1))


@pytest.fixture
def judged(pytester: pytest.Pytester, judge_server: OpenAITestServer) -> pytest.Pytester:
    pytester.makepyfile(test_judged=TESTS)
    pytester.makeini(
        "[pytest]\n"
        "llm_eval_judge_model = test-judge\n"
        "llm_eval_max_tries = 1\n"
        # 1000 prompt tokens at $1000 per million: $1.00 a call
        "llm_eval_prices =\n    test-judge 1000 0\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")
    return pytester


def _db_rows(p: pytest.Pytester) -> int:
    db = p.path / ".llmeval" / "results.sqlite3"
    if not db.exists():
        return 0
    return int(sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0])


def test_usage_and_cost_reach_summary_and_report(
    judged: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(YES)
    out = judged.path / "r.json"
    result = judged.runpytest(f"--llm-eval-report={out}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "l3score * 3 * 0.917 * 3 * 0 * 0 * 0 * 3 * 3003 * $3.0000 *",
            "3 scores, 0 from cache, 3 judge calls, $3.0000",
        ]
    )
    report = json.loads(out.read_text())
    agg = report["aggregates"]["l3score"]
    assert (agg["judge_calls"], agg["prompt_tokens"], agg["cost_usd"]) == (3, 3000, 3.0)
    assert report["run"]["judge"]["model"] == "test-judge"
    # the second run is free: every score from the cache, no request reaches the judge
    judge_server.clear()
    result = judged.runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["3 scores, 3 from cache, 0 judge calls"])
    assert judge_server.requests == []
    # and CI without a key replays it
    judged._monkeypatch.delenv("OPENAI_API_KEY")
    judged._monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    judged.runpytest("--llm-eval-cache=replay").assert_outcomes(passed=3)
    text_out = out.read_text() + (judged.path / ".llmeval" / "results.sqlite3").read_text(
        errors="replace"
    )
    assert "SECRET" not in text_out


def test_budget_stops_new_judge_calls_and_says_so(
    judged: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(YES)
    result = judged.runpytest("--llm-eval-budget=1.5")
    result.assert_outcomes(passed=2, errors=1)  # $1 spent, $2 spent (>= 1.5), then stop
    assert len(judge_server.requests) == 2
    result.stdout.fnmatch_lines(
        ["*BudgetExceededError*", "budget spent: 1 scoring(s) not started (--llm-eval-budget)"]
    )


def test_budget_holds_for_the_whole_parallel_run(
    judged: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Two xdist workers share one budget: $2.5 allows three $1 calls, plus at most one that
    the other worker started at the same moment. Separate budgets would allow six."""
    pytest.importorskip("xdist")
    judged.makepyfile(test_judged=TESTS.replace("range(3)", "range(10)"))
    judge_server.set_default(YES)
    run_tmp = judged.path / "run-tmp"  # this run's own temporary directory
    run_tmp.mkdir()
    judged._monkeypatch.setenv("TMPDIR", str(run_tmp))
    result = judged.runpytest_subprocess("-n", "2", "--llm-eval-budget=2.5", "-p", "no:randomly")
    calls = len(judge_server.requests)
    assert 3 <= calls <= 4, result.stdout.str()
    result.assert_outcomes(passed=calls, errors=10 - calls)
    result.stdout.fnmatch_lines(
        [f"budget spent: {10 - calls} scoring(s) not started (--llm-eval-budget)"]
    )
    assert not list(run_tmp.glob("llmeval-spend-*"))  # the controller removed its file


def test_calls_of_a_failed_judge_scoring_are_counted(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """A reply that is invalid twice (one try, one re-ask) is an ERROR, and both paid calls
    reach the record, the summary and the report."""
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_judged():
            assert_score("factuality", input="q", expected="a", output="a", min=0.5)
        """
    )
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
        "llm_eval_prices =\n    test-judge 1000 0\n"
    )
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    judge_server.set_default(tool_call('{"choice": ', name="select_choice", usage=(1000, 5)))
    report = pytester.path / "r.json"
    result = pytester.runpytest("--llm-eval-report", str(report))
    result.assert_outcomes(errors=1)
    assert len(judge_server.requests) == 2
    result.stdout.fnmatch_lines(["*0 from cache, 2 judge calls, $2.0000*"])
    [record] = json.loads(report.read_text())["records"]
    assert record["error"].startswith("JudgeError")
    assert (record["judge_calls"], record["prompt_tokens"], record["completion_tokens"]) == (
        2,
        2000,
        10,
    )
    assert record["cost_usd"] == 2.0


def test_judge_failure_is_an_error_not_cached_and_hides_the_key(
    judged: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.enqueue(error(500, "upstream exploded"))
    judge_server.set_default(YES)
    result = judged.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*JudgeError*test-judge*500*"])
    assert "sk-plugin-SECRET" not in result.stdout.str() + result.stderr.str()
    assert _db_rows(judged) == 2  # the failure was not stored
    judge_server.clear()
    judged.runpytest().assert_outcomes(passed=3)
    assert len(judge_server.requests) == 1  # only the failed case is asked again


def test_parallel_run_merges_judge_usage(
    judged: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("xdist")
    judge_server.set_default(YES)
    result = judged.runpytest_subprocess("-n", "2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["3 scores, 0 from cache, 3 judge calls, $3.0000"])


def test_examples_directory_is_valid(pytester: pytest.Pytester) -> None:
    """The examples collect (their llm_eval tests are skipped without --llm-eval)."""
    root = EXAMPLES
    result = pytester.runpytest(str(root), "-p", "no:cacheprovider")
    # one skipped item per llm_eval test (datasets are not read without --llm-eval)
    result.assert_outcomes(passed=1, skipped=30)


def test_per_call_api_key_is_used_and_never_shown(
    judge_server: OpenAITestServer, judge_ctx: object, pytester: pytest.Pytester
) -> None:
    from pytest_llmeval import score

    judge_server.set_default(YES)
    s = score("l3score", input="q?", expected="a", output="a", api_key="sk-per-call-SECRET")
    assert s.value == pytest.approx(0.91683, abs=1e-5)
    (req,) = judge_server.requests
    auth = {k.lower(): v for k, v in req.headers.items()}["authorization"]
    assert auth == "Bearer sk-per-call-SECRET"
    # a judge error travels up through pytest-llmeval's frames: with --showlocals, still no key
    judge_server.enqueue(error(401, "Incorrect API key provided"))
    pytester.makepyfile(
        f"""
        from pytest_llmeval import assert_score

        def test_x():
            assert_score("l3score", input="q?", expected="a", output="a", min=0.99,
                         api_key="sk-" + "per-call-" + "SECRET", base_url="{judge_server.base_url}",
                         model="test-judge")
        """
    )
    result = pytester.runpytest("--showlocals", "--fulltrace", "--llm-eval-cache=off")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*JudgeError*401*"])
    assert "sk-per-call-SECRET" not in result.stdout.str() + result.stderr.str()


def test_a_local_server_is_reported_by_the_model_that_answered(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """Issue 13.16: the default model name against a non-OpenAI endpoint is not reported as
    gpt-4o-mini with an invented cost: the report and the summary name the model that answered,
    and the cost is unknown."""
    pytester.makepyfile(test_judged=TESTS)
    pytester.makeini("[pytest]\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")
    pytester._monkeypatch.delenv("LLM_EVAL_JUDGE_MODEL", raising=False)
    judge_server.set_default(
        text(
            "Yes",
            top_logprobs=[("Yes", -0.1), ("No", -2.5)],
            usage=(1000, 1),
            model="qwen2.5-coder-1.5b",
        )
    )
    out = pytester.path / "r.json"
    result = pytester.runpytest(f"--llm-eval-report={out}", "-W", "ignore::RuntimeWarning")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "3 scores, 0 from cache, 3 judge calls (3 calls at an unknown cost: see *)",
            "judge calls answered by model: qwen2.5-coder-1.5b",
        ]
    )
    report = json.loads(out.read_text())
    assert report["run"]["judge"]["served_models"] == ["qwen2.5-coder-1.5b"]
    assert report["aggregates"]["l3score"]["cost_usd"] is None
    assert {tuple(r["judge_models"]) for r in report["records"]} == {("qwen2.5-coder-1.5b",)}
