"""Result cache hardening: odd strings in keys, read-only stores, corruption found after opening,
and replay misses that say which part of the key changed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cache_integrity_support import (
    BAD_VALUES,
    REPO,
    _set_values,
    _snapshot,
    _under_read_only_mount,
    needs_ro_mount,
)

from pytest_llmeval import CacheMissError, Score, Scorer, score
from pytest_llmeval.core.settings import JudgeSettings, Settings
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.judge import judge_identity
from pytest_llmeval.stores.cache import ResultCache, cache_key
from pytest_llmeval.stores.cache_entries import CacheWarning
from pytest_llmeval.stores.cache_protocol import input_key


def _corrupt_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if ".corrupt-" in p.name]


@pytest.fixture
def use_ctx(tmp_path: Path) -> Iterator[ScoringContext]:
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()


def test_lone_surrogate_has_a_stable_key_distinct_from_other_strings() -> None:
    ident = '{"name":"s"}'
    lone = input_key(ident, {"output": "\ud800"})
    assert lone == input_key(ident, {"output": "\ud800"})
    others = [
        "\ufffd",  # what a lossy encoding would turn it into
        "\\ud800",
        "?",
        "",
        "\ud801",
        "\udc00",
        "\ud800\ud800",
    ]
    keys = {input_key(ident, {"output": s}) for s in others}
    assert lone not in keys and len(keys) == len(others)
    # a surrogate pair written as two code points is not the astral character it would form
    assert input_key(ident, {"output": "\ud83d\ude00"}) != input_key(ident, {"output": "😀"})
    # surrogates in the identity (an option value) key as well
    assert cache_key({"name": "s", "options": {"x": "\udfff"}}, {"output": "a"}) != cache_key(
        {"name": "s", "options": {"x": "\ufffd"}}, {"output": "a"}
    )


def test_lone_surrogate_scores_and_is_cached_like_any_string(use_ctx: ScoringContext) -> None:
    # (levenshtein: exact_match stores nothing, a comparison costs less than a lookup)
    first = score("levenshtein", output="a\ud800", expected="a\ud800")
    assert (first.value, first.cached) == (1.0, False)
    again = score("levenshtein", output="a\ud800", expected="a\ud800")
    assert (again.value, again.cached) == (1.0, True)
    other = score("levenshtein", output="a\ud800", expected="a\ufffd")
    assert (other.value, other.cached) == (0.5, False)


def test_value_with_a_lone_surrogate_round_trips(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 0.5, "rationale": "odd \udc80 byte"})
    c.close()
    assert ResultCache(tmp_path).get("k") == {"value": 0.5, "rationale": "odd \udc80 byte"}


RECORDER = """
import sys
from pathlib import Path
from pytest_llmeval import Score, Scorer, score
from pytest_llmeval.engine.context import ScoringContext, set_context
from pytest_llmeval.core.settings import Settings

class Graded(Scorer):
    '''A judge scorer stand-in whose verdict is the output's length (replay must not call it).'''
    name = "graded_ro"
    uses_judge = True

    def compute(self, inputs, ctx):
        if ctx.settings.cache_mode == "replay":
            raise AssertionError("replay computed a judge scorer")
        return Score(value=len(inputs["output"]) / 10)

cache_dir, mode = Path(sys.argv[1]), sys.argv[2]
ctx = ScoringContext(Settings(cache_dir=cache_dir, cache_mode=mode))
set_context(ctx)
out = []
for text in ("a", "bb", "ccc"):
    try:
        s = score(Graded, output=text)
        out.append(f"{text}={s.value:g}:{'cached' if s.cached else 'computed'}")
    except Exception as exc:
        out.append(f"{text}=ERROR {type(exc).__name__}: {exc}")
