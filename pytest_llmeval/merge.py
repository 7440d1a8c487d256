"""``python -m pytest_llmeval merge SHARD.json... -o report.json`` (issue 11): the JSON reports of
the shards of one run (``--llm-eval-shard i/n``, see :mod:`pytest_llmeval.shard`) made into the
report of the whole run, in the format of an unsharded run's report (``report`` and ``compare``
read it), and its verdict.

The shards are checked first; any of these is an error naming the files and what differs (exit
status 2, nothing written): a file that is not a shard report, shards of different shard counts,
a shard index given twice or missing, different judge settings (model, temperature, seed, mode),
gate settings (run gates, inconclusive policy, repeat, strict cases, fail-on-regression),
plugin version, scorer versions, git commit or collected tests (the collection digest), a case
(``FILE::TEST[CASE]``) in two shards, or shards compared with different baselines.

Every shard report is read and validated (:func:`pytest_llmeval.model.load_run`: a malformed
one is an error naming the file and the field). The shards' runs are then merged into one
:class:`pytest_llmeval.model.Run` (their records, the union of their plans and instruments, their
verdict settings) and everything is decided over it with the functions pytest uses at the end
of an unsharded run: the gates (:func:`pytest_llmeval.gates.evaluate_gates`), the statistics,
the comparison with the baseline (:func:`pytest_llmeval.compare.compare_runs`) and the verdict
(:func:`pytest_llmeval.verdict.decide`). Records are sorted as a run sorts them, so the numbers
are the unsharded run's to the last bit, and so are the verdicts (a property test checks it).

Exit status: 0 when the merged run passes, 1 when it fails: a gate fails, errs, is inconclusive
or skipped (unless the shards ran with ``--llm-eval-inconclusive=pass`` / ``--llm-eval-skipped=
pass``), a significant regression or an incomparable scorer under
``--llm-eval-fail-on-regression``, or a shard whose own tests failed (its recorded exit status;
the unsharded run would have failed too). 2 for unusable input.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_llmeval.compare import Comparison, compare_runs
from pytest_llmeval.gates import GateOutcome, TestStatistics, dataset_statistics, evaluate_gates
from pytest_llmeval.model import Run, RunFileError, TestPlan, load_run, sort_key
from pytest_llmeval.records import ScoreRecord
from pytest_llmeval.report.json_report import DISTRIBUTION
from pytest_llmeval.report.view import Baseline, MergedShard, RunView
from pytest_llmeval.verdict import Verdict, decide

__all__ = ["MergeError", "Merged", "Shard", "load_shards", "main", "merge_runs", "merge_shards"]

#: the judge settings every shard must share (``run.judge`` of the report)
JUDGE_KEYS = ("model", "temperature", "seed", "mode")
#: pytest exit statuses of a shard that do not fail the merged run: OK, no tests collected
_HARMLESS = (0, 5)


class MergeError(ValueError):
    """Shards that cannot be merged, saying which files and what differs."""


@dataclass(frozen=True)
class Shard:
    path: Path
    report: Mapping[str, Any]
    run: Run
    index: int
    count: int

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def section(self) -> Mapping[str, Any]:
        shard: Mapping[str, Any] = self.report["shard"]
        return shard

    @property
    def info(self) -> Mapping[str, Any]:
        return _mapping(self.report.get("run"))

    @property
    def judge(self) -> Mapping[str, Any]:
        return _mapping(self.info.get("judge"))

    @property
    def settings(self) -> Mapping[str, Any]:
        return _mapping(self.section.get("settings"))

    @property
    def exitstatus(self) -> int | None:
        """The shard's pytest status before its own (partial) verdicts."""
        verdict = _mapping(self.report.get("verdict"))
        status = verdict.get("pytest_exitstatus", self.info.get("exitstatus"))
        return status if isinstance(status, int) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass
class Merged:
    """The merged run and what was decided over it, as the writers read it (``view``)."""

    view: RunView
    run: Run
    outcomes: list[GateOutcome]
    statistics: list[TestStatistics]
    verdict: Verdict
    comparison: Comparison | None = None
    #: why the merged run fails (empty: it passes)
    failures: list[str] = field(default_factory=list)

    @property
    def records(self) -> tuple[ScoreRecord, ...]:
        return self.run.records

    @property
    def report(self) -> dict[str, Any]:
        """The merged JSON report."""
        return self.view.document


