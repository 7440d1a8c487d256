"""Reading what agents and chats leave behind: tool calls (OpenAI's and the plain form), the
rendering of a trajectory for a judge prompt, and a conversation's messages with the turn under
test. Shared by the agent, conversation and classifier scorers; every malformed value is a
:class:`~pytest_llmeval.core.errors.ScorerInputError` naming the scorer, the field and where."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from pytest_llmeval.core.errors import ScorerInputError, describe_value
from pytest_llmeval.core.trace import Trace
from pytest_llmeval.judge.step import render_value
from pytest_llmeval.scorers.traces import (
    ToolCall as ToolCall,  # the calls extract_tool_calls returns (public here)
)
from pytest_llmeval.scorers.traces import (
    check_trace,
    render_trace,
    trace_calls,
)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def extract_tool_calls(scorer: str, field: str, value: Any) -> list[ToolCall]:
    """The tool calls in ``value`` (messages, calls or names; see the module docstring), in order.

    A :class:`~pytest_llmeval.core.trace.Trace` gives the tools it ran
    (:func:`pytest_llmeval.scorers.traces.trace_calls`: a trace with no spans, or one whose
    model asked for tools while no tool run was captured, is an input error).

    Raises :class:`ScorerInputError` (``scorer``, ``field``) when ``value`` is not a list or an
    item is not a message, a call or a name.
    """
    if isinstance(value, Trace):
        return trace_calls(scorer, field, value)
    if not isinstance(value, (list, tuple)):
        raise ScorerInputError(
            scorer,
            field,
            "is missing" if value is None else f"is {describe_value(value)}, not a list",
            hint="Pass a list of chat messages, of calls {'name': ..., 'arguments': ...} "
            "or of tool names",
        )
    calls: list[ToolCall] = []
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        if isinstance(item, Mapping) and "role" in item:
            calls.extend(_message_calls(scorer, field, where, item))
        else:
            calls.append(_read_call(scorer, field, where, item))
    return calls


def _message_calls(
    scorer: str, field: str, where: str, message: Mapping[str, Any]
) -> list[ToolCall]:
    """The calls in one chat message's ``tool_calls`` (none when it has none)."""
    tool_calls = message.get("tool_calls")
    if tool_calls is None:
        return []
    if not isinstance(tool_calls, (list, tuple)):
        raise _bad(
            scorer, field, where, f"'tool_calls' is {describe_value(tool_calls)}, not a list"
        )
    return [
        _read_call(scorer, field, f"{where}.tool_calls[{j}]", call)
        for j, call in enumerate(tool_calls)
    ]


def _bad(scorer: str, field: str, where: str, problem: str) -> ScorerInputError:
    return ScorerInputError(
        scorer,
        field,
        f"has a malformed tool call at {where}: {problem}",
        hint="A call is {'name': str, 'arguments': dict or JSON text}, an OpenAI tool call "
        "{'type': 'function', 'function': {'name': ..., 'arguments': ...}} or a tool name",
    )


def _read_call(scorer: str, field: str, where: str, item: Any) -> ToolCall:
    if isinstance(item, str):
        if not item:
            raise _bad(scorer, field, where, "the tool name is empty")
        return ToolCall(item, {}, where)
    if not isinstance(item, Mapping):
        raise _bad(scorer, field, where, f"it is {describe_value(item)}, not a dict or a name")
    prefix = ""
    body: Mapping[str, Any] = item
    if "function" in item:
        function = item["function"]
        if not isinstance(function, Mapping):
            raise _bad(
                scorer, field, where, f"'function' is {describe_value(function)}, not a dict"
            )
        kind = item.get("type", "function")
        if kind != "function":
            raise _bad(scorer, field, where, f"'type' is {kind!r}, not 'function'")
        body, prefix = function, "function."
    if "name" not in body:
        raise _bad(scorer, field, where, f"it has no '{prefix}name'")
    name = body["name"]
    if not isinstance(name, str) or not name:
        raise _bad(
            scorer,
            field,
            where,
            f"'{prefix}name' is {describe_value(name)}, not a non-empty string",
        )
    return ToolCall(
        name, _read_arguments(scorer, field, where, prefix, body.get("arguments")), where
    )


