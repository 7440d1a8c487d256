"""The ``llm_eval_trace`` fixture's capture: spans the code under test emits, routed to the test
(or concurrent case) that made them and summarised into its
:class:`~pytest_llmeval.core.trace.Trace`.

Sources: the process's OpenTelemetry tracer provider (a ``SpanProcessor`` added once per
process), its logger provider (GenAI events sent through the Logs API join the span they were
emitted in) and, when the OpenAI Agents SDK is imported, its own tracing (a ``TracingProcessor``
added with ``agents.add_trace_processor``, again if a test replaced the processors). Neither
package is imported until a test asks for the fixture: importing the plugin stays cheap.

**Which test a span belongs to.** At a span's start the processor reads the plugin's per-case
recorder (``core.records.current_recorder``, set for each test and, by the concurrent runner,
for each case in its own context): a span started where that context reaches (the test's body,
its tasks, ``run_in_executor`` on the case loop) is that test's, if the test captures. A span
started where the context was not propagated (a thread the agent started) falls back to its
parent span's test, then to the test that owns its trace id (unless the span was started in
another test's context, or several tests' spans share that trace id: a session-wide span in the
context, pytest-opentelemetry). Spans no capturing test claims are ignored. The choice is made
at start and kept, so a span that ends after its test ended is counted as *late* (in the
terminal summary, by test), never attached to the test that happens to run next; spans still
open when the capture ends are counted as ``unfinished`` (a warning on the test).

**No provider.** With only the API's default (proxy) provider there is nowhere to add a
processor: under ``--llm-eval`` the fixture installs an SDK ``TracerProvider`` as the global
one (once; tracers handed out earlier by the proxy follow it); without ``--llm-eval`` it fails the
test's setup saying how to turn it on (run with ``--llm-eval``, or set a provider yourself).
A provider that has ``add_span_processor`` (the SDK's, Logfire's) is used as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, final

import pytest

from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.core.trace import EmptyTraceError, Span, Trace, TraceLimits
from pytest_llmeval.core.trace_conventions import (
    RawSpan,
    SpanEvent,
    raw_from_agents_export,
    summarise,
)
from pytest_llmeval.plugin.identity import item_recorder
from pytest_llmeval.plugin.options import _enabled

__all__ = ["SpanRouter", "TraceCaptureWarning", "capture", "router"]

#: what to install for the fixture
INSTALL_HINT = "pip install 'pytest-llmeval-suite[otel]' (opentelemetry-api and opentelemetry-sdk)"
#: trace ids of ended captures remembered, to count their stragglers as late
_CLOSED_TRACES = 4_096
#: spans open at once that the router follows (beyond, the oldest are forgotten, counted)
_MAX_OPEN = 100_000


class TraceCaptureWarning(UserWarning):
    """Spans of a test were still open when its capture ended, or none was captured."""


@final
class _Sink:
    """One capture. Once closed it drops its trace (the router may keep the sink a while, to
    count stragglers, and must not keep what the test captured: memory stays bounded over
    thousands of tests) and keeps only its node id for the late count."""

    __slots__ = ("closed", "nodeid", "owner", "recorder", "trace")

    def __init__(self, recorder: TestRecorder, nodeid: str, trace: Trace) -> None:
        self.recorder: TestRecorder | None = recorder
        self.owner = id(recorder)  # kept when closed: whose stragglers a trace id may name
        self.nodeid = nodeid
        self.trace: Trace | None = trace
        self.closed = False


@final
class SpanRouter:
    """Routes started spans to the capturing test they belong to and ended spans into its trace
    (see the module docstring). Thread-safe; knows nothing of OpenTelemetry: span, parent and
    trace keys are text (``otel:<hex>``, ``agents:<id>``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[int, _Sink] = {}  # id(recorder) -> its capture
        self._open: dict[str, _Sink] = {}  # started, not ended
        self._traces: dict[str, _Sink] = {}  # trace key -> the active capture that owns it
        self._closed_traces: OrderedDict[str, _Sink] = OrderedDict()
        #: trace ids claimed by more than one capture (a session-wide span in the context,
        #: pytest-opentelemetry): a trace id then names no test
        self._shared: OrderedDict[str, None] = OrderedDict()
        self._events: dict[str, list[SpanEvent]] = {}  # log events of open spans
        self._events_dropped: dict[str, int] = {}  # past max_items: flagged on the span
        #: node id -> spans that ended after their test's capture ended
        self.late: dict[str, int] = {}
        #: spans forgotten because more than ``_MAX_OPEN`` were open at once
        self.forgotten = 0

    def open(self, recorder: TestRecorder, nodeid: str, limits: TraceLimits) -> Trace:
        trace = Trace(limits)
        with self._lock:
            if id(recorder) in self._active:
                raise RuntimeError(f"{nodeid}: a trace capture is already open for this test")
            self._active[id(recorder)] = _Sink(recorder, nodeid, trace)
        return trace

    def close(self, trace: Trace) -> int:
        """End the capture of ``trace``; returns its spans still open (now counted there)."""
        with self._lock:
            sink = next((s for s in self._active.values() if s.trace is trace), None)
            if sink is None:
                return 0
            del self._active[id(sink.recorder)]
            sink.closed = True
            sink.trace = sink.recorder = None
            for key in [k for k, s in self._traces.items() if s is sink]:
                del self._traces[key]
                self._closed_traces[key] = sink
                if len(self._closed_traces) > _CLOSED_TRACES:
                    self._closed_traces.popitem(last=False)
            unfinished = sum(1 for s in self._open.values() if s is sink)
        trace.unfinished = unfinished
        return unfinished

    def started(
        self, key: str, parent: str | None, trace_key: str, call: str | None = None
    ) -> None:
        """A span started (called in the thread and context that started it); ``call``: what
        it is when its start already says it is a model or tool call (see :func:`_call_at_start`),
        counted as running in its trace until it ends."""
        recorder = current_recorder.get()
        with self._lock:
            sink = self._active.get(id(recorder)) if recorder is not None else None
            if sink is not None and sink.recorder is not recorder:
                sink = None
            if sink is None and parent is not None:
                sink = self._open.get(parent)
            if sink is None and trace_key not in self._shared:
                sink = self._traces.get(trace_key) or self._closed_traces.get(trace_key)
                if sink is not None and recorder is not None and sink.owner != id(recorder):
                    sink = None  # another test's context: that test's span, not this one's
            if sink is None:
                for active in self._active.values():  # for require_spans' diagnosis
                    if active.trace is not None:
                        active.trace.unclaimed += 1
                return
            if len(self._open) >= _MAX_OPEN:
                oldest = next(iter(self._open))
                lost = self._open.pop(oldest)
                self._events.pop(oldest, None)
                self._events_dropped.pop(oldest, None)
                self.forgotten += 1
                if lost.trace is not None:  # its test's trace will miss it: incomplete
                    lost.trace.call_ended(oldest)
                    lost.trace.lose(_MAX_OPEN)
            self._open[key] = sink
            owner = self._traces.get(trace_key) or self._closed_traces.get(trace_key)
            if owner is not None and owner.owner != sink.owner:
                self._shared[trace_key] = None
                if len(self._shared) > _CLOSED_TRACES:
                    self._shared.popitem(last=False)
            if not sink.closed:
                self._traces.setdefault(trace_key, sink)
                if call is not None and sink.trace is not None:
                    sink.trace.call_started(key, call)

    def event(self, key: str, event: SpanEvent) -> None:
        """An event emitted through the Logs API inside an open span (the older GenAI events:
        ``gen_ai.user.message``, ``gen_ai.choice``, ...): kept with that span until it ends,
        if a capture claimed the span (at most ``max_items`` events a span)."""
        with self._lock:
            sink = self._open.get(key)
            if sink is None or sink.trace is None:
                return
            pending = self._events.setdefault(key, [])
            if len(pending) < sink.trace.limits.max_items:
                pending.append(event)
            else:
                self._events_dropped[key] = self._events_dropped.get(key, 0) + 1

    def ended(self, key: str, raw: Callable[[], RawSpan]) -> None:
        """A span ended: summarised into its test's trace, or counted late."""
        with self._lock:
            sink = self._open.pop(key, None)
            events = self._events.pop(key, None)
            dropped = self._events_dropped.pop(key, 0)
            if sink is None:
                return
            trace = sink.trace
            if sink.closed or trace is None:
                self.late[sink.nodeid] = self.late.get(sink.nodeid, 0) + 1
                return
        try:
            span = raw()
            if events:
                span = dataclasses.replace(span, events=span.events + tuple(events))
            if dropped:
                span = dataclasses.replace(span, flags=(*span.flags, f"events-dropped:{dropped}"))
            summary = summarise(span, trace.limits)
        except Exception as exc:  # kept, flagged: never lost, never raised into the agent
            summary = Span(
                span_id=key,
                parent_id=None,
                trace_id="",
                name=key,
                kind="span",
                source="unknown",
                start_ns=0,
                end_ns=0,
                flags=(f"unreadable:{type(exc).__name__}",),
            )
        trace.add(summary, ended=key)  # kept and no longer running, in one step

    def take_late(self) -> dict[str, int]:
        """The late counts so far, forgotten once taken (for the terminal summary)."""
        with self._lock:
            late, self.late = self.late, {}
        return late


_ROUTER = SpanRouter()
_SETUP_LOCK = threading.Lock()
_otel_processor: Any = None  # our SpanProcessor, made on first use
_otel_providers: dict[int, Callable[[], Any]] = {}  # the providers it was added to (weakly)
_agents_processor: Any = None
_log_processor: Any = None
_log_providers: dict[int, Callable[[], Any]] = {}


def _known(providers: dict[int, Callable[[], Any]], provider: Any) -> bool:
    ref = providers.get(id(provider))
    return ref is not None and ref() is provider


def _remember(providers: dict[int, Callable[[], Any]], provider: Any) -> None:
    """Remember that our processor is on ``provider``, weakly: a project that sets a fresh
    provider for each test must not find every one of them (and what their exporters hold)
    kept alive by us."""
    for key in [k for k, ref in providers.items() if ref() is None]:
        del providers[key]
    try:
        ref: Callable[[], Any] = weakref.ref(provider)
    except TypeError:  # cannot be weakly referenced: kept
        ref = functools.partial(_same, provider)
    providers[id(provider)] = ref


def _same(value: Any) -> Any:
    return value


def router() -> SpanRouter:
    """The process's span router (one, like the tracer provider it serves)."""
    return _ROUTER


# -- OpenTelemetry -------------------------------------------------------------------------------


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _raw_from_otel(span: Any) -> RawSpan:
    """A :class:`RawSpan` from an SDK ``ReadableSpan``."""
    from opentelemetry.trace import StatusCode

    ctx = span.get_span_context()
    parent = span.parent
    error = None
    status = None if span.status is None else span.status.status_code
    attributes = span.attributes or {}
    if status == StatusCode.ERROR:
        error = span.status.description or _exception_message(span) or "error"
    elif status != StatusCode.OK and str(attributes.get("error.type") or ""):
        # The GenAI conventions mark a failed operation with ``error.type``, the status may stay
        # UNSET: still a failure. An explicit OK is the instrumentation's final word (kept); a
        # bare "exception" event with no error.type is a handled exception (not an error).
        error = str(attributes["error.type"])
        message = _exception_message(span)
        if message:
            error += f": {message}"
    return RawSpan(
        name=str(span.name),
        span_id=_hex(ctx.span_id, 16),
        parent_id=None if parent is None else _hex(parent.span_id, 16),
        trace_id=_hex(ctx.trace_id, 32),
        start_ns=int(span.start_time or 0),
        end_ns=int(span.end_time or span.start_time or 0),
        attributes=dict(attributes),
        events=tuple(SpanEvent(e.name, dict(e.attributes or {})) for e in span.events),
        error=error,
        flags=_sdk_dropped(span),
    )


def _exception_message(span: Any) -> str | None:
    """The ``exception.message`` of the span's first "exception" event that has one."""
    for event in span.events:
        if event.name == "exception" and event.attributes:
            message = str(event.attributes.get("exception.message") or "")
            if message:
                return message
    return None


def _sdk_dropped(span: Any) -> tuple[str, ...]:
    """What the SDK's span limits dropped (128 attributes and events a span by default; beyond,
    the *oldest* attributes go: a long flattened conversation loses the span's kind and first
    messages), as flags: the summary of such a span is not the whole span."""
    return tuple(
        f"sdk-dropped-{what}:{n}"
        for what, n in (
            ("attributes", getattr(span, "dropped_attributes", 0)),
            ("events", getattr(span, "dropped_events", 0)),
        )
        if isinstance(n, int) and n > 0
    )


_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "responses"})


