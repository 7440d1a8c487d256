"""RAG scorers (Autoevals' RAGAS module): retrieval quality and answer quality, each decomposed
into several judge calls.

Every judge call is a forced tool call whose arguments are a JSON object validated against the
tool's schema by :class:`~pytest_llmeval.judge.client.JudgeClient` (one re-ask, then
:class:`~pytest_llmeval.core.errors.JudgeError`). The calls of one case that do not depend on each
other run concurrently (``asyncio.gather``); the usage of every call (and of embedding scorings) is
summed into ``Score.usage``; ``Score.metadata`` keeps what the judge extracted and its verdicts.

``context`` is a string or a list of strings (joined with ``"\\n"``, as Autoevals does).

========================= ========================= ===============================================
scorer                    inputs                    score (0..1, higher is better)
========================= ========================= ===============================================
context_entity_recall     expected, context         list_contains(context entities, expected
                                                    entities, pairwise = embedding_similarity,
                                                    allow_extra_entities=True)
context_relevancy         input, context            len(joined relevant sentences) / len(context),
                                                    clamped to [0, 1]
context_recall            input, expected, context  mean "attributable to the context" verdict over
                                                    the statements of ``expected``
context_precision         input, expected, context  one 0/1 verdict: was the context useful for
                                                    reaching ``expected``?
faithfulness              input, output, context    mean "supported by the context" verdict over
                                                    the statements of ``output``
answer_relevancy          input, output, context    0 if any of ``strictness`` generated questions
                                                    is flagged noncommittal, else mean
                                                    embedding_similarity(question, input)
answer_correctness        input, expected, output   weighted mean of statement F1 (TP / (TP + 0.5
                                                    (FP + FN))) and answer_similarity
========================= ========================= ===============================================

Edge cases (defined results, never a division by zero; each is flagged in ``metadata``):

- **Empty context** (``""``, ``[]``, or only whitespace): context_relevancy, context_recall,
  context_precision and faithfulness score 0 without calling the judge (an empty retrieval holds
  nothing relevant, attributable, useful or supporting); context_entity_recall extracts no context
  entities (0 unless ``expected`` has no entities either, see below); answer_relevancy is unaffected
  (the context is only background for question generation).
- **No statements**: context_recall and faithfulness score 0 (as Autoevals' context_recall does);
  faithfulness then makes no verdict call. A blank ``expected`` (context_recall) or ``output``
  (faithfulness, answer_relevancy) scores 0 without any call.
- **No entities**: context_entity_recall follows list_contains: both lists empty = 1, one empty = 0.
  A blank text is not sent to the judge (it has no entities).
- **answer_correctness with no statements at all** (TP = FP = FN = 0): F1 is defined as 0 (nothing
  correct was stated; Autoevals divides by zero here).
- Faithfulness asks for exactly one verdict per extracted statement (the judge step checks the
  count, :func:`~pytest_llmeval.judge.step.claims_then_verdicts`: a judge that skips statements
  is re-asked, then is a JudgeError; a verdict other than 0/1 is a JudgeError, never counted);
  Autoevals averages whatever list the judge returns.

Choices beyond Autoevals (the scores are the same):

- answer_relevancy: with a judge seed set (the run's default is 0), generation ``i`` uses seed
  ``seed + i``, so that an endpoint honouring seeds does not return one question three times.
  No embeddings are requested once a question is flagged noncommittal (the score is 0 anyway).
- answer_correctness: a part whose weight is 0 is not computed (no judge or embeddings call).
- Embeddings of one case go out as one batched request (the pairwise scorings then find every
  vector in the embedder's cache); they use the scorer's ``embedding_model`` and the same
  endpoint options (``base_url``, ``api_key``...) as its judge calls.
- Verdicts are constrained to 0/1 by the tool schemas (Autoevals asks for any integer).
- The prompts and schemas are package data (``pytest_llmeval/prompts/rag.yaml``); each judge call
  is a :class:`~pytest_llmeval.judge.step.JudgeStep` (instructions first, the case last).

Inputs that are neither text nor (for ``context``) a list of strings are a
:class:`~pytest_llmeval.core.errors.ScorerInputError`; dicts and lists in text fields are sent as
JSON, numbers as ``str``.

Why this module is long: the RAG scorers share their judge steps, statement extraction and context
handling; each scorer is short, and keeping them together keeps their shared prompts and helpers
private.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge import judge_options_of
from pytest_llmeval.judge.step import (
    JudgeStep,
    claims_then_verdicts,
    judge_client,
    load_prompts,
    step_identity,
)

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.judge.client import JudgeClient
    from pytest_llmeval.scorers.embedding import EmbeddingSimilarity

__all__ = [
    "AnswerCorrectness",
    "AnswerRelevancy",
    "ContextEntityRecall",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevancy",
    "Faithfulness",
]

# ---------------------------------------------------------------------------------------------
# The judge steps: prompts and tool schemas are package data (pytest_llmeval/prompts/rag.yaml),
# rendered by the judge step (pytest_llmeval.judge.step): every case field (and every statement a
# judge extracted from one) is a delimited data block that it cannot close, laid out after the
# fixed instructions.

_PROMPTS = load_prompts("rag")


def _step(key: str) -> JudgeStep:
    spec = _PROMPTS[key]
    return JudgeStep(
        template=spec["template"],
        tool=spec["tool"],
        description=spec["description"],
        schema=spec["schema"],
        constants={"tool_only": _PROMPTS["tool_only"].format(tool=spec["tool"])},
    )


_SUPPORTED = {1: True, 0: False}

ENTITIES = _step("entities")
SENTENCES = _step("sentences")
RECALL = _step("recall")
PRECISION = _step("precision")
STATEMENTS = _step("statements")
#: One verdict per statement: checked by the step (the schema stays the same for every case).
VERDICTS = _step("verdicts")
QUESTION = _step("question")
CORRECTNESS = _step("correctness")


# ---------------------------------------------------------------------------------------------
# Input handling


def _as_text(scorer: str, field: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):  # bool included: str(True) is fine
        return str(value)
    raise ScorerInputError(
        scorer,
        field,
        f"must be text, not {type(value).__name__}",
        hint=f"Pass {field} as a string",
    )


def _as_context(scorer: str, value: Any) -> str:
    """The context as one string: a string as is, a list of strings joined with newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ScorerInputError(
                    scorer,
                    "context",
                    f"item {i} is {type(item).__name__}, not a string",
                    hint="Pass context as a string or a list of strings (retrieved passages)",
                )
        return "\n".join(value)
    raise ScorerInputError(
        scorer,
        "context",
        f"must be a string or a list of strings, not {type(value).__name__}",
        hint="Pass context as a string or a list of strings (retrieved passages)",
    )


