"""Agent scorers over tool calls: ``tool_correctness`` (names) and ``tool_call_accuracy`` (names
and arguments), deterministic; ``task_completion`` and ``argument_correctness``, LLM judges.

Both read the calls an agent made (``output``) and the calls it should have made (``expected``)
in either of two shapes, mixed freely within one list:

- OpenAI chat messages: every ``tool_calls`` entry of every message, in message order
  (``{"role": "assistant", "tool_calls": [{"id": ..., "type": "function", "function":
  {"name": ..., "arguments": "<JSON text>"}}]}``); messages without tool calls (user, tool
  results, plain assistant text) contribute nothing;
- calls: ``{"name": ..., "arguments": ...}`` with arguments a dict or JSON text for an object,
  an OpenAI tool call (``{"type": "function", "function": {...}}``), or a bare name (a string).

Each also takes a captured :class:`~pytest_llmeval.core.trace.Trace` (``llm_eval_trace``) as
``output``: its tool runs, in order (:mod:`pytest_llmeval.scorers.traces`: a trace with nothing
captured is an input error; a traced call whose arguments were cut or unreadable never matches
on them); the judges read its bounded rendering. A trace's cache key is the normalised
trajectory the scorer reads (calls, or the judge's rendering), not its ids or timings.

Missing, ``None`` or empty-text arguments mean "no arguments" (``{}``). Anything else that does
not read as a call (no name, arguments that are not JSON for an object...) is a
:class:`ScorerInputError` naming the scorer, the field and where the call sits, e.g.
``output[1].tool_calls[0]``: a malformed trajectory is a broken test, never a low score.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.core.trace import Trace
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.step import load_prompts, render_value
from pytest_llmeval.scorers.lexical import make_score
from pytest_llmeval.scorers.llm import ClassifierScorer
from pytest_llmeval.scorers.messages import (
    ToolCall,
    _compact,
    _first_user_message,
    calls_key,
    extract_tool_calls,
    key_traces,
    render_trajectory,
)
from pytest_llmeval.scorers.structured import _json_safe  # the same JSON-safe metadata
from pytest_llmeval.scorers.traces import check_trace, check_trace_inputs

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "ArgumentCorrectness",
    "TaskCompletion",
    "ToolCall",
    "ToolCallAccuracy",
    "ToolCorrectness",
    "extract_tool_calls",
    "render_trajectory",
]

_METRICS = ("f1", "precision", "recall", "exact")
_PROMPTS = load_prompts("agents")


def _check_choice(scorer: str, option: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ScorerConfigError(
            scorer,
            option,
            f"is {value!r}",
            hint=f"Use one of: {', '.join(repr(c) for c in choices)}",
        )


def _combine(metric: str, matched: float, n_out: int, n_exp: int, exact: bool) -> float:
    """The score from the matched total: precision = matched / calls made, recall = matched /
    calls expected, f1 their harmonic mean (= 2 matched / (made + expected)), exact 0 or 1.
    Both sides empty gives 1; one side empty gives 0 (an empty expectation means "call no tool",
    so any call is wrong, whatever the metric)."""
    if n_out == 0 and n_exp == 0:
        return 1.0
    if n_out == 0 or n_exp == 0:
        return 0.0
    if metric == "exact":
        return 1.0 if exact else 0.0
    if metric == "precision":
        value = matched / n_out
    elif metric == "recall":
        value = matched / n_exp
    else:
        value = 2 * matched / (n_out + n_exp)
    return min(max(value, 0.0), 1.0)


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two name sequences."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


# -- tool_correctness -----------------------------------------------------------------------------


class ToolCorrectness(Scorer):
    """Whether the agent called the expected tools, by name only, in [0, 1].

    ``expected`` lists the expected calls (names, calls or messages; arguments are ignored);
    ``output`` the calls made. ``match`` says what counts as a correct call:

    - ``"set"`` (default): distinct names; calling a tool twice is the same as once.
      matched = |names made ∩ names expected|, over the distinct names on each side.
    - ``"multiset"``: each call counts; matched = sum over names of min(times made, times
      expected), so a missing repeat or an extra repeat costs.
    - ``"order"``: the sequence matters; matched = the length of the longest common subsequence
      of the two name sequences (calls in the expected order, other calls in between allowed).

    ``metric`` turns matched into the score, with the sizes counted as ``match`` counts them:
    ``"precision"`` = matched / made, ``"recall"`` = matched / expected (extra calls cost
    nothing: DeepEval's ``ToolCorrectnessMetric`` is ``match="multiset"``-like recall, and its
    ``should_consider_ordering`` is ``match="order", metric="recall"``), ``"f1"`` (default) their
    harmonic mean, ``"exact"`` 1 only when both sides are equal as sets, multisets or sequences.
    No call made and none expected gives 1.0; exactly one side empty gives 0.0 for every metric.

    ``metadata``: ``called`` and ``expected`` (names in order), ``missing`` and ``unexpected``
    (names, with repeats under ``multiset``/``order``), ``precision`` and ``recall``.
    """

    name = "tool_correctness"
    aliases = ("ToolCorrectness", "ToolCorrectnessMetric")
    required_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {"match": "set", "metric": "f1"}
    description = "expected tool names vs the tools called (set, multiset or order)"

    def validate_options(self) -> None:
        _check_choice(self.name, "match", self.options["match"], ("set", "multiset", "order"))
        _check_choice(self.name, "metric", self.options["metric"], _METRICS)

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        check_trace_inputs(self.name, inputs, tools=True)

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return key_traces(inputs, calls_key(self.name))

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        made = [c.name for c in extract_tool_calls(self.name, "output", inputs.get("output"))]
        wanted = [c.name for c in extract_tool_calls(self.name, "expected", inputs.get("expected"))]
        match = self.options["match"]
        if match == "set":
            a, b = set(made), set(wanted)
            matched, n_out, n_exp = len(a & b), len(a), len(b)
            exact = a == b
            missing = sorted(b - a)
            unexpected = sorted(a - b)
        else:
            ca, cb = Counter(made), Counter(wanted)
            missing = sorted((cb - ca).elements())
            unexpected = sorted((ca - cb).elements())
            n_out, n_exp = len(made), len(wanted)
            if match == "multiset":
                matched = sum((ca & cb).values())
                exact = ca == cb
            else:
                matched = _lcs_length(made, wanted)
                exact = made == wanted
        value = _combine(self.options["metric"], matched, n_out, n_exp, exact)
        precision = _combine("precision", matched, n_out, n_exp, exact)
        recall = _combine("recall", matched, n_out, n_exp, exact)
        parts = []
        if missing:
            parts.append(f"missing: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected: {', '.join(unexpected)}")
        if match == "order" and not exact and not parts:
            parts.append("same calls in a different order")
        return make_score(
            value,
            self.name,
            rationale="; ".join(parts) or "the expected tools were called",
            metadata={
                "called": made,
                "expected": wanted,
                "missing": missing,
                "unexpected": unexpected,
                "precision": precision,
                "recall": recall,
            },
        )


# -- tool_call_accuracy ---------------------------------------------------------------------------


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value (1 == 1.0), but booleans are not numbers,
    objects by keys and values, arrays by position."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


class ToolCallAccuracy(Scorer):
    """Whether the agent made the expected calls with the right arguments, in [0, 1].

    Each (made, expected) pair scores 0 when the names differ, else its argument score:
    ``arguments="json_diff"`` (default) is :class:`~pytest_llmeval.scorers.structured.JSONDiff`
    of the two argument objects with its default rules (strings by Levenshtein similarity,
    numbers by relative difference, mean over the union of keys, a missing key scored as null;
    two empty objects give 1), ``arguments="exact"`` is 1 when the arguments are equal as JSON
    (1 == 1.0, true != 1, key order ignored), else 0.

    Calls are paired one to one to maximise the total pair score: with ``match="order"``
    (default) the pairs must keep both sequences' order (a weighted longest common subsequence,
    like ragas' sequence-aligned ``ToolCallAccuracy``); with ``match="multiset"`` any pairing is
    allowed (an optimal assignment). ``metric`` turns the total T into the score:
    ``"precision"`` = T / calls made, ``"recall"`` = T / calls expected, ``"f1"`` (default)
    = 2T / (made + expected), ``"exact"`` = 1 only when the counts are equal and every call
    pairs with score 1. No call made and none expected gives 1.0; exactly one side empty 0.0.

    ``metadata["pairs"]`` lists the pairs (indices, name, argument score); ``missing`` and
    ``unexpected`` the indices of unpaired expected and made calls.
    """

    name = "tool_call_accuracy"
    aliases = ("ToolCallAccuracy",)
    required_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {
        "match": "order",
        "metric": "f1",
        "arguments": "json_diff",
    }
    description = "tool names and arguments of the calls made vs the expected calls"

    def validate_options(self) -> None:
        _check_choice(self.name, "match", self.options["match"], ("order", "multiset"))
        _check_choice(self.name, "metric", self.options["metric"], _METRICS)
        _check_choice(self.name, "arguments", self.options["arguments"], ("json_diff", "exact"))
        if self.options["arguments"] == "json_diff":
            from pytest_llmeval.scorers.structured import JSONDiff

            self._json_diff: JSONDiff | None = JSONDiff()
        else:
            self._json_diff = None

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        check_trace_inputs(self.name, inputs, tools=True)

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return key_traces(inputs, calls_key(self.name))

    def _argument_score(self, made: ToolCall, wanted: ToolCall, ctx: ScoringContext) -> float:
        if made.problem is not None or wanted.problem is not None:
            return 0.0  # arguments cut or unreadable never match (scorers/traces.py)
        if self._json_diff is None:
            return 1.0 if _json_equal(made.arguments, wanted.arguments) else 0.0
        try:
            value = self._json_diff.compute(
                {"output": dict(made.arguments), "expected": dict(wanted.arguments)}, ctx
            ).value
        except ScorerInputError as exc:
            field = "output" if exc.field == "output" else "expected"
            where = made.where if field == "output" else wanted.where
            raise ScorerInputError(
                self.name,
                field,
                f"has arguments json_diff cannot compare at {where}: {exc.problem}",
                hint=exc.hint,
            ) from None
        return float(value)

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        made = extract_tool_calls(self.name, "output", inputs.get("output"))
        wanted = extract_tool_calls(self.name, "expected", inputs.get("expected"))
        sim: list[list[float | None]] = [
            [self._argument_score(m, w, ctx) if m.name == w.name else None for w in wanted]
            for m in made
        ]
        pair = _ordered_pairs if self.options["match"] == "order" else _assigned_pairs
        pairs = pair(sim)
        total = math.fsum(s for _, _, s in pairs)
        exact = len(made) == len(wanted) and len(pairs) == len(wanted) and total == len(wanted)
        value = _combine(self.options["metric"], total, len(made), len(wanted), exact)
        paired_out = {i for i, _, _ in pairs}
        paired_exp = {j for _, j, _ in pairs}
        missing = [j for j in range(len(wanted)) if j not in paired_exp]
        unexpected = [i for i in range(len(made)) if i not in paired_out]
        imperfect = [(i, j, s) for i, j, s in pairs if s < 1.0]
        parts = []
        if missing:
            parts.append("missing: " + ", ".join(wanted[j].name for j in missing))
        if unexpected:
            parts.append("unexpected: " + ", ".join(made[i].name for i in unexpected))
        if imperfect:
            parts.append(
                "arguments differ: "
                + ", ".join(
                    f"{made[i].name} ({s:.3g}"
                    + (f"; {made[i].problem}" if made[i].problem else "")
                    + ")"
                    for i, _, s in imperfect
                )
            )
        return make_score(
            value,
            self.name,
            rationale="; ".join(parts) or "every expected call made with the expected arguments",
            metadata={
                "pairs": [
                    {
                        "output_index": i,
                        "expected_index": j,
                        "name": made[i].name,
                        "arguments_score": s,
                        "output_arguments": _json_safe(made[i].arguments),
                        "expected_arguments": _json_safe(wanted[j].arguments),
                        **(
                            {"output_arguments_problem": made[i].problem} if made[i].problem else {}
                        ),
                    }
                    for i, j, s in pairs
                ],
                "missing": missing,
                "unexpected": unexpected,
                "precision": _combine("precision", total, len(made), len(wanted), exact),
                "recall": _combine("recall", total, len(made), len(wanted), exact),
            },
        )


def _ordered_pairs(sim: list[list[float | None]]) -> list[tuple[int, int, float]]:
    """Order-preserving pairs (i and j both increasing) of same-name calls maximising the total
    argument score: a weighted longest common subsequence. ``sim[i][j]`` is None when the names
    differ. Between equal totals more pairs win, so a same-name call whose arguments score 0 is
    paired (reported as "arguments differ"), not reported as missing."""
    n = len(sim)
    m = len(sim[0]) if n else 0
    # best[i][j]: the best (total, pair count) over made[:i] and wanted[:j]
    best = [[(0.0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        row, up = best[i], best[i - 1]
        for j in range(1, m + 1):
            cand = max(up[j], row[j - 1])
            s = sim[i - 1][j - 1]
            if s is not None:
                diag = (up[j - 1][0] + s, up[j - 1][1] + 1)
                cand = max(cand, diag)
            row[j] = cand
    pairs: list[tuple[int, int, float]] = []
    i, j = n, m
    while i > 0 and j > 0:
        if best[i][j] == best[i - 1][j]:
            i -= 1
        elif best[i][j] == best[i][j - 1]:
            j -= 1
        else:
            s = sim[i - 1][j - 1]
            assert s is not None  # only a pair can raise the best above both neighbours
            pairs.append((i - 1, j - 1, s))
            i, j = i - 1, j - 1
    pairs.reverse()
    return pairs


def _assigned_pairs(sim: list[list[float | None]]) -> list[tuple[int, int, float]]:
    """One-to-one pairs of same-name calls in any order maximising the total argument score (an
    optimal rectangular assignment; pairs of different names that it is forced to make are
    dropped)."""
    if not sim or not sim[0]:
        return []
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    weights = np.array([[-1.0 if s is None else s for s in row] for row in sim], dtype=np.float64)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    pairs = []
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        s = sim[i][j]
        if s is not None:
            pairs.append((i, j, s))
    return pairs


# -- judges ---------------------------------------------------------------------------------------


class TaskCompletion(ClassifierScorer):
    """Did the agent's trajectory achieve the task? An LLM judge, in {0, 0.5, 1}.

    Inputs: ``output``, the trajectory (OpenAI chat messages with their ``tool_calls`` and tool
    results, a list of calls, or text), and ``input``, the task (default: the first user
    message of the trajectory). The judge sees the trajectory as a transcript, one line per
    step, and picks (A) fully achieved 1, (B) partly achieved 0.5, (C) not achieved 0; it is told
    to judge what the steps show was done, not what the agent claims.
    """

    name = "task_completion"
    aliases = ("TaskCompletion", "TaskCompletionMetric")
    required_inputs = ("output",)
    optional_inputs = ("input",)
    version = "2"  # 2: the judge step (instructions first, the case's blocks last)
    description = "Whether an agent's trajectory achieved the task (LLM judge)."
    template = _PROMPTS["task_completion"]["template"]
    choice_scores = _PROMPTS["task_completion"]["choice_scores"]

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        output = inputs.get("output")
        if isinstance(output, Trace):
            check_trace(self.name, "output", output)
        if inputs.get("input") is None and _first_user_message(output) is None:
            raise ScorerInputError(
                self.name,
                "input",
                "is required when the trajectory has no user message stating the task",
                hint="Pass input=... with the task the agent was given",
            )

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        # a trace is keyed by what the judge reads of it: the task and the rendering
        if not isinstance(inputs.get("output"), Trace):
            return inputs
        values = self.prompt_values(inputs)
        return {**inputs, "input": values["input"], "output": {"trace": values["output"]}}

    def prompt_values(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        task = inputs.get("input")
        return {
            "input": _first_user_message(inputs["output"]) if task is None else task,
            "output": render_trajectory(self.name, "output", inputs["output"]),
        }


_NO_TOOLS = "(no tool definitions given)"


def _call_text(call: ToolCall) -> str:
    """One call as the argument judge reads it; a traced call whose arguments were cut or
    unreadable shows the text recorded and says so (the judge is not shown ``{}``)."""
    if call.problem is None:
        return _compact({"name": call.name, "arguments": call.arguments})
    return _compact({"name": call.name, "arguments_text": call.raw, "note": call.problem})


class ArgumentCorrectness(ClassifierScorer):
    """Were the arguments of each tool call right for the request? An LLM judge, in [0, 1].

    Inputs: ``input``, the user's request; ``output``, the calls made (OpenAI chat messages or a
    list of calls, as for ``tool_correctness``); optionally ``tools``, the tool definitions the
    agent had (OpenAI ``tools`` list or any description), shown to the judge. Each call is
    judged on its own (one judge call per tool call, concurrently): Yes 1, No 0; the score is
    the mean. A trajectory with no tool call at all is an input error, not a score (DeepEval's
    ``ArgumentCorrectnessMetric`` scores it 1.0, a pass for an agent that did nothing): pair it
    with ``tool_correctness`` to check that the right tools were called.

    ``metadata["verdicts"]`` lists each call's index, name, choice and reasons.
    """

    name = "argument_correctness"
    aliases = ("ArgumentCorrectness", "ArgumentCorrectnessMetric")
    required_inputs = ("input", "output")
    optional_inputs = ("tools",)
    version = "3"  # 3: the judge step (instructions first, the case's blocks last)
    description = "Whether each tool call's arguments fit the request (LLM judge)."
    template = _PROMPTS["argument_correctness"]["template"]
    choice_scores = _PROMPTS["argument_correctness"]["choice_scores"]

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        check_trace_inputs(self.name, inputs, tools=True)

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return key_traces(inputs, calls_key(self.name))

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        calls = extract_tool_calls(self.name, "output", inputs["output"])
        if not calls:
            # Nothing to judge is not a pass: a trajectory that called no tool would otherwise
            # score a perfect 1.0 for its arguments.
            raise ScorerInputError(
                self.name,
                "output",
                "holds no tool call, so there are no arguments to judge",
                hint="check that the agent called its tools with tool_correctness, and score "
                "argument_correctness only on trajectories that made calls",
            )
        tools = inputs.get("tools")
        values = {
            "input": inputs["input"],
            "tools": _NO_TOOLS if tools is None else render_value("tools", tools),
        }
        scores = await asyncio.gather(
            *(self.ask({**values, "call": _call_text(c)}, ctx) for c in calls)
        )
        usage: Usage | None = None
        for one in scores:
            if one.usage is not None:
                usage = one.usage if usage is None else usage + one.usage
        verdicts = [
            {
                "index": i,
                "name": call.name,
                "choice": one.metadata["choice"],
                "reasons": one.rationale,
            }
            for i, (call, one) in enumerate(zip(calls, scores, strict=True))
        ]
        wrong = [
            f"{v['name']}: {v['reasons'] or 'no reasons'}" for v in verdicts if v["choice"] == "No"
        ]
        return Score(
            value=math.fsum(one.value for one in scores) / len(scores),
            scorer=self.name,
            rationale="; ".join(wrong) if wrong else "every call's arguments fit the request",
            metadata={"verdicts": verdicts},
            usage=usage,
        )