def _read_arguments(
    scorer: str, field: str, where: str, prefix: str, raw: Any
) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = _STRICT_DECODER.decode(raw)
        except (ValueError, RecursionError) as exc:
            raise _bad(
                scorer, field, where, f"'{prefix}arguments' is not valid JSON ({exc})"
            ) from None
        if not isinstance(parsed, dict):
            raise _bad(
                scorer,
                field,
                where,
                f"'{prefix}arguments' is JSON for {describe_value(parsed)}, not an object",
            )
        return parsed
    if isinstance(raw, Mapping):
        return raw
    raise _bad(
        scorer,
        field,
        where,
        f"'{prefix}arguments' is {describe_value(raw)}, not a dict or JSON text",
    )


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(value)


def _content_text(content: Any) -> str:
    """A message's content as text: a string as it is, a list of parts by their text."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, (list, tuple)) and all(
        isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in content
    ):
        return "\n".join(p["text"] for p in content)
    return _compact(content)


def render_trajectory(scorer: str, field: str, value: Any) -> str:
    """A readable transcript of an agent's trajectory for a judge prompt, one line per step::

        user: plan my trip to Rome
        assistant -> search_flights({"to": "Rome"})
        tool (call_0): 3 flights found
        assistant: Booked.

    ``value`` is a list of chat messages and/or calls (as for ``tool_correctness``), or text
    (used as it is), or a :class:`~pytest_llmeval.core.trace.Trace` (its bounded rendering,
    :func:`pytest_llmeval.scorers.traces.render_trace`). Any other value is JSON. A malformed
    tool call is a :class:`ScorerInputError` naming ``scorer``, ``field`` and where the call
    sits.
    """
    if isinstance(value, Trace):
        check_trace(scorer, field, value)
        return render_trace(value)
    if not isinstance(value, (list, tuple)):
        return render_value(field, value)
    lines: list[str] = []
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        if isinstance(item, Mapping) and "role" in item:
            role = str(item["role"])
            text = _content_text(item.get("content"))
            if role == "tool" and item.get("tool_call_id") is not None:
                role = f"tool ({item['tool_call_id']})"
            if text:
                lines.append(f"{role}: {text}")
            calls = _message_calls(scorer, field, where, item)
            for call in calls:
                lines.append(f"{role} -> {call.name}({_compact(call.arguments)})")
            if not text and not calls:
                lines.append(f"{role}: (empty)")
        else:
            call = _read_call(scorer, field, where, item)
            lines.append(f"call -> {call.name}({_compact(call.arguments)})")
    return "\n".join(lines) if lines else "(no steps)"


def _first_user_message(value: Any) -> str | None:
    if isinstance(value, Trace):
        for call in value.model_calls:
            found = _first_user_message(list(call.input_messages))
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, Mapping) and item.get("role") == "user":
                text = _content_text(item.get("content"))
                if text:
                    return text
    return None


def key_traces(
    inputs: Mapping[str, Any], convert: Callable[[str, Trace], Any]
) -> Mapping[str, Any]:
    """``inputs`` with each :class:`~pytest_llmeval.core.trace.Trace` value replaced by
    ``convert(field, trace)``: the normalised trajectory a scorer reads, for its cache key
    (a changed trace is a new key; ids and timings the scorer does not read are left out, so
    the same trajectory run again is a hit). ``inputs`` itself when it holds no trace."""
    if not any(isinstance(v, Trace) for v in inputs.values()):
        return inputs
    return {k: {"trace": convert(k, v)} if isinstance(v, Trace) else v for k, v in inputs.items()}


def calls_key(scorer: str) -> Callable[[str, Trace], Any]:
    """The key material of a trace read as tool calls (see :func:`key_traces`)."""

    def convert(field: str, trace: Trace) -> Any:
        return [c.key() for c in extract_tool_calls(scorer, field, trace)]

    return convert


ROLES = ("system", "user", "assistant", "tool")


_HINT = (
    "Pass messages=[{'role': 'user'|'assistant'|'system'|'tool', 'content': ...}, ...] "
    "(a list, or its JSON text)"
)


@final
@dataclass(frozen=True)
class Conversation:
    """A checked conversation: its messages, their transcript lines and the turn under test."""

    messages: tuple[Mapping[str, Any], ...]
    #: one rendered line (or lines) per message, prefixed with ``[index]``
    lines: tuple[str, ...]
    #: the message index of the assistant turn under test
    turn: int

    def role(self, index: int) -> str:
        return str(self.messages[index]["role"])

    def assistant_turns(self) -> list[int]:
        """Message indices of the assistant turns up to and including the turn under test."""
        return [i for i in range(self.turn + 1) if self.role(i) == "assistant"]

    def transcript(self, start: int, stop: int) -> str:
        """Messages ``start`` to ``stop - 1`` as a transcript (a note when there are none)."""
        chosen = self.lines[max(start, 0) : stop]
        return "\n".join(chosen) if chosen else "(no earlier messages)"

    def content(self, index: int) -> str:
        """Message ``index``'s content as text (its tool calls as a transcript line when it has
        no text): what single-turn scorers take as ``output``."""
        text = _content_text(self.messages[index].get("content"))
        return text if text else self.text(index)

    def text(self, index: int) -> str:
        """Message ``index`` as shown to the judge, without its ``[index]`` prefix."""
        return self.lines[index].split(" ", 1)[1]


def _bad_message(
    scorer: str, where: str, problem: str, field: str = "messages"
) -> ScorerInputError:
    return ScorerInputError(
        scorer, field, f"{problem} at {where}" if where else problem, hint=_HINT
    )


def read_conversation(scorer: str, value: Any, turn: Any = None) -> Conversation:
    """Check ``value`` (the ``messages`` input) and pick the turn under test (``turn``: a message
    index, default the last assistant message). Raises :class:`ScorerInputError` naming
    ``scorer``, the field (``messages`` or ``turn``) and the message index."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ScorerInputError(
                scorer, "messages", f"is text that is not JSON ({exc})", hint=_HINT
            ) from None
    if not isinstance(value, (list, tuple)):
        raise ScorerInputError(
            scorer,
            "messages",
            "is missing" if value is None else f"is {describe_value(value)}, not a list",
            hint=_HINT,
        )
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise _bad_message(scorer, where, f"has {describe_value(message)}, not a message dict")
        if "role" not in message:
            raise _bad_message(scorer, where, "has a message without 'role'")
        role = message["role"]
        if role not in ROLES:
            raise _bad_message(
                scorer,
                where,
                f"has an unknown role {role!r} (expected one of {', '.join(ROLES)})",
            )
        content = message.get("content")
        has_calls = role == "assistant" and bool(message.get("tool_calls"))
        if content is None and not has_calls:
            raise _bad_message(scorer, where, f"has a {role} message without 'content'")
    # Validates every tool call (errors name messages[i].tool_calls[j]).
    render_trajectory(scorer, "messages", value)
    lines = tuple(
        f"[{i}] {render_trajectory(scorer, 'messages', [m])}" for i, m in enumerate(value)
    )
    assistants = [i for i, m in enumerate(value) if m["role"] == "assistant"]
    if not assistants:
        raise ScorerInputError(
            scorer,
            "messages",
            f"has no assistant message ({len(value)} messages)",
            hint="A conversation scorer judges assistant turns; add the assistant's replies",
        )
    if turn is None:
        chosen = assistants[-1]
    else:
        if isinstance(turn, str) and re.fullmatch(r"\s*-?\d+\s*", turn):
            turn = int(turn)  # a CSV dataset column holds text
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise ScorerInputError(
                scorer,
                "turn",
                f"is {describe_value(turn)}, not a message index",
                hint="Pass turn=<index of an assistant message in messages>",
            )
        if not -len(value) <= turn < len(value):
            raise ScorerInputError(
                scorer,
                "turn",
                f"is {turn}, out of range for {len(value)} messages",
                hint="Pass turn=<index of an assistant message in messages>",
            )
        chosen = turn % len(value)
        if value[chosen]["role"] != "assistant":
            raise ScorerInputError(
                scorer,
                "turn",
                f"is {turn}, but messages[{chosen}] is a {value[chosen]['role']} message",
                hint=f"Assistant messages are at {', '.join(map(str, assistants))}",
            )
    return Conversation(tuple(value), lines, chosen)
