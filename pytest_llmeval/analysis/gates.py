"""Suite gates (issue 9): declaring them, checking them against the scorer registry, and judging
them from a :class:`pytest_llmeval.core.model.Run`.

A gate bounds a statistic of one scorer over every case and sample of one test function (the
mean score, the pass rate), optionally with a confidence level. It is declared with
``@pytest.mark.llm_eval_gate(scorer, ...)`` or, for a whole run, ``--llm-eval-gate
"FILE::TEST:SCORER:KEY=VALUE,..."`` (``FILE::TEST`` an fnmatch pattern; ini ``llm_eval_gates``).
A run gate only tightens: it adds a verdict, and never turns a failing case into a pass (only a
test's own markers let a gate decide instead of its per-case bounds).

:func:`evaluate_gates` and :func:`dataset_statistics` are pure functions of a run; pytest, ``merge``
and ``compare`` call them on the same :class:`~pytest_llmeval.core.model.Run` and so agree. What the
records cannot say (which items were selected, which ran, were skipped or were lost to a crash or
a stop) is the run's plan, made at collection.

No pytest import here: plugin.py turns :class:`GateError` into collection and usage errors.
The statistics themselves are :mod:`pytest_llmeval.core.stats`.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, final

from pytest_llmeval.analysis.agreement import record_sample
from pytest_llmeval.core.errors import GateError, LLMEvalError, describe_value
from pytest_llmeval.core.model import (
    INCONCLUSIVE_POLICIES,
    SKIPPED_POLICIES,
    GateRule,
    ItemKey,
    Run,
    TestPlan,
)
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import (
    REDUCERS,
    CaseSamples,
    GateResult,
    GateSpec,
    Sample,
    ScorerStats,
    evaluate_gate,
    scorer_stats,
    single_sample_stats,
)
from pytest_llmeval.engine.registry import ScorerRegistry

__all__ = [
    "GATE_KEYWORDS",
    "INCONCLUSIVE_POLICIES",
    "OUTCOME_VERDICTS",
    "SKIPPED_POLICIES",
    "UNREACHED",
    "GateOutcome",
    "GateRule",
    "TestGates",
    "TestStatistics",
    "case_samples",
    "dataset_statistics",
    "evaluate_gates",
    "failing_outcomes",
    "make_spec",
    "parse_gate_option",
    "resolve_spec",
]

#: The keywords of ``llm_eval_gate`` and of ``--llm-eval-gate``'s KEY=VALUE list.
GATE_KEYWORDS: tuple[str, ...] = (
    "min_mean",
    "max_mean",
    "min_pass_rate",
    "max_pass_rate",
    "confidence",
    "reducer",
    "max_errors",
    "min_kappa",
    "min_true_pass",
    "min_true_fail",
    "corrected",
)
_BOUNDS = ("min_mean", "max_mean", "min_pass_rate", "max_pass_rate")
#: bounds on the judge itself (issue 20): judged on labelled records only
_JUDGE_BOUNDS = ("min_kappa", "min_true_pass", "min_true_fail")
_EXAMPLE = "e.g. 'tests/test_qa.py::test_qa:factuality:min_mean=0.7,confidence=0.95'"


# -- declaring -----------------------------------------------------------------------------


def _bound(source: str, name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GateError(source, f"{name}= is {describe_value(value)}, not a number")
    if not math.isfinite(value):
        raise GateError(source, f"{name}= is {value!r}; give a finite number")
    return float(value)


def make_spec(scorer: Any, options: Mapping[str, Any], source: str) -> GateSpec:
    """A checked :class:`GateSpec` (scorer name as given; see :func:`resolve_spec`).

    Raises :class:`GateError` naming ``source`` for an unknown keyword, a non-numeric or
    non-finite bound, no bound at all, a confidence outside (0, 1), a pass-rate bound outside
    [0, 1], a minimum above the maximum, an unknown reducer or a bad ``max_errors``.
    """
    if not isinstance(scorer, str) or not scorer.strip():
        raise GateError(
            source,
            "the first argument must be the scorer's name, "
            "e.g. @pytest.mark.llm_eval_gate('factuality', min_mean=0.7)",
        )
    unknown = [k for k in options if k not in GATE_KEYWORDS]
    if unknown:
        raise GateError(
            source,
            f"unknown keyword {', '.join(repr(k) for k in unknown)}; a gate takes "
            f"{', '.join(GATE_KEYWORDS)}",
        )
    bounds = {k: _bound(source, k, options.get(k)) for k in _BOUNDS}
    judge = {k: _bound(source, k, options.get(k)) for k in _JUDGE_BOUNDS}
    if all(v is None for v in (*bounds.values(), *judge.values())):
        raise GateError(
            source,
            f"gate on {scorer!r} has no bound; give at least one of "
            f"{', '.join(_BOUNDS + _JUDGE_BOUNDS)}",
        )
    for k in ("min_pass_rate", "max_pass_rate"):
        v = bounds[k]
        if v is not None and not 0.0 <= v <= 1.0:
            raise GateError(source, f"{k}= is {v:g}, not a fraction in [0, 1] (90% is 0.9)")
    if bounds["min_pass_rate"] == 0.0 or bounds["max_pass_rate"] == 1.0:
        name = "min_pass_rate" if bounds["min_pass_rate"] == 0.0 else "max_pass_rate"
        raise GateError(
            source,
            f"{name}={bounds[name]:g} can never fail (a gate that cannot fail would only soften "
            "the test's per-case misses); give a bound strictly inside (0, 1)",
        )
    for lo, hi in (("min_mean", "max_mean"), ("min_pass_rate", "max_pass_rate")):
        a, b = bounds[lo], bounds[hi]
        if a is not None and b is not None and a > b:
            raise GateError(source, f"{lo}= ({a:g}) is above {hi}= ({b:g}): it can never pass")
    confidence = _bound(source, "confidence", options.get("confidence"))
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise GateError(
            source, f"confidence= is {confidence:g}; give a level strictly between 0 and 1 (0.95)"
        )
    reducer = options.get("reducer", "mean")
    if reducer not in REDUCERS:
        raise GateError(
            source, f"reducer= {reducer!r} is not a reducer; use one of {', '.join(REDUCERS)}"
        )
    max_errors = options.get("max_errors", 0)
    if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0:
        raise GateError(
            source,
            f"max_errors= is {describe_value(max_errors)}; give a whole number of cases >= 0",
        )
    corrected = options.get("corrected", False)
    if not isinstance(corrected, bool):
        raise GateError(source, f"corrected= is {describe_value(corrected)}; give True or False")
    if corrected and bounds["min_pass_rate"] is None and bounds["max_pass_rate"] is None:
        raise GateError(
            source,
            "corrected=True decides the pass rate on its estimate corrected for the judge's "
            "measured error; give min_pass_rate or max_pass_rate with it",
        )
    spec = GateSpec(
        scorer=scorer.strip(),
        min_mean=bounds["min_mean"],
        max_mean=bounds["max_mean"],
        min_pass_rate=bounds["min_pass_rate"],
        max_pass_rate=bounds["max_pass_rate"],
        confidence=confidence,
        reducer=str(reducer),
        max_errors=max_errors,
        source=source,
        min_kappa=judge["min_kappa"],
        min_true_pass=judge["min_true_pass"],
        min_true_fail=judge["min_true_fail"],
        corrected=corrected,
    )
    try:
        spec.validate()
    except ValueError as exc:
        raise GateError(source, str(exc)) from None
    return spec


def resolve_spec(spec: GateSpec, registry: ScorerRegistry) -> GateSpec:
    """``spec`` with its scorer's registered name, checked against the scorer: an unknown name
    (with close matches), a mean bound outside the scorer's declared range (it could never
    pass) or at or beyond its far end (it could never fail: ``min_mean=0`` on a 0..1 scorer) is
    a :class:`GateError`."""
    from pytest_llmeval.engine.scoring import check_bound_range

    try:
        cls = registry.get(spec.scorer)
        check_bound_range(cls, spec.min_mean, spec.max_mean, ("min_mean", "max_mean"))
    except LLMEvalError as exc:
        raise GateError(spec.source, str(exc)) from None
    lo, hi = float(cls.score_range[0]), float(cls.score_range[1])
    for name, bound, vacuous in (
        ("min_mean", spec.min_mean, spec.min_mean is not None and spec.min_mean <= lo),
        ("max_mean", spec.max_mean, spec.max_mean is not None and spec.max_mean >= hi),
    ):
        if vacuous:
            raise GateError(
                spec.source,
                f"{name}={bound:g} can never fail: {cls.name} scores lie in [{lo:g}, {hi:g}] "
                "(a gate that cannot fail would only soften the test's per-case misses)",
            )
    # The scorer's range keeps a mean interval honest when every case scored alike.
    return dataclasses.replace(spec, scorer=cls.name, score_range=(lo, hi))


def _option_value(source: str, key: str, text: str) -> Any:
    if key == "reducer":
        return text
    if key == "corrected":
        word = text.lower()
        if word not in ("true", "false", "1", "0", "yes", "no"):
            raise GateError(source, f"corrected={text!r} is not true or false")
        return word in ("true", "1", "yes")
    if key == "max_errors":
        try:
            return int(text)
        except ValueError:
            raise GateError(source, f"max_errors={text!r} is not a whole number") from None
    try:
        return float(text)
    except ValueError:
        raise GateError(source, f"{key}={text!r} is not a number") from None


def parse_gate_option(text: str, origin: str = "--llm-eval-gate") -> GateRule:
    """Parse ``FILE::TEST:SCORER:KEY=VALUE[,KEY=VALUE...]``. Raises :class:`GateError`."""
    source = f"{origin} {text!r}"
    parts = text.strip().rsplit(":", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts) or "=" not in parts[2]:
        raise GateError(source, f"must be FILE::TEST:SCORER:KEY=VALUE[,KEY=VALUE...], {_EXAMPLE}")
    pattern, scorer, rest = (p.strip() for p in parts)
    options: dict[str, Any] = {}
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise GateError(source, f"{item!r} must be KEY=VALUE, {_EXAMPLE}")
        if key not in GATE_KEYWORDS:
            raise GateError(
                source, f"unknown keyword {key!r}; a gate takes {', '.join(GATE_KEYWORDS)}"
            )
        options[key] = _option_value(source, key, value.strip())
    return GateRule(pattern, make_spec(scorer, options, source))


# -- worker side: what a test function's gates are -------------------------------------------


@final
@dataclass
class TestGates:
    """The gates of one test function, found at collection (worker side), with what the plan
    needs: the dataset size, the repeat, and which scorers the test's own markers gate."""

    __test__ = False  # not a test class

    specs: list[GateSpec] = field(default_factory=list)
    total: int | None = None  # dataset cases, when the test has a dataset
    repeat: int = 1
    #: scorers gated by the test's own ``llm_eval_gate`` markers
    marker_scorers: frozenset[str] = frozenset()

    @property
    def scorers(self) -> frozenset[str]:
        return frozenset(s.scorer for s in self.specs)


