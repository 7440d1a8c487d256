"""Structured-output scorers: ``json_diff``, ``valid_json`` and ``list_contains``.

The Autoevals ``JSONDiff``, ``ValidJSON`` and ``ListContains`` with the same numbers (see
``tests/unit/scorers/test_parity.py``), clear input errors, and the fixes listed in
``docs/quirks.md`` (a constructor schema is honoured; NaN/Infinity are not JSON).

With their default sub-scorers these scorers call the edit-distance and numeric functions of
:mod:`pytest_llmeval.scorers.lexical` directly instead of going through a ``Score`` per leaf; a
custom sub-scorer (a registered name, a :class:`Scorer` class or instance) is called through its
``compute``.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError, describe_value
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.scorers.lexical import (
    Levenshtein,
    NumericDiff,
    levenshtein_similarity,
    make_score,
    numeric_similarity,
)

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = ["JSONDiff", "ListContains", "ValidJSON"]

_JSON_WS = " \t\n\r"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# ``json.loads``/``json.dumps`` with any keyword build a new decoder/encoder per call: reuse one.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_COMPACT_SORTED_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _strict_loads(text: str) -> Any:
    """``json.loads`` without Python's NaN/Infinity extension (RFC 8259 JSON only)."""
    return _STRICT_DECODER.decode(text)


def _parse_container(text: str) -> Any:
    """The parsed value when ``text`` is JSON for a dict or list, else ``text`` itself."""
    # Only text starting with { or [ (after JSON whitespace) can parse to a dict or list; checking
    # first avoids the cost of a failed parse on every ordinary string.
    head = text.lstrip(_JSON_WS)[:1]
    if head != "{" and head != "[":
        return text
    try:
        parsed = _strict_loads(text)
    except (ValueError, RecursionError):
        return text
    return parsed if isinstance(parsed, (dict, list)) else text


def _resolve_sub_scorer(owner: str, option: str, value: Any) -> Scorer:
    """A scorer instance from an option value
    (:func:`pytest_llmeval.engine.registry.resolve_scorer`)."""
    from pytest_llmeval.engine.registry import resolve_scorer

    return resolve_scorer(value, owner=owner, option=option)


def _is_default(scorer: Scorer, cls: type[Scorer]) -> bool:
    return type(scorer) is cls and scorer.options == dict(cls.default_options)


def _sub_scorer_call(
    owner: str, scorer: Scorer, ctx: ScoringContext | None
) -> Callable[[Any, Any], float]:
    """A two-argument similarity function calling ``scorer.compute``."""

    def call(output: Any, expected: Any) -> float:
        from pytest_llmeval.engine.context import get_context

        inputs = {k: v for k, v in (("output", output), ("expected", expected)) if v is not None}
        try:
            scorer.check_inputs(inputs)
            value = float(scorer.compute(inputs, ctx if ctx is not None else get_context()).value)
        except ScorerInputError as exc:
            raise ScorerInputError(
                owner,
                exc.field,
                f"gave sub-scorer {scorer.name!r} a bad value: {exc.problem}",
                hint=exc.hint,
            ) from None
        if math.isnan(value):
            raise ScorerInputError(
                owner,
                "output",
                f"made sub-scorer {scorer.name!r} return NaN",
            )
        return value

    return call


# -- json_diff ------------------------------------------------------------------------------------


