"""The trace summary in the reports (issue 21, part 4), through real pytest runs: each concurrent
case's records carry its own summary (also across xdist workers), the limits cut and mark it,
secrets never reach it, merged shards keep it, the HTML page shows the case's span tree beside its
scores (headless Chromium), and a malformed summary in a report is a clear error for
``report``, ``compare`` and ``merge``.

Runs that capture are subprocesses: the global tracer provider can be set once per process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser import dump_dom, parse_dom
from case_files import read_report, write_cases

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pinned in the dev extra)")

AGENT = """
import asyncio, json
import pytest
from opentelemetry import trace
from pytest_llmeval import assert_score

tracer = trace.get_tracer("app")


async def run_agent(city):
    with tracer.start_as_current_span(
        "invoke_agent planner",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    ):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 20,
                "gen_ai.usage.output_tokens": 5,
            },
        ):
            await asyncio.sleep(0.02)  # the other cases start meanwhile
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": json.dumps({"city": city, "api_key": "k-98765"}),
                "gen_ai.tool.call.result": f"sunny in {city}",
            },
        ):
            await asyncio.sleep(0.01)
    return f"sunny in {city}"


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=4)
async def test_weather(case, llm_eval_trace):
    answer = await run_agent(case.id)
    assert_score("exact_match", output=answer, expected=f"sunny in {case.id}")
    assert_score("levenshtein", output=answer, expected=f"sunny in {case.id}", min=0.5)
"""

RUN = ("--llm-eval", "-p", "no:cacheprovider", "--llm-eval-cache=off")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_each_concurrent_case_s_records_carry_its_own_trace_summary(
    pytester: pytest.Pytester, workers: str
) -> None:
    ids = [f"city{i}" for i in range(6)]
    write_cases(pytester, ids)
    pytester.makepyfile(test_agent=AGENT)
    result = pytester.runpytest_subprocess(*RUN, "-n", workers, "--llm-eval-report=report.json")
    result.assert_outcomes(passed=6)
    records = read_report(pytester)["records"]
    assert len(records) == 12
    for city in ids:
        mine = [r for r in records if r["case_id"] == city]
        assert [r["scorer"] for r in mine] == ["exact_match", "levenshtein"]
        trace = mine[0]["trace"]
        assert mine[1]["trace"] == trace  # one summary per case, on each of its records
        assert {k: trace[k] for k in ("spans", "model_calls", "tool_calls", "errors")} == {
            "spans": 3,
            "model_calls": 1,
            "tool_calls": 1,
            "errors": 0,
        }
        assert (trace["input_tokens"], trace["output_tokens"], trace["tree_cut"]) == (20, 5, 0)
        agent, model, tool = trace["tree"]
        assert (agent["name"], agent["kind"], agent["depth"], agent["parent"]) == (
            "invoke_agent planner",
            "agent",
            0,
            None,
        )
        assert (model["model"], model["input_tokens"], model["output_tokens"]) == ("gpt-4o", 20, 5)
        assert model["duration_s"] >= 0.02 and model["parent"] == 0
        assert (tool["tool"], tool["result"], tool["depth"]) == (
            "get_weather",
            f"sunny in {city}",
            1,
        )
        assert tool["arguments"] == json.dumps({"city": city, "api_key": "<hidden>"})
        assert trace["root_span_id"] == agent["span_id"] and len(trace["trace_id"]) == 32
    assert "k-98765" not in (pytester.path / "report.json").read_text("utf-8")


SYNC_AGENT = """
import json
from opentelemetry import trace
from pytest_llmeval import assert_score

tracer = trace.get_tracer("app")


def test_booking(llm_eval_trace):
    with tracer.start_as_current_span(
        "invoke_agent booker",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booker"},
    ):
        for n in range(3):
            with tracer.start_as_current_span(
                "execute_tool book_room",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "book_room",
                    "gen_ai.tool.call.arguments": json.dumps({"room": n, "guest": "Ada Lovelace"}),
                    "gen_ai.tool.call.result": "booked room " + str(n) + " for Ada Lovelace",
                },
            ):
                pass
    assert_score("exact_match", output="booked", expected="booked", min=1)
    assert_score("levenshtein", output="booked", expected="booker", min=0.9)