def _call_at_start(attributes: Any) -> str | None:
    """What an OpenTelemetry span is, when the attributes it started with say it is a model or
    tool call (GenAI ``gen_ai.operation.name`` / ``gen_ai.tool.name``, OpenInference
    ``openinference.span.kind``, Traceloop ``traceloop.span.kind``), else None."""
    if not attributes:
        return None
    get = attributes.get
    tool = get("gen_ai.tool.name")
    operation = get("gen_ai.operation.name")
    oi_kind = get("openinference.span.kind")
    if operation == "execute_tool" or tool is not None or oi_kind == "TOOL":
        return f"tool {tool}" if isinstance(tool, str) else "a tool call"
    if get("traceloop.span.kind") == "tool":
        name = get("traceloop.entity.name")
        return f"tool {name}" if isinstance(name, str) else "a tool call"
    if operation in _MODEL_OPERATIONS or oi_kind == "LLM" or get("llm.request.type") is not None:
        return "a model call"
    return None


def _with_response(exported: Mapping[str, Any], data: Any) -> Mapping[str, Any]:
    """An Agents SDK ``response`` span's export with what its ``export()`` leaves out: the
    model, the output items and usage from the span data's OpenAI ``Response``, and the input
    items (a Responses API model call's export holds only the response id and usage)."""
    if getattr(data, "type", None) != "response":
        return exported
    span_data = dict(exported.get("span_data") or {})
    response = getattr(data, "response", None)
    if response is not None:
        model = getattr(response, "model", None)
        if isinstance(model, str) and model:
            span_data["model"] = model
        output = getattr(response, "output", None)
        if isinstance(output, (list, tuple)):
            span_data["output"] = [_dumped(item) for item in output]
        if span_data.get("usage") is None and getattr(response, "usage", None) is not None:
            span_data["usage"] = _dumped(response.usage)
    given = getattr(data, "input", None)
    if isinstance(given, str):
        span_data["input"] = given
    elif isinstance(given, (list, tuple)):
        span_data["input"] = [_dumped(item) for item in given]
    return {**exported, "span_data": span_data}


