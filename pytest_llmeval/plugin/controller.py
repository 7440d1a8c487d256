"""The controller side of a run (the xdist controller, or the only process), as one plugin object
registered by :mod:`pytest_llmeval.plugin` (like junitxml's ``LogXML``): it collects the score
records and instruments that teardown reports carry, and at the end of the session builds the
run's :class:`pytest_llmeval.core.model.Run` and decides everything from it with the same pure
functions ``merge`` and ``compare`` use: gates
(:func:`pytest_llmeval.analysis.gates.evaluate_gates`), statistics, the comparison with the
baseline (:func:`pytest_llmeval.analysis.compare.compare_runs`) and the verdict
(:func:`pytest_llmeval.analysis.verdict.decide`), which sets the exit status. What was decided
becomes the run's :class:`pytest_llmeval.report.view.RunView`, the one input of every report
writer: the JSON, HTML and Markdown reports (and the GitHub step summary), the saved run, and the
terminal's sections are written from it, as ``merge`` writes them.

Hooks hold the order of things; the decisions are in the functions they call.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import contains, or_
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.core.model import Instrument, Run, RunFileError, RunSettings, sort_key
from pytest_llmeval.core.records import ScoreRecord, forget_aggregates, records_from_wire
from pytest_llmeval.core.slots import SlotWaits, slot_waits_line
from pytest_llmeval.plugin.keys import ERROR_ATTR, GATED_MISS_ATTR, SLOT_WAITS_KEY

if TYPE_CHECKING:
    from pytest_llmeval.analysis.compare import Comparison
    from pytest_llmeval.analysis.gates import GateOutcome, TestStatistics
    from pytest_llmeval.analysis.verdict import Verdict
    from pytest_llmeval.plugin.plan import PlanTracker
    from pytest_llmeval.report.view import ReportWriter, RunView
    from pytest_llmeval.stores.history import BaselineChoice

__all__ = [
    "INSTRUMENTS_ATTR",
    "RECORDS_ATTR",
    "WORKER_REPORTS",
    "MarkdownTarget",
    "RunController",
    "WorkerReports",
    "markdown_target",
]

#: teardown report attribute: the test's score records, one JSON string
RECORDS_ATTR = "llm_eval_records"
#: teardown report attribute: JSON {digest: instrument} of instruments the process had not
#: shipped before (each crosses xdist once per worker)
INSTRUMENTS_ATTR = "llm_eval_instruments"


@dataclass(frozen=True)
class MarkdownTarget:
    """Where the Markdown summary goes: ``--llm-eval-markdown`` (ini ``llm_eval_markdown``, env
    ``LLM_EVAL_MARKDOWN``) and whether it is also appended to ``$GITHUB_STEP_SUMMARY``
    (``--llm-eval-markdown-step-summary=on|off``, ini and env twins; on by default)."""

    path: str | None
    step_summary: bool


def markdown_target(config: pytest.Config) -> MarkdownTarget:
    """The Markdown options (rows of the option table); a bad switch is a usage error."""
    from pytest_llmeval.plugin.options import value

    return MarkdownTarget(
        value(config, "llm_eval_markdown"),
        value(config, "llm_eval_markdown_step_summary") == "on",
    )


@dataclass(frozen=True)
class Written:
    """A report the run wrote, or tried to: its kind, path and the OS error (None: written)."""

    kind: str
    path: Path
    error: str | None
    #: appended to the file (the GitHub step summary), not written whole
    appended: bool = False


class RunController:
    """Controller side: see the module docstring."""

    def __init__(self, config: pytest.Config, tracker: PlanTracker) -> None:
        self.config = config
        self.tracker = tracker
        self.records: list[ScoreRecord] = []
        self.instruments: dict[str, Instrument] = {}
        self.started = time.time()
        #: checked now: a bad switch is a usage error before anything runs
        self.markdown = markdown_target(config)
        #: the reports written (or not: the OS error) in pytest_sessionfinish, for the summary
        self.written: list[Written] = []
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
        #: the run and what was decided over it, as every writer reads it
        self.view: RunView | None = None
        #: xdist workers' waits for judge slots (gateway id -> waits), from their output
        self.worker_slot_waits: dict[str, SlotWaits] = {}
        #: the report being logged and the records taken from it
        self.taken: tuple[pytest.TestReport | None, Sequence[ScoreRecord]] = (None, ())
        #: one copy of each string many records read from workers share (see ScoreRecord.from_json)
        self._strings: dict[str, str] = {}

    def release(self) -> None:
        """Let go of the run (its records, model and what was decided over it) once the session
        is over and everything is written: pytest's own last garbage collections (at its
        cleanup, after every unconfigure hook) then need not walk a record per case."""
        self.records = []
        forget_aggregates()
        self.instruments = {}
        self.run = None
        self.outcomes = []
        self.statistics = []
        self.comparison = None
        self.baseline_run = None
        self.view = None
        self.taken = (None, ())
        self._strings = {}

    # -- collecting -------------------------------------------------------------------------

    def take_local(
        self,
        report: pytest.TestReport,
        records: list[ScoreRecord] | None = None,
        instruments: dict[str, Any] | None = None,
    ) -> None:
        """Without xdist: each report this process makes, from the plugin's makereport wrapper
        (the outermost: the report as it will be logged), with the records of its test and, as
        JSON, the instruments this process had not taken before (a teardown report only). Its
        fate goes to the plan tracker; the records are kept as they are (no JSON round trip:
        they are the objects the test made, already JSON-safe). Taken when the report is made,
        not when it is logged: no hook of this plugin is called for each logged report, and
        a teardown report another plugin never logs keeps its records all the same."""
        self.tracker.note(report)
        if records is not None and self._add(report.nodeid, records, instruments or {}):
            self.taken = (report, records)

    def take_shipped(self, report: pytest.TestReport) -> None:
        """xdist controller: the records and new instruments a worker's report carries (see
        :class:`WorkerReports`)."""
        attrs = report.__dict__  # (a missing attribute costs no exception this way)
        payload = attrs.pop(RECORDS_ATTR, None)
        shipped = attrs.pop(INSTRUMENTS_ATTR, None)
        if not payload and not shipped:
            return
        try:
            strings = self._strings
            records = records_from_wire(payload, strings) if payload else []
            instruments = json.loads(shipped) if shipped else {}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._unreadable(report.nodeid, exc)
            return
        if self._add(report.nodeid, records, instruments):
            self.taken = (report, records)

    def _take_carried(self) -> None:
        """Without xdist: records (or instruments) that rode on a logged report the way a
        worker ships them (only another plugin puts them there in this process: one that
        replays reports made elsewhere, say) are read all the same at the end, from the reports
        the terminal keeps: a failing record is never lost by where it travelled. (No hook runs
        for each logged report in this process; the reports are scanned in C.)"""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", None)
        if not isinstance(stats, dict):
            return
        for reports in stats.values():
            if not isinstance(reports, list):
                continue
            attrs = list(map(getattr, reports, repeat("__dict__"), repeat(_NO_ATTRS)))
            carrying = list(
                map(
                    or_,
                    map(contains, attrs, repeat(RECORDS_ATTR)),
                    map(contains, attrs, repeat(INSTRUMENTS_ATTR)),
                )
            )
            for report in compress(reports, carrying):
                self.take_shipped(report)

    def _add(self, nodeid: str, records: list[ScoreRecord], shipped: dict[str, Any]) -> bool:
        """Keep the records of the test ``nodeid`` and the instruments (as JSON) that came with
        them; False (the run then cannot be judged) when the instruments cannot be read."""
        try:
            instruments = {
                digest: Instrument.from_json(digest, inst) for digest, inst in shipped.items()
            }
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._unreadable(nodeid, exc)
            return False
        self.records.extend(records)
        for digest, inst in instruments.items():
            self.instruments.setdefault(digest, inst)
        return True

    def _unreadable(self, nodeid: str, exc: Exception) -> None:
        # A record dropped in silence could be the failing one: the run cannot be judged.
        self.problems.append(
            f"the score records sent with {nodeid} could not be read "
            f"({type(exc).__name__}: {exc}): the run cannot be judged without them"
        )

    def records_of(self, report: pytest.TestReport) -> Sequence[ScoreRecord]:
        """The records taken from ``report`` (empty for a report that brought none), while the
        report is being logged."""
        return self.taken[1] if self.taken[0] is report else ()

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

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: what a finished worker waited for judge slots."""
        output = getattr(node, "workeroutput", None) or {}
        waits = SlotWaits.from_json(output.get(SLOT_WAITS_KEY))
        if waits is not None:
            name = str(getattr(node.gateway, "id", len(self.worker_slot_waits)))
            self.worker_slot_waits[name] = waits

    def slot_waits(self) -> SlotWaits | None:
        """The run's waits for judge slots (this process's and its workers'), or None."""
        from pytest_llmeval.plugin.keys import context_key

        ctx = self.config.stash.get(context_key, None)
        total = ctx.ledger.slots.waits() if ctx is not None else None
        for waits in self.worker_slot_waits.values():
            total = waits if total is None else total + waits
        return total

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
        from pytest_llmeval.plugin.options import host_option

        return any(
            host_option(self.config, name, False)
            for name in ("collectonly", "setuponly", "setupplan")
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

        if not hasattr(session, "exitstatus"):
            # (a session finished by hand, as pytester's getitems/getnode do after collecting
            # alone: pytest sets it before this hook in every run of its own)
            session.exitstatus = exitstatus
        if not self.config.pluginmanager.has_plugin(WORKER_REPORTS):
            self._take_carried()
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
        self.view = self._view(run)
        self._write_reports(session)

    def _view(self, run: Run) -> RunView:
        from pytest_llmeval.report.view import Baseline, RunView

        choice = self.baseline
        baseline = None
        if choice is not None:
            baseline = Baseline(
                label=choice.label,
                spec=choice.spec,
                choice=choice.choice,
                path=str(choice.path) if choice.path is not None else None,
                passed_over=choice.passed_over,
                run=self.baseline_run,
                problem=self.baseline_problem,
            )
        return RunView(
            run=run,
            outcomes=tuple(self.outcomes),
            statistics=tuple(self.statistics),
            verdict=self.verdict,
            comparison=self.comparison,
            baseline=baseline,
            problems=(*self.problems, *([self.tracker.error] if self.tracker.error else [])),
            amend=(
                (
                    lambda report: self.config.hook.pytest_llmeval_update_json_report(
                        config=self.config, report=report
                    )
                )
                if self.config.hook.pytest_llmeval_update_json_report.get_hookimpls()
                else None
            ),
        )

    def _with_info(self, session: pytest.Session, view: RunView) -> RunView:
        """The view with the report's ``run`` section (built only when a report needs it: it
        asks git and the installed distributions)."""
        from pytest_llmeval.plugin.keys import context_key
        from pytest_llmeval.plugin.options import _worker_count
        from pytest_llmeval.plugin.shard import shard_section
        from pytest_llmeval.report.json_report import run_section

        ctx = self.config.stash.get(context_key, None)
        info = run_section(
            view.run.records,
            started=self.started,
            settings=ctx.settings if ctx else None,
            rootdir=self.config.rootpath,
            exitstatus=int(session.exitstatus),
            workers=_worker_count(self.config),
        )
        return dataclasses.replace(
            view,
            run=dataclasses.replace(view.run, info=info),
            shard_section=shard_section(self.config, view.run),
        )

    def _write_reports(self, session: pytest.Session) -> None:
        """Write the JSON, HTML and Markdown reports (each atomically; the Markdown also
        appended to ``$GITHUB_STEP_SUMMARY``), then save the run.

        A report that cannot be written (unwritable path, disk full) must not end the run with a
        traceback that swallows the summary: the summary is printed, then the error naming the
        path and the OS error, and the run exits non-zero (pytest's INTERNAL_ERROR status, 3,
        unless it already failed)."""
        from pytest_llmeval.plugin.history import history_key
        from pytest_llmeval.plugin.options import _enabled, value

        assert self.view is not None
        run = self.view.run
        target = value(self.config, "llm_eval_report")
        html_target = value(self.config, "llm_eval_html")
        md_target = self.markdown.path
        history = self.config.stash.get(history_key, None)
        save = (
            history is not None
            and history.keep > 0
            and _enabled(self.config)
            and bool(run.records)
            and self.judged
        )
        if not target and not html_target and not md_target and not save:
            return
        self.view = view = self._with_info(session, self.view)
        base = Path(self.config.invocation_params.dir)  # an absolute target replaces base
        writers: list[tuple[ReportWriter, Path]] = []
        if target:
            from pytest_llmeval.report.json_report import JsonWriter

            writers.append((JsonWriter(base / target), base / target))
        if html_target:
            from pytest_llmeval.report.html import HtmlWriter

            writers.append((HtmlWriter(base / html_target), base / html_target))
        for writer, path in writers:
            self._write_one(session, writer, path, view)
        if md_target:
            self._write_markdown(session, base, md_target, view)
        if save and history is not None:
            self._save(view.file_document(), history.keep)

    def _write_markdown(
        self, session: pytest.Session, base: Path, target: str, view: RunView
    ) -> None:
        from pytest_llmeval.report.markdown import MarkdownWriter, StepSummaryWriter

        # the truncation note points at the whole report, when one was written
        full = next((w.path for w in self.written if w.error is None), None)
        path = base / target
        self._write_one(
            session, MarkdownWriter(path, full_report=full), path, self._with_failed_writes(view)
        )
        from pytest_llmeval.plugin.options import value

        step = value(self.config, "github_step_summary")
        if step and self.markdown.step_summary:
            summary = base / step
            self._write_one(
                session,
                StepSummaryWriter(summary, full_report=full),
                summary,
                self._with_failed_writes(view),  # the Markdown file's own failure included
                appended=True,
            )

    def _with_failed_writes(self, view: RunView) -> RunView:
        """The view with each report that could not be written as a reason the run fails: it
        exits 3 for it, so a summary written after must not say it passed."""
        unwritten = tuple(
            f"the {w.kind} report could not be written to {w.path}: {w.error}"
            for w in self.written
            if w.error is not None
        )
        if not unwritten:
            return view
        return dataclasses.replace(view, failures=(*view.reasons, *unwritten))

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
        self,
        session: pytest.Session,
        writer: ReportWriter,
        path: Path,
        view: RunView,
        *,
        appended: bool = False,
    ) -> None:
        """Write one report; on an OS error, keep the error text (and the run fails)."""
        try:
            writer.write(view)
        except OSError as exc:
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            if self.config.pluginmanager.get_plugin("terminalreporter") is None:
                from pytest_llmeval.report.terminal import report_error_message

                message = report_error_message(path, str(exc), writer.name, appended=appended)
                sys.stderr.write(message + "\n")
            self.written.append(Written(writer.name, path, str(exc), appended))
            return
        self.written.append(Written(writer.name, path, None, appended))

    # -- the terminal -----------------------------------------------------------------------

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        """Controller side: the ``llm-eval summary`` section, where the reports went, the
        statistics, the gates, the comparison with the baseline and what fails the run."""
        from pytest_llmeval.report.terminal import TerminalWriter
        from pytest_llmeval.report.view import RunView

        view = self.view or RunView(Run(records=tuple(self.sorted_records())))
        verbosity = config.get_verbosity()
        report_written = any(w.kind == "JSON" and w.error is None for w in self.written)
        records = view.run.records

        def after_summary(tr: Any) -> None:
            from pytest_llmeval.plugin.keys import context_key
            from pytest_llmeval.report.terminal import write_report_outcome

            ctx = config.stash.get(context_key, None)
            limiter = ctx.limiter if ctx is not None else None
            waited, waits, fallbacks = limiter.run_totals() if limiter is not None else (0.0, 0, 0)
            if limiter is not None and (records or waits) and verbosity >= 0:
                tr.write_line(
                    f"rate limit {limiter.limits.describe()} for {limiter.scope}: "
                    f"{waits} judge request{'' if waits == 1 else 's'} waited {waited:.1f} s in "
                    "all"
                    + (
                        f" (Redis failed in {fallbacks} process{'' if fallbacks == 1 else 'es'}: "
                        "limited locally from then on)"
                        if fallbacks
                        else ""
                    )
                )
            from pytest_llmeval.plugin.options import concurrency_source

            slots = self.slot_waits()
            if slots is not None and verbosity >= 0:
                tr.write_line(slot_waits_line(slots, concurrency_source(config)))
            for w in self.written:
                write_report_outcome(tr, w.path, w.error, w.kind, appended=w.appended)
            if self.saved is not None and verbosity > 0:
                from pytest_llmeval.plugin.history import cache_dir
                from pytest_llmeval.stores.history import runs_dir

                tr.write_line(f"llm-eval: saved run {self.saved} in {runs_dir(cache_dir(config))}")
            if self.save_error is not None:
                tr.write_line(f"llm-eval: run not saved: {self.save_error}", yellow=True)

        TerminalWriter(
            terminalreporter,
            verbosity,
            report_written=report_written,
            after_summary=after_summary,
        ).write(view)


