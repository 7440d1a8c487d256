"""Finished spans -> :class:`~pytest_llmeval.core.trace.Span` summaries, by the conventions agents
really emit.

The input is a :class:`RawSpan`: plain data the capture makes from an OpenTelemetry
``ReadableSpan`` or an OpenAI Agents SDK span's ``export()`` dict (:func:`raw_from_agents_export`),
so this module needs neither package. Conventions read, first match wins:

- **OpenInference** (``openinference.span.kind``: LLM, TOOL, AGENT, CHAIN, ...): ``llm.model_name``,
  ``llm.token_count.prompt|completion``, ``llm.input_messages.N.message.*`` /
  ``llm.output_messages.N.message.*``, ``tool.name``, ``input.value`` / ``output.value``.
- **OpenTelemetry GenAI** (``gen_ai.operation.name``: chat, text_completion, generate_content,
  execute_tool, invoke_agent, ...): ``gen_ai.request.model`` / ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens|output_tokens`` (older ``prompt_tokens|completion_tokens``),
  messages from ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
  ``gen_ai.system_instructions`` (JSON, parts), the older flattened ``gen_ai.prompt.N.*`` /
  ``gen_ai.completion.N.*``, or span events (``gen_ai.user.message``, ``gen_ai.choice``,
  ``gen_ai.content.prompt``, ``gen_ai.client.inference.operation.details``);
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments|result``.
  pydantic-ai's instrumentation is this convention (with ``tool_arguments`` / ``tool_response``
  and ``agent_name`` in its older versions).
- **Traceloop / OpenLLMetry** (``traceloop.span.kind``: tool, agent, workflow, task).
- **OpenAI Agents SDK** (its own tracing: ``span_data.type`` generation, response, function,
  agent, handoff, guardrail, custom), read from ``openai_agents.*`` attributes.

Anything else is a generic span (kind ``span``), kept with its bounded attributes. Malformed
values (tool arguments that are not JSON, messages of the wrong shape, huge payloads) are cut
and flagged on the span; nothing here raises on what a span holds.

Why this module is long: one reader per convention (five), each short, all sharing one bounded
value reader and one message normaliser; split by convention, each part would import the shared
pieces as private names of another module, or make them public API.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, final

from pytest_llmeval.core.redaction import HIDDEN, hide_secrets, is_secret_name, redact_text
from pytest_llmeval.core.trace import (
    AgentStep,
    ModelCall,
    Span,
    SpanKind,
    ToolCall,
    TraceLimits,
)

__all__ = ["AGENTS_PREFIX", "RawSpan", "SpanEvent", "raw_from_agents_export", "summarise"]

#: the attribute prefix under which an Agents SDK span's exported fields are kept
AGENTS_PREFIX = "openai_agents."


@final
@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event recorded on a span (OpenTelemetry span events)."""

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


@final
@dataclass(frozen=True, slots=True)
class RawSpan:
    """A finished span as the capture hands it over. Ids are text (hex for OpenTelemetry);
    times in nanoseconds; ``error`` the status description (or "error") of a failed span;
    ``flags`` what the source already lost (attributes its SDK dropped), carried to the
    summary's flags."""

    name: str
    span_id: str
    parent_id: str | None
    trace_id: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    error: str | None = None
    flags: tuple[str, ...] = ()


#: what ends a cut text (and a cut list, a cut mapping's last key): ``...…[cut: 12 more chars]``
_CUT_MARK = "…[cut: "
_CUT_END = "]"


