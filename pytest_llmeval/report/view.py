"""The one input of every report writer (:class:`RunView`) and the interface the writers share
(:class:`ReportWriter`).

A view is built in two places, the same way: by the controller at the end of a pytest session
and by ``merge`` from the shard reports. It holds the typed run
(:class:`~pytest_llmeval.core.model.Run`) and what was decided over it (gate outcomes, statistics,
the comparison with the baseline, the verdict). The writers (terminal, JSON, HTML, Markdown, JUnit
properties) read these objects, never a report dict by string keys. The JSON document
(:meth:`RunView.json`) is the JSON writer's rendering of the view, built once: the HTML page (a
JSON island read by its script) and the saved run are made from that same document, so what a
conftest adds to it (``pytest_llmeval_update_json_report``) reaches all three.

Cheap to import: the verdict types are needed for annotations only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, final, runtime_checkable

from pytest_llmeval.core.files import JsonLines
from pytest_llmeval.core.model import REPORT_VERSION, Run
from pytest_llmeval.core.records import ScoreRecord, aggregate

if TYPE_CHECKING:
    from pytest_llmeval.analysis.agreement import ScorerAgreement
    from pytest_llmeval.analysis.compare import Comparison
    from pytest_llmeval.analysis.gates import GateOutcome, TestStatistics
    from pytest_llmeval.analysis.panel import ScorerPanel
    from pytest_llmeval.analysis.stability import ScorerStability
    from pytest_llmeval.analysis.verdict import Verdict

__all__ = ["Baseline", "MergedShard", "ReportWriter", "RunMeta", "RunView"]


@final
@dataclass(frozen=True)
class Baseline:
    """The baseline a run was compared with: what was asked for, which run that was and how it
    was chosen, the run as read (None: nothing to compare with, or unusable), and why it could
    not be used."""

    label: str
    #: ``--llm-eval-baseline``'s value (None for ``merge``, which takes the shards' baseline)
    spec: str | None = None
    #: how it was chosen ("the newest saved run that passed", "given with --baseline", ...)
    choice: str | None = None
    #: the file compared with (None: no saved run qualified, nothing compared)
    path: str | None = None
    #: saved runs passed over on the way (number, why)
    passed_over: tuple[tuple[int, str], ...] = ()
    run: Run | None = None
    #: why the baseline asked for cannot be used (the run fails with a usage error)
    problem: str | None = None


@final
@dataclass(frozen=True)
class MergedShard:
    """One shard of a merged run, as the merged report lists it (values as the shard recorded
    them; a field it did not record is None)."""

    index: int
    file: str
    started: float | None
    finished: float | None
    exitstatus: int | None
    cases: int | None
    records: int

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "file": self.file,
            "started": self.started,
            "finished": self.finished,
            "exitstatus": self.exitstatus,
            "cases": self.cases,
            "records": self.records,
        }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@final
@dataclass(frozen=True)
class RunMeta:
    """What a writer shows of the run's metadata (the report's ``run`` section), each value
    checked for its type: the section of a shard report comes from a file."""

    git_commit: str | None = None
    judge_model: str | None = None
    #: the judge endpoint with its credentials masked
    judge_url: str | None = None

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> RunMeta:
        from pytest_llmeval.core.redaction import redact_url

        judge = info.get("judge")
        judge = judge if isinstance(judge, Mapping) else {}
        url = _text(judge.get("base_url"))
        return cls(
            git_commit=_text(info.get("git_commit")),
            judge_model=_text(judge.get("model")),
            # masked where it was made; masked again for a file written by hand or by an old
            # version, so no writer can show a credential
            judge_url=redact_url(url) if url is not None else None,
        )


@final
@dataclass(frozen=True)
class RunView:
    """A judged run, as every writer reads it (see the module docstring).

    ``run.info`` is the report's ``run`` section (times, versions, judge, git commit): built by
    the controller for a session, the shards' combined for a merge, empty when nothing needs
    it (the terminal never shows it)."""

    run: Run
    outcomes: tuple[GateOutcome, ...] = ()
    statistics: tuple[TestStatistics, ...] = ()
    verdict: Verdict | None = None
    comparison: Comparison | None = None
    baseline: Baseline | None = None
    #: what kept the run from being judged (each fails it): unreadable records, a lost plan
    problems: tuple[str, ...] = ()
    #: why the run fails when that is not the verdict's own list: ``merge`` names the shard
    #: whose tests failed where a session says "pytest exit status 1"
    failures: tuple[str, ...] | None = None
    #: the report's ``shard`` section of a shard run (what ``merge`` checks; JSON only)
    shard_section: Mapping[str, Any] | None = None
    #: a merged run: the number of shards and each shard's entry
    merged: tuple[int, tuple[MergedShard, ...]] | None = None
    #: called once on the JSON document before any writer uses it (the
    #: ``pytest_llmeval_update_json_report`` hook)
    amend: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False, repr=False)

    @property
    def judged(self) -> bool:
        return self.verdict is not None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the run fails (empty: it passes, or was not judged)."""
        if self.failures is not None:
            return self.failures
        return self.verdict.failures if self.verdict is not None else ()

    @property
    def passed(self) -> bool | None:
        """Whether the run passes; None when it was not judged (collect-only)."""
        if self.verdict is None:
            return None
        if self.failures is not None:
            return not self.failures
        return self.verdict.passed

    @functools.cached_property
    def meta(self) -> RunMeta:
        return RunMeta.of(self.run.info)

    @functools.cached_property
    def agreement(self) -> tuple[ScorerAgreement, ...]:
        """How each scorer with labelled records agrees with the labels (issue 20)."""
        from pytest_llmeval.analysis.agreement import run_agreement

        if not any(r.label is not None for r in self.run.records):
            return ()
        return run_agreement(self.run)

    @functools.cached_property
    def stability(self) -> tuple[ScorerStability, ...]:
        """The asks of each scorer's ``judge_samples`` records (issue 20)."""
        from pytest_llmeval.analysis.stability import run_stability

        if not any("judge_samples" in r.metadata or "swap" in r.metadata for r in self.run.records):
            return ()
        return run_stability(self.run)

    @functools.cached_property
    def panels(self) -> tuple[ScorerPanel, ...]:
        """How the judges of each scorer's panels agree (issue 20)."""
        from pytest_llmeval.analysis.panel import run_panels

        if not any("panel" in r.metadata for r in self.run.records):
            return ()
        return run_panels(self.run)

    @functools.cached_property
    def document(self) -> dict[str, Any]:
        """The JSON report of the run (built once; see the module docstring)."""
        from pytest_llmeval.report.view import report_json

        report = report_json(self)
        if self.amend is not None:
            self.amend(report)
        return report

    def file_document(self) -> dict[str, Any]:
        """:attr:`document`, for a writer that writes it to a file and lets go: the document if
        it was built, else (nothing may amend it) the same document with each record made as
        it is written, so that a run's records are never all held as dicts at once."""
        if "document" in self.__dict__ or self.amend is not None:
            return self.document
        return report_json(self, lazy=True)


