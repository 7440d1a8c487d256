"""The bounded summary of one test's trace that its score records carry into the reports (issue
21, part 4): counts, tokens, duration and errors of the whole trace, and its span tree (each
span's name, kind, timings, tool arguments and result, tokens) cut to a number of spans and each
text to a number of characters.

Made once per test (or concurrent case) when its ``llm_eval_trace`` capture ends
(:func:`summarise_trace`), every text redacted before it is cut
(:func:`~pytest_llmeval.core.redaction.redact_text`; tool arguments and results also have the
value under any secret-looking key hidden, :func:`~pytest_llmeval.core.redaction.hide_secrets`).
Read back from a report or an xdist worker by :meth:`TraceSummary.from_json`, which checks every
value and raises :class:`TraceSummaryError` naming the field: a malformed summary is never
half-read.

What was cut is marked, never silent: ``tree_cut`` counts the spans left out of the tree (the
counts still cover them), an entry's ``cut`` maps each text field that was cut to the number of
characters left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, final

from pytest_llmeval.core.redaction import hide_secrets, redact_text
from pytest_llmeval.core.trace import SPAN_KINDS, AgentStep, ModelCall, Span, ToolCall, Trace

__all__ = [
    "DEFAULT_TRACE_CHARS",
    "DEFAULT_TRACE_SPANS",
    "SpanEntry",
    "TraceSummary",
    "TraceSummaryError",
    "summarise_trace",
]

#: spans of a test's tree its records keep (``--llm-eval-trace-spans``)
DEFAULT_TRACE_SPANS = 100
#: characters of each text of a span (``--llm-eval-trace-chars``)
DEFAULT_TRACE_CHARS = 500

_EMPTY_CUT: Mapping[str, int] = MappingProxyType({})


class TraceSummaryError(ValueError):
    """A trace summary read back (a report, a worker's records) that is not one: ``field`` is
    where, relative to the summary (``tree[3].kind``), ``problem`` what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"trace summary {field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


@final
@dataclass(frozen=True, slots=True)
class SpanEntry:
    """One span of the tree: ``depth`` 0 for a root, ``parent`` the index of its parent entry
    in the tree (None for a root); ``start_s`` seconds after the trace's first span started,
    ``duration_s`` its wall time. Model spans carry ``model`` and tokens, tool spans ``tool``,
    ``arguments`` (JSON text) and ``result``, handoffs ``from_agent`` and ``to_agent``. ``cut``
    maps a text field cut short to the characters left out; ``flags`` are the capture's (see
    :attr:`pytest_llmeval.core.trace.Span.flags`)."""

    span_id: str
    name: str
    kind: str
    depth: int
    parent: int | None
    start_s: float
    duration_s: float
    error: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool: str | None = None
    arguments: str | None = None
    result: str | None = None
    from_agent: str | None = None
    to_agent: str | None = None
    flags: tuple[str, ...] = ()
    cut: Mapping[str, int] = field(default_factory=lambda: _EMPTY_CUT)

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON: the fields every entry has, then only those it fills."""
        out: dict[str, Any] = {
            "span_id": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "depth": self.depth,
            "parent": self.parent,
            "start_s": self.start_s,
            "duration_s": self.duration_s,
        }
        for name in _OPTIONAL_TEXT + _OPTIONAL_INT:
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        if self.flags:
            out["flags"] = list(self.flags)
        if self.cut:
            out["cut"] = dict(self.cut)
        return out


_OPTIONAL_TEXT = ("error", "model", "tool", "arguments", "result", "from_agent", "to_agent")
_OPTIONAL_INT = ("input_tokens", "output_tokens")
_ENTRY_REQUIRED = ("span_id", "name", "kind", "depth", "parent", "start_s", "duration_s")
_ENTRY_KEYS = frozenset(_ENTRY_REQUIRED + _OPTIONAL_TEXT + _OPTIONAL_INT + ("flags", "cut"))


@final
@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What the reports keep of a test's trace (see the module docstring). The counts cover
    every span the capture kept (``spans``), not only those in ``tree``; ``dropped`` spans the
    capture itself did not keep, ``unfinished`` those still open when the test ended.
    ``trace_id`` / ``root_span_id`` name the first root span (OpenTelemetry ids in hex, or an
    Agents SDK's ids), whatever the tree keeps."""

    spans: int
    model_calls: int
    tool_calls: int
    agent_steps: int
    errors: int
    input_tokens: int
    output_tokens: int
    duration_s: float
    dropped: int = 0
    unfinished: int = 0
    trace_id: str | None = None
    root_span_id: str | None = None
    tree: tuple[SpanEntry, ...] = ()
    tree_cut: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "agent_steps": self.agent_steps,
            "errors": self.errors,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "duration_s": self.duration_s,
            "dropped": self.dropped,
            "unfinished": self.unfinished,
            "trace_id": self.trace_id,
            "root_span_id": self.root_span_id,
            "tree": [e.to_json() for e in self.tree],
            "tree_cut": self.tree_cut,
        }

    @classmethod
    def from_json(cls, data: Any) -> TraceSummary:
        """The summary :meth:`to_json` wrote, every value checked; :class:`TraceSummaryError`
        naming the field for anything else."""
        if type(data) is not dict:
            raise TraceSummaryError("", f"a trace summary is a JSON object, not {_kind(data)}")
        unknown = sorted(set(data) - _SUMMARY_KEYS)
        if unknown:
            raise TraceSummaryError(unknown[0], "is not a field of a trace summary")
        counts = {name: _count(data, name, name) for name in _SUMMARY_COUNTS}
        tree_json = data.get("tree")
        if type(tree_json) is not list:
            raise TraceSummaryError("tree", f"must be a list, not {_kind(tree_json)}")
        tree = tuple(_entry(e, i, tree_json) for i, e in enumerate(tree_json))
        if counts["tree_cut"] + len(tree) != counts["spans"]:
            raise TraceSummaryError(
                "tree_cut",
                f"{counts['tree_cut']} spans cut + {len(tree)} in the tree is not the "
                f"{counts['spans']} spans counted",
            )
        return cls(
            **counts,
            duration_s=_seconds(data, "duration_s", "duration_s"),
            trace_id=_opt_text(data, "trace_id", "trace_id"),
            root_span_id=_opt_text(data, "root_span_id", "root_span_id"),
            tree=tree,
        )