ctx.close()
print("|".join(out))
"""


REPLAYED = "a=0.1:cached|bb=0.2:cached|ccc=0.3:cached"


def _record(tmp: Path) -> tuple[Path, Path]:
    script = tmp / "recorder.py"
    script.write_text(RECORDER)
    cache = tmp / "cache"
    out = _run([sys.executable, str(script), str(cache), "use"])
    assert out == "a=0.1:computed|bb=0.2:computed|ccc=0.3:computed"
    assert {p.name for p in cache.iterdir()} == {".gitignore", "results.sqlite3"}
    return script, cache


def _run(argv: list[str], **kw: Any) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "always"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, **kw)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_replay_reads_a_cache_whose_directory_and_file_are_chmod_read_only(
    tmp_path: Path,
) -> None:
    script, cache = _record(tmp_path)
    before = _snapshot(cache)
    db = cache / "results.sqlite3"
    db.chmod(0o444)
    cache.chmod(0o555)
    try:
        assert _run([sys.executable, str(script), str(cache), "replay"]) == REPLAYED
        assert _snapshot(cache) == before  # replay wrote nothing, created no -wal/-shm
    finally:
        cache.chmod(0o755)
        db.chmod(0o644)


@needs_ro_mount
def test_replay_from_a_read_only_mount(tmp_path: Path) -> None:
    script, cache = _record(tmp_path)
    before = _snapshot(cache)
    argv = [sys.executable, str(script), str(cache), "replay"]
    assert _run(_under_read_only_mount(cache, argv)) == REPLAYED
    assert _snapshot(cache) == before


@needs_ro_mount
def test_use_mode_on_a_read_only_mount_reads_results_and_stores_none(tmp_path: Path) -> None:
    script, cache = _record(tmp_path)
    argv = [sys.executable, str(script), str(cache), "use"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "always"}
    proc = subprocess.run(
        _under_read_only_mount(cache, argv), capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == REPLAYED
    assert "cannot be written" in proc.stderr and "not stored" in proc.stderr


@needs_ro_mount
def test_replay_with_an_uncheckpointed_wal_on_a_read_only_mount(tmp_path: Path) -> None:
    """A cache copied while a writer had it open has a -wal (and -shm) beside it: the results in
    the WAL must be read too."""
    script, cache = _record(tmp_path)
    holder = sqlite3.connect(cache / "results.sqlite3", isolation_level=None)
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("""UPDATE results SET value = '{"value": 0.9}'""")
    # copy the three files while the writer still holds them (its WAL is not checkpointed)
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in cache.iterdir():
        shutil.copy2(p, copy / p.name)
    holder.close()
    assert (copy / "results.sqlite3-wal").stat().st_size > 0
    argv = [sys.executable, str(script), str(copy), "replay"]
    assert _run(_under_read_only_mount(copy, argv)) == "a=0.9:cached|bb=0.9:cached|ccc=0.9:cached"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_replay_as_a_user_who_cannot_write_the_cache(tmp_path: Path) -> None:
    """The usual CI shape: the checkout (with the committed cache) belongs to someone else."""
    base = Path(tempfile.mkdtemp(prefix="llmeval-ro-"))
    try:
        base.chmod(0o755)
        script, cache = _record(base)
        for p in [cache, *cache.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        before = _snapshot(cache)
        probe = subprocess.run(
            ["sh", "-c", f"touch '{cache}/probe'"], user=65534, group=65534, capture_output=True
        )
        assert probe.returncode != 0  # genuinely not writable for that user
        # The interpreter lives under /root here: import what replay needs as root, then drop
        # to the other user (and with it every capability) before running the script.
        as_nobody = (
            "import os, sys, inspect, linecache, tokenize, sqlite3, pytest_llmeval, "
            "pytest_llmeval.stores.cache, pytest_llmeval.engine.context, "
            "pytest_llmeval.engine.assertions; "
            "code = open(sys.argv[1]).read(); sys.argv = sys.argv[1:]; "
            "os.setgroups([]); os.setgid(65534); os.setuid(65534); "
            "exec(compile(code, sys.argv[0], 'exec'), {'__name__': '__main__'})"
        )
        argv = [sys.executable, "-c", as_nobody, str(script), str(cache), "replay"]
        assert _run(argv, cwd=str(base)) == REPLAYED
        assert _snapshot(cache) == before
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_replay_handle_opens_read_only_and_never_writes(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 1})
    c.close()
    before = _snapshot(tmp_path)
    ro = ResultCache(tmp_path, read_only=True)
    assert ro.get("k") == {"value": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ro.put("k2", "s", {"value": 2})  # a silent no-op: replay stores nothing
    assert ro.get("k2") is None
    ro.close()
    assert _snapshot(tmp_path) == before


def test_replay_without_a_cache_file_creates_nothing_and_says_so(tmp_path: Path) -> None:
    cache = tmp_path / "missing"
    c = ScoringContext(Settings(cache_dir=cache, cache_mode="replay"))
    prev = set_context(c)
    try:
        with (
            pytest.warns(CacheWarning, match="cannot be used .the file does not exist"),
            pytest.raises(
                CacheMissError,
                match=r"the result cache .*missing.results\.sqlite3 cannot be used: the file "
                "does not exist: nothing was recorded there yet",
            ),
        ):
            score(JudgedHere, output="x")
    finally:
        set_context(prev)
        c.close()
    assert not cache.exists()


def _keys(n: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]


def _damage_table_leaves(db: Path, how_many: int = 5) -> None:
    """Give a few table leaf pages in the middle of the file an impossible cell count: the
    schema and the key index stay intact, so opening (and counting) works."""
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    leaves = [n for n in range(2, len(raw) // page + 1) if raw[(n - 1) * page] == 0x0D]
    mid = len(leaves) // 2
    for n in leaves[mid - how_many // 2 : mid - how_many // 2 + how_many]:
        off = (n - 1) * page
        raw[off + 3 : off + 5] = b"\xff\xff"
    db.write_bytes(bytes(raw))


def test_corruption_found_on_read_sets_the_file_aside_and_nothing_misses_forever(
    tmp_path: Path,
) -> None:
    keys = _keys(3000)
    c = ResultCache(tmp_path)
    for i, k in enumerate(keys):
        c.put(k, "s", {"value": i, "rationale": "r" * 40})
    c.close()
    _damage_table_leaves(tmp_path / "results.sqlite3")

    # the open check passes: the file is not rebuilt at open
    check = sqlite3.connect(tmp_path / "results.sqlite3")
    assert check.execute("SELECT count(*) FROM results").fetchone()[0] == 3000
    check.close()

    def one_run(expect_warnings: bool) -> tuple[list[int], list[str]]:
        """Score every entry: a miss is recomputed and stored."""
        run = ResultCache(tmp_path)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always" if expect_warnings else "error")
            missed = []
            for i, k in enumerate(keys):
                if run.get(k) != {"value": i, "rationale": "r" * 40}:
                    missed.append(i)
                    run.put(k, "s", {"value": i, "rationale": "r" * 40})
        run.close()
        return missed, [str(w.message) for w in rec if issubclass(w.category, CacheWarning)]

    probe = ResultCache(tmp_path)
    assert probe.get(keys[0]) == {"value": 0, "rationale": "r" * 40}  # it opens fine
    probe.close()
    assert _corrupt_files(tmp_path) == []

    missed, messages = one_run(expect_warnings=True)
    assert len(messages) == 1, messages
    assert "damaged" in messages[0] and "malformed" in messages[0]
    assert "rebuilding" in messages[0]
    assert len(_corrupt_files(tmp_path)) >= 1
    assert 0 < len(missed) < 3000
    # the next run recomputes what the set-aside file held, and stores it
    missed, messages = one_run(expect_warnings=False)
    assert messages == [] and 0 < len(missed) < 3000
    # after that, every entry hits: none misses forever
    assert one_run(expect_warnings=False) == ([], [])


def test_read_corruption_renames_only_the_file_that_was_opened(tmp_path: Path) -> None:
    keys = _keys(3000)
    c = ResultCache(tmp_path)
    for i, k in enumerate(keys):
        c.put(k, "s", {"value": i})
    c.close()
    _damage_table_leaves(tmp_path / "results.sqlite3")
    late = ResultCache(tmp_path)
    assert late.get(keys[0]) == {"value": 0}  # connected to the damaged file
    # meanwhile another worker set the damaged file aside and started a fresh one
    db = tmp_path / "results.sqlite3"
    db.rename(tmp_path / "results.sqlite3.corrupt-other")
    fresh = ResultCache(tmp_path)
    fresh.put("fresh", "s", {"value": 7})
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for k in keys:
            late.get(k)  # meets the damage in the file it opened
    assert len(_corrupt_files(tmp_path)) == 1  # only the other worker's rename
    assert late.get("fresh") == {"value": 7}  # and it moved over to the fresh file
    assert fresh.get("fresh") == {"value": 7}
    late.close()
    fresh.close()


def test_a_busy_read_is_a_miss_never_corruption(tmp_path: Path) -> None:
    """A read-only handle leaves a rollback-journal file as it is, so a writer's exclusive lock
    makes its reads busy after opening: a miss, never a rebuild, and the handle stays usable."""
    holder = sqlite3.connect(tmp_path / "results.sqlite3", isolation_level=None)
    holder.execute(
        "CREATE TABLE results (key TEXT PRIMARY KEY, scorer TEXT NOT NULL, "
        "value TEXT NOT NULL, created REAL NOT NULL)"
    )
    holder.execute("""INSERT INTO results VALUES ('k', 's', '{"value": 1}', 0)""")
    c = ResultCache(tmp_path, timeout=0.2, read_only=True)
    assert c.get("k") == {"value": 1}
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("""INSERT INTO results VALUES ('h', 's', '{"value": 2}', 0)""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.get("k") is None  # busy: a miss
    holder.execute("COMMIT")
    holder.close()
    assert c.get("h") == {"value": 2}  # not switched off, not rebuilt
    assert _corrupt_files(tmp_path) == []
    c.close()