class _Reader:
    """Reads one span's values, bounded, noting what it cut or could not read."""

    def __init__(self, raw: RawSpan, limits: TraceLimits) -> None:
        self.raw = raw
        self.attrs = raw.attributes
        self.limits = limits
        self.flags: list[str] = list(raw.flags)

    def flag(self, text: str) -> None:
        if text not in self.flags:
            self.flags.append(text)

    def get(self, *keys: str) -> Any:
        for key in keys:
            if key in self.attrs:
                return self.attrs[key]
        return None

    def text(self, *keys: str) -> str | None:
        value = self.get(*keys)
        if value is None:
            return None
        return self.cut(value if isinstance(value, str) else str(value), keys[0])

    def count(self, *keys: str) -> int | None:
        return self.count_of(self.get(*keys), keys[0])

    def count_of(self, value: Any, where: str) -> int | None:
        """A token count: a whole number >= 0 (or its digits), else None and flagged."""
        n = _count(value)
        if n is None and value is not None:
            self.flag(f"not-a-count:{where}")
        return n

    def cut(self, text: str, where: str) -> str:
        """``text`` within ``max_chars``, or its first ``max_chars`` characters and a mark
        saying how many more were cut: a cut value never equals the real one it was cut from
        (nor a real shorter one), so no comparison passes on what was not read."""
        limit = self.limits.max_chars
        if len(text) > limit:
            self.flag(f"truncated:{where}")
            if len(text) < limit + 40 and text.endswith(_CUT_END) and _CUT_MARK in text[limit:]:
                return text  # cut already (a value read twice)
            return f"{text[:limit]}{_CUT_MARK}{len(text) - limit} more chars{_CUT_END}"
        return text

    def json(
        self, value: Any, where: str, *, flag_text: str | None = None, bound: bool = True
    ) -> tuple[Any, bool]:
        """(the parsed value, True) for JSON text; (the value bounded, False) otherwise.
        ``bound=False`` leaves a parsed value whole, for a reader that bounds what it keeps
        of it (the message readers: each content and argument is cut as it is read)."""
        if not isinstance(value, str):
            return (self.bounded(value, where) if bound else value), True
        if len(value) > self.limits.max_json_chars:
            self.flag(f"too-large:{where}")
            return self.cut(value, where), False
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            if flag_text is not None:
                self.flag(flag_text)
            return self.cut(value, where), False
        return (self.bounded(parsed, where) if bound else parsed), True

    def bounded(self, value: Any, where: str, depth: int = 0) -> Any:
        """A JSON-like copy of ``value`` with strings, lists and depth bounded."""
        kind = type(value)  # the exact JSON types first: no ABC checks on the hot path
        if kind is str:
            return value if len(value) <= self.limits.max_chars else self.cut(value, where)
        if value is None or kind is int or kind is float or kind is bool:
            return value
        if isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, str):
            return self.cut(value, where)
        if depth > 20:
            self.flag(f"too-deep:{where}")
            return self.cut(repr(value), where)
        if kind is dict or isinstance(value, Mapping):
            items = list(value.items())
            more = len(items) - self.limits.max_items
            if more > 0:
                self.flag(f"truncated:{where}")
                items = items[: self.limits.max_items]
            out = {str(k): self.bounded(v, where, depth + 1) for k, v in items}
            if more > 0:  # marked, as a cut text is: never equal to the real mapping
                out[_CUT_MARK] = f"{more} more keys{_CUT_END}"
            return out
        if isinstance(value, (list, tuple)):
            seq = list(value)
            more = len(seq) - self.limits.max_items
            if more > 0:
                self.flag(f"truncated:{where}")
                seq = seq[: self.limits.max_items]
            kept = [self.bounded(v, where, depth + 1) for v in seq]
            if more > 0:
                kept.append(f"{_CUT_MARK}{more} more items{_CUT_END}")
            return kept
        return self.cut(repr(value), where)


# -- entry point ---------------------------------------------------------------------------------


def summarise(raw: RawSpan, limits: TraceLimits | None = None) -> Span:
    """The summary of one finished span: its kind, its convention and its call (model, tool,
    agent step) where one is recognised; otherwise a generic span. Never raises on what the span
    holds (a value it cannot read is flagged on the summary)."""
    if raw.error is not None:  # the span's error and its call's: as they may be shown
        raw = dataclasses.replace(raw, error=redact_text(raw.error))
    reader = _Reader(raw, limits if limits is not None else TraceLimits())
    try:
        kind, source, detail = _classify(reader)
    except Exception as exc:  # a shape no rule foresaw: keep the span, say so
        reader.flag(f"unreadable:{type(exc).__name__}")
        kind, source, detail = "span", "unknown", None
    try:
        attributes = _kept_attributes(reader)
    except Exception as exc:  # a value that cannot even be shown (a custom span's own object)
        reader.flag(f"unreadable:{type(exc).__name__}")
        attributes = {}
    return Span(
        span_id=raw.span_id,
        parent_id=raw.parent_id,
        trace_id=raw.trace_id,
        name=reader.cut(str(raw.name), "name"),
        kind=kind,
        source=source,
        start_ns=raw.start_ns,
        end_ns=raw.end_ns,
        error=raw.error,
        attributes=attributes,
        flags=tuple(reader.flags),
        detail=detail,
    )


Classified = tuple[SpanKind, str, ModelCall | ToolCall | AgentStep | None]

