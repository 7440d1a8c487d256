"""The JSON-safe record of one scored assertion, the per-test recorder, and run aggregation."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial, reduce
from itertools import chain, compress, repeat
from operator import add, attrgetter, is_, is_not
from types import MappingProxyType
from typing import Any, final

from pytest_llmeval.core.trace_summary import TraceSummary, TraceSummaryError

__all__ = [
    "EMPTY_MAPPING",
    "ScoreRecord",
    "ScorerAggregate",
    "TestRecorder",
    "aggregate",
    "current_recorder",
    "records_from_wire",
    "records_to_wire",
]


@final
@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """One scored assertion. Keyed on (file, test, case_id, scorer, sample); ``index`` orders
    several assertions of one scorer within one test. ``sample`` is the repeat index of the case
    (0 without ``repeat``). ``gated`` says a suite gate decides this scorer in this test: a miss
    of the per-case bound was recorded (``passed`` False) but did not fail the test."""

    file: str
    test: str
    case_id: str | None
    scorer: str
    index: int
    score: float | None
    min: float | None
    max: float | None
    passed: bool | None
    cached: bool
    duration_s: float
    rationale: str | None = None
    error: str | None = None
    where: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    judge_calls: int = 0
    cost_usd: float | None = None
    #: the models the judge endpoint said answered this scoring's calls (none when cached)
    judge_models: tuple[str, ...] = ()
    sample: int = 0
    gated: bool = False
    inputs: Mapping[str, Any] = field(default_factory=dict)
    """What the scorer judged (output, expected, input, context, declared extra fields), JSON-safe
    and cut to ``--llm-eval-record-chars`` per field (see :func:`recorded_inputs`)."""
    #: the part of ``prompt_tokens`` the judge endpoint served from its prompt cache
    cached_prompt_tokens: int = 0
    #: the digest of the instrument that made the score
    #: (:class:`pytest_llmeval.core.model.Instrument`: scorer, version, options, code, judge);
    #: None when the scorer was never resolved
    instrument: str | None = None
    #: a person's verdict on this case (issue 20): a score in the scorer's range, True (pass) or
    #: False (fail), or one of a classifier's choices; None when unlabelled
    label: bool | float | str | None = None
    #: the score ``label`` stands for: the label itself when it is a score, the choice's score
    #: when it names one of a classifier's choices; None for True/False or no label
    label_score: float | None = None
    #: the bounded summary of the test's trace when it used ``llm_eval_trace`` (issue 21): the
    #: same summary on every record of that test or concurrent case; None otherwise
    trace: TraceSummary | None = None

    @property
    def key(self) -> tuple[str, str, str | None, str, int, int]:
        return (self.file, self.test, self.case_id, self.scorer, self.sample, self.index)

    def locator(self) -> dict[str, Any]:
        """Where this record was made (file, test, case, assertion, sample, dataset row), as the
        JSON reports name a record they point at."""
        return {
            "file": self.file,
            "test": self.test,
            "case_id": self.case_id,
            "index": self.index,
            "sample": self.sample,
            "where": self.where,
        }

    def to_json(self) -> dict[str, Any]:
        # Built from one C call reading every field (dataclasses.asdict deep-copies and was the
        # slowest part of a warm run; a dict display of 28 attributes is written per record)
        out = dict(zip(JSON_FIELDS, _json_values(self), strict=True))
        out["metadata"] = dict(self.metadata)
        out["judge_models"] = list(self.judge_models)
        out["inputs"] = dict(self.inputs)
        if self.trace is not None:
            out["trace"] = self.trace.to_json()
        return out

    def to_row(self) -> list[Any]:
        """The record as a JSON array, its fields in :data:`ROW_FIELDS` order: how an xdist
        worker ships it (:func:`records_to_wire`), no key repeated per record."""
        return [
            self.file,
            self.test,
            self.case_id,
            self.scorer,
            self.index,
            self.score,
            self.min,
            self.max,
            self.passed,
            self.cached,
            self.duration_s,
            self.rationale,
            self.error,
            self.where,
            dict(self.metadata),
            self.prompt_tokens,
            self.completion_tokens,
            self.judge_calls,
            self.cost_usd,
            list(self.judge_models),
            self.sample,
            self.gated,
            dict(self.inputs),
            self.cached_prompt_tokens,
            self.instrument,
            self.label,
            self.label_score,
            None if self.trace is None else self.trace.to_json(),
        ]

    @classmethod
    def from_row(cls, row: Any, strings: dict[str, str]) -> ScoreRecord:
        """The record a :meth:`to_row` array describes, each value's JSON type checked (a
        ``ValueError`` naming the field otherwise); ``strings`` as for :meth:`from_json`."""
        if type(row) is not list or len(row) != len(ROW_FIELDS):
            raise ValueError(f"a record row is a JSON array of {len(ROW_FIELDS)} values")
        shape = tuple(map(type, row))
        if shape not in _CHECKED_SHAPES:
            _check_row_types(row)  # a ValueError naming the first field of a wrong type
            if len(_CHECKED_SHAPES) < _MAX_SHAPES:
                _CHECKED_SHAPES.add(shape)
        # Each value's type is one its field allows (above); now the values themselves. The
        # row is the reader's own fresh list (json.loads made it): replaced in place.
        shared = strings.setdefault
        row[_FILE] = shared(row[_FILE], row[_FILE])
        row[_TEST] = shared(row[_TEST], row[_TEST])
        row[_SCORER] = shared(row[_SCORER], row[_SCORER])
        value = row[_INSTRUMENT]
        if value is not None:
            row[_INSTRUMENT] = shared(value, value)
        if not row[_METADATA]:
            row[_METADATA] = EMPTY_MAPPING
        if not row[_INPUTS]:
            row[_INPUTS] = EMPTY_MAPPING
        value = row[_MODELS]
        if value:
            if not all(type(m) is str for m in value):
                raise ValueError("record field 'judge_models': a list of strings")
            row[_MODELS] = tuple(shared(m, m) for m in value)
        else:
            row[_MODELS] = ()
        value = row[_TRACE]
        if value is not None:
            row[_TRACE] = _trace_of(value)
        return record_of(row)

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], strings: dict[str, str] | None = None
    ) -> ScoreRecord:
        """The record ``data`` (:meth:`to_json`) describes. With ``strings``, a memo a reader of
        many records keeps, the strings most records share (file, test, scorer, instrument,
        judge models) are stored once, not once per record."""
        fields = {k: v for k, v in data.items() if k in _FIELDS}
        if "judge_models" in fields:
            fields["judge_models"] = tuple(str(m) for m in fields["judge_models"] or ())
        for name in ("index", "sample"):
            if fields.get(name) is None:
                fields.pop(name, None)  # a missing or null index/sample is 0
        if strings is not None:
            for name in _SHARED:
                value = fields.get(name)
                if type(value) is str:
                    fields[name] = strings.setdefault(value, value)
            models = fields.get("judge_models")
            if models:
                fields["judge_models"] = tuple(strings.setdefault(m, m) for m in models)
        for name in ("metadata", "inputs"):
            if type(fields.get(name)) is dict and not fields[name]:
                fields[name] = EMPTY_MAPPING
        if fields.get("trace") is not None:
            fields["trace"] = _trace_of(fields["trace"])
        if not fields.keys() >= _REQUIRED:
            # what older or hand-made reports may leave out: no bound, not cached, not timed
            for name, default in _LENIENT:
                fields.setdefault(name, default)
            return cls(**fields)  # (a field still missing: the dataclass's own TypeError)
        # Every field given or defaulted: filled in directly, as the frozen __init__ would
        # (it sets each field through object.__setattr__; a controller reads one record per
        # case, thousands per run).
        out: ScoreRecord = object.__new__(cls)
        for name, default in _ALL_DEFAULTS:
            _set_field(out, name, fields.get(name, default))
        return out


def _trace_of(value: Any) -> TraceSummary | None:
    """A record's trace summary read back, checked (a ``ValueError`` naming the field)."""
    if value is None:
        return None
    try:
        return TraceSummary.from_json(value)
    except TraceSummaryError as exc:
        raise ValueError(f"record field 'trace': {exc}") from None


