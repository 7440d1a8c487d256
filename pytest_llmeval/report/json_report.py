"""The JSON report: every record, per-scorer aggregates and run metadata, written atomically
(:class:`JsonWriter`, from a :class:`~pytest_llmeval.report.view.RunView`)."""

from __future__ import annotations

import errno
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.model import REPORT_VERSION
from pytest_llmeval.records import ScoreRecord, aggregate
from pytest_llmeval.settings import Settings

if TYPE_CHECKING:
    from pytest_llmeval.gates import GateOutcome, TestStatistics
    from pytest_llmeval.model import Run
    from pytest_llmeval.report.view import RunView
    from pytest_llmeval.verdict import Verdict

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


#: This project's distribution name. ``pytest-llmeval`` on PyPI is another project that ships a
#: module of the same name, so its metadata says nothing about the code that ran.
DISTRIBUTION = "pytest-llmeval-suite"


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from pytest_llmeval import __version__

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

    With ``run`` (the run's :class:`~pytest_llmeval.model.Run`) the report carries what the run
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


def _document(
    records: Sequence[ScoreRecord],
    info: Mapping[str, Any],
    run: Run | None,
    outcomes: Sequence[GateOutcome],
    statistics: Sequence[TestStatistics],
    verdict: Verdict | None,
    comparison: Mapping[str, Any] | None,
    shard: Mapping[str, Any] | None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "run": dict(info),
        "aggregates": {name: agg.to_json() for name, agg in aggregate(records).items()},
        "records": [r.to_json() for r in records],
    }
    if run is None:
        return report
    inputs = run.input_json()
    del inputs["records"]  # the same records, already in
    report.update(inputs)
    gates = [o.to_json() for o in outcomes]
    if shard is not None:
        for gate in gates:
            gate["shard_verdict"] = gate.get("verdict")
            gate["verdict"] = "partial"
    report["gates"] = gates
    report["gates_unmatched"] = [
        o.test for o in outcomes if o.result is None and o.problem and "matched no" in o.problem
    ]
    report["gate_policy"] = {
        "inconclusive": run.settings.inconclusive,
        "skipped": run.settings.skipped,
    }
    report["statistics"] = [t.to_json() for t in statistics]
    if verdict is not None:
        report["verdict"] = {**verdict.to_json(), "pytest_exitstatus": run.exitstatus}
    if comparison is not None:
        report["comparison"] = dict(comparison)
    if shard is not None:
        report["shard"] = dict(shard)
    return report


def report_json(view: RunView) -> dict[str, Any]:
    """The JSON report of a run's view: its ``run`` section is ``view.run.info``; the
    comparison carries the baseline's side of every matched case
    (:func:`pytest_llmeval.compare.comparison_json`), or the error that kept the baseline from
    being used; a merged run lists its shards under ``merged``."""
    comparison: dict[str, Any] | None = None
    base = view.baseline
    if view.comparison is not None and base is not None and base.run is not None:
        from pytest_llmeval.compare import comparison_json

        comparison = comparison_json(
            view.comparison, base.run, view.run, path=base.path, choice=base.choice
        )
    elif base is not None and base.problem is not None:
        comparison = {"error": base.problem}
    run = view.run
    report = _document(
        run.records,
        run.info,
        run,
        view.outcomes,
        view.statistics,
        view.verdict,
        comparison,
        view.shard_section,
    )
    if view.merged is not None:
        count, shards = view.merged
        report["merged"] = {"count": count, "shards": [s.to_json() for s in shards]}
    return report


@final
class JsonWriter:
    """``--llm-eval-report PATH`` / ``merge -o PATH``: the view's JSON document, atomically."""

    name = "JSON"

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, view: RunView) -> None:
        write_report(self.path, view.document)


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` atomically (a temp file in the same folder, then rename).

    Raises OSError naming the path that is in the way when ``path`` is a directory or its folder
    is a file (``mkdir`` alone would say "File exists", and ``rename`` would name the temp file).
    """
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        # the folder of the report exists but is not a directory
        raise NotADirectoryError(
            errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)
        ) from None
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