# -- reading and checking -----------------------------------------------------------------------


def load_shards(paths: Sequence[Path]) -> list[Shard]:
    """Read and validate the shard reports (JSON reports, or saved runs of shard runs), sorted
    by index. Raises :class:`MergeError`."""
    from pytest_llmeval.model import report_of

    if not paths:
        raise MergeError("no shard reports given")
    shards = []
    for path in paths:
        try:
            run, data = load_run(path)
        except RunFileError as exc:
            raise MergeError(str(exc)) from None
        report = report_of(data, str(path))
        section = report.get("shard")
        if not isinstance(section, Mapping) or run.shard is None:
            raise MergeError(
                f"{path}: not a shard report (no 'shard' section): run each shard with "
                "--llm-eval-shard I/N --llm-eval-report FILE"
            )
        index, count = run.shard
        if not 1 <= index <= count:
            raise MergeError(f"{path}: shard section has no valid index/count ({index}/{count})")
        shards.append(Shard(path, report, run, index, count))
    return sorted(shards, key=lambda s: s.index)


def _differ(shards: Sequence[Shard], what: str, value: Any) -> None:
    """Raise when ``value(shard)`` is not the same for every shard."""
    values = [value(s) for s in shards]
    if any(v != values[0] for v in values[1:]):
        listed = "; ".join(f"{s.name}: {v!r}" for s, v in zip(shards, values, strict=True))
        raise MergeError(f"the shards are not of one run: {what} differs ({listed})")


def check_shards(shards: Sequence[Shard]) -> None:
    """Raise :class:`MergeError` unless the shards are all the shards of one run, once each,
    with the same settings and no case in two of them."""
    counts = {s.count for s in shards}
    if len(counts) > 1:
        listed = ", ".join(f"{s.name} is shard {s.index}/{s.count}" for s in shards)
        raise MergeError(f"the shards were split different ways (N differs): {listed}")
    count = shards[0].count
    seen: dict[int, Shard] = {}
    for s in shards:
        if s.index in seen:
            raise MergeError(
                f"shard {s.index}/{count} given twice: {seen[s.index].name} and {s.name}"
            )
        seen[s.index] = s
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        given = ", ".join(f"{s.index} ({s.name})" for s in shards)
        raise MergeError(
            f"shard(s) {', '.join(map(str, missing))} of {count} missing (given: {given}); "
            "merge needs every shard's report"
        )
    for key in JUDGE_KEYS:
        _differ(shards, f"judge setting {key!r}", lambda s, k=key: s.judge.get(k))
    for key in sorted({k for s in shards for k in s.settings}):
        _differ(shards, f"setting {key!r}", lambda s, k=key: s.settings.get(k))
    _differ(
        shards,
        f"{DISTRIBUTION} version",
        lambda s: (s.info.get("versions") or {}).get(DISTRIBUTION),
    )
    commits = [s for s in shards if s.info.get("git_commit")]
    _differ(commits, "git commit", lambda s: s.info.get("git_commit"))
    digests = [s for s in shards if s.section.get("collection_digest")]
    _differ(
        digests,
        "the collected tests (collection digest; run every shard with the same selection)",
        lambda s: (s.section.get("cases"), s.section.get("collection_digest")),
    )
    versions: dict[str, tuple[str, Shard]] = {}
    for s in shards:
        for scorer, version in (s.section.get("scorer_versions") or {}).items():
            if version is None:
                continue
            first = versions.setdefault(scorer, (version, s))
            if first[0] != version:
                raise MergeError(
                    f"the shards are not of one run: scorer {scorer!r} is version {first[0]} in "
                    f"{first[1].name} and {version} in {s.name}"
                )
    owner: dict[str, Shard] = {}
    for s in shards:
        for case in sorted(_cases(s)):
            other = owner.setdefault(case, s)
            if other is not s:
                raise MergeError(
                    f"case {case} is in two shards: {other.name} (shard {other.index}) and "
                    f"{s.name} (shard {s.index}); shards of one run never overlap"
                )
    _differ(shards, "the baseline compared with", _baseline_identity)