_SUMMARY_COUNTS = (
    "spans",
    "model_calls",
    "tool_calls",
    "agent_steps",
    "errors",
    "input_tokens",
    "output_tokens",
    "dropped",
    "unfinished",
    "tree_cut",
)
_SUMMARY_KEYS = frozenset((*_SUMMARY_COUNTS, "duration_s", "trace_id", "root_span_id", "tree"))


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _count(data: Mapping[str, Any], key: str, where: str) -> int:
    if key not in data:
        raise TraceSummaryError(where, "is missing")
    value = data[key]
    if type(value) is not int or value < 0:
        raise TraceSummaryError(where, f"must be a whole number >= 0, not {value!r}")
    return value


def _seconds(data: Mapping[str, Any], key: str, where: str) -> float:
    if key not in data:
        raise TraceSummaryError(where, "is missing")
    value = data[key]
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise TraceSummaryError(where, f"must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def _opt_text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and type(value) is not str:
        raise TraceSummaryError(where, f"must be a string or null, not {_kind(value)}")
    return value


def _entry(data: Any, i: int, tree: list[Any]) -> SpanEntry:
    at = f"tree[{i}]"
    if type(data) is not dict:
        raise TraceSummaryError(at, f"a span entry is an object, not {_kind(data)}")
    unknown = sorted(set(data) - _ENTRY_KEYS)
    if unknown:
        raise TraceSummaryError(f"{at}.{unknown[0]}", "is not a field of a span entry")
    for key in ("span_id", "name", "kind"):
        if type(data.get(key)) is not str:
            raise TraceSummaryError(f"{at}.{key}", f"must be a string, not {_kind(data.get(key))}")
    if data["kind"] not in SPAN_KINDS:
        raise TraceSummaryError(
            f"{at}.kind", f"{data['kind']!r} is not one of {', '.join(SPAN_KINDS)}"
        )
    depth = _count(data, "depth", f"{at}.depth")
    parent = data.get("parent", "missing")
    if parent is None:
        if depth != 0:
            raise TraceSummaryError(f"{at}.depth", f"a root's depth is 0, not {depth}")
    elif type(parent) is not int or not 0 <= parent < i:
        raise TraceSummaryError(
            f"{at}.parent", f"must be null or the index of an earlier entry, not {parent!r}"
        )
    else:
        parent_depth = tree[parent].get("depth") if type(tree[parent]) is dict else None
        if depth != (parent_depth if type(parent_depth) is int else -2) + 1:
            raise TraceSummaryError(
                f"{at}.depth", f"{depth} is not one more than its parent's ({parent_depth!r})"
            )
    texts = {k: _opt_text(data, k, f"{at}.{k}") for k in _OPTIONAL_TEXT}
    ints: dict[str, int | None] = {}
    for k in _OPTIONAL_INT:
        ints[k] = None if data.get(k) is None else _count(data, k, f"{at}.{k}")
    flags = data.get("flags", [])
    if type(flags) is not list or not all(type(f) is str for f in flags):
        raise TraceSummaryError(f"{at}.flags", "must be a list of strings")
    cut = data.get("cut", {})
    if type(cut) is not dict or not all(
        k in (*_OPTIONAL_TEXT, "name") and type(v) is int and v > 0 for k, v in cut.items()
    ):
        raise TraceSummaryError(
            f"{at}.cut",
            "must map text fields (name, error, tool, arguments, ...) to the "
            "characters left out (whole numbers > 0)",
        )
    return _span_entry(
        span_id=data["span_id"],
        name=data["name"],
        kind=data["kind"],
        depth=depth,
        parent=parent,
        start_s=_seconds(data, "start_s", f"{at}.start_s"),
        duration_s=_seconds(data, "duration_s", f"{at}.duration_s"),
        flags=tuple(flags),
        cut=MappingProxyType(dict(cut)) if cut else _EMPTY_CUT,
        texts=texts,
        ints=ints,
    )


def _span_entry(
    *,
    span_id: str,
    name: str,
    kind: str,
    depth: int,
    parent: int | None,
    start_s: float,
    duration_s: float,
    flags: tuple[str, ...],
    cut: Mapping[str, int],
    texts: Mapping[str, str | None],
    ints: Mapping[str, int | None],
) -> SpanEntry:
    """A :class:`SpanEntry` with its optional texts and counts given by field name (one
    construction for the entries read from JSON and those built from a trace)."""
    return SpanEntry(
        span_id=span_id,
        name=name,
        kind=kind,
        depth=depth,
        parent=parent,
        start_s=start_s,
        duration_s=duration_s,
        flags=flags,
        cut=cut,
        error=texts["error"],
        model=texts["model"],
        tool=texts["tool"],
        arguments=texts["arguments"],
        result=texts["result"],
        from_agent=texts["from_agent"],
        to_agent=texts["to_agent"],
        input_tokens=ints.get("input_tokens"),
        output_tokens=ints.get("output_tokens"),
    )


# -- making a summary ------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    """A tool's arguments or result as text: JSON with secret-looking keys hidden, or the text
    itself."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(hide_secrets(value), ensure_ascii=False, default=repr)
    except ValueError:  # a cycle
        return repr(value)


def summarise_trace(
    trace: Trace, *, max_spans: int = DEFAULT_TRACE_SPANS, max_chars: int = DEFAULT_TRACE_CHARS
) -> TraceSummary:
    """The summary of ``trace``: its tree in depth-first order (each span before its children,
    siblings by start time) cut after ``max_spans`` entries, each text redacted then cut to
    ``max_chars`` characters."""
    if max_spans < 0 or max_chars < 1:
        raise ValueError("max_spans must be >= 0 and max_chars >= 1")
    spans = trace.spans
    ids = {s.span_id for s in spans}
    below: dict[str | None, list[Span]] = {}
    for s in spans:
        below.setdefault(s.parent_id if s.parent_id in ids else None, []).append(s)
    tools = {c.span_id: c for c in trace.tool_calls}  # arguments filled from the model's ask
    t0 = spans[0].start_ns if spans else 0
    tree: list[SpanEntry] = []
    placed: set[str] = set()

    def walk(parent_id: str | None, parent_ix: int | None, depth: int) -> None:
        stack: list[tuple[Span, int | None, int]] = [
            (s, parent_ix, depth) for s in reversed(below.get(parent_id, ()))
        ]
        while stack and len(tree) < max_spans:
            span, pix, d = stack.pop()
            if span.span_id in placed:
                continue
            placed.add(span.span_id)
            tree.append(_entry_of(span, pix, d, t0, tools, max_chars))
            ix = len(tree) - 1
            stack.extend((c, ix, d + 1) for c in reversed(below.get(span.span_id, ())))

    if max_spans:
        walk(None, None, 0)
    roots = below.get(None, [])
    first = roots[0] if roots else None
    return TraceSummary(
        spans=len(spans),
        model_calls=sum(1 for s in spans if isinstance(s.detail, ModelCall)),
        tool_calls=len(tools),
        agent_steps=sum(1 for s in spans if isinstance(s.detail, AgentStep)),
        errors=sum(1 for s in spans if s.error is not None),
        input_tokens=trace.input_tokens,
        output_tokens=trace.output_tokens,
        duration_s=trace.duration_s,
        dropped=trace.dropped,
        unfinished=trace.unfinished,
        trace_id=None if first is None else _cut_text(first.trace_id, 64)[0],
        root_span_id=None if first is None else _cut_text(first.span_id, 64)[0],
        tree=tuple(tree),
        tree_cut=len(spans) - len(tree),
    )


def _cut_text(text: str, limit: int) -> tuple[str, int]:
    clean = redact_text(text)
    return (clean, 0) if len(clean) <= limit else (clean[:limit], len(clean) - limit)


def _entry_of(
    span: Span,
    parent: int | None,
    depth: int,
    t0: int,
    tools: Mapping[str, ToolCall],
    limit: int,
) -> SpanEntry:
    texts: dict[str, str | None] = dict.fromkeys(_OPTIONAL_TEXT)
    ints: dict[str, int | None] = {}
    d = span.detail
    texts["error"] = span.error
    if isinstance(d, ModelCall):
        texts["model"] = d.response_model or d.model
        ints = {"input_tokens": d.input_tokens, "output_tokens": d.output_tokens}
    elif isinstance(d, ToolCall):
        call = tools.get(span.span_id, d)
        texts["tool"] = call.name
        if call.arguments is not None:
            texts["arguments"] = _json_text(call.arguments)
        elif call.arguments_raw is not None:
            texts["arguments"] = call.arguments_raw
        if call.result is not None:
            texts["result"] = _json_text(call.result)
    elif isinstance(d, AgentStep) and d.kind == "handoff":
        texts["from_agent"], texts["to_agent"] = d.from_agent, d.to_agent
    cut: dict[str, int] = {}
    kept: dict[str, str | None] = dict.fromkeys(_OPTIONAL_TEXT)
    for key, text in (("name", span.name), *texts.items()):
        if text is None:
            kept[key] = None
            continue
        kept[key], lost = _cut_text(text, limit)
        if lost:
            cut[key] = lost
    name = kept.pop("name") or ""
    return _span_entry(
        span_id=span.span_id[:64],
        name=name,
        kind=span.kind,
        depth=depth,
        parent=parent,
        start_s=max(0, span.start_ns - t0) / 1e9,
        duration_s=span.duration_s,
        flags=tuple(f[:limit] for f in span.flags[:32]),
        cut=MappingProxyType(cut) if cut else _EMPTY_CUT,
        texts=kept,
        ints=ints,
    )