def test_threads_of_one_handle_move_to_the_rebuilt_file(tmp_path: Path) -> None:
    keys = _keys(3000)
    c = ResultCache(tmp_path)
    for i, k in enumerate(keys):
        c.put(k, "s", {"value": i})
    c.close()
    _damage_table_leaves(tmp_path / "results.sqlite3")
    shared = ResultCache(tmp_path)
    other: dict[str, Any] = {}
    t = threading.Thread(target=lambda: other.update(first=shared.get(keys[0])))
    t.start()
    t.join()
    assert other["first"] == {"value": 0}  # the thread's own connection, on the damaged file
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for k in keys:
            shared.get(k)
    shared.put("after", "s", {"value": 3})
    t = threading.Thread(target=lambda: other.update(after=shared.get("after")))
    t.start()
    t.join()
    assert other["after"] == {"value": 3}
    shared.close()


class JudgedHere(Scorer):
    """A judge scorer whose key carries the real judge identity; it never calls a judge."""

    name = "judged_here"
    uses_judge = True
    required_inputs = ("output",)
    optional_inputs = ("expected",)
    default_options: Mapping[str, Any] = {"strict": False}

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return judge_identity(self, ctx, "prompt-v1")

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=1.0 if inputs["output"] == inputs.get("expected") else 0.0)


