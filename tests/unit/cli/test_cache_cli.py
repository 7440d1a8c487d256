"""``python -m pytest_llmeval cache stats|prune|export|import|push`` on the local SQLite store
and on a real redis-server (tests/helpers/redis_server.py)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.cli.cache_cli import main
from pytest_llmeval.stores.cache import ResultCache
from pytest_llmeval.stores.cache_entries import Entry
from pytest_llmeval.stores.cache_protocol import KeyAbout

DAY = 86400.0
NOW = time.time()


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _entry(
    name: str,
    scorer: str,
    version: str | None,
    model: str | None,
    age_days: float,
    value: float = 0.5,
) -> Entry:
    parts: dict[str, Any] | None = None
    if version is not None:
        parts = {"version": version, "inputs.output": name[:16]}
        if model is not None:
            parts["extra.judge.model"] = model
    return Entry(
        _key(name),
        scorer,
        {"value": value, "rationale": f"because {name}"},
        NOW - age_days * DAY,
        parts,
        None if parts is None else json.dumps(["test_x.py", "test_case", name]),
    )


ENTRIES = [
    _entry("a1", "faithfulness", "2", "gpt-4o-mini", 40),
    _entry("a2", "faithfulness", "2", "gpt-4o-mini", 1),
    _entry("a3", "faithfulness", "3", "gpt-4o-mini", 0.5),
    _entry("a4", "faithfulness", "3", "local", 2),
    _entry("b1", "exact_match", "1", None, 50, value=1.0),
    _entry("b2", "exact_match", "1", None, 3, value=0.0),
]


def _write_jsonl(path: Path, entries: list[Entry]) -> None:
    path.write_text("".join(e.to_line() + "\n" for e in entries), encoding="ascii")


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


def _store(tmp_path: Path, entries: list[Entry] = ENTRIES) -> Path:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, entries)
    store = tmp_path / "store"
    status, out = _cli("import", str(data), "--dir", str(store))
    assert status == 0, out
    assert (
        out == f"imported {len(entries)} entries from {data} into SQLite {store}/results.sqlite3\n"
    )
    return store


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + " UTC"


def _sizes(entries: list[Entry]) -> int:
    """Bytes of results as the SQLite store keeps them: value text plus key parts text."""
    total = 0
    for e in entries:
        total += len(json.dumps(e.value, sort_keys=True, ensure_ascii=True))
        if e.parts is not None:
            total += len(json.dumps(e.parts, sort_keys=True, ensure_ascii=True))
    return total


def test_stats_counts_by_scorer_version_and_judge_model(tmp_path: Path) -> None:
    store = _store(tmp_path)
    status, out = _cli("stats", "--dir", str(store))
    assert status == 0
    lines = out.splitlines()
    disk = (store / "results.sqlite3").stat().st_size
    wal = store / "results.sqlite3-wal"
    disk += wal.stat().st_size if wal.exists() else 0
    assert lines[0] == f"result store: SQLite {store}/results.sqlite3, {disk} bytes on disk"
    oldest, newest = ENTRIES[4].created, ENTRIES[2].created
    assert oldest is not None and newest is not None
    assert lines[1] == (
        f"entries: 6, {_sizes(ENTRIES)} bytes of results; oldest {_when(oldest)}, "
        f"newest {_when(newest)}"
    )
    rows = [line.split("  ") for line in lines[3:]]
    table = [[c.strip() for c in row if c.strip()] for row in rows]
    assert table[0] == ["scorer", "version", "judge model", "entries", "bytes", "oldest", "newest"]
    by = {tuple(r[:3]): r[3:] for r in table[1:]}
    assert sorted(by) == [
        ("exact_match", "1", "-"),
        ("faithfulness", "2", "gpt-4o-mini"),
        ("faithfulness", "3", "gpt-4o-mini"),
        ("faithfulness", "3", "local"),
    ]
    assert by[("faithfulness", "2", "gpt-4o-mini")][:2] == ["2", str(_sizes(ENTRIES[:2]))]
    assert by[("exact_match", "1", "-")] == [
        "2",
        str(_sizes(ENTRIES[4:])),
        _when(ENTRIES[4].created or 0),
        _when(ENTRIES[5].created or 0),
    ]
    assert by[("faithfulness", "3", "local")][0] == "1"


def test_export_import_round_trip_exactly_and_entries_keep_their_keys(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = tmp_path / "first.jsonl"
    status, out = _cli("export", "--dir", str(store), "-o", str(first))
    assert status == 0 and out.startswith(f"exported 6 entries from SQLite {store}")
    assert first.read_text() == "".join(
        e.to_line() + "\n" for e in sorted(ENTRIES, key=lambda e: e.key)
    )
    other = tmp_path / "other"
    assert _cli("import", str(first), "--dir", str(other))[0] == 0
    second = tmp_path / "second.jsonl"
    assert _cli("export", "--dir", str(other), "-o", str(second))[0] == 0
    assert second.read_bytes() == first.read_bytes()
    # An imported entry is found by a run under the same key, with its parts to explain misses.
    cache = ResultCache(other)
    assert cache.get(ENTRIES[0].key) == {"value": 0.5, "rationale": "because a1"}
    about = KeyAbout(
        "faithfulness",
        {"version": "3", "inputs.output": "a1", "extra.judge.model": "gpt-4o-mini"},
        ENTRIES[0].locator,
    )
    assert cache.explain_miss(_key("nothing"), about) == (
        "a recorded entry for this case differs in scorer version: recorded '2', now '3'"
    )
    cache.close()
    # Importing again adds nothing; --replace overwrites.
    status, out = _cli("import", str(first), "--dir", str(other))
    assert status == 0 and out == (
        f"imported 0 entries from {first} into SQLite {other}/results.sqlite3; 6 already there "
        "(kept; --replace overwrites them)\n"
    )
    status, out = _cli("import", str(first), "--dir", str(other), "--replace")
    assert status == 0 and out.startswith("imported 6 entries")
    # -o - writes the lines to stdout.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "cache", "export", "--dir", str(other), "-o", "-"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout == first.read_text()
    assert "exported 6 entries" in proc.stderr


def test_import_checks_every_line_first_and_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = [e.to_line() for e in ENTRIES[:2]]
    cases = [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        (json.dumps({"key": "abc", "scorer": "s", "value": {}}), "field 'key' must be 64"),
        (json.dumps({"key": _key("x"), "value": {}}), "field 'scorer' is missing"),
        (json.dumps({"key": _key("x"), "scorer": "s", "value": 1}), "field 'value' must be"),
        (
            json.dumps({"key": _key("x"), "scorer": "s", "value": {}, "created": "yesterday"}),
            "field 'created' must be a Unix time",
        ),
        (
            json.dumps({"key": _key("x"), "scorer": "s", "value": {}, "colour": 1}),
            "unknown field 'colour'",
        ),
        (json.dumps({"key": _key("x"), "scorer": "s", "value": {"v": math.nan}}), "NaN is not"),
        (good[0], f"key {ENTRIES[0].key} is already on line 1"),
        # issue 19: what a score cannot be is refused at import, not met by a later run
        (
            json.dumps({"key": _key("x"), "scorer": "faithfulness", "value": {"value": 1e300}}),
            "field 'value': 'value' 1e+300 is outside the range of scorer faithfulness [0.0, 1.0]",
        ),
        (
            json.dumps({"key": _key("x"), "scorer": "faithfulness", "value": {"value": -0.5}}),
            "'value' -0.5 is outside the range of scorer faithfulness",
        ),
        (
            json.dumps({"key": _key("x"), "scorer": "s", "value": {"value": "1"}}),
            "field 'value': 'value' is str '1', not a number",
        ),
        (
            json.dumps({"key": _key("x"), "scorer": "s", "value": {"value": True}}),
            "field 'value': 'value' is bool True, not a number",
        ),
        ('{"key": "' + _key("x") + '", "scorer": "s", "value": {"value": 1e999}}', "not a finite"),
        ('{"key": "' + _key("x") + '", "scorer": "s", "value": ' + "[" * 5000, "nested"),
        (
            json.dumps({"key": _key("x"), "scorer": "s", "value": {"value": 0.5, "rationale": 1}}),
            "'rationale' is int 1",
        ),
        ("x" * (8 * 1024 * 1024 + 1), "larger than any result"),
    ]
    for bad, reason in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(good[0] + "\n\n" + good[1] + "\n" + bad + "\n")
        status, _ = _cli("import", str(path), "--dir", str(tmp_path / "s"))
        err = capsys.readouterr().err
        assert status == 2
        assert err.startswith(f"error: {path}:4: ") and reason in err, err
    assert not (tmp_path / "s").exists()  # nothing written for a file with a bad line
    status, _ = _cli("import", str(tmp_path / "absent.jsonl"), "--dir", str(tmp_path / "s"))
    assert status == 2 and "absent.jsonl: no such file" in capsys.readouterr().err


def test_prune_by_age_and_by_scorer_version_with_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _entry("c1", "faithfulness", None, None, 100)  # an entry without recorded parts
    store = _store(tmp_path, [*ENTRIES, old])
    where = f"SQLite {store}/results.sqlite3"
    status, out = _cli("prune", "--dir", str(store), "--older-than", "30d", "--dry-run")
    assert status == 0
    assert out == (f"would remove 3 entries from {where}\n  exact_match: 1\n  faithfulness: 2\n")
    assert len(ResultCache(store)) == 7
    status, out = _cli("prune", "--dir", str(store), "--older-than", "720h")
    assert out.startswith(f"removed 3 entries from {where}\n")
    remaining = {e.key for e in ENTRIES} - {ENTRIES[0].key, ENTRIES[4].key}
    assert set(ResultCache(store).keys()) == remaining
    status, out = _cli(
        "prune", "--dir", str(store), "--scorer", "faithfulness", "--below-version", "3"
    )
    assert out == f"removed 1 entry from {where}\n  faithfulness: 1\n"
    assert set(ResultCache(store).keys()) == remaining - {ENTRIES[1].key}
    for argv, reason in [
        ((), "prune needs what to remove"),
        (("--below-version", "2"), "--below-version N needs --scorer NAME"),
        (("--scorer", "x", "--below-version", "two"), "give a version number"),
        (("--older-than", "3 days"), "--older-than '3 days': give a number and a unit"),
    ]:
        status, _ = _cli("prune", "--dir", str(store), *argv)
        assert status == 2 and reason in capsys.readouterr().err


def test_an_old_format_file_still_reads_and_shows_unknown_versions(tmp_path: Path) -> None:
    store = tmp_path / "old"
    store.mkdir()
    conn = sqlite3.connect(store / "results.sqlite3")
    conn.execute(
        "CREATE TABLE results (key TEXT PRIMARY KEY, scorer TEXT NOT NULL, value TEXT NOT NULL, "
        "created REAL NOT NULL)"
    )
    conn.execute(
        "INSERT INTO results VALUES (?, 'bleu', '{\"value\": 0.25}', ?)", (_key("o"), NOW - 10)
    )
    conn.commit()
    conn.close()
    status, out = _cli("stats", "--dir", str(store))
    assert status == 0
    assert out.splitlines()[4].split()[:4] == ["bleu", "?", "-", "1"]
    assert "(version ?: recorded by an older pytest-llmeval that kept no key details)" in out
    status, out = _cli("export", "--dir", str(store), "-o", str(tmp_path / "o.jsonl"))
    line = json.loads((tmp_path / "o.jsonl").read_text())
    assert line["parts"] is None and line["value"] == {"value": 0.25}
    status, out = _cli("prune", "--dir", str(store), "--scorer", "bleu", "--below-version", "9")
    assert out.endswith("kept 1 entry with no recorded (numeric) version\n")
    assert ResultCache(store).get(_key("o")) == {"value": 0.25}


def test_usage_errors_and_missing_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli("stats", "--dir", str(tmp_path / "none"))[0] == 2
    assert "no result cache at" in capsys.readouterr().err
    assert _cli("frobnicate")[0] == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    assert _cli("stats", "--prefix", "x:")[0] == 2
    assert "--prefix applies to a Redis store" in capsys.readouterr().err
    assert _cli("stats", "--url", "http://h/0")[0] == 2
    assert "use redis://host:port/db" in capsys.readouterr().err
    assert _cli("export", "--dir", str(tmp_path))[0] == 2  # -o is required
    assert "the following arguments are required: -o/--output" in capsys.readouterr().err
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "--help"], capture_output=True, text=True
    )
    assert "  cache      result cache tools" in proc.stdout


# -- Redis -------------------------------------------------------------------------------------


def _client(server: Any) -> Any:
    import redis

    return redis.Redis(port=server.port, password=server.password)


def test_redis_stats_export_import_prune(
    tmp_path: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    client = _client(redis_server)
    prefix = "cli-t1:"
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ENTRIES)
    url = ("--url", redis_server.url, "--prefix", prefix)
    status, out = _cli("import", str(data), *url, "--ttl", "3600")
    assert status == 0
    name = f"Redis {redis_server.url} (prefix {prefix!r})"
    assert out == f"imported 6 entries from {data} into {name}\n"
    assert 0 < client.ttl(prefix + ENTRIES[0].key) <= 3600
    client.set(prefix + "ratelimit:bucket", "7")  # not a result: the tools leave it alone
    client.set(prefix + _key("old"), json.dumps({"scorer": "bleu", "value": {"value": 0.1}}))
    client.set(prefix + _key("bad"), b"\xff{")
    status, out = _cli("stats", *url)
    lines = out.splitlines()
    assert lines[0] == f"result store: {name}"
    assert lines[1].startswith("entries: 7, ")
    assert lines[2] == "damaged (unreadable, never used): 1 entry"
    assert [r.split()[:4] for r in lines[5:]] == [
        ["bleu", "?", "-", "1"],
        ["exact_match", "1", "-", "2"],
        ["faithfulness", "2", "gpt-4o-mini", "2"],
        ["faithfulness", "3", "gpt-4o-mini", "1"],
        ["faithfulness", "3", "local", "1"],
        ["(version", "?:", "recorded", "by"],
    ]
    # Export from Redis gives the same lines as the file imported (the old entry has no time).
    out_file = tmp_path / "redis.jsonl"
    assert _cli("export", *url, "-o", str(out_file), "--scorer", "faithfulness")[0] == 0
    assert out_file.read_text() == "".join(
        e.to_line() + "\n" for e in sorted(ENTRIES[:4], key=lambda e: e.key)
    )
    # The Redis entry is what a run reads under the same key.
    from pytest_llmeval.stores.redis_store import RedisStore

    store = RedisStore(redis_server.url, prefix=prefix)
    assert store.get(ENTRIES[3].key) == {"value": 0.5, "rationale": "because a4"}
    assert store.get(_key("old")) == {"value": 0.1}  # an entry in the old format still reads
    assert store.get(_key("bad")) is None
    store.close()
    status, out = _cli("prune", *url, "--older-than", "30d")
    assert out == (
        f"removed 2 entries from {name}\n  exact_match: 1\n  faithfulness: 1\n"
        "kept 1 entry with no recorded time (written before it was kept)\n"
    )
    assert client.get(prefix + "ratelimit:bucket") == b"7"
    assert client.exists(prefix + ENTRIES[0].key) == 0 and client.exists(prefix + _key("old"))
    client.close()


def test_push_copies_local_entries_and_keeps_existing_ones(
    tmp_path: Path, redis_server: Any
) -> None:
    client = _client(redis_server)
    prefix = "cli-push:"
    store = _store(tmp_path)
    mine = {"scorer": "faithfulness", "value": {"value": 0.9}}
    client.set(prefix + ENTRIES[0].key, json.dumps(mine))
    status, out = _cli("push", "--dir", str(store), "--url", redis_server.url, "--prefix", prefix)
    assert status == 0
    assert out == (
        f"pushed 5 entries to Redis {redis_server.url} (prefix {prefix!r}); 1 was already there\n"
    )
    assert json.loads(client.get(prefix + ENTRIES[0].key)) == mine  # left as it was
    stored = json.loads(client.get(prefix + ENTRIES[1].key))
    assert stored == {
        "created": ENTRIES[1].created,
        "key": ENTRIES[1].key,  # bound to its key: a copy under another key is a miss
        "locator": ENTRIES[1].locator,
        "parts": ENTRIES[1].parts,
        "scorer": "faithfulness",
        "value": dict(ENTRIES[1].value),
    }
    assert client.ttl(prefix + ENTRIES[1].key) == -1  # no --ttl: no expiry
    status, out = _cli("push", "--dir", str(store), "--url", redis_server.url, "--prefix", prefix)
    assert out.endswith(
        "pushed 0 entries to Redis "
        + f"{redis_server.url} (prefix {prefix!r}); 6 were already there\n"
    )
    client.close()


def test_redis_password_from_the_environment_is_never_printed(
    tmp_path: Path,
    redis_server_auth: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = _store(tmp_path)
    url = redis_server_auth.url
    monkeypatch.setenv("LLM_EVAL_REDIS_PASSWORD", "wrong-Secret-77")
    assert _cli("push", "--dir", str(store), "--url", url)[0] == 1
    captured = capsys.readouterr()
    assert "wrong-Secret-77" not in captured.out + captured.err
    assert f"error: Redis result store {url} is unavailable: AuthenticationError" in captured.err
    monkeypatch.setenv("LLM_EVAL_REDIS_PASSWORD", "s3cret-Pa55-xyz")
    status, out = _cli("push", "--dir", str(store), "--url", url)
    assert status == 0 and out.startswith(f"pushed 6 entries to Redis {url} (prefix 'llmeval:')")
    monkeypatch.delenv("LLM_EVAL_REDIS_PASSWORD")
    pw_url = url.replace("redis://", "redis://:s3cret-Pa55-xyz@")
    status, out = _cli("stats", "--url", pw_url)
    shown = url.replace("redis://", "redis://***@")
    assert status == 0 and "s3cret" not in out and out.startswith(f"result store: Redis {shown}")
    from redis_server import free_port

    assert _cli("stats", "--url", f"redis://:s3cret-Pa55-xyz@127.0.0.1:{free_port()}/0")[0] == 1
    assert "s3cret" not in capsys.readouterr().err
