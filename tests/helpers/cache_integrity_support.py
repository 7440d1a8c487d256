"""Result cache hardening: odd strings in keys, read-only stores, corruption found after opening,
and replay misses that say which part of the key changed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest
from paths import ROOT

REPO = ROOT


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (saved runs live in its ``runs/`` folder) and its bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = tempfile.mkdtemp()
    try:
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", f"mount --bind -o ro {probe} {probe}"],
            capture_output=True,
            timeout=30,
        )
        return proc.returncode == 0
    finally:
        os.rmdir(probe)


needs_ro_mount = pytest.mark.skipif(
    not _can_mount_read_only(),
    reason="needs `unshare -m` and a read-only bind mount (root, CAP_SYS_ADMIN)",
)


def _under_read_only_mount(directory: Path, argv: list[str]) -> list[str]:
    """``argv`` run in a private mount namespace where ``directory`` is a read-only bind mount:
    nothing, root included, can write there (EROFS)."""
    quoted = " ".join(f"'{a}'" for a in argv)
    return [
        "unshare",
        "-m",
        "sh",
        "-c",
        f"mount --bind -o ro '{directory}' '{directory}' && "
        f"touch '{directory}/probe' 2>/dev/null && echo WRITABLE && exit 3; exec {quoted}",
    ]


def _set_values(db: Path, text: str) -> list[str]:
    """Overwrite every stored value with ``text`` (a tampered or damaged store); the keys."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE results SET value = ?", (text,))
    keys = [k for (k,) in conn.execute("SELECT key FROM results ORDER BY key")]
    conn.close()
    return keys


BAD_VALUES = [
    pytest.param('{"value": 100}', "100 is outside", id="out-of-range-int"),
    pytest.param('{"value": 5.0, "rationale": "x"}', "5.0 is outside", id="out-of-range-float"),
    pytest.param('{"value": 1e300}', "1e+300 is outside", id="absurd"),
    pytest.param('{"value": -0.5}', "-0.5 is outside", id="negative"),
    pytest.param('{"value": "1"}', "'value' is str '1', not a number", id="string"),
    pytest.param('{"value": true}', "'value' is bool True, not a number", id="bool"),
    pytest.param('{"value": NaN}', "NaN", id="nan"),
    pytest.param('{"value": Infinity}', "Infinity", id="infinity"),
    pytest.param('{"value": 1e999}', "not a finite number", id="overflow"),
    pytest.param('{"rationale": "no value"}', "'value' is missing", id="missing"),
    pytest.param('{"value": 1.0, "metadata": "x"}', "'metadata' is str", id="metadata"),
    pytest.param(
        '{"value": 1.0, "metadata": {"unreached": true}}', "'unreached'", id="reserved-metadata"
    ),
    pytest.param('{"value": 1.0, "usage": {"calls": -1}}', "'usage'", id="usage"),
    pytest.param(
        '{"value": 0.2, "metadata": {"a": ' + "[" * 400 + "]" * 400 + "}}",
        "'metadata' nests more than 32 levels deep",
        id="deep-metadata",
    ),
    pytest.param("[1.0]", "not a JSON object", id="not-an-object"),
    pytest.param('{"value": 1.0', "not JSON", id="truncated"),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested", id="deep"),
]
