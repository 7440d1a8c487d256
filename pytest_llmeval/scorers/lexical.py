"""Lexical scorers: ``exact_match``, ``levenshtein`` and ``numeric_diff``.

These are the Autoevals heuristics (``ExactMatch``, ``Levenshtein``, ``NumericDiff``) with the same
numbers (see ``tests/unit/scorers/test_parity.py``) and clear input errors instead of crashes. They
run many
thousands of times in a dataset or a benchmark, so the hot paths avoid any per-call setup: the edit
distance comes from rapidfuzz (C++), and scores are built by :func:`make_score`.

Decisions where the reference contradicts its own documentation are listed in ``docs/quirks.md``.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from rapidfuzz.distance.Levenshtein import distance as _edit_distance

from pytest_llmeval.core.errors import ScorerInputError, describe_value
from pytest_llmeval.core.scores import Score, make_score
from pytest_llmeval.engine.scoring import Scorer

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "ExactMatch",
    "Levenshtein",
    "NumericDiff",
    "levenshtein_similarity",
    "make_score",
    "numeric_diff_value",
    "numeric_similarity",
]


# -- levenshtein ----------------------------------------------------------------------------------


def levenshtein_similarity(output: Any, expected: Any) -> float:
    """``1 - distance / max(len)`` over Unicode code points; both empty gives 1.0.

    Non-strings become ``str(value)`` (Python's text form, not JSON), as in Autoevals.
    """
    a = output if type(output) is str else str(output)
    b = expected if type(expected) is str else str(expected)
    la = len(a)
    lb = len(b)
    longest = la if la > lb else lb
    if longest == 0:
        return 1.0
    return 1 - _edit_distance(a, b) / longest


class Levenshtein(Scorer):
    """Normalised edit-distance similarity of ``output`` and ``expected``, in [0, 1].

    Score = ``1 - levenshtein(a, b) / max(len(a), len(b))`` over code points, with no Unicode or
    case normalisation; both empty gives 1. Non-string values are compared by ``str(value)``, so
    ``output=None`` compares as ``"None"`` (as in Autoevals). Raises :class:`ScorerInputError`
    when ``expected`` is missing.
    """

    name = "levenshtein"
    aliases = ("Levenshtein", "LevenshteinScorer")
    required_inputs = ("expected",)
    optional_inputs = ("output",)
    description = "1 - edit distance / max length (Unicode code points)"

    def is_self_contained(self) -> bool:
        return type(self) is Levenshtein

    def value_function(self) -> Callable[[Any, Any], float] | None:
        # score() checks that expected is given (a required input) before calling it.
        return levenshtein_similarity if type(self) is Levenshtein else None

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        expected = inputs.get("expected")
        if expected is None:
            raise ScorerInputError(
                "levenshtein",
                "expected",
                "is required but was not given",
                hint="Pass expected=... (the reference text to compare the output with)",
            )
        return make_score(levenshtein_similarity(inputs.get("output"), expected), "levenshtein")


# -- exact_match ----------------------------------------------------------------------------------


#: ``json.dumps(..., sort_keys=True)`` builds a new encoder on every call; reuse one.
_SORTED_JSON = json.JSONEncoder(sort_keys=True)
_PLAIN_JSON = json.JSONEncoder()


def _json_side(value: Any, field: str, scorer: str) -> tuple[Any, str | None]:
    """One side of an exact_match where the other side is a dict or list: ``(value, None)`` for
    a JSON value (a string side parsed), ``(None, text)`` for a string that is not JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value), None
        except (ValueError, RecursionError):
            return None, str(value)  # not JSON: compared as it is
    if isinstance(value, (dict, list)):
        return value, None
    if value is None:
        problem = "is missing, but the other side is a dict or list"
    else:
        problem = (
            f"is {describe_value(value)}, but the other side is a dict or list; "
            "a JSON value can only be compared with a str, dict or list"
        )
    raise ScorerInputError(
        scorer,
        field,
        problem,
        hint="Pass both sides as JSON values (dict/list) or JSON text (str)",
    )


def _encode(encoder: json.JSONEncoder, value: Any, field: str, scorer: str) -> str:
    try:
        return encoder.encode(value)
    except TypeError:
        if encoder is _SORTED_JSON:  # keys of mixed types cannot be sorted
            return _encode(_PLAIN_JSON, value, field, scorer)
        error: Exception = TypeError("not JSON-serialisable")
    except (ValueError, RecursionError) as exc:
        error = exc
    raise ScorerInputError(
        scorer,
        field,
        f"is not JSON-serialisable ({error})",
        hint="Pass dicts and lists of str, int, float, bool and None only",
    )


def _json_equal(output: Any, expected: Any, lower: bool, scorer: str) -> bool:
    """Whether the JSON texts of both sides, with sorted keys, are equal (docs/quirks.md, em-024).

    Sorting costs more than encoding, so the texts are first encoded in their own key order:
    equal texts are equal sorted too, and texts of different lengths cannot become equal by
    reordering object members. Only same-length, different texts are encoded again sorted.
    """
    a_value, a_raw = _json_side(output, "output", scorer)
    b_value, b_raw = _json_side(expected, "expected", scorer)
    a = a_raw if a_raw is not None else _encode(_PLAIN_JSON, a_value, "output", scorer)
    b = b_raw if b_raw is not None else _encode(_PLAIN_JSON, b_value, "expected", scorer)
    if lower:
        a = a.lower()
        b = b.lower()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    if a_raw is None:
        a = _encode(_SORTED_JSON, a_value, "output", scorer)
    if b_raw is None:
        b = _encode(_SORTED_JSON, b_value, "expected", scorer)
    if lower:
        a = a.lower()
        b = b.lower()
    return a == b


