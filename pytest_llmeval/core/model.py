"""The typed run model: what a run scored, what it planned to run, with which instruments and
under which verdict settings. Gates, statistics, comparisons and the run's verdict are pure
functions of a :class:`Run` (:mod:`pytest_llmeval.analysis.gates`,
:mod:`pytest_llmeval.analysis.compare`,
:mod:`pytest_llmeval.analysis.verdict`), and the three places that compute verdicts build the same
:class:`Run`: pytest at the end of a session, ``merge`` from shard reports, ``compare`` from two
report files. A report file is read back into an equal :class:`Run` (tested), so the three agree.

Every file read here is validated against the published schema
(``pytest_llmeval/schemas/report.schema.json``) and then checked for what a schema cannot say (a
score outside its scorer's range, a record whose instrument is not in the file); a bad file is a
:class:`RunFileError` naming the file and the field. Strict JSON: NaN, Infinity and numbers that
overflow a float are refused, and so is nesting deeper than the parser can follow.

Stdlib only, apart from jsonschema, imported when a file is validated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import GateSpec

__all__ = [
    "KNOWN_INSTRUMENTS",
    "REPORT_VERSION",
    "RUN_FORMAT",
    "GateRule",
    "Instrument",
    "Run",
    "RunFileError",
    "RunSettings",
    "TestPlan",
    "instrument_digest",
    "run_from_report",
    "sort_key",
    "spec_from_json",
]

#: The version of the JSON report this code writes (1: before instruments, plan and verdict).
REPORT_VERSION = 2
#: ``format`` of a saved run (history): the run's report wrapped with its number and git state.
RUN_FORMAT = "pytest-llmeval-run"
ItemKey = tuple[str | None, int]  # (case id, sample) of one collected item


class RunFileError(ValueError):
    """A report, saved run or shard report that cannot be used, naming the file and the field."""

    def __init__(self, where: str, problem: str, field: str | None = None) -> None:
        self.where = where
        self.problem = problem
        self.field = field
        at = f" (field {field})" if field else ""
        super().__init__(f"{where}{at}: {problem}")


# -- strict JSON ------------------------------------------------------------------------------


# -- schema -----------------------------------------------------------------------------------


# -- the model ------------------------------------------------------------------------------


def instrument_digest(identity_json: str) -> str:
    """The digest naming a scorer's instrument: 16 hex digits of the sha256 of its identity
    (name, version, options, code, judge model and sampling, prompt hashes)."""
    return hashlib.sha256(identity_json.encode("utf-8")).hexdigest()[:16]


#: Every instrument this process has scored with, by digest (the plugin ships each to the xdist
#: controller once, on the teardown report of the first test that used it).
KNOWN_INSTRUMENTS: dict[str, Instrument] = {}


def _range_json(rng: tuple[float, float] | None) -> list[float | None] | None:
    if rng is None:
        return None
    return [x if math.isfinite(x) else None for x in rng]


def _range_of(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    lo, hi = value
    return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))


@final
@dataclass(frozen=True)
class Instrument:
    """What produced a score: one scorer with its version, options, code and judge. Two records
    were made by the same instrument when their digests are equal; a comparison of runs
    measured with different instruments says so (issue 19)."""

    digest: str
    scorer: str
    version: str | None = None
    higher_is_better: bool | None = None
    score_range: tuple[float, float] | None = None
    identity: Mapping[str, Any] = field(default_factory=dict)
    #: whether the scorer asks an LLM judge (None: a report that does not say). Not part of the
    #: digest: it follows from the scorer, which the identity names.
    uses_judge: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer,
            "version": self.version,
            "higher_is_better": self.higher_is_better,
            "score_range": _range_json(self.score_range),
            "identity": dict(self.identity),
            "uses_judge": self.uses_judge,
        }

    @classmethod
    def from_json(cls, digest: str, data: Mapping[str, Any]) -> Instrument:
        return cls(
            digest=digest,
            scorer=str(data["scorer"]),
            version=None if data.get("version") is None else str(data["version"]),
            higher_is_better=data.get("higher_is_better"),
            score_range=_range_of(data.get("score_range")),
            identity=dict(data.get("identity") or {}),
            uses_judge=data["uses_judge"] if isinstance(data.get("uses_judge"), bool) else None,
        )


def _spec_json(spec: GateSpec) -> dict[str, Any]:
    out = spec.to_json()
    out["score_range"] = _range_json(spec.score_range)
    return out


def spec_from_json(data: Mapping[str, Any]) -> GateSpec:
    """A :class:`GateSpec` from its JSON (an unbounded side of its range travels as null)."""
    return GateSpec(
        scorer=str(data["scorer"]),
        min_mean=data.get("min_mean"),
        max_mean=data.get("max_mean"),
        min_pass_rate=data.get("min_pass_rate"),
        max_pass_rate=data.get("max_pass_rate"),
        confidence=data.get("confidence"),
        reducer=str(data.get("reducer", "mean")),
        max_errors=int(data.get("max_errors", 0)),
        source=str(data.get("source", "")),
        score_range=_range_of(data.get("score_range")),
        min_kappa=data.get("min_kappa"),
        min_true_pass=data.get("min_true_pass"),
        min_true_fail=data.get("min_true_fail"),
        corrected=data.get("corrected", False),
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
        import fnmatch

        return fnmatch.fnmatchcase(f"{file}::{test}", self.pattern)

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "spec": _spec_json(self.spec)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateRule:
        return cls(str(data["pattern"]), spec_from_json(data["spec"]))


def _item_order(item: ItemKey) -> tuple[bool, str, int]:
    return (item[0] is not None, item[0] or "", item[1])


@final
@dataclass(frozen=True)
class TestPlan:
    """One test function of the run: its gates, its dataset size and repeat, and what became of
    each of its selected items ``(case id, sample)``: ran, skipped, or lost (selected but never
    reported: a crashed worker, a run stopped by -x or Ctrl-C), with why.

    The plan is made at collection (after -k, -m, --deselect and the shard split), so a case that
    was selected and never reported is known to be missing: it is an unscored case, never "not
    selected"."""

    __test__ = False  # not a test class

    file: str
    test: str
    gates: tuple[GateSpec, ...] = ()
    #: scorers gated by the test's own markers (they soften per-case misses; run gates do not)
    marker_scorers: frozenset[str] = frozenset()
    total: int | None = None  # dataset cases, when the test has a dataset
    repeat: int = 1
    ran: frozenset[ItemKey] = frozenset()
    skipped: frozenset[ItemKey] = frozenset()
    lost: Mapping[ItemKey, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.file}::{self.test}"

    @property
    def selected(self) -> frozenset[ItemKey]:
        return self.ran | self.skipped | frozenset(self.lost)

    def scorers_gated(self) -> frozenset[str]:
        return frozenset(s.scorer for s in self.gates)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "test": self.test,
            "gates": [_spec_json(s) for s in self.gates],
            "marker_scorers": sorted(self.marker_scorers),
            "total": self.total,
            "repeat": self.repeat,
            "ran": [[c, s] for c, s in sorted(self.ran, key=_item_order)],
            "skipped": [[c, s] for c, s in sorted(self.skipped, key=_item_order)],
            "lost": [[c, s, self.lost[(c, s)]] for c, s in sorted(self.lost, key=_item_order)],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestPlan:
        return cls(
            file=str(data["file"]),
            test=str(data["test"]),
            gates=tuple(spec_from_json(s) for s in data.get("gates") or ()),
            marker_scorers=frozenset(data.get("marker_scorers") or ()),
            total=data.get("total"),
            repeat=int(data.get("repeat", 1)),
            ran=frozenset((c, int(s)) for c, s in data.get("ran") or ()),
            skipped=frozenset((c, int(s)) for c, s in data.get("skipped") or ()),
            lost={(c, int(s)): str(why) for c, s, why in data.get("lost") or ()},
        )

    def same_test(self, other: TestPlan) -> bool:
        """Whether ``other`` is this test as another shard of the same run saw it."""
        return (self.gates, self.marker_scorers, self.total, self.repeat) == (
            other.gates,
            other.marker_scorers,
            other.total,
            other.repeat,
        )

    def union(self, other: TestPlan) -> TestPlan:
        """This test's items with another shard's (the shards of one run never share an item).
        Raises ValueError when the two are not the same test of one run."""
        if not self.same_test(other):
            raise ValueError(
                f"{self.name} has other gates, dataset size or repeat in one shard "
                f"({len(other.gates)} gates, {other.total} cases, repeat {other.repeat}) than in "
                f"another ({len(self.gates)} gates, {self.total} cases, repeat {self.repeat})"
            )
        both = self.selected & other.selected
        if both:
            case, sample = sorted(both, key=_item_order)[0]
            raise ValueError(f"{self.name}: case {case!r} sample {sample} is in two shards")
        return TestPlan(
            self.file,
            self.test,
            self.gates,
            self.marker_scorers,
            self.total,
            self.repeat,
            self.ran | other.ran,
            self.skipped | other.skipped,
            {**self.lost, **other.lost},
        )


