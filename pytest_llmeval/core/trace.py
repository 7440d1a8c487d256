"""The trace of what an agent did during one test: model calls, tool calls, agent and handoff
steps, and the span tree they came from, with a query API.

A :class:`Trace` is filled by the capture (``plugin/trace_capture.py``) with :class:`Span`
summaries made by :func:`pytest_llmeval.core.trace_conventions.summarise` from finished spans;
the spans themselves are not kept. Everything here is plain data: the standard library only, so
scorers and reports can read a trace without OpenTelemetry installed.

Bounds: a trace keeps at most ``max_spans`` spans (the rest are counted in
:attr:`Trace.dropped`); each span keeps bounded attributes and messages (see
:class:`TraceLimits`); what was cut or could not be read is named in the span's ``flags``.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, final

from pytest_llmeval.core.errors import LLMEvalError

__all__ = [
    "SPAN_KINDS",
    "AgentStep",
    "EmptyTraceError",
    "ModelCall",
    "Span",
    "SpanKind",
    "ToolCall",
    "Trace",
    "TraceLimits",
]

SpanKind = Literal[
    "model", "tool", "agent", "handoff", "chain", "embedding", "retriever", "guardrail", "span"
]
#: every kind a span can have; ``span`` is a span of no known convention (kept, never dropped)
SPAN_KINDS: tuple[str, ...] = (
    "model",
    "tool",
    "agent",
    "handoff",
    "chain",
    "embedding",
    "retriever",
    "guardrail",
    "span",
)

_EMPTY: Mapping[str, Any] = {}


@final
@dataclass(frozen=True, slots=True)
class TraceLimits:
    """How much of each span a trace keeps.

    ``max_chars``: a string (attribute, message content, tool arguments or result) is cut to this
    many characters (and marked: ``…[cut: N more chars]``); ``max_items``: a list (messages,
    attribute values) to this many items (a cut list or mapping of values marked likewise);
    ``max_attributes``: attributes kept per span (in the span's order); ``max_spans``: spans kept
    per trace; ``max_json_chars``: a JSON string longer than this is not parsed (kept cut)."""

    max_chars: int = 4_000
    max_items: int = 100
    max_attributes: int = 64
    max_spans: int = 10_000
    max_json_chars: int = 200_000

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_items", "max_attributes", "max_spans", "max_json_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TraceLimits.{name} must be a whole number >= 1, got {value!r}")


@final
@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call of a model. ``input_messages`` / ``output_messages`` are OpenAI-style message
    dicts (``role``, ``content``, and ``tool_calls`` ``[{"id", "name", "arguments"}]`` or
    ``tool_call_id`` where they apply), empty when the instrumentation recorded no content.
    Token counts are None when not reported; ``duration_s`` is the span's latency in seconds."""

    span_id: str
    name: str
    model: str | None
    response_model: str | None = None
    provider: str | None = None
    input_messages: tuple[Mapping[str, Any], ...] = ()
    output_messages: tuple[Mapping[str, Any], ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: tuple[str, ...] = ()
    duration_s: float = 0.0
    error: str | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (0 for a count not reported)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    @property
    def requested_tools(self) -> tuple[str, ...]:
        """The names of the tools the model asked for in its reply, in order."""
        return tuple(
            str(call.get("name"))
            for message in self.output_messages
            for call in message.get("tool_calls", ())
        )


@final
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One run of a tool. ``arguments`` is the parsed JSON when the recorded arguments were JSON
    (``arguments_raw`` the text as recorded, cut to the limit), else the text itself with the
    flag ``arguments-not-json`` on its span; ``result`` likewise (a JSON result parsed, other
    text kept as text). ``duration_s`` in seconds."""

    span_id: str
    name: str
    arguments: Any = None
    arguments_raw: str | None = None
    result: Any = None
    call_id: str | None = None
    duration_s: float = 0.0
    error: str | None = None


@final
@dataclass(frozen=True, slots=True)
class AgentStep:
    """An agent run (``kind`` "agent", ``name`` the agent's) or a handoff from one agent to
    another (``kind`` "handoff", ``from_agent`` and ``to_agent``)."""

    span_id: str
    name: str
    kind: Literal["agent", "handoff"]
    from_agent: str | None = None
    to_agent: str | None = None
    duration_s: float = 0.0
    error: str | None = None


Detail = ModelCall | ToolCall | AgentStep

#: how to turn on the instrumentation of the frameworks whose spans the trace reads
INSTRUMENTATION_HINT = (
    "pydantic-ai: agent.instrument = True (or Agent.instrument_all()); plain openai: "
    "OpenAIInstrumentor().instrument() from opentelemetry-instrumentation-genai-openai; "
    "LangChain / LangGraph: LangChainInstrumentor().instrument() from "
    "openinference-instrumentation-langchain; the OpenAI Agents SDK: import agents before the "
    "test and leave its tracing on"
)


class EmptyTraceError(LLMEvalError, ValueError):
    """A trace asked for its spans has none: the message says whether spans were started in the
    process but claimed by no test (attribution) or none at all (instrumentation missing)."""


@final
@dataclass(frozen=True, slots=True)
class Span:
    """The summary of one finished span: what the trace keeps of it. ``source`` names the
    convention it was read by (``gen_ai``, ``openinference``, ``openai_agents``, ``traceloop``,
    or ``unknown`` for a generic span); ``flags`` name what was cut or could not be read
    (``truncated:<key>``, ``arguments-not-json``, ...)."""

    span_id: str
    parent_id: str | None
    trace_id: str
    name: str
    kind: SpanKind
    source: str
    start_ns: int
    end_ns: int
    error: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    flags: tuple[str, ...] = ()
    detail: Detail | None = None

    @property
    def duration_s(self) -> float:
        """The span's wall time in seconds (0 for a span whose end precedes its start)."""
        return max(0, self.end_ns - self.start_ns) / 1e9


@final
class Trace:
    """What the code under test did, as captured spans summarised (see the module docstring).

    Filled while the test runs (the capture calls :meth:`add` from whatever thread a span
    ends in); every query reads a consistent snapshot. Spans are ordered by start time.
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_running",
        "_spans",
        "dropped",
        "limits",
        "lost",
        "open_limit",
        "unclaimed",
        "unfinished",
    )

    def __init__(self, limits: TraceLimits | None = None) -> None:
        self.limits = limits if limits is not None else TraceLimits()
        self._spans: list[Span] = []
        self._lock = threading.Lock()
        #: spans not kept: because the trace held ``limits.max_spans`` already, or lost (below)
        self.dropped = 0
        #: of ``dropped``, the spans the capture stopped following because more than
        #: ``open_limit`` spans were open at once in the process (see :meth:`lose`)
        self.lost = 0
        #: the capture's limit of spans open at once when a span was lost (0: none lost)
        self.open_limit = 0
        #: spans of this test still open when its capture ended
        self.unfinished = 0
        #: spans started in the process while this trace was capturing that no test claimed
        self.unclaimed = 0
        self._running: dict[str, str] = {}  # model / tool calls started, not ended: key -> what

    # -- filling ----------------------------------------------------------------------------

    def add(self, span: Span, ended: str | None = None) -> None:
        """Keep one span summary (the capture's call; thread-safe); ``ended``: the key of the
        running call it ends (see :meth:`call_started`), no longer running once kept."""
        with self._lock:
            if ended is not None:
                self._running.pop(ended, None)
            if len(self._spans) >= self.limits.max_spans:
                self.dropped += 1
                return
            self._spans.append(span)

    def call_started(self, key: str, what: str) -> None:
        """A model or tool call of this trace started (``what``: e.g. ``tool get_weather``);
        until :meth:`call_ended` the trace is still being written (the capture's call)."""
        with self._lock:
            self._running[key] = what

    def call_ended(self, key: str) -> None:
        with self._lock:
            self._running.pop(key, None)

    def running_calls(self) -> tuple[str, ...]:
        """The model and tool calls that started and have not ended: while there are any, the
        calls this trace holds are not yet all the agent's."""
        with self._lock:
            return tuple(self._running.values())

    def lose(self, open_limit: int) -> None:
        """Count one span of this trace that will never be kept: more than ``open_limit`` spans
        were open at once in the process and the capture stopped following this one, the
        oldest. The trace is then incomplete, as with one past ``limits.max_spans``
        (thread-safe)."""
        with self._lock:
            self.dropped += 1
            self.lost += 1
            self.open_limit = open_limit

    def require_spans(self) -> Trace:
        """This trace, if it has spans; else :class:`EmptyTraceError` saying why there may be
        none: spans started elsewhere that no test claimed, or no span at all (instrumentation
        missing). For a test that must see its agent's spans::

            llm_eval_trace.require_spans()
        """
        if len(self):
            return self
        if self.unclaimed:
            raise EmptyTraceError(
                f"llm_eval_trace: no span was captured for this test, though "
                f"{self.unclaimed} span(s) were started in this process meanwhile that no test "
                "claimed: they were started where the test's context does not reach (a thread "
                "or process of the agent's own) and under no captured span. Start the agent's "
                "work from the test (threads: contextvars.copy_context().run), or under a span "
                "started in the test"
            )
        raise EmptyTraceError(
            "llm_eval_trace: no span was captured for this test, and none was started in this "
            "process while it ran: is the code under test instrumented? " + INSTRUMENTATION_HINT
        )

    # -- the tree ---------------------------------------------------------------------------

    @property
    def spans(self) -> tuple[Span, ...]:
        """Every span kept, by start time."""
        with self._lock:
            spans = list(self._spans)
        spans.sort(key=lambda s: (s.start_ns, s.end_ns))
        return tuple(spans)

    def __len__(self) -> int:
        with self._lock:
            return len(self._spans)

    def __iter__(self) -> Iterator[Span]:
        return iter(self.spans)

    @property
    def roots(self) -> tuple[Span, ...]:
        """The spans whose parent is not in this trace (the top of each tree)."""
        spans = self.spans
        ids = {s.span_id for s in spans}
        return tuple(s for s in spans if s.parent_id is None or s.parent_id not in ids)

    def children(self, span: Span) -> tuple[Span, ...]:
        """The spans directly below ``span``, by start time."""
        return tuple(s for s in self.spans if s.parent_id == span.span_id)

    def parent(self, span: Span) -> Span | None:
        """The span above ``span`` in this trace, if it was captured."""
        for s in self.spans:
            if s.span_id == span.parent_id:
                return s
        return None

    def ancestors(self, span: Span) -> tuple[Span, ...]:
        """The spans above ``span``, nearest first."""
        by_id = {s.span_id: s for s in self.spans}
        out: list[Span] = []
        seen = {span.span_id}
        current = by_id.get(span.parent_id or "")
        while current is not None and current.span_id not in seen:
            out.append(current)
            seen.add(current.span_id)
            current = by_id.get(current.parent_id or "")
        return tuple(out)

    # -- the trajectory ---------------------------------------------------------------------

    @property
    def model_calls(self) -> tuple[ModelCall, ...]:
        """Every model call, by start time."""
        return tuple(s.detail for s in self.spans if isinstance(s.detail, ModelCall))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool run, by start time. A tool span that recorded no arguments object (an
        instrumentation that keeps only the text of a one-argument tool's input, as
        OpenInference's LangChain one does) gets the arguments the model asked for under the
        same call id, when a captured model call holds them (the latest one started before the
        tool: some servers reuse ids such as ``call_0`` in every reply); ``arguments_raw`` stays
        what the tool span recorded."""
        spans = self.spans
        calls = [s.detail for s in spans if isinstance(s.detail, ToolCall)]
        if not any(c.call_id is not None and not isinstance(c.arguments, Mapping) for c in calls):
            return tuple(calls)
        requested: dict[str, Any] = {}
        out: list[ToolCall] = []
        for s in spans:  # by start time: a tool after the model call that asked for it
            if isinstance(s.detail, ModelCall):
                for message in s.detail.output_messages:
                    for req in message.get("tool_calls", ()):
                        if req.get("id") is not None and isinstance(req.get("arguments"), Mapping):
                            requested[str(req["id"])] = req["arguments"]
            elif isinstance(s.detail, ToolCall):
                c = s.detail
                if c.call_id in requested and not isinstance(c.arguments, Mapping):
                    c = dataclasses.replace(c, arguments=requested[c.call_id])
                out.append(c)
        return tuple(out)

    @property
    def agent_steps(self) -> tuple[AgentStep, ...]:
        """Every agent run and handoff, by start time."""
        return tuple(s.detail for s in self.spans if isinstance(s.detail, AgentStep))

    @property
    def handoffs(self) -> tuple[AgentStep, ...]:
        """The handoffs between agents, by start time."""
        return tuple(step for step in self.agent_steps if step.kind == "handoff")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools run, in order."""
        return tuple(call.name for call in self.tool_calls)

    @property
    def input_tokens(self) -> int:
        """Input tokens over every model call (a call that reported none counts 0)."""
        return sum(call.input_tokens or 0 for call in self.model_calls)

    @property
    def output_tokens(self) -> int:
        """Output tokens over every model call."""
        return sum(call.output_tokens or 0 for call in self.model_calls)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over every model call."""
        return self.input_tokens + self.output_tokens

    @property
    def duration_s(self) -> float:
        """Seconds from the first span's start to the last span's end (0 for no span)."""
        spans = self.spans
        if not spans:
            return 0.0
        return max(0, max(s.end_ns for s in spans) - spans[0].start_ns) / 1e9

    @property
    def model_time_s(self) -> float:
        """The summed latency of the model calls, in seconds."""
        return sum(call.duration_s for call in self.model_calls)

    @property
    def tool_time_s(self) -> float:
        """The summed duration of the tool runs, in seconds."""
        return sum(call.duration_s for call in self.tool_calls)

    @property
    def errors(self) -> tuple[Span, ...]:
        """The spans that ended in an error."""
        return tuple(s for s in self.spans if s.error is not None)

    @property
    def flagged(self) -> tuple[Span, ...]:
        """The spans with something cut or unreadable (see :attr:`Span.flags`)."""
        return tuple(s for s in self.spans if s.flags)

    def count(self, kind: str | None = None) -> int:
        """How many spans (of ``kind``, one of :data:`SPAN_KINDS`, when given)."""
        if kind is None:
            return len(self)
        _check_kind(kind)
        return sum(1 for s in self.spans if s.kind == kind)

    def find(
        self,
        name: str | re.Pattern[str] | None = None,
        *,
        kind: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        where: Callable[[Span], bool] | None = None,
    ) -> tuple[Span, ...]:
        """The spans that match every criterion given, by start time: ``name`` equal (a string)
        or matching (``re.compile(...)``, searched), ``kind`` one of :data:`SPAN_KINDS`,
        ``attributes`` each key present with an equal (kept) value, ``where`` true.

        Raises ValueError for an unknown kind."""
        if kind is not None:
            _check_kind(kind)
        found = []
        for span in self.spans:
            if isinstance(name, str) and span.name != name:
                continue
            if isinstance(name, re.Pattern) and name.search(span.name) is None:
                continue
            if kind is not None and span.kind != kind:
                continue
            if attributes is not None and any(
                key not in span.attributes or span.attributes[key] != expected
                for key, expected in attributes.items()
            ):
                continue
            if where is not None and not where(span):
                continue
            found.append(span)
        return tuple(found)

    def render(self, *, width: int = 120) -> str:
        """The span tree as indented text lines (kind, name, duration, the gist of each call):
        for assertion messages and debugging."""
        spans = self.spans
        ids = {s.span_id for s in spans}
        below: dict[str | None, list[Span]] = {}
        for s in spans:
            below.setdefault(s.parent_id if s.parent_id in ids else None, []).append(s)
        lines: list[str] = []

        def walk(parent: str | None, depth: int, seen: frozenset[str]) -> None:
            for s in below.get(parent, ()):
                if s.span_id in seen:
                    continue
                line = f"{'  ' * depth}{s.kind} {s.name} ({s.duration_s * 1000:.1f} ms)"
                line += _gist(s)
                lines.append(line if len(line) <= width else line[: width - 3] + "...")
                walk(s.span_id, depth + 1, seen | {s.span_id})

        walk(None, 0, frozenset())
        extra = [
            f"{n} {what}"
            for n, what in (
                (self.dropped, "dropped"),
                (self.unfinished, "unfinished"),
            )
            if n
        ]
        if extra:
            lines.append(f"(spans: {', '.join(extra)})")
        return "\n".join(lines) if lines else "(no spans)"

    def __repr__(self) -> str:
        return (
            f"<Trace {len(self)} spans: {len(self.model_calls)} model calls, "
            f"{len(self.tool_calls)} tool calls {list(self.tool_names)!r}, "
            f"{self.total_tokens} tokens>"
        )


def _check_kind(kind: str) -> None:
    if kind not in SPAN_KINDS:
        raise ValueError(f"unknown span kind {kind!r}; one of: {', '.join(SPAN_KINDS)}")


def _gist(span: Span) -> str:
    d = span.detail
    out = ""
    if isinstance(d, ModelCall):
        out = f" model={d.model} tokens={d.input_tokens}/{d.output_tokens}"
        if d.requested_tools:
            out += f" -> {', '.join(d.requested_tools)}"
    elif isinstance(d, ToolCall):
        out = f" {d.name}({d.arguments_raw or ''}) -> {_short(d.result)}"
    elif isinstance(d, AgentStep) and d.kind == "handoff":
        out = f" {d.from_agent} -> {d.to_agent}"
    if span.error is not None:
        out += f" ERROR {span.error}"
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