_OPENINFERENCE_KINDS: dict[str, SpanKind] = {
    "LLM": "model",
    "TOOL": "tool",
    "AGENT": "agent",
    "CHAIN": "chain",
    "EMBEDDING": "embedding",
    "RETRIEVER": "retriever",
    "RERANKER": "retriever",
    "GUARDRAIL": "guardrail",
}
_GENAI_MODEL_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})


def _classify(r: _Reader) -> Classified:
    attrs = r.attrs
    if any(k.startswith(AGENTS_PREFIX) for k in attrs):
        return _agents(r)
    oi_kind = attrs.get("openinference.span.kind")
    if isinstance(oi_kind, str):
        return _openinference(r, oi_kind.upper())
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str):
        return _gen_ai(r, op)
    if "gen_ai.tool.name" in attrs:
        return "tool", "gen_ai", _gen_ai_tool(r)
    if "gen_ai.request.model" in attrs or "gen_ai.system" in attrs:
        return "model", "gen_ai", _gen_ai_model(r)
    tl_kind = attrs.get("traceloop.span.kind")
    if isinstance(tl_kind, str):
        return _traceloop(r, tl_kind)
    return "span", "unknown", None


# -- OpenInference -------------------------------------------------------------------------------


def _openinference(r: _Reader, kind: str) -> Classified:
    mapped = _OPENINFERENCE_KINDS.get(kind, "span")
    if mapped == "model":
        inputs = _oi_messages(r, "llm.input_messages")
        outputs = _oi_messages(r, "llm.output_messages")
        call = ModelCall(
            span_id=r.raw.span_id,
            name=r.raw.name,
            model=r.text("llm.model_name"),
            response_model=None,
            provider=r.text("llm.provider", "llm.system"),
            input_messages=inputs,
            output_messages=outputs,
            input_tokens=r.count("llm.token_count.prompt"),
            output_tokens=r.count("llm.token_count.completion"),
            duration_s=_seconds(r.raw),
            error=r.raw.error,
        )
        return "model", "openinference", call
    if mapped == "tool":
        raw_args = r.get("tool_call.function.arguments", "input.value")
        arguments, raw_text = _arguments(r, raw_args)
        result = _result(r, r.get("output.value"))
        call_id = r.text("tool_call.id", "tool.id")
        error = r.raw.error
        message = _langchain_tool_message(result)
        if message is not None:
            # LangChain's instrumentation records the tool's ToolMessage as the output: its
            # content is the result, its tool_call_id the call, its status an error
            result = _result(r, message.get("content"))
            if call_id is None and message.get("tool_call_id") is not None:
                call_id = str(message["tool_call_id"])
            if error is None and message.get("status") == "error":
                error = _as_text(message.get("content"))
        tool = ToolCall(
            span_id=r.raw.span_id,
            name=r.text("tool.name", "tool_call.function.name") or r.raw.name,
            arguments=arguments,
            arguments_raw=raw_text,
            result=result,
            call_id=call_id,
            duration_s=_seconds(r.raw),
            error=error,
        )
        return "tool", "openinference", tool
    if mapped == "agent":
        name = r.text("agent.name", "graph.node.id") or r.raw.name
        step = _agent_step(r, name)
        return "agent", "openinference", step
    return mapped, "openinference", None


def _agent_step(
    r: _Reader,
    name: str,
    kind: Literal["agent", "handoff"] = "agent",
    *,
    from_agent: str | None = None,
    to_agent: str | None = None,
) -> AgentStep:
    """The agent step (or handoff) the span ``r`` reads, named ``name``: its id, duration and
    error are the span's."""
    return AgentStep(
        span_id=r.raw.span_id,
        name=name,
        kind=kind,
        from_agent=from_agent,
        to_agent=to_agent,
        duration_s=_seconds(r.raw),
        error=r.raw.error,
    )


def _langchain_tool_message(value: Any) -> Mapping[str, Any] | None:
    """The fields of a serialised LangChain ``ToolMessage`` (``{"type": "tool", "data": {...}}``),
    or None for anything else."""
    if isinstance(value, Mapping) and value.get("type") == "tool":
        data = value.get("data")
        if isinstance(data, Mapping) and "content" in data:
            return data
    return None