def _blank(text: str) -> bool:
    return not text.strip()


def _sum_usage(usages: Sequence[Usage | None]) -> Usage:
    total = Usage()
    for u in usages:
        if u is not None:
            total = total + u
    return total


# ---------------------------------------------------------------------------------------------
# Base class


class _RagScorer(Scorer):
    """Shared machinery: the judge client for the scorer's options, its steps' identity."""

    uses_judge: ClassVar[bool] = True
    # 2: case fields delimited against prompt injection (the prompts changed).
    # 3: the judge step: instructions first, the case's blocks last (prompt caching); one
    #    identity helper; a verdict that is not 0/1 is a judge error.
    version: ClassVar[str] = "3"
    steps: ClassVar[tuple[JudgeStep, ...]] = ()

    def client(self, ctx: ScoringContext) -> JudgeClient:
        return judge_client(self, ctx)

    def sub_scorers(self) -> Mapping[str, Scorer]:
        """Scorers this one delegates to (their identities join the cache key)."""
        return {}

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        ident = step_identity(self, ctx, *self.steps)
        for key, sub in self.sub_scorers().items():
            ident[key] = sub.identity(ctx)
        return ident

    def judge_error(self, message: str) -> JudgeError:
        return JudgeError(message, scorer=self.name)

    def binary(self, value: Any, what: str) -> int:
        """A 0/1 verdict from the judge; anything else is a :class:`JudgeError` (the schemas
        allow only 0 and 1, so this guards an engine that did not check)."""
        if isinstance(value, bool) or value not in (0, 1):
            raise self.judge_error(f"the judge's {what} {value!r} is not 0 or 1")
        return int(value)


