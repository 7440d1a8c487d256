"""``--llm-eval-otel-events`` (issue 21, part 6): each score emitted as an OpenTelemetry GenAI
evaluation event on the process's LoggerProvider, so the team's backend shows scores next to
the traces of the agent they judged.

An event is a log record (the OTel Logs API: ``opentelemetry._logs``) named
``gen_ai.evaluation.result`` with the GenAI semantic conventions' attributes:
``gen_ai.evaluation.name`` (the scorer), ``gen_ai.evaluation.score.value`` (the score, when
there is one), ``gen_ai.evaluation.score.label`` (``pass`` / ``fail`` when the assertion had a
bound), ``gen_ai.evaluation.explanation`` (the scorer's rationale) and ``error.type`` (when the
scoring failed), plus ``pytest_llmeval.*`` attributes naming the test, case and sample. When
the test captured a trace (``llm_eval_trace``) with an OpenTelemetry root span, the event is
parented to that span (the conventions: "parented to the GenAI operation span being
evaluated"); otherwise it carries no span.

Emitted in the process that ran the test (an xdist worker: the app's own process), at the
test's teardown, once its records are final. Off by default; nothing of OpenTelemetry is
imported unless the option is on, and then a missing or too old package is a usage error at
start saying what to install.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from typing import Any, final

import pytest

from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.trace_summary import TraceSummary
from pytest_llmeval.core.version import __version__

__all__ = ["EVENT_NAME", "EvaluationEvents", "configure_events"]

#: the event's name in the GenAI semantic conventions
EVENT_NAME = "gen_ai.evaluation.result"
#: what to install for the option
INSTALL_HINT = "pip install 'pytest-llmeval-suite[otel]' (opentelemetry-api and opentelemetry-sdk)"
#: the plugin's name in pytest's plugin manager
PLUGIN_NAME = "llm-eval-otel-events"

_HEX_TRACE = re.compile(r"[0-9a-f]{32}")
_HEX_SPAN = re.compile(r"[0-9a-f]{16}")


@final
class EvaluationEvents:
    """Emits the events of one process (see the module docstring)."""

    def __init__(self) -> None:
        from opentelemetry import _logs

        self._logs = _logs
        #: events emitted by this process, and those the provider refused (warned once)
        self.emitted = 0
        self.failed = 0

    def _logger(self) -> Any:
        # asked each time: the app may set its provider after the session started
        return self._logs.get_logger("pytest_llmeval", __version__)

    def emit(self, records: Iterable[ScoreRecord], nodeid: str) -> None:
        """One event per record, parented to the root span of the records' trace if any."""
        from opentelemetry._logs import LogRecord, SeverityNumber

        logger = self._logger()
        for record in records:
            try:
                logger.emit(
                    LogRecord(
                        event_name=EVENT_NAME,
                        context=_span_context(record.trace),
                        severity_number=SeverityNumber.INFO,
                        severity_text="INFO",
                        attributes=event_attributes(record, nodeid),
                    )
                )
            except Exception as exc:  # the app's pipeline failing must not fail the run
                self.failed += 1
                if self.failed == 1:
                    warnings.warn(
                        f"--llm-eval-otel-events: the LoggerProvider refused the evaluation "
                        f"event of {nodeid} ({type(exc).__name__}: {exc}); later failures are "
                        "not reported one by one",
                        stacklevel=1,
                    )
                continue
            self.emitted += 1


def event_attributes(record: ScoreRecord, nodeid: str) -> dict[str, Any]:
    """The event's attributes for ``record`` (OpenTelemetry attribute values: no None)."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": record.scorer}
    if record.score is not None:
        attributes["gen_ai.evaluation.score.value"] = float(record.score)
    if record.passed is not None:
        attributes["gen_ai.evaluation.score.label"] = "pass" if record.passed else "fail"
    if record.rationale:
        attributes["gen_ai.evaluation.explanation"] = record.rationale
    if record.error is not None:
        attributes["error.type"] = record.error.partition(":")[0].strip() or "error"
    attributes["pytest_llmeval.test"] = nodeid
    if record.case_id is not None:
        attributes["pytest_llmeval.case_id"] = record.case_id
    attributes["pytest_llmeval.sample"] = record.sample
    attributes["pytest_llmeval.cached"] = record.cached
    if record.min is not None:
        attributes["pytest_llmeval.min"] = float(record.min)
    if record.max is not None:
        attributes["pytest_llmeval.max"] = float(record.max)
    return attributes


def _span_context(trace: TraceSummary | None) -> Any:
    """A context whose current span is the trace's root (OpenTelemetry ids only), else None
    (the record then falls back on the context current at emission: none at teardown)."""
    if trace is None or trace.trace_id is None or trace.root_span_id is None:
        return None
    if not (_HEX_TRACE.fullmatch(trace.trace_id) and _HEX_SPAN.fullmatch(trace.root_span_id)):
        return None  # the Agents SDK's own ids: nothing to link in OpenTelemetry
    from opentelemetry import trace as otel_trace

    span = otel_trace.NonRecordingSpan(
        otel_trace.SpanContext(
            int(trace.trace_id, 16),
            int(trace.root_span_id, 16),
            is_remote=False,
            trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
        )
    )
    return otel_trace.set_span_in_context(span)


def configure_events(config: pytest.Config) -> None:
    """At configure, with the option on: the emitter registered, or a usage error saying what
    to install (no OpenTelemetry, or one older than the Logs API's event records)."""
    missing = None
    try:
        from opentelemetry import _logs
    except ImportError as exc:
        missing = exc.name or "opentelemetry"
    if missing is not None:
        raise pytest.UsageError(
            f"--llm-eval-otel-events needs OpenTelemetry ({missing} is not installed): "
            f"{INSTALL_HINT}"
        )
    import inspect

    if "event_name" not in inspect.signature(_logs.LogRecord.__init__).parameters:
        from importlib.metadata import PackageNotFoundError, version

        try:
            have = version("opentelemetry-api")
        except PackageNotFoundError:
            have = "unknown"
        raise pytest.UsageError(
            "--llm-eval-otel-events needs opentelemetry-api >= 1.35 (log records with an event "
            f"name), this is {have}: pip install -U 'opentelemetry-api>=1.35' "
            "'opentelemetry-sdk>=1.35'"
        )
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(EvaluationEvents(), PLUGIN_NAME)
