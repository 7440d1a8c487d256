"""Run history, baseline comparison and JUnit properties (issue 10), as a pytest plugin module
registered by :mod:`pytest_llmeval.plugin`.

* **History.** On the xdist controller (or the only process), every ``--llm-eval`` run that
  scored something is saved as ``<cache dir>/runs/NNNN.json``: number, time, git commit, dirty
  flag and branch, judge settings and the run's JSON report. A number is claimed by creating
  ``NNNN.claim`` with ``O_CREAT | O_EXCL`` (a collision means another run took it: try the next),
  the file is written to a temporary name and renamed into place, so a reader never sees half a
  run and concurrent runs never overwrite each other. ``--llm-eval-history N`` keeps the last N.
* **Baseline.** ``--llm-eval-baseline=last|NUMBER|PATH`` compares this run with a saved run (the
  latest one before this run, or a number) or any JSON report, with :mod:`pytest_llmeval.compare`;
  the table follows the llm-eval summary. ``--llm-eval-fail-on-regression[=ALPHA]`` turns a
  significant regression into exit status 1.
* **JUnit.** With ``--junitxml`` each test's scores become ``llm_eval:<scorer>`` properties, set on
  the process that ran the test, so they cross xdist with the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "list_runs",
    "load_run",
    "prune_runs",
    "resolve_baseline",
    "runs_dir",
    "save_run",
]

RUN_FORMAT = "pytest-llmeval-run"
RUN_VERSION = 1
DEFAULT_KEEP = 100
_RUN_NAME = re.compile(r"^(\d+)\.(json|claim)$")
_MAX_CLAIM_TRIES = 1000

_state_key = pytest.StashKey[dict[str, Any]]()


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
    from pytest_llmeval.compare import load_report

    return load_report(run_path(directory, number))


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


def save_run(directory: Path, report: dict[str, Any], extra: dict[str, Any] | None = None) -> int:
    """Save ``report`` as the next numbered run in ``directory``; return its number.

    The number is claimed with an ``O_EXCL`` marker file (checked against saved runs and other
    claims), the run is written to a temporary file and renamed onto its number, then the marker
    is removed. A crash in between leaves a marker, and that number is simply skipped.
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
    fd, tmp = tempfile.mkstemp(prefix=f".{number:04d}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(run, fh, indent=1, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, run_path(directory, number))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        try:
            os.unlink(claim)
        except OSError:
            pass
    return number


def prune_runs(directory: Path, keep: int) -> list[int]:
    """Delete all but the ``keep`` newest saved runs; return the numbers deleted."""
    numbers = list_runs(directory)
    gone = numbers[: max(0, len(numbers) - keep)]
    for n in gone:
        try:
            run_path(directory, n).unlink()
        except FileNotFoundError:
            pass  # a concurrent prune got there first
    return gone


def resolve_baseline(spec: str, directory: Path, invocation_dir: Path) -> Path | None:
    """The file a ``--llm-eval-baseline`` value names: ``last`` (None when nothing is saved),
    a saved run's number, or a path to a saved run or JSON report. Raises UsageError."""
    if spec == "last":
        numbers = list_runs(directory)
        return run_path(directory, numbers[-1]) if numbers else None
    if spec.isdigit():
        path = run_path(directory, int(spec))
        if not path.is_file():
            saved = list_runs(directory)
            have = f"saved runs: {saved[0]}..{saved[-1]}" if saved else "no run is saved yet"
            raise pytest.UsageError(
                f"--llm-eval-baseline={spec}: no saved run {int(spec)} in {directory} ({have})"
            )
        return path
    path = Path(spec)
    if not path.is_absolute():
        path = invocation_dir / path
    if not path.is_file():
        raise pytest.UsageError(
            f"--llm-eval-baseline={spec}: {path} is not a file; give 'last', a saved run's "
            "number or the path of a JSON report"
        )
    return path


# -- options -----------------------------------------------------------------------------------


def _alpha(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 0.05)") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be strictly between 0 and 1")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llm-eval")
    group.addoption(
        "--llm-eval-no-history",
        action="store_true",
        default=None,
        dest="llm_eval_no_history",
        help="do not save this run under <cache dir>/runs/",
    )
    group.addoption(
        "--llm-eval-history",
        type=int,
        default=None,
        dest="llm_eval_history",
        metavar="N",
        help=f"saved runs to keep (the newest N; default {DEFAULT_KEEP}; 0 saves none)",
    )
    parser.addini(
        "llm_eval_history",
        f"saved runs to keep under <cache dir>/runs/ (default {DEFAULT_KEEP}; 0 saves none)",
        type="string",
        default=None,
    )
    group.addoption(
        "--llm-eval-baseline",
        default=None,
        dest="llm_eval_baseline",
        metavar="last|NUMBER|PATH",
        help="compare this run with a saved run (the last one, or its number) or a JSON report",
    )
    group.addoption(
        "--llm-eval-fail-on-regression",
        nargs="?",
        const=0.05,
        default=None,
        type=_alpha,
        dest="llm_eval_fail_on_regression",
        metavar="ALPHA",
        help="with --llm-eval-baseline: exit non-zero when a scorer's mean gets worse with "
        "p < ALPHA (default 0.05; write --llm-eval-fail-on-regression=0.01)",
    )


