"""``python -m pytest_llmeval cache stats|prune|export|import|push``: the result store's tools.

Each works on the local SQLite store (``--dir``, default ``.llmeval`` of the current directory)
or on a Redis store (``--url redis://host:port/db``, password in the URL or
``LLM_EVAL_REDIS_PASSWORD``, ``--prefix``, default ``llmeval:``). ``push`` copies the local
store to Redis. Exit status: 0 done, 2 a usage error or bad input (the message says which option,
file or line), 1 a failure (a store that cannot be reached or written). The password is never
printed: URLs are shown without it and errors are scrubbed of it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from pytest_llmeval.core.options import env_value
from pytest_llmeval.stores.cache_entries import Entry, EntryError

__all__ = ["main"]

DEFAULT_DIR = ".llmeval"
DEFAULT_PREFIX = "llmeval:"
_BATCH = 500
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Problem(Exception):
    """Ends the command with a message and an exit status (2 bad input, 1 failure)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _bad(message: str) -> Problem:
    return Problem(message, 2)


def _failed(message: str) -> Problem:
    return Problem(message, 1)


# -- stores ------------------------------------------------------------------------------------


class _Store(Protocol):
    name: str

    def entries(self) -> Iterator[tuple[Entry | None, str, int]]: ...

    def delete(self, keys: Sequence[str]) -> int: ...

    def write(self, entries: Sequence[Entry], replace: bool) -> tuple[int, int]: ...

    def disk_size(self) -> int | None: ...

    def close(self) -> None: ...


class _Sqlite:
    """The local store's file, read and written directly: every error is reported."""

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        from pytest_llmeval.stores.cache import DB_NAME, ResultCache, create_schema

        self.directory = directory
        self.path = directory / DB_NAME
        self.name = f"SQLite {self.path}"
        if not self.path.is_file():
            if not create:
                raise _bad(
                    f"no result cache at {self.path} (run `pytest --llm-eval` there first, or "
                    "pass --dir DIR: the directory holding results.sqlite3)"
                )
            made = ResultCache(directory)  # creates it as a run does (WAL, .gitignore)
            len(made)
            made.close()
            if not self.path.is_file():
                raise _failed(f"could not create the result cache {self.path}")
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.conn.execute("SELECT count(*) FROM results").fetchone()
        except sqlite3.Error as exc:
            raise _failed(f"cannot read the result cache {self.path}: {exc}") from None
        self._create_schema = create_schema

    def _has_parts(self) -> bool:
        from pytest_llmeval.stores.cache import has_parts_table

        return has_parts_table(self.conn)

    def entries(self) -> Iterator[tuple[Entry | None, str, int]]:
        from pytest_llmeval.stores.cache import entry_from_row

        if self._has_parts():
            sql = (
                "SELECT r.key, r.scorer, r.value, r.created, p.parts, p.locator FROM results r "
                "LEFT JOIN key_parts p ON p.key = r.key ORDER BY r.key"
            )
        else:  # a file from before the key parts were kept
            sql = "SELECT key, scorer, value, created, NULL, NULL FROM results ORDER BY key"
        try:
            for key, scorer, value, created, parts, locator in self.conn.execute(sql):
                row = None if parts is None else (parts, locator)
                size = len(value or "") + len(parts or "")
                yield entry_from_row(key, scorer, value, created, row), key, size
        except sqlite3.Error as exc:
            raise _failed(f"cannot read the result cache {self.path}: {exc}") from None

    def delete(self, keys: Sequence[str]) -> int:
        removed = 0
        parts = self._has_parts()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            for i in range(0, len(keys), _BATCH):
                chunk = list(keys[i : i + _BATCH])
                marks = ",".join("?" * len(chunk))
                cur = self.conn.execute(f"DELETE FROM results WHERE key IN ({marks})", chunk)
                removed += cur.rowcount
                if parts:
                    self.conn.execute(f"DELETE FROM key_parts WHERE key IN ({marks})", chunk)
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise _failed(f"cannot write the result cache {self.path}: {exc}") from None
        return removed

    def write(self, entries: Sequence[Entry], replace: bool) -> tuple[int, int]:
        from pytest_llmeval.stores.cache_entries import encode_value
        from pytest_llmeval.stores.cache_protocol import inputs_digest

        written = present = 0
        now = time.time()
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        try:
            self._create_schema(self.conn)  # an older file gains the key_parts table
            self.conn.execute("BEGIN IMMEDIATE")
            for e in entries:
                created = now if e.created is None else e.created
                cur = self.conn.execute(
                    f"{verb} INTO results (key, scorer, value, created) VALUES (?, ?, ?, ?)",
                    (e.key, e.scorer, encode_value(e.value), created),
                )
                if cur.rowcount != 1:
                    present += 1
                    continue
                written += 1
                self.conn.execute("DELETE FROM key_parts WHERE key = ?", (e.key,))
                if e.parts is not None:
                    parts = dict(e.parts)
                    self.conn.execute(
                        "INSERT INTO key_parts (key, scorer, locator, inputs, parts, created) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            e.key,
                            e.scorer,
                            e.locator,
                            inputs_digest(parts),
                            json.dumps(parts, sort_keys=True, ensure_ascii=True, default=repr),
                            created,
                        ),
                    )
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise _failed(f"cannot write the result cache {self.path}: {exc}") from None
        return written, present

    def disk_size(self) -> int | None:
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += Path(str(self.path) + suffix).stat().st_size
            except OSError:
                pass
        return total

    def close(self) -> None:
        self.conn.close()