def _oi_messages(r: _Reader, prefix: str) -> tuple[Mapping[str, Any], ...]:
    """``prefix.N.message.role|content|name|tool_call_id|tool_calls.M.tool_call.*|contents.K.*``
    -> OpenAI-style messages, in index order."""
    tree = _unflatten(r, prefix)
    messages: list[Mapping[str, Any]] = []
    for entry in _indexed(tree, r, prefix):
        message = entry.get("message") if isinstance(entry, Mapping) else None
        if not isinstance(message, Mapping):
            r.flag(f"bad-message:{prefix}")
            continue
        out: dict[str, Any] = {"role": str(message.get("role") or "")}
        content = message.get("content")
        if content is None and isinstance(message.get("contents"), Mapping):
            texts = [
                str(part.get("message_content", {}).get("text", ""))
                for part in _indexed(message["contents"])
                if isinstance(part, Mapping) and isinstance(part.get("message_content"), Mapping)
            ]
            content = "".join(texts) if texts else None
        out["content"] = None if content is None else r.cut(str(content), prefix)
        calls = []
        for call in _indexed(message.get("tool_calls") or {}):
            tc = call.get("tool_call") if isinstance(call, Mapping) else None
            if not isinstance(tc, Mapping):
                continue
            fn = tc.get("function")
            fn = fn if isinstance(fn, Mapping) else {}
            calls.append(
                _tool_request(r, tc.get("id"), fn.get("name"), fn.get("arguments"), prefix)
            )
        if calls:
            out["tool_calls"] = calls
        if message.get("tool_call_id") is not None:
            out["tool_call_id"] = str(message["tool_call_id"])
        if message.get("name") is not None:
            out["name"] = str(message["name"])
        messages.append(out)
    return _capped(r, messages, prefix)


def _unflatten(r: _Reader, prefix: str) -> dict[str, Any]:
    """The attributes under ``prefix.`` as a nested dict (numeric parts stay keys)."""
    tree: dict[str, Any] = {}
    start = prefix + "."
    for key, value in r.attrs.items():
        if not key.startswith(start):
            continue
        node = tree
        parts = key[len(start) :].split(".")
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[parts[-1]] = value
    return tree


def _indexed(tree: Any, r: _Reader | None = None, where: str = "") -> list[Any]:
    """The values of a ``{"0": ..., "1": ...}`` node in index order (a list as it is); with a
    reader, a missing index (a message the span does not hold) is flagged ``gap:<where>``."""
    if isinstance(tree, list):
        return tree
    if not isinstance(tree, Mapping):
        return []
    keyed = sorted(
        ((int(k), v) for k, v in tree.items() if isinstance(k, str) and k.isdigit()),
        key=lambda kv: kv[0],
    )
    if r is not None and keyed and keyed[-1][0] != len(keyed) - 1:
        r.flag(f"gap:{where}")
    return [v for _, v in keyed]


# -- OpenTelemetry GenAI -------------------------------------------------------------------------


def _gen_ai(r: _Reader, op: str) -> Classified:
    if op in _GENAI_MODEL_OPS:
        return "model", "gen_ai", _gen_ai_model(r)
    if op == "execute_tool":
        return "tool", "gen_ai", _gen_ai_tool(r)
    if op in ("invoke_agent", "create_agent"):
        name = r.text("gen_ai.agent.name", "agent_name") or r.raw.name
        step = _agent_step(r, name)
        return "agent", "gen_ai", step
    if op == "embeddings":
        return "embedding", "gen_ai", None
    return "span", "gen_ai", None