#: the empty mapping records share as their metadata or inputs (read-only: one for all)
EMPTY_MAPPING: Mapping[str, Any] = MappingProxyType({})
#: the record fields whose values most records of a run share
_SHARED = ("file", "test", "scorer", "instrument")
_set_field = object.__setattr__


#: the fields of a record in declaration order: the positions of :meth:`ScoreRecord.to_row`
ROW_FIELDS = tuple(f.name for f in dataclasses.fields(ScoreRecord))
#: the keys of a record's JSON form (:meth:`ScoreRecord.to_json`), in the order it has always
#: written them: every field, once
JSON_FIELDS = (
    "file",
    "test",
    "case_id",
    "scorer",
    "index",
    "score",
    "min",
    "max",
    "passed",
    "cached",
    "duration_s",
    "rationale",
    "error",
    "where",
    "metadata",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "judge_calls",
    "cost_usd",
    "judge_models",
    "sample",
    "gated",
    "inputs",
    "instrument",
    "label",
    "label_score",
    "trace",
)
if sorted(JSON_FIELDS) != sorted(ROW_FIELDS):  # (a field added to the record, not here)
    raise RuntimeError("ScoreRecord's JSON form does not name each of its fields once")
_json_values = attrgetter(*JSON_FIELDS)
_NONE: type = type(None)
_NUMBER: frozenset[type] = frozenset({int, float})
_OPT_NUMBER: frozenset[type] = frozenset({int, float, _NONE})
_OPT_STR: frozenset[type] = frozenset({str, _NONE})
_INT: frozenset[type] = frozenset({int})
_BOOL: frozenset[type] = frozenset({bool})
#: the JSON types each row position may hold (as :func:`json.loads` makes them)
_ROW_TYPE_OF: dict[str, frozenset[type]] = {
    "file": frozenset({str}),
    "test": frozenset({str}),
    "case_id": _OPT_STR,
    "scorer": frozenset({str}),
    "index": _INT,
    "score": _OPT_NUMBER,
    "min": _OPT_NUMBER,
    "max": _OPT_NUMBER,
    "passed": frozenset({bool, _NONE}),
    "cached": _BOOL,
    "duration_s": _NUMBER,
    "rationale": _OPT_STR,
    "error": _OPT_STR,
    "where": _OPT_STR,
    "metadata": frozenset({dict}),
    "prompt_tokens": _INT,
    "completion_tokens": _INT,
    "judge_calls": _INT,
    "cost_usd": _OPT_NUMBER,
    "judge_models": frozenset({list}),
    "sample": _INT,
    "gated": _BOOL,
    "inputs": frozenset({dict}),
    "cached_prompt_tokens": _INT,
    "instrument": _OPT_STR,
    "label": frozenset({bool, int, float, str, _NONE}),
    "label_score": _OPT_NUMBER,
    "trace": frozenset({dict, _NONE}),
}
_ROW_TYPES = tuple((name, _ROW_TYPE_OF[name]) for name in ROW_FIELDS)
#: the positions in a row of the values :meth:`ScoreRecord.from_row` does more than set: the
#: shared strings (:data:`_SHARED`, in its order), the mappings, the judge models, the trace
_FILE, _TEST, _SCORER, _INSTRUMENT = (ROW_FIELDS.index(n) for n in _SHARED)
_METADATA, _INPUTS, _MODELS, _TRACE = (
    ROW_FIELDS.index(n) for n in ("metadata", "inputs", "judge_models", "trace")
)
#: the rows' shapes (each value's type, in order) found to be allowed: a run's records come in
#: a handful of shapes, each checked field by field once (bounded: a shape past the bound is
#: checked every time)
_CHECKED_SHAPES: set[tuple[type, ...]] = set()
_MAX_SHAPES = 4096
#: runs an iterator to its end, keeping nothing
_drain: Callable[[Iterable[Any]], None] = deque[Any](maxlen=0).extend


