from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from pytest_llmeval.stores.cache import ResultCache, cache_key, is_corrupt_error, is_lock_error
from pytest_llmeval.stores.cache_entries import CacheWarning


@pytest.mark.smoke
def test_put_get_and_key_stability(tmp_path: Path) -> None:
    c = ResultCache(tmp_path / "c")
    k = cache_key({"name": "s", "version": "1"}, {"output": "a", "expected": "b"})
    assert k == cache_key({"version": "1", "name": "s"}, {"expected": "b", "output": "a"})
    assert c.get(k) is None
    c.put(k, "s", {"value": 0.5})
    assert c.get(k) == {"value": 0.5}
    assert (c.hits, c.misses, c.writes) == (1, 1, 1)
    assert (tmp_path / "c" / ".gitignore").read_text().endswith("*\n")
    c.close()
    # a second handle (another process in real life) sees it
    assert ResultCache(tmp_path / "c").get(k) == {"value": 0.5}


def test_wal_mode(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 1})
    conn = sqlite3.connect(c.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_corrupt_file_warns_and_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / "results.sqlite3").write_bytes(b"this is not a database" * 100)
    c = ResultCache(tmp_path)
    with pytest.warns(CacheWarning, match="unreadable .* rebuilding"):
        assert c.get("k") is None
    c.put("k", "s", {"value": 1.0})
    assert c.get("k") == {"value": 1.0}
    assert any(p.name.startswith("results.sqlite3.corrupt-") for p in tmp_path.iterdir())


def test_unusable_directory_disables_cache_with_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = ResultCache(blocker / "sub")  # a directory under a regular file cannot exist
    with pytest.warns(CacheWarning, match="cannot be used"):
        assert c.get("k") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c.put("k", "s", {"value": 1})  # silently a no-op now
    assert len(c) == 0


def test_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 1})
    conn = sqlite3.connect(c.path)
    conn.execute("UPDATE results SET value = '{not json' WHERE key = 'k'")
    conn.commit()
    assert c.get("k") is None


def _corrupt_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if ".corrupt-" in p.name]


