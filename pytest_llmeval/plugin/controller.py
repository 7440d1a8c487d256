"""The controller side of a run (the xdist controller, or the only process), as one plugin object
registered by :mod:`pytest_llmeval.plugin` (like junitxml's ``LogXML``): it collects the score
records and instruments that teardown reports carry, and at the end of the session builds the
run's :class:`pytest_llmeval.core.model.Run` and decides everything from it with the same pure
functions ``merge`` and ``compare`` use: gates
(:func:`pytest_llmeval.analysis.gates.evaluate_gates`), statistics, the comparison with the baseline
(:func:`pytest_llmeval.analysis.compare.compare_runs`) and the verdict
(:func:`pytest_llmeval.analysis.verdict.decide`), which sets the exit status. Then it writes the
JSON and HTML reports, saves the run in the history, and prints the summary sections.

Hooks hold the order of things; the decisions are in the functions they call.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.core.model import Instrument, Run, RunFileError, RunSettings, sort_key
from pytest_llmeval.core.records import ScoreRecord

if TYPE_CHECKING:
    from pytest_llmeval.analysis.compare import Comparison
    from pytest_llmeval.analysis.gates import GateOutcome, TestStatistics
    from pytest_llmeval.analysis.verdict import Verdict
    from pytest_llmeval.plugin.plan import PlanTracker
    from pytest_llmeval.stores.history import BaselineChoice

__all__ = ["INSTRUMENTS_ATTR", "RECORDS_ATTR", "RunController"]

#: teardown report attribute: the test's score records, one JSON string
RECORDS_ATTR = "llm_eval_records"
#: teardown report attribute: JSON {digest: instrument} of instruments the process had not
#: shipped before (each crosses xdist once per worker)
INSTRUMENTS_ATTR = "llm_eval_instruments"


class RunController:
    """Controller side: see the module docstring."""

    def __init__(self, config: pytest.Config, tracker: PlanTracker) -> None:
        self.config = config
        self.tracker = tracker
        self.records: list[ScoreRecord] = []
        self.instruments: dict[str, Instrument] = {}
        self.started = time.time()
        #: where the JSON report went (set in pytest_sessionfinish, shown in the summary)
        self.report_path: Path | None = None
        #: why the JSON report could not be written (the OS error), or None
        self.report_error: str | None = None
        #: the same for the HTML report (--llm-eval-html)
        self.html_path: Path | None = None
        self.html_error: str | None = None
        # what the session decided
        self.run: Run | None = None
        self.outcomes: list[GateOutcome] = []
        self.statistics: list[TestStatistics] = []
        self.comparison: Comparison | None = None
        self.baseline: BaselineChoice | None = None
        self.baseline_run: Run | None = None
        self.baseline_problem: str | None = None
        self.verdict: Verdict | None = None
        self.saved: int | None = None
        self.save_error: str | None = None
        #: what keeps the run from being judged (each fails it): unreadable records or plan
        self.problems: list[str] = []
        self.judged = False

    # -- collecting -------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Controller side: the records and new instruments a teardown report carries."""
        payload = getattr(report, RECORDS_ATTR, None)
        shipped = getattr(report, INSTRUMENTS_ATTR, None)
        if not payload and not shipped:
            return
        try:
            records = [ScoreRecord.from_json(d) for d in json.loads(payload or "[]")]
            instruments = {
                digest: Instrument.from_json(digest, inst)
                for digest, inst in json.loads(shipped or "{}").items()
            }
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # A record dropped in silence could be the failing one: the run cannot be judged.
            self.problems.append(
                f"the score records sent with {report.nodeid} could not be read "
                f"({type(exc).__name__}: {exc}): the run cannot be judged without them"
            )
            return
        self.records.extend(records)
        for digest, inst in instruments.items():
            self.instruments.setdefault(digest, inst)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: give each worker the paths of the run's spend and rate files."""
        from pytest_llmeval.plugin.keys import (
            RATE_FILE_KEY,
            SPEND_FILE_KEY,
            rate_file_key,
            spend_key,
        )

        spend = self.config.stash.get(spend_key, None)
        if spend is not None:
            node.workerinput[SPEND_FILE_KEY] = str(spend.path)
        rate_file = self.config.stash.get(rate_file_key, None)
        if rate_file is not None:
            node.workerinput[RATE_FILE_KEY] = str(rate_file.path)

    def sorted_records(self) -> list[ScoreRecord]:
        # Reports arrive in completion order under xdist; sort for a stable output.
        return sorted(self.records, key=sort_key)

    # -- deciding ---------------------------------------------------------------------------

    def settings(self) -> RunSettings:
        from pytest_llmeval.plugin.history import history_key
        from pytest_llmeval.plugin.keys import gate_rules_key, verdict_policies_key

        policies = self.config.stash[verdict_policies_key]
        from pytest_llmeval.plugin.options import _enabled

        history = self.config.stash.get(history_key, None)
        # run gates are judged in evaluation runs only (a plain `pytest` has none to judge)
        rules = self.config.stash[gate_rules_key] if _enabled(self.config) else []
        return RunSettings(
            gate_rules=tuple(rules),
            inconclusive=policies.inconclusive,
            skipped=policies.skipped,
            fail_on_regression=history.alpha if history is not None else None,
            accept_incomparable=policies.accept_incomparable,
        )

    def build_run(self, session: pytest.Session) -> Run:
        """The session as a :class:`Run` (records sorted as every run sorts them)."""
        from pytest_llmeval.plugin.shard import shard_of

        stopped = bool(session.shouldstop or session.shouldfail)
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        records = tuple(self.sorted_records())
        used = {r.instrument for r in records}
        return Run(
            records=records,
            plan=self.tracker.test_plans(stopped=stopped, interrupted=interrupted),
            instruments={d: i for d, i in sorted(self.instruments.items()) if d in used},
            settings=self.settings(),
            collected=self.tracker.collected(),
            stopped=stopped or interrupted,
            shard=shard_of(self.config),
            exitstatus=int(session.exitstatus),
        )

    def _judge_nothing(self) -> bool:
        option = self.config.option
        return bool(
            getattr(option, "collectonly", False)
            or getattr(option, "setuponly", False)
            or getattr(option, "setupplan", False)
        )

    def _compare(self, run: Run) -> None:
        """The comparison with the baseline asked for (an unusable one is a problem the verdict
        reports, never a crash that loses the run's own results)."""
        from pytest_llmeval.analysis.compare import ComparisonError, compare_runs, refuse_shard
        from pytest_llmeval.plugin.history import history_key
        from pytest_llmeval.plugin.options import _enabled
        from pytest_llmeval.stores.run_files import load_run

        history = self.config.stash.get(history_key, None)
        choice = history.baseline if history is not None else None
        self.baseline = choice
        if choice is None or choice.path is None or not _enabled(self.config):
            return
        try:
            self.baseline_run = load_run(choice.path)[0]
            refuse_shard(self.baseline_run, str(choice.path))
        except (RunFileError, ComparisonError) as exc:
            self.baseline_problem = f"--llm-eval-baseline={choice.spec}: {exc}"
            self.baseline_run = None
            return
        alpha = run.settings.fail_on_regression
        self.comparison = compare_runs(
            self.baseline_run,
            run,
            alpha=0.05 if alpha is None else alpha,
            baseline_label=choice.label,
            current_label="this run",
            accept=run.settings.accept_incomparable,
            gates=self.outcomes,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Controller side: build the run, judge it (gates, statistics, comparison, verdict:
        the exit status), write the reports, save it in the history."""
        from pytest_llmeval.analysis.gates import dataset_statistics, evaluate_gates
        from pytest_llmeval.analysis.verdict import decide

        run = self.build_run(session)
        self.run = run
        if not self._judge_nothing():
            self.judged = True
            unreported = self.tracker.unreported()
            if unreported:
                self.problems.append(
                    f"{len(unreported)} selected llm_eval item(s) never reported (first: "
                    f"{unreported[0]}): the run ended before them (pytest.exit, -x, Ctrl-C or a "
                    "crashed worker), so it is incomplete"
                )
            self.outcomes = evaluate_gates(run)
            self.statistics = dataset_statistics(run)
            self._compare(run)
            self.verdict = decide(
                run,
                self.outcomes,
                self.comparison,
                baseline_problem=self.baseline_problem,
                problems=[*self.problems, *([self.tracker.error] if self.tracker.error else [])],
            )
            if self.verdict.exitstatus != session.exitstatus:
                session.exitstatus = self.verdict.exitstatus
        self._write_reports(session, run)

    def _report(self, session: pytest.Session, run: Run) -> dict[str, Any]:
        from pytest_llmeval.analysis.compare import comparison_json
        from pytest_llmeval.plugin.keys import context_key
        from pytest_llmeval.plugin.options import _worker_count
        from pytest_llmeval.plugin.shard import shard_section
        from pytest_llmeval.report.json_report import build_report

        ctx = self.config.stash.get(context_key, None)
        comparison = None
        if self.comparison is not None and self.baseline_run is not None:
            comparison = comparison_json(
                self.comparison,
                self.baseline_run,
                run,
                path=str(self.baseline.path) if self.baseline else None,
                choice=self.baseline.choice if self.baseline else None,
            )
        elif self.baseline_problem is not None:
            comparison = {"error": self.baseline_problem}
        report = build_report(
            run.records,
            started=self.started,
            settings=ctx.settings if ctx else None,
            rootdir=self.config.rootpath,
            exitstatus=int(session.exitstatus),
            workers=_worker_count(self.config),
            run=run,
            outcomes=self.outcomes,
            statistics=self.statistics,
            verdict=self.verdict,
            comparison=comparison,
            shard=shard_section(self.config, run),
        )
        self.config.hook.pytest_llmeval_update_json_report(config=self.config, report=report)
        return report

    def _write_reports(self, session: pytest.Session, run: Run) -> None:
        """Write the JSON report (and the HTML one) atomically, then save the run.

        A report that cannot be written (unwritable path, disk full) must not end the run with a
        traceback that swallows the summary: the summary is printed, then the error naming the
        path and the OS error, and the run exits non-zero (pytest's INTERNAL_ERROR status, 3,
        unless it already failed)."""
        from pytest_llmeval.plugin.history import history_key
        from pytest_llmeval.plugin.options import _enabled, _opt

        target = _opt(self.config, "llm_eval_report")
        html_target = _opt(self.config, "llm_eval_html")
        history = self.config.stash.get(history_key, None)
        save = (
            history is not None
            and history.keep > 0
            and _enabled(self.config)
            and bool(run.records)
            and self.judged
        )
        if not target and not html_target and not save:
            return
        report = self._report(session, run)
        base = Path(self.config.invocation_params.dir)  # an absolute target replaces base
        if target:
            from pytest_llmeval.report.json_report import write_report

            self.report_path = base / target
            self.report_error = self._write_one(
                session, "JSON", self.report_path, write_report, report
            )
        if html_target:
            from pytest_llmeval.report.html import write_html

            self.html_path = base / html_target
            self.html_error = self._write_one(session, "HTML", self.html_path, write_html, report)
        if save and history is not None:
            self._save(report, history.keep)

    def _save(self, report: dict[str, Any], keep: int) -> None:
        from pytest_llmeval.plugin.history import cache_dir, selection_of
        from pytest_llmeval.stores.history import (
            git_info,
            prune_runs,
            run_summary,
            runs_dir,
            save_run,
        )

        directory = runs_dir(cache_dir(self.config))
        extra: dict[str, Any] = {
            "git": git_info(self.config.rootpath),
            "judge": report.get("run", {}).get("judge"),
        }
        if self.comparison is not None:
            extra["comparison"] = self.comparison.to_json()
        summary = run_summary(
            self.verdict,
            self.comparison,
            selection_of(self.config),
            self.run is not None and self.run.shard is not None,
        )
        try:
            self.saved = save_run(directory, report, extra, summary)
            prune_runs(directory, keep)
        except OSError as exc:
            self.save_error = f"{directory}: {exc}"

    def _write_one(
        self, session: pytest.Session, kind: str, path: Path, write: Any, report: dict[str, Any]
    ) -> str | None:
        """Write one report; on an OS error, the error text (and the run fails)."""
        try:
            write(path, report)
        except OSError as exc:
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            if self.config.pluginmanager.get_plugin("terminalreporter") is None:
                from pytest_llmeval.report.terminal import report_error_message

                sys.stderr.write(report_error_message(path, str(exc), kind) + "\n")
            return str(exc)
        return None

    # -- the terminal -----------------------------------------------------------------------

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        """Controller side: the ``llm-eval summary`` section, where the reports went, the
        statistics, the gates, the comparison with the baseline and what fails the run."""
        from pytest_llmeval.plugin.keys import context_key
        from pytest_llmeval.plugin.shard import shard_of
        from pytest_llmeval.report.gates import write_gates, write_statistics
        from pytest_llmeval.report.terminal import (
            write_comparison,
            write_report_outcome,
            write_summary,
        )

        tr = terminalreporter
        verbosity = config.get_verbosity()
        report_written = self.report_path is not None and self.report_error is None
        records = self.run.records if self.run is not None else tuple(self.sorted_records())
        if records:
            write_summary(tr, records, verbosity, report_written=report_written)
        ctx = config.stash.get(context_key, None)
        limiter = ctx.limiter if ctx is not None else None
        waited, waits, fallbacks = limiter.run_totals() if limiter is not None else (0.0, 0, 0)
        if limiter is not None and (records or waits) and verbosity >= 0:
            tr.write_line(
                f"rate limit {limiter.limits.describe()} for {limiter.scope}: "
                f"{waits} judge request{'' if waits == 1 else 's'} waited {waited:.1f} s in all"
                + (
                    f" (Redis failed in {fallbacks} process{'' if fallbacks == 1 else 'es'}: "
                    "limited locally from then on)"
                    if fallbacks
                    else ""
                )
            )
        if self.report_path is not None:
            write_report_outcome(tr, self.report_path, self.report_error)
        if self.html_path is not None:
            write_report_outcome(tr, self.html_path, self.html_error, "HTML")
        if self.saved is not None and verbosity > 0:
            from pytest_llmeval.plugin.history import cache_dir
            from pytest_llmeval.stores.history import runs_dir

            tr.write_line(f"llm-eval: saved run {self.saved} in {runs_dir(cache_dir(config))}")
        if self.save_error is not None:
            tr.write_line(f"llm-eval: run not saved: {self.save_error}", yellow=True)
        shard = shard_of(config)
        if self.statistics and verbosity >= 0:
            write_statistics(tr, self.statistics)
        for problem in [*self.problems, *([self.tracker.error] if self.tracker.error else [])]:
            tr.write_line(f"llm-eval: {problem}", red=True, bold=True)
        if self.outcomes and self.run is not None:
            write_gates(tr, self.outcomes, self.run.settings, verbosity, shard=shard)
        write_comparison(
            tr,
            self.comparison,
            self.baseline,
            self.baseline_problem,
            has_records=bool(records),
            shard=shard,
            fail_on_regression=self.run.settings.fail_on_regression if self.run else None,
        )


session_key = pytest.StashKey["RunController"]()