def _keep(config: pytest.Config) -> int:
    if config.getoption("llm_eval_no_history", default=None):
        return 0
    value = config.getoption("llm_eval_history", default=None)
    if value is None:
        raw = config.getini("llm_eval_history")
        if raw in (None, ""):
            return DEFAULT_KEEP
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise pytest.UsageError(
                f"ini llm_eval_history: {raw!r} is not a whole number of runs"
            ) from None
    if value < 0:
        raise pytest.UsageError("--llm-eval-history must be >= 0 (0 saves no run)")
    return int(value)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_llmeval.plugin import _enabled, _is_worker

    if _is_worker(config):
        return
    keep = _keep(config)
    alpha = config.getoption("llm_eval_fail_on_regression", default=None)
    spec = config.getoption("llm_eval_baseline", default=None)
    if alpha is not None and spec is None:
        raise pytest.UsageError(
            "--llm-eval-fail-on-regression needs a baseline: add --llm-eval-baseline=last "
            "(or a saved run's number, or a JSON report)"
        )
    state: dict[str, Any] = {"keep": keep, "alpha": alpha, "enabled": _enabled(config)}
    if spec is not None and state["enabled"]:
        directory = runs_dir(_cache_dir(config))
        # Resolved now: "last" is the latest run saved before this one.
        state["baseline"] = resolve_baseline(
            str(spec), directory, Path(config.invocation_params.dir)
        )
        state["baseline_spec"] = str(spec)
    config.stash[_state_key] = state


def _cache_dir(config: pytest.Config) -> Path:
    from pytest_llmeval.plugin import context_key

    ctx = config.stash.get(context_key, None)
    if ctx is not None:
        return Path(ctx.settings.cache_dir)
    from pytest_llmeval.plugin import build_settings

    return Path(build_settings(config).cache_dir)


def pytest_llmeval_update_json_report(config: pytest.Config, report: dict[str, Any]) -> None:
    """Keep the JSON report the run writes (the saved run is that same report), and put the
    comparison with the baseline in it, so that the JSON and HTML reports show it too."""
    state = config.stash.get(_state_key, None)
    if state is None:
        return
    state["report"] = report
    wanted = state["enabled"] and "baseline" in state and "comparison" not in state
    if wanted and report.get("records"):
        _compare(config, state, report)
    if "comparison" in state:
        report["comparison"] = _report_comparison(state, report)