#: what a report without attributes of its own offers (see RunController._take_carried)
_NO_ATTRS: dict[str, Any] = {}

#: the plugin name of :class:`WorkerReports`
WORKER_REPORTS = "llm-eval-worker-reports"


class WorkerReports:
    """xdist controller only: every report a worker sends, as it is logged. Registered only in
    a process with workers (without them the plugin's makereport wrapper hands each report to
    :meth:`RunController.take_local` instead: no hook call per logged report)."""

    def __init__(self, controller: RunController) -> None:
        self.controller = controller
        #: the status hook is registered (see pytest_llmeval.plugin.status)
        self._status: bool | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The records and new instruments a teardown report carries (the only report that
        carries any), taken before the other plugins see the report (the report, which the
        terminal keeps to the end of the session, then lets go of them: nothing else reads
        them); every report's fate goes to the plan tracker (xdist reports a crashed item with
        ``when="???"``). A report flagged as a plugin error or a gated miss gets the status
        hook registered before the terminal asks for its status."""
        controller = self.controller
        controller.tracker.note(report)
        if report.when == "teardown":
            controller.take_shipped(report)
            return
        attrs = report.__dict__
        if RECORDS_ATTR in attrs or INSTRUMENTS_ATTR in attrs:
            controller.take_shipped(report)  # (never sent today; taken all the same)
        if self._status is None and (ERROR_ATTR in attrs or GATED_MISS_ATTR in attrs):
            from pytest_llmeval.plugin.status import need_status_hooks

            need_status_hooks(controller.config)
            self._status = True


session_key = pytest.StashKey["RunController"]()
