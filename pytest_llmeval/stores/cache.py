"""The result store: an embedded SQLite database in WAL mode, one row per scoring result.

An entry is a pure function of its key (scorer identity + inputs), like hypothesis's example
database, so entries never need invalidating: a changed scorer, prompt or judge makes a new key.
Read errors are misses; a corrupt file warns and is rebuilt; an unusable cache is switched off
for the run with a warning. It never fails a run.

Lock contention is not corruption: xdist workers opening a brand-new file at the same moment race
for the exclusive lock ``PRAGMA journal_mode=WAL`` needs (SQLite reports SQLITE_BUSY there without
waiting on the busy timeout), so "database is locked" while opening is retried with a short
backoff; if the lock outlasts the timeout the cache is switched off for the process with a warning
and the file is left alone. Only SQLITE_CORRUPT / SQLITE_NOTADB make a file be renamed aside,
whether found while opening or later by a read or write (damaged table pages pass the open check),
and only the very file (same device and inode) that failed.

Replay (``read_only=True``) opens the store read-only and writes nothing: a cache committed to the
repository or mounted read-only in CI must work. A WAL database needs its -shm beside it; where
that cannot be created (a read-only directory) the file is opened ``immutable``. A writing run in
a directory it cannot write falls back to reading with a warning.

Beside each value the store keeps the parts of its key (:func:`key_parts`: scorer version,
options, prompt hash, judge model and sampling, a hash per input) and where it was recorded, so
that a replay miss can name what changed (:meth:`ResultCache.explain_miss`). Files written before
that table existed gain it on the next writing run; read-only they still work.

Why this module is long: the SQLite store with everything that keeps it safe to share between
xdist workers and runs (opening read-write or read-only, lock and corruption handling, quarantine
of a damaged file, batched writes) and the explanation of a miss; the entries' own checks live in
:mod:`pytest_llmeval.stores.cache_entries`.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, final

from pytest_llmeval.core.scores import canonical_json
from pytest_llmeval.stores.cache_entries import (
    CacheWarning,
    Entry,
    EntryError,
    InvalidEntries,
    load_stored,
    value_problem,
)
from pytest_llmeval.stores.cache_protocol import KeyAbout, describe_differences, input_key

__all__ = ["CacheWarning", "ResultCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    scorer TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""
# The parts of each key (JSON) and where it was recorded: only read to explain a replay miss.
# Added in a later version: CREATE ... IF NOT EXISTS migrates an older file on its next writing
# open; a read-only old file simply has no explanations.
_PARTS_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS key_parts (
    key TEXT PRIMARY KEY,
    scorer TEXT NOT NULL,
    locator TEXT,
    inputs TEXT NOT NULL,
    parts TEXT NOT NULL,
    created REAL NOT NULL
)
""",
    "CREATE INDEX IF NOT EXISTS key_parts_locator ON key_parts (scorer, locator)",
    "CREATE INDEX IF NOT EXISTS key_parts_inputs ON key_parts (scorer, inputs)",
)
_UPSERT = (
    "INSERT INTO results (key, scorer, value, created) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
    "created = excluded.created, scorer = excluded.scorer"
)
_UPSERT_PARTS = (
    "INSERT OR REPLACE INTO key_parts (key, scorer, locator, inputs, parts, created) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
# Candidates looked at to explain one miss (the most recent first).
_EXPLAIN_LIMIT = 500
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
# Damage found after opening: files set aside per handle before the cache is switched off
# (a disk that keeps damaging files is not worth a rename per read).
_MAX_REBUILDS = 3


def cache_key(identity: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """The key of a result: sha256 over the canonical JSON of (scorer identity, inputs)."""
    return input_key(canonical_json(identity), inputs)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the store's tables in ``conn`` where missing (an older file gains the new ones)."""
    conn.execute(_SCHEMA)
    for statement in _PARTS_SCHEMA:
        conn.execute(statement)


def read_entry(conn: sqlite3.Connection, key: str) -> Entry | None:
    """The entry under ``key`` with what is recorded about it, None when absent or damaged
    (raises sqlite3.Error). An entry from before the key parts were kept has no parts."""
    row = conn.execute(
        "SELECT scorer, value, created FROM results WHERE key = ?", (key,)
    ).fetchone()
    if row is None:
        return None
    parts_row = None
    if has_parts_table(conn):
        parts_row = conn.execute(
            "SELECT parts, locator FROM key_parts WHERE key = ?", (key,)
        ).fetchone()
    return entry_from_row(key, row[0], row[1], row[2], parts_row)


def has_parts_table(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'key_parts'"
        ).fetchone()
        is not None
    )


def entry_from_row(
    key: str, scorer: Any, value: Any, created: Any, parts_row: Any = None
) -> Entry | None:
    """An :class:`Entry` from stored columns; None when the value is damaged or not a usable
    result (see :func:`value_problem`). Damaged parts only lose the parts."""
    try:
        data = load_stored(value)
    except (TypeError, ValueError):
        return None
    if value_problem(data) is not None:
        return None
    parts: Any = None
    locator: Any = None
    if parts_row is not None:
        try:
            parts = json.loads(parts_row[0])
        except (TypeError, ValueError):
            parts = None
        locator = parts_row[1] if isinstance(parts_row[1], str) else None
        if not isinstance(parts, dict):
            parts, locator = None, None
    try:
        return Entry.checked(
            key,
            scorer,
            data,
            created if isinstance(created, (int, float)) else None,
            parts,
            locator,
            any_key=True,
        )
    except EntryError:
        return None


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


def _is_wal_file(path: Path) -> bool:
    """Whether the database header says WAL mode (file format versions 2 at offsets 18, 19)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@final
class _Handle:
    """One thread's connection, the generation of the store it belongs to, and the file
    (device, inode) it opened (None when that could not be told for sure)."""

    __slots__ = ("conn", "file_id", "generation")

    def __init__(
        self, conn: sqlite3.Connection, generation: int, file_id: tuple[int, int] | None
    ) -> None:
        self.conn = conn
        self.generation = generation
        self.file_id = file_id


@final
class ResultCache:
    """A process-local handle on the shared SQLite result store under ``directory``.

    The connection opens lazily (xdist workers each open their own; so does each thread) with a
    busy timeout of ``timeout`` seconds; writes are single autocommit transactions so a crash
    loses at most the result being written. Lock contention while opening is retried for up to
    ``timeout`` seconds, then the cache is switched off for the process (the file is never
    touched); a read that meets a lock is a miss, a write that still meets one after ``timeout``
    is skipped (warned once). ``read_only`` (replay) opens the file read-only and never writes,
    creates or renames anything.
    """

    def __init__(
        self, directory: Path | str, *, timeout: float = DEFAULT_TIMEOUT, read_only: bool = False
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.timeout = float(timeout)
        self.read_only = read_only
        self._local = threading.local()
        self._disabled = False
        self._problem: str | None = None
        self._write_warned = False
        self._lock = threading.Lock()
        # Bumped when damage found after opening sets the file aside: every thread's
        # connection to the old file is then closed and reopened on the fresh one.
        self._generation = 0
        self._rebuilds = 0
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._invalid = InvalidEntries()

    @property
    def name(self) -> str:
        """How warnings name this store."""
        return f"SQLite cache {self.path}"

    @property
    def invalid_count(self) -> int:
        """Invalid entries met by this handle (each was a miss)."""
        return self._invalid.count

    # -- connection ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection | None:
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is not None and handle.generation == self._generation:
            return handle.conn
        if handle is not None:
            self._drop(handle)  # its file was set aside, or the cache switched off
        if self._disabled:
            return None
        handle = self._connect_new()
        if handle is None:
            return None
        self._local.handle = handle
        return handle.conn

    def _connect_new(self) -> _Handle | None:
        deadline = time.monotonic() + self.timeout
        pause = _BACKOFF_FIRST
        rebuilt = False
        generation = self._generation
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
                if is_corrupt_error(exc) and not rebuilt and not self.read_only:
                    # Not a database, or a damaged one: move it aside and start afresh. Another
                    # worker may be doing the same at the same moment; only the file that failed
                    # is renamed, so the loser simply opens the fresh file the winner created.
                    warnings.warn(
                        CacheWarning(
                            f"result cache {self.path} is unreadable ({exc}); rebuilding it"
                        ),
                        stacklevel=4,
                    )
                    self._quarantine(opened)
                    rebuilt = True
                    continue
                self._disable(str(exc))
                return None
            except OSError as exc:
                self._disable(str(exc))
                return None
            after = _file_id(self.path)
            # The file this connection has open: when it was replaced while opening, which one
            # we got cannot be told, and such a connection never renames anything.
            file_id = after if opened is None or opened == after else None
            return _Handle(conn, generation, file_id)

    def _open(self, timeout: float) -> sqlite3.Connection:
        if self.read_only:
            return self._open_read_only(timeout)
        try:
            return self._open_read_write(timeout)
        except (sqlite3.Error, OSError) as exc:
            if isinstance(exc, sqlite3.Error) and (is_lock_error(exc) or is_corrupt_error(exc)):
                raise
            if not self.path.is_file():
                raise
            # A directory or file this process cannot write (a cache committed to the repo, a
            # read-only mount): the stored results can still be read.
            try:
                conn = self._open_read_only(timeout)
            except (sqlite3.Error, OSError):
                raise exc from None
            self.read_only = True
            warnings.warn(
                CacheWarning(
                    f"result cache {self.path} cannot be written here ({exc}); stored results "
                    "are read, new results are not stored"
                ),
                stacklevel=5,
            )
            return conn

    def _open_read_write(self, timeout: float) -> sqlite3.Connection:
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
            create_schema(conn)
            conn.execute("SELECT count(*) FROM results LIMIT 1").fetchone()
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self, timeout: float) -> sqlite3.Connection:
        if not self.path.is_file():
            raise FileNotFoundError("the file does not exist: nothing was recorded there yet")
        uri = self.path.absolute().as_uri()
        wal = Path(str(self.path) + "-wal")
        if (
            _is_wal_file(self.path)
            and not wal.exists()
            and not Path(str(self.path) + "-shm").exists()
        ):
            # A checkpointed WAL file that no connection has open (a committed cache): read it
            # as immutable, which creates no -wal/-shm beside it. Its pages only change when a
            # writer checkpoints a -wal, which does not exist; replay writes nothing.
            return self._connect_uri(f"{uri}?mode=ro&immutable=1", timeout)
        try:
            # A -wal beside it: results since the last checkpoint live there, and mode=ro reads
            # them (it needs the -shm, which SQLite may create).
            return self._connect_uri(f"{uri}?mode=ro", timeout)
        except sqlite3.Error as exc:
            if is_lock_error(exc) or is_corrupt_error(exc):
                raise
            # SQLITE_CANTOPEN: the -shm cannot be created here (a read-only directory).
            # Nothing can write there either: read the file as immutable, without its -wal.
            first = exc
        try:
            conn = self._connect_uri(f"{uri}?mode=ro&immutable=1", timeout)
        except sqlite3.Error:
            raise first from None
        if wal.is_file() and wal.stat().st_size > 0:
            warnings.warn(
                CacheWarning(
                    f"result cache {self.path} is read without its {wal.name} ({first}): results "
                    "stored there since the last checkpoint are not seen; checkpoint the cache "
                    "before committing it (close every run that writes it)"
                ),
                stacklevel=5,
            )
        return conn

    def _connect_uri(self, uri: str, timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(
            uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
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

    def _drop(self, handle: _Handle) -> None:
        if getattr(self._local, "handle", None) is handle:
            self._local.handle = None
        try:
            handle.conn.close()
        except sqlite3.Error:
            pass

    def _damaged(self, exc: sqlite3.Error) -> None:
        """A read or write found the file damaged after it opened (table pages the open check
        does not visit): set it aside and rebuild, as a damaged file found while opening. The
        connection is closed before the rename; other threads reconnect on their next use, other
        processes when their own reads meet the damage (the file they opened is never the fresh
        one, so they rename nothing)."""
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is None:
            return
        with self._lock:
            first = handle.generation == self._generation
            if first:
                self._generation += 1
                self._rebuilds += 1
        self._drop(handle)
        if not first:
            return  # another thread of this process already set that file aside
        if self.read_only:
            self._disable(f"{exc}, found while reading; a read-only cache is not rebuilt")
            return
        if self._rebuilds > _MAX_REBUILDS:
            self._disable(f"{exc}; damaged again after {_MAX_REBUILDS} rebuilds")
            return
        warnings.warn(
            CacheWarning(
                f"result cache {self.path} is damaged ({exc}; found while reading it); setting "
                "it aside and rebuilding it"
            ),
            stacklevel=4,
        )
        self._quarantine(handle.file_id)

    def _disable(self, reason: str) -> None:
        warnings.warn(
            CacheWarning(f"result cache {self.path} cannot be used ({reason}); running without it"),
            stacklevel=4,
        )
        with self._lock:
            self._problem = reason
            self._disabled = True
            self._generation += 1  # every thread drops its connection

    # -- API -------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key``, or None (a miss; also for any read error, and for an
        entry that is not strict JSON of an object, which warns: see :meth:`invalid`)."""
        conn = self._connect()
        if conn is None:
            return None
        value: dict[str, Any] | None = None
        try:
            row = conn.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            if is_corrupt_error(exc):
                self._damaged(exc)
            row = None
        if row is not None:
            try:
                if not isinstance(row[0], (str, bytes)):
                    raise EntryError(f"stored as SQLite {type(row[0]).__name__}, not JSON text")
                # Its shape and range are the lookup's to check (it knows the scorer): doing
                # the shape here too would cost every warm hit twice.
                value = load_stored(row[0])
            except EntryError as exc:
                value = None
                self._invalid.report(self.name, key, str(exc), stacklevel=3)
        with self._lock:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value

    def reject(self, key: str, problem: str) -> None:
        """The entry under ``key`` was read but cannot be used by its scorer (``problem``, e.g.
        a value outside the scorer's range): it counts as invalid, with a warning."""
        with self._lock:
            self.hits -= 1
            self.misses += 1
        self._invalid.report(self.name, key, problem, stacklevel=4)

    def invalid(self, key: str) -> str | None:
        """Why the entry under ``key`` was not used (read or rejected as invalid), or None."""
        return self._invalid.reason(key)

    def discard(self, key: str) -> None:
        """Remove the entry under ``key`` (one copied from elsewhere that proved invalid);
        nothing for a read-only handle, and failures are ignored."""
        if self.read_only:
            return
        conn = self._connect()
        if conn is None or self.read_only:
            return
        try:
            conn.execute("DELETE FROM results WHERE key = ?", (key,))
        except sqlite3.Error as exc:
            if is_corrupt_error(exc):
                self._damaged(exc)

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None:
        """Store ``value`` under ``key`` (upsert), with the key's parts when ``about`` is given.
        Failures warn once and are otherwise ignored; a read-only handle stores nothing."""
        self.put_many(((key, scorer, value, about),))

    def put_many(
        self, items: Iterable[tuple[str, str, Mapping[str, Any], KeyAbout | None]]
    ) -> None:
        """:meth:`put` for each (key, scorer, value, about) of ``items``, in one transaction
        (a value that is not JSON, or a scorer name SQLite cannot store, is left out)."""
        if self.read_only:
            return
        conn = self._connect()
        if conn is None or self.read_only:
            return
        handle: _Handle | None = getattr(self._local, "handle", None)
        if (
            handle is not None
            and handle.file_id is not None
            and _file_id(self.path) != (handle.file_id)
        ):
            # Another process set the file aside (damage it met): write to the fresh one.
            self._drop(handle)
            conn = self._connect()
            if conn is None:
                return
        rows: list[tuple[str, str, str, KeyAbout | None]] = []
        for key, scorer, value, about in items:
            try:
                # ASCII: a lone surrogate (valid in JSON input) cannot be stored as UTF-8 text.
                text = json.dumps(value, sort_keys=True, ensure_ascii=True, allow_nan=False)
            except (TypeError, ValueError):
                continue  # not JSON: the result is simply not cached
            rows.append((key, scorer, text, about))
        if not rows:
            return
        now = time.time()
        written = 0
        try:
            single = len(rows) == 1 and rows[0][3] is None
            if not single:
                conn.execute("BEGIN IMMEDIATE")
            try:
                written = self._upsert_rows(conn, rows, now)
                if not single:
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if is_corrupt_error(exc):
                self._damaged(exc)
                return
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
                    stacklevel=3,
                )
            return
        with self._lock:
            self.writes += written

    @staticmethod
    def _upsert_rows(
        conn: sqlite3.Connection, rows: list[tuple[str, str, str, KeyAbout | None]], now: float
    ) -> int:
        """Write ``rows`` (inside the caller's transaction); the number written. One
        ``executemany`` per table (a batch of read-through fills costs a few microseconds a
        row); a row SQLite cannot encode (a lone surrogate in a scorer name) makes the batch go
        row by row, leaving that row out."""
        if len(rows) > 1:
            try:
                conn.execute("SAVEPOINT llmeval_batch")
                conn.executemany(_UPSERT, [(k, sc, t, now) for k, sc, t, _a in rows])
                conn.executemany(
                    _UPSERT_PARTS,
                    [
                        (k, sc, a.locator, a.inputs, a.parts_json(), now)
                        for k, sc, _t, a in rows
                        if a is not None
                    ],
                )
                conn.execute("RELEASE llmeval_batch")
                return len(rows)
            except UnicodeEncodeError:
                conn.execute("ROLLBACK TO llmeval_batch")
                conn.execute("RELEASE llmeval_batch")
        written = 0
        for key, scorer, text, about in rows:
            try:
                conn.execute(_UPSERT, (key, scorer, text, now))
                if about is not None:
                    conn.execute(
                        _UPSERT_PARTS,
                        (key, scorer, about.locator, about.inputs, about.parts_json(), now),
                    )
            except UnicodeEncodeError:
                continue  # a lone surrogate in a scorer name: not cached
            written += 1
        return written

    def entry(self, key: str) -> Entry | None:
        """The entry under ``key`` with its scorer, time and key parts (None: absent, damaged,
        or a read error), for pushing it elsewhere."""
        conn = self._connect()
        if conn is None:
            return None
        try:
            return read_entry(conn, key)
        except sqlite3.Error as exc:
            if is_corrupt_error(exc):
                self._damaged(exc)
            return None

    def explain_miss(self, key: str, about: KeyAbout) -> str | None:
        """Why ``key`` is not stored, for a replay miss: the parts in which the nearest entry
        recorded for the same case (else for the same inputs) differs, or what the cache holds
        instead. None when nothing useful can be said."""
        conn = self._connect()
        if conn is None:
            if self._problem is None:
                return None
            return f"the result cache {self.path} cannot be used: {self._problem}"
        try:
            return self._explain(conn, about)
        except sqlite3.Error as exc:
            if is_corrupt_error(exc):
                self._damaged(exc)
            return None

    def _explain(self, conn: sqlite3.Connection, about: KeyAbout) -> str | None:
        has_parts = (
            conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'key_parts'"
            ).fetchone()
            is not None
        )
        scope = "this case"
        rows: list[tuple[str]] = []
        if has_parts and about.locator is not None:
            rows = conn.execute(
                "SELECT parts FROM key_parts WHERE scorer = ? AND locator = ? "
                "ORDER BY created DESC LIMIT ?",
                (about.scorer, about.locator, _EXPLAIN_LIMIT),
            ).fetchall()
        if has_parts and not rows:
            scope = "the same inputs"
            rows = conn.execute(
                "SELECT parts FROM key_parts WHERE scorer = ? AND inputs = ? "
                "ORDER BY created DESC LIMIT ?",
                (about.scorer, about.inputs, _EXPLAIN_LIMIT),
            ).fetchall()
        best: list[str] | None = None
        for (text,) in rows:
            try:
                recorded = json.loads(text)
            except ValueError:
                continue
            if not isinstance(recorded, dict):
                continue
            diffs = describe_differences(recorded, about.parts)
            if best is None or len(diffs) < len(best):
                best = diffs
        if best is not None:
            if not best:
                return (
                    f"an entry with the same key parts was recorded for {scope}, but its result "
                    "is gone or unreadable"
                )
            shown = "; ".join(best[:4]) + (f"; and {len(best) - 4} more" if len(best) > 4 else "")
            return f"a recorded entry for {scope} differs in {shown}"
        total = int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
        if total == 0:
            return f"the result cache {self.path} is empty"
        mine = int(
            conn.execute(
                "SELECT count(*) FROM results WHERE scorer = ?", (about.scorer,)
            ).fetchone()[0]
        )
        if mine == 0:
            return (
                f"the cache holds {_results(total)}, none of scorer {about.scorer} (recorded "
                "under another name?)"
            )
        described = (
            int(
                conn.execute(
                    "SELECT count(*) FROM key_parts WHERE scorer = ?", (about.scorer,)
                ).fetchone()[0]
            )
            if has_parts
            else 0
        )
        older = (
            f" ({mine - described} recorded by an older pytest-llmeval that kept no key details)"
            if described < mine
            else ""
        )
        return (
            f"the cache holds {_results(mine)} of scorer {about.scorer}, none for this case or "
            f"these inputs{older}"
        )

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
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is not None:
            self._drop(handle)


def _results(n: int) -> str:
    return f"{n} result" + ("" if n == 1 else "s")