def _current_report(config: pytest.Config, exitstatus: int) -> dict[str, Any] | None:
    from pytest_llmeval.plugin import _worker_count, context_key, session_key

    state = config.stash[_state_key]
    if "report" in state:
        report: dict[str, Any] = state["report"]
        return report
    session = config.stash.get(session_key, None)
    if session is None or not session.records:
        return None
    from pytest_llmeval.report.json_report import build_report

    ctx = config.stash.get(context_key, None)
    report = build_report(
        session.sorted_records(),
        started=session.started,
        settings=ctx.settings if ctx else None,
        rootdir=config.rootpath,
        exitstatus=exitstatus,
        workers=_worker_count(config),
    )
    config.hook.pytest_llmeval_update_json_report(config=config, report=report)
    return report


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller side, after the JSON report is written: compare with the baseline, save the
    run, prune old runs, and fail the run on a significant regression when asked to."""
    config = session.config
    state = config.stash.get(_state_key, None)
    if state is None or not state["enabled"]:
        return
    want_compare = "baseline" in state
    if not want_compare and state["keep"] == 0:
        return
    report = _current_report(config, int(exitstatus))
    if report is None or not report.get("records"):
        return
    if want_compare and "comparison" not in state and "compare_note" not in state:
        _compare(config, state, report)
    if state["keep"] > 0:
        directory = runs_dir(_cache_dir(config))
        judge = report.get("run", {}).get("judge")
        extra: dict[str, Any] = {"git": git_info(config.rootpath), "judge": judge}
        if "comparison" in state:
            extra["comparison"] = state["comparison"].to_json()
        try:
            state["saved"] = save_run(directory, report, extra)
            prune_runs(directory, state["keep"])
        except OSError as exc:
            state["save_error"] = f"{directory}: {exc}"
    regressions = state.get("regressions")
    from pytest_llmeval.shard import shard_of

    # a shard compared only its cases: partial, not the verdict (merge decides)
    fails = regressions and state["alpha"] is not None and shard_of(config) is None
    if fails and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _compare(config: pytest.Config, state: dict[str, Any], report: dict[str, Any]) -> None:
    from pytest_llmeval.compare import ComparisonError, compare_reports, load_report

    path: Path | None = state["baseline"]
    if path is None:
        state["compare_note"] = (
            f"--llm-eval-baseline={state['baseline_spec']}: no saved run yet; nothing compared "
            "(this run becomes the baseline)"
        )
        return
    try:
        baseline = load_report(path)
    except ComparisonError as exc:
        raise pytest.UsageError(f"--llm-eval-baseline: {exc}") from None
    label = f"run {baseline['number']}" if "number" in baseline else state["baseline_spec"]
    alpha = state["alpha"] if state["alpha"] is not None else 0.05
    cmp = compare_reports(
        baseline, report, alpha=alpha, baseline_label=label, current_label="this run"
    )
    state["comparison"] = cmp
    state["regressions"] = cmp.regressions
    state["baseline_report"] = baseline
    state["baseline_path"] = str(path)


def _record_key(r: Any) -> tuple[Any, ...]:
    return (
        r.get("file"),
        r.get("test"),
        r.get("case_id"),
        r.get("scorer"),
        r.get("index", 0),
        r.get("sample", 0) or 0,
    )


def _report_comparison(state: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The comparison as the JSON and HTML reports carry it: the comparison's own JSON, each
    scorer also under ``scorer``, the baseline run's metadata, and for every current record
    matched in the baseline the baseline's side of it (score, verdict, rationale, judged
    inputs), so a report can show both outputs and the change per case."""
    out: dict[str, Any] = state["comparison"].to_json()
    for entry in (*out.get("scorers", []), *out.get("gates", [])):
        entry.setdefault("scorer", entry.get("name"))
    baseline: dict[str, Any] = state.get("baseline_report") or {}
    nested = baseline.get("report")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else baseline
    run_meta = inner.get("run")
    run: dict[str, Any] = run_meta if isinstance(run_meta, dict) else {}
    out["baseline_label"] = out.get("baseline")
    out["baseline"] = {
        "label": out["baseline_label"],
        "path": state.get("baseline_path"),
        "git_commit": run.get("git_commit"),
        "started": run.get("started"),
    }
    by_key = {_record_key(r): r for r in inner.get("records", []) if isinstance(r, dict)}
    cases = []
    for r in report.get("records", []):
        b = by_key.get(_record_key(r))
        if b is None:
            continue
        delta = None
        if isinstance(b.get("score"), (int, float)) and isinstance(r.get("score"), (int, float)):
            delta = r["score"] - b["score"]
        cases.append(
            {
                "key": list(_record_key(r)),
                "current": {
                    k: r.get(k) for k in ("file", "test", "case_id", "scorer", "index", "sample")
                },
                "baseline": {
                    k: b.get(k)
                    for k in (
                        "file",
                        "test",
                        "case_id",
                        "scorer",
                        "index",
                        "sample",
                        "score",
                        "passed",
                        "error",
                        "rationale",
                        "inputs",
                    )
                },
                "delta": delta,
            }
        )
    out["cases"] = cases
    return out


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Controller side: the comparison table after the llm-eval summary."""
    state = config.stash.get(_state_key, None)
    if state is None:
        return
    tr = terminalreporter
    if "compare_note" in state:
        tr.write_sep("=", "llm-eval comparison")
        tr.write_line(state["compare_note"], yellow=True)
    cmp = state.get("comparison")
    if cmp is not None:
        from pytest_llmeval.compare import format_comparison
        from pytest_llmeval.shard import shard_of

        tr.write_sep("=", "llm-eval comparison")
        for line in format_comparison(cmp):
            tr.write_line(line, red="REGRESSED" in line)
        for s in cmp.regressions:
            tr.write_line(
                f"regression: {s.name} mean {s.baseline_mean:.3f} -> {s.current_mean:.3f} "
                f"(p={s.p_value:.3g} < {cmp.alpha:g})"
                + (
                    "; failing the run (--llm-eval-fail-on-regression)"
                    if state["alpha"] and shard_of(config) is None
                    else "; partial (a shard): merge the shard reports for the verdict"
                    if state["alpha"]
                    else ""
                ),
                red=True,
                bold=True,
            )
        drops = [s for s in cmp.scorers if s.verdict == "worse-not-significant"]
        for s in drops:
            tr.write_line(
                f"{s.name}: got worse ({s.diff:+.4g}) but not significantly (p={s.p_value:.3g} "
                f">= {cmp.alpha:g}); not a regression",
                yellow=True,
            )
    if "saved" in state and config.get_verbosity() > 0:
        tr.write_line(f"llm-eval: saved run {state['saved']} in {runs_dir(_cache_dir(config))}")
    if "save_error" in state:
        tr.write_line(f"llm-eval: run not saved: {state['save_error']}", yellow=True)


# -- JUnit properties --------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Any process: with ``--junitxml``, the test's scores as ``llm_eval:<scorer>`` properties
    (``llm_eval:<scorer>#<i>`` for the i-th further assertion of one scorer), each with its bound
    as ``llm_eval:<scorer>:bound``, on the teardown report that junitxml reads."""
    report = yield
    if call.when != "teardown" or not item.config.getoption("xmlpath", default=None):
        return report
    from pytest_llmeval.plugin import recorder_key

    recorder = item.stash.get(recorder_key, None)
    if recorder is None or not recorder.records:
        return report
    props: list[tuple[str, object]] = []
    for r in recorder.records:
        name = f"llm_eval:{r.scorer}" + (f"#{r.index}" if r.index else "")
        sample = getattr(r, "sample", 0)
        if sample:
            name += f"@{sample}"
        value: object = f"error: {r.error}" if r.error is not None else r.score
        props.append((name, value))
        bound = " and ".join(
            b
            for b in (
                f">= {r.min:g}" if r.min is not None else "",
                f"<= {r.max:g}" if r.max is not None else "",
            )
            if b
        )
        if bound:
            props.append((f"{name}:bound", bound))
    report.user_properties = [*report.user_properties, *props]
    return report
