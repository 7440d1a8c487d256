"""The cache modes as wrappers around a result store, chosen once at start-up.

``use`` is the store itself (the warm lookup stays one call on the store); ``refresh`` wraps it in
a :class:`WriteOnlyStore` (never reads, so every score is computed again and rewritten);
``replay`` in a :class:`ReplayStore` (reads, never writes, and a miss of a judge scorer is an
error); ``off`` is the :data:`NULL_STORE`. The scoring pipeline asks the store, never the mode,
so a new store (SQLite, Redis, one from ``pytest_llmeval_make_cache``) gets every mode for free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from pytest_llmeval.stores.cache_protocol import KeyAbout, ResultStore

__all__ = [
    "NULL_STORE",
    "NullStore",
    "ReadOnlyStore",
    "ReplayStore",
    "WriteOnlyStore",
    "for_mode",
    "inner_store",
    "misses_are_errors",
]


def _put(
    store: ResultStore, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None
) -> None:
    """``store.put`` with ``about`` only for a store that keeps it (has ``explain_miss``)."""
    if about is not None and hasattr(store, "explain_miss"):
        store.put(key, scorer, value, about=about)  # type: ignore[call-arg]
    else:
        store.put(key, scorer, value)


@final
class NullStore:
    """The store of ``--llm-eval-cache=off``: finds nothing, keeps nothing. The context hands
    out None for it, so the pipeline does not even compute keys."""

    def get(self, key: str) -> dict[str, Any] | None:
        return None

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        return None

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NullStore()"


NULL_STORE = NullStore()


class ReadOnlyStore:
    """Reads from ``inner`` and never writes to it; explains misses when ``inner`` can."""

    def __init__(self, inner: ResultStore) -> None:
        self.inner = inner

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        return None

    def explain_miss(self, key: str, about: KeyAbout) -> str | None:
        explain = getattr(self.inner, "explain_miss", None)
        return explain(key, about) if explain is not None else None

    def reject(self, key: str, problem: str) -> None:
        reject_entry(self.inner, key, problem)

    def invalid(self, key: str) -> str | None:
        return invalid_reason(self.inner, key)

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


@final
class ReplayStore(ReadOnlyStore):
    """``--llm-eval-cache=replay``: read-only, and a judge scorer's miss is an error (the
    recorded results stand in for the judge; a scorer that needs none just computes)."""

    misses_are_errors = True


@final
class WriteOnlyStore:
    """``--llm-eval-cache=refresh``: finds nothing, writes every result to ``inner``."""

    def __init__(self, inner: ResultStore) -> None:
        self.inner = inner

    def get(self, key: str) -> dict[str, Any] | None:
        return None

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        _put(self.inner, key, scorer, value, about)

    def explain_miss(self, key: str, about: KeyAbout) -> str | None:
        return None  # never asked: this store does not raise misses

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"WriteOnlyStore({self.inner!r})"


def for_mode(store: ResultStore | None, mode: str) -> ResultStore:
    """``store`` as cache ``mode`` uses it (``store`` may be None for ``off``)."""
    if mode == "off" or store is None:
        return NULL_STORE
    if mode == "use":
        return store
    if mode == "refresh":
        return WriteOnlyStore(store)
    if mode == "replay":
        return ReplayStore(store)
    raise ValueError(f"{mode!r} is not a cache mode (use, replay, refresh or off)")


def misses_are_errors(store: ResultStore) -> bool:
    """True when a judge scorer's miss in ``store`` must be an error (replay)."""
    return getattr(store, "misses_are_errors", False) is True


# Stores that validate what they read have two more methods (optional: a store from the
# ``pytest_llmeval_make_cache`` hook may lack them, and the lookup then warns by itself):
# ``reject(key, problem)``: the lookup found the value under ``key`` unusable by its scorer (out
# of its range...): the store counts it, warns naming itself, and forgets any copy it made of it;
# ``invalid(key)``: why the store refused or was told to refuse the entry under ``key``, or None.

_fallback_invalid: Any = None


def reject_entry(store: ResultStore, key: str, problem: str) -> None:
    """Tell ``store`` that the value under ``key`` cannot be used (``problem``); a store that
    cannot be told is named by its repr in the warning."""
    reject = getattr(store, "reject", None)
    if reject is not None:
        reject(key, problem)
        return
    global _fallback_invalid
    from pytest_llmeval.stores.cache_entries import InvalidEntries

    if _fallback_invalid is None:
        _fallback_invalid = InvalidEntries()
    _fallback_invalid.report(f"result store {store!r}", key, problem, stacklevel=4)


def invalid_reason(store: ResultStore, key: str) -> str | None:
    """Why ``store`` did not use the entry under ``key`` (it was invalid), or None."""
    invalid = getattr(store, "invalid", None)
    if invalid is not None:
        reason = invalid(key)
        return reason if isinstance(reason, str) else None
    if _fallback_invalid is not None:
        return _fallback_invalid.reason(key)  # type: ignore[no-any-return]
    return None


def inner_store(store: ResultStore) -> ResultStore:
    """The store under the mode wrappers (for tests and diagnostics)."""
    while isinstance(store, (ReadOnlyStore, WriteOnlyStore)):
        store = store.inner
    return store
