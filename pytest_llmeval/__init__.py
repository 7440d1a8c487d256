"""pytest-llmeval: assert the quality of LLM output in plain pytest.

The public API is exactly what ``__all__`` lists; everything else is private and may change.
Importing this package is cheap: no openai, torch, transformers or scipy until a scorer needs it.
"""

from __future__ import annotations

import typing as _t

from pytest_llmeval.core.errors import (
    BudgetExceededError,
    CacheMissError,
    DatasetError,
    InvalidCacheEntryError,
    JudgeError,
    JudgeSpecError,
    LLMEvalError,
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    UnknownScorerError,
)
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
from pytest_llmeval.core.trace import (
    AgentStep,
    EmptyTraceError,
    ModelCall,
    Span,
    ToolCall,
    Trace,
    TraceLimits,
)
from pytest_llmeval.core.version import __version__
from pytest_llmeval.engine.assertions import (
    BatchResult,
    LLMEvalAssertionError,
    ascore,
    assert_score,
    assert_score_async,
    assert_scores,
    assert_scores_async,
    score,
    score_async,
    score_many,
)
from pytest_llmeval.engine.context import ScoringContext, configure, get_context
from pytest_llmeval.engine.dataset import Case, load_dataset
from pytest_llmeval.engine.function_scorer import scorer
from pytest_llmeval.engine.panel import Judge
from pytest_llmeval.engine.registry import default_registry
from pytest_llmeval.engine.scoring import Scorer

__all__ = [
    "AgentStep",
    "BatchResult",
    "BudgetExceededError",
    "CacheMissError",
    "Case",
    "DatasetError",
    "EmptyTraceError",
    "InvalidCacheEntryError",
    "Judge",
    "JudgeError",
    "JudgeSettings",
    "JudgeSpecError",
    "LLMEvalAssertionError",
    "LLMEvalError",
    "ModelCall",
    "Score",
    "Scorer",
    "ScorerConfigError",
    "ScorerInputError",
    "ScorerNotAvailableError",
    "ScoringContext",
    "Secret",
    "Settings",
    "Span",
    "ToolCall",
    "Trace",
    "TraceLimits",
    "UnknownScorerError",
    "Usage",
    "__version__",
    "ascore",
    "assert_score",
    "assert_score_async",
    "assert_scores",
    "assert_scores_async",
    "configure",
    "default_registry",
    "g_eval",
    "get_context",
    "llm_classifier",
    "load_classifiers",
    "load_dataset",
    "register",
    "score",
    "score_async",
    "score_many",
    "scorer",
]


def register(cls: type[Scorer], *, replace: bool = False) -> type[Scorer]:
    """Register a :class:`Scorer` subclass in the default registry (usable as a decorator)."""
    return default_registry.register(cls, replace=replace)


# Judges you define (pytest_llmeval/scorers/custom.py), imported on first use.


def llm_classifier(name: str, prompt: str, choice_scores: _t.Any, **kwargs: _t.Any) -> type[Scorer]:
    """Register a classifier judge ``name`` from your ``prompt`` and ``choice_scores`` (see
    :func:`pytest_llmeval.scorers.custom.llm_classifier`)."""
    from pytest_llmeval.scorers.custom import llm_classifier as make

    return make(name, prompt, choice_scores, **kwargs)


def g_eval(name: str, criteria: str, **kwargs: _t.Any) -> type[Scorer]:
    """Register a G-Eval rubric judge ``name`` from ``criteria`` (see
    :func:`pytest_llmeval.scorers.custom.g_eval`)."""
    from pytest_llmeval.scorers.custom import g_eval as make

    return make(name, criteria, **kwargs)


def load_classifiers(*patterns: _t.Any, root: _t.Any = None) -> list[type[Scorer]]:
    """Register the judges of the JSON/YAML spec files matching the glob ``patterns`` (see
    :func:`pytest_llmeval.scorers.custom.load_classifiers`)."""
    from pytest_llmeval.scorers.custom import load_classifiers as load

    return load(*patterns, root=root)
