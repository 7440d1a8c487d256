"""Assertions on what an agent did (issue 21, part 3): ``trajectory_match`` (the tool calls made
against an expected list, in one of five modes) and ``trace_budget`` (the limits a team gates
on: tool calls, model calls, tokens, cost, wall time, tool errors), both deterministic, both
1.0 (pass) or 0.0 (fail): assert them with ``min=1`` (or ``threshold=1``); with no bound,
``assert_score`` only records the score, as for every scorer. ``trace_usage`` gives one of the
budget's quantities as a lower-is-better score, for bounds and gates on the number itself.

``output`` is a captured :class:`~pytest_llmeval.core.trace.Trace` (``llm_eval_trace``);
``trajectory_match`` also takes the tool calls in any form the agent scorers read (chat
messages, calls, names). A trace with nothing captured is an input error, never an empty
trajectory (:func:`pytest_llmeval.scorers.traces.check_trace`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, final

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError, describe_value
from pytest_llmeval.core.scores import Score
from pytest_llmeval.core.trace import ModelCall, Trace
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.prices import price_of
from pytest_llmeval.scorers.agents import _check_choice, _json_equal
from pytest_llmeval.scorers.lexical import make_score
from pytest_llmeval.scorers.messages import (
    ToolCall,
    _compact,
    _read_arguments,
    calls_key,
    extract_tool_calls,
    key_traces,
)
from pytest_llmeval.scorers.structured import _json_safe
from pytest_llmeval.scorers.traces import check_trace, check_trace_inputs

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = ["LIMITS", "MEASURES", "TraceBudget", "TraceUsage", "TrajectoryMatch", "measure_trace"]

MODES = ("exact", "in_order", "any_order", "subset", "superset")
ARGUMENT_MODES = ("exact", "subset", "ignore")


# -- trajectory_match -----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class _Expected:
    """One expected call: a name, and the arguments to check (None: the name only)."""

    name: str
    arguments: Mapping[str, Any] | None
    index: int


_EXPECTED_KEYS = frozenset({"name", "arguments"})
_OPENAI_KEYS = frozenset({"id", "type", "function"})
_EXPECTED_HINT = (
    "Give expected as a list of tool names and/or {'name': ..., 'arguments': {...}} dicts "
    "(arguments left out: the name alone is checked)"
)


def _read_expected(scorer: str, value: Any) -> list[_Expected]:
    """The expected calls, strictly: an unknown key (``args`` for ``arguments``) would
    otherwise leave the arguments unchecked, a pass nobody asked for."""
    if isinstance(value, Trace) or not isinstance(value, (list, tuple)):
        raise ScorerInputError(
            scorer,
            "expected",
            "is missing" if value is None else f"is {describe_value(value)}, not a list",
            hint=_EXPECTED_HINT,
        )
    out: list[_Expected] = []
    for i, item in enumerate(value):
        where = f"expected[{i}]"
        if isinstance(item, str):
            if not item:
                raise ScorerInputError(scorer, "expected", f"{where} is an empty tool name")
            out.append(_Expected(item, None, i))
            continue
        if not isinstance(item, Mapping):
            raise ScorerInputError(
                scorer,
                "expected",
                f"{where} is {describe_value(item)}, not a tool name or a dict",
                hint=_EXPECTED_HINT,
            )
        body: Mapping[str, Any] = item
        prefix = ""
        if "function" in item:
            extra = sorted(set(map(str, item)) - _OPENAI_KEYS)
            if extra or item.get("type", "function") != "function":
                raise ScorerInputError(
                    scorer,
                    "expected",
                    f"{where} is not an OpenAI function call (keys {sorted(map(str, item))})",
                    hint=_EXPECTED_HINT,
                )
            function = item["function"]
            if not isinstance(function, Mapping):
                raise ScorerInputError(
                    scorer, "expected", f"{where}.function is {describe_value(function)}"
                )
            body, prefix = function, "function."
        unknown = sorted(set(map(str, body)) - _EXPECTED_KEYS)
        if unknown:
            raise ScorerInputError(
                scorer,
                "expected",
                f"{where} has unknown key(s) {', '.join(repr(k) for k in unknown)}",
                hint=_EXPECTED_HINT,
            )
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ScorerInputError(
                scorer,
                "expected",
                f"{where}.{prefix}name is {describe_value(name)}, not a non-empty string",
                hint=_EXPECTED_HINT,
            )
        arguments = None
        if "arguments" in body:
            raw = body["arguments"]
            if raw is None:
                raise ScorerInputError(
                    scorer,
                    "expected",
                    f"{where}.{prefix}arguments is None",
                    hint="Leave 'arguments' out to check the name only, or give {} for a call "
                    "with no arguments",
                )
            arguments = _read_arguments(scorer, "expected", where, prefix, raw)
        out.append(_Expected(name, arguments, i))
    return out


def _subset(expected: Any, actual: Any) -> bool:
    """Whether every key of ``expected`` is in ``actual`` with a value equal as JSON; objects
    nested in objects recursively so, anything else (lists included) equal."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    return _json_equal(expected, actual)


