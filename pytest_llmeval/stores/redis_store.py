"""A result store in Redis, shared by machines, with the local SQLite store in front of it.

Same keys and same guarantees as the SQLite store: a read error is a miss, a damaged entry is a
miss, a failed write is one warning and never a failed test. Each entry is the JSON
``{"scorer": name, "value": {...}, "created": unix time, "parts": {...}, "locator": ...}`` under
``<prefix><key>``, with an optional TTL (entries written before ``created``/``parts`` were kept
hold only scorer and value, and still read).

:class:`TieredStore` keeps the local store in front as a read-through cache: a run reads Redis
at most once per key, and a Redis hit is written to the local store. When Redis stops answering
mid-run, scoring goes on against the local store: the results computed meanwhile are noted
(:attr:`TieredStore.unpushed`) and pushed at the end of the run (:func:`push_keys`), or left in
the local store for ``python -m pytest_llmeval cache push``. The password (in the URL or
``LLM_EVAL_REDIS_PASSWORD``) is never written anywhere: reprs, warnings and errors show the URL
without it, and any text from the client is scrubbed of it.

Each entry is bound to its key: the JSON carries ``"key"`` and a read under another key is a
miss (an entry copied or renamed by hand). With a secret in ``LLM_EVAL_CACHE_HMAC_KEY`` every
entry written carries ``"sig"``, an HMAC-SHA256 over its canonical JSON (key included), and every
read requires a valid one: an unsigned or badly signed entry is a miss with a warning, so only
holders of the secret can make a score. Without it, anyone who can write the Redis can (see the
trust model in docs/guides/caching.md). Every value read is checked like the SQLite store's
(strict JSON, a score's shape) before it is used or copied into the local store; a value its
scorer refuses (out of range) is taken back from the local store (:meth:`TieredStore.reject`).

A user that may read but not write (a Redis ACL for pull-request runs) makes the store read-only
for the run on the first ``NOPERM``, with one warning: reads go on, results stay local.

``redis`` (redis-py, the ``redis`` extra) is imported only when a store is made.

Why this module is long: the shared store and its trust model in one place (key binding, optional
HMAC signing, bounded reads, read-only users, outage handling, the tiered store in front of
SQLite), since each read must apply all of them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final
from urllib.parse import unquote, urlsplit

from pytest_llmeval.core.errors import LLMEvalError
from pytest_llmeval.core.options import OPTION, env_value
from pytest_llmeval.core.redaction import redact_text, remember_secret
from pytest_llmeval.core.redaction import redact_url as _redact_url
from pytest_llmeval.stores.cache_entries import (
    MAX_ENTRY_CHARS,
    Entry,
    EntryError,
    InvalidEntries,
    encode_value,
    is_result_key,
    load_stored,
    value_problem,
)
from pytest_llmeval.stores.cache_protocol import KeyAbout, ResultStore

if TYPE_CHECKING:
    from pytest_llmeval.stores.cache import ResultCache

__all__ = [
    "HMAC_ENV",
    "PushOutcome",
    "RedisDown",
    "RedisReadOnly",
    "RedisStore",
    "RedisUnavailable",
    "TieredStore",
    "push_keys",
    "redact_url",
]

_SCHEMES = ("redis", "rediss")
# Keys per round trip when scanning, reading or pushing many entries.
BATCH = 500
# After Redis stopped answering, the tiered store leaves it alone this long before trying again
# (so an outage costs one failed call per interval, not one per lookup).
RETRY_AFTER = 5.0
# Seconds a TCP connection to a server that was away may take before it counts as still away.
PROBE_TIMEOUT = 1.0
# Redis hits a tiered store writes to the local store in one transaction.
FILL_BATCH = 256
# Keys a tiered store remembers having copied from Redis (to take back one its scorer refuses).
_REMEMBERED = 100_000
#: the environment variable holding the secret that signs and checks every Redis entry
HMAC_ENV: str = OPTION["llm_eval_cache_hmac_key"].env or ""
# What a signature covers besides the entry: a version, so that a later format cannot be
# confused with this one.
_SIG_DOMAIN = b"pytest-llmeval result entry v1\n"


class RedisUnavailable(LLMEvalError):
    """The Redis result store could not be reached or refused the credentials."""


class RedisDown(Exception):
    """Redis did not answer (connection refused or lost, timeout): an outage, not a miss.
    The message is scrubbed of the password. ``written``/``present``: what a :meth:`push`
    did before it happened."""

    def __init__(self, message: str, written: int = 0, present: int = 0) -> None:
        super().__init__(message)
        self.written = written
        self.present = present


class RedisReadOnly(Exception):
    """Redis refused a write with ``NOPERM``: this user may read but not write (an ACL for
    pull-request runs). Not an outage: the store stays usable for reads."""


def signing_key() -> bytes | None:
    """The secret of :data:`HMAC_ENV`, or None when it is unset or empty (a CI secret that a
    pull request from a fork does not get is an empty string)."""
    secret = env_value("llm_eval_cache_hmac_key")
    return secret.encode("utf-8", "surrogatepass") if secret else None


def _signature(secret: bytes, data: Mapping[str, Any]) -> str:
    body = json.dumps(
        {k: v for k, v in data.items() if k != "sig"},
        sort_keys=True,
        ensure_ascii=True,
        allow_nan=False,
    )
    return hmac.new(secret, _SIG_DOMAIN + body.encode("ascii"), hashlib.sha256).hexdigest()


def _seal(key: str, data: dict[str, Any], secret: bytes | None) -> str:
    """The stored JSON of an entry's fields ``data``: bound to ``key``, signed with ``secret``
    when there is one."""
    data["key"] = key
    if secret is not None:
        data["sig"] = _signature(secret, data)
    return json.dumps(data, sort_keys=True, ensure_ascii=True, allow_nan=False)


def redact_url(url: str) -> str:
    """``url`` as it may be shown: user-info (the password) and secret-looking parameters
    (``?password=``) masked as ``***`` (:func:`pytest_llmeval.core.redaction.redact_url`)."""
    return _redact_url(url)


def _warn(message: str) -> None:
    from pytest_llmeval.stores.cache_entries import CacheWarning

    warnings.warn(CacheWarning(message), stacklevel=3)


def _entry_text(
    key: str,
    scorer: str,
    value: Mapping[str, Any],
    about: KeyAbout | None,
    created: float | None,
    secret: bytes | None = None,
) -> str:
    """The stored JSON of an entry (raises ValueError/TypeError when ``value`` is not JSON)."""
    data: dict[str, Any] = {"scorer": scorer, "value": json.loads(encode_value(value))}
    if created is not None:
        data["created"] = created
    if about is not None:
        data["parts"] = json.loads(about.parts_json())
        if about.locator is not None:
            data["locator"] = about.locator
    return _seal(key, data, secret)


def entry_text(entry: Entry, secret: bytes | None = None) -> str:
    """The stored JSON of ``entry`` (its ``created`` and parts kept as they are), bound to its
    key and signed with ``secret`` when given."""
    data: dict[str, Any] = {"scorer": entry.scorer, "value": dict(entry.value)}
    if entry.created is not None:
        data["created"] = entry.created
    if entry.parts is not None:
        data["parts"] = dict(entry.parts)
    if entry.locator is not None:
        data["locator"] = entry.locator
    return _seal(entry.key, data, secret)


def check_entry(key: str, raw: bytes | str, secret: bytes | None = None) -> Entry:
    """The entry stored under ``key``; :class:`EntryError` says why it cannot be used (damaged,
    not a result, bound to another key, unsigned or badly signed when ``secret`` is given)."""
    data = load_stored(raw)
    bound = data.get("key")
    if bound is not None and bound != key:
        shown = bound if isinstance(bound, str) and len(bound) <= 64 else repr(bound)[:70]
        raise EntryError(f"it is bound to another key ({shown}): copied here from elsewhere")
    if secret is not None:
        sig = data.get("sig")
        if sig is None:
            raise EntryError(
                f"it is not signed, and {HMAC_ENV} is set: only signed entries are used"
            )
        if bound is None:
            raise EntryError("it is signed but names no key")
        if not isinstance(sig, str) or not hmac.compare_digest(sig, _signature(secret, data)):
            raise EntryError(
                f"its signature does not match (written with another {HMAC_ENV}, or changed "
                "since it was signed)"
            )
    entry = Entry.checked(
        key,
        data.get("scorer"),
        data.get("value"),
        data.get("created"),
        data.get("parts"),
        data.get("locator"),
        any_key=True,
    )
    problem = value_problem(entry.value)
    if problem is not None:
        raise EntryError(problem)
    return entry


def decode_entry(key: str, raw: bytes | str | None, secret: bytes | None = None) -> Entry | None:
    """The entry stored under ``key``, or None when there is none or it cannot be used."""
    if raw is None:
        return None
    try:
        return check_entry(key, raw, secret)
    except EntryError:
        return None


@final
class RedisStore:
    """Results in Redis under ``prefix`` + key, each kept ``ttl`` seconds (None: no expiry).

    ``connect()`` checks the server (and the password) once, raising :class:`RedisUnavailable`;
    after that every failure is a miss (reads) or one warning (writes). :meth:`read` and
    :meth:`write` raise :class:`RedisDown` instead, for a caller that handles outages."""

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
        try:
            self._address = (parts.hostname, parts.port or 6379)
        except ValueError:
            raise LLMEvalError(
                f"--llm-eval-cache-url {redact_url(url)!r}: the port is not a number"
            ) from None
        self.prefix = prefix
        self.ttl = ttl
        self._secret = url_password or password or None
        remember_secret(self._secret or "")  # kept out of every error text, not only ours
        # Read once: the run signs and checks with one key (never shown, never stored).
        self._signing_key = signing_key()
        if self._signing_key:
            remember_secret(self._signing_key.decode("utf-8", "surrogatepass"))
        self._lock = threading.Lock()
        self._write_warned = False
        self.hits = self.misses = self.writes = 0
        self._invalid = InvalidEntries()
        #: why this user may not write (the first NOPERM), or None: then nothing is written
        self.read_only: str | None = None
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._noperm: type[BaseException] = redis.exceptions.NoPermissionError
        # Connection lost / refused / timed out: an outage (the tiered store keeps going on the
        # local store and pushes later). Any other error (e.g. WRONGTYPE, OOM) concerns one key.
        self._down_errors: tuple[type[BaseException], ...] = (
            redis.ConnectionError,
            redis.TimeoutError,
            OSError,
        )
        self._client: Any = redis.Redis.from_url(
            url,
            password=self._secret,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            decode_responses=False,
            # A restarted server drops pooled connections: one quick retry reconnects; a server
            # that is gone fails within a fraction of a second instead of redis-py's default ~10
            # backed-off retries.
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        )
        # Lookups go through one connection kept for them (made on the first lookup, from the
        # same pool; redis-py serialises threads on it): no pool checkout and release per GET,
        # about 15% of a cold read-through's time.
        self._reader: Any = None
        self._reader_lock = threading.Lock()

    def _scrub(self, text: str) -> str:
        signing = self._signing_key.decode("utf-8", "surrogatepass") if self._signing_key else None
        return redact_text(text, (self._secret, signing))

    @property
    def name(self) -> str:
        """How warnings name this store (no credentials)."""
        return f"Redis {self.url} prefix {self.prefix!r}"

    @property
    def signed(self) -> bool:
        """Whether entries are signed and checked (:data:`HMAC_ENV` is set)."""
        return self._signing_key is not None

    @property
    def invalid_count(self) -> int:
        """Invalid entries met (each was a miss)."""
        return self._invalid.count

    def reject(self, key: str, problem: str) -> None:
        """The entry read under ``key`` cannot be used by its scorer (``problem``): a warning."""
        self._invalid.report(self.name, key, problem, stacklevel=4)

    def invalid(self, key: str) -> str | None:
        """Why the entry under ``key`` was not used (it was invalid), or None."""
        return self._invalid.reason(key)

    def describe(self, exc: BaseException) -> str:
        """``exc`` as text that is safe to show (without the password)."""
        return self._scrub(f"{type(exc).__name__}: {exc}")

    def connect(self) -> None:
        """Check that the server answers and accepts the credentials; raise
        :class:`RedisUnavailable` (naming the URL without its password) if not."""
        try:
            self._client.ping()
        except self._errors as exc:
            raise RedisUnavailable(
                f"Redis result store {self.url} is unavailable: {self.describe(exc)}"
            ) from None

    @property
    def client(self) -> Any:
        """The redis-py client (the run's rate limit shares the connection settings)."""
        return self._client

    def reachable(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether the server's port accepts a TCP connection within ``timeout`` seconds: a
        cheap probe before talking to a server that was away (a host that drops packets would
        otherwise hold a lookup for the whole socket timeout, retries included)."""
        return self._probe(timeout) is None

    def _probe(self, timeout: float = PROBE_TIMEOUT) -> str | None:
        try:
            with socket.create_connection(self._address, timeout=timeout):
                return None
        except OSError as exc:
            host, port = self._address
            return f"{type(exc).__name__} connecting to {host}:{port}: {exc}"

    def ping_error(self) -> str | None:
        """None when the server answers and accepts the credentials, else why not (safe to
        show)."""
        problem = self._probe()
        if problem is not None:
            return problem
        try:
            self._client.ping()
        except self._errors as exc:
            return self.describe(exc)
        return None

    # -- one key ---------------------------------------------------------------------------

    def read(self, key: str) -> Entry | None:
        """The entry under ``key`` or None (absent, damaged, or an error about that key);
        :class:`RedisDown` when the server does not answer."""
        try:
            # At most one byte more than any entry may have: a huge value written to the shared
            # store is refused without every reader fetching all of it. A missing key reads
            # as b"" (no entry is empty).
            raw = self._lookup_client().getrange(self.prefix + key, 0, MAX_ENTRY_CHARS) or None
        except self._down_errors as exc:
            raise RedisDown(self.describe(exc)) from None
        except self._errors:
            return None
        entry: Entry | None = None
        if raw is not None:
            try:
                entry = check_entry(key, raw, self._signing_key)
            except EntryError as exc:
                self._invalid.report(self.name, key, str(exc), stacklevel=4)
        with self._lock:
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
        return entry

    def write(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> bool:
        """Store ``value`` (with the TTL); False when it is not JSON (not cached) or this user
        may not write. Raises :class:`RedisDown` when the server does not answer,
        :class:`RedisReadOnly` on the first ``NOPERM``, and redis-py's error for any other
        failure (its text may hold the password: show it with :meth:`describe`)."""
        if self.read_only is not None:
            return False
        try:
            text = _entry_text(key, scorer, value, about, time.time(), self._signing_key)
        except (TypeError, ValueError):
            return False  # not JSON: the result is simply not cached
        try:
            self._client.set(self.prefix + key, text, ex=self.ttl)
        except self._down_errors as exc:
            raise RedisDown(self.describe(exc)) from None
        except self._noperm as exc:
            self.read_only = self.describe(exc)
            raise RedisReadOnly(self.read_only) from None
        with self._lock:
            self.writes += 1
        return True

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value, or None: a miss, a read error, or a damaged entry."""
        try:
            entry = self.read(key)
        except RedisDown:
            with self._lock:
                self.misses += 1
            return None
        return None if entry is None else dict(entry.value)

    def get_entry(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """(scorer, value) for ``key`` or None."""
        try:
            entry = self.read(key)
        except RedisDown:
            return None
        return None if entry is None else (entry.scorer, dict(entry.value))

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        """Store ``value`` (with the TTL); a failure warns once per store, then is silent."""
        try:
            self.write(key, scorer, value, about)
        except RedisReadOnly as exc:
            self.warn_read_only(str(exc), "new results are not shared")
        except RedisDown as exc:
            self._write_failed(exc, "results that cannot be written are not shared")
        except self._errors as exc:
            self._write_failed(exc, "results that cannot be written are not shared")

    def warn_read_only(self, reason: str, consequence: str) -> None:
        """Say once that this user may not write (a read-only ACL user): not an outage."""
        _warn(
            f"{self.name}: this Redis user may not write ({reason}); the store is read-only for "
            f"this run: stored results are still read, {consequence}"
        )

    def _write_failed(self, exc: BaseException, consequence: str) -> None:
        with self._lock:
            first, self._write_warned = not self._write_warned, True
        if first:
            text = str(exc) if isinstance(exc, RedisDown) else self.describe(exc)
            _warn(
                f"could not write to Redis result store {self.url}: {text}; {consequence} "
                "(further failures are not reported)"
            )

    # -- many keys (the cache tools and the push at the end of a run) -------------------------

    def scan(self, batch: int = BATCH) -> Iterator[list[tuple[str, bytes | None]]]:
        """Batches of (key, stored bytes) of every result key under the prefix (other keys
        under it, e.g. a rate limiter's, are left out). Raises redis-py errors."""
        pattern = _glob_escape(self.prefix) + "*"
        start = len(self.prefix)
        seen: set[bytes] = set()  # SCAN may return a key more than once
        chunk: list[bytes] = []
        for name in self._client.scan_iter(match=pattern, count=batch):
            if name in seen:
                continue
            seen.add(name)
            try:
                key = name[start:].decode("ascii")
            except UnicodeDecodeError:
                continue
            if is_result_key(key):
                chunk.append(name)
            if len(chunk) >= batch:
                yield self._fetch(chunk)
                chunk = []
        if chunk:
            yield self._fetch(chunk)

    def _fetch(self, names: list[bytes]) -> list[tuple[str, bytes | None]]:
        values = self._client.mget(names)
        start = len(self.prefix)
        return [(n[start:].decode("ascii"), v) for n, v in zip(names, values, strict=True)]

    def entries(self) -> Iterator[tuple[Entry | None, str, int]]:
        """(entry or None when damaged, key, stored size in bytes) of every result key."""
        for chunk in self.scan():
            for key, raw in chunk:
                if raw is None:
                    continue  # expired between SCAN and MGET
                yield decode_entry(key, raw, self._signing_key), key, len(raw)

    def delete(self, keys: Sequence[str]) -> int:
        """Remove ``keys``; the number removed. Raises redis-py errors."""
        removed = 0
        for i in range(0, len(keys), BATCH):
            removed += int(self._client.delete(*(self.prefix + k for k in keys[i : i + BATCH])))
        return removed

    def push(self, entries: Iterable[Entry], *, replace: bool = False) -> tuple[int, int]:
        """Write ``entries`` (their ``created`` and parts as they are, with this store's TTL);
        an entry already in Redis is left as it is unless ``replace``. Returns (written, already
        there). Raises :class:`RedisDown` or redis-py's error."""
        written = present = 0
        batch: list[Entry] = []

        def flush() -> None:
            nonlocal written, present
            pipe = self._client.pipeline(transaction=False)
            for e in batch:
                text = entry_text(e, self._signing_key)
                pipe.set(self.prefix + e.key, text, ex=self.ttl, nx=not replace)
            for ok in pipe.execute():
                if ok:
                    written += 1
                else:
                    present += 1
            batch.clear()

        try:
            for entry in entries:
                batch.append(entry)
                if len(batch) >= BATCH:
                    flush()
            if batch:
                flush()
        except self._down_errors as exc:
            raise RedisDown(self.describe(exc), written, present) from None
        with self._lock:
            self.writes += written
        return written, present

    def _lookup_client(self) -> Any:
        """The client holding the lookups' connection (made here: connecting may raise)."""
        reader = self._reader
        if reader is None:
            import redis

            with self._reader_lock:
                reader = self._reader
                if reader is None:
                    reader = redis.Redis(
                        connection_pool=self._client.connection_pool,
                        single_connection_client=True,
                    )
                    self._reader = reader
        return reader

    def close(self) -> None:
        try:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        except self._errors:
            pass
        try:
            self._client.close()
        except self._errors:
            pass

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r}, ttl={self.ttl!r})"


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis glob pattern."""
    out = []
    for ch in text:
        if ch in "*?[]\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)


def _put_local(
    store: ResultStore, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None
) -> None:
    if about is not None and hasattr(store, "explain_miss"):
        store.put(key, scorer, value, about=about)  # type: ignore[call-arg]
    else:
        store.put(key, scorer, value)


@final
class TieredStore:
    """``local`` in front of ``remote``: reads try local first, then remote (a remote hit is
    written to local, so the next read stays local); writes go to both. Misses are explained
    by ``local`` (Redis keeps only the parts, not the nearest entries to compare).

    When Redis stops answering, the run goes on against ``local``: Redis is left alone for
    ``retry_after`` seconds at a time (one warning per process says so), and the keys written
    meanwhile are kept in :attr:`unpushed`, for :func:`push_keys` at the end of the run."""

    def __init__(
        self,
        local: ResultStore,
        remote: RedisStore,
        *,
        retry_after: float = RETRY_AFTER,
        down: str | None = None,
    ) -> None:
        self.local = local
        self.remote = remote
        self.retry_after = retry_after
        self._lock = threading.Lock()
        #: why Redis stopped answering (the first time), or None; ``down``: it did not answer
        #: at start (already reported), so the run starts on the local store
        self.outage: str | None = down
        self._down_until: float | None = None if down is None else time.monotonic() + retry_after
        #: keys stored locally but not in Redis (written while it did not answer)
        self.unpushed: set[str] = set()
        # Redis hits not yet written to the local store: written FILL_BATCH at a time in one
        # transaction (and on close), which makes a cold read-through several times faster
        # than a commit per hit. Until then they are served from here.
        self._fills: dict[str, tuple[str, Mapping[str, Any], KeyAbout | None]] = {}
        # Keys whose value came from Redis (the most recent): a value its scorer refuses is
        # taken back from the local store, so a poisoned entry is not kept on this machine.
        self._from_remote: OrderedDict[str, None] = OrderedDict()
        self._read_only_warned = False

    def _usable(self) -> bool:
        with self._lock:
            until = self._down_until
            if until is None:
                return True
            if time.monotonic() < until:
                return False
            # Time to try again: the next caller probes, the others wait for its verdict.
            self._down_until = time.monotonic() + self.retry_after
        return self.remote.reachable()

    def _down(self, exc: RedisDown) -> None:
        with self._lock:
            first = self.outage is None
            if first:
                self.outage = str(exc)
            self._down_until = time.monotonic() + self.retry_after
        if first:
            _warn(
                f"Redis result store {self.remote.url} stopped answering ({exc}); scoring "
                "continues on the local result cache, and the results computed meanwhile are "
                "pushed to Redis at the end of the run"
            )

    def _up(self) -> None:
        if self._down_until is not None:
            with self._lock:
                self._down_until = None

    def get(self, key: str) -> dict[str, Any] | None:
        hit = self.local.get(key)
        if hit is not None:
            return hit
        if self._fills:
            with self._lock:
                filled = self._fills.get(key)
            if filled is not None:
                return dict(filled[1])
        if not self._usable():
            return None
        try:
            entry = self.remote.read(key)
        except RedisDown as exc:
            self._down(exc)
            return None
        self._up()
        if entry is None:
            return None
        about = None if entry.parts is None else KeyAbout(entry.scorer, entry.parts, entry.locator)
        with self._lock:
            full = len(self._fills) >= FILL_BATCH
        if full:
            # Before this hit joins them: it stays pending until its scorer has checked it.
            self.flush()
        with self._lock:
            self._fills[key] = (entry.scorer, entry.value, about)
            self._from_remote[key] = None
            self._from_remote.move_to_end(key)
            while len(self._from_remote) > _REMEMBERED:
                self._from_remote.popitem(last=False)
        return dict(entry.value)

    def reject(self, key: str, problem: str) -> None:
        """The value read under ``key`` cannot be used by its scorer (``problem``). One from
        Redis is never kept locally (dropped before it is written, or removed after); the
        warning names the store it came from."""
        with self._lock:
            remote = key in self._from_remote
            pending = self._fills.pop(key, None) is not None
            self._from_remote.pop(key, None)
        if not remote:
            reject = getattr(self.local, "reject", None)
            if reject is not None:
                reject(key, problem)
            return
        if not pending:
            discard = getattr(self.local, "discard", None)
            if discard is not None:
                discard(key)
        self.remote.reject(key, problem)

    def invalid(self, key: str) -> str | None:
        """Why the entry under ``key`` (local or in Redis) was not used, or None."""
        invalid = getattr(self.local, "invalid", None)
        reason = invalid(key) if invalid is not None else None
        return reason or self.remote.invalid(key)

    def flush(self) -> None:
        """Write the Redis hits read so far to the local store."""
        with self._lock:
            fills, self._fills = self._fills, {}
        if not fills:
            return
        put_many = getattr(self.local, "put_many", None)
        if put_many is not None:
            put_many([(k, s, v, a) for k, (s, v, a) in fills.items()])
        else:
            for k, (s, v, a) in fills.items():
                _put_local(self.local, k, s, v, a)

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        _put_local(self.local, key, scorer, value, about)
        if self.remote.read_only is not None:
            return  # this user may not write: results stay local (said once)
        if not self._usable():
            with self._lock:
                self.unpushed.add(key)
            return
        try:
            self.remote.write(key, scorer, value, about)
        except RedisReadOnly as exc:
            with self._lock:
                first, self._read_only_warned = not self._read_only_warned, True
            if first:
                self.remote.warn_read_only(
                    str(exc), "new results are kept in the local result cache only"
                )
            return
        except RedisDown as exc:
            self._down(exc)
            with self._lock:
                self.unpushed.add(key)
            return
        except self.remote._errors as exc:  # e.g. out of memory: pushed again at the end
            with self._lock:
                self.unpushed.add(key)
            self.remote._write_failed(exc, "the run tries again at its end")
            return
        self._up()

    def explain_miss(self, key: str, about: KeyAbout) -> str | None:
        """Says that Redis was asked too, then what the local store knows (Redis keeps no
        key parts to compare)."""
        explain = getattr(self.local, "explain_miss", None)
        local = explain(key, about) if explain is not None else None
        shared = f"not in the shared Redis store {self.remote.url} (prefix {self.remote.prefix!r})"
        refused = self.remote.invalid(key)
        if refused is not None:
            shared = f"the entry in {self.remote.name} cannot be used: {refused}"
        if self.outage is not None:
            shared = f"Redis store {self.remote.url} did not answer ({self.outage})"
        return f"{shared}; locally: {local}" if local else shared

    def close(self) -> None:
        try:
            self.flush()
            self.remote.close()
        finally:
            self.local.close()

    def __repr__(self) -> str:
        return f"TieredStore({self.local!r}, {self.remote!r})"


@final
@dataclass(frozen=True)
class PushOutcome:
    """What :func:`push_keys` did: entries ``pushed``, ``present`` in Redis already, not found
    in the local store (``missing``), and ``remaining`` local only because Redis still did not
    answer (``error`` says why)."""

    pushed: int = 0
    present: int = 0
    missing: int = 0
    remaining: int = 0
    error: str | None = None


def push_keys(local: ResultCache, remote: RedisStore, keys: Iterable[str]) -> PushOutcome:
    """Copy the entries of ``keys`` from ``local`` to ``remote``, leaving any already there
    (another process or machine may have pushed the same result). Never raises."""
    wanted = sorted(set(keys))
    if not wanted:
        return PushOutcome()
    problem = remote.ping_error()
    if problem is not None:
        return PushOutcome(remaining=len(wanted), error=problem)
    entries: list[Entry] = []
    missing = 0
    for key in wanted:
        entry = local.entry(key)
        if entry is None:
            missing += 1
        else:
            entries.append(entry)
    try:
        pushed, present = remote.push(entries)
    except RedisDown as exc:
        done = exc.written + exc.present
        return PushOutcome(exc.written, exc.present, missing, len(entries) - done, error=str(exc))
    except remote._errors as exc:
        return PushOutcome(missing=missing, remaining=len(entries), error=remote.describe(exc))
    return PushOutcome(pushed=pushed, present=present, missing=missing)