class _Redis:
    def __init__(self, url: str, prefix: str, ttl: int | None = None) -> None:
        from pytest_llmeval.core.errors import LLMEvalError
        from pytest_llmeval.stores.redis_store import RedisUnavailable, redact_url

        if not url.startswith(("redis://", "rediss://")):
            raise _bad(f"--url {redact_url(url)!r}: use redis://host:port/db or rediss://...")
        if ttl is not None and ttl <= 0:
            raise _bad(f"--ttl must be a positive number of seconds, not {ttl}")
        try:
            from pytest_llmeval.stores.redis_store import RedisStore

            self.store = RedisStore(
                url,
                prefix=prefix,
                ttl=ttl,
                password=env_value("llm_eval_redis_password"),
            )
        except ImportError:
            raise _failed(
                'a Redis store needs redis-py: pip install redis (or pip install ".[redis]" in '
                "the pytest-llmeval-suite checkout)"
            ) from None
        except LLMEvalError as exc:
            raise _bad(str(exc).replace("--llm-eval-cache-url", "--url")) from None
        self.name = f"Redis {self.store.url} (prefix {prefix!r})"
        try:
            self.store.connect()
        except RedisUnavailable as exc:
            self.store.close()
            raise _failed(str(exc)) from None

    def _fail(self, exc: BaseException, doing: str) -> Problem:
        return _failed(f"Redis {self.store.url}: {doing} failed: {self.store.describe(exc)}")

    def entries(self) -> Iterator[tuple[Entry | None, str, int]]:
        """In key order, as the SQLite store gives them (an export is the same either way)."""
        try:
            found = sorted(self.store.entries(), key=lambda t: t[1])
        except self.store._errors as exc:
            raise self._fail(exc, "reading") from None
        yield from found

    def delete(self, keys: Sequence[str]) -> int:
        try:
            return self.store.delete(keys)
        except self.store._errors as exc:
            raise self._fail(exc, "deleting") from None

    def write(self, entries: Sequence[Entry], replace: bool) -> tuple[int, int]:
        from pytest_llmeval.stores.redis_store import RedisDown

        try:
            return self.store.push(entries, replace=replace)
        except RedisDown as exc:
            raise _failed(
                f"Redis {self.store.url} stopped answering after {exc.written} of "
                f"{len(entries)} entries were written: {exc}"
            ) from None
        except self.store._errors as exc:
            raise self._fail(exc, "writing") from None

    def disk_size(self) -> int | None:
        return None

    def close(self) -> None:
        self.store.close()


def _open(args: argparse.Namespace, *, create: bool = False) -> _Store:
    if args.url:
        return _Redis(args.url, args.prefix, getattr(args, "ttl", None))
    if args.prefix != DEFAULT_PREFIX:
        raise _bad("--prefix applies to a Redis store: give --url too")
    return _Sqlite(Path(args.dir), create=create)


# -- commands ----------------------------------------------------------------------------------


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + " UTC"


def _entries(n: int) -> str:
    return f"{n} entr" + ("y" if n == 1 else "ies")


@dataclass
class _Group:
    entries: int = 0
    size: int = 0
    oldest: float | None = None
    newest: float | None = None

    def add(self, size: int, created: float | None) -> None:
        self.entries += 1
        self.size += size
        if created is not None:
            self.oldest = created if self.oldest is None else min(self.oldest, created)
            self.newest = created if self.newest is None else max(self.newest, created)


