"""pytest hooks only: options, ini, markers, dataset parametrization, fixtures, and shipping each
test's score records on its teardown report. No scoring logic lives here.

Records reach the controller with each test's teardown report. In an xdist worker a
``pytest_runtest_makereport`` wrapper puts the test's records, as one JSON string, on the
teardown report (a str always survives execnet, and every test reported before a worker crash
keeps its records), which the controller takes in ``pytest_runtest_logreport``
(:class:`~pytest_llmeval.plugin.controller.WorkerReports`); without xdist the same wrapper hands
each report, and the teardown report's records as they are, to the
:class:`~pytest_llmeval.plugin.controller.RunController` of this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Generator, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.core.errors import DatasetError, LLMEvalError
from pytest_llmeval.core.errors import Skipped as ScoringSkipped
from pytest_llmeval.core.model import KNOWN_INSTRUMENTS
from pytest_llmeval.core.records import (
    ScoreRecord,
    TestRecorder,
    current_recorder,
    records_to_wire,
)
from pytest_llmeval.core.trace import Trace
from pytest_llmeval.engine.context import ScoringContext, get_context, set_context
from pytest_llmeval.engine.dataset import Case, load_dataset
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.plugin import hookspecs
from pytest_llmeval.plugin.concurrent import check_marker
from pytest_llmeval.plugin.controller import (
    INSTRUMENTS_ATTR,
    RECORDS_ATTR,
    WORKER_REPORTS,
    RunController,
    WorkerReports,
    session_key,
)
from pytest_llmeval.plugin.gates import _configure_gates, _test_gates
from pytest_llmeval.plugin.identity import (
    _definition_identity,
    _new_recorder,
    _sample_of,
    item_recorder,
)
from pytest_llmeval.plugin.keys import (
    ERROR_ATTR,
    context_key,
    prepared_recorder_key,
    previous_context_key,
    rate_file_key,
    recorder_key,
    shipped_key,
    spend_key,
    trace_limits_key,
)
from pytest_llmeval.plugin.options import (
    _enabled,
    _has_workers,
    _is_worker,
    build_settings,
    register,
    value,
)
from pytest_llmeval.plugin.progress import progress_key
from pytest_llmeval.plugin.services import (
    _OUTAGE_PLUGIN,
    _concurrent_cases,
    _load_ini_judges,
    _rate_limiter,
    _run_spend,
    _shared_store,
    _start_progress,
)
from pytest_llmeval.plugin.status import STATUS_PLUGIN, need_status_hooks
from pytest_llmeval.plugin.tracebacks import _hide_package_frames

_SKIP_REASON = (
    "llm_eval test: LLM evaluations run only with `pytest --llm-eval` "
    "(or `llm_eval = true` in the ini file)"
)


# -- options -------------------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    # Run history, baseline comparison and JUnit properties (issue 10) live in their own module.
    from pytest_llmeval.plugin import history

    if not pluginmanager.has_plugin("llm-eval-history"):
        pluginmanager.register(history, "llm-eval-history")
    # Sharded runs (--llm-eval-shard i/n, issue 11) too.
    from pytest_llmeval.plugin import shard

    if not pluginmanager.has_plugin("llm-eval-shard"):
        pluginmanager.register(shard, "llm-eval-shard")


def pytest_addoption(parser: pytest.Parser) -> None:
    # Every option, history's and shards' included, is a row of core/options.py.
    register(parser)


# -- configuration -------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "llm_eval: an LLM evaluation test; skipped unless pytest runs with --llm-eval",
    )
    config.addinivalue_line(
        "markers",
        "llm_eval_dataset(path, id_field='id', concurrency=None): parametrize the test's `case` "
        "argument with the rows of a .jsonl, .csv or .json file (path relative to the test "
        "file), one test per row; an async test runs up to `concurrency` cases at once",
    )
    _configure_gates(config)
    # the trace summary's limits: a bad value is a usage error at start, not at the first test
    config.stash[trace_limits_key] = (
        value(config, "llm_eval_trace_spans"),
        value(config, "llm_eval_trace_chars"),
    )
    if value(config, "llm_eval_otel_events"):
        from pytest_llmeval.plugin.otel_events import configure_events

        configure_events(config)
    settings = build_settings(config)
    cache = None
    if settings.cache_mode != "off":
        cache = config.hook.pytest_llmeval_make_cache(
            config=config, directory=settings.cache_dir, mode=settings.cache_mode
        )
        if cache is None:
            cache = _shared_store(config, settings)
            if cache is not None:
                from pytest_llmeval.plugin.redis_outage import RedisOutage

                # Results stored only locally while Redis is away are pushed at the end.
                config.pluginmanager.register(RedisOutage(config, cache), _OUTAGE_PLUGIN)
    ctx = ScoringContext(
        settings,
        cache=cache,
        spend=_run_spend(config, settings),
        limiter=_rate_limiter(config, settings),
    )
    config.stash[context_key] = ctx
    config.stash[previous_context_key] = set_context(ctx)
    config.hook.pytest_llmeval_register_scorers.call_historic(
        kwargs={"registry": default_registry, "config": config}
    )
    _load_ini_judges(config)
    config.pluginmanager.register(_concurrent_cases(config), "llm-eval-concurrent-cases")
    config.stash[shipped_key] = set()
    if not _is_worker(config):
        from pytest_llmeval.plugin.plan import PlanTracker

        collector = config.pluginmanager.get_plugin("llm-eval-plan")
        tracker = PlanTracker(config, collector)
        config.pluginmanager.register(tracker, "llm-eval-plan-tracker")
        session = RunController(config, tracker)
        config.stash[session_key] = session
        config.pluginmanager.register(session, "llm-eval-session")
        if _has_workers(config):
            from pytest_llmeval.plugin.xdist_sched import SharesPlugin

            config.pluginmanager.register(WorkerReports(session), WORKER_REPORTS)
            config.pluginmanager.register(SharesPlugin(config), "llm-eval-xdist-shares")
        _start_progress(config, ctx)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _our_plugins_memo
    if _our_plugins_memo[0] is config:
        _our_plugins_memo = (None, (None, None, None))
    outage = config.pluginmanager.get_plugin(_OUTAGE_PLUGIN)
    if outage is not None:
        config.pluginmanager.unregister(outage)
    progress = config.stash.get(progress_key, None)
    if progress is not None:
        progress.close()
        config.pluginmanager.unregister(progress)
        del config.stash[progress_key]
    ctx = config.stash.get(context_key, None)
    if ctx is None:
        return
    try:
        ctx.close()
    finally:
        spend = config.stash.get(spend_key, None)
        if spend is not None:
            spend.remove()
            del config.stash[spend_key]
        rate_file = config.stash.get(rate_file_key, None)
        if rate_file is not None:
            rate_file.remove()
            del config.stash[rate_file_key]
    set_context(config.stash.get(previous_context_key, None))
    del config.stash[context_key]
    cases = config.pluginmanager.get_plugin("llm-eval-concurrent-cases")
    if cases is not None:
        cases.pytest_unconfigure()  # stop its loop whatever the hook order
        config.pluginmanager.unregister(cases)
    shares = config.pluginmanager.get_plugin("llm-eval-xdist-shares")
    if shares is not None:
        shares.pytest_unconfigure()  # remove its directory whatever the hook order
        config.pluginmanager.unregister(shares)
    session = config.stash.get(session_key, None)
    if session is not None:
        session.release()
        config.pluginmanager.unregister(session)
        del config.stash[session_key]
    for name in (
        STATUS_PLUGIN,
        WORKER_REPORTS,
        "llm-eval-plan-tracker",
        "llm-eval-plan",
        "llm-eval-gate-hooks",
        "llm-eval-otel-events",
    ):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


# -- collection ----------------------------------------------------------------------------


#: The keywords ``@pytest.mark.llm_eval_dataset(...)`` accepts. Any other keyword is a collection
#: error (a typo must not be ignored silently); a new marker option is added here.
DATASET_MARKER_KEYWORDS: tuple[str, ...] = ("path", "id_field", "repeat", "concurrency")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Worker side (and the only process): one test per dataset row. Without ``--llm-eval`` an
    ``llm_eval`` test stays one unparametrized item (skipped by
    :func:`pytest_collection_modifyitems`) and its dataset is not read, so eval data never
    breaks a plain ``pytest`` run. The marker itself is checked either way: that is code."""
    markers = list(metafunc.definition.iter_markers("llm_eval_dataset"))
    if not markers:
        return
    where = f"{metafunc.definition.path}::{metafunc.definition.name}"
    if len(markers) > 1:
        raise pytest.Collector.CollectError(
            f"{where}: more than one llm_eval_dataset marker; use one dataset per test"
        )
    mark = markers[0]
    unknown = [k for k in mark.kwargs if k not in DATASET_MARKER_KEYWORDS]
    if unknown:
        raise pytest.Collector.CollectError(
            f"{where}: @pytest.mark.llm_eval_dataset got unknown keyword "
            f"{', '.join(repr(k) for k in unknown)}; it accepts: "
            f"{', '.join(DATASET_MARKER_KEYWORDS)}"
        )
    check_marker(metafunc, dict(mark.kwargs), where)
    if "case" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{where}: @pytest.mark.llm_eval_dataset needs the test to take a `case` argument"
        )
    if not mark.args and "path" not in mark.kwargs:
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset needs a path, e.g. "
            "@pytest.mark.llm_eval_dataset('data/cases.jsonl')"
        )
    if len(mark.args) > 1 or (mark.args and "path" in mark.kwargs):
        raise pytest.Collector.CollectError(
            f"{where}: llm_eval_dataset takes one path (positional or path=...); "
            "pass other options by keyword"
        )
    if metafunc.definition.get_closest_marker("llm_eval") is not None and not _enabled(
        metafunc.config
    ):
        # Skipped anyway: reading the file now would turn a missing or malformed eval dataset
        # into a collection error of the team's ordinary `pytest` run.
        return
    raw = mark.args[0] if mark.args else mark.kwargs["path"]
    id_field = str(mark.kwargs.get("id_field", "id"))
    path = Path(raw)
    if not path.is_absolute():
        path = metafunc.definition.path.parent / path
    try:
        display = os.path.relpath(path, metafunc.config.rootpath)
    except ValueError:  # another drive on Windows
        display = str(path)
    try:
        cases = load_dataset(path, id_field=id_field, display=display)
    except DatasetError as exc:
        raise pytest.Collector.CollectError(f"llm_eval_dataset for {where}: {exc}") from None
    _parametrize_cases(metafunc, mark, cases)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _enabled(config):
        return
    skip = pytest.mark.skip(reason=_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("llm_eval") is not None:
            item.add_marker(skip)


#: The item being run when it asks for ``case`` but was left unparametrized: the placeholder
#: fixture's view of it. (The fixture does not take ``request``: pytest keeps a fixture's
#: ``request`` in the closure of every dataset case that shadows it by direct
#: parametrization, and resolves it for each case.)
_unfilled_case: ContextVar[pytest.Item | None] = ContextVar("llm_eval_unfilled_case", default=None)


@pytest.fixture
def case() -> Case:
    """Placeholder that explains how `case` gets its value (a dataset marker)."""
    item = _unfilled_case.get()
    if item is not None and item.get_closest_marker("llm_eval_dataset") is not None:
        # An llm_eval test left unparametrized because evaluations are off: its skip mark
        # normally stops it before fixtures; this covers runs without the skipping plugin.
        pytest.skip(_SKIP_REASON)
    raise pytest.UsageError(
        "the `case` argument is filled from a dataset: add "
        "@pytest.mark.llm_eval_dataset('path/to/cases.jsonl') to the test"
    )


@pytest.fixture
def llm_eval_context(request: pytest.FixtureRequest) -> ScoringContext:
    """The run's scoring context (settings, judge clients, cache)."""
    return get_context()


@pytest.fixture
def llm_eval_trace(request: pytest.FixtureRequest) -> Iterator[Trace]:
    """The trace of what the code under test does during this test (or concurrent case): the
    OpenTelemetry spans it emits (and the OpenAI Agents SDK's own spans) summarised into model
    calls, tool calls, agent steps and the span tree. It fills as spans end; read it after the
    agent has run (``llm_eval_trace.tool_names``, ``.model_calls``, ``.find(...)``).

    Needs the ``otel`` extra. Adds a span processor to the process's SDK tracer provider; with
    none set, installs one under ``--llm-eval`` and otherwise fails the setup saying how to turn
    it on. Spans that end after the test are counted in the terminal summary, not attached to
    another test; spans still open at its end are counted in ``unfinished`` (and a warning). A
    trace left empty is a warning too (``require_spans()`` makes it an error).
    """
    from pytest_llmeval.core.trace_summary import summarise_trace
    from pytest_llmeval.plugin.trace_capture import capture

    with capture(request.node) as trace:
        yield trace
    # The reports' summary, made once per test (or case: its own node and recorder) now that
    # the capture has ended; put on each of its records when they are shipped.
    recorder = item_recorder(request.node)
    if recorder is not None:
        spans, chars = request.config.stash[trace_limits_key]
        recorder.trace = summarise_trace(trace, max_spans=spans, max_chars=chars)


# -- recording -----------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # A concurrent case set up ahead of its protocol already has its recorder (its fixtures
    # may have recorded): use it once.
    recorder = item.stash.get(prepared_recorder_key, None)
    if recorder is None:
        recorder = _new_recorder(item)
    else:
        del item.stash[prepared_recorder_key]
    item.stash[recorder_key] = recorder
    gates = _our_plugins(item.config)[0]
    if gates is not None:
        gates.prime(recorder)  # which scorers a gate decides
    token = current_recorder.set(recorder)
    unfilled = None
    if "case" in getattr(item, "fixturenames", ()) and getattr(item, "callspec", None) is None:
        unfilled = _unfilled_case.set(item)
    try:
        return (yield)
    finally:
        current_recorder.reset(token)
        if unfilled is not None:
            _unfilled_case.reset(unfilled)
        # The records left with the teardown report: the item (kept by the session to its
        # end) does not keep them too.
        if recorder_key in item.stash:
            del item.stash[recorder_key]


def _count_unrecorded_error(item: pytest.Item, error: LLMEvalError) -> None:
    """Every test ERROR caused by pytest-llmeval shows in the llm-eval summary: an error raised
    before any scoring was recorded (assert_scores rejecting its options, say) gets a record, so
    the summary's error count agrees with pytest's."""
    recorder = item_recorder(item)
    if recorder is None or any(r.error is not None for r in recorder.records):
        return
    name = getattr(error, "scorer", None) or getattr(error, "name", None) or "?"
    recorder.add(
        ScoreRecord(
            file=recorder.file,
            test=recorder.test,
            case_id=recorder.case_id,
            scorer=str(name),
            index=recorder.next_index(str(name)),
            score=None,
            min=None,
            max=None,
            passed=None,
            cached=False,
            duration_s=0.0,
            error=f"{type(error).__name__}: {error}",
            where=recorder.where,
        )
    )


def _skip_instead(call: pytest.CallInfo[None], exc: ScoringSkipped) -> None:
    """A scorer that asks for a skip (:class:`ScoringSkipped`; scorers know nothing of pytest)
    skips the test, whether it scored in the test's body, in a fixture it set up, or as a
    concurrent case replayed here: the exception becomes pytest's skip before the report is made
    (as pytest's own unittest plugin turns ``unittest.SkipTest`` into a skip), reported at the
    test like a skip raised in its body. (In a teardown it stays an error: the test ran.)"""
    try:
        raise pytest.skip.Exception(str(exc), _use_item_location=True) from None
    except pytest.skip.Exception:
        call.excinfo = pytest.ExceptionInfo.from_current()
    # pytest kept the scorer's exception for a post-mortem (as for any failure; a skip raised
    # in the body is not kept): let go of it and the frames it holds
    if getattr(sys, "last_value", None) is exc:
        for name in ("last_exc", "last_type", "last_value", "last_traceback"):
            sys.__dict__.pop(name, None)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # tryfirst: the outermost wrapper, so the report noted below is the one every other
    # wrapper has finished with (an xfail turned into a skip, say), as it will be logged
    excinfo = call.excinfo
    ours = False
    if excinfo is not None:
        value = excinfo.value
        if isinstance(value, ScoringSkipped) and call.when != "teardown":
            _skip_instead(call, value)
        elif isinstance(value, LLMEvalError) and not isinstance(value, AssertionError):
            ours = True
            _hide_package_frames(item, excinfo)  # before the report renders the traceback
    report = yield
    config = item.config
    memo = _our_plugins_memo
    gates, events, controller = memo[1] if memo[0] is config else _our_plugins(config)
    recorder = current_recorder.get()
    if recorder is None or recorder.owner is not item:
        recorder = item_recorder(item)  # (its protocol is not running: a concurrent case)
    if recorder is not None and recorder.gated and gates is not None:
        gates.after_report(item, call, report, recorder)  # gated misses; unreached scorers
    if ours:
        assert excinfo is not None and isinstance(excinfo.value, LLMEvalError)
        # A judge that failed (or bad input, or a replay miss) is an ERROR of the test, not a
        # quality FAIL: the score is unknown. The flag crosses xdist with the report.
        setattr(report, ERROR_ATTR, f"{type(excinfo.value).__name__}")
        need_status_hooks(config)
        if report.failed:  # not when xfail turned it into an expected failure
            _count_unrecorded_error(item, excinfo.value)
    if call.when != "teardown":
        # this process's controller (no xdist) notes a skip; a passed or failed setup or call
        # tells it nothing the teardown report does not
        if controller is not None and report.outcome == "skipped":
            controller.take_local(report)
        return report
    if recorder is None or not recorder.records:
        if controller is not None:
            controller.take_local(report)
        return report
    if recorder.trace is not None:
        trace = recorder.trace
        recorder.records = [dataclasses.replace(r, trace=trace) for r in recorder.records]
    if events is not None:
        events.emit(recorder.records, report.nodeid)
    if controller is not None:
        # This process is the controller (no xdist): the records go over as they are.
        controller.take_local(report, recorder.records, _new_instruments(config, recorder))
        return report
    setattr(report, RECORDS_ATTR, records_to_wire(recorder.records))
    new = _new_instruments(config, recorder)
    if new:
        setattr(report, INSTRUMENTS_ATTR, json.dumps(new, allow_nan=False))
    return report


#: (config, (gate hooks, OpenTelemetry events, this process's run controller or None)) as
#: pytest_configure registered them: looked up once per config, not for every report (a module
#: attribute: cheaper than the config's stash, asked for every report; a nested in-process
#: pytest run only makes it look them up again)
_our_plugins_memo: tuple[Any, tuple[Any, Any, RunController | None]] = (None, (None, None, None))


def _our_plugins(config: pytest.Config) -> tuple[Any, Any, RunController | None]:
    global _our_plugins_memo
    memo = _our_plugins_memo
    if memo[0] is config:
        return memo[1]
    manager = config.pluginmanager
    known = (
        manager.get_plugin("llm-eval-gate-hooks"),
        manager.get_plugin("llm-eval-otel-events"),
        config.stash.get(session_key, None),
    )
    _our_plugins_memo = (config, known)
    return known


def _new_instruments(config: pytest.Config, recorder: TestRecorder) -> dict[str, Any]:
    """The instruments (as JSON) of the test's records that this process has not shipped
    before: the controller learns each instrument once per process, from the first report that
    needs it (a report that arrives carries its records, so never a record without its
    instrument; a crashed worker's lost reports lose both)."""
    shipped = config.stash.get(shipped_key, None)
    if shipped is None:
        return {}
    new = {}
    for r in recorder.records:
        digest = r.instrument
        if digest is not None and digest not in shipped:
            inst = KNOWN_INSTRUMENTS.get(digest)
            if inst is not None:
                new[digest] = inst.to_json()
                shipped.add(digest)
    return new


# -- suite gates and repeated samples (issue 9) ------------------------------------------------
#
# Worker side (and the only process): GateHooks finds each test function's gates at collection
# (a bad gate is a collection error) and softens the per-case misses of the scorers the test's
# own markers gate; the PlanCollector (plan.py) notes which gated items were selected. Controller
# side: the RunController (controller.py) judges the gates from the run at the end of the session.


def _parametrize_cases(metafunc: pytest.Metafunc, mark: pytest.Mark, cases: list[Case]) -> None:
    """One test per dataset row, or per row and sample with ``repeat`` (marker, else
    ``--llm-eval-repeat``): ids ``<case>-s<k>``, k from 0, the sample index also being the
    ``sample`` of each record and the ``llm_eval_sample`` fixture."""
    where = f"{metafunc.definition.path}::{metafunc.definition.name}"
    if "repeat" in mark.kwargs:
        repeat = mark.kwargs["repeat"]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise pytest.Collector.CollectError(
                f"{where}: @pytest.mark.llm_eval_dataset(repeat={repeat!r}): repeat is the "
                "number of samples per case, a whole number >= 1"
            )
    else:
        repeat = value(metafunc.config, "llm_eval_repeat")
    file, test = _definition_identity(metafunc)
    gates = _test_gates(metafunc.config, file, test)
    gates.total = len(cases)
    gates.repeat = repeat
    if repeat == 1:
        metafunc.parametrize("case", cases, ids=[c.id for c in cases])
        return
    metafunc.parametrize(
        "case",
        [
            pytest.param(c, id=f"{c.id}-s{k}", marks=pytest.mark.llm_eval_sample(k))
            for c in cases
            for k in range(repeat)
        ],
    )


@pytest.fixture
def llm_eval_sample(request: pytest.FixtureRequest) -> int:
    """The sample index of this run of a dataset case (0 to repeat-1; 0 without repeat), e.g. to
    seed a fake nondeterministic app reproducibly."""
    return _sample_of(request.node)
