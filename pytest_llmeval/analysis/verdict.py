"""The run's verdict: everything a run's exit status depends on, decided in one place from the
typed run (:class:`pytest_llmeval.core.model.Run`), its gate outcomes and its comparison. pytest (at
the end of a session), ``merge`` (over shard reports) and ``compare`` all decide with
:func:`decide`, so they cannot disagree.

A run fails when its tests failed (pytest's own status), when a gate fails, errs, is
inconclusive (unless ``--llm-eval-inconclusive=pass``) or judged nothing because every case was
skipped (unless ``--llm-eval-skipped=pass``), and, with ``--llm-eval-fail-on-regression``, when
the comparison with the baseline shows a significant regression or cannot stand for "no
regression" (another instrument, nothing compared, an unusable baseline). A shard's gates and
comparison see a part of the run: they are partial and never fail it (``merge`` decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, final

from pytest_llmeval.analysis.compare import Comparison, comparison_failures
from pytest_llmeval.analysis.gates import GateOutcome, failing_outcomes
from pytest_llmeval.core.model import Run

__all__ = ["Verdict", "decide"]

#: pytest's exit statuses
OK, TESTS_FAILED, INTERRUPTED, INTERNAL_ERROR, USAGE_ERROR, NO_TESTS_COLLECTED = range(6)


@final
@dataclass(frozen=True)
class Verdict:
    """Whether the run passes, why not, and the exit status that says it."""

    exitstatus: int
    #: why the run fails (empty: it passes)
    failures: tuple[str, ...]
    #: a shard: its gates and comparison are partial, only its tests decide its status
    partial: bool = False
    regressions: int = 0
    #: the session stopped early (-x, --maxfail, Ctrl-C)
    stopped: bool = False

    @property
    def passed(self) -> bool:
        return self.exitstatus in (OK, NO_TESTS_COLLECTED) and not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exitstatus": self.exitstatus,
            "failures": list(self.failures),
            "partial": self.partial,
            "regressions": self.regressions,
            "stopped": self.stopped,
        }


_TEST_STATUS = {
    TESTS_FAILED: "tests failed",
    INTERRUPTED: "the run was interrupted",
    INTERNAL_ERROR: "pytest had an internal error",
    USAGE_ERROR: "usage error",
}


def decide(
    run: Run,
    outcomes: Sequence[GateOutcome],
    comparison: Comparison | None = None,
    *,
    baseline_problem: str | None = None,
    problems: Sequence[str] = (),
) -> Verdict:
    """The verdict of ``run`` (see the module docstring). ``run.exitstatus`` is pytest's own
    status before these verdicts (for a merge: the worst of the shards'). ``baseline_problem``:
    why the baseline asked for could not be read (the run still reports its own results, and
    fails with a usage error). ``problems``: anything else that keeps the run from being judged
    (each fails it)."""
    status = run.exitstatus if run.exitstatus is not None else OK
    failures: list[str] = []
    if status not in (OK, NO_TESTS_COLLECTED):
        failures.append(f"pytest exit status {status}: {_TEST_STATUS.get(status, 'failed')}")
    partial = run.shard is not None
    regressions = len(comparison.regressions) if comparison is not None else 0
    if baseline_problem is not None:
        failures.append(f"the baseline cannot be used: {baseline_problem}")
        if status in (OK, TESTS_FAILED, NO_TESTS_COLLECTED):
            status = USAGE_ERROR
    failures.extend(problems)
    if not partial:
        settings = run.settings
        failing = failing_outcomes(outcomes, settings.inconclusive, settings.skipped)
        if failing:
            counts: dict[str, int] = {}
            for o in failing:
                counts[o.verdict] = counts.get(o.verdict, 0) + 1
            what = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
            failures.append(f"{len(failing)} of {len(outcomes)} gate(s) do not pass ({what})")
        if settings.fail_on_regression is not None and comparison is not None:
            failures.extend(comparison_failures(comparison))
    if failures and status in (OK, NO_TESTS_COLLECTED):
        status = TESTS_FAILED
    return Verdict(
        exitstatus=status,
        failures=tuple(failures),
        partial=partial,
        regressions=regressions,
        stopped=run.stopped,
    )
