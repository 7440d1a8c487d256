"""L3Score (SPIQA, arXiv 2407.09413): the judge's probability that a candidate answer matches the
reference answer to a question, read from the log-probabilities of its first token.

One chat call at temperature 0 with ``logprobs=True, top_logprobs=5``. Among the first generated
token's top five alternatives, tokens are matched by ``token.strip().lower()``: the first in
{yes, yeah} gives log P(yes), the first "no" gives log P(no).

- both found: score = P(yes) / (P(yes) + P(no));
- neither found: 0;
- only one found: the missing side's probability is taken as
  ``max(min(exp(lowest top-5 logprob), 1 - sum of the top-5 probabilities), 1e-8)`` (it is at most
  as likely as the least likely listed token, and at most the mass the list leaves over).

The question, the reference and the candidate go into the prompt as delimited data blocks that
they cannot close (:mod:`pytest_llmeval.judge.prompt`), and the prompt says that the blocks are
data, never instructions: a candidate cannot end its block and tell the judge to say Yes.

Check value: Yes at -0.1 and No at -2.5 give 0.91683. An endpoint that returns no logprobs is a
:class:`JudgeError` (the score cannot be computed), never 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import JudgeError, ScorerInputError
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.step import JudgeStep, judge_client, load_prompts, step_identity

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = ["PROMPT_TEMPLATE", "L3Score", "l3score_from_top_logprobs"]

PROMPT_TEMPLATE: str = load_prompts("l3score")["l3score"]["template"]
#: The judge step (no tool: a plain reply whose first token's logprobs are read).
STEP = JudgeStep(PROMPT_TEMPLATE)
PROMPT_SHA256 = STEP.sha256

YES_TOKENS = frozenset({"yes", "yeah"})
NO_TOKENS = frozenset({"no"})
TOP_K = 5
FLOOR = 1e-8


def l3score_from_top_logprobs(top: Sequence[tuple[str, float]]) -> tuple[float, dict[str, Any]]:
    """The L3Score of one first-token top-k list (only the first five entries count), and the
    details: the matched tokens, P(yes), P(no) and which side was estimated."""
    top5 = [(str(tok), float(lp)) for tok, lp in list(top)[:TOP_K]]
    yes_lp: float | None = None
    no_lp: float | None = None
    for tok, lp in top5:
        norm = tok.strip().lower()
        if yes_lp is None and norm in YES_TOKENS:
            yes_lp = lp
        elif no_lp is None and norm in NO_TOKENS:
            no_lp = lp
    details: dict[str, Any] = {"top_logprobs": [[t, lp] for t, lp in top5]}
    if yes_lp is None and no_lp is None:
        details.update(p_yes=None, p_no=None, estimated=None)
        return 0.0, details
    probs = [math.exp(lp) for _, lp in top5]
    missing = max(min(min(probs), 1.0 - sum(probs)), FLOOR)
    p_yes = math.exp(yes_lp) if yes_lp is not None else missing
    p_no = math.exp(no_lp) if no_lp is not None else missing
    estimated = (
        None if yes_lp is not None and no_lp is not None else ("yes" if yes_lp is None else "no")
    )
    details.update(p_yes=p_yes, p_no=p_no, estimated=estimated)
    return p_yes / (p_yes + p_no), details


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class L3Score(Scorer):
    """L3Score: P(yes) that ``output`` answers ``input`` (the question; ``question`` is accepted
    as an alias) the same way as ``expected``, from the judge's first-token logprobs.

    Range 0..1, higher is better. Needs an endpoint that returns chat logprobs; raises
    :class:`JudgeError` otherwise.
    """

    name: ClassVar[str] = "l3score"
    aliases: ClassVar[tuple[str, ...]] = ("L3Score",)
    required_inputs: ClassVar[tuple[str, ...]] = ("input", "expected", "output")
    optional_inputs: ClassVar[tuple[str, ...]] = ("question",)
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    # 2: the fields are delimited against prompt injection (the prompt changed; the math did not).
    # 3: the judge step: the instructions first, the case's blocks last (prompt caching).
    version: ClassVar[str] = "3"
    uses_judge: ClassVar[bool] = True
    description: ClassVar[str] = "P(yes) from the judge's first-token top-5 logprobs (SPIQA)"

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        if inputs.get("input") is None and inputs.get("question") is not None:
            inputs = {**inputs, "input": inputs["question"]}
        if inputs.get("input") is None:
            raise ScorerInputError(
                self.name,
                "input",
                "is required but was not given",
                hint="Pass the question as input=... (or question=...), with expected= and output=",
            )
        super().check_inputs(inputs)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        # temperature: always sent as 0, whatever the run's setting
        return step_identity(self, ctx, STEP, temperature=0.0)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        question = inputs.get("input")
        if question is None:
            question = inputs.get("question")
        messages = STEP.messages(
            {
                "question": _render(question),
                "expected": _render(inputs["expected"]),
                "output": _render(inputs["output"]),
            },
        )
        client = judge_client(self, ctx)
        reply = await client.chat(
            messages,
            scorer=self.name,
            temperature=0.0,
            max_tokens=5,
            logprobs=True,
            top_logprobs=TOP_K,
        )
        if reply.top_logprobs is None:
            raise JudgeError(
                "the endpoint returned no logprobs; l3score needs chat completions with "
                "logprobs=True and top_logprobs=5 (use a judge endpoint/model that supports them)",
                scorer=self.name,
                endpoint=client.endpoint,
                model=client.settings.model,
            )
        value, details = l3score_from_top_logprobs(reply.top_logprobs)
        details["reply"] = reply.content
        verdict = (reply.content or "").strip()
        rationale = f"judge replied {verdict!r}; P(yes) normalised over yes/no = {value:.4f}"
        return Score(value=value, rationale=rationale, metadata=details, usage=reply.usage)