class TrajectoryMatch(Scorer):
    """Whether the tool calls made match the expected ones: 1.0 or 0.0 (pass with ``min=1``).

    ``expected`` lists the calls: tool names (the name alone is checked) and/or ``{"name": ...,
    "arguments": {...}}`` dicts (an OpenAI function call works too). ``output``: a
    :class:`~pytest_llmeval.core.trace.Trace`, or calls in any form the agent scorers read.

    ``mode`` (default ``"exact"``), with A the calls made and E the expected:

    - ``"exact"``: A and E have the same length and A[i] matches E[i];
    - ``"in_order"``: E is a subsequence of A (each expected call made, in that order; other
      calls before, between and after allowed);
    - ``"any_order"``: A and E pair one to one, in any order (the same calls, reordered);
    - ``"subset"``: every call made pairs with a distinct expected call (A is within E: no
      call beyond the expected ones; some expected calls may be missing);
    - ``"superset"``: every expected call pairs with a distinct call made (A covers E: extra
      calls allowed).

    Pairs are one to one (a call made twice matches two expected entries, never one twice) and
    found by maximum matching, so the order of the entries never decides a verdict. With
    ``expected=[]``, ``"in_order"`` and ``"superset"`` would pass whatever the agent did: that is
    an input error (use ``"exact"`` to assert that no tool was called).

    ``arguments`` (default ``"exact"``): how an entry's arguments are compared; ``"exact"``:
    equal as JSON (1 == 1.0, true != 1, key order ignored); ``"subset"``: each expected key is
    present with an equal value (objects within objects compared the same way, lists
    exactly); ``"ignore"``: names only. An entry without arguments checks its name only. A
    traced call whose arguments were cut or unreadable never matches an entry with arguments.

    ``allow_tool_errors`` (default False): a call whose tool run ended in an error fails the
    match even when the calls are the expected ones (set True to judge the calls alone).

    ``metadata``: ``called`` (names made), ``missing`` (expected entries not matched: index,
    name, arguments), ``extra`` (calls made not matched, where the mode forbids them: index,
    name, arguments), ``mismatched`` (an expected entry and a call of the same name whose
    arguments differ: both, and why), ``tool_errors`` (calls that ended in an error),
    ``requested_not_run`` (tool names the model asked for beyond the tool runs captured: a
    handoff, a refused call, or a tool without instrumentation; named in the rationale, not a
    verdict of its own).
    """

    name = "trajectory_match"
    aliases = ("TrajectoryMatch",)
    required_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {
        "mode": "exact",
        "arguments": "exact",
        "allow_tool_errors": False,
    }
    description = "the tool calls made vs an expected list (exact, in order, any order, ...)"

    def validate_options(self) -> None:
        _check_choice(self.name, "mode", self.options["mode"], MODES)
        _check_choice(self.name, "arguments", self.options["arguments"], ARGUMENT_MODES)
        if not isinstance(self.options["allow_tool_errors"], bool):
            raise ScorerConfigError(
                self.name,
                "allow_tool_errors",
                f"is {describe_value(self.options['allow_tool_errors'])}, not True or False",
            )

    def is_self_contained(self) -> bool:
        return type(self) is TrajectoryMatch

    def stores_results(self) -> bool:
        # cheaper than a lookup: computed every time (never a stale stored verdict either)
        return type(self) is not TrajectoryMatch

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        check_trace_inputs(self.name, inputs, tools=True)

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return key_traces(inputs, calls_key(self.name))

    def _matches(self, call: ToolCall, entry: _Expected) -> bool:
        if call.name != entry.name:
            return False
        mode = self.options["arguments"]
        if entry.arguments is None or mode == "ignore":
            return True
        if call.problem is not None:
            return False
        if mode == "exact":
            return _json_equal(call.arguments, entry.arguments)
        return _subset(entry.arguments, call.arguments)

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        wanted = _read_expected(self.name, inputs.get("expected"))
        made = extract_tool_calls(self.name, "output", inputs.get("output"))
        mode = self.options["mode"]
        if not wanted and mode in ("in_order", "superset"):
            raise ScorerInputError(
                self.name,
                "expected",
                f"is empty, so mode {mode!r} would pass whatever the agent did",
                hint="Use mode='exact' with expected=[] to assert that no tool was called",
            )
        ok = [[self._matches(m, w) for w in wanted] for m in made]
        pairs: dict[int, int]  # expected index -> made index
        if mode == "exact":
            pairs = {j: j for j in range(min(len(made), len(wanted))) if ok[j][j]}
        elif mode == "in_order":
            pairs = _in_order(ok, len(made), len(wanted))
        else:
            pairs = _max_matching(ok, len(made), len(wanted))
        paired_made = set(pairs.values())
        missing_idx = [j for j in range(len(wanted)) if j not in pairs]
        extra_idx = [i for i in range(len(made)) if i not in paired_made]
        if mode == "exact":
            passed = len(made) == len(wanted) and not missing_idx
        elif mode in ("in_order", "superset"):
            passed = not missing_idx
        elif mode == "subset":
            passed = not extra_idx
        else:  # any_order
            passed = not missing_idx and not extra_idx
        # what to report as missing / extra: only what the mode forbids
        report_missing = missing_idx if mode != "subset" else []
        report_extra = extra_idx if mode in ("exact", "any_order", "subset") else []
        mismatched = _mismatches(made, wanted, report_missing, extra_idx, mode)
        errors = [
            {"index": i, "name": c.name, "error": c.error}
            for i, c in enumerate(made)
            if c.error is not None
        ]
        if errors and not self.options["allow_tool_errors"]:
            passed = False
        parts = []
        # an entry and a call of its name whose arguments differ are said once, as a mismatch
        explained_exp = {m["expected_index"] for m in mismatched}
        explained_out = {m["output_index"] for m in mismatched}
        said_missing = [j for j in report_missing if j not in explained_exp]
        said_extra = [i for i in report_extra if i not in explained_out]
        if said_missing:
            parts.append("missing: " + ", ".join(_entry_text(wanted[j]) for j in said_missing))
        if said_extra:
            parts.append("extra: " + ", ".join(made[i].name for i in said_extra))
        for m in mismatched:
            parts.append(f"{m['name']} (expected[{m['expected_index']}]): {m['why']}")
        if mode == "exact" and not report_missing and not report_extra and not passed:
            parts.append("the calls differ in order or number")
        if errors and not self.options["allow_tool_errors"]:
            parts.append("tool errors: " + ", ".join(f"{e['name']} ({e['error']})" for e in errors))
        rationale = "; ".join(parts) if not passed else f"the calls match ({mode})"
        output = inputs.get("output")
        unrun = _requested_not_run(output) if isinstance(output, Trace) else []
        if unrun:
            rationale += (
                f" (the model also asked for {', '.join(unrun)}, with no tool run captured: "
                "a handoff, a refused call, or a tool without instrumentation)"
            )
        return make_score(
            1.0 if passed else 0.0,
            self.name,
            rationale=rationale or "the calls do not match",
            metadata={
                "mode": mode,
                "called": [c.name for c in made],
                "missing": [_entry_json(wanted[j]) for j in report_missing],
                "extra": [_call_json(i, made[i]) for i in report_extra],
                "mismatched": mismatched,
                "tool_errors": errors,
                "requested_not_run": unrun,
            },
        )


