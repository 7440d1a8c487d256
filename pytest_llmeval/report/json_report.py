"""The JSON report: every record, per-scorer aggregates and run metadata, written atomically."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_llmeval.records import ScoreRecord, aggregate
from pytest_llmeval.settings import Settings

__all__ = ["REPORT_VERSION", "build_report", "git_commit", "write_report"]

REPORT_VERSION = 1


def git_commit(directory: Path) -> str | None:
    """The HEAD commit of the git checkout at ``directory``, or None."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text else None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for dist in ("pytest", "pytest-llmeval", "pytest-xdist", "openai"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def build_report(
    records: Sequence[ScoreRecord],
    *,
    started: float,
    settings: Settings | None,
    rootdir: Path,
    exitstatus: int,
    workers: int = 0,
) -> dict[str, Any]:
    """The report as a JSON-safe dict. No secret ever enters it (the API key is not read)."""
    finished = time.time()
    run: dict[str, Any] = {
        "started": started,
        "finished": finished,
        "duration_s": finished - started,
        "exitstatus": exitstatus,
        "versions": _versions(),
        "platform": sys.platform,
        "git_commit": git_commit(rootdir),
        "workers": workers,
    }
    if settings is not None:
        run["cache_mode"] = settings.cache_mode
        run["judge"] = {
            **settings.judge.identity(),
            "base_url": settings.judge.base_url,
            # what the endpoint said answered: a local server may ignore the model asked for
            "served_models": sorted({m for r in records for m in r.judge_models}),
        }
    return {
        "version": REPORT_VERSION,
        "run": run,
        "aggregates": {name: agg.to_json() for name, agg in aggregate(records).items()},
        "records": [r.to_json() for r in records],
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` atomically (a temp file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, sort_keys=False, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