def _gen_ai_model(r: _Reader) -> ModelCall:
    inputs, outputs = _gen_ai_messages(r)
    finish = r.get("gen_ai.response.finish_reasons")
    reasons: tuple[str, ...] = ()
    if isinstance(finish, (list, tuple)):
        reasons = tuple(str(x) for x in finish)
    elif isinstance(finish, str):
        reasons = (finish,)
    return ModelCall(
        span_id=r.raw.span_id,
        name=r.raw.name,
        model=r.text("gen_ai.request.model"),
        response_model=r.text("gen_ai.response.model"),
        provider=r.text("gen_ai.provider.name", "gen_ai.system"),
        input_messages=inputs,
        output_messages=outputs,
        input_tokens=r.count("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        output_tokens=r.count("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        finish_reasons=reasons,
        duration_s=_seconds(r.raw),
        error=r.raw.error,
    )


def _gen_ai_messages(
    r: _Reader,
) -> tuple[tuple[Mapping[str, Any], ...], tuple[Mapping[str, Any], ...]]:
    """The messages of a GenAI model span from whichever form it used (current JSON attributes,
    then events carrying them, then the flattened older attributes, then per-message events)."""
    values: dict[str, Any] = {}
    for key in ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages"):
        if key in r.attrs:
            values[key] = r.get(key)
    for event in r.raw.events:
        if event.name == "gen_ai.client.inference.operation.details":
            for key in (
                "gen_ai.system_instructions",
                "gen_ai.input.messages",
                "gen_ai.output.messages",
            ):
                if key in event.attributes and key not in values:
                    values[key] = event.attributes[key]
    inputs: list[Mapping[str, Any]] = []
    outputs: list[Mapping[str, Any]] = []
    if "gen_ai.system_instructions" in values:
        parts, ok = r.json(
            values["gen_ai.system_instructions"],
            "gen_ai.system_instructions",
            flag_text="messages-not-json:gen_ai.system_instructions",
            bound=False,
        )
        if ok:
            text = _parts_text(parts if isinstance(parts, list) else [parts])
            if text is not None:
                inputs.append({"role": "system", "content": r.cut(text, "system_instructions")})
    for key, into in (("gen_ai.input.messages", inputs), ("gen_ai.output.messages", outputs)):
        if key in values:
            parsed, ok = r.json(values[key], key, flag_text=f"messages-not-json:{key}", bound=False)
            if ok:
                into.extend(_parts_messages(r, parsed, key))
    if not inputs and not outputs:
        inputs = list(_flat_messages(r, "gen_ai.prompt"))
        outputs = list(_flat_messages(r, "gen_ai.completion"))
    if not inputs and not outputs:
        inputs, outputs = _event_messages(r)
    return _capped(r, inputs, "input"), _capped(r, outputs, "output")


def _parts_text(parts: Sequence[Any]) -> str | None:
    texts = [
        str(p.get("content", ""))
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == "text"
    ]
    return "".join(texts) if texts else None


def _parts_messages(r: _Reader, parsed: Any, where: str) -> list[Mapping[str, Any]]:
    """Semantic-conventions messages (``{"role", "parts": [...]}``) -> OpenAI-style messages:
    tool calls gathered on the assistant message, each tool call response its own tool
    message."""
    if not isinstance(parsed, list):
        r.flag(f"bad-message:{where}")
        return []
    if len(parsed) > r.limits.max_items:
        r.flag(f"truncated:{where}")
        parsed = parsed[: r.limits.max_items]
    out: list[Mapping[str, Any]] = []
    for message in parsed:
        if not isinstance(message, Mapping):
            r.flag(f"bad-message:{where}")
            continue
        role = r.cut(str(message.get("role") or ""), where)
        parts = message.get("parts")
        if not isinstance(parts, list):
            # an OpenAI-style message already (some emitters): read it as one
            out.append(_openai_message(r, message, where))
            continue
        content = _parts_text(parts)
        if content is not None:
            content = r.cut(content, where)
        calls = [
            _tool_request(r, p.get("id"), p.get("name"), p.get("arguments"), where)
            for p in parts
            if isinstance(p, Mapping) and p.get("type") == "tool_call"
        ]
        responses = [
            p for p in parts if isinstance(p, Mapping) and p.get("type") == "tool_call_response"
        ]
        if content is not None or calls or not responses:
            entry: dict[str, Any] = {"role": role, "content": content}
            if calls:
                entry["tool_calls"] = calls
            if message.get("finish_reason") is not None:
                entry["finish_reason"] = str(message["finish_reason"])
            out.append(entry)
        for p in responses:
            result = p.get("response", p.get("result"))
            out.append(
                {
                    "role": "tool",
                    "content": r.cut(_as_text(result), where),
                    "tool_call_id": None if p.get("id") is None else str(p["id"]),
                }
            )
    return out


def _openai_message(r: _Reader, message: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """An OpenAI chat message (``role``, ``content``, ``tool_calls[].function``) as ours."""
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = _parts_text(
            [{"type": "text", "content": p.get("text")} for p in content if isinstance(p, Mapping)]
        )
    out: dict[str, Any] = {
        "role": str(message.get("role") or ""),
        "content": None if content is None else r.cut(_as_text(content), where),
    }
    calls = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else call
        calls.append(_tool_request(r, call.get("id"), fn.get("name"), fn.get("arguments"), where))
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def _flat_messages(r: _Reader, prefix: str) -> list[Mapping[str, Any]]:
    """The older flattened form: ``prefix.N.role|content|tool_call_id|finish_reason`` and
    ``prefix.N.tool_calls.M.id|name|arguments``."""
    tree = _unflatten(r, prefix)
    out: list[Mapping[str, Any]] = []
    for entry in _indexed(tree, r, prefix):
        if not isinstance(entry, Mapping):
            r.flag(f"bad-message:{prefix}")
            continue
        message: dict[str, Any] = {
            "role": str(entry.get("role") or ""),
            "content": None
            if entry.get("content") is None
            else r.cut(str(entry["content"]), prefix),
        }
        calls = [
            _tool_request(r, c.get("id"), c.get("name"), c.get("arguments"), prefix)
            for c in _indexed(entry.get("tool_calls") or {})
            if isinstance(c, Mapping)
        ]
        if calls:
            message["tool_calls"] = calls
        if entry.get("tool_call_id") is not None:
            message["tool_call_id"] = str(entry["tool_call_id"])
        if entry.get("finish_reason") is not None:
            message["finish_reason"] = str(entry["finish_reason"])
        out.append(message)
    return out


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(
    r: _Reader,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Messages recorded as span events: one event per message (``gen_ai.user.message``, ...,
    ``gen_ai.choice``), or the older ``gen_ai.content.prompt|completion`` with a JSON list."""
    inputs: list[Mapping[str, Any]] = []
    outputs: list[Mapping[str, Any]] = []
    for event in r.raw.events:
        attrs = event.attributes
        if event.name in _EVENT_ROLES:
            message = dict(attrs)
            message.setdefault("role", _EVENT_ROLES[event.name])
            if "id" in message and event.name == "gen_ai.tool.message":
                message.setdefault("tool_call_id", message["id"])
            message["tool_calls"] = _json_or(r, message.get("tool_calls"))
            inputs.append(_openai_message(r, message, event.name))
        elif event.name == "gen_ai.choice":
            body = _json_or(r, attrs.get("message"))
            message = dict(body) if isinstance(body, Mapping) else {"content": attrs.get("content")}
            message.setdefault("role", "assistant")
            message["tool_calls"] = _json_or(r, message.get("tool_calls"))
            out = dict(_openai_message(r, message, event.name))
            if attrs.get("finish_reason") is not None:
                out["finish_reason"] = str(attrs["finish_reason"])
            outputs.append(out)
        elif event.name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            key = "gen_ai.prompt" if event.name.endswith("prompt") else "gen_ai.completion"
            parsed, ok = r.json(attrs.get(key), key, flag_text=f"messages-not-json:{key}")
            if ok and isinstance(parsed, list):
                into = inputs if key == "gen_ai.prompt" else outputs
                into.extend(_openai_message(r, m, key) for m in parsed if isinstance(m, Mapping))
    return inputs, outputs


def _json_or(r: _Reader, value: Any) -> Any:
    if isinstance(value, str):
        parsed, ok = r.json(value, "event")
        return parsed if ok else None
    return value


def _gen_ai_tool(r: _Reader) -> ToolCall:
    raw_args = r.get("gen_ai.tool.call.arguments", "tool_arguments")
    arguments, raw_text = _arguments(r, raw_args)
    result = r.get("gen_ai.tool.call.result", "tool_response")
    return ToolCall(
        span_id=r.raw.span_id,
        name=r.text("gen_ai.tool.name") or r.raw.name,
        arguments=arguments,
        arguments_raw=raw_text,
        result=_result(r, result),
        call_id=r.text("gen_ai.tool.call.id"),
        duration_s=_seconds(r.raw),
        error=r.raw.error,
    )


# -- Traceloop / OpenLLMetry ---------------------------------------------------------------------


def _traceloop(r: _Reader, kind: str) -> Classified:
    name = r.text("traceloop.entity.name") or r.raw.name
    if kind == "tool":
        arguments, raw_text = _arguments(r, r.get("traceloop.entity.input"))
        tool = ToolCall(
            span_id=r.raw.span_id,
            name=name,
            arguments=arguments,
            arguments_raw=raw_text,
            result=_result(r, r.get("traceloop.entity.output")),
            duration_s=_seconds(r.raw),
            error=r.raw.error,
        )
        return "tool", "traceloop", tool
    if kind == "agent":
        step = _agent_step(r, name)
        return "agent", "traceloop", step
    return "chain", "traceloop", None


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


def raw_from_agents_export(exported: Mapping[str, Any]) -> RawSpan:
    """A :class:`RawSpan` from an Agents SDK span's ``export()`` dict (``id``, ``trace_id``,
    ``parent_id``, ``started_at`` / ``ended_at`` ISO times, ``span_data`` with its ``type``,
    ``error`` ``{"message", "data"}``): the span data's fields become ``openai_agents.<field>``
    attributes."""
    data = exported.get("span_data")
    data = data if isinstance(data, Mapping) else {}
    attrs = {AGENTS_PREFIX + str(k): v for k, v in data.items()}
    attrs.setdefault(AGENTS_PREFIX + "type", "unknown")
    error = exported.get("error")
    message = None
    if isinstance(error, Mapping):
        message = str(error.get("message") or "error")
        if error.get("data") is not None:
            message += f": {_as_text(error['data'])}"
    elif error is not None:
        message = str(error)
    kind = str(data.get("type") or "span")
    name = str(data.get("name") or kind)
    return RawSpan(
        name=name,
        span_id=str(exported.get("id") or ""),
        parent_id=None if exported.get("parent_id") is None else str(exported["parent_id"]),
        trace_id=str(exported.get("trace_id") or ""),
        start_ns=_iso_ns(exported.get("started_at")),
        end_ns=_iso_ns(exported.get("ended_at")),
        attributes=attrs,
        error=message,
    )


def _iso_ns(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return 0


def _agents(r: _Reader) -> Classified:
    kind = r.text(AGENTS_PREFIX + "type") or "unknown"
    p = AGENTS_PREFIX
    if kind in ("generation", "response"):
        items = kind == "response"  # the Responses API's items, not chat messages
        inputs = _agents_messages(r, r.get(p + "input"), p + "input", items=items)
        outputs = _agents_messages(r, r.get(p + "output"), p + "output", items=items)
        usage = r.get(p + "usage")
        usage = usage if isinstance(usage, Mapping) else {}
        call = ModelCall(
            span_id=r.raw.span_id,
            name=r.raw.name,
            model=r.text(p + "model"),
            response_model=None,
            provider=None,
            input_messages=inputs,
            output_messages=outputs,
            input_tokens=r.count_of(
                usage.get("input_tokens", usage.get("prompt_tokens")), p + "usage.input_tokens"
            ),
            output_tokens=r.count_of(
                usage.get("output_tokens", usage.get("completion_tokens")),
                p + "usage.output_tokens",
            ),
            duration_s=_seconds(r.raw),
            error=r.raw.error,
        )
        return "model", "openai_agents", call
    if kind == "function":
        arguments, raw_text = _arguments(r, r.get(p + "input"))
        tool = ToolCall(
            span_id=r.raw.span_id,
            name=r.text(p + "name") or r.raw.name,
            arguments=arguments,
            arguments_raw=raw_text,
            result=_result(r, r.get(p + "output")),
            duration_s=_seconds(r.raw),
            error=r.raw.error,
        )
        return "tool", "openai_agents", tool
    if kind == "agent":
        step = _agent_step(r, r.text(p + "name") or r.raw.name)
        return "agent", "openai_agents", step
    if kind == "handoff":
        from_agent, to_agent = r.text(p + "from_agent"), r.text(p + "to_agent")
        step = _agent_step(
            r, f"{from_agent} -> {to_agent}", "handoff", from_agent=from_agent, to_agent=to_agent
        )
        return "handoff", "openai_agents", step
    if kind == "guardrail":
        return "guardrail", "openai_agents", None
    return "span", "openai_agents", None


def _agents_messages(
    r: _Reader, value: Any, where: str, *, items: bool = False
) -> tuple[Mapping[str, Any], ...]:
    """Chat messages (a generation span's), or with ``items`` the Responses API's input and
    output items (a response span's), as ours."""
    if value is None:
        return ()
    if isinstance(value, str):
        parsed, ok = r.json(value, where)
        if not ok:
            return ({"role": "user", "content": parsed},)
        value = parsed
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        r.flag(f"bad-message:{where}")
        return ()
    messages = [m for m in value if isinstance(m, Mapping)]
    if items:
        messages = _from_response_items(r, messages, where)
    return _capped(r, [_openai_message(r, m, where) for m in messages], where)


def _from_response_items(
    r: _Reader, items: list[Mapping[str, Any]], where: str
) -> list[Mapping[str, Any]]:
    """Responses API items as chat messages: a message item as it is (its content parts' text
    is read), ``function_call`` items as one assistant message's tool calls (consecutive calls
    together), a ``function_call_output`` as a tool message; other items (reasoning, built-in
    tools' calls) are not messages and are left out."""
    out: list[Mapping[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            calls.append(
                {
                    "id": item.get("call_id", item.get("id")),
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
            continue
        if calls:
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            calls = []
        if kind == "function_call_output":
            out.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
        elif kind in (None, "message") and item.get("role") is not None:
            out.append(item)
        elif kind not in ("reasoning",):
            r.flag(f"item-not-read:{where}")
    if calls:
        out.append({"role": "assistant", "content": None, "tool_calls": calls})
    return out


# -- shared pieces -------------------------------------------------------------------------------


def _tool_request(
    r: _Reader, call_id: Any, name: Any, arguments: Any, where: str
) -> dict[str, Any]:
    """One tool call a model asked for: ``{"id", "name", "arguments"}``, arguments parsed when
    they are JSON text (else kept as text, flagged)."""
    parsed, _ = _arguments(r, arguments, where=where)
    return {
        "id": None if call_id is None else r.cut(str(call_id), where),
        "name": None if name is None else r.cut(str(name), where),
        "arguments": parsed,
    }


def _arguments(r: _Reader, value: Any, *, where: str = "arguments") -> tuple[Any, str | None]:
    """(arguments, the text recorded): JSON text parsed; other text kept as text and flagged
    ``arguments-not-json``; a non-text value (a mapping some emitters record) bounded."""
    if value is None:
        return None, None
    if isinstance(value, str):
        parsed, _ = r.json(value, where, flag_text="arguments-not-json")
        return parsed, r.cut(value, where)
    bounded = r.bounded(value, where)
    try:
        text = json.dumps(bounded, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(bounded)
    return bounded, r.cut(text, where)


def _result(r: _Reader, value: Any) -> Any:
    """A tool's result: JSON text parsed, other text as text, all bounded."""
    if value is None:
        return None
    if isinstance(value, str):
        parsed, _ = r.json(value, "result")
        return parsed
    return r.bounded(value, "result")


def _count(value: Any) -> int | None:
    """A whole number >= 0, or None: a negative count would take tokens off a trace's total,
    and digits ``int()`` refuses (thousands of them, ``²``) would end the span's reading."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit() and len(text) <= 18:
            return int(text)
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _capped(
    r: _Reader, messages: Iterable[Mapping[str, Any]], where: str
) -> tuple[Mapping[str, Any], ...]:
    out = list(messages)
    if len(out) > r.limits.max_items:
        r.flag(f"truncated:{where}")
        out = out[: r.limits.max_items]
    return tuple(out)


def _seconds(raw: RawSpan) -> float:
    return max(0, raw.end_ns - raw.start_ns) / 1e9


_MESSAGE_KEYS = frozenset(
    {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"}
)
_MESSAGE_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
)


@functools.lru_cache(maxsize=1_024)
def _secret_key(key: str) -> bool:
    """An attribute named like a secret (``http.request.header.authorization``, ``...api_key``)."""
    return is_secret_name(key.rsplit(".", 1)[-1])


def _without_secrets(key: str, value: Any) -> Any:
    """An attribute's value as it may be shown or stored: a secret-named one hidden, URLs
    without their credentials and secret parameters (``url.full`` with Gemini's ``?key=``)."""
    if value is None or value == "":
        return value
    if _secret_key(key):
        return HIDDEN
    if isinstance(value, str):
        return redact_text(value) if "://" in value else value
    if isinstance(value, (bool, int, float)):
        return value
    shown = hide_secrets(value)
    if isinstance(shown, list):
        return [redact_text(v) if isinstance(v, str) and "://" in v else v for v in shown]
    return shown


def _kept_attributes(r: _Reader) -> Mapping[str, Any]:
    """The span's attributes, bounded, less the message payloads already read into the call
    (kept once, parsed)."""
    kept: dict[str, Any] = {}
    skipped = 0
    for key, value in r.attrs.items():
        if key in _MESSAGE_KEYS or key.startswith(_MESSAGE_PREFIXES):
            continue
        if len(kept) >= r.limits.max_attributes:
            skipped += 1
            continue
        kept[key] = r.bounded(_without_secrets(key, value), key)
    if skipped:
        r.flag(f"attributes-dropped:{skipped}")
    return kept
