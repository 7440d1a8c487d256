"""``score``/``assert_score`` and their batch forms: resolve the scorer, check inputs, consult the
cache, score, record, and check bounds.

Why this module is long: it is the public scoring API (``assert_score``, ``assert_scores``,
``score``, ``score_many`` and their async twins) and the one pipeline they share (resolve, cache
lookup, in-flight deduplication, record); the sync and async paths are kept side by side so they
cannot drift apart."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, final

from pytest_llmeval.core import aio as _aio
from pytest_llmeval.core.errors import (
    CacheMissError,
    InvalidCacheEntryError,
    LLMEvalError,
    ScorerConfigError,
    ScorerInputError,
    describe_value,
)
from pytest_llmeval.core.model import Instrument
from pytest_llmeval.core.records import EMPTY_MAPPING, ScoreRecord, current_recorder, record_of
from pytest_llmeval.core.redaction import redact_text
from pytest_llmeval.core.scores import Score, spent_usage
from pytest_llmeval.core.settings import Secret
from pytest_llmeval.core.usage import UsageCollector, current_usage
from pytest_llmeval.engine import context as _context_module
from pytest_llmeval.engine.context import ScoringContext, get_context
from pytest_llmeval.engine.panel import PANEL_KEYWORDS, Panel, member_error, panel_of
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.engine.scoring import Scorer, check_bound_range
from pytest_llmeval.stores.cache_entries import score_value_problem
from pytest_llmeval.stores.cache_protocol import ExplainingStore, KeyAbout, input_key, key_parts
from pytest_llmeval.stores.store_modes import invalid_reason, misses_are_errors, reject_entry

__all__ = [
    "BatchResult",
    "LLMEvalAssertionError",
    "ascore",
    "assert_score",
    "assert_score_async",
    "assert_scores",
    "assert_scores_async",
    "resolve_scorer",
    "score",
    "score_async",
    "score_many",
]

_STANDARD_FIELDS = ("output", "expected", "input", "context")
_perf_counter = time.perf_counter

#: a Score made without running __init__ (see core.scores.make_score: cheap results)
_new_object = object.__new__


class LLMEvalAssertionError(AssertionError):
    """A score fell outside its bounds. Shown by pytest like any failed assert."""


def _scorer_class(scorer: str | Scorer | type[Scorer]) -> type[Scorer]:
    if isinstance(scorer, str):
        return default_registry.get(scorer)
    if isinstance(scorer, Scorer):
        return type(scorer)
    if isinstance(scorer, type) and issubclass(scorer, Scorer):
        return scorer
    raise TypeError(
        f"scorer must be a registered name, a Scorer subclass or instance, not {scorer!r}"
    )


# Scorer instances are immutable once built; the same (class, options) is asked for once per
# test in a dataset run, so instances are reused. Options that cannot be hashed (a schema dict,
# a scorer object) simply build a new instance.
_INSTANCES: dict[tuple[type[Scorer], tuple[tuple[str, Any], ...]], Scorer] = {}
_MAX_INSTANCES = 512


def resolve_scorer(scorer: str | Scorer | type[Scorer], options: Mapping[str, Any]) -> Scorer:
    """A scorer instance from a name, a class or an instance, with ``options`` applied."""
    if isinstance(scorer, Scorer):
        if not options:
            return scorer
        return type(scorer)(**{**scorer.options, **options})
    return _instance(_scorer_class(scorer), options)


def _instance(cls: type[Scorer], options: Mapping[str, Any]) -> Scorer:
    if not options:
        inst = _INSTANCES.get((cls, ()))
        if inst is not None:
            return inst
    try:
        memo_key = (cls, tuple(sorted(options.items())))
        hash(memo_key)
    except TypeError:
        return cls(**options)
    inst = _INSTANCES.get(memo_key)
    if inst is None:
        inst = cls(**options)
        if len(_INSTANCES) >= _MAX_INSTANCES:
            _INSTANCES.clear()
        _INSTANCES[memo_key] = inst
    return inst


def _split(
    scorer: str | Scorer | type[Scorer], fields: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> tuple[Scorer, dict[str, Any]]:
    """Split call keywords into scorer inputs (declared input fields) and scorer options."""
    cls = _scorer_class(scorer)
    declared = cls.input_fields()
    inputs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in declared:
            if value is not None:
                inputs[key] = value
        else:
            options[key] = value
    for key, value in fields.items():
        if value is not None and key in declared:
            inputs[key] = value
    if isinstance(scorer, Scorer):
        return resolve_scorer(scorer, options), inputs
    return _instance(cls, options), inputs


@final
class _Plan:
    """What ``score(scorer, output=..., ...)`` without options works out once per scorer (a
    name, a class or an instance) so that each call does not: the instance, which standard
    fields are inputs and which are required, the range check's bounds, the result's fixed
    fields, and the scorer's value function if it has one.

    Like the instance memo, a plan reads the scorer class's attributes once; a name's plan is
    dropped when the registry changes (``register``). A scorer with its own ``check_inputs``,
    or with a required input that is not a standard field (the call fails), gets no plan: the
    general path runs, and raises.
    """

    __slots__ = (
        "contained",
        "hi",
        "inst",
        "lo",
        "name",
        "need_context",
        "need_expected",
        "need_input",
        "need_output",
        "pair",
        "take_context",
        "take_expected",
        "take_input",
        "take_output",
        "unstored",
    )

    def __init__(self, inst: Scorer) -> None:
        cls = type(inst)
        declared = cls.input_fields()
        required = set(cls.required_inputs)
        self.inst = inst
        self.contained = inst.is_self_contained()
        self.take_output = "output" in declared
        self.take_expected = "expected" in declared
        self.take_input = "input" in declared
        self.take_context = "context" in declared
        self.need_output = "output" in required
        self.need_expected = "expected" in required
        self.need_input = "input" in required
        self.need_context = "context" in required
        pair = inst.value_function()
        # The value function sees output and expected only: both must be inputs, and no other
        # standard field may be.
        usable_pair = (
            self.take_output
            and self.take_expected
            and not self.take_input
            and not self.take_context
        )
        self.pair = pair if usable_pair else None
        lo, hi = cls.score_range
        self.lo = lo - 1e-9
        self.hi = hi + 1e-9
        self.name = inst.name
        self.unstored = not inst.stores_results()

    @staticmethod
    def of(scorer: str | Scorer | type[Scorer]) -> _Plan | None:
        """A new plan for ``scorer``, or None when the general path must run (also when
        resolving ``scorer`` fails: the general path raises that error, as it always has)."""
        try:
            inst = resolve_scorer(scorer, {})
        except Exception:
            return None
        cls = type(inst)
        if cls.check_inputs is not Scorer.check_inputs or not set(cls.required_inputs) <= set(
            _STANDARD_FIELDS
        ):
            return None
        return _Plan(inst)


#: name, class or instance -> its plan (None: none possible). A Scorer instance is a key only
#: when it hashes and compares by identity; the plan holds it, so its id is not reused while
#: here. Cleared by the registry's register() (a name may now mean another class).
_PLANS: dict[Any, _Plan | None] = default_registry.memo


def _plan(scorer: str | Scorer | type[Scorer]) -> _Plan | None:
    """Make ``scorer``'s plan, and keep it when ``scorer`` can be a key of :data:`_PLANS`."""
    plan = _Plan.of(scorer)
    if isinstance(scorer, Scorer):
        cls = type(scorer)
        if cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__:
            return plan  # an equal but other instance must not find this one's plan
    elif not (type(scorer) is str or isinstance(scorer, type)):
        return plan
    if len(_PLANS) >= _MAX_INSTANCES:
        _PLANS.clear()
    _PLANS[scorer] = plan
    return plan


#: the key part that tells the asks of ``judge_samples`` apart (no scorer input has this name)
_ASK_KEY = "\x00judge_sample"
#: how ``judge_samples`` asks are reduced to one score
JUDGE_REDUCERS = ("mean", "majority")
#: the most asks one scoring may make (``judge_samples``)
MAX_JUDGE_SAMPLES = 100


#: the call keywords that ask the judge otherwise than once
_ASKED = frozenset({"judge_samples", "judge_reduce", "swap", *PANEL_KEYWORDS})


def _without_sampling(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in _ASKED}