def record_of(values: Sequence[Any]) -> ScoreRecord:
    """The record whose fields are ``values``, in :data:`ROW_FIELDS` order (every field, as
    the dataclass would hold it: tuples, mappings, a trace summary), set in one pass in C as
    the frozen ``__init__`` would set them one by one: made for every scored assertion."""
    if len(values) != len(ROW_FIELDS):
        raise TypeError(f"a record has {len(ROW_FIELDS)} fields, not {len(values)}")
    out: ScoreRecord = object.__new__(ScoreRecord)
    _drain(map(_set_field, repeat(out), ROW_FIELDS, values))
    return out


def _check_row_types(row: list[Any]) -> None:
    """A ``ValueError`` naming the first value of ``row`` whose JSON type its field does not
    allow (:data:`_ROW_TYPE_OF`)."""
    for (name, types), value in zip(_ROW_TYPES, row, strict=True):
        if type(value) not in types:
            raise ValueError(f"record field {name!r}: {type(value).__name__} is not allowed")


#: the version of the records' wire form (:func:`records_to_wire`)
WIRE_VERSION = 2  # 2: the trace summary (issue 21)


def records_to_wire(records: Iterable[ScoreRecord]) -> str:
    """The records of one test as an xdist worker ships them to the controller: JSON, one
    array per record (:meth:`ScoreRecord.to_row`) under the wire form's version."""
    return json.dumps({"v": WIRE_VERSION, "rows": [r.to_row() for r in records]}, allow_nan=False)


