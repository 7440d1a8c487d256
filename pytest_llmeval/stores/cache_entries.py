"""One stored result with what the cache tools show of it, and its JSONL form.

Both stores keep, beside a value, its scorer, when it was recorded and the parts of its key
(scorer version, judge model, ... see :func:`cache_protocol.key_parts`). Entries written before a
store kept those simply lack them (``created`` / ``parts`` None) and still read.

The JSONL line of an entry (``python -m pytest_llmeval cache export``) is canonical JSON (sorted
keys, ASCII): export, import and export again gives the same bytes.
"""

from __future__ import annotations

import json
import math
import re
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

__all__ = [
    "MAX_ENTRY_CHARS",
    "Entry",
    "EntryError",
    "InvalidEntries",
    "encode_value",
    "is_result_key",
    "load_stored",
    "score_value_problem",
]

#: The longest stored entry read (characters of its JSON). A judge's rationale and metadata
#: take kilobytes; anything near this is not a result, and is refused before it is parsed.
MAX_ENTRY_CHARS = 8 * 1024 * 1024

_KEY = re.compile(r"[0-9a-f]{64}")
_FIELDS = ("key", "scorer", "value", "created", "parts", "locator")


class EntryError(ValueError):
    """A JSONL line or stored entry that is not a result entry (the message says why)."""


def is_result_key(key: str) -> bool:
    """Whether ``key`` has the form of a result key (sha256 hex)."""
    return _KEY.fullmatch(key) is not None


def encode_value(value: Mapping[str, Any]) -> str:
    """The stored text of a value (raises ValueError/TypeError when it is not strict JSON)."""
    # ASCII: a lone surrogate (valid in JSON input) cannot be stored as UTF-8 text.
    return json.dumps(value, sort_keys=True, ensure_ascii=True, allow_nan=False)


def _no_constant(name: str) -> Any:
    raise EntryError(f"{name} is not a JSON number (NaN and Infinity are not stored)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf
        raise EntryError(f"{text} is not a finite number")
    return value


# One decoder for every read: json.loads with options would build a new one per call, which
# was a third of a warm cache hit's time.
_STRICT = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` without NaN/Infinity, numbers that overflow to infinity, or nesting too
    deep to parse (raises ValueError; :class:`EntryError` says which)."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8")  # a UnicodeDecodeError is a ValueError
    try:
        return _STRICT.decode(text)
    except RecursionError:
        raise EntryError("nested too deeply to be a result") from None


def load_stored(raw: str | bytes) -> dict[str, Any]:
    """A stored entry's JSON object, read strictly; :class:`EntryError` says what is wrong
    (too large, not strict JSON, not an object)."""
    if len(raw) > MAX_ENTRY_CHARS:
        raise EntryError(f"{len(raw)} characters, larger than any result ({MAX_ENTRY_CHARS})")
    try:
        data = strict_loads(raw)
    except EntryError:
        raise
    except ValueError as exc:  # also a UnicodeDecodeError
        raise EntryError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise EntryError(f"not a JSON object ({type(data).__name__})")
    return data


def _is_number(value: Any) -> bool:
    # bool is an int to Python, never a score; a string of digits is not a number either.
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


#: metadata a record gets from the plugin only (gates read it): never from a stored score
RESERVED_METADATA = ("unreached",)
#: deeper metadata is no scorer's: copying it into a record would recurse that deep
MAX_METADATA_DEPTH = 32


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` deep (iteratively: a value
    nested past the recursion limit is what this looks for)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "calls", "cached_prompt_tokens")


def _usage_problem(usage: Any) -> str | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"'usage' is {_describe(usage)}, not an object or null"
    for name in _USAGE_COUNTS:
        n = usage.get(name, 0)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            return f"'usage' field {name!r} is {_describe(n)}, not a count"
    cost = usage.get("cost_usd")
    if cost is not None and not (_is_number(cost) and cost >= 0):
        return f"'usage' field 'cost_usd' is {_describe(cost)}, not an amount"
    models = usage.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return f"'usage' field 'models' is {_describe(models)}, not a list of names"
    return None


def score_value_problem(value: Mapping[str, Any]) -> str | None:
    """What makes ``value`` (a stored score, as :meth:`Score.to_cache` writes it) unusable as
    a score, whatever the scorer; None when it is one. Its range is the scorer's to check."""
    if "value" not in value:
        return "'value' is missing"
    number = value["value"]
    if not _is_number(number):
        return f"'value' is {_describe(number)}, not a number"
    rationale = value.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        return f"'rationale' is {_describe(rationale)}, not a string or null"
    metadata = value.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            return f"'metadata' is {_describe(metadata)}, not an object"
        for name in RESERVED_METADATA:
            if name in metadata:
                return f"'metadata' holds {name!r}, which only the plugin sets"
        if metadata and _depth_over(metadata, MAX_METADATA_DEPTH):
            return f"'metadata' nests more than {MAX_METADATA_DEPTH} levels deep"
    return _usage_problem(value.get("usage"))


def value_problem(value: Mapping[str, Any]) -> str | None:
    """:func:`score_value_problem` for a stored score (an object with ``value``); None for
    other entries (a G-Eval's evaluation steps), which their reader checks."""
    return score_value_problem(value) if "value" in value else None