@final
@dataclass(frozen=True)
class _Sampling:
    """``judge_samples=K``: ask the judge K times, each ask with its own cache entry and, where
    the run sends a seed, its own seed (the run's seed, or ``seed=``, plus the ask's number),
    then reduce the K scores to one: ``mean`` (their mean) or ``majority`` (the score that
    more than half of the asks reach or beat in the scorer's direction: against one bound the
    verdict is the majority's, and a tie fails)."""

    scorer: str
    k: int
    how: str
    base_seed: int | None

    def asks(self, options: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for ask in range(self.k):
            opts = dict(options)
            if self.base_seed is not None and ask:
                opts["seed"] = self.base_seed + ask
            out.append((ask, opts))
        return out

    def reduce(self, inst: Scorer, scores: Sequence[Score], t0: float) -> Score:
        values = [s.value for s in scores]
        if self.how == "mean":
            value = math.fsum(values) / len(values)
            chosen = min(range(len(values)), key=lambda i: abs(values[i] - value))
        else:
            order = sorted(
                range(len(values)), key=lambda i: values[i], reverse=inst.higher_is_better
            )
            chosen = order[len(values) // 2]
            value = values[chosen]
        usage = spent_usage(scores)
        asks = []
        for i, s in enumerate(scores):
            one: dict[str, Any] = {"value": s.value, "cached": s.cached}
            if self.base_seed is not None:
                one["seed"] = self.base_seed + i
            if "choice" in s.metadata:
                one["choice"] = s.metadata["choice"]
            if s.rationale:
                one["rationale"] = s.rationale[:500]
            asks.append(one)
        rep = scores[chosen]
        listed = ", ".join(f"{v:.4g}" for v in values)
        head = f"{self.k} judge samples ({listed}), {self.how} {value:.4g}"
        metadata = {**rep.metadata, "judge_samples": asks, "judge_reduce": self.how}
        if self.how == "mean" and len({s.metadata.get("choice") for s in scores}) > 1:
            # the mean of split asks is no one choice: the agreement's choice table must not
            # count it as the representative ask's (each ask's choice is in judge_samples)
            metadata.pop("choice", None)
        return Score(
            value=value,
            scorer=inst.name,
            rationale=f"{head}; ask {chosen + 1}: {rep.rationale}" if rep.rationale else head,
            metadata=metadata,
            usage=usage,
            cached=all(s.cached for s in scores),
            duration_s=time.perf_counter() - t0,
        )


@final
@dataclass(frozen=True)
class _Swap:
    """``swap=True``: ask a pairwise judge in both orders. The second answer, given with the
    two compared inputs exchanged, is read back by mirroring the scorer's range (``lo + hi -
    s``: "the second is better" becomes "the first is worse"); the score is the mean of the
    two readings, and the answers are *position-inconsistent* when the readings differ (the
    judge preferred whichever text came first, or second)."""

    fields: tuple[str, str]

    def exchange(
        self, fields: Mapping[str, Any], options: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        a, b = self.fields
        f, o = dict(fields), dict(options)
        va = f[a] if f.get(a) is not None else o.get(a)
        vb = f[b] if f.get(b) is not None else o.get(b)
        for name, value in ((a, vb), (b, va)):
            if name in _STANDARD_FIELDS:
                f[name] = value
            else:
                o[name] = value
        return f, o

    def combine(self, inst: Scorer, first: Score, second: Score, t0: float) -> Score:
        lo, hi = (float(x) for x in inst.score_range)
        mirrored = lo + hi - second.value
        value = (first.value + mirrored) / 2.0
        consistent = abs(first.value - mirrored) <= 1e-9
        usage = spent_usage((first, second))
        swap: dict[str, Any] = {
            "fields": list(self.fields),
            "first": first.value,
            "second": second.value,
            "second_mirrored": mirrored,
            "consistent": consistent,
        }
        for key, s in (("first_choice", first), ("second_choice", second)):
            if "choice" in s.metadata:
                swap[key] = s.metadata["choice"]
        word = "consistent" if consistent else "POSITION-INCONSISTENT"
        head = (
            f"asked in both orders: {first.value:.4g}, then {second.value:.4g} with "
            f"{self.fields[0]} and {self.fields[1]} exchanged (read back {mirrored:.4g}): "
            f"{word}, mean {value:.4g}"
        )
        metadata = {**first.metadata, "swap": swap}
        if not consistent:
            # (the orders disagree: the first order's choice is not the verdict)
            metadata.pop("choice", None)
        return Score(
            value=value,
            scorer=inst.name,
            rationale=f"{head}; first order: {first.rationale}" if first.rationale else head,
            metadata=metadata,
            usage=usage,
            cached=first.cached and second.cached,
            duration_s=time.perf_counter() - t0,
        )


def _panel(scorer: str | Scorer | type[Scorer], kwargs: Mapping[str, Any]) -> Panel | None:
    return panel_of(_scorer_name(scorer), _scorer_class(scorer), kwargs)


def _panel_result(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    rest: Mapping[str, Any],
    panel: Panel,
    answers: Sequence[Score | BaseException],
    t0: float,
) -> tuple[Scorer, Score]:
    # The instrument is always the first judge's scorer, whichever judges answered: else a
    # case where the first failed (panel_errors='survivors') would name another instrument.
    opts = _without_sampling({**rest, **panel.judges[0].call_options()})
    inst = _split(scorer, fields, opts)[0]
    return inst, panel.combine(inst, answers, t0)


def _swapping(scorer: str | Scorer | type[Scorer], kwargs: Mapping[str, Any]) -> _Swap | None:
    """The checked ``swap`` of a call: None unless True. Raises :class:`ScorerConfigError` for
    a value other than True/False/None, or a scorer that compares no two inputs."""
    swap = kwargs.get("swap")
    if swap is None or swap is False:
        return None
    name = _scorer_name(scorer)
    if swap is not True:
        raise ScorerConfigError(
            name, "swap", f"is {describe_value(swap)}", hint="Give swap=True or leave it out"
        )
    pair = _scorer_class(scorer).swap_fields
    if not pair:
        raise ScorerConfigError(
            name,
            "swap",
            "asks a judge that compares two texts in both orders, and this scorer compares "
            "no two of its inputs",
            hint="swap= works with battle, summary, summary_quality and classifiers defined "
            "with swap_fields=(a, b)",
        )
    lo, hi = (float(x) for x in _scorer_class(scorer).score_range)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # the second order is read back as lo + hi - s: an unbounded end has no mirror (it
        # would read every answer back as infinity, a pass for any min=)
        raise ScorerConfigError(
            name,
            "swap",
            f"reads the second order back on the mirrored range, and this scorer's range "
            f"[{lo}, {hi}] is unbounded",
            hint="swap= needs a scorer with a bounded range",
        )
    choices = getattr(_scorer_class(scorer), "choice_scores", None)
    if isinstance(choices, Mapping):
        values = [float(v) for v in choices.values()]
        lonely = next(
            (v for v in values if not any(abs(lo + hi - v - w) <= 1e-9 for w in values)), None
        )
        if lonely is not None:
            # a choice whose mirrored score is no choice cannot be read back: a judge that
            # answered it in both orders would get their mean, which is not what it said
            raise ScorerConfigError(
                name,
                "swap",
                f"reads the second order's choice back as {lo:g} + {hi:g} - its score, and the "
                f"choice scored {lonely:g} has no mirror among the choices' scores "
                f"({', '.join(f'{v:g}' for v in sorted(set(values)))})",
                hint="Score the choices symmetrically (e.g. a tie 0.5) to ask in both orders",
            )
    return _Swap(pair)


def _instrument_of(inst: Scorer, ctx: ScoringContext, kwargs: Mapping[str, Any]) -> Instrument:
    """The instrument of a scoring made with the call keywords ``kwargs``."""
    asked = _asked(inst, kwargs) if kwargs else None
    return inst.instrument_with(ctx, asked) if asked else inst.instrument(ctx)


def _asked(inst: Scorer, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """How a call asked its judge, when not once (its instrument says so; the keywords were
    checked when it scored)."""
    out: dict[str, Any] = {}
    k = kwargs.get("judge_samples")
    if isinstance(k, int) and not isinstance(k, bool) and k > 1:
        out["judge_samples"] = k
        out["judge_reduce"] = kwargs.get("judge_reduce") or "mean"
    if kwargs.get("swap") is True:
        out["swap"] = True
    if kwargs.get("judges") is not None:
        panel = panel_of(inst.name, type(inst), kwargs)
        if panel is not None:
            out.update(panel.describe())
    return out


def _sampling(
    scorer: str | Scorer | type[Scorer], kwargs: Mapping[str, Any], ctx: ScoringContext
) -> _Sampling | None:
    """The checked ``judge_samples``/``judge_reduce`` of a call, or None for one ask
    (``judge_samples`` 1 or None). Raises :class:`ScorerConfigError` for a count that is not a
    whole number >= 1, an unknown reducer, or a scorer that asks no judge."""
    name = _scorer_name(scorer)
    k = kwargs.get("judge_samples")
    how = kwargs.get("judge_reduce")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ScorerConfigError(
            name,
            "judge_samples",
            f"is {describe_value(k)}, not a whole number >= 1",
            hint="Give the number of times to ask the judge, e.g. judge_samples=5",
        )
    if k is not None and k > MAX_JUDGE_SAMPLES:
        raise ScorerConfigError(
            name,
            "judge_samples",
            f"is {k}, more asks than {MAX_JUDGE_SAMPLES} for one scoring",
            hint="A few asks (3 to 9) show a judge's noise; more is a typo or a budget leak",
        )
    if how is not None and how not in JUDGE_REDUCERS:
        raise ScorerConfigError(
            name,
            "judge_reduce",
            f"is {how!r}",
            hint=f"Use one of {', '.join(JUDGE_REDUCERS)}",
        )
    if how is not None and k is None:
        raise ScorerConfigError(
            name, "judge_reduce", "is given without judge_samples", hint="Add judge_samples=K"
        )
    if k is not None and not _scorer_class(scorer).uses_judge:
        raise ScorerConfigError(
            name,
            "judge_samples",
            "asks a judge several times, and this scorer computes its score without one",
            hint="Drop judge_samples= (a deterministic scorer gives the same score every time)",
        )
    if k is None or k == 1:
        return None
    seed = kwargs.get("seed")
    if seed is None:
        seed = ctx.judge_settings({}).seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        seed = None  # (the scorer's own check of seed= says what is wrong with it)
    return _Sampling(name, k, how or "mean", seed)


def _score_planned(
    plan: _Plan, output: Any, expected: Any, input: Any, context: Any, ctx: ScoringContext
) -> Score | None:
    """:func:`score` by ``plan`` (without a value function) with the cache off; None when a
    required input is missing (the general path raises the error)."""
    __tracebackhide__ = True
    t0 = _perf_counter()
    inputs: dict[str, Any] = {}
    if output is not None:
        if plan.take_output:
            inputs["output"] = output
    elif plan.need_output:
        return None
    if expected is not None:
        if plan.take_expected:
            inputs["expected"] = expected
    elif plan.need_expected:
        return None
    if input is not None:
        if plan.take_input:
            inputs["input"] = input
    elif plan.need_input:
        return None
    if context is not None:
        if plan.take_context:
            inputs["context"] = context
    elif plan.need_context:
        return None
    inst = plan.inst
    if plan.contained:
        try:
            result = inst.compute(inputs, ctx)
        except ScorerInputError as exc:
            raise _located(exc) from None
    else:
        result = _compute(inst, inputs, ctx)
    return _checked(inst, result, t0)


def _protect(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Wrap a per-call ``api_key`` in :class:`Secret` at once, so no frame, repr or
    ``--showlocals`` output below the public entry points can show it."""
    key = kwargs.get("api_key")
    if key is not None and not isinstance(key, Secret):
        kwargs["api_key"] = Secret(str(key))
    return kwargs


def _where() -> str | None:
    rec = current_recorder.get()
    return rec.where if rec is not None else None


def _located(exc: ScorerInputError) -> ScorerInputError:
    where = _where()
    return exc.at(where) if where and not exc.where else exc


def _prepare(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
    ask: int = 0,
) -> tuple[Scorer, dict[str, Any], str | None]:
    """The scorer instance, its inputs and its cache key. ``ask``: which of ``judge_samples``
    asks this is; each ask after the first has a key of its own (also when the model takes no
    seed, so the asks are never one cached answer read K times)."""
    __tracebackhide__ = True
    try:
        inst, inputs = _split(scorer, fields, kwargs)
        inst.check_inputs(inputs)
    except ScorerInputError as exc:
        raise _located(exc) from None
    key: str | None = None
    if ctx.result_cache() is not None and inst.stores_results():
        keyed = inst.key_inputs(inputs)
        if ask:
            keyed = {**keyed, _ASK_KEY: ask}
        key = input_key(inst.identity_json(ctx), keyed)
    return inst, inputs, key


def _about(inst: Scorer, inputs: Mapping[str, Any], ctx: ScoringContext) -> KeyAbout:
    """What the key of this scoring is made of, and which case asks (the store keeps it beside
    the value to explain replay misses). Only built on a miss: never on the warm path."""
    parts = key_parts(json.loads(inst.identity_json(ctx)), inst.key_inputs(inputs))
    rec = current_recorder.get()
    if rec is None:
        return KeyAbout(inst.name, parts)
    case = rec.where or (f"{rec.test}[{rec.case_id}]" if rec.case_id else rec.test)
    # ASCII JSON: a test or case id may hold a lone surrogate, which SQLite text cannot take.
    locator = json.dumps([rec.file, rec.test, rec.case_id], ensure_ascii=True)
    return KeyAbout(inst.name, parts, locator, case)


def _replay_miss(
    inst: Scorer, inputs: Mapping[str, Any], key: str, ctx: ScoringContext
) -> CacheMissError:
    cache = ctx.result_cache()
    rec = current_recorder.get()
    case = rec.where if rec is not None else None
    reason = None
    explain = getattr(cache, "explain_miss", None)
    try:
        about = _about(inst, inputs, ctx)
        case = about.case
        if explain is not None:
            reason = explain(key, about)
    except Exception:  # the explanation is a courtesy: the miss itself must still be reported
        reason = None
    return CacheMissError(inst.name, key, case=case, reason=reason)


def _lookup(
    inst: Scorer, inputs: Mapping[str, Any], key: str | None, ctx: ScoringContext, t0: float
) -> Score | None:
    if key is None:
        return None
    cache = ctx.result_cache()
    if cache is None:
        return None
    hit = cache.get(key)  # refresh: the store finds nothing (WriteOnlyStore)
    problem: str | None = None
    if hit is not None:
        # Whoever could write the store chose this value: it becomes a score only if it is one
        # of this scorer (a number within its range), else it is a miss (an error in replay).
        problem = _cached_problem(inst, hit)
        if problem is None:
            try:
                return Score.from_cache(hit, inst.name, duration_s=time.perf_counter() - t0)
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"unreadable ({type(exc).__name__}: {exc})"
        reject_entry(cache, key, problem)
    if inst.uses_judge and misses_are_errors(cache):
        # Replay stands in for the judge; a scorer that needs none just computes.
        problem = problem or invalid_reason(cache, key)
        if problem is not None:
            rec = current_recorder.get()
            raise InvalidCacheEntryError(
                inst.name, key, problem, case=rec.where if rec is not None else None
            )
        raise _replay_miss(inst, inputs, key, ctx)
    return None


def _cached_problem(inst: Scorer, value: Mapping[str, Any]) -> str | None:
    """Why a stored ``value`` is not a score of ``inst`` (see :func:`score_value_problem`, and
    the scorer's range: either end may be unbounded), or None."""
    problem = score_value_problem(value)
    if problem is not None:
        return problem
    number = float(value["value"])
    lo, hi = inst.score_range
    if not lo - 1e-9 <= number <= hi + 1e-9:
        return f"'value' {value['value']!r} is outside the scorer's range [{lo}, {hi}]"
    return None


def _out_of_range(inst: Scorer, value: float) -> LLMEvalError:
    lo, hi = inst.score_range
    if not math.isfinite(value):
        return LLMEvalError(
            f"scorer {inst.name!r} produced {value!r}, which is not a score (a score is a finite "
            "number, even for a scorer unbounded on one side); this is a bug in the scorer"
        )
    return LLMEvalError(
        f"scorer {inst.name!r} produced {value!r}, outside its declared range [{lo}, {hi}]; "
        "this is a bug in the scorer"
    )


def _checked(inst: Scorer, result: Score, t0: float) -> Score:
    """``result`` as the call returns it: its value a float within the scorer's declared range
    (NaN is not), named after the scorer, not cached, timed from ``t0``."""
    value = float(result.value)
    lo, hi = inst.score_range
    # NaN compares false (it fails too); an infinite value within an unbounded range is no score
    if not lo - 1e-9 <= value <= hi + 1e-9 or value in (math.inf, -math.inf):
        raise _out_of_range(inst, value)
    if type(result) is not Score:
        return result.replace(
            scorer=inst.name, value=value, cached=False, duration_s=time.perf_counter() - t0
        )
    # Score.replace, without its check of the field names (these are fields).
    out: Score = _new_object(Score)
    fields = out.__dict__
    fields.update(result.__dict__)
    fields["scorer"] = inst.name
    fields["value"] = value
    fields["cached"] = False
    fields["duration_s"] = _perf_counter() - t0
    return out


def _finish(
    inst: Scorer,
    inputs: Mapping[str, Any],
    result: Score,
    key: str | None,
    ctx: ScoringContext,
    t0: float,
) -> Score:
    out = _checked(inst, result, t0)
    if key is None:
        return out
    cache = ctx.result_cache()
    if cache is not None:  # replay: the store keeps nothing (ReplayStore)
        if hasattr(cache, "explain_miss"):
            try:
                about: KeyAbout | None = _about(inst, inputs, ctx)
            except Exception:
                about = None  # the parts only explain misses; the value is stored all the same
            cast(ExplainingStore, cache).put(key, inst.name, out.to_cache(), about=about)
        else:
            cache.put(key, inst.name, out.to_cache())
    return out


def _score_sync(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
) -> tuple[Scorer, Score]:
    """Score once, or ``judge_samples`` times reduced to one score (see :func:`_sampling`),
    in one order or, with ``swap=True``, in both (see :func:`_swapping`)."""
    __tracebackhide__ = True
    if not _ASKED.intersection(kwargs):
        return _score_sync_one(scorer, fields, kwargs, ctx)
    panel = _panel(scorer, kwargs)
    if panel is not None:
        t0 = time.perf_counter()
        rest = {k: v for k, v in kwargs.items() if k not in PANEL_KEYWORDS}
        answers: list[Score | BaseException] = []
        for judge in panel.judges:
            try:
                answer = _score_sync(scorer, fields, {**rest, **judge.call_options()}, ctx)[1]
            except Exception as exc:
                if not member_error(exc):
                    _paid_before(exc, [a for a in answers if isinstance(a, Score)])
                    raise
                answers.append(exc)
            else:
                answers.append(answer)
        return _panel_result(scorer, fields, rest, panel, answers, t0)
    swap = _swapping(scorer, kwargs)
    plan = _sampling(scorer, kwargs, ctx)
    options = _without_sampling(kwargs)
    t0 = time.perf_counter()

    def once(fields: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[Scorer, Score]:
        if plan is None:
            return _score_sync_one(scorer, fields, options, ctx)
        asks: list[tuple[Scorer, Score]] = []
        for ask, opts in plan.asks(options):
            try:
                asks.append(_score_sync_one(scorer, fields, opts, ctx, ask))
            except Exception as exc:
                _paid_before(exc, [s for _, s in asks])
                raise
        return asks[0][0], plan.reduce(asks[0][0], [s for _, s in asks], t0)

    inst, first = once(fields, options)
    if swap is None:
        return inst, first
    try:
        _, second = once(*swap.exchange(fields, options))
    except Exception as exc:
        _paid_before(exc, [first])
        raise
    return inst, swap.combine(inst, first, second, t0)


def _paid_before(exc: BaseException, answered: Sequence[Score]) -> None:
    """Make ``exc`` (the error of one ask or order) carry, besides its own judge calls, those
    of the asks that answered before it failed: the case's record shows what it paid (their
    answers are cached, so the next run does not pay them again)."""
    total = spent_usage(answered, (getattr(exc, "llm_eval_usage", None),))
    if total is not None:
        try:
            exc.llm_eval_usage = total  # type: ignore[attr-defined]
        except AttributeError:
            pass


def _score_sync_one(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
    ask: int = 0,
) -> tuple[Scorer, Score]:
    __tracebackhide__ = True
    t0 = time.perf_counter()
    inst, inputs, key = _prepare(scorer, fields, kwargs, ctx, ask)
    hit = _lookup(inst, inputs, key, ctx, t0)
    if hit is not None:
        return inst, hit
    return inst, _finish(inst, inputs, _compute(inst, inputs, ctx), key, ctx, t0)


def _compute(inst: Scorer, inputs: dict[str, Any], ctx: ScoringContext) -> Score:
    """``inst.compute``, with a usage collector for the judge calls unless it makes none."""
    __tracebackhide__ = True
    if inst.is_self_contained():
        try:
            return inst.compute(inputs, ctx)
        except ScorerInputError as exc:
            raise _located(exc) from None
    collector = UsageCollector()
    token = current_usage.set(collector)
    try:
        return inst.compute(inputs, ctx)
    except ScorerInputError as exc:
        raise _located(exc) from None
    except Exception as exc:
        _attach_usage(exc, collector)
        raise
    finally:
        current_usage.reset(token)


def _attach_usage(exc: BaseException, collector: UsageCollector) -> None:
    """A failed scoring's judge calls were paid: the error carries them to its record."""
    if collector.total.calls:
        try:
            exc.llm_eval_usage = collector.total  # type: ignore[attr-defined]
        except AttributeError:
            pass


async def _score_async(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
) -> tuple[Scorer, Score]:
    """The async :func:`_score_sync`: the asks (judges, samples, orders) run concurrently."""
    if not _ASKED.intersection(kwargs):
        return await _score_async_one(scorer, fields, kwargs, ctx)
    panel = _panel(scorer, kwargs)
    if panel is not None:
        t0 = time.perf_counter()
        rest = {k: v for k, v in kwargs.items() if k not in PANEL_KEYWORDS}
        done = await asyncio.gather(
            *(
                _score_async(scorer, fields, {**rest, **judge.call_options()}, ctx)
                for judge in panel.judges
            ),
            return_exceptions=True,
        )
        for d in done:
            if isinstance(d, BaseException) and not member_error(d):
                _paid_before(d, [a[1] for a in done if not isinstance(a, BaseException)])
                raise d
        answers = [d if isinstance(d, BaseException) else d[1] for d in done]
        return _panel_result(scorer, fields, rest, panel, answers, t0)
    swap = _swapping(scorer, kwargs)
    plan = _sampling(scorer, kwargs, ctx)
    options = _without_sampling(kwargs)
    t0 = time.perf_counter()

    async def once(fields: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[Scorer, Score]:
        if plan is None:
            return await _score_async_one(scorer, fields, options, ctx)
        asks = _all_answered(
            await asyncio.gather(
                *(_score_async_one(scorer, fields, o, ctx, ask) for ask, o in plan.asks(options)),
                return_exceptions=True,
            )
        )
        return asks[0][0], plan.reduce(asks[0][0], [s for _, s in asks], t0)

    if swap is None:
        return await once(fields, options)
    (inst, first), (_, second) = _all_answered(
        await asyncio.gather(
            once(fields, options), once(*swap.exchange(fields, options)), return_exceptions=True
        )
    )
    return inst, swap.combine(inst, first, second, t0)


def _all_answered(
    done: Sequence[tuple[Scorer, Score] | BaseException],
) -> list[tuple[Scorer, Score]]:
    """The answers of asks run together, or the first one's error carrying what the others
    paid (see :func:`_paid_before`)."""
    answered = [d for d in done if not isinstance(d, BaseException)]
    failed = next((d for d in done if isinstance(d, BaseException)), None)
    if failed is not None:
        _paid_before(failed, [s for _, s in answered])
        raise failed
    return answered


async def _score_async_one(
    scorer: str | Scorer | type[Scorer],
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
    ask: int = 0,
) -> tuple[Scorer, Score]:
    t0 = time.perf_counter()
    inst, inputs, key = _prepare(scorer, fields, kwargs, ctx, ask)
    # A judged scoring reads and writes the store on the store thread: the case loop runs many
    # such cases at once, and a store call made on it would stop all of them while it runs.
    off_loop = key is not None and inst.uses_judge
    seen = ctx.inflight_done  # (read before the lookup: see below)
    hit = await _lookup_async(inst, inputs, key, ctx, t0, off_loop)
    if hit is not None:
        return inst, hit
    leader: concurrent.futures.Future[None] | None = None
    finished = seen
    if key is not None and inst.uses_judge and ctx.result_cache() is not None:
        # One judged scoring per cache key in flight (see ScoringContext.inflight): the others
        # wait for it, then read what it stored (a failure stores nothing: the next one tries).
        while True:
            with ctx.inflight_lock:
                waiting = ctx.inflight.get(key)
                if waiting is None:
                    leader = ctx.inflight[key] = concurrent.futures.Future()
                    finished = ctx.inflight_done
                    break
            await asyncio.wait([asyncio.wrap_future(waiting)])
            seen = ctx.inflight_done
            hit = await _lookup_async(inst, inputs, key, ctx, t0, off_loop)
            if hit is not None:
                return inst, hit
    collector = UsageCollector()
    token = current_usage.set(collector)
    try:
        if finished != seen:
            # An identical scoring (on another thread's loop) stored its result and left the
            # table between this one's miss and now: read it rather than pay the judge again.
            hit = await _lookup_async(inst, inputs, key, ctx, t0, off_loop)
            if hit is not None:
                return inst, hit
        if inst.uses_judge:
            # On the background loop, like a sync test's judge calls: one judge client, pool
            # and concurrency limit for the process, however many async cases are in flight.
            result = await _aio.run_on_background(inst.acompute(inputs, ctx))
        else:
            # Other scorers run on the caller's loop: a user's async scorer may use the
            # caller's own async resources.
            result = await inst.acompute(inputs, ctx)
        if off_loop:
            # (stored before this scoring leaves the in-flight table, as on the loop)
            done = ctx.store_call(_finish, inst, inputs, result, key, ctx, t0)
            return inst, await asyncio.wrap_future(done)
        return inst, _finish(inst, inputs, result, key, ctx, t0)
    except Exception as exc:
        _attach_usage(exc, collector)
        raise
    finally:
        current_usage.reset(token)
        if leader is not None:
            with ctx.inflight_lock:
                ctx.inflight.pop(key, None)  # type: ignore[arg-type]
                ctx.inflight_done += 1
            if not leader.done():
                leader.set_result(None)


async def _lookup_async(
    inst: Scorer,
    inputs: Mapping[str, Any],
    key: str | None,
    ctx: ScoringContext,
    t0: float,
    off_loop: bool,
) -> Score | None:
    """:func:`_lookup`, on the store thread when ``off_loop``."""
    if not off_loop:
        return _lookup(inst, inputs, key, ctx, t0)
    return await asyncio.wrap_future(ctx.store_call(_lookup, inst, inputs, key, ctx, t0))


def _short_plan(scorer: str | Scorer | type[Scorer], ctx: ScoringContext) -> _Plan | None:
    """``scorer``'s plan when :func:`score` without options takes its short path with it (no
    cache to consult: the cache is off, or the scorer stores nothing), else None."""
    try:
        plan = _PLANS[scorer]
    except (KeyError, TypeError):  # not planned yet, or an unhashable scorer instance
        plan = _plan(scorer)
    if plan is None or not (plan.unstored or ctx.settings.cache_mode == "off"):
        return None
    return plan


def score(
    scorer: str | Scorer | type[Scorer],
    *,
    output: Any = None,
    expected: Any = None,
    input: Any = None,
    context: Any = None,
    **kwargs: Any,
) -> Score:
    """Score one case, outside or inside pytest, with the run's cache.

    ``scorer`` is a registered name (reference spellings such as ``"JSONDiff"`` work), a
    :class:`Scorer` subclass or an instance. Keyword arguments that the scorer declares as input
    fields are inputs; the others are scorer options. Raises :class:`ScorerInputError` for a bad
    input, :class:`JudgeError` when a judge cannot give a verdict, :class:`CacheMissError` in
    replay mode on a miss.
    """
    __tracebackhide__ = True
    ctx = _context_module._current or get_context()
    if not kwargs:
        # The short path: what _score_sync does with no cache to consult (the cache is off,
        # or the scorer stores nothing), the scorer's resolution and the split of its inputs
        # worked out once (see _Plan). A missing required input takes the general path, which
        # raises the error.
        try:
            plan = _PLANS[scorer]
        except (KeyError, TypeError):  # not planned yet, or an unhashable scorer instance
            plan = _plan(scorer)
        if plan is not None and (plan.unstored or ctx.settings.cache_mode == "off"):
            pair = plan.pair
            if pair is None:
                done = _score_planned(plan, output, expected, input, context, ctx)
                if done is not None:
                    return done
            elif (output is not None or not plan.need_output) and (
                expected is not None or not plan.need_expected
            ):
                # Inline for the cheapest scorers, whose whole computation costs less than
                # a function call more: the value function, the range check, one Score.
                t0 = _perf_counter()
                try:
                    value = pair(output, expected)
                except ScorerInputError as exc:
                    raise _located(exc) from None
                if type(value) is not float:  # cheaper than float() on the usual float
                    value = float(value)
                if not plan.lo <= value <= plan.hi:  # NaN compares false: it fails too
                    raise _out_of_range(plan.inst, value)
                # The fields left out read the dataclass defaults, which are class attributes.
                out: Score = _new_object(Score)
                fields = out.__dict__
                fields["value"] = value
                fields["scorer"] = plan.name
                fields["metadata"] = {}
                fields["duration_s"] = _perf_counter() - t0
                return out
    fields = {"output": output, "expected": expected, "input": input, "context": context}
    return _score_sync(scorer, fields, _protect(kwargs), ctx)[1]


async def score_async(
    scorer: str | Scorer | type[Scorer],
    *,
    output: Any = None,
    expected: Any = None,
    input: Any = None,
    context: Any = None,
    **kwargs: Any,
) -> Score:
    """The async form of :func:`score`: await it in an async test or app. Like :func:`score` it
    returns the :class:`Score` and records nothing (to have a scoring in the run's summary and
    report without asserting on it, call :func:`assert_score_async` with no bounds). Judge
    calls run on the process's judge loop (one client and concurrency limit for all callers),
    so many awaiting cases share the run's ``--llm-eval-concurrency`` and budget; identical
    judged scorings in flight at once pay the judge once (the others read the cache)."""
    __tracebackhide__ = True
    fields = {"output": output, "expected": expected, "input": input, "context": context}
    return (await _score_async(scorer, fields, _protect(kwargs), get_context()))[1]


#: The former name of :func:`score_async` (kept: same function).
ascore = score_async


@final
@dataclass(frozen=True, slots=True)
class Label:
    """A checked label and the score it stands for (see :func:`_checked_label`)."""

    value: bool | float | str | None
    score: float | None


NO_LABEL = Label(None, None)


def _checked_label(
    scorer: str | Scorer | type[Scorer], label: Any, row: int | None = None
) -> Label:
    """A person's verdict on the case (issue 20) as the record keeps it: True or False (pass or
    fail), a score within the scorer's range, or one of a classifier's choices. Anything else
    is a :class:`ScorerInputError` naming the scorer, the case and its ``file:line``, raised
    before the scorer runs (no judge call is paid for a case that cannot be recorded)."""
    __tracebackhide__ = True
    if label is None:
        return NO_LABEL  # (most cases: no label, no new object)
    if isinstance(label, bool):
        return Label(label, None)
    try:
        cls = _scorer_class(scorer)
    except (LLMEvalError, TypeError):
        return NO_LABEL  # the scoring itself raises the unknown-scorer error
    rec = current_recorder.get()
    case = f" (case {rec.case_id!r})" if rec is not None and rec.case_id is not None else ""
    if row is not None:
        case = f" (row {row}{', case ' + repr(rec.case_id) if case and rec else ''})"
    choices = getattr(cls, "choice_scores", None) or {}
    lo, hi = cls.score_range
    kinds = f"True or False, a score in [{lo:g}, {hi:g}]"
    if choices:
        kinds += f", or one of its choices {sorted(choices)!r}"
    if isinstance(label, (int, float)):
        value = float(label)
        if not math.isfinite(value) or not lo <= value <= hi:
            raise _located(
                ScorerInputError(
                    cls.name,
                    "label",
                    f"is {label!r}, outside the scorer's range [{lo:g}, {hi:g}]{case}",
                    hint=f"A label is {kinds}",
                )
            )
        return Label(value, value)
    if isinstance(label, str):
        if label not in choices:
            problem = (
                f"is {label!r}, not one of the scorer's choices {sorted(choices)!r}{case}"
                if choices
                else f"is the text {label!r}, but {cls.name} has no choices to name{case}"
            )
            raise _located(ScorerInputError(cls.name, "label", problem, hint=f"A label is {kinds}"))
        return Label(label, float(choices[label]))
    raise _located(
        ScorerInputError(
            cls.name,
            "label",
            f"is a {type(label).__name__} ({label!r}){case}",
            hint=f"A label is {kinds}",
        )
    )


def _check(inst: Scorer, result: Score, min: float | None, max: float | None) -> Score:
    passed = True
    if min is not None and result.value < min:
        passed = False
    if max is not None and result.value > max:
        passed = False
    return result.replace(min=min, max=max, passed=passed if (min, max) != (None, None) else None)


def _record(
    inst_name: str,
    result: Score | None,
    min: float | None,
    max: float | None,
    error: BaseException | None = None,
    duration_s: float = 0.0,
    gated: bool = False,
    inputs: Mapping[str, Any] | None = None,
    instrument: Instrument | None = None,
    label: Label = NO_LABEL,
) -> None:
    rec = current_recorder.get()
    if rec is None:
        return
    if (
        result is not None
        and error is None
        and not result.metadata
        and (result.cached or result.usage is None)
    ):
        # The usual record (a score that cost no judge call in this run, no metadata), made by
        # position (ROW_FIELDS order, pinned by a test): its usage fields are their defaults.
        rec.add(
            record_of(
                (
                    rec.file,
                    rec.test,
                    rec.case_id,
                    inst_name,
                    rec.next_index(inst_name),
                    result.value,
                    min,
                    max,
                    result.passed,
                    result.cached,
                    result.duration_s,
                    result.rationale,
                    None,  # error
                    rec.where,
                    EMPTY_MAPPING,  # metadata
                    0,  # prompt_tokens
                    0,  # completion_tokens
                    0,  # judge_calls
                    None,  # cost_usd
                    (),  # judge_models
                    rec.sample,
                    gated,
                    inputs or EMPTY_MAPPING,
                    0,  # cached_prompt_tokens
                    instrument.digest if instrument is not None else None,
                    label.value,
                    label.score,
                    None,  # trace
                )
            )
        )
        return
    # A cached result cost nothing in this run: its stored usage is not spent again. A failed
    # scoring's calls were paid all the same.
    usage = result.usage if result is not None and not result.cached else None
    if result is None and error is not None:
        usage = getattr(error, "llm_eval_usage", None)
    rec.add(
        ScoreRecord(
            file=rec.file,
            test=rec.test,
            case_id=rec.case_id,
            scorer=inst_name,
            index=rec.next_index(inst_name),
            score=result.value if result is not None else None,
            min=min,
            max=max,
            passed=result.passed if result is not None else None,
            cached=result.cached if result is not None else False,
            duration_s=result.duration_s if result is not None else duration_s,
            rationale=result.rationale if result is not None else None,
            error=None if error is None else redact_text(f"{type(error).__name__}: {error}"),
            where=rec.where,
            metadata=(_json_safe(dict(result.metadata)) or EMPTY_MAPPING)
            if result is not None and result.metadata
            else EMPTY_MAPPING,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            judge_calls=usage.calls if usage else 0,
            cost_usd=usage.cost_usd if usage else None,
            judge_models=usage.models if usage else (),
            cached_prompt_tokens=usage.cached_prompt_tokens if usage else 0,
            sample=rec.sample,
            gated=gated,
            inputs=inputs or EMPTY_MAPPING,
            instrument=instrument.digest if instrument is not None else None,
            label=label.value,
            label_score=label.score,
        )
    )


def recorded_inputs(
    fields: Mapping[str, Any], extra: Mapping[str, Any], declared: frozenset[str], limit: int
) -> dict[str, Any]:
    """What a record keeps of the scorer's inputs: the standard fields given (not None) and the
    extra keywords the scorer declares as inputs (never its options, so never a key), JSON-safe.

    Each field is cut to ``limit`` characters (``--llm-eval-record-chars``; 0 keeps nothing). A
    cut string becomes ``{"text": <first limit chars>, "truncated": <chars left out>}``; any other
    value that is longer than ``limit`` as JSON becomes ``{"json": <first limit chars of its
    JSON>, "truncated": <chars left out>}``. Only when the recorder is active (inside pytest).
    """
    if limit <= 0 or current_recorder.get() is None:
        return {}
    out: dict[str, Any] = {}
    for source in (fields, extra):
        for key, value in source.items():
            if value is None or isinstance(value, Secret):
                continue
            if source is extra and key not in declared:
                continue
            # (a short string, the usual field, as it is: no call)
            out[key] = value if type(value) is str and len(value) <= limit else _cut(value, limit)
    return out


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return {"text": value[:limit], "truncated": len(value) - limit}
    safe = _json_safe(value)
    if isinstance(safe, (int, float, bool)):
        return safe
    text = safe if isinstance(safe, str) else json.dumps(safe, ensure_ascii=False)
    if len(text) <= limit:
        return safe
    return {"json": text[:limit], "truncated": len(text) - limit}


def _json_safe(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _bounds_text(lo: float | None, hi: float | None) -> str:
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    return " and ".join(parts)


def _format_failure(result: Score, inst: Scorer) -> str:
    bound = []
    if result.min is not None:
        bound.append(f">= {result.min:g}")
    if result.max is not None:
        bound.append(f"<= {result.max:g}")
    direction = "higher is better" if inst.higher_is_better else "lower is better"
    lines = [
        f"{inst.name} score {result.value:.4g} is not {' and '.join(bound)} ({direction})",
    ]
    where = _where()
    if where:
        lines.append(f"case: {where}")
    if result.cached:
        lines.append("(cached result)")
    if result.rationale:
        lines.append("rationale: " + result.rationale.strip())
    return "\n".join(lines)


def _scorer_name(scorer: str | Scorer | type[Scorer]) -> str:
    """The canonical name of ``scorer`` for messages (as given when it is not registered)."""
    if not isinstance(scorer, str):
        return str(getattr(scorer, "name", repr(scorer)))
    try:
        return default_registry.canonical(scorer)
    except LLMEvalError:
        return scorer


def _check_bound_values(name: str, bounds: Mapping[str, Any]) -> None:
    """Each given bound is a finite real number; min <= max. Raises ScorerConfigError."""
    for option, value in bounds.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScorerConfigError(
                name,
                option,
                f"is {describe_value(value)}, not a number",
                hint=f"Give {option}= a number such as 0.5",
            )
        if not math.isfinite(value):
            raise ScorerConfigError(
                name, option, f"is {value!r}", hint=f"Give {option}= a finite number"
            )
    lo, hi = bounds.get("min"), bounds.get("max")
    if lo is not None and hi is not None and lo > hi:
        raise ScorerConfigError(
            name,
            "min",
            f"({lo:g}) is above max ({hi:g}): no score can pass",
            hint="Swap them, or drop one",
        )


def _plain_bounds(lo: Any, hi: Any, threshold: Any) -> bool:
    """Bounds that :func:`_check_bound_values` would accept, told quickly: each None or a
    finite int or float (not a bool), min not above max."""
    for v in (lo, hi, threshold):
        if v is not None and (type(v) not in (float, int) or not math.isfinite(v)):
            return False
    return lo is None or hi is None or lo <= hi


def _resolve_bounds(
    inst: Scorer, min: float | None, max: float | None, threshold: float | None
) -> tuple[float | None, float | None]:
    if threshold is not None:
        if min is not None or max is not None:
            raise ScorerConfigError(inst.name, "threshold", "cannot be combined with min/max")
        lo, hi = (threshold, None) if inst.higher_is_better else (None, threshold)
        check_bound_range(inst, lo, hi, ("threshold", "threshold"))
        return lo, hi
    check_bound_range(inst, min, max)
    return min, max


def assert_score(
    scorer: str | Scorer | type[Scorer],
    *,
    output: Any = None,
    expected: Any = None,
    input: Any = None,
    context: Any = None,
    min: float | None = None,
    max: float | None = None,
    threshold: float | None = None,
    label: Any = None,
    **kwargs: Any,
) -> Score:
    """Score one case and assert it lies within bounds; return the :class:`Score`.

    ``min``/``max`` bound the score; ``threshold`` is a bare bound that follows the scorer's
    direction (a minimum for higher-is-better scorers, a maximum for lower-is-better ones). With
    no bound at all the score is recorded and reported, not asserted. The record of every call
    reaches the run's summary and JSON report. Raises ``AssertionError`` (as
    :class:`LLMEvalAssertionError`) when out of bounds; errors as :func:`score`. In a test with a
    suite gate on this scorer (``@pytest.mark.llm_eval_gate``) a miss is recorded as a gated miss
    and the gate decides, unless ``--llm-eval-strict-cases``.

    ``label`` is a person's verdict on this case: True (pass) or False (fail), a score in the
    scorer's range, or one of a classifier's choices. It is recorded beside the score and
    measures the judge (the run's "judge agreement"); a label of the wrong kind is an error
    raised before the scorer runs.
    """
    __tracebackhide__ = True
    _protect(kwargs)
    fields = {"output": output, "expected": expected, "input": input, "context": context}
    ctx = get_context()
    t0 = time.perf_counter()
    try:
        if not _plain_bounds(min, max, threshold):  # (the scorer's name only for the error)
            _check_bound_values(
                _scorer_name(scorer), {"min": min, "max": max, "threshold": threshold}
            )
    except ScorerConfigError as exc:
        # Bounds that are not numbers stay out of the record (it is JSON).
        _record(_scorer_name(scorer), None, None, None, error=exc)
        raise
    try:
        checked_label = _checked_label(scorer, label)
        plan = None if kwargs else _short_plan(scorer, ctx)
        if plan is None:
            inst, result = _score_sync(scorer, fields, kwargs, ctx)
        else:  # score()'s short path: the same score, without the general path's steps
            inst = plan.inst
            result = score(scorer, output=output, expected=expected, input=input, context=context)
        lo, hi = _resolve_bounds(inst, min, max, threshold)
    except Exception as exc:
        # Record the error (the summary lists it), then let it propagate: the plugin turns
        # LLMEvalErrors other than assertion failures into test ERRORs.
        _record(
            _scorer_name(scorer),
            None,
            min,
            max,
            error=exc,
            duration_s=time.perf_counter() - t0,
            inputs=recorded_inputs(fields, {}, frozenset(), ctx.settings.record_chars),
        )
        raise
    return _check_and_record(inst, result, lo, hi, fields, kwargs, ctx, checked_label)


def _check_and_record(
    inst: Scorer,
    result: Score,
    lo: float | None,
    hi: float | None,
    fields: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    ctx: ScoringContext,
    label: Label = NO_LABEL,
) -> Score:
    """The end of :func:`assert_score` and :func:`assert_score_async`: check the bounds, record,
    raise on a miss (or, under a suite gate, count it as a gated miss)."""
    __tracebackhide__ = True
    checked = _check(inst, result, lo, hi)
    rec = current_recorder.get()
    # Under a suite gate (issue 9) the gate decides: a per-case miss is recorded and counted by
    # the gate, not raised. Errors above are never softened.
    soft = rec is not None and inst.name in rec.soft
    instrument = _instrument_of(inst, ctx, kwargs)
    _record(
        inst.name,
        checked,
        lo,
        hi,
        gated=soft,
        inputs=recorded_inputs(
            fields,
            _without_sampling(kwargs) if kwargs else kwargs,
            inst.input_fields(),
            ctx.settings.record_chars,
        ),
        instrument=instrument,
        label=label,
    )
    if checked.passed is False:
        if soft and rec is not None:
            rec.gated_misses.append(
                f"{inst.name} {checked.value:.4g} (bound {_bounds_text(lo, hi)})"
            )
            return checked
        raise LLMEvalAssertionError(_format_failure(checked, inst))
    return checked


async def assert_score_async(
    scorer: str | Scorer | type[Scorer],
    *,
    output: Any = None,
    expected: Any = None,
    input: Any = None,
    context: Any = None,
    min: float | None = None,
    max: float | None = None,
    threshold: float | None = None,
    label: Any = None,
    **kwargs: Any,
) -> Score:
    """The async form of :func:`assert_score`, for async tests (e.g. dataset cases that run
    concurrently): the same bounds, the same record, the same errors. Judge calls share the
    process's judge client and concurrency limit with every other case in flight."""
    __tracebackhide__ = True
    _protect(kwargs)
    fields = {"output": output, "expected": expected, "input": input, "context": context}
    ctx = get_context()
    t0 = time.perf_counter()
    try:
        if not _plain_bounds(min, max, threshold):  # (the scorer's name only for the error)
            _check_bound_values(
                _scorer_name(scorer), {"min": min, "max": max, "threshold": threshold}
            )
    except ScorerConfigError as exc:
        _record(_scorer_name(scorer), None, None, None, error=exc)
        raise
    try:
        checked_label = _checked_label(scorer, label)
        inst, result = await _score_async(scorer, fields, kwargs, ctx)
        lo, hi = _resolve_bounds(inst, min, max, threshold)
    except Exception as exc:
        _record(
            _scorer_name(scorer),
            None,
            min,
            max,
            error=exc,
            duration_s=time.perf_counter() - t0,
            inputs=recorded_inputs(fields, {}, frozenset(), ctx.settings.record_chars),
        )
        raise
    return _check_and_record(inst, result, lo, hi, fields, kwargs, ctx, checked_label)


@final
@dataclass(frozen=True)
class BatchResult:
    """Scores of many rows: ``scores[i]`` belongs to ``rows[i]``."""

    scorer: str
    scores: tuple[Score, ...]
    #: the instrument behind each score (what the rows' records name)
    instruments: tuple[Instrument, ...] = field(default=(), repr=False, compare=False)

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.scores]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.scores) if self.scores else math.nan

    def pass_rate(self, min: float | None = None, max: float | None = None) -> float:
        if not self.scores:
            return math.nan
        ok = sum(1 for v in self.values if (min is None or v >= min) and (max is None or v <= max))
        return ok / len(self.scores)


def _row_fields(row: Mapping[str, Any] | Any) -> dict[str, Any]:
    if isinstance(row, Mapping):
        return dict(row)
    to_dict = getattr(row, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    raise TypeError(f"rows must be mappings or Cases, not {type(row).__name__}")


async def _score_rows(
    scorer: str | Scorer | type[Scorer],
    rows: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any],
    ctx: ScoringContext,
    max_concurrency: int | None = None,
) -> list[tuple[Scorer, Score]]:
    async def one(i: int, row: Mapping[str, Any]) -> tuple[Scorer, Score]:
        fields = {k: row.get(k) for k in _STANDARD_FIELDS}
        extra = {k: v for k, v in row.items() if k not in _STANDARD_FIELDS and k != "id"}
        try:
            return await _score_async(scorer, fields, {**extra, **options}, ctx)
        except ScorerInputError as exc:
            raise exc.at(f"row {i}") if not exc.where else exc from None

    if max_concurrency is None:
        # The judge slots bound the judge calls in flight; gather keeps row order.
        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(rows))))
    bound = asyncio.Semaphore(max_concurrency)

    async def bounded(i: int, row: Mapping[str, Any]) -> tuple[Scorer, Score]:
        async with bound:
            return await one(i, row)

    return list(await asyncio.gather(*(bounded(i, r) for i, r in enumerate(rows))))


def _want_rows_in_flight(
    scorer: str | Scorer | type[Scorer], max_concurrency: int | None, ctx: ScoringContext, who: str
) -> None:
    """Check ``max_concurrency`` and ask for as many judge slots (a smaller limit the user set
    is kept, with a warning)."""
    if max_concurrency is None:
        return
    if type(max_concurrency) is not int or max_concurrency < 1:
        raise ScorerConfigError(
            _scorer_name(scorer),
            "max_concurrency",
            f"is {max_concurrency!r}, not a whole number >= 1",
            hint="max_concurrency=32 scores up to 32 rows at once; leave it out for no bound "
            "(judge calls still share the process's judge slots)",
        )
    ctx.ledger.slots.want(max_concurrency, who)
    explicit = ctx.settings.judge.concurrency
    if explicit is not None and max_concurrency > explicit:
        import warnings

        from pytest_llmeval.core.slots import JudgeSlotsWarning

        warnings.warn(
            JudgeSlotsWarning(
                f"{who}(max_concurrency={max_concurrency}): judge calls are limited to "
                f"{explicit} in flight per process (JudgeSettings(concurrency={explicit}) / "
                "--llm-eval-concurrency): rows will queue for the judge. Raise the limit to at "
                f"least {max_concurrency}, or leave it unset so that it follows demand."
            ),
            stacklevel=3,
        )


def score_many(
    scorer: str | Scorer | type[Scorer],
    rows: Iterable[Mapping[str, Any] | Any],
    *,
    max_concurrency: int | None = None,
    **options: Any,
) -> BatchResult:
    """Score many rows (mappings with ``output``, ``expected``, ... or Cases) concurrently, judge
    calls running up to the process's judge slots. Results come back in row order.

    ``max_concurrency`` bounds the rows scored at once and asks for as many judge slots (with
    no judge limit set, the slots grow to it; under a smaller limit the user set, a
    :class:`~pytest_llmeval.core.slots.JudgeSlotsWarning`)."""
    ctx = get_context()
    _protect(options)
    _want_rows_in_flight(scorer, max_concurrency, ctx, "score_many")
    materialized = [_row_fields(r) for r in rows]
    if _self_contained(scorer, options):
        # No judge, no embedder: nothing to wait for, so no event loop and no task per row.
        scored = _score_rows_sync(scorer, materialized, options, ctx)
    else:
        scored = ctx.run(_score_rows(scorer, materialized, options, ctx, max_concurrency))
    name = scored[0][1].scorer if scored else str(scorer)
    instruments: dict[int, Instrument] = {}
    for inst, _ in scored:
        if id(inst) not in instruments:
            instruments[id(inst)] = _instrument_of(inst, ctx, options)
    return BatchResult(
        name, tuple(s for _, s in scored), tuple(instruments[id(inst)] for inst, _ in scored)
    )


def _self_contained(scorer: str | Scorer | type[Scorer], options: Mapping[str, Any]) -> bool:
    """Whether ``scorer`` with ``options`` makes no judge or embedder call (the built-in
    deterministic scorers); False when it does not resolve (the general path raises)."""
    try:
        return resolve_scorer(scorer, options).is_self_contained()
    except Exception:
        return False


def _score_rows_sync(
    scorer: str | Scorer | type[Scorer],
    rows: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any],
    ctx: ScoringContext,
) -> list[tuple[Scorer, Score]]:
    """:func:`_score_rows` one row after the other, for self-contained scorers."""
    __tracebackhide__ = True
    out = []
    for i, row in enumerate(rows):
        fields = {k: row.get(k) for k in _STANDARD_FIELDS}
        extra = {k: v for k, v in row.items() if k not in _STANDARD_FIELDS and k != "id"}
        try:
            out.append(_score_sync(scorer, fields, {**extra, **options}, ctx))
        except ScorerInputError as exc:
            raise exc.at(f"row {i}") if not exc.where else exc from None
    return out


def assert_scores(
    scorer: str | Scorer | type[Scorer],
    rows: Iterable[Mapping[str, Any] | Any],
    *,
    min: float | None = None,
    max: float | None = None,
    min_mean: float | None = None,
    max_mean: float | None = None,
    min_pass_rate: float | None = None,
    max_concurrency: int | None = None,
    labels: Sequence[Any] | None = None,
    **options: Any,
) -> BatchResult:
    """Score many rows concurrently and assert on the aggregate.

    ``min``/``max`` are per-row bounds; ``min_mean``/``max_mean`` bound the mean;
    ``min_pass_rate`` (0..1) is the fraction of rows that must be within the per-row bounds
    (without it, every row must be: a per-row bound is never only recorded). Every row is
    recorded. ``max_concurrency`` is :func:`score_many`'s.
    """
    __tracebackhide__ = True
    t0 = time.perf_counter()
    kind = _check_scores_call(scorer, options, min, max, min_mean, max_mean, min_pass_rate)
    materialized = [_row_fields(r) for r in rows]
    try:
        checked = _checked_labels(scorer, labels, len(materialized))
        result = score_many(scorer, materialized, max_concurrency=max_concurrency, **options)
    except BaseException as exc:
        _record(
            str(scorer) if isinstance(scorer, str) else getattr(scorer, "name", "?"),
            None,
            min,
            max,
            error=exc,
            duration_s=time.perf_counter() - t0,
        )
        raise
    return _finish_scores(
        result, materialized, kind, min, max, min_mean, max_mean, min_pass_rate, checked
    )


async def assert_scores_async(
    scorer: str | Scorer | type[Scorer],
    rows: Iterable[Mapping[str, Any] | Any],
    *,
    min: float | None = None,
    max: float | None = None,
    min_mean: float | None = None,
    max_mean: float | None = None,
    min_pass_rate: float | None = None,
    max_concurrency: int | None = None,
    labels: Sequence[Any] | None = None,
    **options: Any,
) -> BatchResult:
    """The async form of :func:`assert_scores`: rows are scored concurrently on the caller's
    loop (judge calls on the process's judge loop), then checked and recorded the same way."""
    __tracebackhide__ = True
    t0 = time.perf_counter()
    kind = _check_scores_call(scorer, options, min, max, min_mean, max_mean, min_pass_rate)
    try:
        ctx = get_context()
        _protect(options)
        _want_rows_in_flight(scorer, max_concurrency, ctx, "assert_scores_async")
        materialized = [_row_fields(r) for r in rows]
        checked = _checked_labels(scorer, labels, len(materialized))
        scored = await _score_rows(scorer, materialized, options, ctx, max_concurrency)
        result = BatchResult(
            scored[0][1].scorer if scored else str(scorer),
            tuple(s for _, s in scored),
            tuple(_instrument_of(inst, ctx, options) for inst, _ in scored),
        )
    except BaseException as exc:
        _record(
            str(scorer) if isinstance(scorer, str) else getattr(scorer, "name", "?"),
            None,
            min,
            max,
            error=exc,
            duration_s=time.perf_counter() - t0,
        )
        raise
    return _finish_scores(
        result, materialized, kind, min, max, min_mean, max_mean, min_pass_rate, checked
    )


def _checked_labels(
    scorer: str | Scorer | type[Scorer], labels: Sequence[Any] | None, rows: int
) -> list[Label]:
    """The ``labels=`` of :func:`assert_scores`, one per row (None: that row is unlabelled),
    each checked as :func:`assert_score`'s ``label``."""
    __tracebackhide__ = True
    if labels is None:
        return []
    if isinstance(labels, (str, bytes, Mapping)) or not isinstance(labels, Sequence):
        raise ScorerConfigError(
            _scorer_name(scorer),
            "labels",
            f"is a {type(labels).__name__}, not a sequence with one label per row",
            hint="e.g. labels=[case.human for case in cases] (None where a row has no label)",
        )
    if len(labels) != rows:
        raise ScorerConfigError(
            _scorer_name(scorer),
            "labels",
            f"has {len(labels)} label(s) for {rows} row(s)",
            hint="give one label per row, None where a row has no label",
        )
    return [_checked_label(scorer, label, row=i) for i, label in enumerate(labels)]


def _check_scores_call(
    scorer: str | Scorer | type[Scorer],
    options: Mapping[str, Any],
    min: float | None,
    max: float | None,
    min_mean: float | None,
    max_mean: float | None,
    min_pass_rate: float | None,
) -> Scorer | type[Scorer] | None:
    """The argument checks of :func:`assert_scores`; the scorer kind when it resolves."""
    __tracebackhide__ = True
    if "threshold" in options:
        raise ScorerConfigError(
            _scorer_name(scorer),
            "threshold",
            "is not taken by assert_scores",
            hint="Give the per-row bound as min= (higher-is-better scorers) or max= "
            "(lower-is-better), plus min_pass_rate= / min_mean= for the aggregate",
        )
    _check_bound_values(
        _scorer_name(scorer),
        {
            "min": min,
            "max": max,
            "min_mean": min_mean,
            "max_mean": max_mean,
            "min_pass_rate": min_pass_rate,
        },
    )
    if min_pass_rate is not None and not 0 <= min_pass_rate <= 1:
        raise ScorerConfigError(
            _scorer_name(scorer),
            "min_pass_rate",
            f"is {min_pass_rate:g}, not a fraction between 0 and 1",
            hint="75% is min_pass_rate=0.75",
        )
    kind: Scorer | type[Scorer] | None = None
    if isinstance(scorer, str):
        try:
            kind = default_registry.get(scorer)
        except LLMEvalError:
            kind = None  # score_many raises the unknown-name error with its suggestions
    elif isinstance(scorer, Scorer) or (isinstance(scorer, type) and issubclass(scorer, Scorer)):
        kind = scorer
    if kind is not None:
        check_bound_range(kind, min, max)
        check_bound_range(kind, min_mean, max_mean, ("min_mean", "max_mean"))
    return kind


def _finish_scores(
    result: BatchResult,
    rows: Sequence[Mapping[str, Any]],
    kind: Scorer | type[Scorer] | None,
    min: float | None,
    max: float | None,
    min_mean: float | None,
    max_mean: float | None,
    min_pass_rate: float | None,
    labels: Sequence[Label] = (),
) -> BatchResult:
    """Record every row of ``result`` and check the aggregate bounds of :func:`assert_scores`."""
    __tracebackhide__ = True
    inst_higher = kind.higher_is_better if kind is not None else True
    limit = get_context().settings.record_chars
    declared = kind.input_fields() if kind is not None else frozenset()
    instruments: Sequence[Instrument | None] = result.instruments or [None] * len(result.scores)
    row_labels: Sequence[Label] = labels or [NO_LABEL] * len(result.scores)
    for s, row, made, label in zip(result.scores, rows, instruments, row_labels, strict=True):
        passed = None
        if min is not None or max is not None:
            passed = (min is None or s.value >= min) and (max is None or s.value <= max)
        row_fields = {k: row.get(k) for k in _STANDARD_FIELDS}
        _record(
            s.scorer,
            s.replace(min=min, max=max, passed=passed),
            min,
            max,
            inputs=recorded_inputs(row_fields, row, declared, limit),
            instrument=made,
            label=label,
        )
    problems = []
    mean = result.mean
    if min_mean is not None and not mean >= min_mean:
        problems.append(f"mean {mean:.4g} < min_mean {min_mean:g}")
    if max_mean is not None and not mean <= max_mean:
        problems.append(f"mean {mean:.4g} > max_mean {max_mean:g}")
    if min_pass_rate is None and (min is not None or max is not None):
        # A per-row bound given without a pass rate to share it out is a bound on every row,
        # as in assert_score: a row that misses it fails the call (never a record alone).
        min_pass_rate = 1.0
    if min_pass_rate is not None:
        lo, hi = min, max
        if lo is None and hi is None:
            raise ScorerConfigError(
                result.scorer,
                "min_pass_rate",
                "needs a per-row bound",
                hint="Pass min= or max= as well",
            )
        rate = result.pass_rate(lo, hi)
        if not rate >= min_pass_rate:
            problems.append(f"pass rate {rate:.3g} < min_pass_rate {min_pass_rate:g}")
    if problems:
        direction = "higher is better" if inst_higher else "lower is better"
        worst = sorted(enumerate(result.scores), key=lambda p: p[1].value, reverse=not inst_higher)[
            :3
        ]
        detail = "\n".join(
            f"  row {i}: {s.value:.4g}" + (f" ({s.rationale.strip()[:200]})" if s.rationale else "")
            for i, s in worst
        )
        raise LLMEvalAssertionError(
            f"{result.scorer} over {len(result.scores)} rows ({direction}): "
            + "; ".join(problems)
            + "\nworst rows:\n"
            + detail
        )
    return result