def _cases(shard: Shard) -> set[str]:
    """The cases ``FILE::TEST[CASE]`` a shard ran: from its records and its plan."""
    out = {_case_name(r.file, r.test, r.case_id) for r in shard.run.records}
    for plan in shard.run.plan:
        for case, _sample in plan.selected:
            out.add(_case_name(plan.file, plan.test, case))
    return out


def _case_name(file: Any, test: Any, case: Any) -> str:
    return f"{file}::{test}" + (f"[{case}]" if case is not None else "")


def _baseline_identity(shard: Shard) -> Any:
    cmp = shard.report.get("comparison")
    if not isinstance(cmp, Mapping):
        return None
    base = _mapping(cmp.get("baseline"))
    return (cmp.get("baseline_label"), base.get("git_commit"), base.get("started"))


# -- merging ------------------------------------------------------------------------------------


def merge_runs(runs: Sequence[Run]) -> Run:
    """The whole run of checked shards: their records (sorted as a run sorts them), the union
    of their plans (a test's items from every shard) and instruments, the first shard's verdict
    settings (equal in all, checked), the worst of their pytest statuses. Raises MergeError
    when two plans of one test disagree."""
    records = tuple(sorted((r for run in runs for r in run.records), key=sort_key))
    plans: dict[tuple[str, str], TestPlan] = {}
    for run in runs:
        for p in run.plan:
            key = (p.file, p.test)
            try:
                plans[key] = plans[key].union(p) if key in plans else p
            except ValueError as exc:
                raise MergeError(f"the shards' plans do not fit together: {exc}") from None
    instruments = {d: i for run in runs for d, i in run.instruments.items()}
    collected: dict[str, None] = {}
    for run in runs:
        collected.update(dict.fromkeys(run.collected))
    statuses = [run.exitstatus for run in runs]
    bad = [x for x in statuses if isinstance(x, int) and x not in _HARMLESS]
    if bad:
        status = bad[0]
    elif statuses and all(x == 5 for x in statuses):
        status = 5
    else:
        status = 0
    return Run(
        records=records,
        plan=tuple(plans[k] for k in sorted(plans)),
        instruments=dict(sorted(instruments.items())),
        settings=runs[0].settings,
        collected=tuple(collected),
        stopped=any(run.stopped for run in runs),
        shard=None,
        exitstatus=status,
    )


def merge_shards(shards: Sequence[Shard], *, baseline: Path | None = None) -> Merged:
    """The merged run of checked shards, judged (see the module docstring). Raises MergeError."""
    check_shards(shards)
    run = merge_runs([s.run for s in shards])
    outcomes = evaluate_gates(run)
    statistics = dataset_statistics(run)
    comparison, base = _compare(run, outcomes, shards, baseline)
    verdict = decide(run, outcomes, comparison)
    failures = [
        f"shard {s.index} ({s.name}) exited {s.exitstatus}: its tests failed"
        for s in shards
        if isinstance(s.exitstatus, int) and s.exitstatus not in _HARMLESS
    ]
    failures += [f for f in verdict.failures if not f.startswith("pytest exit status")]
    exitstatus = verdict.exitstatus
    if run.exitstatus == 5 and not failures:
        failures.append("no test ran in any shard")
    view = RunView(
        run=dataclasses.replace(run, info=_merged_info(shards, run.records, exitstatus)),
        outcomes=tuple(outcomes),
        statistics=tuple(statistics),
        verdict=verdict,
        comparison=comparison,
        baseline=base,
        failures=tuple(failures),
        merged=(
            shards[0].count,
            tuple(
                MergedShard(
                    index=s.index,
                    file=s.name,
                    started=s.info.get("started"),
                    finished=s.info.get("finished"),
                    exitstatus=s.info.get("exitstatus"),
                    cases=s.section.get("cases_in_shard"),
                    records=len(s.run.records),
                )
                for s in shards
            ),
        ),
    )
    return Merged(view, run, outcomes, statistics, verdict, comparison, failures)


