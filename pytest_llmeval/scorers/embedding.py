"""Embedding similarity (Autoevals ``EmbeddingSimilarity``) and answer similarity (Autoevals'
RAGAS ``AnswerSimilarity``).

Both sides are embedded as ``prefix + text`` (a dict or list as ``json.dumps``, anything else as
``str``); the cosine of the two vectors is capped at 1 (0 when either is a zero vector) and
rescaled: ``max((cos - expected_min) / (1 - expected_min), 0)``.

The embedder is an OpenAI-compatible endpoint (through the judge client, so the judge options
``base_url``, ``api_key``, ``timeout`` and ``max_tries`` apply) or a local model; see
:mod:`pytest_llmeval.judge.embeddings`. ``model`` here is always the embedding model, never the
chat judge's. Unlike Autoevals, whose per-class vector cache ignores the prefix, a different prefix
always embeds anew.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError, describe_value
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.embeddings import cosine_similarity, parse_model_spec

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.judge.embeddings import Embedder

__all__ = ["AnswerSimilarity", "EmbeddingSimilarity", "rescale"]

#: Judge options that reach the embeddings endpoint (temperature, seed and mode mean nothing there).
_ENDPOINT_OPTIONS = ("base_url", "api_key", "timeout", "max_tries")


def rescale(cos: float, expected_min: float) -> float:
    """Autoevals' rescaling of a cosine: 0 at or below ``expected_min``, 1 at 1, linear between."""
    return max((cos - expected_min) / (1.0 - expected_min), 0.0)