def _ctx(tmp_path: Path, mode: str, model: str = "gpt-4o-mini") -> ScoringContext:
    return ScoringContext(
        Settings(cache_dir=tmp_path / "c", cache_mode=mode, judge=JudgeSettings(model=model))
    )


def _replay_error(tmp_path: Path, model: str = "gpt-4o-mini", **kw: Any) -> str:
    c = _ctx(tmp_path, "replay", model)
    prev = set_context(c)
    try:
        with pytest.raises(CacheMissError) as err:
            score(JudgedHere, **kw)
    finally:
        set_context(prev)
        c.close()
    return str(err.value)


def _record_judged(tmp_path: Path, model: str = "local", **kw: Any) -> None:
    c = _ctx(tmp_path, "use", model)
    prev = set_context(c)
    try:
        assert score(JudgedHere, **kw).cached is False
    finally:
        set_context(prev)
        c.close()


def test_replay_miss_names_the_judge_model_that_changed(tmp_path: Path) -> None:
    _record_judged(tmp_path, "local", output="a", expected="a")
    message = _replay_error(tmp_path, "gpt-4o-mini", output="a", expected="a")
    assert "judged_here" in message and "--llm-eval-cache=use" in message
    assert "differs in judge model: recorded 'local', now 'gpt-4o-mini'" in message


