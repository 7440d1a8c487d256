"""pytest-llmeval: assert the quality of LLM output in plain pytest.

The public API is exactly what ``__all__`` lists; everything else is private and may change.
Importing this package is cheap: no openai, torch, transformers or scipy until a scorer needs it.
"""

from __future__ import annotations

from pytest_llmeval.assertions import (
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
from pytest_llmeval.context import ScoringContext, configure, get_context
from pytest_llmeval.dataset import Case, load_dataset
from pytest_llmeval.errors import (
    BudgetExceededError,
    CacheMissError,
    DatasetError,
    JudgeError,
    LLMEvalError,
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    UnknownScorerError,
)
from pytest_llmeval.registry import default_registry
from pytest_llmeval.scoring import Score, Scorer, Usage, scorer
from pytest_llmeval.settings import JudgeSettings, Secret, Settings

__version__ = "0.1.0"

__all__ = [
    "BatchResult",
    "BudgetExceededError",
    "CacheMissError",
    "Case",
    "DatasetError",
    "JudgeError",
    "JudgeSettings",
    "LLMEvalAssertionError",
    "LLMEvalError",
    "Score",
    "Scorer",
    "ScorerConfigError",
    "ScorerInputError",
    "ScorerNotAvailableError",
    "ScoringContext",
    "Secret",
    "Settings",
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
    "get_context",
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