def records_from_wire(text: str, strings: dict[str, str]) -> list[ScoreRecord]:
    """The records :func:`records_to_wire` wrote; ``ValueError`` (or ``TypeError``) for anything
    else, e.g. a worker running another version of pytest-llmeval."""
    data = json.loads(text)
    version, rows = (data.get("v"), data.get("rows")) if type(data) is dict else (None, None)
    if version != WIRE_VERSION or type(rows) is not list:
        raise ValueError(
            f"not score records of wire version {WIRE_VERSION} (got version {version!r}): "
            "every xdist worker must run the same pytest-llmeval as the controller"
        )
    return [ScoreRecord.from_row(row, strings) for row in rows]


#: the fields of a record; those a reader may leave out (filled in as older reports imply), and
#: the defaults of the others
_FIELDS = frozenset(ScoreRecord.__dataclass_fields__)
_LENIENT = (("min", None), ("max", None), ("cached", False), ("duration_s", 0.0), ("index", 0))
_REQUIRED = frozenset(
    n
    for n, f in ScoreRecord.__dataclass_fields__.items()
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)
_DEFAULTS = {
    n: f.default
    for n, f in ScoreRecord.__dataclass_fields__.items()
    if f.default is not dataclasses.MISSING
}
#: every field with its default (None: required; the empty mapping for metadata and inputs)
_ALL_DEFAULTS = tuple(
    (n, _DEFAULTS.get(n, EMPTY_MAPPING if f.default_factory is not dataclasses.MISSING else None))
    for n, f in ScoreRecord.__dataclass_fields__.items()
)


