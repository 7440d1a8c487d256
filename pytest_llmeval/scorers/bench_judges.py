"""Arthur Bench's LLM-judge scorers: qa_correctness, summary_quality and hallucination.

Each judge call is a judge step (:mod:`pytest_llmeval.judge.step`); the prompts and schemas are
package data (``pytest_llmeval/prompts/bench.yaml``). Verdicts are categorical and come back
through forced tool calls whose arguments are validated against an enum by the judge engine. A
verdict outside the allowed set (Bench's "invalid") is a :class:`JudgeError` after the engine's
one re-ask, never a score. Every input (and the claims extracted from the output) goes into the
prompts as a delimited data block that it cannot close (:mod:`pytest_llmeval.judge.prompt`).

- ``qa_correctness`` (input, context, output): is the answer correct, on topic and supported by
  the context? An answer that rightly says the context does not contain the answer is correct.
  correct 1, incorrect 0. The judge's "not_applicable" (the question is not about the context)
  is an explicit outcome, not a score: an ERROR by default, or a skip (``not_applicable="skip"``).
- ``summary_quality`` (input = source text, expected = reference summary, output = candidate
  summary): which summary is better? reference 0, candidate 1, tie 0.5. A source too long for the
  judge's context window (option ``context_window``, default 4096 tokens, less 150 tokens kept
  free for the reply, as in Bench) is cut from its end; see :func:`estimate_tokens`.
- ``hallucination`` (output, context): the output is split into claims (one judge call), every
  claim is checked against the context (a second call); score 1 if any claim is unsupported,
  else 0 (lower is better). ``metadata`` lists the claims, each verdict and the unsupported claims.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import (
    JudgeNotApplicableError,
    ScorerConfigError,
    ScorerInputError,
    Skipped,
)
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.prompt import choose_nonce
from pytest_llmeval.judge.step import (
    JudgeStep,
    claims_then_verdicts,
    judge_client,
    load_prompts,
    render_value,
    step_identity,
    steps_sha256,
)
from pytest_llmeval.scorers.llm import ClassifierScorer

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.judge.client import JudgeClient

__all__ = [
    "Hallucination",
    "QACorrectness",
    "SummaryQuality",
    "estimate_tokens",
    "truncate_to_tokens",
]

_PROMPTS = load_prompts("bench")

#: Tokens Bench keeps free for the judge's reply when it fits the source into the window.
REPLY_RESERVE_TOKENS = 150

# ----------------------------------------------------------------------------- token estimates

_PIECE = re.compile(r"\w+|[^\w\s]")


def _piece_tokens(piece: str) -> int:
    """Approximate BPE tokens of one word or punctuation mark.

    ASCII letters and digits: one token per started group of four characters (common English
    words are one token, long or rare ones split into pieces of about four characters). Every
    non-ASCII character counts as one token (CJK and accented text tokenise finely). A
    punctuation mark is one token.
    """
    ascii_len = sum(1 for ch in piece if ord(ch) < 128)
    other = len(piece) - ascii_len
    return math.ceil(ascii_len / 4) + other


class _Tokenizer:
    """Counts tokens and cuts text to a token budget (tiktoken when usable, else the estimate)."""

    def __init__(self) -> None:
        self.name = "approx-4chars-v1"
        self._encoding: Any = None
        try:
            tiktoken = importlib.import_module("tiktoken")
            # Loading an encoding may need a download, impossible offline: any failure means
            # the estimate is used instead.
            self._encoding = tiktoken.get_encoding("cl100k_base")
            self.name = "tiktoken-cl100k_base"
        except Exception:  # tiktoken missing, or its data unavailable offline
            self._encoding = None

    def count(self, text: str) -> int:
        if self._encoding is not None:
            return len(self._encoding.encode(text))
        return sum(_piece_tokens(m.group(0)) for m in _PIECE.finditer(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self._encoding is not None:
            ids = self._encoding.encode(text)
            if len(ids) <= max_tokens:
                return text
            return str(self._encoding.decode(ids[:max_tokens]))
        used = 0
        end = 0
        for m in _PIECE.finditer(text):
            cost = _piece_tokens(m.group(0))
            if used + cost > max_tokens:
                return text[:end]
            used += cost
            end = m.end()
        return text


@functools.lru_cache(maxsize=1)
def _tokenizer() -> _Tokenizer:
    return _Tokenizer()


def tokenizer_name() -> str:
    """Which token counter runs: ``tiktoken-cl100k_base`` or ``approx-4chars-v1``."""
    return _tokenizer().name


def estimate_tokens(text: str) -> int:
    """Token count of ``text``: tiktoken's cl100k_base when it is installed and its data loads,
    else an estimate (words and punctuation marks; ASCII runs count one token per four
    characters, each non-ASCII character one token). The estimate errs on the high side for
    English, so a source cut to fit really fits."""
    return _tokenizer().count(text)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` whose :func:`estimate_tokens` is at most ``max_tokens``
    (cut at a word or punctuation boundary with the estimate)."""
    return _tokenizer().truncate(text, max_tokens)