def _requested_not_run(trace: Trace) -> list[str]:
    """The tool names the trace's model calls asked for more often than a tool run of that
    name was captured, with repeats (a handoff of the Agents SDK is asked for as a tool)."""
    asked = Counter(name for call in trace.model_calls for name in call.requested_tools)
    return sorted((asked - Counter(trace.tool_names)).elements())


def _in_order(ok: list[list[bool]], n_made: int, n_wanted: int) -> dict[int, int]:
    """Expected entries paired in order with calls made, each with the earliest call after the
    previous pair that matches it (earliest-first is optimal for a subsequence test)."""
    pairs: dict[int, int] = {}
    i = 0
    for j in range(n_wanted):
        while i < n_made and not ok[i][j]:
            i += 1
        if i == n_made:
            break
        pairs[j] = i
        i += 1
    return pairs


def _max_matching(ok: list[list[bool]], n_made: int, n_wanted: int) -> dict[int, int]:
    """A maximum one-to-one pairing of expected entries with calls made (augmenting paths; an
    optimal 0/1 assignment when long paths could outgrow the recursion limit)."""
    if min(n_made, n_wanted) > 200:
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        weights = np.array([[1.0 if x else 0.0 for x in row] for row in ok], dtype=np.float64)
        rows, cols = linear_sum_assignment(weights, maximize=True)
        return {j: i for i, j in zip(rows.tolist(), cols.tolist(), strict=True) if ok[i][j]}
    owner: dict[int, int] = {}  # made index -> expected index

    def augment(j: int, seen: set[int]) -> bool:
        for i in range(n_made):
            if ok[i][j] and i not in seen:
                seen.add(i)
                if i not in owner or augment(owner[i], seen):
                    owner[i] = j
                    return True
        return False

    for j in range(n_wanted):
        augment(j, set())
    return {j: i for i, j in owner.items()}