class JSONDiff(Scorer):
    """Recursive similarity of two JSON values, in [0, 1].

    Strings that are JSON text for a dict or list are parsed first, at every level, unless
    ``preserve_strings``. dict vs dict: the mean over the union of keys of the recursive score
    (a missing key compares as None; both empty gives 1). list vs list: the sum of positional
    scores over the longer length (both empty gives 1). str vs str: ``string_scorer`` (default
    ``levenshtein``). Numbers (bools count): ``number_scorer`` (default ``numeric_diff``). None vs
    None: 1; one None: 0. Anything else: ``string_scorer`` over compact sorted JSON text. A missing
    ``output`` or ``expected`` counts as None (JSON null).

    Raises :class:`ScorerInputError` for a value JSON cannot represent (NaN, a set...), or nesting
    too deep to walk.
    """

    name = "json_diff"
    aliases = ("JSONDiff",)
    required_inputs = ()
    optional_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {
        "preserve_strings": False,
        "string_scorer": "levenshtein",
        "number_scorer": "numeric_diff",
    }
    description = "recursive similarity of two JSON values"

    def validate_options(self) -> None:
        if not isinstance(self.options["preserve_strings"], bool):
            raise ScorerConfigError(self.name, "preserve_strings", "must be True or False")
        self._string_scorer = _resolve_sub_scorer(
            self.name, "string_scorer", self.options["string_scorer"]
        )
        self._number_scorer = _resolve_sub_scorer(
            self.name, "number_scorer", self.options["number_scorer"]
        )
        self._fast_strings = _is_default(self._string_scorer, Levenshtein)
        self._fast_numbers = _is_default(self._number_scorer, NumericDiff)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        if self._fast_strings and self._fast_numbers:
            return self.compute(inputs, ctx)
        # A custom sub-scorer may be a judge whose sync compute waits on the context's background
        # loop; from async code that wait must not happen on the loop itself.
        return await asyncio.to_thread(self.compute, inputs, ctx)

    def is_self_contained(self) -> bool:
        # A custom sub-scorer may be a judge.
        return type(self) is JSONDiff and self._fast_strings and self._fast_numbers

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        strings: Callable[[Any, Any], float] = (
            levenshtein_similarity
            if self._fast_strings
            else _sub_scorer_call(self.name, self._string_scorer, ctx)
        )
        numbers: Callable[[Any, Any], float] = (
            _checked_numeric
            if self._fast_numbers
            else _sub_scorer_call(self.name, self._number_scorer, ctx)
        )
        parse = not self.options["preserve_strings"]

        def diff(o1: Any, o2: Any) -> float:
            if parse:
                if type(o1) is str:
                    o1 = _parse_container(o1)
                if type(o2) is str:
                    o2 = _parse_container(o2)
            if isinstance(o1, dict) and isinstance(o2, dict):
                if not o1 and not o2:
                    return 1.0
                keys = list(o1)
                keys.extend(k for k in o2 if k not in o1)
                # fsum: exactly rounded, so the result does not depend on key order.
                return math.fsum([diff(o1.get(k), o2.get(k)) for k in keys]) / len(keys)
            if isinstance(o1, list) and isinstance(o2, list):
                if not o1 and not o2:
                    return 1.0
                longest = len(o1) if len(o1) > len(o2) else len(o2)
                return math.fsum([diff(a, b) for a, b in zip(o1, o2, strict=False)]) / longest
            if isinstance(o1, str) and isinstance(o2, str):
                return strings(o1, o2)
            if isinstance(o1, (int, float)) and isinstance(o2, (int, float)):
                return numbers(o1, o2)
            if o1 is None:
                return 1.0 if o2 is None else 0.0
            if o2 is None:
                return 0.0
            return strings(_compact_json(o1, "output"), _compact_json(o2, "expected"))

        try:
            value = diff(inputs.get("output"), inputs.get("expected"))
        except RecursionError:
            raise ScorerInputError(
                self.name,
                "output",
                "is nested too deeply to compare",
                hint="Compare smaller JSON values",
            ) from None
        return make_score(min(max(value, 0.0), 1.0), "json_diff")


def _checked_numeric(output: Any, expected: Any) -> float:
    for field, value in (("output", output), ("expected", expected)):
        if type(value) is float and not math.isfinite(value):
            raise ScorerInputError(
                "json_diff",
                field,
                f"contains {value!r}, which JSON cannot represent",
                hint="Replace NaN/infinity by null or a finite number",
            )
    return numeric_similarity(output, expected)


def _compact_json(value: Any, field: str) -> str:
    try:
        return _COMPACT_SORTED_ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ScorerInputError(
            "json_diff",
            field,
            f"contains a value that is not JSON ({exc})",
            hint="Pass dicts and lists of str, int, float, bool and None only",
        ) from None


# -- valid_json -----------------------------------------------------------------------------------

_VALIDATORS: dict[str, Any] = {}
_VALIDATORS_LOCK = threading.Lock()
_VALIDATORS_MAX = 256


