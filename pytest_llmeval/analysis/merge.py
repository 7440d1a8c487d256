"""Merging shards (issue 11), as pure functions: the shards' runs checked against each other and
merged into the run of the whole suite (:func:`merge_runs`). The command that reads the files and
writes the merged report is :mod:`pytest_llmeval.cli.merge`
(``python -m pytest_llmeval merge SHARD.json... -o report.json``): the JSON reports of
the shards of one run (``--llm-eval-shard i/n``, see :mod:`pytest_llmeval.plugin.shard`) made into
the report of the whole run, in the format of an unsharded run's report (``report`` and ``compare``
read it), and its verdict.

The shards are checked first; any of these is an error naming the files and what differs (exit
status 2, nothing written): a file that is not a shard report, shards of different shard counts,
a shard index given twice or missing, different judge settings (model, temperature, seed, mode),
gate settings (run gates, inconclusive policy, repeat, strict cases, fail-on-regression),
plugin version, scorer versions, git commit or collected tests (the collection digest), a case
(``FILE::TEST[CASE]``) in two shards, or shards compared with different baselines.

Every shard report is read and validated (:func:`pytest_llmeval.stores.run_files.load_run`: a
malformed one is an error naming the file and the field). The shards' runs are then merged into one
:class:`pytest_llmeval.core.model.Run` (their records, the union of their plans and instruments,
their verdict settings) and everything is decided over it with the functions pytest uses at the end
of an unsharded run: the gates (:func:`pytest_llmeval.analysis.gates.evaluate_gates`), the
statistics, the comparison with the baseline (:func:`pytest_llmeval.analysis.compare.compare_runs`)
and the verdict (:func:`pytest_llmeval.analysis.verdict.decide`). Records are sorted as a run sorts
them, so the numbers are the unsharded run's to the last bit, and so are the verdicts (a property
test checks it).

Exit status: 0 when the merged run passes, 1 when it fails: a gate fails, errs, is inconclusive
or skipped (unless the shards ran with ``--llm-eval-inconclusive=pass`` / ``--llm-eval-skipped=
pass``), a significant regression or an incomparable scorer under
``--llm-eval-fail-on-regression``, or a shard whose own tests failed (its recorded exit status;
the unsharded run would have failed too). 2 for unusable input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmeval.core.model import Run, RunFileError, TestPlan, sort_key
from pytest_llmeval.core.version import DISTRIBUTION
from pytest_llmeval.stores.run_files import load_run

__all__ = ["MergeError", "Shard", "check_shards", "load_shards", "merge_runs"]

#: the judge settings every shard must share (``run.judge`` of the report)
JUDGE_KEYS = ("model", "temperature", "seed", "mode")
#: pytest exit statuses of a shard that do not fail the merged run: OK, no tests collected
HARMLESS_EXIT = (0, 5)


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
        return as_mapping(self.report.get("run"))

    @property
    def judge(self) -> Mapping[str, Any]:
        return as_mapping(self.info.get("judge"))

    @property
    def settings(self) -> Mapping[str, Any]:
        return as_mapping(self.section.get("settings"))

    @property
    def exitstatus(self) -> int | None:
        """The shard's pytest status before its own (partial) verdicts."""
        verdict = as_mapping(self.report.get("verdict"))
        status = verdict.get("pytest_exitstatus", self.info.get("exitstatus"))
        return status if isinstance(status, int) else None


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# -- reading and checking -----------------------------------------------------------------------


def load_shards(paths: Sequence[Path]) -> list[Shard]:
    """Read and validate the shard reports (JSON reports, or saved runs of shard runs), sorted
    by index. Raises :class:`MergeError`."""
    from pytest_llmeval.stores.run_files import report_of

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
    base = as_mapping(cmp.get("baseline"))
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
    bad = [x for x in statuses if isinstance(x, int) and x not in HARMLESS_EXIT]
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


# -- terminal -----------------------------------------------------------------------------------


# -- command line -------------------------------------------------------------------------------
