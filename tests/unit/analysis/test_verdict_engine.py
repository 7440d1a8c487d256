"""One verdict engine (issue 19): gates, statistics, comparisons and the run's verdict are pure
functions of one typed run model, and the three paths that compute them (pytest at the end of a
session, ``merge`` of shard reports, ``compare`` of two report files) agree field by field.

Two property tests: one over random runs built as :class:`pytest_llmeval.core.model.Run` (fast, many
examples: parametrized tests, repeats, lower- and higher-is-better scorers, errored, skipped
and lost cases, gates and run gates, changed instruments), each written as a report, read back,
split into random shards, written and merged; and one over random projects run through real
pytest (in-process), its shards and ``merge`` and ``compare`` on their files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.analysis.compare import compare_runs
from pytest_llmeval.analysis.gates import dataset_statistics, evaluate_gates
from pytest_llmeval.analysis.merge import merge_runs
from pytest_llmeval.analysis.verdict import decide
from pytest_llmeval.core.model import GateRule, Instrument, Run, RunSettings, TestPlan, sort_key
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import GateSpec
from pytest_llmeval.report.json_report import build_report
from pytest_llmeval.stores.run_files import run_from_json

SCORERS = {
    # name: (higher is better, range)
    "quality": (True, (0.0, 1.0)),
    "distance": (False, (0.0, 1.0)),
}


def _instrument(scorer: str, version: str) -> Instrument:
    higher, rng = SCORERS[scorer]
    ident = {"name": scorer, "version": version, "options": {}}
    from pytest_llmeval.core.model import instrument_digest

    digest = instrument_digest(json.dumps(ident, sort_keys=True))
    return Instrument(digest, scorer, version, higher, rng, ident)


@st.composite
def runs(draw: st.DrawFn) -> tuple[Run, Run]:
    """A (baseline, current) pair of random runs of the same suite."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    n_tests = draw(st.integers(1, 3))
    tests = []
    for t in range(n_tests):
        tests.append(
            {
                "file": f"test_{t % 2}.py",
                "test": f"test_t{t}",
                "cases": draw(st.integers(1, 6)),
                "repeat": draw(st.integers(1, 3)),
                "params": draw(st.sampled_from([None, ("a", "b")])),
                "scorers": draw(
                    st.lists(st.sampled_from(sorted(SCORERS)), min_size=1, max_size=2, unique=True)
                ),
                "gated": draw(st.booleans()),
            }
        )
    rules = ()
    if draw(st.booleans()):
        spec = GateSpec(
            "quality", min_mean=0.3, reducer="mean", source="--llm-eval-gate '*:quality:...'"
        )
        rules = (GateRule("*", spec),)
    settings_ = RunSettings(
        gate_rules=rules,
        inconclusive=draw(st.sampled_from(["fail", "pass"])),
        skipped=draw(st.sampled_from(["fail", "pass"])),
        fail_on_regression=draw(st.sampled_from([None, 0.05])),
        accept_incomparable=draw(st.sampled_from([(), ("quality",), ("all",)])),
    )
    bump = draw(st.sampled_from([None, "quality", "distance"]))
    drift = draw(st.floats(-0.4, 0.4))

    def one(version_of: dict[str, str], shift: float) -> Run:
        records: list[ScoreRecord] = []
        plans = []
        instruments = {}
        for t in tests:
            ran: set[tuple[str | None, int]] = set()
            skipped: set[tuple[str | None, int]] = set()
            lost: dict[tuple[str | None, int], str] = {}
            params = t["params"] or (None,)
            case_ids = [
                f"c{c}" if p is None else f"{p}-c{c}" for c in range(t["cases"]) for p in params
            ]
            for case_id in case_ids:
                base_level = rnd.random()
                for sample in range(t["repeat"]):
                    fate = rnd.random()
                    item = (case_id, sample)
                    if fate < 0.06:
                        skipped.add(item)
                        continue
                    if fate < 0.1:
                        lost[item] = "an xdist worker crashed"
                        continue
                    ran.add(item)
                    for scorer in t["scorers"]:
                        inst = _instrument(scorer, version_of[scorer])
                        instruments[inst.digest] = inst
                        error = rnd.random() < 0.05
                        value = min(1.0, max(0.0, base_level + shift + rnd.gauss(0, 0.1)))
                        higher = SCORERS[scorer][0]
                        bound = (0.5, None) if higher else (None, 0.5)
                        passed = None
                        if not error:
                            passed = value >= 0.5 if higher else value <= 0.5
                        records.append(
                            ScoreRecord(
                                file=t["file"],
                                test=t["test"],
                                case_id=case_id,
                                scorer=scorer,
                                index=0,
                                score=None if error else round(value, 6),
                                min=bound[0],
                                max=bound[1],
                                passed=passed,
                                cached=False,
                                duration_s=0.0,
                                error="JudgeError: boom" if error else None,
                                where=f"data/{t['test']}.jsonl:1",
                                sample=sample,
                                instrument=inst.digest,
                            )
                        )
            gates: list[GateSpec] = []
            if t["gated"]:
                scorer = t["scorers"][0]
                higher = SCORERS[scorer][0]
                gates.append(
                    GateSpec(
                        scorer,
                        min_mean=0.4 if higher else None,
                        max_mean=None if higher else 0.6,
                        min_pass_rate=0.5,
                        confidence=0.9 if rnd.random() < 0.5 else None,
                        reducer=rnd.choice(["mean", "majority", "min"]),
                        max_errors=rnd.randint(0, 2),
                        source=f"marker on {t['file']}::{t['test']}",
                        score_range=(0.0, 1.0),
                    )
                )
            for rule in rules:
                if rule.matches(t["file"], t["test"]):
                    gates.append(rule.spec)
            if gates:
                plans.append(
                    TestPlan(
                        t["file"],
                        t["test"],
                        tuple(gates),
                        frozenset(g.scorer for g in gates if g.source.startswith("marker")),
                        len(case_ids),
                        t["repeat"],
                        frozenset(ran),
                        frozenset(skipped),
                        lost,
                    )
                )
        return Run(
            records=tuple(sorted(records, key=sort_key)),
            plan=tuple(sorted(plans, key=lambda p: (p.file, p.test))),
            instruments=dict(sorted(instruments.items())),
            settings=settings_,
            collected=tuple(sorted({f"{t['file']}::{t['test']}" for t in tests})),
            exitstatus=0,
        )

    versions = {s: "1" for s in SCORERS}
    baseline = one(versions, 0.0)
    current = one({**versions, **({bump: "2"} if bump else {})}, drift)
    return baseline, current


