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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

__all__ = ["Entry", "EntryError", "encode_value", "is_result_key"]

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


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` without NaN/Infinity (raises ValueError)."""
    return json.loads(text, parse_constant=_no_constant)


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
        return cls.checked(
            data["key"],
            data["scorer"],
            data["value"],
            data.get("created"),
            data.get("parts"),
            data.get("locator"),
        )

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
