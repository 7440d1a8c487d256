"""The result store: an embedded SQLite database in WAL mode, one row per scoring result.

An entry is a pure function of its key (scorer identity + inputs), like hypothesis's example
database, so entries never need invalidating: a changed scorer, prompt or judge makes a new key.
Read errors are misses; a corrupt file warns and is rebuilt; an unusable cache is switched off
for the run with a warning. It never fails a run.

Lock contention is not corruption: xdist workers opening a brand-new file at the same moment race
for the exclusive lock ``PRAGMA journal_mode=WAL`` needs (SQLite reports SQLITE_BUSY there without
waiting on the busy timeout), so "database is locked" while opening is retried with a short
backoff; if the lock outlasts the timeout the cache is switched off for the process with a warning
and the file is left alone. Only SQLITE_CORRUPT / SQLITE_NOTADB make a file be renamed aside.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, final

from pytest_llmeval.cache_protocol import input_key
from pytest_llmeval.scoring import canonical_json

__all__ = ["CacheWarning", "ResultCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    scorer TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""
DB_NAME = "results.sqlite3"
DEFAULT_TIMEOUT = 30.0

# SQLite primary result codes (the sqlite3 module only names them from Python 3.11 on).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
# Fallbacks for exceptions without ``sqlite_errorcode`` (Python 3.10).
_BUSY_MESSAGES = ("database is locked", "database is busy", "database table is locked")
_CORRUPT_MESSAGES = ("file is not a database", "malformed", "file is encrypted")
# Retrying a lock while opening: first pause, cap of the doubling pauses.
_BACKOFF_FIRST = 0.005
_BACKOFF_MAX = 0.25


class CacheWarning(UserWarning):
    """The result cache could not be used as asked; the run goes on without it (or rebuilt)."""


def cache_key(identity: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """The key of a result: sha256 over the canonical JSON of (scorer identity, inputs)."""
    return input_key(canonical_json(identity), inputs)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_lock_error(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is lock contention (SQLITE_BUSY / SQLITE_LOCKED): retry it, never rebuild."""
    code = _primary_code(exc)
    if code is not None:
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED)
    message = str(exc).lower()
    return any(m in message for m in _BUSY_MESSAGES)


def is_corrupt_error(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file itself is damaged (SQLITE_CORRUPT / SQLITE_NOTADB)."""
    code = _primary_code(exc)
    if code is not None:
        return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    message = str(exc).lower()
    return any(m in message for m in _CORRUPT_MESSAGES)


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@final
class ResultCache:
    """A process-local handle on the shared SQLite result store under ``directory``.

    The connection opens lazily (xdist workers each open their own) with a busy timeout of
    ``timeout`` seconds; writes are single autocommit upserts so a crash loses at most the result
    being written. Lock contention while opening is retried for up to ``timeout`` seconds, then
    the cache is switched off for the process (the file is never touched); a read that meets a
    lock is a miss, a write that still meets one after ``timeout`` is skipped (warned once).
    """

    def __init__(self, directory: Path | str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.timeout = float(timeout)
        self._local = threading.local()
        self._disabled = False
        self._write_warned = False
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.writes = 0

    # -- connection ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection | None:
        if self._disabled:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        deadline = time.monotonic() + self.timeout
        pause = _BACKOFF_FIRST
        rebuilt = False
        while True:
            opened = _file_id(self.path)
            try:
                conn = self._open(max(deadline - time.monotonic(), 0.0))
            except sqlite3.Error as exc:
                if is_lock_error(exc):
                    # Another process holds the lock (typically: switching a new file to WAL).
                    # Wait and retry; give up on the cache, never on the file, after the timeout.
                    left = deadline - time.monotonic()
                    if left > 0:
                        time.sleep(min(pause * (0.5 + random.random()), left))
                        pause = min(pause * 2, _BACKOFF_MAX)
                        continue
                    self._disable(
                        f"{exc}; still locked by another process after {self.timeout:g}s, "
                        "the file is left as it is"
                    )
                    return None
                if is_corrupt_error(exc) and not rebuilt:
                    # Not a database, or a damaged one: move it aside and start afresh. Another
                    # worker may be doing the same at the same moment; only the file that failed
                    # is renamed, so the loser simply opens the fresh file the winner created.
                    warnings.warn(
                        CacheWarning(
                            f"result cache {self.path} is unreadable ({exc}); rebuilding it"
                        ),
                        stacklevel=3,
                    )
                    self._quarantine(opened)
                    rebuilt = True
                    continue
                self._disable(str(exc))
                return None
            except OSError as exc:
                self._disable(str(exc))
                return None
            self._local.conn = conn
            return conn

    def _open(self, timeout: float) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        gitignore = self.directory / ".gitignore"
        if not gitignore.exists():
            try:
                gitignore.write_text("# created by pytest-llmeval\n*\n", encoding="utf-8")
            except OSError:
                pass
        conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            # WAL lets readers proceed while one writer commits. Switching needs a moment of
            # exclusive access and SQLite answers SQLITE_BUSY at once (no busy wait) when several
            # workers start together on a new file: _connect retries that.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            conn.execute("SELECT count(*) FROM results LIMIT 1").fetchone()
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _quarantine(self, file_id: tuple[int, int] | None) -> None:
        """Rename the damaged file (and its -wal/-shm) aside, unless it was replaced meanwhile."""
        if file_id is None or _file_id(self.path) != file_id:
            return  # another worker already moved it aside (and maybe rebuilt it)
        stamp = f"{os.getpid()}-{time.time_ns()}"
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                try:
                    src.rename(src.with_name(src.name + f".corrupt-{stamp}"))
                except OSError:
                    pass

    def _disable(self, reason: str) -> None:
        warnings.warn(
            CacheWarning(f"result cache {self.path} cannot be used ({reason}); running without it"),
            stacklevel=4,
        )
        self._disabled = True

    # -- API -------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key``, or None (a miss; also for any read error)."""
        conn = self._connect()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
            value = json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError):
            value = None
        with self._lock:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value if isinstance(value, dict) else None

    def put(self, key: str, scorer: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` (upsert). Failures warn once and are otherwise ignored."""
        conn = self._connect()
        if conn is None:
            return
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
        try:
            conn.execute(
                "INSERT INTO results (key, scorer, value, created) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
                "created = excluded.created, scorer = excluded.scorer",
                (key, scorer, text, time.time()),
            )
        except sqlite3.Error as exc:
            # Typically still locked after the busy timeout. The result is simply not cached;
            # one warning per handle (one per process) says so.
            with self._lock:
                first, self._write_warned = not self._write_warned, True
            if first:
                warnings.warn(
                    CacheWarning(
                        f"could not write result cache {self.path}: {exc}; results that cannot "
                        "be written are not cached (further failures are not reported)"
                    ),
                    stacklevel=2,
                )
            return
        with self._lock:
            self.writes += 1

    def __len__(self) -> int:
        conn = self._connect()
        if conn is None:
            return 0
        try:
            return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
        except sqlite3.Error:
            return 0

    def keys(self) -> Iterator[str]:
        conn = self._connect()
        if conn is None:
            return iter(())
        try:
            rows = conn.execute("SELECT key FROM results").fetchall()
        except sqlite3.Error:
            return iter(())
        return (row[0] for row in rows)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.close()
            finally:
                self._local.conn = None