@final
class TestRecorder:
    """Collects the records of the test that is running (set by the plugin per test item)."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(
        self,
        file: str,
        test: str,
        case_id: str | None,
        where: str | None,
        *,
        sample: int = 0,
        owner: object = None,
    ) -> None:
        #: what the recorder records for (the plugin: the pytest item), told apart by identity
        self.owner = owner
        self.file = file
        self.test = test
        self.case_id = case_id
        self.where = where
        self.sample = sample
        self.records: list[ScoreRecord] = []
        #: scorers under a suite gate in this test (set by the plugin)
        self.gated: frozenset[str] = frozenset()
        #: gated scorers whose per-case misses are recorded, not raised (unless
        #: --llm-eval-strict-cases)
        self.soft: frozenset[str] = frozenset()
        #: one line per softened miss, for the test's terminal status
        self.gated_misses: list[str] = []
        #: the summary of the test's trace, set when its ``llm_eval_trace`` capture ends; put
        #: on each of its records when they are shipped
        self.trace: TraceSummary | None = None
        self._counts: dict[str, int] = {}

    def next_index(self, scorer: str) -> int:
        n = self._counts.get(scorer, 0)
        self._counts[scorer] = n + 1
        return n

    def add(self, record: ScoreRecord) -> None:
        self.records.append(record)


current_recorder: contextvars.ContextVar[TestRecorder | None] = contextvars.ContextVar(
    "pytest_llmeval_recorder", default=None
)


@final
@dataclass
class ScorerAggregate:
    """Per-scorer totals over a run."""

    scorer: str
    n: int = 0
    scored: int = 0
    total: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    passed: int = 0
    failed: int = 0
    errors: int = 0
    cache_hits: int = 0
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    time_s: float = 0.0
    cached_prompt_tokens: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.scored if self.scored else None

    def add(self, rec: ScoreRecord) -> None:
        self.n += 1
        self.time_s += rec.duration_s
        # Judge calls are paid whether or not the scoring succeeded.
        self.judge_calls += rec.judge_calls
        self.prompt_tokens += rec.prompt_tokens
        self.cached_prompt_tokens += rec.cached_prompt_tokens
        self.completion_tokens += rec.completion_tokens
        if rec.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + rec.cost_usd
        if rec.error is not None:
            self.errors += 1
            return
        if rec.score is not None:
            self.scored += 1
            self.total += rec.score
            self.min = min(self.min, rec.score)
            self.max = max(self.max, rec.score)
        if rec.passed is True:
            self.passed += 1
        elif rec.passed is False:
            self.failed += 1
        if rec.cached:
            self.cache_hits += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer,
            "n": self.n,
            "mean": self.mean,
            "min": self.min if self.scored else None,
            "max": self.max if self.scored else None,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "cache_hits": self.cache_hits,
            "judge_calls": self.judge_calls,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "time_s": self.time_s,
        }


#: the last run's aggregates: (its records, how many there were, the aggregates). The terminal
#: summary and the JSON report both ask for the aggregates of the same records at the end of a
#: session: one pass over a record per case, not two.
_last_aggregate: tuple[Any, int, dict[str, ScorerAggregate]] | None = None


def aggregate(records: Iterable[ScoreRecord]) -> dict[str, ScorerAggregate]:
    """Per-scorer aggregates, in scorer-name order (a new dict each call; asked twice for the
    same unchanged list or tuple of records, the aggregates are counted once)."""
    global _last_aggregate
    kept = isinstance(records, (list, tuple))
    last = _last_aggregate
    # (a tuple cannot change; a list may have grown since)
    if kept and last is not None and last[0] is records and len(records) == last[1]:
        return dict(last[2])
    rows = records if kept else list(records)
    groups: dict[str, Any] = {}
    scorers = list(map(_SCORER_OF, rows))
    if len(set(scorers)) == 1:
        groups[scorers[0]] = rows  # (one scorer: the common case, no pass per record)
    else:
        for scorer, rec in zip(scorers, rows, strict=True):
            group = groups.get(scorer)
            if group is None:
                group = groups[scorer] = []
            group.append(rec)
    out = {scorer: _aggregate_of(scorer, group) for scorer, group in groups.items()}
    result = dict(sorted(out.items()))
    _last_aggregate = (records, len(records), result) if kept else None  # type: ignore[arg-type]
    return dict(result)


_SCORER_OF = attrgetter("scorer")
_ERROR_OF = attrgetter("error")
_SCORE_OF = attrgetter("score")
_PASSED_OF = attrgetter("passed")
_CACHED_OF = attrgetter("cached")
_COST_OF = attrgetter("cost_usd")
_DURATION_OF = attrgetter("duration_s")
#: the counts an aggregate sums over every record, errors included (as
#: :meth:`ScorerAggregate.add` adds them up before it looks at the error)
_COUNTED = tuple(
    attrgetter(name)
    for name in ("judge_calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens")
)
_is_none = partial(is_, None)
_is_not_none = partial(is_not, None)
_is_true = partial(is_, True)
_is_false = partial(is_, False)


def _aggregate_of(scorer: str, records: Sequence[ScoreRecord]) -> ScorerAggregate:
    """The aggregate :meth:`ScorerAggregate.add` makes of ``records`` one by one, made in C
    passes over them (a pass per field, no Python work per record): the same sums, added in
    the same order, so the same floats. (Floats are folded with ``reduce``, not ``sum``: from
    Python 3.12 ``sum`` compensates rounding and so differs in the last bits.)"""
    agg = ScorerAggregate(scorer, n=len(records))
    agg.time_s = reduce(add, map(_DURATION_OF, records), 0.0)
    agg.judge_calls, agg.prompt_tokens, agg.cached_prompt_tokens, agg.completion_tokens = (
        sum(map(get, records)) for get in _COUNTED
    )
    costs = list(filter(_is_not_none, map(_COST_OF, records)))
    if costs:
        agg.cost_usd = reduce(add, costs, 0.0)
    clean = list(map(_is_none, map(_ERROR_OF, records)))
    ok = records if all(clean) else list(compress(records, clean))
    agg.errors = len(records) - len(ok)
    scores = list(filter(_is_not_none, map(_SCORE_OF, ok)))
    if scores:
        agg.scored = len(scores)
        agg.total = reduce(add, scores, 0.0)
        # (from the start values, as add() folds them: the same result for any value)
        agg.min = min(chain((agg.min,), scores))
        agg.max = max(chain((agg.max,), scores))
    passed = list(map(_PASSED_OF, ok))
    agg.passed = sum(map(_is_true, passed))
    agg.failed = sum(map(_is_false, passed))
    agg.cache_hits = len(list(filter(None, map(_CACHED_OF, ok))))
    return agg


def forget_aggregates() -> None:
    """Let go of the records the aggregate memo holds (the run controller's release)."""
    global _last_aggregate
    _last_aggregate = None