def _dumped(value: Any) -> Any:
    """A pydantic model (the openai package's types) as plain data; anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value


def _agents_call_at_start(data: Any) -> str | None:
    """:func:`_call_at_start` for an Agents SDK span (its span data's ``type``)."""
    kind = getattr(data, "type", None)
    if kind == "function":
        name = getattr(data, "name", None)
        return f"tool {name}" if isinstance(name, str) else "a tool call"
    if kind in ("generation", "response"):
        return "a model call"
    return None


def _make_otel_processor() -> Any:
    from opentelemetry.sdk.trace import SpanProcessor

    class LLMEvalSpanProcessor(SpanProcessor):
        """Routes each span to the capturing test it belongs to (pytest-llmeval)."""

        # The SDK calls processors in the code that starts and ends the span, without a guard:
        # whatever goes wrong here must not reach that code.

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            try:
                ctx = span.get_span_context()
                parent = span.parent
                _ROUTER.started(
                    "otel:" + _hex(ctx.span_id, 16),
                    None if parent is None else "otel:" + _hex(parent.span_id, 16),
                    "otel:" + _hex(ctx.trace_id, 32),
                    _call_at_start(span.attributes),
                )
            except Exception:  # not routed (a bug of ours): never the agent's failure
                pass

        def on_end(self, span: Any) -> None:
            try:
                ctx = span.get_span_context()
                _ROUTER.ended("otel:" + _hex(ctx.span_id, 16), lambda: _raw_from_otel(span))
            except Exception:  # ended() keeps what it cannot read, flagged
                pass

    return LLMEvalSpanProcessor()


def _attach_otel(config: pytest.Config) -> None:
    """Our processor on the global tracer provider (installing an SDK one under --llm-eval)."""
    global _otel_processor
    missing = None
    try:
        from opentelemetry import trace as otel_trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        missing = exc.name or "opentelemetry"
    if missing is not None:  # failed outside the except: no chained ImportError shown
        pytest.fail(
            f"llm_eval_trace needs OpenTelemetry ({missing} is not installed): {INSTALL_HINT}",
            pytrace=False,
        )
    with _SETUP_LOCK:
        provider = otel_trace.get_tracer_provider()
        if not hasattr(provider, "add_span_processor"):
            if not isinstance(provider, otel_trace.ProxyTracerProvider):
                pytest.fail(
                    f"llm_eval_trace: the global tracer provider is a "
                    f"{type(provider).__name__}, which takes no span processor, so no span "
                    "can be captured; set an SDK TracerProvider "
                    "(opentelemetry.sdk.trace.TracerProvider) instead",
                    pytrace=False,
                )
            if not _enabled(config):
                pytest.fail(
                    "llm_eval_trace: no OpenTelemetry SDK tracer provider is set in this "
                    "process, so the code under test records no span. Run pytest with "
                    "--llm-eval (pytest-llmeval then installs one), or set one yourself before "
                    "the test: opentelemetry.trace.set_tracer_provider("
                    "opentelemetry.sdk.trace.TracerProvider())",
                    pytrace=False,
                )
            otel_trace.set_tracer_provider(TracerProvider())
            provider = otel_trace.get_tracer_provider()
            if not hasattr(provider, "add_span_processor"):  # another set it first, a no-op
                pytest.fail(
                    "llm_eval_trace: could not install an SDK tracer provider (the global one "
                    f"is already a {type(provider).__name__})",
                    pytrace=False,
                )
        if _otel_processor is None:
            _otel_processor = _make_otel_processor()
        if not _known(_otel_providers, provider):
            provider.add_span_processor(_otel_processor)
            _remember(_otel_providers, provider)
        _attach_logs(install=_enabled(config))


def _make_log_processor() -> Any:
    from opentelemetry.sdk._logs import LogRecordProcessor

    class LLMEvalLogProcessor(LogRecordProcessor):
        """Hands GenAI events emitted through the Logs API to the span they were emitted in
        (pytest-llmeval)."""

        def on_emit(self, log_record: Any) -> None:
            try:
                self._emit(log_record)
            except Exception:  # an event lost rather than the agent failing
                pass

        def _emit(self, log_record: Any) -> None:
            record = getattr(log_record, "log_record", log_record)
            name = getattr(record, "event_name", None)
            span_id = getattr(record, "span_id", None)
            if not name or not span_id or not str(name).startswith("gen_ai."):
                return
            body = record.body
            attributes = dict(record.attributes or {})
            if isinstance(body, Mapping):
                attributes.update(body)
            elif body is not None:
                attributes["content"] = body
            _ROUTER.event("otel:" + _hex(int(span_id), 16), SpanEvent(str(name), attributes))

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return LLMEvalLogProcessor()


def _attach_logs(install: bool) -> None:
    """Our log processor on the global logger provider, for GenAI events sent through the Logs
    API (the older conventions' ``gen_ai.user.message``, ``gen_ai.choice``): installing an SDK
    ``LoggerProvider`` when ``install`` (under --llm-eval) and none is set. The Logs API is
    still experimental in Python (``opentelemetry._logs``): if it cannot be had, events are
    simply not captured (the spans are)."""
    global _log_processor
    try:
        from opentelemetry import _logs
        from opentelemetry.sdk._logs import LoggerProvider
    except ImportError:
        return
    provider = _logs.get_logger_provider()
    if not hasattr(provider, "add_log_record_processor"):
        # the API's default is its proxy (not exported by opentelemetry._logs): only that one
        # can still be replaced
        if not install or type(provider).__name__ != "ProxyLoggerProvider":
            return
        _logs.set_logger_provider(LoggerProvider())
        provider = _logs.get_logger_provider()
        if not hasattr(provider, "add_log_record_processor"):
            return
    if _log_processor is None:
        _log_processor = _make_log_processor()
    if not _known(_log_providers, provider):
        provider.add_log_record_processor(_log_processor)
        _remember(_log_providers, provider)


# -- the OpenAI Agents SDK -----------------------------------------------------------------------


def _make_agents_processor() -> Any:
    from agents.tracing import TracingProcessor

    class LLMEvalTracingProcessor(TracingProcessor):
        """Routes each Agents SDK span to the capturing test it belongs to (pytest-llmeval)."""

        def on_trace_start(self, trace: Any) -> None:
            pass

        def on_trace_end(self, trace: Any) -> None:
            pass

        def on_span_start(self, span: Any) -> None:
            parent = span.parent_id
            _ROUTER.started(
                "agents:" + str(span.span_id),
                None if parent is None else "agents:" + str(parent),
                "agents:" + str(span.trace_id),
                _agents_call_at_start(span.span_data),
            )

        def on_span_end(self, span: Any) -> None:
            def raw() -> RawSpan:
                exported = span.export() or {}
                return raw_from_agents_export(_with_response(exported, span.span_data))

            _ROUTER.ended("agents:" + str(span.span_id), raw)

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    return LLMEvalTracingProcessor()


def _attach_agents() -> None:
    """Our processor on the Agents SDK's tracing when the SDK is imported; again after a test
    replaced the processors (``set_trace_processors``)."""
    global _agents_processor
    if "agents" not in sys.modules:
        return
    from agents.tracing import add_trace_processor

    with _SETUP_LOCK:
        if _agents_processor is None:
            _agents_processor = _make_agents_processor()
        if _agents_attached() is True:
            return
        add_trace_processor(_agents_processor)


def _agents_attached() -> bool | None:
    """Whether our processor is among the Agents SDK's (None: the SDK not imported, or its
    processor list not readable). The SDK has no public getter: its provider keeps them in
    ``_multi_processor._processors`` (agents/tracing/provider.py); if that moves, we add ours
    at every setup, which is harmless (a span started twice is routed once)."""
    if _agents_processor is None or "agents" not in sys.modules:
        return None
    from agents.tracing import get_trace_provider

    multi = getattr(get_trace_provider(), "_multi_processor", None)
    current = getattr(multi, "_processors", None)
    if not isinstance(current, tuple):
        return None
    return any(p is _agents_processor for p in current)


# -- the fixture's body --------------------------------------------------------------------------


@final
class _LateSpans:
    """Terminal summary of spans that ended after their test (registered on first capture)."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Worker side and the only process: each process reports its own stragglers (an xdist
        worker's summary is not shown; its tests' traces were never polluted either way)."""
        late = _ROUTER.take_late()
        if not late:
            return
        total = sum(late.values())
        terminalreporter.write_sep("-", "llm-eval trace")
        terminalreporter.write_line(
            f"{total} span(s) ended after their test had ended (counted here, not attached "
            "to another test):"
        )
        for nodeid, n in sorted(late.items()):
            terminalreporter.write_line(f"  {nodeid}: {n}")


@contextmanager
def capture(item: pytest.Item, limits: TraceLimits | None = None) -> Iterator[Trace]:
    """The trace of ``item`` (one test or concurrent case) while the block runs."""
    config = item.config
    _attach_otel(config)
    _attach_agents()
    if not config.pluginmanager.has_plugin("llm-eval-trace-late"):
        config.pluginmanager.register(_LateSpans(), "llm-eval-trace-late")
    recorder = item_recorder(item)
    if recorder is None:
        pytest.fail(f"llm_eval_trace: {item.nodeid} has no recorder (is the plugin disabled?)")
    trace = _ROUTER.open(recorder, item.nodeid, limits or TraceLimits())
    agents_before = _agents_attached()
    try:
        yield trace
    finally:
        unfinished = _ROUTER.close(trace)
        if agents_before is True and _agents_attached() is False:
            warnings.warn(
                TraceCaptureWarning(
                    f"llm_eval_trace: the OpenAI Agents SDK's trace processors were replaced "
                    f"during {item.nodeid} (set_trace_processors), so its spans from then on "
                    "are not in the trace; replace them before the test: at import, or in a "
                    "fixture the test requests before llm_eval_trace"
                ),
                stacklevel=1,
            )
        if not len(trace) and not unfinished:
            try:
                trace.require_spans()
            except EmptyTraceError as exc:
                warnings.warn(
                    TraceCaptureWarning(
                        f"llm_eval_trace: no span was captured during {item.nodeid}, where an "
                        "assertion that something did not happen passes on the empty trace "
                        "(llm_eval_trace.require_spans() fails the test instead): "
                        + str(exc).removeprefix("llm_eval_trace: ")
                    ),
                    stacklevel=1,
                )
        if unfinished:
            warnings.warn(
                TraceCaptureWarning(
                    f"llm_eval_trace: {unfinished} span(s) of {item.nodeid} were still open "
                    "when the test ended; they are not in its trace (a background task or "
                    "thread outlived the test?)"
                ),
                stacklevel=1,
            )
