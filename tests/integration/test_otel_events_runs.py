"""``--llm-eval-otel-events`` (issue 21, part 6) through real pytest runs: each score becomes a
``gen_ai.evaluation.result`` event on the project's own LoggerProvider (the SDK's in-memory
exporter), parented to the root span of the test's captured trace; off by default with nothing
of OpenTelemetry imported; without the otel extra, a usage error saying what to install.

Every run is a subprocess: the global providers can be set once per process."""

from __future__ import annotations

import json

import pytest
from case_files import read_report

pytest.importorskip("opentelemetry.sdk._logs", reason="the otel extra (pinned in the dev extra)")

#: the project's own LoggerProvider, exported in memory and written out at the session's end
CONFTEST = """
import json, os
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

EXPORTER = InMemoryLogRecordExporter()
PROVIDER = LoggerProvider()
PROVIDER.add_log_record_processor(SimpleLogRecordProcessor(EXPORTER))
_logs.set_logger_provider(PROVIDER)


def pytest_sessionfinish(session):
    # (not PYTEST_XDIST_WORKER: this run may itself be started by an xdist worker of the
    # outer suite, whose variable it inherits)
    workerinput = getattr(session.config, "workerinput", None)
    worker = workerinput["workerid"] if workerinput else None
    if worker is None and session.config.getoption("numprocesses", None):
        return  # the xdist controller: the tests ran in the workers
    events = []
    for data in EXPORTER.get_finished_logs():
        record = data.log_record
        events.append(
            {
                "event_name": record.event_name,
                "attributes": dict(record.attributes or {}),
                "trace_id": format(record.trace_id or 0, "032x"),
                "span_id": format(record.span_id or 0, "016x"),
                "scope": data.instrumentation_scope.name,
            }
        )
    with open(f"events-{worker or 'main'}.json", "w") as f:
        json.dump(events, f)
"""

TESTS = """
from opentelemetry import trace
from pytest_llmeval import assert_score

tracer = trace.get_tracer("app")


def test_traced(llm_eval_trace):
    with tracer.start_as_current_span(
        "invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        ):
            pass
    assert_score("exact_match", output="sunny", expected="sunny", min=1)
    assert_score("levenshtein", output="sunny", expected="sunni", min=0.9)


def test_untraced():
    assert_score("exact_match", output="rain", expected="sunny")
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_each_score_is_an_evaluation_event_parented_to_the_test_s_trace(
    pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=TESTS)
    result = pytester.runpytest_subprocess(
        "--llm-eval",
        "-p",
        "no:cacheprovider",
        "--llm-eval-cache=off",
        "--llm-eval-otel-events",
        "--llm-eval-report=report.json",
        "-n",
        workers,
    )
    result.assert_outcomes(passed=1, failed=1)
    # emitted in the process that ran the test: each xdist worker's own provider
    files = sorted(p.name for p in pytester.path.glob("events-*.json"))
    assert files == (
        ["events-main.json"] if workers == "0" else ["events-gw0.json", "events-gw1.json"]
    )
    events = [e for name in files for e in json.loads((pytester.path / name).read_text("utf-8"))]
    ours = [e for e in events if e["event_name"] == "gen_ai.evaluation.result"]
    assert len(ours) == 3 == len(events)
    traced = read_report(pytester)["records"][1]["trace"]  # test_traced's (sorted by test)
    assert (traced["tree"][0]["name"], traced["spans"]) == ("invoke_agent planner", 2)
    by_scorer = {
        (e["attributes"]["pytest_llmeval.test"], e["attributes"]["gen_ai.evaluation.name"]): e
        for e in ours
    }
    exact = by_scorer[("test_agent.py::test_traced", "exact_match")]
    assert exact["attributes"] == {
        "gen_ai.evaluation.name": "exact_match",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "pytest_llmeval.test": "test_agent.py::test_traced",
        "pytest_llmeval.sample": 0,
        "pytest_llmeval.cached": False,
        "pytest_llmeval.min": 1.0,
    }
    assert (exact["trace_id"], exact["span_id"]) == (traced["trace_id"], traced["root_span_id"])
    assert exact["scope"] == "pytest_llmeval"
    lev = by_scorer[("test_agent.py::test_traced", "levenshtein")]
    assert lev["attributes"]["gen_ai.evaluation.score.value"] == pytest.approx(0.8)
    assert lev["attributes"]["gen_ai.evaluation.score.label"] == "fail"
    assert lev["span_id"] == traced["root_span_id"]
    untraced = by_scorer[("test_agent.py::test_untraced", "exact_match")]
    assert untraced["attributes"]["gen_ai.evaluation.score.value"] == 0.0
    assert "gen_ai.evaluation.score.label" not in untraced["attributes"]  # no bound, no verdict
    assert (untraced["trace_id"], untraced["span_id"]) == ("0" * 32, "0" * 16)  # no trace


def test_off_by_default_nothing_of_opentelemetry_is_imported(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import json, sys

        def pytest_sessionfinish(session):
            with open("imported.json", "w") as f:
                json.dump(sorted(m for m in sys.modules if m.startswith("opentelemetry")), f)
        """
    )
    pytester.makepyfile(
        test_plain="""
        from pytest_llmeval import assert_score

        def test_plain():
            assert_score("exact_match", output="a", expected="a")
        """
    )
    result = pytester.runpytest_subprocess(
        "--llm-eval", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "--llm-eval-cache=off"
    )
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "imported.json").read_text("utf-8")) == []


def test_without_the_otel_extra_the_option_is_a_usage_error_naming_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import sys
        for name in [m for m in sys.modules if m.split(".")[0] == "opentelemetry"]:
            del sys.modules[name]
        sys.modules["opentelemetry"] = None  # as if not installed
        """
    )
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-eval-otel-events")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-otel-events needs OpenTelemetry (opentelemetry is not installed): "
            "pip install 'pytest-llmeval-suite[[]otel]' (opentelemetry-api and opentelemetry-sdk)"
        ]
    )
