"""The evaluation event of one score record (issue 21, part 6): its GenAI attributes (a failed
scoring's ``error.type``, the rationale as explanation) and the span it is parented to (an
OpenTelemetry root span; none for an Agents SDK one)."""

from __future__ import annotations

import pytest

from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.trace_summary import TraceSummary
from pytest_llmeval.plugin.otel_events import _span_context, event_attributes


def _record(**over: object) -> ScoreRecord:
    fields: dict[str, object] = dict(
        file="t.py",
        test="test_a",
        case_id="paris",
        scorer="faithfulness",
        index=0,
        score=None,
        min=0.7,
        max=None,
        passed=None,
        cached=True,
        duration_s=0.2,
        sample=2,
    )
    fields.update(over)
    return ScoreRecord(**fields)  # type: ignore[arg-type]


def test_a_failed_scoring_carries_its_error_type_and_no_score() -> None:
    record = _record(error="JudgeError: the judge timed out after 3 tries", rationale="n/a")
    assert event_attributes(record, "t.py::test_a[paris-s2]") == {
        "gen_ai.evaluation.name": "faithfulness",
        "gen_ai.evaluation.explanation": "n/a",
        "error.type": "JudgeError",
        "pytest_llmeval.test": "t.py::test_a[paris-s2]",
        "pytest_llmeval.case_id": "paris",
        "pytest_llmeval.sample": 2,
        "pytest_llmeval.cached": True,
        "pytest_llmeval.min": 0.7,
    }


def test_a_bounded_score_has_its_value_label_and_explanation() -> None:
    record = _record(score=0.5, passed=False, rationale="one claim is unsupported", max=0.9)
    attributes = event_attributes(record, "t.py::test_a")
    assert (
        attributes["gen_ai.evaluation.score.value"],
        attributes["gen_ai.evaluation.score.label"],
        attributes["gen_ai.evaluation.explanation"],
        attributes["pytest_llmeval.max"],
    ) == (0.5, "fail", "one claim is unsupported", 0.9)
    assert "error.type" not in attributes


def test_the_event_is_parented_to_an_opentelemetry_root_span_only() -> None:
    pytest.importorskip("opentelemetry.trace", reason="the otel extra")
    from opentelemetry import trace

    otel = TraceSummary(
        1,
        0,
        0,
        0,
        0,
        0,
        0,
        0.0,
        trace_id="0af7651916cd43dd8448eb211c80319c",
        root_span_id="b7ad6b7169203331",
    )
    context = trace.get_current_span(_span_context(otel)).get_span_context()
    assert (context.trace_id, context.span_id) == (
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
    )
    agents = TraceSummary(1, 0, 0, 0, 0, 0, 0, 0.0, trace_id="trace_123", root_span_id="span_abc")
    assert _span_context(agents) is None
    assert _span_context(None) is None
