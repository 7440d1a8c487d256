"""A captured :class:`~pytest_llmeval.core.trace.Trace` as the scorers read it (issue 21, part 3):
the check that something was captured at all, the tool calls it ran (with whether their
arguments can be compared), and the bounded rendering a judge reads.

**Nothing captured is an error, never an empty trajectory.** A trace with no span, or with spans
of no convention read (no model, tool or agent span), most likely means the agent's
instrumentation is off: scored as "no tool called" it would pass ``expected=[]`` and every
budget. :func:`check_trace` raises a :class:`ScorerInputError` saying so, as it does for a trace
still being written (a model or tool call of the test started and has not ended: scored now, it
would not count), for a trace that dropped spans (over ``TraceLimits.max_spans``: incomplete),
for a trace with a span that could not be read whole (no rule could read it, or the
OpenTelemetry SDK dropped its oldest attributes, those naming its kind and tool: it may have
been a call not counted) and, where tool calls are read, for a trace whose model asked for tools
while no tool run was captured (the tools' instrumentation is missing: the calls cannot be told
from calls never made), or whose model calls could not be read whole while no tool run was
captured (whether tools were asked for cannot be told).

**Arguments that cannot be compared never compare equal.** The capture keeps bounded copies:
a string cut at ``max_chars``, a payload too large or too deep to parse, text that is not
JSON. Two long arguments cut to the same first characters would look equal; so a traced call
whose arguments were cut or unreadable carries a ``problem`` (and the recorded text in
``raw``), and every scorer treats its arguments as not matching. Arguments not recorded at
all (an instrumentation without content capture) are a problem too: "not recorded" is not
"no arguments". Empty text is no arguments (``{}``), as in the message form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from pytest_llmeval.core.errors import ScorerInputError
from pytest_llmeval.core.trace import AgentStep, ModelCall, Span, Trace
from pytest_llmeval.core.trace import ToolCall as ToolRun

__all__ = [
    "INSTRUMENTATION_HINT",
    "RENDER_MAX_CHARS",
    "ToolCall",
    "TracedCall",
    "check_trace",
    "check_trace_inputs",
    "render_trace",
    "trace_calls",
]

#: what to do when a trace holds nothing usable
INSTRUMENTATION_HINT = (
    "Turn the agent's instrumentation on before it runs (pydantic-ai: agent.instrument = "
    "True or Agent.instrument_all(); LangGraph/LangChain: OpenInference's "
    "LangChainInstrumentor().instrument(); plain openai: opentelemetry-instrumentation-genai-"
    "openai; the OpenAI Agents SDK: imported before the test) and request llm_eval_trace before "
    "the agent runs; trace.render() shows what was captured"
)

#: the most characters of a trace's rendering a judge reads (head and tail kept)
RENDER_MAX_CHARS = 24_000
#: the most characters of one line (one step) of the rendering
RENDER_LINE_CHARS = 2_000

# The span flags (core.trace_conventions) that say a tool span's own arguments were cut or
# could not be read.
_ARGUMENT_FLAGS = frozenset(
    {"arguments-not-json", "truncated:arguments", "too-large:arguments", "too-deep:arguments"}
)
_CUT_PREFIXES = ("truncated:", "too-large:", "too-deep:", "unreadable:")


@final
@dataclass(frozen=True)
class ToolCall:
    """One tool call as the scorers see it: the tool's name and its parsed arguments (from a
    trace's tool runs, see :func:`trace_calls`, or from messages, see
    :func:`pytest_llmeval.scorers.messages.extract_tool_calls`)."""

    name: str
    arguments: Mapping[str, Any]
    #: where the call came from in its input, e.g. ``output[1].tool_calls[0]``
    where: str
    #: why the arguments cannot be compared (a traced call whose arguments were cut, were not
    #: JSON for an object, or were not recorded); None when they can. A call with a problem
    #: never matches on its arguments: its ``arguments`` are then ``{}`` and ``raw`` holds
    #: what was recorded.
    problem: str | None = None
    #: the text recorded, for a call with a ``problem``
    raw: str | None = None
    #: the error the tool run ended in (traced calls only)
    error: str | None = None

    def key(self) -> dict[str, Any]:
        """What a cache key keeps of the call (everything a scorer reads but ``where``)."""
        return {
            "name": self.name,
            "arguments": self.arguments,
            "problem": self.problem,
            "raw": self.raw,
            "error": self.error,
        }


#: a traced tool call: the same record as a call read from messages
TracedCall = ToolCall


def check_trace(scorer: str, field: str, trace: Trace, *, tools: bool = False) -> None:
    """Raise :class:`ScorerInputError` (``scorer``, ``field``) when ``trace`` holds nothing a
    scorer can trust (see the module docstring); ``tools``: also when its model asked for
    tools while no tool run was captured."""
    running = trace.running_calls()  # first: a call ending now is kept before it stops running
    spans = trace.spans
    if running:
        shown = ", ".join(running[:3]) + (", ..." if len(running) > 3 else "")
        raise ScorerInputError(
            scorer,
            field,
            f"is a trace still being written: {len(running)} call(s) of this test started and "
            f"have not ended ({shown}), so the calls it holds are not yet all the agent's",
            hint="Score the trace once the agent's run has finished (await it, join its "
            "threads); a call that never ends is a bug in the agent or its instrumentation",
        )
    if not spans:
        raise ScorerInputError(
            scorer,
            field,
            "is a trace with no spans: nothing was captured during the test, so the agent's "
            "instrumentation seems missing (or the agent never ran)",
            hint=INSTRUMENTATION_HINT,
        )
    if trace.dropped:
        raise _incomplete(scorer, field, trace)
    partial = [s for s in spans if s.kind != "model" and _structure_lost(s)]
    if partial:
        raise ScorerInputError(
            scorer,
            field,
            f"is an incomplete trace: {len(partial)} span(s) could not be read whole "
            f"({_named_flags(partial)}), so each may have been a model call, tool call or agent "
            "step that is not counted as one, and what the agent did cannot be scored",
            hint=_PARTIAL_HINT,
        )
    if not any(s.kind in ("model", "tool", "agent", "handoff") for s in spans):
        names = sorted({s.name for s in spans})
        shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        raise ScorerInputError(
            scorer,
            field,
            f"is a trace of {len(spans)} span(s) but none is a model call, tool call or agent "
            f"step of a convention read (spans: {shown}), so the agent's instrumentation seems "
            "missing or speaks a convention not read",
            hint=INSTRUMENTATION_HINT,
        )
    if tools and not any(s.kind == "tool" for s in spans):
        asked = [name for call in trace.model_calls for name in call.requested_tools]
        unsure = [s for s in spans if s.kind == "model" and _requests_may_be_lost(s)]
        if not asked and unsure:
            raise ScorerInputError(
                scorer,
                field,
                "is a trace with no tool run whose model calls could not all be read "
                f"({_named_flags(unsure)}), so whether the model asked for tools (and the "
                "tools' instrumentation is missing) cannot be told: no tool call is not proven",
                hint=_PARTIAL_HINT,
            )
        if asked:
            raise ScorerInputError(
                scorer,
                field,
                f"is a trace whose model asked for tools ({', '.join(asked)}) but holds no tool "
                "run, so the tools' instrumentation seems missing: the calls made cannot be "
                "told from calls never made",
                hint="Instrument the tools too (the framework's own instrumentation usually "
                "does), or score the requested calls explicitly: output=[{'name': ..., "
                "'arguments': ...}, ...]",
            )


# Flags (core.trace_conventions, plugin.trace_capture) saying a span's summary may not show what
# the span was: read by no rule (``unreadable``) or missing its oldest attributes, those that
# name its kind and tool (``sdk-dropped-attributes``). A model call stays a model call (its
# missing counts are refused where counted); any other span may have been a call not counted.
_STRUCTURE_FLAGS = ("unreadable:", "sdk-dropped-attributes:")
# Flags that do not hide a model's tool requests: a count not read (refused where counted), an
# attribute past the kept bound, arguments or text cut (the request itself is still read).
_HARMLESS_FOR_REQUESTS = ("not-a-count:", "attributes-dropped:", "arguments-not-json", "truncated:")
_PARTIAL_HINT = (
    "trace.flagged lists the spans and trace.render() shows the trace. A span over the "
    "OpenTelemetry SDK's attribute or event limit (128 by default) loses its oldest ones: raise "
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT / OTEL_SPAN_EVENT_COUNT_LIMIT before the tracer provider is "
    "made. A span the capture could not read is a bug to report with its flags"
)


def _structure_lost(span: Span) -> bool:
    return any(f.startswith(_STRUCTURE_FLAGS) for f in span.flags)


def _requests_may_be_lost(span: Span) -> bool:
    return any(not f.startswith(_HARMLESS_FOR_REQUESTS) for f in span.flags)


def _named_flags(spans: list[Span]) -> str:
    shown = [f"{s.name!r}: {', '.join(s.flags)}" for s in spans[:3]]
    return "; ".join(shown) + ("; ..." if len(spans) > 3 else "")


def check_trace_inputs(scorer: str, inputs: Mapping[str, Any], *, tools: bool = False) -> None:
    """:func:`check_trace` on every trace among ``inputs`` (a scorer's ``check_inputs``: the
    error is raised, and located at the test's line, before any key is made)."""
    for field, value in inputs.items():
        if isinstance(value, Trace):
            check_trace(scorer, field, value, tools=tools)


def _incomplete(scorer: str, field: str, trace: Trace) -> ScorerInputError:
    """The error for a trace with spans not kept: past its own span limit, or lost when more
    spans than the capture follows were open at once in the process (a span never ended)."""
    over = trace.dropped - trace.lost
    parts, hints = [], []
    if over > 0:
        parts.append(
            f"{over} span(s) were dropped over its limit of {trace.limits.max_spans} spans"
        )
        hints.append("capture fewer spans per test, or a trace with a larger TraceLimits.max_spans")
    if trace.lost:
        parts.append(
            f"{trace.lost} span(s) were lost because more than {trace.open_limit:,} spans were "
            "open at once in this process (the capture follows at most that many open spans "
            "and forgot the oldest)"
        )
        hints.append(
            "end every span the code under test starts: one never ended stays open, counted "
            f"against the limit of {trace.open_limit:,} open spans, until the process exits"
        )
    hint = "; ".join(hints)
    return ScorerInputError(
        scorer,
        field,
        f"is an incomplete trace: {'; '.join(parts)}, so what the agent did cannot be scored",
        hint=hint[:1].upper() + hint[1:],
    )


def trace_calls(scorer: str, field: str, trace: Trace) -> list[TracedCall]:
    """The tool runs of ``trace`` in order (checked with :func:`check_trace`, ``tools=True``),
    each with its arguments as an object, or with a ``problem`` when they cannot be compared."""
    running = trace.running_calls()  # before the spans (see check_trace)
    spans = trace.spans  # one snapshot: a trace may still be filling from other threads
    snapshot = Trace(trace.limits)
    for span in spans:
        snapshot.add(span)
    snapshot.dropped, snapshot.lost = trace.dropped, trace.lost
    snapshot.open_limit = trace.open_limit
    for i, what in enumerate(running):
        snapshot.call_started(str(i), what)
    check_trace(scorer, field, snapshot, tools=True)
    tool_spans = [s for s in spans if isinstance(s.detail, ToolRun)]
    out: list[TracedCall] = []
    for i, (span, call) in enumerate(zip(tool_spans, snapshot.tool_calls, strict=True)):
        where = f"{field}.tool_calls[{i}] (span {span.name!r})"
        arguments, problem, raw = _arguments(call, span, spans)
        out.append(TracedCall(call.name, arguments, where, problem, raw, call.error))
    return out


def _arguments(
    call: ToolRun, span: Span, spans: tuple[Span, ...]
) -> tuple[Mapping[str, Any], str | None, str | None]:
    """(arguments, problem, raw text) of one traced call (``span``: its tool span)."""
    own = span.detail.arguments if isinstance(span.detail, ToolRun) else None
    raw = call.arguments_raw
    if isinstance(own, Mapping) and call.arguments is own:
        flags = [f for f in span.flags if f in _ARGUMENT_FLAGS or f.startswith("unreadable:")]
        if flags:
            return {}, _flag_problem(flags), raw
        return own, None, raw
    value = call.arguments
    if isinstance(value, Mapping):
        # taken from the model's request of the same call id (Trace.tool_calls): trusted only
        # when the model span that holds it had nothing cut
        source = _requesting_span(call, spans)
        if source is None:
            return {}, "arguments taken from a model request that was not found", raw
        cut = [f for f in source.flags if f == "arguments-not-json" or f.startswith(_CUT_PREFIXES)]
        if cut:
            return {}, "arguments taken from a model call whose payload " + _flag_problem(cut), raw
        return value, None, raw
    if value is None:
        return {}, "arguments not recorded (content capture off?): they cannot be compared", raw
    if isinstance(value, str) and not value.strip():
        return {}, None, raw
    flags = [f for f in span.flags if f in _ARGUMENT_FLAGS]
    if flags:
        return {}, _flag_problem(flags), raw if raw is not None else _text(value)
    return {}, f"arguments recorded as {type(value).__name__}, not an object", _text(value)


def _flag_problem(flags: list[str]) -> str:
    why = []
    for flag in flags:
        if flag == "arguments-not-json":
            why.append("were not JSON")
        elif flag.startswith("truncated:"):
            why.append("were cut to the trace's bounds")
        elif flag.startswith("too-large:"):
            why.append("were too large to read")
        elif flag.startswith("too-deep:"):
            why.append("were nested too deep to read")
        else:
            why.append("could not be read")
    unique = list(dict.fromkeys(why))
    return f"arguments {' and '.join(unique)} ({', '.join(flags)}): they cannot be compared"


def _requesting_span(call: ToolRun, spans: tuple[Span, ...]) -> Span | None:
    for s in spans:
        if isinstance(s.detail, ModelCall):
            for message in s.detail.output_messages:
                for req in message.get("tool_calls", ()):
                    if req.get("id") is not None and str(req["id"]) == call.call_id:
                        return s
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


# -- the rendering a judge reads ------------------------------------------------------------------


def render_trace(
    trace: Trace, *, max_chars: int = RENDER_MAX_CHARS, line_chars: int = RENDER_LINE_CHARS
) -> str:
    """The trajectory as a transcript for a judge prompt, one line per step, by start time::

        user: Weather in Paris?
        agent weather
        assistant -> get_weather({"city": "Paris"})
        tool get_weather({"city": "Paris"}) -> {"city": "Paris", "forecast": "sunny"}
        assistant: It is sunny in Paris.

    The task (the first user message of the first model call that recorded one) comes first;
    each model call adds its reply (text and requested tools), each tool run its arguments and
    result or error, agent runs and handoffs a line. No ids or timings (they change from run to
    run; the cache key is this text). Bounded: each line cut to ``line_chars``, the whole to
    ``max_chars`` by keeping its first and last lines around a line that says how many steps
    were left out. The scorer puts it in a delimited block like any case field."""
    lines: list[str] = []
    task_shown = False
    for span in trace.spans:
        d = span.detail
        if isinstance(d, ModelCall):
            if not task_shown:
                for message in d.input_messages:
                    if message.get("role") in ("system", "user") and message.get("content"):
                        lines.append(f"{message['role']}: {_content(message.get('content'))}")
                        task_shown = task_shown or message.get("role") == "user"
            for message in d.output_messages:
                content = _content(message.get("content"))
                if content:
                    lines.append(f"assistant: {content}")
                for req in message.get("tool_calls", ()):
                    lines.append(f"assistant -> {req.get('name')}({_text(req.get('arguments'))})")
            if span.error is not None:
                lines.append(f"model call failed: {span.error}")
        elif isinstance(d, ToolRun):
            arguments = d.arguments_raw if d.arguments_raw is not None else _text(d.arguments)
            line = f"tool {d.name}({arguments})"
            if any(f in _ARGUMENT_FLAGS for f in span.flags):
                line += " [arguments cut or unreadable]"
            if span.error is not None:
                line += f" -> ERROR: {span.error}"
            else:
                line += f" -> {_text(d.result)}"
            lines.append(line)
        elif isinstance(d, AgentStep):
            line = (
                f"agent {d.name}"
                if d.kind == "agent"
                else f"handoff {d.from_agent} -> {d.to_agent}"
            )
            lines.append(line + (f" failed: {span.error}" if span.error is not None else ""))
    lines = [
        ln if len(ln) <= line_chars else ln[: line_chars - 40] + f" ... [{len(ln)} chars, cut]"
        for ln in lines
    ]
    return _fit(lines, max_chars) if lines else "(no steps)"


def _content(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else _text(content)


def _fit(lines: list[str], max_chars: int) -> str:
    """``lines`` joined, or their first and last lines within ``max_chars`` around a note."""
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    head: list[str] = []
    used = 0
    for ln in lines:
        if used + len(ln) + 1 > half:
            break
        head.append(ln)
        used += len(ln) + 1
    tail: list[str] = []
    used = 0
    for ln in reversed(lines[len(head) :]):
        if used + len(ln) + 1 > half - 100:
            break
        tail.append(ln)
        used += len(ln) + 1
    tail.reverse()
    left_out = len(lines) - len(head) - len(tail)
    note = f"[... {left_out} step(s) left out: the trajectory is longer than {max_chars} chars ...]"
    return "\n".join([*head, note, *tail])