#: Judge options that also reach the embeddings endpoint (same endpoint and key as the judge).
_EMBEDDING_ENDPOINT_OPTIONS = ("base_url", "api_key", "timeout", "max_tries")


def _embedding_similarity(owner: _RagScorer, *, answer: bool = False) -> EmbeddingSimilarity:
    """embedding_similarity (or answer_similarity) with the owner's ``embedding_model`` and its
    endpoint options, so that embeddings go where the owner's judge calls go."""
    from pytest_llmeval.scorers.embedding import AnswerSimilarity, EmbeddingSimilarity

    cls = AnswerSimilarity if answer else EmbeddingSimilarity
    endpoint = {
        k: owner.options[k] for k in _EMBEDDING_ENDPOINT_OPTIONS if owner.options.get(k) is not None
    }
    return cls(model=owner.options["embedding_model"], **endpoint)


async def _prewarm(sim: Scorer, texts: Sequence[str], ctx: ScoringContext) -> Usage:
    """Embed ``texts`` in one batched request so that the pairwise scorings that follow find
    every vector in the embedder's cache; returns the usage of that request."""
    from pytest_llmeval.scorers.embedding import EmbeddingSimilarity

    if not isinstance(sim, EmbeddingSimilarity) or not texts:
        return Usage()
    side = sim.left
    distinct = list(dict.fromkeys(sim.text({side: t}, side) for t in texts))
    _, usage = await sim.embedder(ctx).aembed_with_usage(distinct)
    return usage


def _check_embedding_model(scorer: str, value: Any) -> None:
    if value is not None and not (isinstance(value, str) and value):
        raise ScorerConfigError(
            scorer,
            "embedding_model",
            f"must be a model name or path, not {value!r}",
            hint="Leave it unset for the run's default embedding model",
        )


# ---------------------------------------------------------------------------------------------
# Scorers