def _roundtrip(run: Run, shard: tuple[int, int] | None = None) -> Run:
    """``run`` as a report file would carry it, read back (validated)."""
    section = None
    if shard is not None:
        section = {"index": shard[0], "count": shard[1], "settings": run.settings.to_json()}
    report = build_report(
        run.records,
        started=0.0,
        settings=None,
        rootdir=Path("."),
        exitstatus=0,
        run=run,
        shard=section,
    )
    return run_from_json(json.loads(json.dumps(report, allow_nan=False)), "report")


def _case(r: ScoreRecord) -> str:
    return f"{r.file}::{r.test}[{r.case_id}]"


def _split(run: Run, k: int, seed: int) -> list[Run]:
    """``run`` split into ``k`` shards by case, as --llm-eval-shard splits (any assignment)."""
    rnd = random.Random(seed)
    keys = sorted(
        {_case(r) for r in run.records}
        | {f"{p.file}::{p.test}[{c}]" for p in run.plan for c, _ in p.selected}
    )
    owner = {key: rnd.randrange(k) for key in keys}
    shards = []
    for i in range(k):
        records = tuple(r for r in run.records if owner[_case(r)] == i)
        plans = []
        for p in run.plan:
            mine = {c for c, _ in p.selected if owner[f"{p.file}::{p.test}[{c}]"] == i}
            if not mine:
                continue
            plans.append(
                TestPlan(
                    p.file,
                    p.test,
                    p.gates,
                    p.marker_scorers,
                    p.total,
                    p.repeat,
                    frozenset(x for x in p.ran if x[0] in mine),
                    frozenset(x for x in p.skipped if x[0] in mine),
                    {x: why for x, why in p.lost.items() if x[0] in mine},
                )
            )
        used = {r.instrument for r in records}
        shards.append(
            Run(
                records=records,
                plan=tuple(plans),
                instruments={d: x for d, x in run.instruments.items() if d in used},
                settings=run.settings,
                collected=run.collected,
                shard=(i + 1, k),
                exitstatus=0,
            )
        )
    return shards


