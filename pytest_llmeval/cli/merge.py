"""``python -m pytest_llmeval merge SHARD.json... -o report.json``: the shards' reports checked
and merged (:func:`pytest_llmeval.analysis.merge.merge_runs`), decided with the functions pytest
uses, and written as the report of the whole run with its terminal summary."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_llmeval.analysis.compare import Comparison, compare_runs
from pytest_llmeval.analysis.gates import (
    GateOutcome,
    TestStatistics,
    dataset_statistics,
    evaluate_gates,
)
from pytest_llmeval.analysis.merge import (
    HARMLESS_EXIT,
    MergeError,
    Shard,
    as_mapping,
    check_shards,
    load_shards,
    merge_runs,
)
from pytest_llmeval.analysis.verdict import Verdict, decide
from pytest_llmeval.core.model import Run, RunFileError
from pytest_llmeval.core.options import STEP_SUMMARY_CHOICES, OptionError, env_value
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.report.view import Baseline, MergedShard, RunView
from pytest_llmeval.stores.run_files import load_run


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
        if isinstance(s.exitstatus, int) and s.exitstatus not in HARMLESS_EXIT
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
        where = as_mapping(recorded.get("baseline")).get("path")
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
        theirs = as_mapping(recorded.get("baseline"))
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
    choice = as_mapping(as_mapping(recorded).get("baseline")).get("choice") if recorded else None
    return cmp, Baseline(
        label=label,
        choice=choice if isinstance(choice, str) else "given with --baseline",
        path=str(path),
        run=base,
    )


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
        choices=STEP_SUMMARY_CHOICES,
        default=None,
        help="with --markdown: also append it to $GITHUB_STEP_SUMMARY when that is set (on, the "
        "default; env LLM_EVAL_MARKDOWN_STEP_SUMMARY) or not (off)",
    )
    args = parser.parse_args(list(argv))
    step_switch = args.markdown_step_summary
    if step_switch is None:
        try:
            step_switch = env_value("llm_eval_markdown_step_summary")
        except OptionError as exc:
            parser.error(str(exc))
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
        step = env_value("github_step_summary")
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
