"""Suite gates (issue 9): declaring them, checking them against the scorer registry, and judging
them on the controller from the run's merged records.

A gate bounds a statistic of one scorer over every case and sample of one test function (the
mean score, the pass rate), optionally with a confidence level. It is declared with
``@pytest.mark.llm_eval_gate(scorer, ...)`` or, for a whole run, ``--llm-eval-gate
"FILE::TEST:SCORER:KEY=VALUE,..."`` (``FILE::TEST`` an fnmatch pattern; ini ``llm_eval_gates``).

Gates are judged from records only, on the controller: the records reach it the same way with and
without xdist, so ``-n 2`` and ``-n 0`` give the same verdicts. What the controller cannot see
in the records (which gates a test has, how many cases its dataset has, which items were skipped)
the workers put on each gated item's teardown report as :func:`item_info`.

No pytest import here: plugin.py turns :class:`GateError` into collection and usage errors.
The statistics themselves are :mod:`pytest_llmeval.stats`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from pytest_llmeval.errors import GateError, LLMEvalError, describe_value
from pytest_llmeval.records import ScoreRecord
from pytest_llmeval.registry import ScorerRegistry
from pytest_llmeval.stats import (
    REDUCERS,
    CaseSamples,
    GateResult,
    GateSpec,
    Sample,
    ScorerStats,
    evaluate_gate,
    scorer_stats,
)

__all__ = [
    "GATE_KEYWORDS",
    "INCONCLUSIVE_POLICIES",
    "GateBook",
    "GateOutcome",
    "GateRule",
    "TestGates",
    "TestStatistics",
    "case_samples",
    "dataset_ranges",
    "dataset_statistics",
    "evaluate_gates",
    "failing_outcomes",
    "item_info",
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
)
_BOUNDS = ("min_mean", "max_mean", "min_pass_rate", "max_pass_rate")
#: ``--llm-eval-inconclusive``: what an inconclusive gate does to the exit status.
INCONCLUSIVE_POLICIES: tuple[str, ...] = ("fail", "pass")
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
    if all(v is None for v in bounds.values()):
        raise GateError(
            source,
            f"gate on {scorer!r} has no bound; give at least one of {', '.join(_BOUNDS)}",
        )
    for k in ("min_pass_rate", "max_pass_rate"):
        v = bounds[k]
        if v is not None and not 0.0 <= v <= 1.0:
            raise GateError(source, f"{k}= is {v:g}, not a fraction in [0, 1] (90% is 0.9)")
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
    )
    try:
        spec.validate()
    except ValueError as exc:
        raise GateError(source, str(exc)) from None
    return spec


def resolve_spec(spec: GateSpec, registry: ScorerRegistry) -> GateSpec:
    """``spec`` with its scorer's registered name, checked against the scorer: an unknown name
    (with close matches) or a mean bound outside the scorer's declared range is a
    :class:`GateError`. A pass-rate bound needs no scorer to check it."""
    from pytest_llmeval.assertions import _check_bound_range

    try:
        cls = registry.get(spec.scorer)
        _check_bound_range(cls, spec.min_mean, spec.max_mean, ("min_mean", "max_mean"))
    except LLMEvalError as exc:
        raise GateError(spec.source, str(exc)) from None
    # The scorer's range keeps a mean interval honest when every case scored alike.
    return dataclasses.replace(
        spec, scorer=cls.name, score_range=(float(cls.score_range[0]), float(cls.score_range[1]))
    )


@final
@dataclass(frozen=True)
class GateRule:
    """A gate given for a run (``--llm-eval-gate`` or ini ``llm_eval_gates``): it applies to
    each test function whose ``FILE::TEST`` (as in node ids) matches ``pattern`` (fnmatch)."""

    pattern: str
    spec: GateSpec

    @property
    def wildcard(self) -> bool:
        return any(ch in self.pattern for ch in "*?[")

    def matches(self, file: str, test: str) -> bool:
        return fnmatch.fnmatchcase(f"{file}::{test}", self.pattern)

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "spec": _json_safe(self.spec.to_json())}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateRule:
        return cls(str(data["pattern"]), _spec_from_json(data["spec"]))


def _option_value(source: str, key: str, text: str) -> Any:
    if key == "reducer":
        return text
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


# -- worker side: what the controller needs besides the records ------------------------------


@final
@dataclass
class TestGates:
    """The gates of one test function, found at collection (worker side), plus what the
    controller needs to say "gate over 12 of 40 cases"."""

    __test__ = False  # not a test class

    specs: list[GateSpec] = field(default_factory=list)
    total: int | None = None  # dataset cases, when the test has a dataset
    repeat: int = 1

    @property
    def scorers(self) -> frozenset[str]:
        return frozenset(s.scorer for s in self.specs)


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


def item_info(
    file: str, test: str, case: str | None, sample: int, ran: bool, gates: TestGates
) -> str:
    """The JSON a gated item's teardown report carries to the controller."""
    return json.dumps(
        {
            "file": file,
            "test": test,
            "case": case,
            "sample": sample,
            "ran": ran,
            "total": gates.total,
            "repeat": gates.repeat,
            "gates": [_json_safe(s.to_json()) for s in gates.specs],
        },
        allow_nan=False,
    )