def test_replay_miss_names_an_input_and_an_option_that_changed(tmp_path: Path) -> None:
    _record_judged(tmp_path, "m", output="a", expected="a")
    message = _replay_error(tmp_path, "m", output="a", expected="b")
    assert "differs in input expected (other content)" in message
    assert "judge model" not in message
    message = _replay_error(tmp_path, "m", output="a", expected="a", strict=True)
    assert "differs in option strict: recorded False, now True" in message


def test_replay_miss_with_nothing_recorded_for_the_scorer_says_so(tmp_path: Path) -> None:
    c = ResultCache(tmp_path / "c")
    c.put("k", "other_scorer", {"value": 1})
    c.close()
    message = _replay_error(tmp_path, output="a")
    assert "holds 1 result, none of scorer judged_here" in message


def test_key_parts_never_hold_a_secret(tmp_path: Path) -> None:
    c = _ctx(tmp_path, "use")
    prev = set_context(c)
    try:
        score(
            JudgedHere,
            output="a",
            api_key="sk-live-VERYSECRET",
            base_url="https://user:pw-SECRET@judge.example/v1?token=tok-SECRET",
        )
    finally:
        set_context(prev)
        c.close()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "c").iterdir())
    assert b"VERYSECRET" not in raw and b"pw-SECRET" not in raw and b"tok-SECRET" not in raw
    conn = sqlite3.connect(tmp_path / "c" / "results.sqlite3")
    (parts,) = conn.execute("SELECT parts FROM key_parts").fetchone()
    assert json.loads(parts)["options.base_url"] == "https://judge.example/v1"