class ContextEntityRecall(_RagScorer):
    """How many entities of ``expected`` the context contains (0..1, higher is better).

    Two concurrent judge calls extract the entities of ``expected`` and of the context; the score
    is ``list_contains(output=context entities, expected=expected entities,
    allow_extra_entities=True)`` with ``pairwise_scorer`` (default: ``embedding_similarity`` with
    ``embedding_model``). Both lists empty scores 1, one empty 0 (list_contains' rule).
    Metadata: ``expected_entities``, ``context_entities`` and list_contains' own metadata under
    ``list_contains``.

    Options: ``pairwise_scorer`` (a scorer, name or whatever list_contains accepts),
    ``embedding_model``, and the judge options. Raises ScorerInputError for a missing or non-text
    input, JudgeError when the judge fails.
    """

    name = "context_entity_recall"
    aliases = ("ContextEntityRecall",)
    required_inputs = ("expected", "context")
    default_options: ClassVar[Mapping[str, Any]] = {
        "pairwise_scorer": None,
        "embedding_model": None,
    }
    steps = (ENTITIES,)

    def validate_options(self) -> None:
        _check_embedding_model(self.name, self.options["embedding_model"])
        if self.options["pairwise_scorer"] is not None:
            self.pairwise()  # an unknown name or a bad value is an error now

    def pairwise(self) -> Any:
        chosen = self.options["pairwise_scorer"]
        if chosen is None:
            return _embedding_similarity(self)
        # A name or a class becomes an instance here (list_contains would do the same), so that
        # an embedding scorer chosen by name still gets its vectors in one batched request.
        from pytest_llmeval.engine.registry import resolve_scorer

        return resolve_scorer(chosen, owner=self.name, option="pairwise_scorer")

    def contains_scorer(self, pairwise: Any = None) -> Scorer:
        from pytest_llmeval.scorers.structured import ListContains

        chosen = self.pairwise() if pairwise is None else pairwise
        return ListContains(pairwise_scorer=chosen, allow_extra_entities=True)

    def sub_scorers(self) -> Mapping[str, Scorer]:
        return {"list_contains": self.contains_scorer()}

    async def _list_contains(
        self, ctx_entities: list[str], exp_entities: list[str], ctx: ScoringContext
    ) -> Score:
        # ListContains is synchronous and calls its pairwise scorer's sync ``compute``, which for
        # an embedding scorer runs a coroutine on the context's background loop (``ctx.run``).
        # Doing that from this coroutine would block the loop it needs (or be refused when this
        # runs on the background loop itself), so it runs in a worker thread while we await.
        pairwise = self.pairwise()
        scorer = self.contains_scorer(pairwise)
        pair = {"output": ctx_entities, "expected": exp_entities}
        usage = Usage()
        if ctx_entities and exp_entities and isinstance(pairwise, Scorer):
            # One batched embeddings request for every entity instead of one per pair.
            usage = await _prewarm(pairwise, ctx_entities + exp_entities, ctx)
        result = await asyncio.to_thread(scorer.compute, pair, ctx)
        return result.replace(usage=_sum_usage([usage, result.usage]))

    async def _entities(self, client: JudgeClient, text: str) -> tuple[list[str], Usage | None]:
        if _blank(text):
            return [], None
        result = await ENTITIES.ask(client, {"text": text}, scorer=self.name)
        return [str(e) for e in result.arguments["entities"]], result.usage

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        expected = _as_text(self.name, "expected", inputs["expected"])
        context = _as_context(self.name, inputs["context"])
        client = self.client(ctx)
        (exp_entities, u1), (ctx_entities, u2) = await asyncio.gather(
            self._entities(client, expected), self._entities(client, context)
        )
        contains = await self._list_contains(ctx_entities, exp_entities, ctx)
        value = min(max(float(contains.value), 0.0), 1.0)
        found = len(exp_entities)
        return Score(
            value=value,
            scorer=self.name,
            rationale=(
                f"{found} expected entit{'y' if found == 1 else 'ies'}, "
                f"{len(ctx_entities)} in the context; list_contains = {value:.4g}"
            ),
            metadata={
                "expected_entities": exp_entities,
                "context_entities": ctx_entities,
                "list_contains": dict(contains.metadata),
                "empty_context": _blank(context),
            },
            usage=_sum_usage([u1, u2, contains.usage]),
        )


class ContextRelevancy(_RagScorer):
    """How much of the context is needed to answer ``input`` (0..1, higher is better).

    One judge call selects the context sentences required to answer the question; the score is
    ``len("".join(sentences)) / len(context)`` clamped to [0, 1] (the judge may paraphrase into
    longer text). An empty context scores 0 without a call. Metadata: ``relevant_sentences``
    (each with the judge's reason).
    """

    name = "context_relevancy"
    aliases = ("ContextRelevancy",)
    required_inputs = ("input", "context")
    steps = (SENTENCES,)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        context = _as_context(self.name, inputs["context"])
        if _blank(context):
            return _empty_context_score(self.name, {"relevant_sentences": []})
        result = await SENTENCES.ask(
            self.client(ctx), {"question": question, "context": context}, scorer=self.name
        )
        args, usage = result.arguments, result.usage
        sentences = [
            {"sentence": str(s["sentence"]), "reason": str(s["reason"])} for s in args["sentences"]
        ]
        selected = sum(len(s["sentence"]) for s in sentences)
        raw = selected / len(context)
        value = min(max(raw, 0.0), 1.0)
        return Score(
            value=value,
            scorer=self.name,
            rationale=(
                f"{len(sentences)} relevant sentence(s), {selected} of {len(context)} characters "
                "of the context"
            ),
            metadata={
                "relevant_sentences": sentences,
                "relevant_chars": selected,
                "context_chars": len(context),
                "raw_ratio": raw,
            },
            usage=usage,
        )