# -- controller side -------------------------------------------------------------------------


@dataclass
class _TestRun:
    specs: list[GateSpec]
    total: int | None
    repeat: int
    selected: set[tuple[str | None, int]] = field(default_factory=set)
    ran: set[tuple[str | None, int]] = field(default_factory=set)


def _spec_from_json(data: Mapping[str, Any]) -> GateSpec:
    known = {f.name for f in dataclasses.fields(GateSpec)}
    values = {k: v for k, v in data.items() if k in known}
    if values.get("score_range") is not None:
        lo, hi = values["score_range"]  # an unbounded side travels as null
        values["score_range"] = (
            -math.inf if lo is None else float(lo),
            math.inf if hi is None else float(hi),
        )
    return GateSpec(**values)


def _item_order(item: tuple[str | None, int]) -> tuple[bool, str, int]:
    return (item[0] is not None, item[0] or "", item[1])


@final
class GateBook:
    """Controller side: the gated tests and which of their items were run, from the item infos
    of the teardown reports (in any order: the same book results with and without xdist)."""

    def __init__(self) -> None:
        self.tests: dict[tuple[str, str], _TestRun] = {}

    def add(self, payload: str) -> None:
        data = json.loads(payload)
        key = (str(data["file"]), str(data["test"]))
        run = self.tests.get(key)
        if run is None:
            specs = [_spec_from_json(s) for s in data["gates"]]
            run = _TestRun(specs, data["total"], int(data["repeat"]))
            self.tests[key] = run
        item = (data["case"], int(data["sample"]))
        run.selected.add(item)
        if data["ran"]:
            run.ran.add(item)

    def to_json(self) -> list[dict[str, Any]]:
        """The book as JSON (a shard's report carries it, so that ``merge`` can judge the gates
        of the whole run): per gated test its gates, dataset size, repeat and the items
        ``[case, sample]`` selected and run."""
        return [
            {
                "file": file,
                "test": test,
                "gates": [_json_safe(s.to_json()) for s in run.specs],
                "total": run.total,
                "repeat": run.repeat,
                "selected": [[c, s] for c, s in sorted(run.selected, key=_item_order)],
                "ran": [[c, s] for c, s in sorted(run.ran, key=_item_order)],
            }
            for (file, test), run in sorted(self.tests.items())
        ]

    def add_json(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Add the items of another book's :meth:`to_json` (another shard of the same run).
        Raises ValueError when a test's gates, dataset size or repeat differ from the ones
        already in the book (the books are not of one run)."""
        for e in entries:
            key = (str(e["file"]), str(e["test"]))
            specs = [_spec_from_json(s) for s in e["gates"]]
            total = None if e["total"] is None else int(e["total"])
            repeat = int(e["repeat"])
            run = self.tests.get(key)
            if run is None:
                run = self.tests[key] = _TestRun(specs, total, repeat)
            elif (run.specs, run.total, run.repeat) != (specs, total, repeat):
                raise ValueError(
                    f"{key[0]}::{key[1]} has other gates, dataset size or repeat here "
                    f"({len(specs)} gates, {total} cases, repeat {repeat}) than before "
                    f"({len(run.specs)} gates, {run.total} cases, repeat {run.repeat})"
                )
            run.selected.update((c, int(s)) for c, s in e["selected"])
            run.ran.update((c, int(s)) for c, s in e["ran"])


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


def _case_key(file: str, test: str, case_id: str | None) -> str:
    return f"{file}::{test}" + (f"[{case_id}]" if case_id is not None else "")


def case_samples(records: Iterable[ScoreRecord]) -> list[CaseSamples]:
    """The records of one scorer in one test as cases (key ``file::test[case_id]``) of samples,
    in a stable order. An errored record is an unscored sample, never a score."""
    groups: dict[str | None, list[ScoreRecord]] = {}
    for r in records:
        groups.setdefault(r.case_id, []).append(r)
    out = []
    for case_id in sorted(groups, key=lambda c: (c is not None, c or "")):
        recs = sorted(groups[case_id], key=lambda r: (r.sample, r.index))
        bounded = next((r for r in recs if r.error is None), recs[0])
        out.append(
            CaseSamples(
                case=_case_key(recs[0].file, recs[0].test, case_id),
                samples=tuple(
                    Sample(
                        score=None if r.error is not None else r.score,
                        passed=None if r.error is not None else r.passed,
                        error=r.error,
                        sample=r.sample,
                    )
                    for r in recs
                ),
                min=bounded.min,
                max=bounded.max,
            )
        )
    return out


def _subset_note(
    run: _TestRun,
    scorer: str,
    recs: Sequence[ScoreRecord],
    stopped: bool,
    shard: tuple[int, int] | None = None,
) -> str | None:
    """Say when a gate saw fewer cases or samples than the test has (``-k``, ``--deselect``,
    skips, items that ended before scoring): a gate over a subset must say so."""
    cases = {r.case_id for r in recs}
    samples = {(r.case_id, r.sample) for r in recs}
    selected_cases = {c for c, _ in run.selected}
    ran_cases = {c for c, _ in run.ran}
    total = run.total
    parts = []
    if total is not None and len(selected_cases) < total:
        why = "not run: the run stopped early" if stopped else "not selected: -k/deselect subset"
        if shard is not None and not stopped:
            why = f"in the other shards (this is shard {shard[0]}/{shard[1]}) or not selected"
        parts.append(f"{total - len(selected_cases)} {why}")
    if len(selected_cases) > len(ran_cases):
        parts.append(f"{len(selected_cases) - len(ran_cases)} skipped")
    if len(ran_cases) > len(cases):
        parts.append(f"{len(ran_cases) - len(cases)} ran without a {scorer} record")
    whole = total if total is not None else len(selected_cases)
    if parts:
        return f"gate over {len(cases)} of {whole} cases ({'; '.join(parts)})"
    if total is not None and run.repeat > 1 and len(samples) < total * run.repeat:
        gap = total * run.repeat - len(samples)
        why = "-k/deselect subset, skipped or unscored samples"
        if stopped:
            why = "the run stopped early, " + why
        return f"gate over {len(samples)} of {total * run.repeat} samples ({gap} missing: {why})"
    return None


def evaluate_gates(
    records: Sequence[ScoreRecord],
    book: GateBook,
    rules: Sequence[GateRule],
    *,
    stopped: bool = False,
    shard: tuple[int, int] | None = None,
) -> tuple[list[GateOutcome], list[str]]:
    """Judge every gate of every gated test that ran (skipped tests have no verdict), in a
    stable order. Returns the outcomes and the run gates (``rules``) that matched no test that
    ran, for a note (a ``-k`` run or a run of other files legitimately matches none).

    A gate on a test without any record of its scorer is an ``error`` outcome ("no records of
    scorer X in test Y"); for a wildcard run gate that is judged over all its tests: it is an
    error only when none of them recorded the scorer. ``stopped``: the session stopped early
    (-x, --maxfail), so missing items were not run rather than deselected. ``shard``: (i, n) of
    a shard run (``--llm-eval-shard``), whose missing cases are mostly in the other shards.
    """
    by_test: dict[tuple[str, str, str], list[ScoreRecord]] = {}
    for r in records:
        by_test.setdefault((r.file, r.test, r.scorer), []).append(r)
    wildcard = {rule.spec.source for rule in rules if rule.wildcard}
    outcomes: list[GateOutcome] = []
    used: set[str] = set()
    matched: dict[str, int] = {}
    for (file, test), run in sorted(book.tests.items()):
        if not run.ran:
            continue  # every item skipped or deselected: nothing to judge
        name = f"{file}::{test}"
        for spec in sorted(run.specs, key=lambda s: (s.scorer, s.source)):
            matched[spec.source] = matched.get(spec.source, 0) + 1
            recs = by_test.get((file, test, spec.scorer), [])
            if not any(not _unreached(r) for r in recs):
                if spec.source in wildcard:
                    continue
                problem = f"no records of scorer {spec.scorer!r} in test {name}"
                if recs:
                    problem += f" ({len(recs)} samples failed before reaching it)"
                outcomes.append(GateOutcome(name, spec, "error", problem=problem))
                continue
            used.add(spec.source)
            result = evaluate_gate(spec, case_samples(recs))
            outcomes.append(
                GateOutcome(
                    name,
                    spec,
                    result.verdict,
                    result,
                    note=_subset_note(run, spec.scorer, recs, stopped, shard),
                )
            )
    unmatched = []
    for rule in rules:
        source = rule.spec.source
        if source in wildcard and source in matched and source not in used:
            outcomes.append(
                GateOutcome(
                    rule.pattern,
                    rule.spec,
                    "error",
                    problem=f"no records of scorer {rule.spec.scorer!r} in any of the "
                    f"{matched[source]} test(s) matching {rule.pattern!r}",
                )
            )
        elif source not in matched:
            unmatched.append(source)
    return outcomes, unmatched


#: metadata of the error record the plugin adds for a gated scorer a failed test never reached
UNREACHED = {"unreached": True}


def _unreached(rec: ScoreRecord) -> bool:
    return bool(rec.metadata.get("unreached"))


def failing_outcomes(outcomes: Iterable[GateOutcome], inconclusive: str) -> list[GateOutcome]:
    """The outcomes that fail the run: fail and error always, inconclusive unless the policy
    (``--llm-eval-inconclusive``) is ``pass``."""
    bad = {"fail", "error"} | ({"inconclusive"} if inconclusive != "pass" else set())
    return [o for o in outcomes if o.verdict in bad]


@final
@dataclass(frozen=True)
class TestStatistics:
    """Per-scorer statistics of one dataset test (mean with its CI over cases as clusters,
    pass rate with its Wilson CI, flaky cases)."""

    __test__ = False  # not a test class

    test: str
    stats: ScorerStats

    def to_json(self) -> dict[str, Any]:
        return _json_safe({"test": self.test, **self.stats.to_json()})  # type: ignore[no-any-return]


def dataset_statistics(
    records: Sequence[ScoreRecord],
    confidence: float = 0.95,
    ranges: Mapping[str, tuple[float, float] | None] | None = None,
) -> list[TestStatistics]:
    """Statistics for every scorer of every dataset test (records with a case location).
    ``ranges``: the declared range of each scorer as the run knew it (``merge`` passes the
    shards' :func:`dataset_ranges`); a scorer not in it is looked up in this process."""
    groups: dict[tuple[str, str, str], list[ScoreRecord]] = {}
    for r in records:
        if r.where is not None:
            groups.setdefault((r.file, r.test, r.scorer), []).append(r)

    def declared(scorer: str) -> tuple[float, float] | None:
        if ranges is not None and scorer in ranges:
            return ranges[scorer]
        return _declared_range(scorer)

    return [
        TestStatistics(
            f"{file}::{test}",
            scorer_stats(scorer, case_samples(recs), confidence, declared(scorer)),
        )
        for (file, test, scorer), recs in sorted(groups.items())
    ]


def dataset_ranges(records: Sequence[ScoreRecord]) -> dict[str, tuple[float, float] | None]:
    """The declared range :func:`dataset_statistics` uses for each scorer of these records."""
    return {s: _declared_range(s) for s in sorted({r.scorer for r in records if r.where})}


def _declared_range(scorer: str) -> tuple[float, float] | None:
    """The range a scorer declares, when this process knows the scorer (a custom scorer defined
    in a test module may be known to the xdist workers only: then no cut)."""
    from pytest_llmeval.registry import default_registry

    try:
        lo, hi = default_registry.get(scorer).score_range
    except LLMEvalError:
        return None
    return (float(lo), float(hi))