# ----------------------------------------------------------------------------- qa_correctness


class QACorrectness(ClassifierScorer):
    """Is the answer correct, on topic and supported by the context? correct 1, incorrect 0.

    Inputs: ``input`` (the question), ``context`` (a string or a list of passages) and
    ``output`` (the answer). No reference answer is used. An answer that rightly says the
    context does not contain the answer counts as correct.

    The judge may also answer ``not_applicable``: the question is not about the context at all
    (or is no question), so the answer cannot be graded against it (Bench's "not applicable",
    which it scores -1). That is never a score and never cached: option ``not_applicable``
    ``"error"`` (default) raises :class:`JudgeNotApplicableError` (the test's ERROR, with the
    judge's reasons); ``"skip"`` skips the test with them (raising
    :class:`~pytest_llmeval.core.errors.Skipped`, which the plugin turns into the test's skip).
    """

    name = "qa_correctness"
    aliases = ("QACorrectness",)
    required_inputs = ("input", "context", "output")
    description = "Whether an answer is correct and supported by the given context (LLM judge)."
    default_options: ClassVar[Mapping[str, Any]] = {"use_cot": True, "not_applicable": "error"}
    template = _PROMPTS["qa_correctness"]["template"]
    choice_scores = _PROMPTS["qa_correctness"]["choice_scores"]
    unscored_choices = tuple(_PROMPTS["qa_correctness"]["unscored_choices"])

    def validate_options(self) -> None:
        super().validate_options()
        mode = self.options.get("not_applicable")
        if mode not in ("error", "skip"):
            raise ScorerConfigError(
                self.name,
                "not_applicable",
                f"must be 'error' or 'skip', not {mode!r}",
                hint="what a judge verdict of not_applicable does: the test's ERROR, or a skip",
            )

    def unscored_choice(self, choice: str, rationale: str | None, client: JudgeClient) -> None:
        reasons = rationale or "(the judge gave no reasons)"
        message = f"the judge found the question not applicable to the context: {reasons}"
        if self.options["not_applicable"] == "skip":
            raise Skipped(f"{self.name}: {message}")
        model = client.identity().get("model")
        raise JudgeNotApplicableError(
            message,
            reasons=rationale,
            scorer=self.name,
            model=model if isinstance(model, str) else None,
        )


# ----------------------------------------------------------------------------- summary_quality


class SummaryQuality(ClassifierScorer):
    """Which summary of the source is better? reference 0, candidate 1, tie 0.5.

    Inputs: ``input`` (the source text), ``expected`` (the reference summary), ``output`` (the
    candidate summary). Option ``context_window`` (default 4096): the source is cut from its end
    so that the whole prompt fits in ``context_window - 150`` tokens; ``metadata["truncated"]``
    says whether it was.
    """

    name = "summary_quality"
    aliases = ("SummaryQuality",)
    required_inputs = ("input", "expected", "output")
    description = "Whether a candidate summary is better than a reference summary (LLM judge)."
    default_options: ClassVar[Mapping[str, Any]] = {"use_cot": True, "context_window": 4096}
    swap_fields = ("output", "expected")
    template = _PROMPTS["summary_quality"]["template"]
    choice_scores = _PROMPTS["summary_quality"]["choice_scores"]

    def validate_options(self) -> None:
        super().validate_options()
        window = self.options.get("context_window")
        if (
            isinstance(window, bool)
            or not isinstance(window, int)
            or window <= REPLY_RESERVE_TOKENS
        ):
            raise ScorerConfigError(
                self.name,
                "context_window",
                f"must be an integer above {REPLY_RESERVE_TOKENS}, not {window!r}",
                hint="Give the judge's context window in tokens (Bench uses 4096)",
            )

    def fit_source(self, inputs: Mapping[str, Any], nonce: str) -> tuple[str, bool]:
        """The source text cut to fit the window, and whether it was cut. ``nonce``: the block
        suffix the prompt will be rendered with (the budget counts the tags' tokens)."""
        source = render_value("input", inputs["input"])
        budget = int(self.options["context_window"]) - REPLY_RESERVE_TOKENS
        without_source = self.render({**inputs, "input": ""}, nonce=nonce)
        room = budget - estimate_tokens(without_source)
        if room <= 0:
            raise ScorerInputError(
                self.name,
                "output",
                f"and the reference summary leave no room for the source within {budget} tokens",
                hint="Shorten the summaries or raise the context_window option",
            )
        if estimate_tokens(source) <= room:
            return source, False
        return truncate_to_tokens(source, room), True

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return {**super().extra_identity(ctx), "tokenizer": tokenizer_name()}

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        # One nonce, chosen from the whole source, for the budget and the prompt sent: the
        # tags then cost the same tokens in both, and a cut source (a prefix) cannot hold it.
        nonce = choose_nonce(render_value(k, inputs[k]) for k in ("input", "expected", "output"))
        source, truncated = self.fit_source(inputs, nonce)
        result = await self.ask({**inputs, "input": source}, ctx, nonce=nonce)
        meta = dict(result.metadata)
        meta["truncated"] = truncated
        if truncated:
            meta["source_tokens_kept"] = estimate_tokens(source)
        return result.replace(metadata=meta)