def _compile_schema(schema: Any) -> Any:
    """A jsonschema validator for ``schema``; raises ``jsonschema.SchemaError`` / ``TypeError``.

    Validators are cached by the schema's canonical JSON text: checking a schema and building its
    validator costs far more than validating a small document.
    """
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    validator = _VALIDATORS.get(key)
    if validator is not None:
        return validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    with _VALIDATORS_LOCK:
        if len(_VALIDATORS) >= _VALIDATORS_MAX:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a usable JSON Schema, or None when it is."""
    from jsonschema.exceptions import SchemaError

    try:
        _compile_schema(schema)
    except SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    except (TypeError, ValueError, RecursionError) as exc:
        return f"is not a valid JSON Schema ({exc})"
    return None


class ValidJSON(Scorer):
    """1.0 when ``output`` is valid JSON (and matches a JSON Schema, when one is given), else 0.0.

    A string output is parsed as strict JSON (``NaN``/``Infinity`` are rejected); any other value
    is used as it is (None is JSON null). Without a schema only a dict or list scores 1. The schema
    comes from, in order: the ``schema`` input of the call, the call's ``expected`` (what
    Autoevals' ``ValidJSON.eval(output, expected)`` does), the ``schema`` option. An invalid schema
    is a :class:`ScorerConfigError` (option) or :class:`ScorerInputError` (input).
    """

    name = "valid_json"
    aliases = ("ValidJSON",)
    required_inputs = ()
    optional_inputs = ("output", "schema", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {"schema": None}
    description = "1 if output is JSON (matching the schema when given), else 0"

    def validate_options(self) -> None:
        schema = self.options["schema"]
        self._validator: Any = None
        if schema is not None:
            problem = _schema_problem(schema)
            if problem is not None:
                raise ScorerConfigError(
                    self.name,
                    "schema",
                    problem,
                    hint="Pass a JSON Schema as a dict (see https://json-schema.org)",
                )
            self._validator = _compile_schema(schema)

    def is_self_contained(self) -> bool:
        return type(self) is ValidJSON

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        validator = self._validator
        source = "schema"
        for field in ("schema", "expected"):
            schema = inputs.get(field)
            if schema is not None:
                try:
                    validator = _compile_schema(schema)
                except Exception:
                    problem = _schema_problem(schema) or "is not a valid JSON Schema"
                    raise ScorerInputError(
                        self.name,
                        field,
                        problem,
                        hint="Pass a JSON Schema (a dict) to validate the output against",
                    ) from None
                source = field
                break
        output = inputs.get("output")
        if isinstance(output, str):
            try:
                parsed = _strict_loads(output)
            except (ValueError, RecursionError):
                return make_score(0.0, "valid_json")
        else:
            parsed = output
        if validator is not None:
            try:
                ok = validator.is_valid(parsed)
            except Exception as exc:  # e.g. a $ref that cannot be resolved (never fetched)
                problem = f"could not be applied: {type(exc).__name__}: {exc}"
                if validator is self._validator and source == "schema" and "schema" not in inputs:
                    raise ScorerConfigError(self.name, "schema", problem) from None
                raise ScorerInputError(self.name, source, problem) from None
        else:
            ok = isinstance(parsed, (dict, list))
        return make_score(1.0 if ok else 0.0, "valid_json")


# -- list_contains --------------------------------------------------------------------------------

_ASSIGN: Callable[[Any], tuple[Any, Any]] | None = None


def _linear_sum_assignment() -> Callable[[Any], tuple[Any, Any]]:
    global _ASSIGN
    if _ASSIGN is None:
        from scipy.optimize import linear_sum_assignment

        _ASSIGN = linear_sum_assignment
    return _ASSIGN


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return repr(value)


#: Above this many pairs the similarity matrix comes from rapidfuzz's ``cdist`` (C++, one call);
#: below it a Python loop is faster than the numpy set-up around ``cdist``.
_CDIST_MIN_PAIRS = 1024


def _levenshtein_matrix(outputs: list[Any], expecteds: list[Any]) -> list[list[float]]:
    """The similarity matrix of levenshtein over (output item, expected item)."""
    for j, item in enumerate(expecteds):
        if item is None:
            raise ScorerInputError(
                "list_contains",
                "expected",
                f"item {j} is None; the pairwise scorer 'levenshtein' needs a value",
                hint="Remove None items from expected or use another pairwise_scorer",
            )
    a = [x if type(x) is str else str(x) for x in outputs]
    b = [x if type(x) is str else str(x) for x in expecteds]
    if len(a) * len(b) < _CDIST_MIN_PAIRS:
        return [[levenshtein_similarity(x, y) for y in b] for x in a]
    import numpy as np
    from rapidfuzz.distance import Levenshtein as _Lev
    from rapidfuzz.process import cdist

    la = np.array([len(x) for x in a], dtype=np.int64)
    lb = np.array([len(x) for x in b], dtype=np.int64)
    longest = np.maximum(la[:, None], lb[None, :])
    dist = cdist(a, b, scorer=_Lev.distance, dtype=np.int64, workers=1)
    matrix = np.ones(longest.shape, dtype=np.float64)
    nonzero = longest > 0
    matrix[nonzero] = 1 - dist[nonzero] / longest[nonzero]
    return cast("list[list[float]]", matrix.tolist())


class ListContains(Scorer):
    """How well the ``output`` list covers the ``expected`` list, in [0, 1].

    Both empty gives 1, one empty 0. Otherwise items are paired one to one by an optimal
    assignment (Hungarian, rectangular) over the ``pairwise_scorer`` similarities (default
    ``levenshtein``), and score = clamp(sum of matched similarities / D, 0, 1) with
    D = max(len(output), len(expected)), or len(expected) when ``allow_extra_entities``.
    ``metadata["pairs"]`` lists the matched pairs with their similarity. Raises
    :class:`ScorerInputError` when a side is missing or not a list/tuple.
    """

    name = "list_contains"
    aliases = ("ListContains",)
    required_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {
        "pairwise_scorer": "levenshtein",
        "allow_extra_entities": False,
    }
    description = "optimal one-to-one matching of output items to expected items"

    def validate_options(self) -> None:
        if not isinstance(self.options["allow_extra_entities"], bool):
            raise ScorerConfigError(self.name, "allow_extra_entities", "must be True or False")
        self._pairwise = _resolve_sub_scorer(
            self.name, "pairwise_scorer", self.options["pairwise_scorer"]
        )
        self._fast = _is_default(self._pairwise, Levenshtein)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        if self._fast:
            return self.compute(inputs, ctx)
        return await asyncio.to_thread(self.compute, inputs, ctx)  # see JSONDiff.acompute

    def is_self_contained(self) -> bool:
        # A custom sub-scorer may be a judge.
        return type(self) is ListContains and self._fast

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        outputs = self._items(inputs, "output")
        expecteds = self._items(inputs, "expected")
        if not outputs or not expecteds:
            value = 1.0 if not outputs and not expecteds else 0.0
            return make_score(value, "list_contains", metadata={"pairs": []})
        if self._fast:
            sim = _levenshtein_matrix(outputs, expecteds)
        else:
            call = _sub_scorer_call(self.name, self._pairwise, ctx)
            sim = [[call(o, e) for e in expecteds] for o in outputs]
        import numpy as np

        rows, cols = _linear_sum_assignment()(-np.array(sim, dtype=np.float64))
        total = 0.0
        pairs = []
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            s = sim[r][c]
            total += s
            pairs.append(
                {
                    "output": _json_safe(outputs[r]),
                    "expected": _json_safe(expecteds[c]),
                    "score": s,
                    "output_index": r,
                    "expected_index": c,
                }
            )
        if self.options["allow_extra_entities"]:
            denominator = len(expecteds)
        else:
            denominator = max(len(outputs), len(expecteds))
        value = min(max(total / denominator, 0.0), 1.0)
        return make_score(value, "list_contains", metadata={"pairs": pairs})

    def _items(self, inputs: Mapping[str, Any], field: str) -> list[Any]:
        value = inputs.get(field)
        if isinstance(value, list):
            return value
        if isinstance(value, tuple):
            return list(value)
        raise ScorerInputError(
            self.name,
            field,
            "is missing" if value is None else f"is {describe_value(value)}, not a list",
            hint="Pass a list (or tuple) of items",
        )