# -- judging (pure functions of a Run) --------------------------------------------------------


#: verdicts of a gate outcome: the statistic's verdicts, and "skipped" (every case skipped)
OUTCOME_VERDICTS: tuple[str, ...] = ("pass", "fail", "inconclusive", "error", "skipped")


@final
@dataclass(frozen=True)
class GateOutcome:
    """The verdict of one gate on one test function (``result`` None when there was nothing to
    compute, with ``problem`` saying why)."""

    test: str  # "FILE::TEST", or the pattern of a run gate that gated nothing
    spec: GateSpec
    verdict: str
    result: GateResult | None = None
    note: str | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _json_safe(self._json())  # type: ignore[no-any-return]

    def _json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "scorer": self.spec.scorer,
            "source": self.spec.source,
            "verdict": self.verdict,
            "note": self.note,
            "problem": self.problem,
            "spec": self.spec.to_json(),
            "result": self.result.to_json() if self.result is not None else None,
        }


def _json_safe(value: Any) -> Any:
    """JSON has no infinity (reports are written with allow_nan=False): a non-finite float, such
    as the open end of an unbounded scorer's range, becomes null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _case_key(file: str, test: str, case_id: str | None) -> str:
    return f"{file}::{test}" + (f"[{case_id}]" if case_id is not None else "")


def case_samples(
    records: Iterable[ScoreRecord],
    lost: Mapping[ItemKey, str] | None = None,
    file: str = "",
    test: str = "",
) -> list[CaseSamples]:
    """The records of one scorer in one test as cases (key ``file::test[case_id]``) of samples,
    in a stable order. An errored record is an unscored sample, never a score; so is each item
    in ``lost`` (selected and never reported, or run without scoring: mapped to why), which makes
    its case unscored."""
    groups: dict[str | None, list[ScoreRecord]] = {}
    for r in records:
        group = groups.get(r.case_id)
        if group is None:
            groups[r.case_id] = [r]
        else:
            group.append(r)
    missing: dict[str | None, list[tuple[int, str]]] = {}
    for (case_id, sample), why in (lost or {}).items():
        missing.setdefault(case_id, []).append((sample, why))
    out = []
    ids = set(groups) | set(missing) if missing else groups
    for case_id in sorted(ids, key=lambda c: (c is not None, c or "")):
        recs = groups.get(case_id, [])
        if len(recs) > 1:
            recs = sorted(recs, key=lambda r: (r.sample, r.index))
        samples = [record_sample(r) for r in recs]
        if missing:
            samples += [
                Sample(score=None, passed=None, error=why, sample=sample)
                for sample, why in sorted(missing.get(case_id, ()))
            ]
        if len(recs) == 1 and recs[0].error is None:
            bounded: ScoreRecord | None = recs[0]  # (one record per case: no repeat)
        else:
            bounded = next((r for r in recs if r.error is None), recs[0] if recs else None)
        f, t = (recs[0].file, recs[0].test) if recs else (file, test)
        out.append(
            CaseSamples(
                case=_case_key(f, t, case_id),
                samples=tuple(samples),
                min=bounded.min if bounded is not None else None,
                max=bounded.max if bounded is not None else None,
            )
        )
    return out


def _missing(plan: TestPlan, scorer: str, recs: Sequence[ScoreRecord]) -> dict[ItemKey, str]:
    """The selected items of a gated test that bring no score of ``scorer``: those never
    reported, and those that ran without scoring it (``if answer: assert_score(...)``): each
    is an unscored sample, never a case left out."""
    scored = {(r.case_id, r.sample) for r in recs}
    out = {item: f"never reported: {why}" for item, why in plan.lost.items()}
    for item in plan.ran:
        if item not in scored:
            out[item] = f"ran without a {scorer} score"
    return out


def _lost_reasons(lost: Mapping[ItemKey, str]) -> str:
    counts: dict[str, int] = {}
    for why in lost.values():
        counts[why] = counts.get(why, 0) + 1
    return "; ".join(
        f"{n} sample{'' if n == 1 else 's'}: {why}" for why, n in sorted(counts.items())
    )


def _subset_note(
    plan: TestPlan,
    scorer: str,
    recs: Sequence[ScoreRecord],
    shard: tuple[int, int] | None,
) -> str | None:
    """Say when a gate saw fewer cases or samples than the test has: deselected (-k, -m,
    --deselect, another shard), skipped, lost (crash, stop: counted as unscored), or items that
    ran without recording the scorer. A gate over a subset must say so."""
    selected_cases = {c for c, _ in plan.selected}
    skipped_cases = (
        {c for c, _ in plan.skipped} - {c for c, _ in plan.ran} - {c for c, _ in plan.lost}
    )
    lost_cases = {c for c, _ in plan.lost}
    ran_cases = {c for c, _ in plan.ran}
    scored_cases = {r.case_id for r in recs}
    total = plan.total
    parts = []
    if total is not None and len(selected_cases) < total:
        why = "not selected: -k/-m/--deselect subset"
        if shard is not None:
            why = f"in the other shards (this is shard {shard[0]}/{shard[1]}) or not selected"
        parts.append(f"{total - len(selected_cases)} {why}")
    if skipped_cases:
        parts.append(f"{len(skipped_cases)} skipped")
    if lost_cases:
        parts.append(
            f"{len(lost_cases)} never reported, counted as unscored: {_lost_reasons(plan.lost)}"
        )
    unrecorded = ran_cases - scored_cases - lost_cases
    if unrecorded:
        parts.append(f"{len(unrecorded)} ran without a {scorer} score, counted as unscored")
    whole = total if total is not None else len(selected_cases)
    judged = len(scored_cases | lost_cases | unrecorded)
    if parts:
        return f"gate over {judged} of {whole} cases ({'; '.join(parts)})"
    samples = {(r.case_id, r.sample) for r in recs}
    if total is not None and plan.repeat > 1 and len(samples) < total * plan.repeat:
        gap = total * plan.repeat - len(samples)
        return (
            f"gate over {len(samples)} of {total * plan.repeat} samples ({gap} missing: "
            "-k/deselect subset, skipped or unscored samples)"
        )
    return None


#: metadata of the error record the plugin adds for a gated scorer a failed test never reached
UNREACHED = {"unreached": True}


def _unreached(rec: ScoreRecord) -> bool:
    return bool(rec.metadata.get("unreached"))


def _nearest(pattern: str, run: Run) -> str:
    """Where a run gate's pattern might have meant to point: the collected tests it matches but
    that were not selected, else the nearest test ids."""
    selected = {p.name for p in run.plan}
    names = sorted(set(run.collected) | selected)
    deselected = [n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in selected]
    if deselected:
        shown = ", ".join(deselected[:3]) + (" ..." if len(deselected) > 3 else "")
        return (
            f"it matches {shown}, not selected in this run (-k, -m, --deselect, the paths "
            "given, or another shard)"
        )
    close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.4)
    if close:
        return f"nearest test ids: {', '.join(close)}"
    if names:
        return f"no test id is close; collected: {', '.join(names[:3])}" + (
            " ..." if len(names) > 3 else ""
        )
    return "no test was collected"


def evaluate_gates(run: Run) -> list[GateOutcome]:
    """Judge every gate of every gated test in ``run``'s plan, in a stable order.

    * A gate on a test whose every selected item was skipped is ``skipped`` (it judged nothing;
      ``--llm-eval-skipped`` says whether that fails the run).
    * Items selected but never reported (a crashed worker, a run stopped by -x or Ctrl-C) are
      unscored samples: their cases count against ``max_errors``, never as "not selected".
    * A gate on a test without any record of its scorer is ``error``; for a wildcard run gate
      that is judged over all its tests: an error only when none of them recorded the scorer.
    * A run gate (``--llm-eval-gate``, ini ``llm_eval_gates``) that matched no selected test is
      an ``error`` outcome naming the pattern and the nearest test ids: a gate that was asked for
      and judged nothing does not pass.

    In a shard (``run.shard``) the outcomes are the shard's own; the caller reports them as
    partial, and ``merge`` judges the whole run's plan.
    """
    by_test: dict[tuple[str, str, str], list[ScoreRecord]] = {}
    for r in run.records:
        by_test.setdefault((r.file, r.test, r.scorer), []).append(r)
    rules = run.settings.gate_rules
    wildcard = {rule.spec.source for rule in rules if rule.wildcard}
    outcomes: list[GateOutcome] = []
    used: set[str] = set()
    matched: dict[str, int] = {}
    skipped_only: dict[str, int] = {}
    for plan in sorted(run.plan, key=lambda p: (p.file, p.test)):
        if not plan.gates or not plan.selected:
            continue
        name = plan.name
        all_skipped = not plan.ran and not plan.lost
        for spec in sorted(plan.gates, key=lambda s: (s.scorer, s.source)):
            matched[spec.source] = matched.get(spec.source, 0) + 1
            if all_skipped:
                if spec.source in wildcard:
                    skipped_only[spec.source] = skipped_only.get(spec.source, 0) + 1
                    continue
                outcomes.append(
                    GateOutcome(
                        name,
                        spec,
                        "skipped",
                        problem=f"all {len(plan.skipped)} selected item(s) were skipped: "
                        "the gate judged nothing",
                    )
                )
                continue
            recs = by_test.get((plan.file, plan.test, spec.scorer), [])
            reached = [r for r in recs if not _unreached(r)]
            if not reached and not plan.lost:
                if spec.source in wildcard:
                    continue
                problem = f"no records of scorer {spec.scorer!r} in test {name}"
                if recs:
                    problem += f" ({len(recs)} samples failed before reaching it)"
                outcomes.append(GateOutcome(name, spec, "error", problem=problem))
                continue
            used.add(spec.source)
            cases = case_samples(recs, _missing(plan, spec.scorer, recs), plan.file, plan.test)
            result = evaluate_gate(spec, cases)
            outcomes.append(
                GateOutcome(
                    name,
                    spec,
                    result.verdict,
                    result,
                    note=_subset_note(plan, spec.scorer, recs, run.shard),
                )
            )
    for rule in rules:
        source = rule.spec.source
        if source in used:
            continue
        if source in matched:
            if source not in wildcard:
                continue  # its one test's outcome is already there
            if skipped_only.get(source) == matched[source]:
                outcomes.append(
                    GateOutcome(
                        rule.pattern,
                        rule.spec,
                        "skipped",
                        problem=f"every selected item of the {matched[source]} test(s) "
                        f"matching {rule.pattern!r} was skipped: the gate judged nothing",
                    )
                )
            else:
                outcomes.append(
                    GateOutcome(
                        rule.pattern,
                        rule.spec,
                        "error",
                        problem=f"no records of scorer {rule.spec.scorer!r} in any of the "
                        f"{matched[source]} test(s) matching {rule.pattern!r}",
                    )
                )
            continue
        outcomes.append(
            GateOutcome(
                rule.pattern,
                rule.spec,
                "error",
                problem=f"run gate {rule.pattern!r} matched no selected test, so it judged "
                f"nothing; {_nearest(rule.pattern, run)}",
            )
        )
    return outcomes


def failing_outcomes(
    outcomes: Iterable[GateOutcome], inconclusive: str, skipped: str = "fail"
) -> list[GateOutcome]:
    """The outcomes that fail the run: fail and error always, inconclusive unless the policy
    (``--llm-eval-inconclusive``) is ``pass``, skipped unless ``--llm-eval-skipped`` is
    ``pass``."""
    bad = {"fail", "error"}
    if inconclusive != "pass":
        bad.add("inconclusive")
    if skipped != "pass":
        bad.add("skipped")
    return [o for o in outcomes if o.verdict in bad]


@final
@dataclass(frozen=True)
class TestStatistics:
    """Per-scorer statistics of one dataset test (see
    :class:`pytest_llmeval.core.stats.ScorerStats`: the mean and pass rate over cases, each case's
    samples reduced by ``stats.reducer``)."""

    __test__ = False  # not a test class

    test: str
    stats: ScorerStats

    def to_json(self) -> dict[str, Any]:
        return _json_safe({"test": self.test, **self.stats.to_json()})  # type: ignore[no-any-return]


def _reducer_for(plan: TestPlan | None, scorer: str) -> tuple[str, str | None]:
    """The reducer the statistics of ``scorer`` in a test use: its gates' when they agree on
    one (so the statistics and the gate print the same numbers), else ``mean``."""
    if plan is None:
        return "mean", None
    reducers = {s.reducer for s in plan.gates if s.scorer == scorer}
    if len(reducers) == 1:
        return reducers.pop(), "as its gate"
    return "mean", None


#: what :func:`single_sample_stats` reads of a record (an errored record is unscored there)
_SAMPLE_FIELDS = attrgetter("score", "passed", "error", "min", "max")


def dataset_statistics(run: Run) -> list[TestStatistics]:
    """Statistics for every scorer of every dataset test (records with a case location), over
    the run's cases: each case's samples reduced (the scorer's gate's reducer in that test, when
    it has one, else the mean), the mean of the case scores with its interval, the pass rate of
    the case verdicts with its Wilson interval. The scorer's declared range comes from the
    run's instruments."""
    groups: dict[tuple[str, str, str], list[ScoreRecord]] = {}
    for r in run.records:
        if r.where is not None:
            groups.setdefault((r.file, r.test, r.scorer), []).append(r)
    out = []
    for (file, test, scorer), recs in sorted(groups.items()):
        plan = run.test_plan(file, test)
        reducer, why = _reducer_for(plan, scorer)
        gated = plan is not None and scorer in plan.scorers_gated()
        missing = _missing(plan, scorer, recs) if plan is not None and gated else None
        if not missing and len({r.case_id for r in recs}) == len(recs):
            # one sample per case (no repeat, one assertion of the scorer): the same
            # statistics without a sample object per case
            stats = single_sample_stats(
                scorer,
                map(_SAMPLE_FIELDS, recs),
                run.settings.confidence,
                run.score_range(scorer),
                reducer=reducer,
                reducer_note=why,
            )
        else:
            stats = scorer_stats(
                scorer,
                case_samples(recs, missing, file, test),
                run.settings.confidence,
                run.score_range(scorer),
                reducer=reducer,
                reducer_note=why,
            )
        out.append(TestStatistics(f"{file}::{test}", stats))
    return out