# ----------------------------------------------------------------------------- hallucination


def _step(key: str) -> JudgeStep:
    spec = _PROMPTS[key]
    return JudgeStep(
        template=spec["template"],
        tool=spec["tool"],
        description=spec["description"],
        schema=spec["schema"],
        case_placeholders=tuple(spec.get("case_placeholders", ())),
    )


#: The claims step and the verdicts step (``{{count}}`` verdicts: a per-case paragraph).
CLAIMS_STEP = _step("hallucination_claims")
VERDICTS_STEP = _step("hallucination_verdicts")
_SUPPORTED = {"supported": True, "unsupported": False}


class Hallucination(Scorer):
    """1 if the output makes any claim the context does not support, else 0 (lower is better).

    Inputs: ``output`` and ``context`` (a string or a list of passages). Two judge calls
    (:func:`~pytest_llmeval.judge.step.claims_then_verdicts`): one splits the output into claims,
    one checks every claim against the context. An output with no factual claim scores 0 after
    the first call (a blank output makes no call). A verdict other than supported/unsupported,
    or not one per claim, is a judge error. ``metadata``: ``claims``, ``verdicts`` (one per
    claim: claim, verdict, reasons) and ``unsupported_claims``.
    """

    name = "hallucination"
    aliases = ("Hallucination",)
    required_inputs = ("output", "context")
    higher_is_better = False
    uses_judge = True
    # 2: the output, context and claims delimited against prompt injection.
    # 3: the judge step: instructions first, the case's blocks last (prompt caching); the tool
    #    schema no longer fixes the verdict count (checked by the step instead).
    version = "3"
    description = "Whether the output makes claims its context does not support (LLM judge)."

    def prompt_hash(self) -> str:
        return steps_sha256(CLAIMS_STEP, VERDICTS_STEP)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return step_identity(self, ctx, CLAIMS_STEP, VERDICTS_STEP)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        output = render_value("output", inputs["output"])
        if not output.strip():
            return Score(
                value=0.0,
                scorer=self.name,
                rationale="the output is empty: it makes no claim",
                metadata={"claims": [], "verdicts": [], "unsupported_claims": []},
                usage=Usage(),
            )
        found = await claims_then_verdicts(
            judge_client(self, ctx),
            scorer=self.name,
            extract=CLAIMS_STEP,
            extract_fields={"output": output},
            claims_key="claims",
            verdict=VERDICTS_STEP,
            verdict_fields={"context": render_value("context", inputs["context"])},
            claims_field="claims",
            verdict_key="verdict",
            supported=_SUPPORTED,
        )
        claims = found.claims
        if not claims:
            return Score(
                value=0.0,
                scorer=self.name,
                rationale="the output makes no factual claim",
                metadata={"claims": [], "verdicts": [], "unsupported_claims": []},
                usage=found.usage,
            )
        verdicts: list[dict[str, Any]] = []
        for claim, item in zip(claims, found.items, strict=True):
            reasons = item.get("reasons")
            verdicts.append(
                {
                    "claim": claim,
                    "verdict": item["verdict"],
                    "reasons": reasons if isinstance(reasons, str) else "",
                }
            )
        unsupported = [c for c, ok in zip(claims, found.supported, strict=True) if not ok]
        if unsupported:
            rationale = (
                f"{len(unsupported)} of {len(claims)} claims unsupported by the context: "
                + ("; ".join(unsupported))
            )
        else:
            rationale = f"all {len(claims)} claims are supported by the context"
        return Score(
            value=1.0 if unsupported else 0.0,
            scorer=self.name,
            rationale=rationale,
            metadata={"claims": claims, "verdicts": verdicts, "unsupported_claims": unsupported},
            usage=found.usage,
        )