def _everything(run: Run, baseline: Run) -> dict[str, Any]:
    outcomes = evaluate_gates(run)
    statistics = dataset_statistics(run)
    cmp = compare_runs(
        baseline,
        run,
        accept=run.settings.accept_incomparable,
        gates=outcomes,
        alpha=run.settings.fail_on_regression or 0.05,
    )
    verdict = decide(run, outcomes, cmp)
    return {
        "gates": [o.to_json() for o in outcomes],
        "statistics": [s.to_json() for s in statistics],
        "comparison": cmp.to_json(),
        "verdict": verdict.to_json(),
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=runs(), k=st.integers(1, 4), seed=st.integers(0, 1000))
def test_the_run_its_report_any_sharding_and_compare_agree(
    pair: tuple[Run, Run], k: int, seed: int
) -> None:
    baseline, run = pair
    whole = _everything(run, baseline)
    # the report file is the run: read back, the same run, the same verdicts
    back = _roundtrip(run)
    assert back.records == run.records
    assert back.plan == run.plan
    assert back.instruments == run.instruments
    assert back.settings == run.settings
    assert _everything(back, _roundtrip(baseline)) == whole
    # any sharding, each shard written and read as a shard report, merged: the same
    shards = [_roundtrip(s, s.shard) for s in _split(run, k, seed)]
    merged = merge_runs(shards)
    assert merged.records == run.records
    assert _everything(merged, baseline) == whole
    # a shard alone never fails on its partial gates and comparison
    for shard in shards:
        assert decide(shard, evaluate_gates(shard), None).exitstatus == 0


def test_a_lost_or_skipped_case_never_passes_a_gate() -> None:
    """The property behind findings 3 and 4, on the model: a gate over cases some of which were
    lost is never 'pass' with max_errors=0, and over only skipped ones it is 'skipped'."""
    spec = GateSpec("quality", min_mean=0.1, source="marker", score_range=(0.0, 1.0))
    inst = _instrument("quality", "1")
    rec = ScoreRecord(
        "t.py", "t", "c0", "quality", 0, 1.0, None, None, None, False, 0.0, instrument=inst.digest
    )
    lost = TestPlan(
        "t.py",
        "t",
        (spec,),
        frozenset({"quality"}),
        2,
        1,
        frozenset({("c0", 0)}),
        frozenset(),
        {("c1", 0): "an xdist worker crashed"},
    )
    run = Run(records=(rec,), plan=(lost,), instruments={inst.digest: inst})
    (o,) = evaluate_gates(run)
    assert o.verdict == "error" and o.result is not None and o.result.n_errors == 1
    skipped = TestPlan(
        "t.py",
        "t",
        (spec,),
        frozenset({"quality"}),
        2,
        1,
        frozenset(),
        frozenset({("c0", 0), ("c1", 0)}),
        {},
    )
    (o,) = evaluate_gates(Run(records=(), plan=(skipped,)))
    assert o.verdict == "skipped"
    assert decide(Run(records=(), plan=(skipped,)), [o]).exitstatus == 1
    relaxed = Run(records=(), plan=(skipped,), settings=RunSettings(skipped="pass"))
    assert decide(relaxed, [o]).exitstatus == 0