def test_an_old_cache_file_is_read_migrated_and_explained(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    old = sqlite3.connect(d / "results.sqlite3", isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(
        "CREATE TABLE results (key TEXT PRIMARY KEY, scorer TEXT NOT NULL, "
        "value TEXT NOT NULL, created REAL NOT NULL)"
    )
    old.execute("""INSERT INTO results VALUES ('old', 'judged_here', '{"value": 0.25}', 0)""")
    old.close()
    # replay opens it read-only (no migration) and still explains the miss
    ro = ResultCache(d, read_only=True)
    assert ro.get("old") == {"value": 0.25}
    ro.close()
    message = _replay_error(tmp_path, output="a")
    assert "holds 1 result of scorer judged_here, none for this case" in message
    assert "older" in message
    # a writing run migrates it: old entries stay, new ones carry their parts
    c = ResultCache(d)
    assert c.get("old") == {"value": 0.25}
    c.close()
    _record_judged(tmp_path, "local", output="a")
    conn = sqlite3.connect(d / "results.sqlite3")
    assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM key_parts").fetchone()[0] == 1
    conn.close()
    assert "judge model: recorded 'local'" in _replay_error(tmp_path, output="a")


def test_warm_lookup_stays_one_point_read(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 1})
    assert c.get("k") == {"value": 1}
    statements: list[str] = []
    conn = c._connect()
    assert conn is not None
    conn.set_trace_callback(statements.append)
    for _ in range(3):
        assert c.get("k") == {"value": 1}
    conn.set_trace_callback(None)
    assert statements == ["SELECT value FROM results WHERE key = 'k'"] * 3
    c.close()


def test_replay_of_a_damaged_file_renames_nothing_and_says_why(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "results.sqlite3").write_bytes(b"not a database" * 200)
    c = _ctx(tmp_path, "replay")
    prev = set_context(c)
    try:
        with (
            pytest.warns(CacheWarning, match="cannot be used"),
            pytest.raises(
                CacheMissError, match=r"results\.sqlite3 cannot be used: file is not a database"
            ),
        ):
            score(JudgedHere, output="a")
    finally:
        set_context(prev)
        c.close()
    assert _corrupt_files(tmp_path) == []
    assert (d / "results.sqlite3").read_bytes() == b"not a database" * 200


def test_batch_replay_miss_is_explained_too(tmp_path: Path) -> None:
    from pytest_llmeval import score_many

    _record_judged(tmp_path, "local", output="a")
    c = _ctx(tmp_path, "replay", "other-model")
    prev = set_context(c)
    try:
        with pytest.raises(
            CacheMissError, match="judge model: recorded 'local', now 'other-model'"
        ):
            score_many(JudgedHere, [{"output": "a"}])
    finally:
        set_context(prev)
        c.close()


def test_nearest_recorded_entry_is_the_one_with_fewest_differences(tmp_path: Path) -> None:
    from pytest_llmeval.core.records import current_recorder

    for text in ("a", "b", "c"):
        _record_judged(tmp_path, "local", output=text)
    # same inputs as one of them, only the model differs: that one is named, not the inputs
    message = _replay_error(tmp_path, "gpt-4o-mini", output="b")
    assert "a recorded entry for this case differs in judge model: recorded 'local'" in message
    assert "input output" not in message
    # outside a test (no recorder) the entry recorded for the same inputs is the nearest
    token = current_recorder.set(None)
    try:
        message = _replay_error(tmp_path, "gpt-4o-mini", output="b")
    finally:
        current_recorder.reset(token)
    assert "(case " not in message
    assert "for the same inputs differs in judge model: recorded 'local'" in message


def test_a_handle_on_a_file_set_aside_by_another_writes_to_the_fresh_one(tmp_path: Path) -> None:
    """Another xdist worker renamed the damaged file aside: this worker's next write must land
    in the fresh file, where the rest of the run (and the next one) looks."""
    keys = _keys(3000)
    c = ResultCache(tmp_path)
    for i, k in enumerate(keys):
        c.put(k, "s", {"value": i})
    c.close()
    _damage_table_leaves(tmp_path / "results.sqlite3")
    other = ResultCache(tmp_path)
    assert other.get(keys[0]) == {"value": 0}  # connected to the damaged file
    finder = ResultCache(tmp_path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for k in keys:
            finder.get(k)
    assert any("rebuilding" in str(w.message) for w in rec)
    other.put("late", "s", {"value": 5})
    assert finder.get("late") == {"value": 5}
    assert ResultCache(tmp_path).get("late") == {"value": 5}
    other.close()
    finder.close()


def test_key_parts_and_their_differences_read_plainly() -> None:
    from pytest_llmeval.stores.cache_protocol import describe_differences, key_parts

    identity = {
        "name": "s",
        "version": "2",
        "options": {"schema": {"type": "object"}, "api_key": "sk-x", "auth_token": "t"},
        "extra": {"prompt_sha256": "abc", "judge": {"model": "m", "temperature": 0.0}},
    }
    parts = key_parts(identity, {"output": "o", "context": ["c"]})
    assert parts["options.schema"] == {"type": "object"}  # an option's value stays one part
    assert parts["options.api_key"] == parts["options.auth_token"] == "<hidden>"
    assert parts["extra.judge.model"] == "m" and "name" not in parts
    assert len(parts["inputs.output"]) == 16 and parts["inputs.output"] != "o"
    now = dict(parts, **{"extra.judge.temperature": 0.7, "version": "3"})
    now["inputs.output"] = "0" * 16
    del now["inputs.context"]
    now["options.auth_token"] = "<hidden>"
    assert describe_differences(parts, now) == [
        "judge temperature: recorded 0.0, now 0.7",
        "scorer version: recorded '2', now '3'",
        "input context (given when recorded, not now)",
        "input output (other content)",
    ]


def test_keys_of_any_two_strings_surrogates_included_differ_exactly_when_they_do() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    # lone surrogates, both halves of pairs, what lossy encodings produce, and everything else
    alphabet = st.one_of(
        st.integers(0xD800, 0xDFFF).map(chr),
        st.sampled_from(["\ud83d", "\ude00", "😀", "\ufffd", "\\", "u", "d", "8"]),
        st.characters(),
    )
    any_text = st.text(alphabet, max_size=4)

    @settings(max_examples=300, deadline=None)
    @given(any_text, any_text)
    def check(a: str, b: str) -> None:
        ka, kb = input_key("{}", {"output": a}), input_key("{}", {"output": b})
        assert (ka == kb) == (a == b)
        assert ka == input_key("{}", {"output": a})

    check()


class LowHere(Scorer):
    name = "low_here"
    required_inputs = ("output",)

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        return Score(value=0.2, rationale="low by design")


@pytest.mark.parametrize(("stored", "problem"), BAD_VALUES)
def test_every_kind_of_bad_stored_value_is_a_miss_with_a_warning_naming_store_and_key(
    tmp_path: Path, stored: str, problem: str
) -> None:
    c = ScoringContext(Settings(cache_dir=tmp_path / "c", cache_mode="use"))
    prev = set_context(c)
    try:
        assert score(LowHere, output="a").cached is False
        assert score(LowHere, output="a").cached is True
        (key,) = _set_values(tmp_path / "c" / "results.sqlite3", stored)
        with pytest.warns(CacheWarning) as caught:
            again = score(LowHere, output="a")
        assert (again.value, again.cached) == (0.2, False)
        (message,) = [str(w.message) for w in caught if w.category is CacheWarning]
        assert message.startswith(f"SQLite cache {tmp_path / 'c' / 'results.sqlite3'}: ")
        assert f"invalid entry {key}: " in message and problem in message, message
        assert score(LowHere, output="a").cached is True  # stored over the invalid entry
    finally:
        set_context(prev)
        c.close()


def test_ten_thousand_bad_entries_warn_a_few_times_not_ten_thousand(tmp_path: Path) -> None:
    c = ResultCache(tmp_path)
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(10_000)]
    c.put_many((k, "s", {"value": 0.5}, None) for k in keys)
    conn = sqlite3.connect(c.path)
    with conn:
        conn.execute("UPDATE results SET value = '{\"value\": NaN}'")
    conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert all(c.get(k) is None for k in keys)
    messages = [str(w.message) for w in caught if w.category is CacheWarning]
    assert 1 < len(messages) <= 5, messages
    assert keys[0] in messages[0] and f"SQLite cache {c.path}" in messages[0]
    assert "further invalid entries" in messages[-1]
    assert c.invalid_count == 10_000
    c.close()


@pytest.mark.parametrize(
    "text",
    ['{"value": NaN}', '{"value": -Infinity}', '{"value": 1e400}', "[" * 50_000, '"x"', "null"],
    ids=["nan", "-infinity", "overflow", "deep", "string", "null"],
)
def test_the_sqlite_store_refuses_what_is_not_strict_json_of_an_object(
    tmp_path: Path, text: str
) -> None:
    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 0.5})
    _set_values(c.path, text)
    with pytest.warns(CacheWarning, match="invalid entry"):
        assert c.get("k") is None
    assert c.invalid("k") is not None
    c.close()


def test_a_huge_stored_value_is_refused_without_being_parsed(tmp_path: Path) -> None:
    from pytest_llmeval.stores.cache_entries import MAX_ENTRY_CHARS

    c = ResultCache(tmp_path)
    c.put("k", "s", {"value": 0.5, "rationale": "x" * (MAX_ENTRY_CHARS + 1)})
    with pytest.warns(CacheWarning, match="larger than"):
        assert c.get("k") is None
    c.close()