@runtime_checkable
class ReportWriter(Protocol):
    """A report writer: made with where it writes (a path, a terminal, a test report), it writes
    one :class:`RunView`. An OSError says the destination could not be written; the caller
    decides what that does to the run."""

    #: what the writer writes, as messages name it ("JSON", "HTML", "Markdown", ...)
    name: str

    def write(self, view: RunView) -> None: ...


def _document(
    records: Sequence[ScoreRecord],
    info: Mapping[str, Any],
    run: Run | None,
    outcomes: Sequence[GateOutcome],
    statistics: Sequence[TestStatistics],
    verdict: Verdict | None,
    comparison: Mapping[str, Any] | None,
    shard: Mapping[str, Any] | None,
    lazy: bool = False,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "run": dict(info),
        "aggregates": {name: agg.to_json() for name, agg in aggregate(records).items()},
        "records": JsonLines(records, ScoreRecord.to_json)
        if lazy
        else [r.to_json() for r in records],
    }
    if run is None:
        return report
    report.update(run.input_json(records=False))  # the same records are in already
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


def report_json(view: RunView, *, lazy: bool = False) -> dict[str, Any]:
    """The JSON report of a run's view: its ``run`` section is ``view.run.info``; the
    comparison carries the baseline's side of every matched case
    (:func:`pytest_llmeval.analysis.compare.comparison_json`), or the error that kept the baseline
    from being used; a merged run lists its shards under ``merged``. ``lazy``: its records are
    a :class:`~pytest_llmeval.core.files.JsonLines`, each made as a writer reaches it (for a
    writer of the file only: without the ``pytest_llmeval_update_json_report`` hook)."""
    comparison: dict[str, Any] | None = None
    base = view.baseline
    if view.comparison is not None and base is not None and base.run is not None:
        from pytest_llmeval.analysis.compare import comparison_json

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
        lazy,
    )
    if view.agreement:
        report["agreement"] = {a.scorer: a.to_json() for a in view.agreement}
    if view.stability:
        report["judge_stability"] = {s.scorer: s.to_json() for s in view.stability}
    if view.panels:
        report["judge_panel"] = {p.scorer: p.to_json() for p in view.panels}
    if view.merged is not None:
        count, shards = view.merged
        report["merged"] = {"count": count, "shards": [s.to_json() for s in shards]}
    return report