def _table(rows: list[list[str]], right: set[int], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    store = _open(args)
    try:
        total = _Group()
        groups: dict[tuple[str, str, str], _Group] = {}
        damaged = 0
        for entry, _key, size in store.entries():
            if entry is None:
                damaged += 1
                continue
            total.add(size, entry.created)
            version = "?" if entry.version is None else str(entry.version)
            group = (entry.scorer, version, entry.judge_model or "-")
            groups.setdefault(group, _Group()).add(size, entry.created)
        disk = store.disk_size()
    finally:
        store.close()
    head = f"result store: {store.name}"
    if disk is not None:
        head += f", {disk} bytes on disk"
    print(head, file=out)
    print(
        f"entries: {total.entries}, {total.size} bytes of results; oldest {_when(total.oldest)}, "
        f"newest {_when(total.newest)}",
        file=out,
    )
    if damaged:
        print(f"damaged (unreadable, never used): {_entries(damaged)}", file=out)
    if not groups:
        return 0
    rows = [["scorer", "version", "judge model", "entries", "bytes", "oldest", "newest"]]
    for (scorer, version, model), g in sorted(groups.items()):
        rows.append(
            [scorer, version, model, str(g.entries), str(g.size), _when(g.oldest), _when(g.newest)]
        )
    print(file=out)
    _table(rows, {3, 4}, out)
    if any(v == "?" for _s, v, _m in groups):
        print("(version ?: recorded by an older pytest-llmeval that kept no key details)", file=out)
    return 0


def _age(text: str) -> float:
    m = _AGE.fullmatch(text.strip())
    if m is None:
        raise _bad(
            f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h, 90m, 2w "
            "(s, m, h, d, w)"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


def _version_number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def cmd_prune(args: argparse.Namespace, out: TextIO) -> int:
    if args.older_than is None and args.scorer is None and args.below_version is None:
        raise _bad(
            "prune needs what to remove: --older-than AGE (e.g. 30d), --scorer NAME, "
            "and/or --below-version N (with --scorer); add --dry-run to see it first"
        )
    if args.below_version is not None and args.scorer is None:
        raise _bad("--below-version N needs --scorer NAME: versions are per scorer")
    below = None
    if args.below_version is not None:
        below = _version_number(args.below_version)
        if below is None:
            raise _bad(f"--below-version {args.below_version!r}: give a version number, e.g. 2")
    cutoff = None if args.older_than is None else time.time() - _age(args.older_than)
    store = _open(args)
    try:
        doomed: list[str] = []
        by_scorer: dict[str, int] = {}
        no_time = no_version = 0
        for entry, key, _size in store.entries():
            if entry is None:
                continue
            if args.scorer is not None and entry.scorer != args.scorer:
                continue
            if cutoff is not None:
                if entry.created is None:
                    no_time += 1
                    continue
                if entry.created >= cutoff:
                    continue
            if below is not None:
                version = _version_number(entry.version)
                if version is None:
                    no_version += 1
                    continue
                if version >= below:
                    continue
            doomed.append(key)
            by_scorer[entry.scorer] = by_scorer.get(entry.scorer, 0) + 1
        removed = len(doomed) if args.dry_run else store.delete(doomed)
    finally:
        store.close()
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {_entries(removed)} from {store.name}", file=out)
    for scorer, n in sorted(by_scorer.items()):
        print(f"  {scorer}: {n}", file=out)
    if no_time:
        print(
            f"kept {_entries(no_time)} with no recorded time (written before it was kept)",
            file=out,
        )
    if no_version:
        print(f"kept {_entries(no_version)} with no recorded (numeric) version", file=out)
    return 0


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    store = _open(args)
    n = damaged = 0
    target = None if args.output == "-" else Path(args.output)
    tmp = None if target is None else target.with_name(target.name + ".tmp")
    try:
        try:
            fh: TextIO = sys.stdout if tmp is None else tmp.open("w", encoding="ascii")
        except OSError as exc:
            raise _bad(f"-o {args.output}: cannot write it ({exc})") from None
        try:
            for entry, _key, _size in store.entries():
                if entry is None:
                    damaged += 1
                    continue
                if args.scorer is not None and entry.scorer != args.scorer:
                    continue
                fh.write(entry.to_line() + "\n")
                n += 1
        finally:
            if tmp is not None:
                fh.close()
        if tmp is not None and target is not None:
            os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        store.close()
    report = sys.stderr if target is None else out
    print(f"exported {_entries(n)} from {store.name} to {args.output}", file=report)
    if damaged:
        print(f"skipped {_entries(damaged)} that are damaged (unreadable)", file=report)
    return 0


def read_jsonl(path: Path) -> list[Entry]:
    """Every entry of a JSONL export, checked; a bad line raises :class:`Problem` naming
    ``path:line``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _bad(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(f"{path}: cannot read it ({exc})") from None
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = Entry.from_line(line)
        except EntryError as exc:
            raise _bad(f"{path}:{number}: {exc}") from None
        problem = _range_problem(entry)
        if problem is not None:
            raise _bad(f"{path}:{number}: field 'value': {problem}")
        first = seen.setdefault(entry.key, number)
        if first != number:
            raise _bad(f"{path}:{number}: key {entry.key} is already on line {first}")
        entries.append(entry)
    return entries


def _range_problem(entry: Entry) -> str | None:
    """Why a score's value is outside the range of its scorer, when that scorer is one this
    process knows (the built-in ones; a project's own are checked when a run reads them)."""
    if "value" not in entry.value:
        return None
    from pytest_llmeval.core.errors import LLMEvalError
    from pytest_llmeval.engine.registry import default_registry

    try:
        lo, hi = default_registry.get(entry.scorer).score_range
    except LLMEvalError:
        return None
    value = float(entry.value["value"])
    if lo - 1e-9 <= value <= hi + 1e-9:
        return None
    return (
        f"'value' {entry.value['value']!r} is outside the range of scorer {entry.scorer} "
        f"[{lo}, {hi}]"
    )


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    entries = read_jsonl(Path(args.file))  # all lines checked before anything is written
    store = _open(args, create=True)
    try:
        written, present = store.write(entries, args.replace)
    finally:
        store.close()
    text = f"imported {_entries(written)} from {args.file} into {store.name}"
    if present:
        text += f"; {present} already there (kept; --replace overwrites them)"
    print(text, file=out)
    return 0


def cmd_push(args: argparse.Namespace, out: TextIO) -> int:
    url = args.url or env_value("llm_eval_cache_url")
    if not url:
        raise _bad("push needs the Redis store: --url redis://host:port/db (or LLM_EVAL_CACHE_URL)")
    local = _Sqlite(Path(args.dir))
    try:
        entries = [e for e, _k, _s in local.entries() if e is not None]
    finally:
        local.close()
    remote = _Redis(url, args.prefix, args.ttl)
    try:
        written, present = remote.write(entries, False)
    finally:
        remote.close()
    text = f"pushed {_entries(written)} to {remote.name}"
    if present:
        text += f"; {present} {'was' if present == 1 else 'were'} already there"
    print(text, file=out)
    return 0


# -- parser ------------------------------------------------------------------------------------


def _store_options(p: argparse.ArgumentParser, *, ttl: bool = False) -> None:
    p.add_argument(
        "--dir",
        default=DEFAULT_DIR,
        help=f"the local result cache directory (default {DEFAULT_DIR} of the current directory)",
    )
    p.add_argument(
        "--url",
        help="a Redis store instead: redis://host:port/db or rediss:// (password in the URL or "
        "LLM_EVAL_REDIS_PASSWORD)",
    )
    p.add_argument(
        "--prefix", default=DEFAULT_PREFIX, help=f"key prefix in Redis (default {DEFAULT_PREFIX})"
    )
    if ttl:
        p.add_argument("--ttl", type=int, help="expire entries written to Redis after N seconds")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit is status 2 as well
        raise _bad(f"{self.prog}: {message}\n{self.format_usage().rstrip()}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m pytest_llmeval cache",
        description="Inspect and move the result cache (local SQLite or Redis).",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("stats", help="entries by scorer, version and judge model; size; age")
    _store_options(p)
    p = sub.add_parser("prune", help="remove entries by age and/or scorer version")
    _store_options(p)
    p.add_argument("--older-than", metavar="AGE", help="recorded more than AGE ago: 30d, 12h")
    p.add_argument("--scorer", metavar="NAME", help="only entries of this scorer")
    p.add_argument("--below-version", metavar="N", help="with --scorer: versions below N")
    p.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    p = sub.add_parser("export", help="write entries as JSONL (one entry a line)")
    _store_options(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE, or - for stdout")
    p.add_argument("--scorer", metavar="NAME", help="only entries of this scorer")
    p = sub.add_parser("import", help="add the entries of a JSONL export")
    _store_options(p, ttl=True)
    p.add_argument("file", metavar="FILE")
    p.add_argument("--replace", action="store_true", help="overwrite entries already there")
    p = sub.add_parser("push", help="copy the local entries to Redis (existing ones are kept)")
    _store_options(p, ttl=True)
    return parser


_COMMANDS = {
    "stats": cmd_stats,
    "prune": cmd_prune,
    "export": cmd_export,
    "import": cmd_import,
    "push": cmd_push,
}


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    try:
        try:
            args = _parser().parse_args(list(argv))
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        return _COMMANDS[args.command](args, out)
    except Problem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