INCONCLUSIVE_POLICIES: tuple[str, ...] = ("fail", "pass")
SKIPPED_POLICIES: tuple[str, ...] = ("fail", "pass")


@final
@dataclass(frozen=True)
class RunSettings:
    """The settings that decide verdicts (the same in every shard of one run)."""

    gate_rules: tuple[GateRule, ...] = ()
    #: what an inconclusive gate does to the run: fail (default) or pass
    inconclusive: str = "fail"
    #: what a gate whose every selected case was skipped does: fail (default) or pass
    skipped: str = "fail"
    #: --llm-eval-fail-on-regression's alpha (None: a regression is reported, not failed)
    fail_on_regression: float | None = None
    #: scorers whose changed instrument (or absence) the user accepts ("all": every one)
    accept_incomparable: tuple[str, ...] = ()
    #: confidence of the statistics' intervals
    confidence: float = 0.95

    def accepts(self, scorer: str) -> bool:
        return "all" in self.accept_incomparable or scorer in self.accept_incomparable

    def to_json(self) -> dict[str, Any]:
        return {
            "gate_rules": [r.to_json() for r in self.gate_rules],
            "inconclusive": self.inconclusive,
            "skipped": self.skipped,
            "fail_on_regression": self.fail_on_regression,
            "accept_incomparable": list(self.accept_incomparable),
            "confidence": self.confidence,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSettings:
        return cls(
            gate_rules=tuple(GateRule.from_json(r) for r in data.get("gate_rules") or ()),
            inconclusive=str(data.get("inconclusive") or "fail"),
            skipped=str(data.get("skipped") or "fail"),
            fail_on_regression=data.get("fail_on_regression"),
            accept_incomparable=tuple(data.get("accept_incomparable") or ()),
            confidence=float(data.get("confidence", 0.95)),
        )


def sort_key(r: ScoreRecord) -> tuple[str, str, str, str, int, int]:
    """The order of a run's records (the same with and without xdist, and after a merge)."""
    return (r.file, r.test, r.case_id or "", r.scorer, r.sample, r.index)


@final
@dataclass(frozen=True)
class Run:
    """One run, as the verdict functions see it (see the module docstring)."""

    records: tuple[ScoreRecord, ...]
    plan: tuple[TestPlan, ...] = ()
    instruments: Mapping[str, Instrument] = field(default_factory=dict)
    settings: RunSettings = field(default_factory=RunSettings)
    #: every test function collected (``FILE::TEST``), before -k/--deselect: to suggest the
    #: nearest ones when a run gate matches none
    collected: tuple[str, ...] = ()
    #: the session stopped early (-x, --maxfail, Ctrl-C)
    stopped: bool = False
    #: (i, n) of a shard run: its verdicts are partial
    shard: tuple[int, int] | None = None
    #: pytest's exit status before this run's own verdicts (tests failed, interrupted, ...)
    exitstatus: int | None = None
    #: the report's ``run`` section (times, versions, judge, git commit)
    info: Mapping[str, Any] = field(default_factory=dict)
    #: read from a version-1 file: no instruments, no plan
    legacy: bool = False

    def test_plan(self, file: str, test: str) -> TestPlan | None:
        for p in self.plan:
            if p.file == file and p.test == test:
                return p
        return None

    def scorer_names(self) -> list[str]:
        return sorted({r.scorer for r in self.records})

    def instruments_of(self, scorer: str) -> list[Instrument]:
        return [i for i in self.instruments.values() if i.scorer == scorer]

    def direction(self, scorer: str) -> bool | None:
        """Whether a higher score is better for ``scorer``, as its instruments declared it
        (None when this run does not know)."""
        ways = {i.higher_is_better for i in self.instruments_of(scorer)} - {None}
        return ways.pop() if len(ways) == 1 else None

    def score_range(self, scorer: str) -> tuple[float, float] | None:
        ranges = {i.score_range for i in self.instruments_of(scorer)} - {None}
        return ranges.pop() if len(ranges) == 1 else None

    def input_json(self, *, records: bool = True) -> dict[str, Any]:
        """The sections of a report that a :class:`Run` is read back from (without ``records``
        when the caller has them already)."""
        out: dict[str, Any] = {"records": [r.to_json() for r in self.records]} if records else {}
        return out | {
            "instruments": {d: i.to_json() for d, i in sorted(self.instruments.items())},
            "plan": [p.to_json() for p in self.plan],
            "collected": list(self.collected),
            "settings": self.settings.to_json(),
        }


def _plan_from_gate_book(book: Sequence[Mapping[str, Any]]) -> tuple[TestPlan, ...]:
    """A version-1 shard report's gate book as a plan (selected items that did not run were
    skipped or lost; version 1 could not tell them apart, so they count as skipped)."""
    out = []
    for e in book:
        selected = {(c, int(s)) for c, s in e.get("selected") or ()}
        ran = {(c, int(s)) for c, s in e.get("ran") or ()}
        out.append(
            TestPlan(
                file=str(e["file"]),
                test=str(e["test"]),
                gates=tuple(spec_from_json(s) for s in e.get("gates") or ()),
                marker_scorers=frozenset(s["scorer"] for s in e.get("gates") or ()),
                total=e.get("total"),
                repeat=int(e.get("repeat", 1)),
                ran=frozenset(ran),
                skipped=frozenset(selected - ran),
            )
        )
    return tuple(sorted(out, key=lambda p: (p.file, p.test)))


def _redacted(run_info: Mapping[str, Any]) -> dict[str, Any]:
    """A ``run`` section without credentials in its judge URL (a file written before URLs were
    redacted must not carry them into a merged report or a comparison)."""
    from pytest_llmeval.core.redaction import redact_url

    info = dict(run_info)
    judge = info.get("judge")
    if isinstance(judge, Mapping) and isinstance(judge.get("base_url"), str):
        info["judge"] = {**judge, "base_url": redact_url(judge["base_url"])}
    return info


def _record_of(data: Mapping[str, Any]) -> ScoreRecord:
    rec = ScoreRecord.from_json(data)
    if rec.error is None:
        return rec
    from pytest_llmeval.core.redaction import redact_text

    error = redact_text(rec.error)
    return rec if error == rec.error else dataclasses.replace(rec, error=error)


def run_from_report(report: Mapping[str, Any]) -> Run:
    records = tuple(sorted((_record_of(r) for r in report["records"]), key=sort_key))
    instruments = {
        d: Instrument.from_json(d, i) for d, i in (report.get("instruments") or {}).items()
    }
    shard_section = report.get("shard")
    settings_json = report.get("settings")
    if settings_json is None and isinstance(shard_section, Mapping):
        settings_json = shard_section.get("settings")
    if settings_json is None:
        policy = report.get("gate_policy") or {}
        settings_json = {
            "inconclusive": policy.get("inconclusive"),
            "skipped": policy.get("skipped"),
        }
    if "plan" in report:
        plan = tuple(TestPlan.from_json(p) for p in report["plan"])
    elif isinstance(shard_section, Mapping):
        plan = _plan_from_gate_book(shard_section.get("gate_book") or ())
    else:
        plan = ()
    run_info = report.get("run") or {}
    shard = None
    stopped = False
    if isinstance(shard_section, Mapping):
        shard = (int(shard_section["index"]), int(shard_section["count"]))
        stopped = bool(shard_section.get("stopped"))
    stopped = stopped or bool((report.get("verdict") or {}).get("stopped"))
    return Run(
        records=records,
        plan=plan,
        instruments=instruments,
        settings=RunSettings.from_json(settings_json),
        collected=tuple(report.get("collected") or ()),
        stopped=stopped,
        shard=shard,
        # pytest's own status before this run's verdicts (what a merge combines)
        exitstatus=(report.get("verdict") or {}).get(
            "pytest_exitstatus", run_info.get("exitstatus")
        ),
        info=_redacted(run_info),
        legacy="instruments" not in report,
    )