# How many invalid entries a store names one by one before it only counts them, and how many
# reasons it keeps for explaining replay errors.
_NAMED = 3
_KEPT = 1024


@final
class InvalidEntries:
    """The invalid entries one store met: each is a miss; the first few warn with the store,
    the key and what is wrong, then one warning says that further ones are only counted (a
    run over 10,000 damaged entries gives four warnings, not 10,000)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self._why: OrderedDict[str, str] = OrderedDict()

    def report(self, store: str, key: str, problem: str, *, stacklevel: int = 3) -> None:
        from pytest_llmeval.stores.cache_entries import CacheWarning

        with self._lock:
            self.count += 1
            n = self.count
            self._why[key] = problem
            self._why.move_to_end(key)
            while len(self._why) > _KEPT:
                self._why.popitem(last=False)
        if n <= _NAMED:
            message = (
                f"{store}: invalid entry {key}: {problem}; it is not used (a miss: the result "
                "is computed again where it can be)"
            )
        elif n == _NAMED + 1:
            message = (
                f"{store}: further invalid entries are not reported one by one (count: "
                f"{n} so far); each is a miss"
            )
        else:
            return
        warnings.warn(CacheWarning(message), stacklevel=stacklevel)

    def reason(self, key: str) -> str | None:
        """Why the entry under ``key`` was refused (the last few hundred keys), or None."""
        with self._lock:
            return self._why.get(key)


@final
@dataclass(frozen=True)
class Entry:
    """A stored result: ``key``, ``scorer``, the JSON ``value``, when it was recorded (Unix
    time, None for an entry from before that was kept), its key ``parts`` and ``locator``."""

    key: str
    scorer: str
    value: Mapping[str, Any]
    created: float | None = None
    parts: Mapping[str, Any] | None = None
    locator: str | None = None

    @property
    def version(self) -> Any:
        """The scorer version the key was made with (None when not recorded)."""
        return None if self.parts is None else self.parts.get("version")

    @property
    def judge_model(self) -> str | None:
        """The judge model of a judge scorer's key (None for other scorers or not recorded)."""
        if self.parts is None:
            return None
        model = self.parts.get("extra.judge.model")
        return model if isinstance(model, str) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "scorer": self.scorer,
            "value": dict(self.value),
            "created": self.created,
            "parts": None if self.parts is None else dict(self.parts),
            "locator": self.locator,
        }

    def to_line(self) -> str:
        """The JSONL line (without the newline)."""
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=True, allow_nan=False)

    @classmethod
    def from_line(cls, text: str) -> Entry:
        """Parse and check one JSONL line; :class:`EntryError` names the field at fault."""
        if len(text) > MAX_ENTRY_CHARS:
            raise EntryError(f"{len(text)} characters, larger than any result ({MAX_ENTRY_CHARS})")
        try:
            data = strict_loads(text)
        except EntryError:
            raise
        except ValueError as exc:
            raise EntryError(f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise EntryError(f"expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise EntryError(f"unknown field {unknown[0]!r}; an entry has: {', '.join(_FIELDS)}")
        for name in ("key", "scorer", "value"):
            if name not in data:
                raise EntryError(f"field {name!r} is missing")
        entry = cls.checked(
            data["key"],
            data["scorer"],
            data["value"],
            data.get("created"),
            data.get("parts"),
            data.get("locator"),
        )
        problem = value_problem(entry.value)
        if problem is not None:
            raise EntryError(f"field 'value': {problem}")
        return entry

    @classmethod
    def checked(
        cls,
        key: Any,
        scorer: Any,
        value: Any,
        created: Any = None,
        parts: Any = None,
        locator: Any = None,
        *,
        any_key: bool = False,
    ) -> Entry:
        """An entry from untrusted fields, each checked (:class:`EntryError` names the bad one).
        ``any_key``: a stored entry read by its key, which need not look like a result key."""
        if not isinstance(key, str) or not (any_key or is_result_key(key)):
            raise EntryError(f"field 'key' must be 64 lowercase hex digits (sha256), got {key!r}")
        if not isinstance(scorer, str) or not scorer:
            raise EntryError(f"field 'scorer' must be a non-empty string, got {scorer!r}")
        if not isinstance(value, dict):
            raise EntryError(f"field 'value' must be a JSON object, got {type(value).__name__}")
        if created is not None and (
            isinstance(created, bool)
            or not isinstance(created, (int, float))
            or not math.isfinite(created)
            or created < 0
        ):
            raise EntryError(
                f"field 'created' must be a Unix time (seconds) or null, got {created!r}"
            )
        if parts is not None and not isinstance(parts, dict):
            raise EntryError(f"field 'parts' must be a JSON object or null, got {parts!r}")
        if locator is not None and not isinstance(locator, str):
            raise EntryError(f"field 'locator' must be a string or null, got {locator!r}")
        return cls(key, scorer, value, None if created is None else float(created), parts, locator)


class CacheWarning(UserWarning):
    """The result cache could not be used as asked; the run goes on without it (or rebuilt)."""
