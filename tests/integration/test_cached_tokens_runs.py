"""Cached prompt tokens (``usage.prompt_tokens_details.cached_tokens``): counted in the ledger,
priced at the cached-input rate, carried to records, aggregates, the summary and the JSON report."""

from __future__ import annotations

import json

import pytest

from pytest_llmeval.testing import OpenAITestServer, text

# 3000 prompt tokens of which 1000 cached, 3 completion tokens
CACHED_YES = text(
    "Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(3000, 3), cached_tokens=1000
)


TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(3))
def test_judged(i):
    assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)
"""


def _project(p: pytest.Pytester, server: OpenAITestServer, price_line: str) -> None:
    p.makepyfile(test_judged=TESTS)
    p.makeini(
        "[pytest]\n"
        "llm_eval_judge_model = test-judge\n"
        "llm_eval_max_tries = 1\n"
        f"llm_eval_prices =\n    {price_line}\n"
    )
    p._monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    p._monkeypatch.setenv("OPENAI_API_KEY", "sk-plugin-SECRET")


def test_cached_rate_in_summary_and_report(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    # $1000 per M input, $0 output, $100 per M cached input: each call is
    # 2000 * 1000e-6 + 1000 * 100e-6 = $2.10; three calls $6.30
    _project(pytester, judge_server, "test-judge 1000 0 100")
    judge_server.set_default(CACHED_YES)
    out = pytester.path / "r.json"
    result = pytester.runpytest(f"--llm-eval-report={out}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "l3score * 3 * 9009 (3000 cached) * $6.3000 *",
            "3 scores, 0 from cache, 3 judge calls, $6.3000",
        ]
    )
    report = json.loads(out.read_text())
    agg = report["aggregates"]["l3score"]
    assert (agg["prompt_tokens"], agg["cached_prompt_tokens"]) == (9000, 3000)
    assert agg["cost_usd"] == pytest.approx(6.3)
    recs = [r for r in report["records"] if r["scorer"] == "l3score"]
    assert [r["cached_prompt_tokens"] for r in recs] == [1000, 1000, 1000]
    assert all(r["cost_usd"] == pytest.approx(2.1) for r in recs)


def test_no_cached_price_means_input_price(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    # three numbers: the cached tokens cost the full input price, $3.00 a call
    _project(pytester, judge_server, "test-judge 1000 0")
    judge_server.set_default(CACHED_YES)
    result = pytester.runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["3 scores, 0 from cache, 3 judge calls, $9.0000"])


@pytest.mark.parametrize(
    "line", ["test-judge 1 2 3 4", "test-judge 1 2 x", "test-judge 1 2 -0.5", "test-judge 1 nan"]
)
def test_bad_price_line_is_a_usage_error(
    pytester: pytest.Pytester, judge_server: OpenAITestServer, line: str
) -> None:
    _project(pytester, judge_server, line)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini llm_eval_prices*"])
