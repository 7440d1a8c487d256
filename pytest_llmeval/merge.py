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

Then everything a run computes from its records is computed again over all of them, with the
functions the plugin uses: the per-scorer aggregates (:func:`pytest_llmeval.records.aggregate`),
the gates (:func:`pytest_llmeval.gates.evaluate_gates` over the union of the shards' gate books),
the per-test statistics (:func:`pytest_llmeval.gates.dataset_statistics`, with the scorer ranges
the shards knew) and, when the shards compared with a baseline, the comparison
(:func:`pytest_llmeval.compare.compare_reports`, shaped as the plugin shapes it). Records are
sorted as a run sorts them, so the numbers are the unsharded run's to the last bit.

Exit status: 0 when the merged run passes, 1 when it fails: a gate fails (or is inconclusive,
unless the shards ran with ``--llm-eval-inconclusive=pass``), a significant regression under
``--llm-eval-fail-on-regression``, or a shard whose own tests failed (its recorded exit status;
the unsharded run would have failed too). 2 for unusable input.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_llmeval.compare import ComparisonError, compare_reports, load_report, report_of
from pytest_llmeval.gates import (
    GateBook,
    GateOutcome,
    GateRule,
    TestStatistics,
    dataset_statistics,
    evaluate_gates,
    failing_outcomes,
)
from pytest_llmeval.records import ScoreRecord, aggregate
from pytest_llmeval.report.json_report import DISTRIBUTION, REPORT_VERSION

__all__ = ["MergeError", "Merged", "Shard", "load_shards", "main", "merge_shards"]

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
    def run(self) -> Mapping[str, Any]:
        return _mapping(self.report.get("run"))

    @property
    def judge(self) -> Mapping[str, Any]:
        return _mapping(self.run.get("judge"))

    @property
    def settings(self) -> Mapping[str, Any]:
        return _mapping(self.section.get("settings"))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass
class Merged:
    """The merged report and what the terminal shows of it."""

    report: dict[str, Any]
    records: list[ScoreRecord]
    outcomes: list[GateOutcome]
    unmatched: list[str]
    statistics: list[TestStatistics]
    inconclusive: str
    comparison: Any = None
    #: why the merged run fails (empty: it passes)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- reading and checking -----------------------------------------------------------------------


def load_shards(paths: Sequence[Path]) -> list[Shard]:
    """Read the shard reports (JSON reports, or saved runs of shard runs), sorted by index.
    Raises :class:`MergeError`."""
    if not paths:
        raise MergeError("no shard reports given")
    shards = []
    for path in paths:
        try:
            data = load_report(path)
        except ComparisonError as exc:
            raise MergeError(str(exc)) from None
        report = report_of(data)
        section = report.get("shard")
        if not isinstance(section, Mapping):
            raise MergeError(
                f"{path}: not a shard report (no 'shard' section): run each shard with "
                "--llm-eval-shard I/N --llm-eval-report FILE"
            )
        index, count = section.get("index"), section.get("count")
        if not (isinstance(index, int) and isinstance(count, int) and 1 <= index <= count):
            raise MergeError(f"{path}: shard section has no valid index/count ({index}/{count})")
        shards.append(Shard(path, report, index, count))
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
        lambda s: (s.run.get("versions") or {}).get(DISTRIBUTION),
    )
    commits = [s for s in shards if s.run.get("git_commit")]
    _differ(commits, "git commit", lambda s: s.run.get("git_commit"))
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
    """The cases ``FILE::TEST[CASE]`` a shard ran: from its records and its gate book."""
    out = set()
    for r in shard.report.get("records") or []:
        out.add(_case_name(r.get("file"), r.get("test"), r.get("case_id")))
    for entry in shard.section.get("gate_book") or []:
        for case, _sample in entry.get("selected") or []:
            out.add(_case_name(entry.get("file"), entry.get("test"), case))
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


def _range(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    lo, hi = value
    return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))