def _empty_context_score(scorer: str, metadata: Mapping[str, Any]) -> Score:
    return Score(
        value=0.0,
        scorer=scorer,
        rationale="the context is empty: nothing to judge (score 0, no judge call)",
        metadata={**metadata, "empty_context": True},
        usage=Usage(),
    )


class ContextRecall(_RagScorer):
    """How much of ``expected`` the context supports (0..1, higher is better).

    One judge call splits ``expected`` into statements and marks each attributable to the context
    (1) or not (0); the score is the mean, 0 when there are no statements (or ``expected`` is
    blank, or the context is empty: no call then). Metadata: ``statements`` with verdicts.
    """

    name = "context_recall"
    aliases = ("ContextRecall",)
    required_inputs = ("input", "expected", "context")
    steps = (RECALL,)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        expected = _as_text(self.name, "expected", inputs["expected"])
        context = _as_context(self.name, inputs["context"])
        if _blank(context):
            return _empty_context_score(self.name, {"statements": []})
        if _blank(expected):
            return _no_statements_score(self.name, "expected is blank", {"statements": []})
        result = await RECALL.ask(
            self.client(ctx),
            {"question": question, "context": context, "answer": expected},
            scorer=self.name,
        )
        args, usage = result.arguments, result.usage
        statements: list[dict[str, Any]] = [
            {
                "statement": str(s["statement"]),
                "reason": str(s["reason"]),
                "attributed": self.binary(s["attributed"], "verdict"),
            }
            for s in args["statements"]
        ]
        if not statements:
            return _no_statements_score(
                self.name, "the judge found no statements", {"statements": []}, usage
            )
        ones = sum(int(s["attributed"]) for s in statements)
        return Score(
            value=ones / len(statements),
            scorer=self.name,
            rationale=_verdict_rationale(statements, "attributed", "attributable to the context"),
            metadata={"statements": statements},
            usage=usage,
        )


def _no_statements_score(
    scorer: str, why: str, metadata: Mapping[str, Any], usage: Usage | None = None
) -> Score:
    return Score(
        value=0.0,
        scorer=scorer,
        rationale=f"{why}: no statements to check (score 0)",
        metadata={**metadata, "no_statements": True},
        usage=usage if usage is not None else Usage(),
    )


def _verdict_rationale(items: Sequence[Mapping[str, Any]], key: str, what: str) -> str:
    ones = sum(int(i[key]) for i in items)
    text = f"{ones} of {len(items)} statement(s) {what}"
    missing = [str(i["statement"]) for i in items if not i[key]]
    if missing:
        text += "; not: " + "; ".join(missing)
    return text


class ContextPrecision(_RagScorer):
    """Whether the context was useful for arriving at ``expected`` (0 or 1, higher is better).

    One judge call gives a 0/1 verdict with a reason (the rationale). An empty context scores 0
    without a call. Metadata: ``verdict``, ``reason``.
    """

    name = "context_precision"
    aliases = ("ContextPrecision",)
    required_inputs = ("input", "expected", "context")
    steps = (PRECISION,)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        expected = _as_text(self.name, "expected", inputs["expected"])
        context = _as_context(self.name, inputs["context"])
        if _blank(context):
            return _empty_context_score(self.name, {"verdict": 0, "reason": None})
        result = await PRECISION.ask(
            self.client(ctx),
            {"question": question, "context": context, "answer": expected},
            scorer=self.name,
        )
        args, usage = result.arguments, result.usage
        verdict = self.binary(args["verdict"], "verdict")
        reason = str(args["reason"])
        return Score(
            value=float(verdict),
            scorer=self.name,
            rationale=reason,
            metadata={"verdict": verdict, "reason": reason},
            usage=usage,
        )


