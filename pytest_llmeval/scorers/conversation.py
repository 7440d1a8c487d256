"""Conversation scorers (LLM judges): ``conversation_relevancy``, ``knowledge_retention``,
``role_adherence`` and ``conversation_completeness``.

A case holds a conversation in ``messages``: a list of OpenAI chat messages ``{"role":
"system"|"user"|"assistant"|"tool", "content": ...}`` (an assistant message may carry
``tool_calls`` instead of content), or that list as JSON text (a dataset column). The turn under
test is the last assistant message, or the message index ``turn`` (an input: an int, or its
text from a CSV column; negative counts from the end, as in Python); messages after it are
ignored.

Each scorer judges the assistant turns up to the turn under test one by one (one judge call per
turn, concurrently), returns them in ``metadata["turns"]`` (``index`` is the message index,
``ok``, ``choice``, ``reasons``) and names the first failing turn in its rationale. Turns are
shown to the judge as a numbered transcript (``[index] role: text``, tool calls as
``role -> name({...})``, see :func:`pytest_llmeval.scorers.agents.render_trajectory`), inside
the delimited data blocks every judge prompt uses.

Malformed messages are a :class:`ScorerInputError` naming the scorer, the field and the message
index (e.g. ``messages[2]``): a broken conversation is a broken test, never a low score.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import (
    JudgeError,
    ScorerConfigError,
    ScorerInputError,
    describe_value,
)
from pytest_llmeval.core.scores import Score, Usage
from pytest_llmeval.judge.step import (
    JudgeStep,
    judge_client,
    load_prompts,
    step_identity,
    steps_sha256,
)
from pytest_llmeval.scorers.llm import ClassifierScorer
from pytest_llmeval.scorers.messages import (
    Conversation,
    read_conversation,
)

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "Conversation",
    "ConversationCompleteness",
    "ConversationRelevancy",
    "KnowledgeRetention",
    "RoleAdherence",
    "read_conversation",
]


_PROMPTS = load_prompts("conversation")


def _sum_usage(scores: Sequence[Score]) -> Usage | None:
    usage: Usage | None = None
    for one in scores:
        if one.usage is not None:
            usage = one.usage if usage is None else usage + one.usage
    return usage


def _reasons(verdict: Mapping[str, Any]) -> str:
    return str(verdict["reasons"] or "no reasons")


class _TurnJudge(ClassifierScorer):
    """One judge call per judged assistant turn; the score is the fraction of OK turns.

    Subclasses set ``template``, ``choice_scores`` (1.0 = the turn is OK), ``ok_text`` (the
    rationale when every turn is OK) and may override :meth:`judged_turns` and
    :meth:`turn_values`.
    """

    required_inputs = ("messages",)
    optional_inputs: ClassVar[tuple[str, ...]] = ("turn",)
    # 2: the judge step: instructions first, the case's blocks last (prompt caching)
    version = "2"
    ok_text: ClassVar[str] = ""
    fail_text: ClassVar[str] = ""

    def judged_turns(self, conv: Conversation) -> list[int]:
        return conv.assistant_turns()

    def turn_values(
        self, conv: Conversation, index: int, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {"conversation": conv.transcript(0, index), "reply": conv.text(index)}

    def conversation(self, inputs: Mapping[str, Any]) -> Conversation:
        self.check_inputs(inputs)
        return read_conversation(self.name, inputs["messages"], inputs.get("turn"))

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        conv = self.conversation(inputs)
        turns = self.judged_turns(conv)
        values = [self.turn_values(conv, i, inputs) for i in turns]
        scores = await asyncio.gather(*(self.ask(v, ctx) for v in values))
        verdicts = [
            {
                "index": i,
                "ok": one.value == 1.0,
                "choice": one.metadata["choice"],
                "reasons": one.rationale,
            }
            for i, one in zip(turns, scores, strict=True)
        ]
        failed = [v for v in verdicts if not v["ok"]]
        if failed:
            first = failed[0]
            rationale = (
                f"first failing turn: messages[{first['index']}] {self.fail_text} "
                f"({_reasons(first)}); {len(failed)} of {len(verdicts)} assistant turns failed"
            )
        else:
            rationale = f"all {len(verdicts)} assistant turns {self.ok_text}"
        return Score(
            value=math.fsum(one.value for one in scores) / len(scores),
            scorer=self.name,
            rationale=rationale,
            metadata={"turn": conv.turn, "turns": verdicts},
            usage=_sum_usage(scores),
        )


def _turns_after_a_user_message(scorer: str, conv: Conversation) -> list[int]:
    turns = conv.assistant_turns()
    first_user = next((i for i in range(conv.turn + 1) if conv.role(i) == "user"), conv.turn + 1)
    kept = [i for i in turns if i > first_user]
    if not kept:
        raise ScorerInputError(
            scorer,
            "messages",
            f"has no assistant message after a user message up to messages[{conv.turn}]",
            hint="The scorer judges replies to the user; add the user's messages",
        )
    return kept


class ConversationRelevancy(_TurnJudge):
    """Are the assistant's turns relevant to what the user said just before? In [0, 1].

    Score = relevant assistant turns / assistant turns, over the assistant turns (up to the turn
    under test) that follow at least one user message. Each turn is judged against a sliding
    window: the ``window`` messages right before it (option, default 3), system messages
    included. Yes 1, No 0.
    """

    name = "conversation_relevancy"
    aliases = ("ConversationRelevancy", "ConversationRelevancyMetric")
    default_options: ClassVar[Mapping[str, Any]] = {"use_cot": True, "window": 3}
    description = "Whether each assistant turn is relevant to the messages before it (judge)."
    ok_text = "are relevant to the conversation"
    fail_text = "is not relevant"
    template = _PROMPTS["conversation_relevancy"]["template"]
    choice_scores = _PROMPTS["conversation_relevancy"]["choice_scores"]

    def validate_options(self) -> None:
        super().validate_options()
        window = self.options["window"]
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ScorerConfigError(
                self.name,
                "window",
                f"is {window!r}",
                hint="Pass window=<number of messages before each turn to judge it against, >= 1>",
            )

    def judged_turns(self, conv: Conversation) -> list[int]:
        return _turns_after_a_user_message(self.name, conv)

    def turn_values(
        self, conv: Conversation, index: int, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        start = index - int(self.options["window"])
        return {"conversation": conv.transcript(start, index), "reply": conv.text(index)}


class KnowledgeRetention(_TurnJudge):
    """Does the assistant keep what the user told it? In [0, 1].

    Score = assistant turns that neither forget nor contradict a fact the user gave earlier /
    assistant turns after the first user message (up to the turn under test). A turn is judged
    against the whole conversation before it; "forgetting" includes asking again for
    information the user already gave. A turn with nothing to retain passes. No 1, Yes 0 (the
    question is "does it forget or contradict?").
    """

    name = "knowledge_retention"
    aliases = ("KnowledgeRetention", "KnowledgeRetentionMetric")
    description = "Whether assistant turns forget or contradict what the user said (judge)."
    ok_text = "retain what the user said"
    fail_text = "forgets or contradicts what the user said"
    template = _PROMPTS["knowledge_retention"]["template"]
    choice_scores = _PROMPTS["knowledge_retention"]["choice_scores"]

    def judged_turns(self, conv: Conversation) -> list[int]:
        return _turns_after_a_user_message(self.name, conv)


class RoleAdherence(_TurnJudge):
    """Do the assistant's turns stay in their assigned role? In [0, 1].

    The role is the ``role`` input, else the system messages (joined). Score = adhering
    assistant turns / assistant turns (up to the turn under test). Each turn is judged with the
    conversation before it. Yes 1, No 0. No role at all is a :class:`ScorerInputError`.
    """

    name = "role_adherence"
    aliases = ("RoleAdherence", "RoleAdherenceMetric")
    optional_inputs = ("turn", "role")
    description = "Whether assistant turns keep the role of the system message (judge)."
    ok_text = "keep the role"
    fail_text = "breaks the role"
    template = _PROMPTS["role_adherence"]["template"]
    choice_scores = _PROMPTS["role_adherence"]["choice_scores"]

    def _role(self, conv: Conversation, inputs: Mapping[str, Any]) -> str:
        role = inputs.get("role")
        if role is not None:
            if not isinstance(role, str) or not role.strip():
                raise ScorerInputError(
                    self.name,
                    "role",
                    f"is {describe_value(role)}, not a non-empty text",
                    hint="Pass role='You are ...' describing the assistant's role",
                )
            return role
        system = [conv.content(i) for i in range(len(conv.messages)) if conv.role(i) == "system"]
        if not system:
            raise ScorerInputError(
                self.name,
                "role",
                "is required when messages has no system message",
                hint="Pass role='You are ...' or start messages with a system message",
            )
        return "\n".join(system)

    def turn_values(
        self, conv: Conversation, index: int, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {**super().turn_values(conv, index, inputs), "role": self._role(conv, inputs)}

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        # The role is checked before any judge call (turn_values also needs it).
        self._role(self.conversation(inputs), inputs)
        return await super().acompute(inputs, ctx)


_spec = _PROMPTS["conversation_completeness_intentions"]
#: The step that lists the user's intentions.
INTENTIONS = JudgeStep(
    template=_spec["template"],
    tool=_spec["tool"],
    description=_spec["description"],
    schema=_spec["schema"],
)


class ConversationCompleteness(_TurnJudge):
    """Did the assistant meet what the user wanted over the conversation? In [0, 1].

    A first judge call extracts the user's intentions from the user messages up to the turn
    under test (each tied to the user message that states it); then each intention is judged
    against the conversation up to the turn under test (one call each, concurrently): Yes 1,
    No 0. Score = met intentions / intentions extracted. No intention found is a
    :class:`JudgeError` (nothing was judged: never a 1.0). ``metadata["intentions"]`` lists
    each one's user message ``index``, ``intention``, ``ok``, ``choice`` and ``reasons``; the
    rationale names the user turn of the first unmet intention.
    """

    name = "conversation_completeness"
    aliases = ("ConversationCompleteness", "ConversationCompletenessMetric")
    # 2: no intention found is an error, not a 1.0; 3: the judge step (prompt layout)
    version = "3"
    description = "Whether the user's intentions in a conversation were met (judge)."
    template = _PROMPTS["conversation_completeness"]["template"]
    choice_scores = _PROMPTS["conversation_completeness"]["choice_scores"]

    def prompt_hash(self) -> str:
        return steps_sha256(self.step, INTENTIONS)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        return step_identity(self, ctx, self.step, INTENTIONS)

    async def _intentions(
        self, conv: Conversation, ctx: ScoringContext
    ) -> tuple[list[tuple[int, str]], Usage]:
        users = [i for i in range(conv.turn + 1) if conv.role(i) == "user"]
        if not users:
            raise ScorerInputError(
                self.name,
                "messages",
                f"has no user message up to messages[{conv.turn}]",
                hint="The scorer checks the user's intentions; add the user's messages",
            )
        result = await INTENTIONS.ask(
            judge_client(self, ctx),
            {"user_messages": "\n".join(conv.lines[i] for i in users)},
            scorer=self.name,
        )
        found: list[tuple[int, str]] = []
        for item in result.arguments.get("intentions", []):
            index = item.get("message") if isinstance(item, Mapping) else None
            if index not in users or not str(item.get("intention", "")).strip():
                raise JudgeError(
                    f"the judge reported an intention {item!r} that is not tied to a user "
                    f"message (user messages: {', '.join(map(str, users))})",
                    scorer=self.name,
                )
            found.append((int(index), str(item["intention"]).strip()))
        return found, result.usage

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        conv = self.conversation(inputs)
        intentions, usage = await self._intentions(conv, ctx)
        if not intentions:
            # Nothing judged is not a pass: a judge that extracts nothing must not make any
            # conversation "complete".
            raise JudgeError(
                "the judge found no intention in the user messages, so nothing was judged; "
                "a conversation is not scored complete without one (check the conversation's "
                "user turns, or the judge model)",
                scorer=self.name,
            )
        conversation = conv.transcript(0, conv.turn + 1)
        scores = await asyncio.gather(
            *(self.ask({"conversation": conversation, "intention": t}, ctx) for _, t in intentions)
        )
        verdicts = [
            {
                "index": index,
                "intention": text,
                "ok": one.value == 1.0,
                "choice": one.metadata["choice"],
                "reasons": one.rationale,
            }
            for (index, text), one in zip(intentions, scores, strict=True)
        ]
        failed = [v for v in verdicts if not v["ok"]]
        if failed:
            first = failed[0]
            rationale = (
                f"first failing turn: messages[{first['index']}] intention not met: "
                f"{first['intention']} ({_reasons(first)}); {len(failed)} of {len(verdicts)} "
                "intentions not met"
            )
        else:
            rationale = f"all {len(verdicts)} user intentions were met"
        more = _sum_usage(scores)
        return Score(
            value=math.fsum(one.value for one in scores) / len(scores),
            scorer=self.name,
            rationale=rationale,
            metadata={"turn": conv.turn, "intentions": verdicts},
            usage=usage if more is None else usage + more,
        )