def merge_shards(shards: Sequence[Shard], *, baseline: Path | None = None) -> Merged:
    """The merged report of checked shards (see the module docstring). Raises MergeError."""
    check_shards(shards)
    first = shards[0]
    settings = first.settings
    records = sorted(
        (ScoreRecord.from_json(r) for s in shards for r in s.report.get("records") or []),
        # the order a run's report has (LLMEvalSession.sorted_records)
        key=lambda r: (r.file, r.test, r.case_id or "", r.scorer, r.sample, r.index),
    )
    book = GateBook()
    for s in shards:
        try:
            book.add_json(s.section.get("gate_book") or [])
        except (ValueError, KeyError, TypeError) as exc:
            raise MergeError(f"{s.name}: gate book does not fit the other shards: {exc}") from None
    rules = [GateRule.from_json(r) for r in settings.get("gate_rules") or []]
    stopped = any(bool(s.section.get("stopped")) for s in shards)
    outcomes, unmatched = evaluate_gates(records, book, rules, stopped=stopped)
    ranges: dict[str, tuple[float, float] | None] = {}
    for s in shards:
        for scorer, value in (s.section.get("scorer_ranges") or {}).items():
            ranges.setdefault(scorer, _range(value))
    statistics = dataset_statistics(records, ranges=ranges)
    policy = str(settings.get("inconclusive") or "fail")

    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "run": _merged_run(shards, records),
        "aggregates": {name: agg.to_json() for name, agg in aggregate(records).items()},
        "records": [r.to_json() for r in records],
        "gates": [o.to_json() for o in outcomes],
        "gates_unmatched": list(unmatched),
        "gate_policy": {"inconclusive": policy},
        "statistics": [s.to_json() for s in statistics],
    }
    merged = Merged(report, records, outcomes, unmatched, statistics, policy)
    _compare(merged, shards, baseline)
    failures = merged.failures
    for s in shards:
        status = s.run.get("exitstatus")
        if isinstance(status, int) and status not in _HARMLESS:
            failures.append(f"shard {s.index} ({s.name}) exited {status}: its tests failed")
    failing = failing_outcomes(outcomes, policy)
    if failing:
        failures.append(f"{len(failing)} of {len(outcomes)} gate(s) do not pass")
    alpha = settings.get("fail_on_regression")
    if merged.comparison is not None and alpha is not None and merged.comparison.regressions:
        failures.append(
            f"{len(merged.comparison.regressions)} significant regression(s) "
            "(--llm-eval-fail-on-regression)"
        )
    statuses = [s.run.get("exitstatus") for s in shards]
    bad = [x for x in statuses if isinstance(x, int) and x not in _HARMLESS]
    if bad:
        report["run"]["exitstatus"] = bad[0]
    elif failures:
        report["run"]["exitstatus"] = 1
    elif all(x == 5 for x in statuses):
        report["run"]["exitstatus"] = 5
        failures.append("no test ran in any shard")
    else:
        report["run"]["exitstatus"] = 0
    report["merged"] = {
        "count": first.count,
        "shards": [
            {
                "index": s.index,
                "file": s.name,
                "started": s.run.get("started"),
                "finished": s.run.get("finished"),
                "exitstatus": s.run.get("exitstatus"),
                "cases": s.section.get("cases_in_shard"),
                "records": len(s.report.get("records") or []),
            }
            for s in shards
        ],
    }
    return merged


def _merged_run(shards: Sequence[Shard], records: Sequence[ScoreRecord]) -> dict[str, Any]:
    """The ``run`` section: the first shard's (keys a conftest added included), with the times,
    workers and served models of all shards."""
    run = dict(shards[0].run)
    starts = [s.run["started"] for s in shards if isinstance(s.run.get("started"), (int, float))]
    ends = [s.run["finished"] for s in shards if isinstance(s.run.get("finished"), (int, float))]
    if starts and ends:
        run["started"], run["finished"] = min(starts), max(ends)
        run["duration_s"] = run["finished"] - run["started"]
    run["workers"] = sum(int(s.run.get("workers") or 0) for s in shards)
    modes = {s.run.get("cache_mode") for s in shards}
    if "cache_mode" in run and len(modes) > 1:
        run["cache_mode"] = "mixed: " + ", ".join(sorted(str(m) for m in modes))
    if isinstance(run.get("judge"), Mapping):
        judge = dict(run["judge"])
        urls = {s.judge.get("base_url") for s in shards}
        judge["base_url"] = urls.pop() if len(urls) == 1 else None
        judge["served_models"] = sorted({m for r in records for m in r.judge_models})
        run["judge"] = judge
    return run