class Faithfulness(_RagScorer):
    """How much of ``output`` the context supports (0..1, higher is better).

    A first judge call splits ``output`` into statements; a second judges each statement against
    the context (exactly one verdict per statement). The score is the mean verdict; no statements,
    a blank output or an empty context score 0 (no further calls). Metadata: ``statements``,
    ``verdicts``.
    """

    name = "faithfulness"
    aliases = ("Faithfulness",)
    required_inputs = ("input", "output", "context")
    steps = (STATEMENTS, VERDICTS)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        output = _as_text(self.name, "output", inputs["output"])
        context = _as_context(self.name, inputs["context"])
        if _blank(context):
            return _empty_context_score(self.name, {"statements": [], "verdicts": []})
        if _blank(output):
            return _no_statements_score(
                self.name, "output is blank", {"statements": [], "verdicts": []}
            )
        found = await claims_then_verdicts(
            self.client(ctx),
            scorer=self.name,
            extract=STATEMENTS,
            extract_fields={"question": question, "answer": output},
            claims_key="statements",
            verdict=VERDICTS,
            verdict_fields={"context": context},
            claims_field="statements",
            verdict_key="verdict",
            supported=_SUPPORTED,
        )
        statements = found.claims
        if not statements:
            return _no_statements_score(
                self.name,
                "the judge found no statements in the output",
                {"statements": [], "verdicts": []},
                found.usage,
            )
        verdicts: list[dict[str, Any]] = [
            {
                "statement": str(item.get("statement", "")),
                "reason": str(item.get("reason", "")),
                "verdict": int(ok),
            }
            for item, ok in zip(found.items, found.supported, strict=True)
        ]
        ones = sum(int(v["verdict"]) for v in verdicts)
        return Score(
            value=ones / len(verdicts),
            scorer=self.name,
            rationale=_verdict_rationale(verdicts, "verdict", "supported by the context"),
            metadata={"statements": statements, "verdicts": verdicts},
            usage=found.usage,
        )