def _merged_info(
    shards: Sequence[Shard], records: Sequence[ScoreRecord], exitstatus: int
) -> dict[str, Any]:
    """The ``run`` section: the first shard's (keys a conftest added included), with the times,
    workers and served models of all shards."""
    run = dict(shards[0].info)
    starts = [s.info["started"] for s in shards if isinstance(s.info.get("started"), (int, float))]
    ends = [s.info["finished"] for s in shards if isinstance(s.info.get("finished"), (int, float))]
    if starts and ends:
        run["started"], run["finished"] = min(starts), max(ends)
        run["duration_s"] = run["finished"] - run["started"]
    run["workers"] = sum(int(s.info.get("workers") or 0) for s in shards)
    run["exitstatus"] = exitstatus
    modes = {s.info.get("cache_mode") for s in shards}
    if "cache_mode" in run and len(modes) > 1:
        run["cache_mode"] = "mixed: " + ", ".join(sorted(str(m) for m in modes))
    if isinstance(run.get("judge"), Mapping):
        judge = dict(run["judge"])
        urls = {s.judge.get("base_url") for s in shards}
        judge["base_url"] = urls.pop() if len(urls) == 1 else None
        judge["served_models"] = sorted({m for r in records for m in r.judge_models})
        run["judge"] = judge
    return run


def _compare(
    run: Run, outcomes: Sequence[GateOutcome], shards: Sequence[Shard], baseline: Path | None
) -> tuple[Comparison | None, Baseline | None]:
    """The comparison with the baseline the shards compared with (or ``baseline``)."""
    recorded = next(
        (s.report["comparison"] for s in shards if isinstance(s.report.get("comparison"), Mapping)),
        None,
    )
    if recorded is None and baseline is None:
        return None, None
    path = baseline
    if path is None:
        assert recorded is not None
        where = _mapping(recorded.get("baseline")).get("path")
        if not where or not Path(where).is_file():
            raise MergeError(
                f"the shards compared with the baseline {recorded.get('baseline_label')!r} "
                f"({where or 'no path recorded'}), which is not readable here; give it with "
                "--baseline PATH"
            )
        path = Path(where)
    try:
        base, data = load_run(path)
    except RunFileError as exc:
        raise MergeError(f"--baseline: {exc}") from None
    if recorded is not None:
        # The merged verdict compares with the baseline the shards compared with, or none: a
        # --baseline of another run would be judged under the shards' label (and settings).
        theirs = _mapping(recorded.get("baseline"))
        started, commit = theirs.get("started"), theirs.get("git_commit")
        if (started is not None and base.info.get("started") != started) or (
            commit is not None and base.info.get("git_commit") != commit
        ):
            raise MergeError(
                f"{path} is not the baseline the shards compared with "
                f"({recorded.get('baseline_label')!r}: started at {started}, commit {commit}; "
                f"this file: started at {base.info.get('started')}, commit "
                f"{base.info.get('git_commit')}); give the shards' baseline with --baseline PATH, "
                "or run the shards against the baseline you mean"
            )
    alpha = run.settings.fail_on_regression
    if alpha is None and recorded is not None and isinstance(recorded.get("alpha"), float):
        alpha = recorded["alpha"]
    if recorded is not None:
        label = str(recorded.get("baseline_label"))
    else:
        label = f"run {data['number']}" if "number" in data else str(path)
    cmp = compare_runs(
        base,
        run,
        alpha=0.05 if alpha is None else alpha,
        baseline_label=label,
        current_label="this run",
        accept=run.settings.accept_incomparable,
        gates=outcomes,
    )
    choice = _mapping(_mapping(recorded).get("baseline")).get("choice") if recorded else None
    return cmp, Baseline(
        label=label,
        choice=choice if isinstance(choice, str) else "given with --baseline",
        path=str(path),
        run=base,
    )


# -- terminal -----------------------------------------------------------------------------------