def _compare(merged: Merged, shards: Sequence[Shard], baseline: Path | None) -> None:
    """The comparison with the baseline the shards compared with (or ``baseline``)."""
    from pytest_llmeval.history import _report_comparison

    recorded = next(
        (s.report["comparison"] for s in shards if isinstance(s.report.get("comparison"), Mapping)),
        None,
    )
    if recorded is None and baseline is None:
        return
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
        base = load_report(path)
    except ComparisonError as exc:
        raise MergeError(f"--baseline: {exc}") from None
    inner = report_of(base)
    run = _mapping(inner.get("run"))
    if recorded is not None and baseline is None:
        started = _mapping(recorded.get("baseline")).get("started")
        if started is not None and run.get("started") != started:
            raise MergeError(
                f"{path} is not the baseline the shards compared with (it started at "
                f"{run.get('started')}, theirs at {started}); give it with --baseline PATH"
            )
    alpha = float(recorded.get("alpha", 0.05)) if recorded is not None else 0.05
    if recorded is not None:
        label = str(recorded.get("baseline_label"))
    else:
        label = f"run {base['number']}" if "number" in base else str(path)
    cmp = compare_reports(
        base, merged.report, alpha=alpha, baseline_label=label, current_label="this run"
    )
    state = {"comparison": cmp, "baseline_report": base, "baseline_path": str(path)}
    merged.report["comparison"] = _report_comparison(state, merged.report)
    merged.comparison = cmp


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


def write_merged(out: TextIO, merged: Merged, shards: Sequence[Shard], target: Path) -> None:
    from pytest_llmeval.compare import format_comparison
    from pytest_llmeval.report.gates import write_gates, write_statistics
    from pytest_llmeval.report.terminal import write_summary

    tr = _Terminal(out)
    tr.write_sep("=", f"llm-eval merge of {len(shards)} shards")
    for s in shards:
        sec = s.section
        tr.write_line(
            f"shard {s.index}/{s.count}: {s.name} ({sec.get('cases_in_shard')} cases, "
            f"{len(s.report.get('records') or [])} records, exit status {s.run.get('exitstatus')})"
        )
    if merged.records:
        write_summary(tr, merged.records, 0, report_written=True)
    if merged.statistics:
        write_statistics(tr, merged.statistics)
    if merged.outcomes or merged.unmatched:
        write_gates(tr, merged.outcomes, merged.unmatched, merged.inconclusive, 0)
    if merged.comparison is not None:
        tr.write_sep("=", "llm-eval comparison")
        for line in format_comparison(merged.comparison):
            tr.write_line(line)
    tr.write_line(f"llm-eval: JSON report written to {target}")
    if merged.failures:
        tr.write_line("verdict: FAIL: " + "; ".join(merged.failures))
    else:
        tr.write_line(f"verdict: PASS ({len(merged.outcomes)} gate(s) over the whole run)")


# -- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``merge SHARD.json... -o OUT``: exit 0 pass, 1 fail, 2 unusable input."""
    from pytest_llmeval.report.json_report import write_report

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
    args = parser.parse_args(list(argv))
    try:
        shards = load_shards(args.shards)
        merged = merge_shards(shards, baseline=args.baseline)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        write_report(args.output, merged.report)
        if args.html is not None:
            from pytest_llmeval.report.html import write_html

            write_html(args.html, merged.report)
    except OSError as exc:
        print(f"error: cannot write the merged report: {exc}", file=sys.stderr)
        return 2
    write_merged(sys.stdout, merged, shards, args.output)
    return 1 if merged.failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