class AnswerRelevancy(_RagScorer):
    """How well ``output`` answers ``input`` (0..1, higher is better).

    ``strictness`` concurrent judge calls (at ``temperature``, default 0.5; with a seed set, call
    ``i`` uses ``seed + i`` so that the samples can differ) each generate a question that the
    answer responds to and flag the answer noncommittal or not. Any noncommittal flag
    scores 0 (no embeddings then); otherwise the score is the mean embedding_similarity (Autoevals
    rescaling, ``embedding_model``) of each generated question with ``input``. A blank output
    scores 0 without a call. Metadata: ``questions`` (question, noncommittal), ``similarity``.

    Options: ``strictness`` (int >= 1, default 3), ``temperature`` (question generation, default
    0.5), ``embedding_model``, and the judge options.
    """

    name = "answer_relevancy"
    aliases = ("AnswerRelevancy",)
    required_inputs = ("input", "output", "context")
    default_options: ClassVar[Mapping[str, Any]] = {
        "strictness": 3,
        "temperature": 0.5,
        "embedding_model": None,
    }
    steps = (QUESTION,)

    def validate_options(self) -> None:
        strictness = self.options["strictness"]
        if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:
            raise ScorerConfigError(
                self.name,
                "strictness",
                f"must be a whole number >= 1, not {strictness!r}",
                hint="It is how many questions are generated from the answer (default 3)",
            )
        temperature = self.options["temperature"]
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not 0 <= temperature <= 2
        ):
            raise ScorerConfigError(
                self.name,
                "temperature",
                f"must be a number between 0 and 2, not {temperature!r}",
                hint="It is the sampling temperature of question generation (default 0.5)",
            )
        _check_embedding_model(self.name, self.options["embedding_model"])

    def similarity_scorer(self) -> EmbeddingSimilarity:
        return _embedding_similarity(self)

    def sub_scorers(self) -> Mapping[str, Scorer]:
        return {"embedding_similarity": self.similarity_scorer()}

    def generation_clients(self, ctx: ScoringContext) -> list[JudgeClient]:
        """One judge client per generated question. With a seed set (the run's default is 0),
        generation ``i`` uses ``seed + i``: the same seed for every sample would make an endpoint
        that honours seeds return the same question ``strictness`` times."""
        options = judge_options_of(self)
        seed = ctx.judge_settings(options).seed
        count = int(self.options["strictness"])
        if seed is None:
            return [ctx.judge(options)] * count
        return [ctx.judge({**options, "seed": int(seed) + i}) for i in range(count)]

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        output = _as_text(self.name, "output", inputs["output"])
        context = _as_context(self.name, inputs["context"])
        if _blank(output):
            return Score(
                value=0.0,
                scorer=self.name,
                rationale="the output is blank: it answers nothing (score 0, no judge call)",
                metadata={"questions": [], "similarity": [], "blank_output": True},
                usage=Usage(),
            )
        temperature = self.options["temperature"]
        generated = await asyncio.gather(
            *(
                QUESTION.ask(
                    client_i,
                    {"answer": output, "context": context},
                    scorer=self.name,
                    temperature=None if temperature is None else float(temperature),
                )
                for client_i in self.generation_clients(ctx)
            )
        )
        questions = [
            {
                "question": str(one.arguments["question"]),
                "noncommittal": self.binary(one.arguments["noncommittal"], "noncommittal flag"),
            }
            for one in generated
        ]
        usages: list[Usage | None] = [one.usage for one in generated]
        base_meta: dict[str, Any] = {"questions": questions, "temperature": temperature}
        if not questions:  # cannot happen with strictness >= 1; kept as a guard
            raise self.judge_error("generated no questions")
        if any(q["noncommittal"] for q in questions):
            return Score(
                value=0.0,
                scorer=self.name,
                rationale="the judge found the answer noncommittal",
                metadata={**base_meta, "similarity": [], "noncommittal": True},
                usage=_sum_usage(usages),
            )
        sim = self.similarity_scorer()
        texts = [str(q["question"]) for q in questions] + [question]
        usages.append(await _prewarm(sim, texts, ctx))
        sims = await asyncio.gather(
            *(sim.acompute({"output": q["question"], "expected": question}, ctx) for q in questions)
        )
        values = [float(s.value) for s in sims]
        cosines = [s.metadata.get("cosine") for s in sims]
        usages.extend(s.usage for s in sims)
        value = min(max(math.fsum(values) / len(values), 0.0), 1.0)
        return Score(
            value=value,
            scorer=self.name,
            rationale=(
                f"mean similarity of {len(values)} generated question(s) to the input: {value:.4g}"
            ),
            metadata={
                **base_meta,
                "similarity": values,
                "cosine": cosines,
                "noncommittal": False,
            },
            usage=_sum_usage(usages),
        )


