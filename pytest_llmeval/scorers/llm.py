"""LLM classifier scorers (the Autoevals family): factuality, battle, closed_qa, humor, security,
sql, summary, translation and possible.

Each scorer renders one prompt from its inputs and asks the judge to answer through a forced tool
call ``select_choice`` whose arguments are ``{"reasons": str, "choice": <one of the choices>}``
(``{"choice": ...}`` only when ``use_cot=False``). The score is ``choice_scores[choice]``; the
judge's reasons are kept as the rationale and the choice goes into ``metadata["choice"]``.

The prompt wording is our own; the question each prompt asks and the decision structure (the
choices and what each scores) follow Autoevals 0.4.1, so a suite migrated from it keeps its
verdicts and numbers (benchmarks/bench_agreement.py measures the agreement on a local judge).

Each is one judge step (:mod:`pytest_llmeval.judge.step`); the prompts and choices are package
data (``pytest_llmeval/prompts/autoevals.yaml``). Rendering: every input sits in its own block,
``<tag_NONCE>`` ... ``</tag_NONCE>``, whose suffix no input contains, so an output cannot close
its block and pose as instructions; each prompt says that the blocks are data to evaluate,
never instructions. Placeholders are replaced in one pass (a value containing ``{{x}}`` is never
re-expanded). Strings are inserted as they are; any other value as JSON (``ensure_ascii=False``);
a ``context`` given as a list of strings is joined with blank lines.

Conversations: each of these scorers also takes ``messages`` (OpenAI chat messages, or their JSON
text) and ``turn``; when ``output`` or ``input`` is not given, ``output`` is the turn under test
(the last assistant message, or message ``turn``) and ``input`` the messages before it as a
numbered transcript (see :mod:`pytest_llmeval.scorers.conversation`).

Raises :class:`ScorerInputError` for a missing input, :class:`ScorerConfigError` for a bad option,
:class:`JudgeError` when the judge gives no valid choice (after the engine's one re-ask).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import JudgeError, ScorerConfigError, ScorerInputError
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.prompt import render_prompt
from pytest_llmeval.judge.step import (
    JudgeStep,
    choice_step,
    judge_client,
    load_prompts,
    render_value,
    step_identity,
)

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.judge.client import JudgeClient

__all__ = [
    "Battle",
    "ClassifierScorer",
    "ClosedQA",
    "Factuality",
    "Humor",
    "Possible",
    "Security",
    "Sql",
    "Summary",
    "Translation",
    "render_template",
    "render_value",
]

_PROMPTS = load_prompts("autoevals")


def render_template(template: str, values: Mapping[str, Any], *, nonce: str | None = None) -> str:
    """Render ``template`` with the inputs ``values`` (each through :func:`render_value`) as
    delimited data blocks (see :func:`pytest_llmeval.judge.prompt.render_prompt`), in the
    template's own order (the judge step, :class:`~pytest_llmeval.judge.step.JudgeStep`, lays a
    prompt out with the blocks last).

    A placeholder without a value raises ``KeyError`` (a bug in a scorer's template: inputs are
    checked before rendering); an input outside a block, ``ValueError``.
    """
    return render_prompt(template, {k: render_value(k, v) for k, v in values.items()}, nonce=nonce)


@functools.lru_cache(maxsize=256)
def _choice_step(
    template: str,
    choice_scores: tuple[tuple[str, float], ...],
    use_cot: bool,
    unscored: tuple[str, ...],
) -> JudgeStep:
    return choice_step(template, dict(choice_scores), use_cot=use_cot, unscored=unscored)


class ClassifierScorer(Scorer):
    """A judge scorer that picks one of a fixed set of choices, each worth a fixed score, built on
    one :func:`~pytest_llmeval.judge.step.choice_step`.

    Subclasses set ``template`` (each input as a ``<tag>``/``{{field}}``/``</tag>`` block, and
    ``{{data_notice}}``; see :mod:`pytest_llmeval.judge.prompt`) and ``choice_scores`` (choice ->
    score, in the order shown to the judge); the built-in ones read both from their family's
    prompt file (``pytest_llmeval/prompts/*.yaml``).

    Options: ``use_cot`` (default True: the judge writes its reasons before choosing) and the
    judge options (``model``, ``base_url``, ``temperature``...).
    """

    uses_judge: ClassVar[bool] = True
    # 2: inputs delimited against prompt injection (the prompts changed).
    # 3: the judge step: instructions first, the case's blocks last (prompt caching).
    version: ClassVar[str] = "3"
    default_options: ClassVar[Mapping[str, Any]] = {"use_cot": True}
    template: ClassVar[str] = ""
    choice_scores: ClassVar[Mapping[str, float]] = {}
    #: choices the judge may make that are an outcome but not a score (offered after the scored
    #: ones); :meth:`unscored_choice` decides what each means and must raise
    unscored_choices: ClassVar[tuple[str, ...]] = ()
    #: True: the scorer also takes ``messages`` (and ``turn``), a conversation whose turn under
    #: test becomes ``output`` and whose earlier messages become ``input`` when those are not
    #: given (see :meth:`derived_inputs`). The subclass lists both in ``optional_inputs``.
    from_conversation: ClassVar[bool] = False

    # -- options ----------------------------------------------------------------------------

    def validate_options(self) -> None:
        if not isinstance(self.options.get("use_cot"), bool):
            raise ScorerConfigError(
                self.name,
                "use_cot",
                f"must be True or False, not {self.options.get('use_cot')!r}",
                hint="use_cot=True asks the judge for its reasons before the choice",
            )

    @property
    def use_cot(self) -> bool:
        return bool(self.options["use_cot"])

    # -- the request --------------------------------------------------------------------------

    @property
    def choices(self) -> tuple[str, ...]:
        return (*self.choice_scores, *self.unscored_choices)

    @property
    def step(self) -> JudgeStep:
        """The judge step this scorer asks (one per template, choices and ``use_cot``)."""
        return _choice_step(
            self.template,
            tuple(self.choice_scores.items()),
            self.use_cot,
            tuple(self.unscored_choices),
        )

    @property
    def tool_name(self) -> str:
        return str(self.step.tool)

    def unscored_choice(self, choice: str, rationale: str | None, client: JudgeClient) -> None:
        """Called for a choice in :attr:`unscored_choices`: raise what it means (never return)."""
        raise _judge_error(client, self.name, f"the judge chose {choice!r}, which has no score")

    def tool_schema(self) -> dict[str, Any]:
        """The JSON schema of the ``select_choice`` tool's arguments."""
        return dict(self.step.schema or {})

    def prompt_values(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The values the template's placeholders take (subclasses may adapt inputs here)."""
        return dict(inputs)

    def case_fields(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the template's fields (others are dropped)."""
        return {f: values[f] for f in self.step.fields}

    def render(self, inputs: Mapping[str, Any], *, nonce: str | None = None) -> str:
        """The user message for these inputs (``nonce``: see :func:`render_template`)."""
        return self.step.render(self.case_fields(self.prompt_values(inputs)), nonce=nonce)

    def prompt_hash(self) -> str:
        """The judge step's identity (template, answer instruction, tool schema, choices)."""
        return self.step.sha256

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return step_identity(self, ctx, self.step)

    # -- scoring ------------------------------------------------------------------------------

    def derived_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """``inputs`` with ``output`` and ``input`` taken from ``messages`` when the scorer is
        :attr:`from_conversation`, ``messages`` is given and they are not: ``output`` is the
        content of the turn under test (the last assistant message, or message ``turn``),
        ``input`` the messages before it as a numbered transcript. A given ``output`` or
        ``input`` wins. Malformed messages raise :class:`ScorerInputError` (see
        :func:`pytest_llmeval.scorers.conversation.read_conversation`)."""
        if not self.from_conversation or inputs.get("messages") is None:
            return inputs
        if inputs.get("output") is not None and inputs.get("input") is not None:
            return inputs
        from pytest_llmeval.scorers.messages import read_conversation

        conv = read_conversation(self.name, inputs["messages"], inputs.get("turn"))
        derived = dict(inputs)
        if derived.get("output") is None:
            derived["output"] = conv.content(conv.turn)
        if derived.get("input") is None:
            derived["input"] = conv.transcript(0, conv.turn)
        return derived

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(self.derived_inputs(inputs))

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        return await self.ask(self.prompt_values(self.derived_inputs(inputs)), ctx)

    async def ask(
        self, values: Mapping[str, Any], ctx: ScoringContext, *, nonce: str | None = None
    ) -> Score:
        """Ask the judge step with these template values (see :meth:`prompt_values`) and score
        the judge's choice."""
        verdict = await self.step.classify(self, ctx, self.case_fields(values), nonce=nonce)
        if verdict.value is None:
            client = judge_client(self, ctx)
            self.unscored_choice(verdict.choice, verdict.rationale, client)
            message = f"the judge chose {verdict.choice!r}, not a score"
            raise _judge_error(client, self.name, message)
        return verdict.score(self.name)


def _judge_error(client: JudgeClient, scorer: str, message: str) -> JudgeError:
    ident = client.identity()
    model = ident.get("model")
    return JudgeError(message, scorer=scorer, model=model if isinstance(model, str) else None)


# ----------------------------------------------------------------------------- the scorers


class Factuality(ClassifierScorer):
    """Is the output factually consistent with the expert answer? (input, expected, output)

    Choices: A (subset, consistent) 0.4, B (superset, consistent) 0.6, C (same details) 1,
    D (disagreement) 0, E (differences that don't matter) 1.
    """

    name = "factuality"
    aliases = ("Factuality",)
    required_inputs = ("input", "expected", "output")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Factual consistency of the output with an expert answer (LLM judge)."
    template = _PROMPTS["factuality"]["template"]
    choice_scores = _PROMPTS["factuality"]["choice_scores"]


class Battle(ClassifierScorer):
    """Is response 1 (output) better than response 2 (expected) for the instructions?

    The instructions are the input field ``instructions``; ``input`` is accepted in its place.
    Choices: Yes 1, No 0.
    """

    name = "battle"
    aliases = ("Battle",)
    required_inputs = ("output", "expected")
    from_conversation = True
    optional_inputs = ("instructions", "input", "messages", "turn")
    description = "Whether the output beats a reference response to the same instructions."
    swap_fields = ("output", "expected")
    template = _PROMPTS["battle"]["template"]
    choice_scores = _PROMPTS["battle"]["choice_scores"]

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        super().check_inputs(inputs)
        inputs = self.derived_inputs(inputs)
        if inputs.get("instructions") is None and inputs.get("input") is None:
            raise ScorerInputError(
                self.name,
                "instructions",
                "is required but was not given",
                hint="Pass instructions=... (or input=...) with the task both responses answered",
            )

    def prompt_values(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        values = dict(inputs)
        if values.get("instructions") is None:
            values["instructions"] = values["input"]
        return values


class ClosedQA(ClassifierScorer):
    """Does the output, given for the task (input), meet the criterion (criteria)? Y 1, N 0.

    Only the criterion is judged (as Autoevals' ClosedQA does): an output that meets it scores 1
    even when it does not answer the task in full, unless the criterion asks for that.
    """

    name = "closed_qa"
    aliases = ("ClosedQA",)
    # 4: asks only whether the criterion is met (up to 3 it also required the task answered).
    version = "4"
    required_inputs = ("input", "output", "criteria")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether an output given for a task meets a stated criterion."
    template = _PROMPTS["closed_qa"]["template"]
    choice_scores = _PROMPTS["closed_qa"]["choice_scores"]


class Humor(ClassifierScorer):
    """Is the output funny? Yes 1, No 0, Unsure 0.5."""

    name = "humor"
    aliases = ("Humor",)
    required_inputs = ("output",)
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether the output is funny."
    template = _PROMPTS["humor"]["template"]
    choice_scores = _PROMPTS["humor"]["choice_scores"]


class Security(ClassifierScorer):
    """Is the output malicious? Yes 0, No 1, Unsure 0.5 (higher is safer)."""

    name = "security"
    aliases = ("Security",)
    required_inputs = ("output",)
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether the output looks malicious (1 = not malicious)."
    template = _PROMPTS["security"]["template"]
    choice_scores = _PROMPTS["security"]["choice_scores"]


class Sql(ClassifierScorer):
    """Does the output SQL give the same result as the expert SQL? Correct 1, Incorrect 0.

    As in Autoevals' Sql: the names and the order of the output columns do not matter, and a
    query that would fail with an error is Incorrect.
    """

    name = "sql"
    aliases = ("Sql", "SQL")
    # 4: output column names and order ignored, an erroring query Incorrect (the question of
    # Autoevals; up to 3 it asked for equivalence on any database).
    version = "4"
    required_inputs = ("input", "expected", "output")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Semantic equivalence of a SQL query with an expert query."
    template = _PROMPTS["sql"]["template"]
    choice_scores = _PROMPTS["sql"]["choice_scores"]


class Summary(ClassifierScorer):
    """Which summary describes the text better: A (expected) 0, B (output) 1?"""

    name = "summary"
    aliases = ("Summary",)
    required_inputs = ("input", "expected", "output")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether the output summarises the text better than a reference summary."
    swap_fields = ("output", "expected")
    template = _PROMPTS["summary"]["template"]
    choice_scores = _PROMPTS["summary"]["choice_scores"]


class Translation(ClassifierScorer):
    """Does the output translation (into English) mean the same as the expert's? Y 1, N 0.

    Inputs: ``language`` (the source language), ``input`` (the source sentence), ``expected``
    (the expert translation) and ``output``. As in Autoevals' Translation, the judge checks
    explicitly that the nouns and tenses match and that no verb or adjective changes the meaning.
    """

    name = "translation"
    # 4: the explicit check of nouns, tenses, verbs and adjectives (Autoevals' question).
    version = "4"
    aliases = ("Translation",)
    required_inputs = ("language", "input", "expected", "output")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether a translation into English means the same as an expert translation."
    template = _PROMPTS["translation"]["template"]
    choice_scores = _PROMPTS["translation"]["choice_scores"]


class Possible(ClassifierScorer):
    """Does the output declare the task impossible (A, 0) or offer a solution (B, 1)?

    As in Autoevals' Possible, only a statement that the task cannot be done is A: an answer
    that declines the task without saying it is impossible (a refusal) is B.
    """

    name = "possible"
    aliases = ("Possible",)
    # 4: a refusal is no longer A (impossible); only saying the task cannot be done is.
    version = "4"
    required_inputs = ("input", "output")
    from_conversation = True
    optional_inputs = ("messages", "turn")
    description = "Whether the output offers a solution instead of declaring the task impossible."
    template = _PROMPTS["possible"]["template"]
    choice_scores = _PROMPTS["possible"]["choice_scores"]
