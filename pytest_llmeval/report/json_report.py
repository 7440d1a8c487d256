"""The JSON report: every record, per-scorer aggregates and run metadata, written atomically
(:class:`JsonWriter`, from a :class:`~pytest_llmeval.report.view.RunView`)."""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.files import report_chunks, report_target, write_chunks_atomic
from pytest_llmeval.core.model import REPORT_VERSION
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.core.version import DISTRIBUTION
from pytest_llmeval.report.view import _document, report_json

if TYPE_CHECKING:
    from pytest_llmeval.analysis.gates import GateOutcome, TestStatistics
    from pytest_llmeval.analysis.verdict import Verdict
    from pytest_llmeval.core.model import Run
    from pytest_llmeval.report.view import RunView

__all__ = [
    "REPORT_VERSION",
    "JsonWriter",
    "build_report",
    "git_commit",
    "report_json",
    "run_section",
    "write_report",
]


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

    from pytest_llmeval.core.version import __version__

    # our own version comes from the code that is running, never from distribution metadata
    # looked up by name (an editable or renamed install may not match the imported module)
    out = {"python": platform.python_version(), DISTRIBUTION: __version__}
    for dist in ("pytest", "pytest-xdist", "openai"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def run_section(
    records: Sequence[ScoreRecord],
    *,
    started: float,
    settings: Settings | None,
    rootdir: Path,
    exitstatus: int,
    workers: int = 0,
) -> dict[str, Any]:
    """The report's ``run`` section: times, exit status, versions, platform, git commit, xdist
    workers and (with ``settings``) the cache mode and the judge, its URL with the credentials
    masked. The finish time is now."""
    finished = time.time()
    info: dict[str, Any] = {
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
        info["cache_mode"] = settings.cache_mode
        info["judge"] = {
            **settings.judge.identity(),
            "base_url": settings.judge.shown_base_url,  # credentials masked
            # what the endpoint said answered: a local server may ignore the model asked for
            "served_models": sorted({m for r in records for m in r.judge_models}),
        }
    return info


def build_report(
    records: Sequence[ScoreRecord],
    *,
    started: float,
    settings: Settings | None,
    rootdir: Path,
    exitstatus: int,
    workers: int = 0,
    run: Run | None = None,
    outcomes: Sequence[GateOutcome] = (),
    statistics: Sequence[TestStatistics] = (),
    verdict: Verdict | None = None,
    comparison: Mapping[str, Any] | None = None,
    shard: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report as a JSON-safe dict. No secret ever enters it: the API key is not read, the
    judge URL is shown with its credentials masked, and record errors were redacted when made.

    With ``run`` (the run's :class:`~pytest_llmeval.core.model.Run`) the report carries what the run
    is read back from (records, instruments, plan, collected tests, verdict settings), its gate
    outcomes, statistics and verdict, so that ``merge`` and ``compare`` rebuild the same run. In
    a shard (``shard``: its section) each gate's verdict is ``partial`` (its own is kept as
    ``shard_verdict``). A run's writers build it from their view (:func:`report_json`)."""
    info = run_section(
        records,
        started=started,
        settings=settings,
        rootdir=rootdir,
        exitstatus=exitstatus,
        workers=workers,
    )
    return _document(records, info, run, outcomes, statistics, verdict, comparison, shard)


@final
class JsonWriter:
    """``--llm-eval-report PATH`` / ``merge -o PATH``: the view's JSON document, atomically."""

    name = "JSON"

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, view: RunView) -> None:
        write_report(self.path, view.file_document())


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` atomically (a temp file in the same folder, then rename).

    Raises OSError naming the path that is in the way when ``path`` is a directory or its folder
    is a file (see :func:`~pytest_llmeval.core.files.report_target`).
    """
    report_target(path)
    write_chunks_atomic(path, report_chunks(report))