"""


def _traced_run(pytester: pytest.Pytester, *options: str) -> dict[str, Any]:
    pytester.makepyfile(test_booking=SYNC_AGENT)
    result = pytester.runpytest_subprocess(
        *RUN, "--llm-eval-report=report.json", "--llm-eval-html=report.html", *options
    )
    result.assert_outcomes(passed=0, failed=1)
    report: dict[str, Any] = read_report(pytester)
    return report


def test_the_limits_cut_the_tree_and_each_text_and_say_so(pytester: pytest.Pytester) -> None:
    report = _traced_run(pytester, "--llm-eval-trace-spans=2", "--llm-eval-trace-chars=12")
    trace = report["records"][0]["trace"]
    assert (trace["spans"], trace["tool_calls"], trace["tree_cut"]) == (4, 3, 2)
    agent, tool = trace["tree"]
    assert (agent["name"], agent["cut"]) == ("invoke_agent", {"name": len(" booker")})
    assert tool["arguments"] == '{"room": 0, '
    assert tool["cut"] == {
        "name": len("execute_tool book_room") - 12,
        "arguments": len('{"room": 0, "guest": "Ada Lovelace"}') - 12,
        "result": len("booked room 0 for Ada Lovelace") - 12,
    }


def test_a_bad_trace_limit_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--llm-eval-trace-chars=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llm-eval-trace-chars / ini llm_eval_trace_chars: must be >= 1, not 0*"]
    )


def test_the_html_page_shows_the_case_s_span_tree_beside_its_scores(
    pytester: pytest.Pytester,
) -> None:
    _traced_run(pytester)
    page = pytester.path / "report.html"
    data = json.loads(
        page.read_text("utf-8").split('id="llmeval-data">', 1)[1].split("</script>", 1)[0]
    )
    assert len(data["traces"]) == 1  # the test's two records share one summary in the page
    assert [r["trace_ix"] for r in data["records"]] == [0, 0]
    dom = parse_dom(dump_dom(page, "open=0"))
    detail = dom.by_id("detail")
    (scores,) = detail.find_all("table", "case-scores")
    rows = [[td.text for td in tr.find_all("td")] for tr in scores.find_all("tr")[1:]]
    assert rows == [["exact_match", "0", "1", "pass"], ["levenshtein", "0", "0.8333", "fail"]]
    assert detail.find_all("p", "trace-sum")[0].text.startswith(
        "4 spans: 0 model calls, 3 tool calls, 0 errors; tokens 0 in + 0 out; "
    )
    (tree,) = detail.find_all("table", "span-tree")
    names = [tr.find_all("td", "span-name")[0].text for tr in tree.find_all("tr")[1:]]
    assert names == ["agent invoke_agent booker"] + ["tool execute_tool book_room"] * 3
    details = [d.text for d in tree.find_all("td", "span-detail")]
    assert details[2] == (
        'book_roomarguments {"room": 1, "guest": "Ada Lovelace"}result booked room 1 for Ada '
        "Lovelace"
    )


# -- a malformed summary read back -------------------------------------------------------------


def _report_with_trace(pytester: pytest.Pytester) -> Path:
    """A real report (an in-process run: nothing traced) given a well-formed summary by hand."""
    from pytest_llmeval.core.trace import Span, Trace
    from pytest_llmeval.core.trace_summary import summarise_trace

    pytester.makepyfile(
        "from pytest_llmeval import assert_score\n\n"
        "def test_a():\n"
        "    assert_score('exact_match', output='x', expected='x')\n"
    )
    pytester.runpytest("--llm-eval-cache=off", "--llm-eval-report=good.json").assert_outcomes(
        passed=1
    )
    trace = Trace()
    trace.add(Span("a", None, "t", "agent", "agent", "gen_ai", 0, 10))
    trace.add(Span("b", "a", "t", "tool", "tool", "gen_ai", 2, 5))
    path = pytester.path / "good.json"
    report = json.loads(path.read_text("utf-8"))
    report["records"][0]["trace"] = summarise_trace(trace).to_json()
    path.write_text(json.dumps(report), "utf-8")
    return path


def _broken(good: Path, change: Any) -> Path:
    report = json.loads(good.read_text("utf-8"))
    change(report["records"][0]["trace"])
    bad = good.with_name("bad.json")
    bad.write_text(json.dumps(report), "utf-8")
    return bad


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (
            lambda t: t["tree"][1].update(parent=1),
            "records[0].trace.tree[1].parent",
            "must be null or the index of an earlier entry, not 1",
        ),
        (
            lambda t: t.update(tree_cut=5),
            "records[0].trace.tree_cut",
            "5 spans cut + 2 in the tree is not the 2 spans counted",
        ),
        (
            lambda t: t["tree"][0].update(kind="robot"),
            "records[0].trace.tree[0].kind",
            "'robot' is not one of",
        ),
    ],
)
def test_a_malformed_trace_summary_is_a_clear_error_for_every_reader(
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    change: Any,
    field: str,
    problem: str,
) -> None:
    from pytest_llmeval.__main__ import main

    good = _report_with_trace(pytester)
    capsys.readouterr()
    assert main(["compare", str(good), str(good)]) == 0  # the well-formed one reads back
    assert main(["report", str(good), "-o", str(pytester.path / "good.html")]) == 0
    bad = _broken(good, change)
    for argv in (
        ["report", str(bad), "-o", str(pytester.path / "bad.html")],
        ["compare", str(good), str(bad)],
        ["merge", str(bad), "-o", str(pytester.path / "merged.json")],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"(field {field})" in err and problem in err, (argv, err)
    assert not (pytester.path / "bad.html").exists()
    assert not (pytester.path / "merged.json").exists()


def test_merged_shards_keep_each_case_s_trace_summary(pytester: pytest.Pytester) -> None:
    from pytest_llmeval.__main__ import main

    ids = [f"city{i}" for i in range(4)]
    write_cases(pytester, ids)
    pytester.makepyfile(test_agent=AGENT)
    for shard in ("1/2", "2/2"):
        out = f"shard{shard[0]}.json"
        result = pytester.runpytest_subprocess(
            *RUN, f"--llm-eval-shard={shard}", f"--llm-eval-report={out}"
        )
        assert result.ret == 0, result.stdout.str()
    assert main(["merge", "shard1.json", "shard2.json", "-o", "merged.json"]) == 0
    records = read_report(pytester, "merged.json")["records"]
    assert sorted({r["case_id"] for r in records}) == ids
    for r in records:
        tool = r["trace"]["tree"][2]
        assert tool["arguments"] == json.dumps({"city": r["case_id"], "api_key": "<hidden>"})