def _mismatches(
    made: list[ToolCall], wanted: list[_Expected], missing: list[int], extra: list[int], mode: str
) -> list[dict[str, Any]]:
    """For each unmatched expected entry with arguments, the call of its name that explains it
    (at its position for ``exact``, else the first unmatched call of that name)."""
    out: list[dict[str, Any]] = []
    free = list(extra) if mode != "exact" else []
    for j in missing:
        entry = wanted[j]
        if entry.arguments is None:
            continue
        candidates = [j] if mode == "exact" and j < len(made) else free
        found = next((i for i in candidates if made[i].name == entry.name), None)
        if found is None:
            continue
        call = made[found]
        if mode != "exact":
            free.remove(found)
        why = call.problem or (
            f"arguments {_short(dict(call.arguments))} do not match the expected "
            f"{_short(dict(entry.arguments))}"
        )
        out.append(
            {
                "expected_index": j,
                "output_index": found,
                "name": entry.name,
                "expected_arguments": _json_safe(dict(entry.arguments)),
                "output_arguments": _json_safe(dict(call.arguments))
                if call.problem is None
                else call.raw,
                "why": why,
            }
        )
    return out


def _short(value: Any, limit: int = 200) -> str:
    """A value for a rationale: its JSON, cut (the metadata keeps it whole)."""
    text = _compact(_json_safe(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _entry_text(entry: _Expected) -> str:
    if entry.arguments is None:
        return entry.name
    return f"{entry.name}({_short(dict(entry.arguments))})"


def _entry_json(entry: _Expected) -> dict[str, Any]:
    return {
        "index": entry.index,
        "name": entry.name,
        "arguments": None if entry.arguments is None else _json_safe(dict(entry.arguments)),
    }


def _call_json(index: int, call: ToolCall) -> dict[str, Any]:
    return {
        "index": index,
        "name": call.name,
        "arguments": _json_safe(dict(call.arguments)) if call.problem is None else call.raw,
    }


# -- trace_budget and trace_usage ----------------------------------------------------------------

#: what a trace's budget measures: name -> (label, a whole number?)
MEASURES: Mapping[str, tuple[str, bool]] = {
    "tool_calls": ("tool calls", True),
    "model_calls": ("model calls", True),
    "input_tokens": ("input tokens", True),
    "output_tokens": ("output tokens", True),
    "total_tokens": ("total tokens", True),
    "cost_usd": ("cost (USD)", False),
    "duration_s": ("wall time (s)", False),
    "tool_errors": ("tool errors", True),
}
#: trace_budget's limit options: ``max_<measure>``
LIMITS: Mapping[str, str] = {f"max_{m}": m for m in MEASURES}
_TOKENS = ("input_tokens", "output_tokens", "total_tokens", "cost_usd")


def _check_prices(scorer: str, prices: Any) -> None:
    if prices is None:
        return
    if not isinstance(prices, Mapping):
        raise ScorerConfigError(scorer, "prices", f"is {describe_value(prices)}, not a dict")
    for model, price in prices.items():
        if (
            not isinstance(price, Sequence)
            or isinstance(price, str)
            or not 2 <= len(price) <= 3
            or any(
                isinstance(p, bool)
                or not isinstance(p, (int, float))
                or not math.isfinite(p)
                or p < 0
                for p in price
            )
        ):
            raise ScorerConfigError(
                scorer,
                "prices",
                f"has {describe_value(price)} for {model!r}",
                hint="A price is (USD per 1M input tokens, USD per 1M output tokens), finite "
                "numbers >= 0",
            )


def measure_trace(
    scorer: str,
    value: Any,
    measures: Sequence[str],
    ctx: ScoringContext,
    prices: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """``measures`` (names of :data:`MEASURES`) of the trace ``value``, checked first: never a
    count that reads as 0 because it is unknown (see :class:`TraceBudget`)."""
    if not isinstance(value, Trace):
        raise ScorerInputError(
            scorer,
            "output",
            f"is {describe_value(value)}, not a Trace",
            hint="Pass output=llm_eval_trace (the trace the fixture captured)",
        )
    trace = value
    check_trace(
        scorer, "output", trace, tools="tool_calls" in measures or "tool_errors" in measures
    )
    models = trace.model_calls
    of_models = [m for m in measures if m in _TOKENS or m == "model_calls"]
    if of_models and not models:
        raise ScorerInputError(
            scorer,
            "output",
            "is a trace with no model call captured, so "
            + ", ".join(MEASURES[m][0] for m in of_models)
            + " cannot be counted (the model's instrumentation seems missing)",
            hint="Instrument the model calls too, or leave those limits out",
        )
    of_tokens = [m for m in measures if m in _TOKENS]
    if of_tokens:
        unreported = [c.name for c in models if c.input_tokens is None or c.output_tokens is None]
        negative = [
            c.name for c in models if (c.input_tokens or 0) < 0 or (c.output_tokens or 0) < 0
        ]
        if unreported or negative:
            bad = unreported or negative
            what = "reported no token counts" if unreported else "reported negative token counts"
            raise ScorerInputError(
                scorer,
                "output",
                f"has {len(bad)} model call(s) that {what} "
                f"({', '.join(sorted(set(bad))[:3])}), so "
                + ", ".join(MEASURES[m][0] for m in of_tokens)
                + " cannot be checked (an unknown count is not 0)",
                hint="Use an instrumentation that records usage (gen_ai.usage.*), or leave "
                "the token and cost limits out",
            )
    out: dict[str, float] = {}
    for m in measures:
        if m == "tool_calls":
            out[m] = len(trace.tool_calls)
        elif m == "model_calls":
            out[m] = len(models)
        elif m == "input_tokens":
            out[m] = trace.input_tokens
        elif m == "output_tokens":
            out[m] = trace.output_tokens
        elif m == "total_tokens":
            out[m] = trace.total_tokens
        elif m == "duration_s":
            out[m] = trace.duration_s
        elif m == "tool_errors":
            out[m] = sum(1 for c in trace.tool_calls if c.error is not None)
        else:
            out[m] = _cost(scorer, models, {**ctx.settings.prices, **(prices or {})})
    return out


def _cost(scorer: str, models: Sequence[ModelCall], overrides: Mapping[str, Any]) -> float:
    total = 0.0
    for call in models:
        names = [n for n in (call.response_model, call.model) if n]
        price = next((p for p in (price_of(n, overrides) for n in names) if p is not None), None)
        if price is None:
            shown = " / ".join(repr(n) for n in names) or "(no model name recorded)"
            raise ScorerConfigError(
                scorer,
                "prices",
                f"has no price for the model {shown} of model call {call.name!r}, so the "
                "trace's cost is unknown (never counted as 0)",
                hint="Give prices={'<model>': (usd_per_1m_input, usd_per_1m_output)} or add it "
                "to llm_eval_prices in the ini file",
            )
        p_in, p_out, _ = price
        total += ((call.input_tokens or 0) * p_in + (call.output_tokens or 0) * p_out) / 1e6
    return total


class TraceBudget(Scorer):
    """Whether a trace kept within every limit given: 1.0 or 0.0 (pass with ``min=1``).

    Limits (keyword options, each off by default; at least one is required):
    ``max_tool_calls``, ``max_model_calls``, ``max_input_tokens``, ``max_output_tokens``,
    ``max_total_tokens``, ``max_tool_errors`` (whole numbers >= 0; ``max_tool_errors=0`` is
    "no tool errors"), ``max_cost_usd`` and ``max_duration_s`` (numbers >= 0). A value equal
    to its limit is within it. NaN, infinity, negative numbers, booleans and fractions for a
    count are configuration errors.

    What is measured: tool runs and model calls of the trace; tokens summed over its model
    calls; cost priced per model call from ``prices`` (``{"model": (input, output)}`` USD per
    million tokens, over the run's ``llm_eval_prices``, over the built-in table of
    ``judge/prices.py``; the response model's price first, then the requested model's);
    wall time from the first span's start to the last span's end; tool runs that ended in an
    error.

    Never a silent zero: a token or cost limit on a trace with a model call that reported no
    (or negative) token counts, or a token, cost or model-call limit on a trace with no model
    call captured, is an input error, as is a cost limit for a model without a price (a
    configuration error naming ``prices``); a tool-call or tool-error limit on a trace whose
    model asked for tools while no tool run was captured is an input error.

    ``rationale`` names each limit exceeded, by how much (``tool calls 7 > max 5 (+2)``);
    ``metadata``: ``measured`` (every quantity a limit was given for, by limit), ``limits``,
    ``exceeded`` (limit, measured, max, over). For a number to gate on (a dataset's mean
    tokens), see ``trace_usage``.
    """

    name = "trace_budget"
    aliases = ("TraceBudget",)
    required_inputs = ("output",)
    default_options: ClassVar[Mapping[str, Any]] = {**dict.fromkeys(LIMITS), "prices": None}
    description = "a trace within limits: tool calls, model calls, tokens, cost, wall time, errors"

    def validate_options(self) -> None:
        given = {k: self.options[k] for k in LIMITS if self.options[k] is not None}
        if not given:
            raise ScorerConfigError(
                self.name,
                "max_tool_calls",
                "and every other limit is unset, so the budget would pass whatever the trace",
                hint=f"Give at least one of: {', '.join(LIMITS)}",
            )
        for option, value in given.items():
            whole = MEASURES[LIMITS[option]][1]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                problem = f"is {describe_value(value)}, not a number"
            elif not math.isfinite(value):
                problem = f"is {value!r}, not a finite number"
            elif value < 0:
                problem = f"is {value!r}, below 0"
            elif whole and not float(value).is_integer():
                problem = f"is {value!r}, not a whole number"
            else:
                continue
            raise ScorerConfigError(
                self.name,
                option,
                problem,
                hint=f"Give {option}= a {'whole ' if whole else ''}number >= 0 (or leave it out)",
            )
        _check_prices(self.name, self.options["prices"])

    def is_self_contained(self) -> bool:
        return type(self) is TraceBudget

    def stores_results(self) -> bool:
        # cheap, and wall time changes every run: computed every time, never stored
        return type(self) is not TraceBudget

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        limits = {k: self.options[k] for k in LIMITS if self.options[k] is not None}
        values = measure_trace(
            self.name,
            inputs.get("output"),
            [LIMITS[k] for k in limits],
            ctx,
            self.options["prices"],
        )
        measured = {k: values[LIMITS[k]] for k in limits}
        exceeded = [
            {"limit": k, "measured": measured[k], "max": limits[k], "over": measured[k] - limits[k]}
            for k in limits
            if measured[k] > limits[k]
        ]
        if not exceeded:
            rationale = "within budget: " + "; ".join(
                f"{MEASURES[LIMITS[k]][0]} {_num(measured[k])} <= max {_num(limits[k])}"
                for k in limits
            )
        else:
            rationale = "over budget: " + "; ".join(
                f"{MEASURES[LIMITS[e['limit']]][0]} {_num(e['measured'])} > max "
                f"{_num(e['max'])} (+{_num(e['over'])})"
                for e in exceeded
            )
        return make_score(
            0.0 if exceeded else 1.0,
            self.name,
            rationale=rationale,
            metadata={"measured": measured, "limits": dict(limits), "exceeded": exceeded},
        )


class TraceUsage(Scorer):
    """One quantity of a trace as the score, lower is better: ``measure`` is one of
    ``tool_calls``, ``model_calls``, ``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``cost_usd``, ``duration_s``, ``tool_errors`` (measured and checked as for
    ``trace_budget``: an unknown count or price is an error, never 0).

    A bound is a limit: ``assert_score("trace_usage", output=trace, measure="total_tokens",
    threshold=2000)`` fails above 2,000 (``threshold`` is a maximum for a lower-is-better
    scorer), and a suite gate can bound a dataset's mean or percentile. ``prices`` as for
    ``trace_budget``."""

    name = "trace_usage"
    aliases = ("TraceUsage",)
    required_inputs = ("output",)
    higher_is_better = False
    score_range: ClassVar[tuple[float, float]] = (0.0, math.inf)
    default_options: ClassVar[Mapping[str, Any]] = {"measure": None, "prices": None}
    description = "one quantity of a trace (tokens, cost, calls, wall time), lower is better"

    def validate_options(self) -> None:
        _check_choice(self.name, "measure", self.options["measure"], tuple(MEASURES))
        _check_prices(self.name, self.options["prices"])

    def is_self_contained(self) -> bool:
        return type(self) is TraceUsage

    def stores_results(self) -> bool:
        return type(self) is not TraceUsage

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        measure = self.options["measure"]
        (value,) = measure_trace(
            self.name, inputs.get("output"), [measure], ctx, self.options["prices"]
        ).values()
        return make_score(
            float(value),
            self.name,
            rationale=f"{MEASURES[measure][0]} {_num(value)}",
            metadata={"measure": measure},
        )


def _num(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.6g}"
