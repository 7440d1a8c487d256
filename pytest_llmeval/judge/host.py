"""What the judge needs from the layers above it, as protocols: the scorer a judge call is made
for (its name and options) and the scoring context that hands out judge clients. The engine's
:class:`~pytest_llmeval.engine.scoring.Scorer` and
:class:`~pytest_llmeval.engine.context.ScoringContext` satisfy them; the judge never imports the
engine, so the engine can build on the judge."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from pytest_llmeval.core.settings import JudgeSettings, Settings
    from pytest_llmeval.judge.client import JudgeClient

__all__ = ["EmbeddingHost", "JudgeHost", "JudgedScorer"]

T = TypeVar("T")


class JudgedScorer(Protocol):
    """A scorer that asks the judge: named, with its options (the judge options among them)."""

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> Mapping[str, Any]: ...


class JudgeHost(Protocol):
    """Where judge clients come from: the run's judge settings with a scorer's options applied."""

    def judge(self, options: Mapping[str, Any] | None = None) -> JudgeClient: ...

    def judge_settings(self, options: Mapping[str, Any] | None = None) -> JudgeSettings: ...


class EmbeddingHost(JudgeHost, Protocol):
    """What an embedder needs besides judge clients: the run's settings (its embedding model)
    and an event loop to run its requests on from synchronous code."""

    @property
    def settings(self) -> Settings: ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...