class EmbeddingSimilarity(Scorer):
    """Cosine similarity of the embeddings of ``output`` and ``expected``, rescaled so that
    ``expected_min`` (default 0.7) and below score 0 and identical vectors score 1. Range 0..1,
    higher is better.

    Options: ``prefix`` (prepended to both texts before embedding), ``model`` (embedding model:
    ``"openai:NAME"``, ``"local:/dir"`` or a hub id; default: the run's ``embedding_model``
    setting, else the judge's embedding model on its endpoint), ``expected_min`` (< 1), and the
    judge options for the endpoint. Metadata: ``cosine``, ``embedder``. Raises ScorerInputError
    for a missing side, ScorerConfigError for bad options, JudgeError when the endpoint fails,
    ScorerNotAvailableError when a local model needs torch/transformers that are missing.
    """

    name: ClassVar[str] = "embedding_similarity"
    aliases: ClassVar[tuple[str, ...]] = ("EmbeddingSimilarity",)
    required_inputs: ClassVar[tuple[str, ...]] = ("output", "expected")
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    version: ClassVar[str] = "1"
    uses_judge: ClassVar[bool] = True
    default_options: ClassVar[Mapping[str, Any]] = {
        "prefix": "",
        "model": None,
        "expected_min": 0.7,
    }
    description: ClassVar[str] = "cosine of embeddings, rescaled from expected_min (0.7) to 1"

    # The two sides compared; AnswerSimilarity keeps the same ones under RAGAS' names.
    left: ClassVar[str] = "output"
    right: ClassVar[str] = "expected"

    def validate_options(self) -> None:
        prefix = self.options["prefix"]
        if not isinstance(prefix, str):
            raise ScorerConfigError(self.name, "prefix", f"must be a string, not {prefix!r}")
        lo = self.options["expected_min"]
        if (
            isinstance(lo, bool)
            or not isinstance(lo, (int, float))
            or not math.isfinite(lo)
            or lo >= 1
        ):
            raise ScorerConfigError(
                self.name,
                "expected_min",
                f"must be a number below 1, not {lo!r}",
                hint="Cosines at or below it score 0; Autoevals' default is 0.7",
            )
        model = self.options["model"]
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ScorerConfigError(
                self.name,
                "model",
                f"must be an embedding model name, a hub id or a directory, not {model!r}",
                hint="e.g. 'openai:text-embedding-3-small' or 'local:/path/to/model'",
            )

    def embedder(self, ctx: ScoringContext) -> Embedder:
        """The embedder these options select (built lazily; never loads a model)."""
        opts = {k: self.options[k] for k in _ENDPOINT_OPTIONS if self.options.get(k) is not None}
        return ctx.embedder(self.options["model"], scorer=self.name, **opts)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return {"embedder": self.embedder(ctx).identity()}

    def identity_without_context(self) -> dict[str, Any]:
        ident = super().identity_without_context()
        model = self.options["model"]
        if isinstance(model, str):
            backend, name = parse_model_spec(model)
            if backend == "local" and os.path.isdir(os.path.expanduser(name)):
                # The embedder's fingerprint (extra identity) names it; an absolute path would
                # make the cache key differ from one machine to the next.
                ident["options"] = {**ident["options"], "model": "local directory"}
        return ident

    def public_options(self) -> dict[str, Any]:
        out = super().public_options()
        # Where the endpoint lives and how patient we are never change a vector.
        for key in ("base_url", "timeout", "max_tries"):
            out.pop(key, None)
        return out

    def text(self, inputs: Mapping[str, Any], field: str) -> str:
        value = inputs[field]
        if isinstance(value, (bytes, bytearray)):
            raise ScorerInputError(
                self.name,
                field,
                f"must be text, not {describe_value(value)}",
                hint="Decode it first",
            )
        body = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        prefix: str = self.options["prefix"]
        return prefix + body

    def from_vectors(
        self, a: Sequence[float], b: Sequence[float], usage: Usage, ctx: ScoringContext
    ) -> Score:
        if len(a) != len(b):
            raise ScorerInputError(
                self.name,
                self.left,
                f"embedded to {len(a)} dimensions but {self.right} to {len(b)}",
                hint="The embedding endpoint returned vectors of different sizes",
            )
        cos = cosine_similarity(a, b)
        value = rescale(cos, float(self.options["expected_min"]))
        return Score(
            value=value,
            scorer=self.name,
            metadata={"cosine": cos, "embedder": self.embedder(ctx).identity()},
            usage=usage if usage.calls else None,
        )

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        texts = [self.text(inputs, self.left), self.text(inputs, self.right)]
        (a, b), usage = self.embedder(ctx).embed_with_usage(texts)
        return self.from_vectors(a, b, usage, ctx)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        texts = [self.text(inputs, self.left), self.text(inputs, self.right)]
        (a, b), usage = await self.embedder(ctx).aembed_with_usage(texts)
        return self.from_vectors(a, b, usage, ctx)

    def score_pairs(
        self, outputs: Sequence[Any], expecteds: Sequence[Any], ctx: ScoringContext
    ) -> list[Score]:
        """Scores of many (output, expected) pairs with one batched embedding call."""
        if len(outputs) != len(expecteds):
            raise ValueError(f"{len(outputs)} outputs for {len(expecteds)} expected values")
        for o, e in zip(outputs, expecteds, strict=True):
            self.check_inputs({self.left: o, self.right: e})
        lefts = [self.text({self.left: o}, self.left) for o in outputs]
        rights = [self.text({self.right: e}, self.right) for e in expecteds]
        vectors, usage = self.embedder(ctx).embed_with_usage(lefts + rights)
        n = len(lefts)
        return [
            self.from_vectors(vectors[i], vectors[n + i], usage if i == 0 else Usage(), ctx)
            for i in range(n)
        ]


class AnswerSimilarity(EmbeddingSimilarity):
    """RAGAS answer similarity: :class:`EmbeddingSimilarity` of ``output`` (the answer) against
    ``expected`` (the reference answer), same options and maths. Range 0..1, higher is better."""

    name: ClassVar[str] = "answer_similarity"
    aliases: ClassVar[tuple[str, ...]] = ("AnswerSimilarity",)
    description: ClassVar[str] = "embedding similarity of the answer (output) to expected"
