"""The interface of a result store (the built-in SQLite cache or one from a plugin hook)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pytest_llmeval.scoring import canonical_json

__all__ = ["ResultStore", "input_key"]


def input_key(identity_json: str, inputs: Mapping[str, Any]) -> str:
    """The result key: sha256 of the scorer's canonical identity JSON and the canonical JSON of
    the inputs (values JSON cannot express are keyed by their repr)."""
    h = hashlib.sha256(identity_json.encode("utf-8"))
    h.update(b"\x00")
    h.update(canonical_json(inputs).encode("utf-8"))
    return h.hexdigest()


@runtime_checkable
class ResultStore(Protocol):
    """Maps a result key to the JSON-safe value of a score. A read error must be a miss."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, scorer: str, value: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...
