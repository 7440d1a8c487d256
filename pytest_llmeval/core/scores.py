"""What a scoring produces: a :class:`Score` and the :class:`Usage` of its judge calls, and the
canonical JSON that cache keys are made of. Plain data, known to every layer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

__all__ = ["Score", "Usage", "canonical_json", "make_score", "spent_usage"]


@final
@dataclass(frozen=True)
class Usage:
    """Tokens and cost spent by the judge calls of one scoring."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = None
    #: the models the judge endpoint said answered (its replies' ``model``), sorted
    models: tuple[str, ...] = ()
    #: the part of ``prompt_tokens`` the endpoint served from its prompt cache (priced lower)
    cached_prompt_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            cost,
            self.models
            if not other.models or other.models == self.models
            else tuple(sorted({*self.models, *other.models})),
            self.cached_prompt_tokens + other.cached_prompt_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage | None:
        if not data:
            return None
        return cls(
            int(data.get("prompt_tokens", 0)),
            int(data.get("completion_tokens", 0)),
            int(data.get("calls", 0)),
            None if data.get("cost_usd") is None else float(data["cost_usd"]),
            tuple(str(m) for m in data.get("models") or ()),
            int(data.get("cached_prompt_tokens", 0)),
        )


@final
@dataclass(frozen=True)
class Score:
    """The result of one scoring.

    ``value`` is a float in the scorer's declared range. ``rationale`` is the judge's reasons (or a
    short explanation from a deterministic scorer). ``metadata`` is JSON-safe detail (extracted
    statements, verdicts, pairs...). ``passed`` is ``None`` until bounds are checked.
    """

    value: float
    scorer: str = ""
    rationale: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage | None = None
    cached: bool = False
    duration_s: float = 0.0
    min: float | None = None
    max: float | None = None
    passed: bool | None = None

    def __float__(self) -> float:
        return float(self.value)

    def replace(self, **changes: Any) -> Score:
        """A copy with ``changes`` applied (a cheap stand-in for ``dataclasses.replace``, which
        costs more than a cheap scorer's whole computation)."""
        if not changes.keys() <= _SCORE_FIELDS:
            raise TypeError(f"unknown Score fields: {sorted(changes.keys() - _SCORE_FIELDS)}")
        new: Score = object.__new__(Score)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return new

    @staticmethod
    def make(
        value: float,
        scorer: str = "",
        rationale: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Score:
        """``Score(value=..., scorer=..., rationale=..., metadata=...)``, built cheaply (the
        frozen dataclass constructor sets each field through ``object.__setattr__``). The same
        function as :func:`make_score`."""
        return make_score(value, scorer, rationale, metadata)

    def to_cache(self) -> dict[str, Any]:
        """The JSON-safe part of a score that the cache stores (no bounds, no timing)."""
        return {
            "value": self.value,
            "rationale": self.rationale,
            "metadata": dict(self.metadata),
            "usage": self.usage.to_json() if self.usage else None,
        }

    @classmethod
    def from_cache(cls, data: Mapping[str, Any], scorer: str, duration_s: float = 0.0) -> Score:
        return cls(
            value=float(data["value"]),
            scorer=scorer,
            rationale=data.get("rationale"),
            metadata=data.get("metadata") or {},
            usage=Usage.from_json(data.get("usage")),
            cached=True,
            duration_s=duration_s,
        )


_SCORE_FIELDS = frozenset(f.name for f in dataclasses.fields(Score))


_SCORE_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Score) if f.default is not dataclasses.MISSING
}


_new_object = object.__new__


def make_score(
    value: float,
    scorer: str = "",
    rationale: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Score:
    """``Score(value=..., scorer=..., rationale=..., metadata=...)`` at a third of the cost: a
    plain function (a classmethod call costs a bound-method object) that fills the instance dict
    from the defaults in one C-level update. Cheap scorers build every result with it."""
    new: Score = _new_object(Score)
    fields = new.__dict__
    fields.update(_SCORE_DEFAULTS)
    fields["value"] = value
    fields["scorer"] = scorer
    fields["rationale"] = rationale
    fields["metadata"] = {} if metadata is None else metadata
    return new


def spent_usage(scores: Iterable[Score], also: Iterable[Usage | None] = ()) -> Usage | None:
    """What ``scores`` cost in this run (a cached score cost nothing: its stored usage is not
    spent again), added to the usages in ``also`` (e.g. what failed asks paid); None when
    nothing was spent."""
    total: Usage | None = None
    for u in (*also, *(s.usage for s in scores if not s.cached)):
        if u is not None:
            total = u if total is None else total + u
    return total


def canonical_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces) used for cache keys. A value JSON has no
    form for is its ``repr``, except a :class:`~pytest_llmeval.core.trace.Trace`, whose repr
    names only its tool names and token total: it is its whole content (see
    :func:`_trace_material`), so a scorer that reads a trace as it is never gets a stale hit
    for a trace that changed."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_key_default
    )


def _key_default(value: Any) -> Any:
    from pytest_llmeval.core.trace import Trace

    if isinstance(value, Trace):
        return {"trace": _trace_material(value)}
    return repr(value)


def _trace_material(trace: Any) -> dict[str, Any]:
    """Everything a trace holds but the span and trace ids (random in every run: the tree is
    kept as each span's parent's position) and absolute times (kept relative to the first
    span): kinds, names, conventions, errors, flags, attributes, calls, durations, and the
    counts of spans dropped and unfinished. The built-in scorers key a trace by the narrower
    trajectory they read (``Scorer.key_inputs``); this is the fallback for any other scorer."""
    spans = trace.spans
    index = {s.span_id: i for i, s in enumerate(spans)}
    t0 = spans[0].start_ns if spans else 0
    out = []
    for s in spans:
        detail = None
        if s.detail is not None:
            detail = {
                "type": type(s.detail).__name__,
                **{
                    f.name: getattr(s.detail, f.name)
                    for f in dataclasses.fields(s.detail)
                    if f.name != "span_id"
                },
            }
        out.append(
            {
                "parent": index.get(s.parent_id) if s.parent_id is not None else None,
                "kind": s.kind,
                "name": s.name,
                "source": s.source,
                "start_ns": s.start_ns - t0,
                "end_ns": s.end_ns - t0,
                "error": s.error,
                "flags": list(s.flags),
                "attributes": dict(s.attributes),
                "detail": detail,
            }
        )
    return {"spans": out, "dropped": trace.dropped, "unfinished": trace.unfinished}