class ExactMatch(Scorer):
    """1.0 when ``output`` equals ``expected``, else 0.0.

    Strings compare exactly (code point by code point). When either side is a dict or list, both
    sides are compared as JSON text with sorted keys (a string side is parsed first when it is
    JSON, kept raw otherwise); a number, bool or None facing a dict or list is an input error.
    Anything else compares by ``str(value)``. Option ``case_sensitive=False`` lower-cases both sides
    (Arthur Bench 0.3.1 has this flag inverted; we follow its documented meaning).
    """

    name = "exact_match"
    aliases = ("ExactMatch",)
    required_inputs = ()
    optional_inputs = ("output", "expected")
    default_options: ClassVar[Mapping[str, Any]] = {"case_sensitive": True}
    description = "1 if output equals expected (JSON values compared as JSON), else 0"

    def validate_options(self) -> None:
        from pytest_llmeval.core.errors import ScorerConfigError

        if not isinstance(self.options["case_sensitive"], bool):
            raise ScorerConfigError(
                self.name,
                "case_sensitive",
                f"must be True or False, not {describe_value(self.options['case_sensitive'])}",
            )
        self._lower = not self.options["case_sensitive"]

    def is_self_contained(self) -> bool:
        return type(self) is ExactMatch

    def value_function(self) -> Callable[[Any, Any], float] | None:
        return self._match if type(self) is ExactMatch else None

    def stores_results(self) -> bool:
        return type(self) is not ExactMatch  # a comparison costs less than a lookup

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return make_score(self._match(inputs.get("output"), inputs.get("expected")), "exact_match")

    def _match(self, output: Any, expected: Any) -> float:
        if type(output) is str and type(expected) is str:
            a: str = output
            b: str = expected
        elif isinstance(output, (dict, list)) or isinstance(expected, (dict, list)):
            return 1.0 if _json_equal(output, expected, self._lower, "exact_match") else 0.0
        else:
            a = str(output)
            b = str(expected)
        if self._lower:
            a = a.lower()
            b = b.lower()
        return 1.0 if a == b else 0.0


# -- numeric_diff ---------------------------------------------------------------------------------


def _number(value: Any, field: str, scorer: str) -> int | float | Fraction:
    if type(value) is int or type(value) is float or isinstance(value, bool):
        number: Any = value
    elif isinstance(value, numbers.Rational):
        number = Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, numbers.Real):
        number = float(value)
    else:
        raise ScorerInputError(
            scorer,
            field,
            "is missing" if value is None else f"is {describe_value(value)}, not a number",
            hint="Pass an int or float (parse numbers out of text before scoring)",
        )
    if type(number) is float and not math.isfinite(number):
        raise ScorerInputError(
            scorer,
            field,
            f"is {number!r}",
            hint="Pass a finite number",
        )
    return number  # type: ignore[no-any-return]


def numeric_similarity(output: Any, expected: Any) -> float:
    """``1 - |e - o| / (|e| + |o|)``; both zero gives 1. Inputs must be finite real numbers."""
    if expected == 0 and output == 0:
        return 1.0
    try:
        denominator = abs(expected) + abs(output)
        if denominator == math.inf:  # two floats near the float limit
            raise OverflowError
        return float(1 - abs(expected - output) / denominator)
    except OverflowError:  # also: an int too large for a float meets a float
        e = Fraction(expected)
        o = Fraction(output)
        return float(1 - abs(e - o) / (abs(e) + abs(o)))


class NumericDiff(Scorer):
    """Relative closeness of two numbers, in [0, 1].

    Score = ``1 - |e - o| / (|e| + |o|)``: symmetric, 1 for equal numbers, 0 for opposite signs;
    both zero gives 1. Bools count as numbers (``True`` is 1). A missing value, a string, or NaN /
    infinity is a :class:`ScorerInputError` naming the field.
    """

    name = "numeric_diff"
    aliases = ("NumericDiff",)
    required_inputs = ("output", "expected")
    description = "1 - |expected - output| / (|expected| + |output|)"

    def is_self_contained(self) -> bool:
        return type(self) is NumericDiff

    def value_function(self) -> Callable[[Any, Any], float] | None:
        return numeric_diff_value if type(self) is NumericDiff else None

    def stores_results(self) -> bool:
        return type(self) is not NumericDiff  # a subtraction costs less than a lookup

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return make_score(
            numeric_diff_value(inputs.get("output"), inputs.get("expected")), "numeric_diff"
        )


_INF = math.inf


def numeric_diff_value(output: Any, expected: Any) -> float:
    """:func:`numeric_similarity` of two inputs as given (None for a missing one), checked: a
    missing value, a non-number, NaN or an infinity is a :class:`ScorerInputError`."""
    to = type(output)
    te = type(expected)
    if (to is float or to is int) and (te is float or te is int):
        # Fast path for plain finite numbers; NaN, infinities and float overflow fall through
        # to the checked path below (``nan < inf`` and ``inf < inf`` are both false).
        try:
            denominator = abs(expected) + abs(output)
            if denominator < _INF:
                if not denominator:  # both zero
                    return 1.0
                value: float = 1 - abs(expected - output) / denominator  # true division: a float
                return value
        except OverflowError:
            pass
    checked_output = _number(output, "output", "numeric_diff")
    checked_expected = _number(expected, "expected", "numeric_diff")
    return numeric_similarity(checked_output, checked_expected)
