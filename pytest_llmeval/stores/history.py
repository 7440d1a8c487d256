"""The run history (issue 10): saved runs on disk, their summaries, and which run a baseline
names. Its options, the baseline resolved at configure time and the JUnit properties are the
pytest layer's (:mod:`pytest_llmeval.plugin.history`).

* **History.** On the xdist controller (or the only process), every ``--llm-eval`` run that
  scored something is saved as ``<cache dir>/runs/NNNN.json``: number, time, git commit, dirty
  flag and branch, judge settings and the run's JSON report. A number is claimed by creating
  ``NNNN.claim`` with ``O_CREAT | O_EXCL`` (a collision means another run took it: try the next),
  the file is written to a temporary name and renamed into place, so a reader never sees half a
  run and concurrent runs never overwrite each other. ``--llm-eval-history N`` keeps the last N.
* **Baseline.** ``--llm-eval-baseline=last|NUMBER|PATH`` compares this run with a saved run or
  any JSON report, with :mod:`pytest_llmeval.analysis.compare`; the table follows the llm-eval
  summary. ``last`` is the newest saved run **that passed** (exit status 0, every gate passing, no
  significant regression against its own baseline, not a shard): a failing run never becomes the
  reference, so re-running a regressed commit keeps failing; the choice, and the runs passed
  over, are shown. Pruning never deletes that run. ``--llm-eval-fail-on-regression[=ALPHA]``
  turns a significant regression (or a comparison that cannot stand for "no regression") into
  exit status 1. The comparison itself runs in :mod:`pytest_llmeval.plugin.controller`.
* **JUnit.** With ``--junitxml`` each test's scores become ``llm_eval:<scorer>`` properties, set on
  the process that ran the test, so they cross xdist with the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmeval.core.errors import BaselineError
from pytest_llmeval.core.files import report_chunks, write_chunks_atomic, write_text_atomic
from pytest_llmeval.core.model import RUN_FORMAT

__all__ = [
    "BaselineChoice",
    "baseline_refusal",
    "list_runs",
    "load_run",
    "newest_passing",
    "prune_runs",
    "resolve_baseline",
    "run_summary",
    "runs_dir",
    "save_run",
]

RUN_VERSION = 1
DEFAULT_KEEP = 100
_RUN_NAME = re.compile(r"^(\d+)\.(json|claim)$")
_MAX_CLAIM_TRIES = 1000


# -- the store ---------------------------------------------------------------------------------


def runs_dir(cache_dir: Path) -> Path:
    return cache_dir / "runs"


def _numbers(directory: Path, kinds: tuple[str, ...] = ("json",)) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = _RUN_NAME.match(name)
        if m and m.group(2) in kinds:
            out.append(int(m.group(1)))
    return sorted(set(out))


def list_runs(directory: Path) -> list[int]:
    """The numbers of the saved runs in ``directory``, oldest first."""
    return _numbers(directory)


def run_path(directory: Path, number: int) -> Path:
    return directory / f"{number:04d}.json"


def load_run(directory: Path, number: int) -> dict[str, Any]:
    """Saved run ``number``, read and validated (RunFileError names the file and field)."""
    from pytest_llmeval.stores.run_files import read_json, validate_report

    path = run_path(directory, number)
    data = read_json(path)
    validate_report(data, str(path))
    return dict(data)


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_info(directory: Path) -> dict[str, Any]:
    """Commit, dirty flag (tracked files changed; untracked files do not count) and branch."""
    commit = _git(["rev-parse", "HEAD"], directory)
    if commit is None:
        return {"commit": None, "dirty": None, "branch": None}
    status = _git(["status", "--porcelain", "--untracked-files=no"], directory)
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], directory)
    return {
        "commit": commit.strip() or None,
        "dirty": None if status is None else bool(status.strip()),
        "branch": None if branch is None else (branch.strip() or None),
    }


def save_run(
    directory: Path,
    report: dict[str, Any],
    extra: dict[str, Any] | None = None,
    summary: dict[str, Any] | None = None,
) -> int:
    """Save ``report`` as the next numbered run in ``directory``; return its number.

    The number is claimed with an ``O_EXCL`` marker file (checked against saved runs and other
    claims), the run is written to a temporary file and renamed onto its number, then the marker
    is removed. A crash in between leaves a marker, and that number is simply skipped.
    ``summary`` (see :func:`run_summary`) goes to ``NNNN.summary.json`` beside it, so that
    choosing the baseline reads a few bytes per run, not every report.
    """
    directory.mkdir(parents=True, exist_ok=True)
    number = (max(_numbers(directory, ("json", "claim")), default=0)) + 1
    for _ in range(_MAX_CLAIM_TRIES):
        claim = directory / f"{number:04d}.claim"
        if run_path(directory, number).exists():
            number += 1
            continue
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            number += 1
            continue
        os.close(fd)
        # Another run may have claimed this number, saved it and removed its claim between the
        # check above and our claim: with the claim held, that run's file is there if it exists.
        if run_path(directory, number).exists():
            os.unlink(claim)
            number += 1
            continue
        break
    else:  # pragma: no cover - a thousand concurrent runs
        raise OSError(f"could not claim a run number in {directory}")
    now = time.time()
    run = {
        "format": RUN_FORMAT,
        "version": RUN_VERSION,
        "number": number,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "timestamp": now,
        **(extra or {}),
        "report": report,
    }
    try:
        # the report laid out like a JSON report (a record per line), written as it is made
        write_chunks_atomic(run_path(directory, number), report_chunks(run, nested=("report",)))
    finally:
        try:
            os.unlink(claim)
        except OSError:
            pass
    if summary is not None:
        _write_atomic(summary_path(directory, number), {**summary, "number": number})
    return number


def summary_path(directory: Path, number: int) -> Path:
    return directory / f"{number:04d}.summary.json"


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, allow_nan=False))


def prune_runs(directory: Path, keep: int) -> list[int]:
    """Delete all but the ``keep`` newest saved runs, and never a run that ``last`` names for
    some selection of tests (a streak of failing runs must not prune the baseline away and
    leave nothing to compare with); return the numbers deleted."""
    numbers = list_runs(directory)
    gone = numbers[: max(0, len(numbers) - keep)]
    if gone:
        selections: list[Any] = [None]
        for n in numbers:
            info = _summary(directory, n)
            if info is not None and info.get("selection") not in selections:
                selections.append(info.get("selection"))
        kept = {newest_passing(directory, sel).number for sel in selections}
        gone = [n for n in gone if n not in kept]
    for n in gone:
        for path in (run_path(directory, n), summary_path(directory, n)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # a concurrent prune got there first
    return gone


def baseline_refusal(data: Any) -> str | None:
    """Why a saved run cannot be the baseline ``last`` names, or None when it can: a shard (its
    gates were partial), a run that failed (its recorded verdict, or for runs saved before
    verdicts were recorded its exit status and its comparison), a run with a significant
    regression against its own baseline."""
    report = data.get("report") if isinstance(data, dict) else None
    if not isinstance(report, dict):
        return "not a saved run"
    if isinstance(report.get("shard"), dict):
        return "a shard (its gates were partial)"
    verdict = report.get("verdict")
    if isinstance(verdict, dict):
        if not verdict.get("passed"):
            failures = verdict.get("failures") or []
            return "failed" + (f": {failures[0]}" if failures else "")
        if verdict.get("regressions"):
            return "had a significant regression"
        return None
    run = report.get("run")
    status = run.get("exitstatus") if isinstance(run, dict) else None
    if status not in (0, 5, None):
        return f"failed (exit status {status})"
    cmp = data.get("comparison") or report.get("comparison")
    if isinstance(cmp, dict):
        for entry in [*(cmp.get("scorers") or []), *(cmp.get("gates") or [])]:
            if isinstance(entry, dict) and entry.get("verdict") == "regressed":
                return "had a significant regression"
    return None


@dataclass(frozen=True)
class BaselineChoice:
    """The run ``--llm-eval-baseline`` names: its file (None: nothing to compare with), its
    label, how it was chosen, and the saved runs passed over (number, why)."""

    spec: str
    path: Path | None
    label: str
    choice: str
    passed_over: tuple[tuple[int, str], ...] = ()
    number: int | None = None


def run_summary(
    verdict: Any, comparison: Any, selection: dict[str, Any] | None, shard: bool
) -> dict[str, Any]:
    """What choosing a baseline needs to know of a saved run: whether it passed, whether it was
    *checked* (compared with a baseline, no regression, nothing that kept the comparison from
    standing for 'no regression'), and which tests it selected."""
    problems = comparison.problems() if comparison is not None else []
    regressions = len(comparison.regressions) if comparison is not None else 0
    failures = list(verdict.failures) if verdict is not None else []
    return {
        "passed": bool(verdict is not None and verdict.passed),
        "failure": failures[0] if failures else None,
        "checked": comparison is not None and not regressions and not problems,
        "regressions": regressions,
        "problems": len(problems),
        "shard": shard,
        "selection": selection,
    }


def _summary(directory: Path, number: int) -> dict[str, Any] | None:
    """A saved run's summary, validated (None when it has none or it is not a valid one)."""
    from pytest_llmeval.stores.run_files import loads_strict

    try:
        data = loads_strict(summary_path(directory, number).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kinds = {"passed": bool, "checked": bool, "shard": bool, "regressions": int, "problems": int}
    if not isinstance(data, dict) or data.get("number") != number:
        return None
    if not all(isinstance(data.get(k), t) for k, t in kinds.items()):
        return None
    if data.get("selection") is not None and not isinstance(data.get("selection"), dict):
        return None
    return data


def _legacy_summary(data: dict[str, Any]) -> dict[str, Any]:
    """The summary of a run saved before summaries were (from the run itself)."""
    why = baseline_refusal(data)
    report = data.get("report") or {}
    return {
        "passed": why is None or why == "had a significant regression",
        "checked": isinstance(data.get("comparison") or report.get("comparison"), dict)
        and why is None,
        "regressions": 1 if why == "had a significant regression" else 0,
        "problems": 0,
        "shard": isinstance(report.get("shard"), dict),
        "selection": None,
        "why": why,
    }


def _refusal(info: dict[str, Any]) -> str | None:
    if info.get("why"):
        return str(info["why"])
    if info["shard"]:
        return "a shard (its gates were partial)"
    if not info["passed"]:
        failure = info.get("failure")
        return "failed" + (f": {failure}" if isinstance(failure, str) else "")
    if info["regressions"]:
        return "had a significant regression"
    if info["problems"]:
        return "its comparison could not stand for 'no regression'"
    return None


def newest_passing(directory: Path, selection: dict[str, Any] | None = None) -> BaselineChoice:
    """The baseline ``last`` names: among the saved runs of the same ``selection`` that passed,
    the newest one that was itself checked against a baseline, else (no run was ever checked)
    the first one that passed: a run that was never checked (a regressed commit run once
    without a baseline) cannot become the reference after the first. Runs passed over on the
    way are named with why (a file that does not read or validate too)."""
    from pytest_llmeval.core.model import RunFileError

    skipped: list[tuple[int, str]] = []
    unchecked: list[int] = []  # passing, never checked, newest first
    for number in reversed(list_runs(directory)):
        info = _summary(directory, number)
        if info is None:
            try:
                info = _legacy_summary(load_run(directory, number))
            except RunFileError as exc:
                skipped.append((number, f"unreadable: {exc.problem}"))
                continue
        why = _refusal(info)
        theirs = info.get("selection")
        if why is None and None not in (theirs, selection) and theirs != selection:
            why = "another selection of tests (paths, -k, -m, --deselect, --lf)"
        if why is not None:
            skipped.append((number, why))
            continue
        if not info["checked"]:
            unchecked.append(number)
            continue
        for n in unchecked:
            skipped.append((n, "never checked against a baseline"))
        return _choice(directory, number, "the newest saved run that passed its check", skipped)
    if unchecked:
        first = unchecked[-1]
        for n in unchecked[:-1]:
            skipped.append((n, "never checked against a baseline"))
        return _choice(directory, first, "the first saved run that passed", skipped)
    choice = "no saved run passed yet" if skipped else "no saved run yet"
    return BaselineChoice("last", None, "none", choice, tuple(sorted(skipped, reverse=True)))


def _choice(
    directory: Path, number: int, how: str, skipped: list[tuple[int, str]]
) -> BaselineChoice:
    return BaselineChoice(
        "last",
        run_path(directory, number),
        f"run {number}",
        how,
        tuple(sorted(skipped, reverse=True)),
        number,
    )


def resolve_baseline(
    spec: str,
    directory: Path,
    invocation_dir: Path,
    selection: dict[str, Any] | None = None,
) -> BaselineChoice:
    """What a ``--llm-eval-baseline`` value names: ``last`` (see :func:`newest_passing`; no
    path when no run can be it), a saved run's number, or a path to a saved run or JSON report.
    Raises :class:`BaselineError` for a number or path that names no file."""
    if spec == "last":
        return newest_passing(directory, selection)
    if spec.isdigit():
        path = run_path(directory, int(spec))
        if not path.is_file():
            saved = list_runs(directory)
            have = f"saved runs: {saved[0]}..{saved[-1]}" if saved else "no run is saved yet"
            raise BaselineError(
                f"--llm-eval-baseline={spec}: no saved run {int(spec)} in {directory} ({have})"
            )
        return BaselineChoice(spec, path, f"run {int(spec)}", "given by number", (), int(spec))
    path = Path(spec)
    if not path.is_absolute():
        path = invocation_dir / path
    if not path.is_file():
        raise BaselineError(
            f"--llm-eval-baseline={spec}: {path} is not a file; give 'last', a saved run's "
            "number or the path of a JSON report"
        )
    return BaselineChoice(spec, path, spec, "given by path")