class AnswerCorrectness(_RagScorer):
    """How correct ``output`` is against ``expected`` (0..1, higher is better).

    One judge call classifies statements into TP / FP / FN, concurrently with answer_similarity
    (embedding_similarity of output vs expected with ``embedding_model``, or the
    ``answer_similarity`` scorer given). A part whose weight is 0 is not computed (no call).
    ``F1 = TP / (TP + 0.5 (FP + FN))`` (0 when there are no statements at all); score =
    ``(fw * F1 + sw * similarity) / (fw + sw)``.
    Metadata: ``factuality`` (the three lists), ``factuality_score``, ``answer_similarity_score``.

    Options: ``factuality_weight`` (0.75), ``answer_similarity_weight`` (0.25), both >= 0 and not
    both 0; ``answer_similarity`` (a scorer instance taking output and expected);
    ``embedding_model``; the judge options.
    """

    name = "answer_correctness"
    aliases = ("AnswerCorrectness",)
    required_inputs = ("input", "expected", "output")
    default_options: ClassVar[Mapping[str, Any]] = {
        "factuality_weight": 0.75,
        "answer_similarity_weight": 0.25,
        "answer_similarity": None,
        "embedding_model": None,
    }
    steps = (CORRECTNESS,)

    def validate_options(self) -> None:
        for key in ("factuality_weight", "answer_similarity_weight"):
            w = self.options[key]
            if (
                isinstance(w, bool)
                or not isinstance(w, (int, float))
                or not math.isfinite(w)
                or w < 0
            ):
                raise ScorerConfigError(
                    self.name,
                    key,
                    f"must be a finite number >= 0, not {w!r}",
                    hint="Defaults: factuality_weight=0.75, answer_similarity_weight=0.25",
                )
        if self.options["factuality_weight"] == 0 and self.options["answer_similarity_weight"] == 0:
            raise ScorerConfigError(
                self.name,
                "factuality_weight",
                "and answer_similarity_weight are both 0",
                hint="At least one weight must be positive",
            )
        sim = self.options["answer_similarity"]
        if sim is not None and not isinstance(sim, Scorer):
            raise ScorerConfigError(
                self.name,
                "answer_similarity",
                f"must be a scorer instance, not {type(sim).__name__}",
                hint="For example EmbeddingSimilarity(model=...); leave it unset for the default",
            )
        _check_embedding_model(self.name, self.options["embedding_model"])

    def similarity_scorer(self) -> Scorer:
        chosen = self.options["answer_similarity"]
        if isinstance(chosen, Scorer):
            return chosen
        return _embedding_similarity(self, answer=True)

    def sub_scorers(self) -> Mapping[str, Scorer]:
        if self.options["answer_similarity_weight"] == 0:
            return {}
        return {"answer_similarity": self.similarity_scorer()}

    async def _similarity(self, output: str, expected: str, ctx: ScoringContext) -> Score | None:
        if self.options["answer_similarity_weight"] == 0:
            return None
        return await self.similarity_scorer().acompute(
            {"output": output, "expected": expected}, ctx
        )

    async def _factuality(
        self, question: str, output: str, expected: str, ctx: ScoringContext
    ) -> tuple[dict[str, list[str]], Usage] | None:
        if self.options["factuality_weight"] == 0:
            return None
        result = await CORRECTNESS.ask(
            self.client(ctx),
            {"question": question, "answer": output, "ground_truth": expected},
            scorer=self.name,
        )
        args = result.arguments
        return {k: [str(s) for s in args[k]] for k in ("TP", "FP", "FN")}, result.usage

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = _as_text(self.name, "input", inputs["input"])
        expected = _as_text(self.name, "expected", inputs["expected"])
        output = _as_text(self.name, "output", inputs["output"])
        fact, sim = await asyncio.gather(
            self._factuality(question, output, expected, ctx),
            self._similarity(output, expected, ctx),
        )
        fw = float(self.options["factuality_weight"])
        sw = float(self.options["answer_similarity_weight"])
        factuality: dict[str, list[str]] | None = None
        usage: Usage | None = None
        f1 = 0.0
        counts = "factuality not judged (weight 0)"
        if fact is not None:
            factuality, usage = fact
            tp, fp, fn = (len(factuality[k]) for k in ("TP", "FP", "FN"))
            denominator = tp + 0.5 * (fp + fn)
            f1 = tp / denominator if denominator > 0 else 0.0
            counts = f"TP={tp} FP={fp} FN={fn}: F1 {f1:.4g}"
        sim_value = 0.0 if sim is None else float(sim.value)
        value = min(max((fw * f1 + sw * sim_value) / (fw + sw), 0.0), 1.0)
        return Score(
            value=value,
            scorer=self.name,
            rationale=(
                f"{counts}; answer similarity "
                f"{'not computed (weight 0)' if sim is None else f'{sim_value:.4g}'}; "
                f"weighted {fw:g}:{sw:g}"
            ),
            metadata={
                "factuality": factuality,
                "factuality_score": None if fact is None else f1,
                "answer_similarity_score": None if sim is None else sim_value,
                "no_statements": factuality is not None and not any(factuality.values()),
            },
            usage=_sum_usage([usage, None if sim is None else sim.usage]),
        )
