from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest

from pytest_llmeval.cache import CacheWarning, ResultCache, cache_key


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


CONCURRENT_TEST = """
import os, pytest
from pytest_llmeval.cache import ResultCache

PER_TEST = 5
DIR = os.environ["CACHE_UNDER_TEST"]

@pytest.mark.parametrize("t", range(400))
def test_write(t):
    c = _cache()
    for i in range(t * PER_TEST, (t + 1) * PER_TEST):
        c.put(f"key-{i}", "s", {"value": i})
        # read entries other workers are writing at the same time (present or a clean miss)
        for j in (i - 1, i - 7, i - 31):
            got = c.get(f"key-{j}")
            assert got is None or got == {"value": j}

_c = None
def _cache():
    global _c
    if _c is None:
        _c = ResultCache(DIR)
    return _c
"""


def test_four_xdist_workers_write_2000_entries_none_lost(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytest.importorskip("xdist")
    cache_dir = tmp_path / "shared-cache"
    pytester.makepyfile(test_concurrent=CONCURRENT_TEST)
    pytester._monkeypatch.setenv("CACHE_UNDER_TEST", str(cache_dir))
    result = pytester.runpytest_subprocess("-n", "4", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=400)
    result.stdout.no_fnmatch_line("*database is locked*")
    c = ResultCache(cache_dir)
    assert len(c) == 2000
    assert all(c.get(f"key-{i}") == {"value": i} for i in range(2000))
