"""A result store in Redis, shared by machines, with the local SQLite store in front of it.

Same keys and same guarantees as the SQLite store: a read error is a miss, a damaged entry is a
miss, a failed write is one warning and never a failed test. Each entry is the JSON
``{"scorer": name, "value": {...}}`` under ``<prefix><key>``, with an optional TTL.

:class:`TieredStore` keeps the local store in front as a read-through cache: a run reads Redis
at most once per key, and a Redis hit is written to the local store. The password (in the URL or
``LLM_EVAL_REDIS_PASSWORD``) is never written anywhere: reprs, warnings and errors show the URL
without it, and any text from the client is scrubbed of it.

``redis`` (redis-py, the ``redis`` extra) is imported only when a store is made.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping
from typing import Any, final
from urllib.parse import unquote, urlsplit, urlunsplit

from pytest_llmeval.cache_protocol import KeyAbout, ResultStore
from pytest_llmeval.errors import LLMEvalError

__all__ = ["RedisStore", "RedisUnavailable", "TieredStore", "redact_url"]

_SCHEMES = ("redis", "rediss")


class RedisUnavailable(LLMEvalError):
    """The Redis result store could not be reached or refused the credentials."""


def redact_url(url: str) -> str:
    """``url`` without user name or password (safe to show)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable redis URL>"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _warn(message: str) -> None:
    from pytest_llmeval.cache import CacheWarning

    warnings.warn(CacheWarning(message), stacklevel=3)


@final
class RedisStore:
    """Results in Redis under ``prefix`` + key, each kept ``ttl`` seconds (None: no expiry).

    ``connect()`` checks the server (and the password) once, raising :class:`RedisUnavailable`;
    after that every failure is a miss (reads) or one warning (writes)."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "llmeval:",
        ttl: int | None = None,
        password: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        try:
            parts = urlsplit(url)
            url_password = unquote(parts.password) if parts.password else None
        except ValueError:
            raise LLMEvalError(
                "--llm-eval-cache-url is not a URL; use redis://host:port/db or rediss://..."
            ) from None
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise LLMEvalError(
                f"--llm-eval-cache-url {redact_url(url)!r}: use redis://host:port/db or "
                "rediss://host:port/db (TLS)"
            )
        if ttl is not None and ttl <= 0:
            raise LLMEvalError(
                f"--llm-eval-cache-ttl must be a positive number of seconds, not {ttl}"
            )
        self.url = redact_url(url)  # the only form of the URL this object keeps in the open
        self.prefix = prefix
        self.ttl = ttl
        self._secret = url_password or password or None
        self._lock = threading.Lock()
        self._write_warned = False
        self.hits = self.misses = self.writes = 0
        import redis

        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client: Any = redis.Redis.from_url(
            url,
            password=self._secret,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            decode_responses=False,
        )

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "<hidden>")
        return text

    def connect(self) -> None:
        """Check that the server answers and accepts the credentials; raise
        :class:`RedisUnavailable` (naming the URL without its password) if not."""
        try:
            self._client.ping()
        except self._errors as exc:
            raise RedisUnavailable(
                f"Redis result store {self.url} is unavailable: "
                f"{self._scrub(f'{type(exc).__name__}: {exc}')}"
            ) from None

    @property
    def client(self) -> Any:
        """The redis-py client (the run's rate limit shares the connection settings)."""
        return self._client

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value, or None: a miss, a read error, or a damaged entry."""
        try:
            raw = self._client.get(self.prefix + key)
            entry = json.loads(raw) if raw is not None else None
        except self._errors:
            entry = None
        except ValueError:  # not JSON (also a UnicodeDecodeError)
            entry = None
        value = entry.get("value") if isinstance(entry, dict) else None
        with self._lock:
            if isinstance(value, dict):
                self.hits += 1
            else:
                self.misses += 1
        return value if isinstance(value, dict) else None

    def get_entry(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """(scorer, value) for ``key`` or None (for the read-through into the local store)."""
        try:
            raw = self._client.get(self.prefix + key)
            entry = json.loads(raw) if raw is not None else None
        except self._errors:
            return None
        except ValueError:  # not JSON: a damaged entry is a miss
            return None
        if not isinstance(entry, dict):
            return None
        value, scorer = entry.get("value"), entry.get("scorer")
        if not isinstance(value, dict) or not isinstance(scorer, str):
            return None
        with self._lock:
            self.hits += 1
        return scorer, value

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        """Store ``value`` (with the TTL); a failure warns once per store, then is silent."""
        try:
            text = json.dumps(
                {"scorer": scorer, "value": value},
                sort_keys=True,
                ensure_ascii=True,
                allow_nan=False,
            )
        except (TypeError, ValueError):
            return  # not JSON: the result is simply not cached
        try:
            self._client.set(self.prefix + key, text, ex=self.ttl)
        except self._errors as exc:
            with self._lock:
                first, self._write_warned = not self._write_warned, True
            if first:
                _warn(
                    f"could not write to Redis result store {self.url}: "
                    f"{self._scrub(f'{type(exc).__name__}: {exc}')}; results that cannot be "
                    "written are not shared (further failures are not reported)"
                )
            return
        with self._lock:
            self.writes += 1

    def close(self) -> None:
        try:
            self._client.close()
        except self._errors:
            pass

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r}, ttl={self.ttl!r})"


@final
class TieredStore:
    """``local`` in front of ``remote``: reads try local first, then remote (a remote hit is
    written to local, so the next read stays local); writes go to both. Misses are explained
    by ``local`` (Redis keeps no key parts)."""

    def __init__(self, local: ResultStore, remote: RedisStore) -> None:
        self.local = local
        self.remote = remote

    def get(self, key: str) -> dict[str, Any] | None:
        hit = self.local.get(key)
        if hit is not None:
            return hit
        entry = self.remote.get_entry(key)
        if entry is None:
            return None
        scorer, value = entry
        self.local.put(key, scorer, value)
        return value

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        if about is not None and hasattr(self.local, "explain_miss"):
            self.local.put(key, scorer, value, about=about)  # type: ignore[call-arg]
        else:
            self.local.put(key, scorer, value)
        self.remote.put(key, scorer, value)

    def explain_miss(self, key: str, about: KeyAbout) -> str | None:
        """Says that Redis was asked too, then what the local store knows (Redis keeps no
        key parts to compare)."""
        explain = getattr(self.local, "explain_miss", None)
        local = explain(key, about) if explain is not None else None
        shared = f"not in the shared Redis store {self.remote.url} (prefix {self.remote.prefix!r})"
        return f"{shared}; locally: {local}" if local else shared

    def close(self) -> None:
        try:
            self.remote.close()
        finally:
            self.local.close()

    def __repr__(self) -> str:
        return f"TieredStore({self.local!r}, {self.remote!r})"
