"""The result store: an embedded SQLite database in WAL mode, one row per scoring result.

An entry is a pure function of its key (scorer identity + inputs), like hypothesis's example
database, so entries never need invalidating: a changed scorer, prompt or judge makes a new key.
Read errors are misses; a corrupt file warns and is rebuilt; an unusable cache is switched off
for the run with a warning. It never fails a run.
"""

from __future__ import annotations

import json
import os
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


class CacheWarning(UserWarning):
    """The result cache could not be used as asked; the run goes on without it (or rebuilt)."""


def cache_key(identity: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """The key of a result: sha256 over the canonical JSON of (scorer identity, inputs)."""
    return input_key(canonical_json(identity), inputs)


@final
class ResultCache:
    """A process-local handle on the shared SQLite result store under ``directory``.

    The connection opens lazily (xdist workers each open their own) with a busy timeout; writes
    are single autocommit upserts so a crash loses at most the result being written.
    """

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self._local = threading.local()
        self._disabled = False
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
        try:
            conn = self._open()
        except sqlite3.DatabaseError as exc:
            # Not a database, or a damaged one: move it aside and start afresh. Another worker may
            # be doing the same at the same moment; rename is atomic and the loser simply opens
            # the fresh file the winner created.
            warnings.warn(
                CacheWarning(f"result cache {self.path} is unreadable ({exc}); rebuilding it"),
                stacklevel=3,
            )
            self._quarantine()
            try:
                conn = self._open()
            except (sqlite3.Error, OSError) as exc2:
                self._disable(exc2)
                return None
        except OSError as exc:
            self._disable(exc)
            return None
        self._local.conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        gitignore = self.directory / ".gitignore"
        if not gitignore.exists():
            try:
                gitignore.write_text("# created by pytest-llmeval\n*\n", encoding="utf-8")
            except OSError:
                pass
        conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            # WAL lets readers proceed while one writer commits; switching needs a moment of
            # exclusive access, which busy_timeout waits for when several workers start at once.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            conn.execute("SELECT count(*) FROM results LIMIT 1").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _quarantine(self) -> None:
        stamp = f"{os.getpid()}-{time.time_ns()}"
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                try:
                    src.rename(src.with_name(src.name + f".corrupt-{stamp}"))
                except OSError:
                    pass

    def _disable(self, exc: BaseException) -> None:
        warnings.warn(
            CacheWarning(f"result cache {self.path} cannot be used ({exc}); running without it"),
            stacklevel=3,
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
            warnings.warn(
                CacheWarning(f"could not write result cache {self.path}: {exc}"), stacklevel=2
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
        return (row[0] for row in conn.execute("SELECT key FROM results").fetchall())

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.close()
            finally:
                self._local.conn = None