class _Terminal:
    """The two methods of pytest's terminal reporter the report writers use, on a text stream."""

    def __init__(self, out: TextIO, width: int = 80) -> None:
        self.out = out
        self.width = width

    def write_sep(self, sep: str, title: str) -> None:
        side = max(2, (self.width - len(title) - 2) // 2)
        self.out.write(f"{sep * side} {title} {sep * side}\n")

    def write_line(self, line: str, **_markup: bool) -> None:
        self.out.write(line + "\n")


def write_merged(
    out: TextIO,
    merged: Merged,
    shards: Sequence[Shard],
    target: Path,
    written: Sequence[tuple[str, Path, bool]] = (),
) -> None:
    """The merge's terminal output: the shards, then the sections a session prints (through
    the same writer), where the reports went (``written``: kind, path, appended) and the
    verdict."""
    from pytest_llmeval.report.terminal import TerminalWriter

    def before(tr: _Terminal) -> None:
        tr.write_sep("=", f"llm-eval merge of {len(shards)} shards")
        for s in shards:
            tr.write_line(
                f"shard {s.index}/{s.count}: {s.name} ({s.section.get('cases_in_shard')} cases, "
                f"{len(s.run.records)} records, exit status {s.info.get('exitstatus')})"
            )

    def after(tr: _Terminal) -> None:
        tr.write_line(f"llm-eval: JSON report written to {target}")
        for kind, path, appended in written:
            tr.write_line(
                f"llm-eval: {kind} report {'appended' if appended else 'written'} to {path}"
            )
        if merged.failures:
            tr.write_line("verdict: FAIL: " + "; ".join(merged.failures))
        else:
            tr.write_line(f"verdict: PASS ({len(merged.outcomes)} gate(s) over the whole run)")

    TerminalWriter(_Terminal(out), 0, report_written=True, before=before, after=after).write(
        merged.view
    )


# -- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``merge SHARD.json... -o OUT``: exit 0 pass, 1 fail, 2 unusable input."""
    from pytest_llmeval.report.html import HtmlWriter
    from pytest_llmeval.report.json_report import JsonWriter
    from pytest_llmeval.report.markdown import MarkdownWriter, StepSummaryWriter

    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmeval merge",
        description="Merge the JSON reports of the shards of one run (--llm-eval-shard I/N) "
        "into the report of the whole run, and judge its gates.",
    )
    parser.add_argument("shards", type=Path, nargs="+", help="the shards' JSON reports")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="where to write the merged JSON report"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="the baseline (saved run or JSON report) to compare the whole run with; default: "
        "the one the shards compared with, when it is readable here",
    )
    parser.add_argument("--html", type=Path, default=None, help="also write an HTML report")
    parser.add_argument(
        "--markdown",
        type=Path,
        default=None,
        help="also write the Markdown summary (sized for a pull-request comment); appended to "
        "$GITHUB_STEP_SUMMARY too, when that is set (see --markdown-step-summary)",
    )
    parser.add_argument(
        "--markdown-step-summary",
        choices=("on", "off"),
        default=None,
        help="with --markdown: also append it to $GITHUB_STEP_SUMMARY when that is set (on, the "
        "default; env LLM_EVAL_MARKDOWN_STEP_SUMMARY) or not (off)",
    )
    args = parser.parse_args(list(argv))
    step_switch = args.markdown_step_summary
    if step_switch is None:
        step_switch = os.environ.get("LLM_EVAL_MARKDOWN_STEP_SUMMARY", "").strip().lower() or "on"
        if step_switch not in ("on", "off"):
            parser.error(
                f"env LLM_EVAL_MARKDOWN_STEP_SUMMARY: {step_switch!r} is not one of on, off"
            )
    try:
        shards = load_shards(args.shards)
        merged = merge_shards(shards, baseline=args.baseline)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    writers: list[tuple[JsonWriter | HtmlWriter | MarkdownWriter | StepSummaryWriter, bool]] = [
        (JsonWriter(args.output), False)
    ]
    if args.html is not None:
        writers.append((HtmlWriter(args.html), False))
    if args.markdown is not None:
        # the truncation note points at the whole (JSON) report
        writers.append((MarkdownWriter(args.markdown, full_report=args.output), False))
        step = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
        if step and step_switch == "on":
            writers.append((StepSummaryWriter(Path(step), full_report=args.output), True))
    written: list[tuple[str, Path, bool]] = []
    for writer, appended in writers:
        try:
            writer.write(merged.view)
        except OSError as exc:
            if writer.name in ("JSON", "HTML"):
                print(f"error: cannot write the merged report: {exc}", file=sys.stderr)
            else:
                what = "append" if appended else "write"
                print(f"error: cannot {what} the {writer.name} summary: {exc}", file=sys.stderr)
            return 2
        if writer.name != "JSON":
            written.append((writer.name, writer.path, appended))
    write_merged(sys.stdout, merged, shards, args.output, written)
    return 1 if merged.failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