def test_malformed_database_warns_and_is_rebuilt(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("old", "s", {"value": 1})
    c.close()
    raw = bytearray((tmp_path / "results.sqlite3").read_bytes())
    raw[100:1000] = b"\xa5" * 900  # keep the "SQLite format 3" header, wreck the schema page
    (tmp_path / "results.sqlite3").write_bytes(bytes(raw))
    c = ResultCache(tmp_path)
    with pytest.warns(CacheWarning, match="unreadable .*malformed.* rebuilding"):
        assert c.get("old") is None
    c.put("k", "s", {"value": 2.0})
    assert c.get("k") == {"value": 2.0}
    assert len(_corrupt_files(tmp_path)) >= 1


def test_error_classification_on_real_sqlite_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not sqlite at all" * 100)
    conn = sqlite3.connect(garbage)
    with pytest.raises(sqlite3.DatabaseError) as notadb:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert is_corrupt_error(notadb.value) and not is_lock_error(notadb.value)

    db = tmp_path / "db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    conn = sqlite3.connect(db, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as locked:
        conn.execute("SELECT * FROM t")
    conn.close()
    holder.execute("ROLLBACK")
    holder.close()
    assert "locked" in str(locked.value)
    assert is_lock_error(locked.value) and not is_corrupt_error(locked.value)


def _rollback_db_under_exclusive_lock(directory: Path) -> sqlite3.Connection:
    """A results database in rollback-journal mode holding one entry, with a second connection
    in ``BEGIN EXCLUSIVE`` on it (no one else can read or write until it ends)."""
    directory.mkdir(parents=True, exist_ok=True)
    holder = sqlite3.connect(
        directory / "results.sqlite3", isolation_level=None, check_same_thread=False
    )
    holder.execute(
        "CREATE TABLE results (key TEXT PRIMARY KEY, scorer TEXT NOT NULL, "
        "value TEXT NOT NULL, created REAL NOT NULL)"
    )
    holder.execute("""INSERT INTO results VALUES ('k', 's', '{"value": 1}', 0)""")
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_database_locked_while_opening_is_not_renamed_but_disables_the_cache(
    tmp_path: Path,
) -> None:
    holder = _rollback_db_under_exclusive_lock(tmp_path)
    before = (tmp_path / "results.sqlite3").read_bytes()
    c = ResultCache(tmp_path, timeout=0.3)
    t0 = time.monotonic()
    with pytest.warns(CacheWarning, match="cannot be used .*locked.*running without it") as rec:
        assert c.get("k") is None  # a miss, not an error
    assert time.monotonic() - t0 < 5
    assert not any("rebuilding" in str(w.message) for w in rec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c.put("k2", "s", {"value": 2})  # the cache is off for this handle: a silent no-op
        assert c.get("k") is None
    holder.execute("ROLLBACK")
    holder.close()
    assert _corrupt_files(tmp_path) == []
    assert (tmp_path / "results.sqlite3").read_bytes() == before
    assert ResultCache(tmp_path).get("k") == {"value": 1}  # intact, and usable again


def test_lock_released_within_the_timeout_is_waited_for(tmp_path: Path) -> None:
    holder = _rollback_db_under_exclusive_lock(tmp_path)
    release = threading.Timer(0.3, holder.execute, ("ROLLBACK",))
    release.start()
    try:
        c = ResultCache(tmp_path, timeout=10)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert c.get("k") == {"value": 1}
            c.put("k2", "s", {"value": 2})
            assert c.get("k2") == {"value": 2}
    finally:
        release.join()
        holder.close()
    assert _corrupt_files(tmp_path) == []


def test_write_under_exclusive_lock_is_skipped_with_one_warning(tmp_path: Path) -> None:
    c = ResultCache(tmp_path, timeout=0.2)
    c.put("k", "s", {"value": 1})
    holder = sqlite3.connect(c.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("""INSERT INTO results VALUES ('other', 's', '{"value": 9}', 0)""")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert c.get("k") == {"value": 1}  # WAL: reading goes on beside the writer
        c.put("a", "s", {"value": 2})
        c.put("b", "s", {"value": 3})
        assert c.get("a") is None
    messages = [str(w.message) for w in rec if issubclass(w.category, CacheWarning)]
    assert len(messages) == 1, messages
    assert "could not write" in messages[0] and "locked" in messages[0]
    assert c.writes == 1
    holder.execute("COMMIT")
    holder.close()
    assert _corrupt_files(tmp_path) == []
    assert sorted(c.keys()) == ["k", "other"]
    c.put("a", "s", {"value": 2})  # the lock is gone: writes work again
    assert c.get("a") == {"value": 2}


RACE_WORKER = """
import json, os, sys, time, warnings
from pathlib import Path
from pytest_llmeval.stores.cache import ResultCache

base, me, n, rounds, entries = Path(sys.argv[1]), int(sys.argv[2]), *map(int, sys.argv[3:6])
for r in range(rounds):
    (base / f"ready-{r}-{me}").touch()
    go = base / f"go-{r}"
    while not go.exists():
        time.sleep(0.001)
    start = float(go.read_text())
    time.sleep(max(start - time.time(), 0))  # all wake together and open the new file at once
    errors = []
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            c = ResultCache(base / f"round-{r}")
            for j in range(entries):
                c.put(f"w{me}-{j}", "s", {"value": j})
                if c.get(f"w{me}-{j}") != {"value": j}:
                    errors.append(f"own entry w{me}-{j} not read back")
                got = c.get(f"w{(me + 1) % n}-{j}")
                if got not in (None, {"value": j}):
                    errors.append(f"bad neighbour value {got!r}")
            c.close()
        except BaseException as exc:
            errors.append(repr(exc))
    report = {"warnings": [str(w.message) for w in rec], "errors": errors}
    (base / f"result-{r}-{me}.tmp").write_text(json.dumps(report))
    os.replace(base / f"result-{r}-{me}.tmp", base / f"result-{r}-{me}.json")
"""


def _wait_for(paths: list[Path], procs: list[subprocess.Popen[bytes]], deadline: float) -> None:
    while not all(p.exists() for p in paths):
        dead = [p for p in procs if p.poll() not in (None, 0)]
        if dead:
            err = dead[0].communicate()[1].decode(errors="replace")
            pytest.fail(f"race worker died: {err}")
        if time.monotonic() > deadline:
            pytest.fail(f"race workers stalled waiting for {[p.name for p in paths]}")
        time.sleep(0.002)


def test_processes_racing_to_create_a_new_cache_never_rebuild_it(tmp_path: Path) -> None:
    """Workers that all open a brand-new cache directory at the same instant (the xdist start)
    contend for the lock switching it to WAL; that must be waited out, never taken for a
    corrupt file (which renamed the database aside under the other workers' feet)."""
    n, rounds, entries = 6, 30, 10
    script = tmp_path / "race_worker.py"
    script.write_text(RACE_WORKER)
    env = {**os.environ, "PYTHONWARNINGS": "always"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), str(i), str(n), str(rounds), str(entries)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        for i in range(n)
    ]
    deadline = time.monotonic() + 60
    try:
        for r in range(rounds):
            _wait_for([tmp_path / f"ready-{r}-{i}" for i in range(n)], procs, deadline)
            go = tmp_path / f"go-{r}"
            (tmp_path / "go.tmp").write_text(repr(time.time() + 0.03))
            os.replace(tmp_path / "go.tmp", go)
        _wait_for(
            [tmp_path / f"result-{r}-{i}.json" for r in range(rounds) for i in range(n)],
            procs,
            deadline,
        )
        for p in procs:
            assert p.wait(timeout=30) == 0, p.communicate()[1].decode(errors="replace")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stderr is not None:
                p.stderr.close()

    problems = []
    for r in range(rounds):
        for i in range(n):
            report = json.loads((tmp_path / f"result-{r}-{i}.json").read_text())
            problems += [f"round {r} worker {i}: {m}" for m in report["warnings"]]
            problems += [f"round {r} worker {i}: {m}" for m in report["errors"]]
    assert problems == []
    assert _corrupt_files(tmp_path) == []
    for r in range(rounds):
        c = ResultCache(tmp_path / f"round-{r}")
        expected = {f"w{i}-{j}": {"value": j} for i in range(n) for j in range(entries)}
        assert {k: c.get(k) for k in expected} == expected
        assert len(c) == n * entries
        c.close()


def test_put_many_writes_a_batch_and_leaves_out_only_a_row_sqlite_cannot_store(
    tmp_path: Path,
) -> None:
    """A batch (the read-through's fills) goes in with one executemany per table; a scorer
    name with a lone surrogate fails that batch, which is then written row by row without it."""
    from pytest_llmeval.stores.cache_protocol import KeyAbout

    c = ResultCache(tmp_path / "c")
    keys = [cache_key({"name": "s", "version": "1"}, {"output": str(i)}) for i in range(4)]
    about = KeyAbout("s", {"version": "1"}, locator="s::t.py::test[0]")
    c.put_many([(k, "s", {"value": i / 4}, about) for i, k in enumerate(keys[:2])])
    assert [c.get(k) for k in keys[:2]] == [{"value": 0.0}, {"value": 0.25}]
    assert c.writes == 2
    c.put_many(
        [
            (keys[2], "s", {"value": 0.5}, about),
            (keys[3], "bad\ud800", {"value": 0.75}, None),
        ]
    )
    assert c.get(keys[2]) == {"value": 0.5}
    assert c.get(keys[3]) is None
    assert c.writes == 3
    entry = c.entry(keys[0])
    assert entry is not None and entry.parts == {"version": "1"}
    c.close()
