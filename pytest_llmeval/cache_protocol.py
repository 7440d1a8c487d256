"""The interface of a result store (the built-in SQLite cache or one from a plugin hook)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["ResultStore"]


@runtime_checkable
class ResultStore(Protocol):
    """Maps a result key to the JSON-safe value of a score. A read error must be a miss."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, scorer: str, value: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...
