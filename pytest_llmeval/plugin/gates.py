"""Gates, pytest's side: the run gates of the options and ini, each test function's gates found
at collection (a bad gate is a collection error), the per-case misses the test's own gate markers
soften (the gate judges them at the end), and the recorders of concurrent cases primed with them.
The gates are judged from the run at the end by :mod:`pytest_llmeval.analysis.gates`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_llmeval.plugin.identity import _definition_identity, _new_recorder, closest_mark

if TYPE_CHECKING:
    from pytest_llmeval.analysis.gates import GateRule, TestGates

import dataclasses

import pytest

from pytest_llmeval.core.records import ScoreRecord, TestRecorder, current_recorder
from pytest_llmeval.core.redaction import redact_text
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.plugin.identity import function_keys, record_identity
from pytest_llmeval.plugin.keys import (
    GATED_MISS_ATTR,
    VerdictPolicies,
    gate_failure_key,
    gate_rules_key,
    gate_table_key,
    prepared_recorder_key,
    recorder_key,
    verdict_policies_key,
)
from pytest_llmeval.plugin.options import _enabled, resolved, value
from pytest_llmeval.plugin.status import need_status_hooks


def _configure_gates(config: pytest.Config) -> None:
    """Both sides: markers, the run's gates (a malformed one is a usage error), the verdict
    policies, the gate hooks and the plan collector."""
    from pytest_llmeval.analysis.gates import parse_gate_option
    from pytest_llmeval.core.errors import GateError
    from pytest_llmeval.plugin.plan import PlanCollector

    config.addinivalue_line(
        "markers",
        "llm_eval_gate(scorer, *, min_mean=None, max_mean=None, min_pass_rate=None, "
        "max_pass_rate=None, confidence=None, reducer='mean', max_errors=0): a suite gate on the "
        "records of `scorer` over all cases and samples of this test; stackable",
    )
    config.addinivalue_line(
        "markers", "llm_eval_sample(k): (set by llm_eval_dataset repeat=) the sample index"
    )
    rules: list[GateRule] = []
    # the --llm-eval-gate values and the ini's llm_eval_gates lines, each named by its source
    for origin, text in resolved(config, "llm_eval_gate").items:
        try:
            rules.append(parse_gate_option(text, origin))
        except GateError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[gate_rules_key] = rules
    table: dict[tuple[str, str], TestGates] = {}
    config.stash[gate_table_key] = table
    value(config, "llm_eval_repeat")  # a bad one stops the run now, not at collection
    accepted = value(config, "llm_eval_accept_incomparable")
    config.stash[verdict_policies_key] = VerdictPolicies(
        inconclusive=value(config, "llm_eval_inconclusive"),
        skipped=value(config, "llm_eval_skipped"),
        accept_incomparable=tuple(
            dict.fromkeys(a.strip() for item in accepted for a in item.split(",") if a.strip())
        ),
    )
    strict = value(config, "llm_eval_strict_cases")
    config.pluginmanager.register(GateHooks(config, bool(strict)), "llm-eval-gate-hooks")
    config.pluginmanager.register(
        PlanCollector(config, table, record_identity, function_keys, _planned_kinds),
        "llm-eval-plan",
    )


def _planned_kinds(items: list[pytest.Item]) -> list[bool | None]:
    """Whether each item's fate counts: True for an llm_eval item of a run with evaluations on,
    False for one skipped because they are off (a plain ``pytest`` run judges no llm_eval
    gate), None for any other test (its gates, if a run gate gives it some, still count)."""
    if not items:
        return []
    enabled = _enabled(items[0].config)
    return [None if closest_mark(item, "llm_eval") is None else enabled for item in items]


def _test_gates(config: pytest.Config, file: str, test: str) -> TestGates:
    from pytest_llmeval.analysis.gates import TestGates

    return config.stash[gate_table_key].setdefault((file, test), TestGates())


def _mark_text(mark: pytest.Mark) -> str:
    args = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()]
    return f"@pytest.mark.llm_eval_gate({', '.join(args)})"


class GateHooks:
    """Both sides: collect and check each test function's gates; soften gated per-case misses;
    ship gate info on teardown reports."""

    def __init__(self, config: pytest.Config, strict: bool) -> None:
        self.config = config
        self.strict = strict
        #: every test function's gates (the config's gate table, read at each test)
        self.table: dict[tuple[str, str], TestGates] = config.stash[gate_table_key]
        self._resolved: dict[str, GateRule] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Worker side (and the only process): a test function's gates, from its
        ``llm_eval_gate`` markers and the run's matching ``--llm-eval-gate`` patterns. A bad
        gate is a collection error naming the marker (or option) and the test."""
        from pytest_llmeval.analysis.gates import make_spec, resolve_spec
        from pytest_llmeval.core.errors import GateError

        file, test = _definition_identity(metafunc)
        name = f"{file}::{test}"
        specs = []
        marker_scorers = set()
        try:
            for mark in metafunc.definition.iter_markers("llm_eval_gate"):
                source = f"{_mark_text(mark)} on {name}"
                if not mark.args:
                    raise GateError(source, "needs the scorer's name as its first argument")
                if len(mark.args) > 1:
                    raise GateError(source, "takes one scorer; stack one marker per scorer")
                spec = make_spec(mark.args[0], mark.kwargs, source)
                specs.append(resolve_spec(spec, default_registry))
                if spec.bounds_quality:  # (a gate on the judge alone softens no miss)
                    marker_scorers.add(specs[-1].scorer)
            # Run gates are the evaluation run's (--llm-eval): a plain `pytest` judges none.
            rules = self.config.stash[gate_rules_key] if _enabled(self.config) else []
            for rule in rules:
                if rule.matches(file, test):
                    resolved = self._resolved.get(rule.spec.source)
                    if resolved is None:
                        resolved = dataclasses.replace(
                            rule, spec=resolve_spec(rule.spec, default_registry)
                        )
                        self._resolved[rule.spec.source] = resolved
                    specs.append(resolved.spec)
        except GateError as exc:
            raise pytest.Collector.CollectError(f"{exc} (test {name})") from None
        if specs:
            gates = _test_gates(metafunc.config, file, test)
            gates.specs = specs
            gates.marker_scorers = frozenset(marker_scorers)

    def prime(self, recorder: TestRecorder) -> None:
        """Tell a test's recorder which scorers a gate decides. Also called for a concurrent
        case's recorder made before its protocol (its body may start ahead). Only the gates of
        the test's own markers soften its per-case misses: a run gate (``--llm-eval-gate``, ini
        ``llm_eval_gates``) adds a verdict and never turns a failing case into a pass."""
        table = self.table
        if not table:
            return  # (no test has a gate: the usual run, asked for every test)
        gates = table.get((recorder.file, recorder.test))
        if gates is not None and gates.specs:
            recorder.gated = gates.scorers
            recorder.soft = frozenset() if self.strict else gates.marker_scorers

    def after_report(
        self,
        item: pytest.Item,
        call: pytest.CallInfo[None],
        report: pytest.TestReport,
        recorder: TestRecorder,
    ) -> None:
        """Worker side, called by the plugin's own makereport wrapper before it ships the
        records (so the records added here ship with the others): mark a passed call with gated
        misses; at teardown, an error record for each gated scorer a failed test never reached
        (an unscored sample, never a pass)."""
        if not recorder.gated:
            return
        from pytest_llmeval.analysis.gates import UNREACHED

        if call.when in ("setup", "call"):
            if report.failed and call.excinfo is not None:
                text = " ".join(call.excinfo.exconly().split())
                item.stash[gate_failure_key] = redact_text(text)[:300]  # redacted, then cut
            if call.when == "call" and report.passed and recorder.gated_misses:
                setattr(report, GATED_MISS_ATTR, "; ".join(recorder.gated_misses))
                need_status_hooks(item.config)
            return
        if call.when != "teardown":
            return
        failure = item.stash.get(gate_failure_key, None)
        if failure is not None:
            seen = {r.scorer for r in recorder.records}
            for scorer in sorted(recorder.gated - seen):
                recorder.add(
                    ScoreRecord(
                        file=recorder.file,
                        test=recorder.test,
                        case_id=recorder.case_id,
                        scorer=scorer,
                        index=recorder.next_index(scorer),
                        score=None,
                        min=None,
                        max=None,
                        passed=None,
                        cached=False,
                        duration_s=0.0,
                        error=f"the test failed before scoring {scorer}: {failure}",
                        where=recorder.where,
                        metadata=UNREACHED,
                        sample=recorder.sample,
                        gated=True,
                    )
                )


def _case_recorder(item: pytest.Item) -> TestRecorder:
    """The recorder of a concurrent case being set up: its protocol's, when that is running,
    else a new one that its protocol will take up."""
    recorder = item.stash.get(recorder_key, None)
    if recorder is not None and current_recorder.get() is recorder:
        return recorder
    recorder = _new_recorder(item)
    gates = item.config.pluginmanager.get_plugin("llm-eval-gate-hooks")
    if isinstance(gates, GateHooks):
        gates.prime(recorder)  # its body may start before its protocol's wrapper runs
    item.stash[prepared_recorder_key] = recorder
    return recorder
