"""Scorers made from plain functions: the ``@scorer`` decorator (registering them by default)
and the :class:`FunctionScorer` class it builds on."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext


class FunctionScorer(Scorer):
    """A scorer made from a plain function by :func:`scorer`."""

    _func: ClassVar[Callable[..., Any]]
    _accepts: ClassVar[frozenset[str]]
    _var_kw: ClassVar[bool]

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        result = self._call(inputs)
        if inspect.isawaitable(result):
            result = ctx.run(_await(result))
        return _coerce(self.name, result)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        result = self._call(inputs)
        if inspect.isawaitable(result):
            result = await result
        return _coerce(self.name, result)

    def _call(self, inputs: Mapping[str, Any]) -> Any:
        kwargs = {k: v for k, v in inputs.items() if self._var_kw or k in self._accepts}
        for key, value in self.options.items():
            if self._var_kw or key in self._accepts:
                kwargs[key] = value
        return type(self)._func(**kwargs)


def _coerce(name: str, result: Any) -> Score:
    rationale: str | None = None
    if isinstance(result, Score):
        return result
    if isinstance(result, tuple) and len(result) == 2:
        result, rationale = result
    if isinstance(result, bool):
        result = float(result)
    if not isinstance(result, (int, float)) or isinstance(result, complex):
        raise TypeError(
            f"scorer {name!r} returned {type(result).__name__}; a scorer function must return a "
            "number, a (number, rationale) tuple, or a pytest_llmeval.Score"
        )
    value = float(result)
    if math.isnan(value):
        raise ValueError(f"scorer {name!r} returned NaN")
    return Score(value=value, scorer=name, rationale=rationale)


def scorer(
    name: str | None = None,
    *,
    required: tuple[str, ...] = ("output",),
    optional: tuple[str, ...] = ("expected", "input", "context"),
    higher_is_better: bool = True,
    score_range: tuple[float, float] = (0.0, 1.0),
    version: str = "1",
    aliases: tuple[str, ...] = (),
    options: Mapping[str, Any] | None = None,
    register: bool = True,
) -> Callable[[Callable[..., Any]], type[Scorer]]:
    """Turn a function into a registered scorer.

    The function receives the inputs it names as keyword arguments (and options) and returns a
    number in ``score_range``, a ``(number, rationale)`` tuple, or a :class:`Score`. It may be
    ``async``. The decorator returns the new :class:`Scorer` subclass, registered under ``name``
    (default: the function's name)::

        @pytest_llmeval.scorer(required=("output",))
        def is_short(output: str, limit: int = 80) -> float:
            return float(len(output) <= limit)

        assert_score("is_short", output=text, min=1)
    """

    def wrap(func: Callable[..., Any]) -> type[Scorer]:
        sig = inspect.signature(func)
        params = sig.parameters
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        accepts = frozenset(params)
        fields = set(required) | set(optional)
        opts = dict(options or {})
        for pname, param in params.items():
            if pname in fields or param.kind in (
                inspect.Parameter.VAR_KEYWORD,
                inspect.Parameter.VAR_POSITIONAL,
            ):
                continue
            if param.default is inspect.Parameter.empty:
                fields.add(pname)
            else:
                opts.setdefault(pname, param.default)
        scorer_name = name or func.__name__
        cls = type(
            f"FunctionScorer_{scorer_name}",
            (FunctionScorer,),
            {
                "name": scorer_name,
                "aliases": tuple(aliases),
                "required_inputs": tuple(required),
                "optional_inputs": tuple(sorted(fields - set(required))),
                "higher_is_better": higher_is_better,
                "score_range": score_range,
                "version": version,
                "default_options": opts,
                "description": (func.__doc__ or "").strip(),
                "_func": staticmethod(func),
                "_accepts": accepts,
                "_var_kw": var_kw,
                "__module__": func.__module__,
            },
        )
        if register:
            from pytest_llmeval.engine.registry import default_registry

            default_registry.register(cls, replace=True)
        return cls

    return wrap


async def _await(aw: Awaitable[Any]) -> Any:
    return await aw
