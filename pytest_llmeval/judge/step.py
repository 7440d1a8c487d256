"""The judge step: one judge call, from a template to a validated reply (and a score).

Every judge scorer is built from :class:`JudgeStep` objects. A step holds a prompt template, and
for structured replies a tool (function) name, its description and the JSON schema of its
arguments. It does, in one place, what each scorer used to do on its own:

1. **Render** the template from named fields. Each case field is untrusted and written in the
   template as a three-line block (``<tag>``/``{{field}}``/``</tag>``); it is rendered between
   tags whose suffix its value cannot contain (:func:`pytest_llmeval.judge.prompt.render_prompt`),
   followed by the notice that blocks are data, never instructions.
2. **Lay the prompt out for provider prompt caching**: the template's text outside the blocks
   (the fixed instructions, and in ``json``/``text`` mode the schema) comes first, the case's
   blocks and the notice last, in one user message. The instructions and the tools array are
   byte-identical across the cases of a scorer, so a provider that caches prompt prefixes
   (OpenAI, Azure, vLLM, llama.cpp's slot cache) serves them from its cache. A paragraph of the
   template that names a per-case value (``case_placeholders``, e.g. the number of claims) goes
   after the blocks.
3. **Ask** the judge in the run's mode (``tool``: a forced tool call; ``json``; ``text``) and
   validate the reply against the schema (plus an optional ``check`` for what a fixed schema
   cannot say, such as "one verdict per claim"): one re-ask, then a
   :class:`~pytest_llmeval.core.errors.JudgeError`.
4. **Map a choice to a score** (:func:`choice_step`, :meth:`JudgeStep.classify`): a choice
   outside the table is a JudgeError, never a score.
5. **Contribute one identity** to the cache key (:attr:`JudgeStep.sha256`, combined by
   :func:`step_identity` with the judge's model and sampling): template, tool, schema, fixed
   values, the delimiting scheme and the layout version. Editing any of them never replays an
   old result.

Prompts and schemas are package data: one YAML file per scorer family in
``pytest_llmeval/prompts/``, read once per process (:func:`load_prompts`).

Example (a judge of your own, for advanced use; most users want
:func:`pytest_llmeval.llm_classifier`)::

    from pytest_llmeval import Score, Scorer
    from pytest_llmeval.judge.step import choice_step, step_identity

    TONE = choice_step(
        "Is the reply polite?\\n\\n<reply>\\n{{output}}\\n</reply>\\n\\n{{data_notice}}",
        {"Yes": 1.0, "No": 0.0},
    )

    class Polite(Scorer):
        name = "polite"
        required_inputs = ("output",)
        uses_judge = True

        def extra_identity(self, ctx):
            return step_identity(self, ctx, TONE)

        async def acompute(self, inputs, ctx):
            verdict = await TONE.classify(self, ctx, {"output": inputs["output"]})
            return verdict.score(self.name)
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.errors import JudgeError
from pytest_llmeval.core.scores import Score, Usage, canonical_json
from pytest_llmeval.judge.prompt import DATA_NOTICE_NAME, PROMPT_SCHEME, render_prompt

if TYPE_CHECKING:
    from pytest_llmeval.judge.client import JudgeClient, StructuredResult
    from pytest_llmeval.judge.host import JudgedScorer, JudgeHost

__all__ = [
    "LAYOUT",
    "Claims",
    "JudgeStep",
    "Verdict",
    "choice_step",
    "claims_then_verdicts",
    "judge_client",
    "load_prompts",
    "prompt_sha256",
    "render_value",
    "step_identity",
    "steps_sha256",
]

#: Cache-key material for the layout: instructions first, then the case's blocks and notice.
LAYOUT = "instructions-then-case-v1"

_BLOCK = re.compile(
    r"^<(?P<tag>[A-Za-z][A-Za-z0-9_]*)>\n\{\{\s*(?P<field>\w+)\s*\}\}\n</(?P=tag)>$", re.MULTILINE
)
_NOTICE = re.compile(r"\{\{\s*" + DATA_NOTICE_NAME + r"\s*\}\}")
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


# ----------------------------------------------------------------------------- package data


@functools.cache
def load_prompts(family: str) -> Mapping[str, Any]:
    """The prompts and schemas of one scorer family, from ``pytest_llmeval/prompts/<family>.yaml``
    (package data), parsed once per process."""
    import importlib
    from importlib.resources import files

    yaml: Any = importlib.import_module("yaml")  # a dependency; no type stubs installed
    text = files("pytest_llmeval").joinpath("prompts", f"{family}.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):  # a packaging error, not a user's
        raise RuntimeError(f"pytest_llmeval/prompts/{family}.yaml holds no mapping")
    return data


# ----------------------------------------------------------------------------- values


def render_value(field_name: str, value: Any) -> str:
    """The text inserted for one case value: a string as it is, a ``context`` given as a list of
    strings joined with blank lines, anything else as JSON (``ensure_ascii=False``)."""
    if isinstance(value, str):
        return value
    if (
        field_name == "context"
        and isinstance(value, (list, tuple))
        and all(isinstance(v, str) for v in value)
    ):
        return "\n\n".join(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


# ----------------------------------------------------------------------------- the step


@final
@dataclass(frozen=True)
class Verdict:
    """A classifier step's outcome: the ``choice``, its score (``None`` for a choice that is an
    outcome but not a score, see ``unscored``), the judge's reasons and the usage."""

    choice: str
    value: float | None
    rationale: str | None
    usage: Usage

    def score(self, scorer: str) -> Score:
        """The :class:`Score` of a scored choice (``metadata["choice"]``)."""
        if self.value is None:
            raise JudgeError(f"the judge chose {self.choice!r}, which has no score", scorer=scorer)
        return Score(
            value=self.value,
            scorer=scorer,
            rationale=self.rationale,
            metadata={"choice": self.choice},
            usage=self.usage,
        )


@final
@dataclass(frozen=True, eq=False)
class JudgeStep:
    """One judge call: a template, and for structured replies its tool and schema.

    ``template``: text with each case field as a ``<tag>``/``{{field}}``/``</tag>`` block and
    ``{{data_notice}}``; any other ``{{name}}`` comes from ``constants`` (fixed for the step) or,
    for names in ``case_placeholders``, from the ``case`` values given per call (their paragraphs
    go after the blocks). ``choice_scores``/``unscored``: see :func:`choice_step`. ``version``
    is part of the step's identity.

    Raises ``ValueError``/``KeyError`` when made from a template that cannot be rendered safely
    (a case field outside a block, a placeholder without a value).
    """

    template: str
    tool: str | None = None
    description: str = ""
    schema: Mapping[str, Any] | None = None
    constants: Mapping[str, str] = field(default_factory=dict)
    case_placeholders: tuple[str, ...] = ()
    choice_scores: Mapping[str, float] | None = None
    unscored: tuple[str, ...] = ()
    #: bump it when the step's meaning changes without its text (a new parsing of its reply)
    version: str = "1"
    _instructions: str = field(init=False, repr=False, default="")
    _case: str = field(init=False, repr=False, default="")

    def __post_init__(self) -> None:
        # Split once: (instructions template, case template). Checked by a dry render, so a
        # template error shows when the scorer module loads, not at the first case.
        instructions, case = _split(self.template, self.case_placeholders)
        object.__setattr__(self, "_instructions", instructions)
        object.__setattr__(self, "_case", case)
        fields = {m.group("field"): "x" for m in _BLOCK.finditer(case)}
        # A case field named in the instructions is outside a block: ValueError.
        render_prompt(instructions, fields, dict(self.constants))
        render_prompt(case, fields, {n: "1" for n in self.case_placeholders})

    # -- identity ---------------------------------------------------------------------------

    @functools.cached_property
    def sha256(self) -> str:
        """The step's identity: sha256 of the template, tool, description, schema, fixed values,
        choices, the delimiting scheme and the layout."""
        return prompt_sha256(
            {
                "template": self.template,
                "tool": self.tool,
                "description": self.description,
                "schema": self.schema,
                "constants": dict(self.constants),
                "case_placeholders": list(self.case_placeholders),
                "choice_scores": None if self.choice_scores is None else dict(self.choice_scores),
                "unscored": list(self.unscored),
                "version": self.version,
            }
        )

    @property
    def fields(self) -> tuple[str, ...]:
        """The case fields the template's blocks take, in order."""
        return tuple(dict.fromkeys(m.group("field") for m in _BLOCK.finditer(self._case)))

    # -- rendering --------------------------------------------------------------------------

    def instructions(self, mode: str = "tool") -> str:
        """The fixed part of the prompt: the same for every case (in ``json``/``text`` mode it
        ends with the schema the reply must match). Rendered once per mode."""
        memo: dict[str, str] = self.__dict__.setdefault("_instructions_memo", {})
        text = memo.get(mode)
        if text is None:
            text = render_prompt(self._instructions, {}, dict(self.constants))
            if mode != "tool" and self.tool is not None and self.schema is not None:
                from pytest_llmeval.judge.client import schema_instruction

                schema = schema_instruction(self.tool, self.description, dict(self.schema))
                text = f"{text}\n\n{schema}"
            memo[mode] = text
        return text

    def case_text(
        self,
        fields: Mapping[str, Any],
        case: Mapping[str, str] | None = None,
        *,
        nonce: str | None = None,
    ) -> str:
        """The case's part of the prompt: its blocks, the data notice, then any paragraph with a
        per-case value. Values that are not strings go through :func:`render_value`."""
        data = {k: render_value(k, v) for k, v in fields.items()}
        return render_prompt(self._case, data, dict(case or {}), nonce=nonce)

    def render(
        self,
        fields: Mapping[str, Any],
        case: Mapping[str, str] | None = None,
        *,
        nonce: str | None = None,
        mode: str = "tool",
    ) -> str:
        """The whole prompt: :meth:`instructions`, a blank line, :meth:`case_text` (a template
        without case fields is its instructions alone)."""
        case_text = self.case_text(fields, case, nonce=nonce)
        instructions = self.instructions(mode)
        return f"{instructions}\n\n{case_text}" if case_text else instructions

    def messages(
        self,
        fields: Mapping[str, Any],
        case: Mapping[str, str] | None = None,
        *,
        nonce: str | None = None,
        mode: str = "tool",
    ) -> list[dict[str, Any]]:
        """The chat messages sent: one user message holding :meth:`render`."""
        return [{"role": "user", "content": self.render(fields, case, nonce=nonce, mode=mode)}]

    # -- asking -----------------------------------------------------------------------------

    async def ask(
        self,
        client: JudgeClient,
        fields: Mapping[str, Any],
        *,
        scorer: str,
        case: Mapping[str, str] | None = None,
        nonce: str | None = None,
        temperature: float | None = None,
        check: Callable[[dict[str, Any]], str] | None = None,
    ) -> StructuredResult:
        """Send the rendered prompt and return the reply's arguments, validated against the
        schema and ``check`` (which returns a problem, or ``""``): one re-ask, then a
        :class:`JudgeError`."""
        if self.tool is None or self.schema is None:
            raise TypeError("ask() needs a step with a tool and a schema; use messages() for chat")
        mode = client.settings.mode
        return await client.structured(
            self.messages(fields, case, nonce=nonce, mode=mode),
            name=self.tool,
            description=self.description,
            schema=dict(self.schema),
            scorer=scorer,
            temperature=temperature,
            check=check,
            schema_in_prompt=True,
        )

    async def classify(
        self,
        owner: JudgedScorer,
        ctx: JudgeHost,
        fields: Mapping[str, Any],
        *,
        nonce: str | None = None,
    ) -> Verdict:
        """Ask a :func:`choice_step` and map the choice to its score. A choice outside the
        table is a :class:`JudgeError` (never a score); a choice in ``unscored`` comes back with
        ``value=None`` for the scorer to decide what it means."""
        if self.choice_scores is None:
            raise TypeError("classify() needs a choice step (see choice_step())")
        client = judge_client(owner, ctx)
        result = await self.ask(client, fields, scorer=owner.name, nonce=nonce)
        args = result.arguments
        choice = args.get("choice")
        reasons = args.get("reasons")
        rationale = reasons.strip() if isinstance(reasons, str) and reasons.strip() else None
        if isinstance(choice, str) and choice in self.unscored:
            return Verdict(choice, None, rationale, result.usage)
        if not isinstance(choice, str) or choice not in self.choice_scores:
            # The engine validates the enum, so this only guards an engine that did not.
            allowed = ", ".join((*self.choice_scores, *self.unscored))
            raise _judge_error(
                client, owner.name, f"the judge's choice {choice!r} is not one of {allowed}"
            )
        return Verdict(choice, float(self.choice_scores[choice]), rationale, result.usage)


def choice_step(
    template: str,
    choice_scores: Mapping[str, float],
    *,
    use_cot: bool = True,
    unscored: Sequence[str] = (),
) -> JudgeStep:
    """A classifier step: the judge picks one of ``choice_scores`` (then ``unscored``) through
    the ``select_choice`` tool, with its reasons first when ``use_cot``. The answer instruction
    (package data, ``classifier.yaml``) is appended to the template's instructions."""
    common = load_prompts("classifier")
    choices = [*choice_scores, *unscored]
    props: dict[str, Any] = {}
    required: list[str] = []
    if use_cot:
        props["reasons"] = {"type": "string", "description": common["reasons_description"]}
        required.append("reasons")
    props["choice"] = {
        "type": "string",
        "enum": choices,
        "description": common["choice_description"],
    }
    required.append("choice")
    schema = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    answer = common["answer_cot" if use_cot else "answer_plain"]
    return JudgeStep(
        template=f"{template.strip()}\n\n{answer}",
        tool=common["tool"],
        description=common["description"],
        schema=schema,
        constants={"tool": common["tool"], "choices": ", ".join(choices)},
        choice_scores=dict(choice_scores),
        unscored=tuple(unscored),
    )


# ----------------------------------------------------------------------------- identity


def judge_client(owner: JudgedScorer, ctx: JudgeHost) -> JudgeClient:
    """The judge client for a scorer's judge options (``judge_options_of``)."""
    from pytest_llmeval.judge import judge_options_of

    return ctx.judge(judge_options_of(owner))


def prompt_sha256(material: Mapping[str, Any]) -> str:
    """The one prompt hash: sha256 of ``material`` (templates, tools, schemas...) with the
    delimiting scheme and the layout, so that a change of either changes every judge scorer's
    cache keys. :attr:`JudgeStep.sha256` is this hash of the step's parts."""
    full = canonical_json({**material, "delimiting": PROMPT_SCHEME, "layout": LAYOUT})
    return hashlib.sha256(full.encode("utf-8")).hexdigest()


def steps_sha256(*steps: JudgeStep) -> str:
    """One hash over several steps (a scorer that makes more than one kind of call)."""
    if len(steps) == 1:
        return steps[0].sha256
    material = canonical_json([s.sha256 for s in steps])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def step_identity(
    owner: JudgedScorer, ctx: JudgeHost, *steps: JudgeStep, **sent: Any
) -> dict[str, Any]:
    """A judge scorer's cache-key material: the hash of its steps and the judge it would ask
    (see :func:`pytest_llmeval.judge.judge_identity`; ``sent`` overrides what it always sends)."""
    from pytest_llmeval.judge import judge_identity

    return judge_identity(owner, ctx, steps_sha256(*steps), **sent)


def _judge_error(client: JudgeClient, scorer: str, message: str) -> JudgeError:
    model = client.identity().get("model")
    return JudgeError(message, scorer=scorer, model=model if isinstance(model, str) else None)


# ----------------------------------------------------------------------------- claims, verdicts


@final
@dataclass(frozen=True)
class Claims:
    """What :func:`claims_then_verdicts` found: the claims, each claim's verdict item as the
    judge gave it (``None`` when there were no claims), whether each is supported, the usage."""

    claims: list[str]
    items: list[dict[str, Any]]
    supported: list[bool]
    usage: Usage


async def claims_then_verdicts(
    client: JudgeClient,
    *,
    scorer: str,
    extract: JudgeStep,
    extract_fields: Mapping[str, Any],
    claims_key: str,
    verdict: JudgeStep,
    verdict_fields: Mapping[str, Any],
    claims_field: str,
    verdict_key: str,
    supported: Mapping[Any, bool],
) -> Claims:
    """Split a text into claims (``extract``, whose reply lists them under ``claims_key``), then
    judge every claim (``verdict``, the claims numbered ``1. ...`` in the block
    ``claims_field``; its reply lists one item per claim, in order, under ``"verdicts"``).

    The one bad-verdict policy of every scorer built on it: a reply without exactly one verdict
    per claim is re-asked once, then a :class:`JudgeError`; a verdict (``item[verdict_key]``)
    that is not a key of ``supported`` is a :class:`JudgeError` naming the claim. A malformed
    verdict is never counted, as supported or unsupported. Blank claims are dropped. No claims:
    no second call.
    """
    extracted = await extract.ask(client, extract_fields, scorer=scorer)
    raw = extracted.arguments.get(claims_key)
    if not isinstance(raw, list):
        raise _judge_error(client, scorer, f"the {claims_key} list is not a list: {raw!r}")
    claims = [c.strip() for c in raw if isinstance(c, str) and c.strip()]
    if not claims:
        return Claims([], [], [], extracted.usage)
    numbered = "\n".join(f"{i}. {claim}" for i, claim in enumerate(claims, 1))

    def one_per_claim(args: dict[str, Any]) -> str:
        got = args.get("verdicts")
        if not isinstance(got, list) or len(got) != len(claims):
            n = len(got) if isinstance(got, list) else 0
            return f"`verdicts` has {n} items for {len(claims)} claims: give exactly one per claim"
        return ""

    judged = await verdict.ask(
        client,
        {**verdict_fields, claims_field: numbered},
        scorer=scorer,
        case={"count": str(len(claims))},
        check=one_per_claim,
    )
    items: list[dict[str, Any]] = []
    flags: list[bool] = []
    for claim, item in zip(claims, judged.arguments["verdicts"], strict=True):
        value = item.get(verdict_key) if isinstance(item, dict) else None
        if isinstance(value, bool) or value not in supported:
            raise _judge_error(client, scorer, f"invalid verdict {value!r} for claim {claim!r}")
        items.append(dict(item))
        flags.append(bool(supported[value]))
    return Claims(claims, items, flags, extracted.usage + judged.usage)


# ----------------------------------------------------------------------------- layout


def _split(template: str, case_placeholders: Sequence[str]) -> tuple[str, str]:
    """(instructions, case) templates: the text outside the blocks, its paragraphs in order
    (those naming a per-case placeholder left out), and the blocks, the data notice and those
    paragraphs. Each paragraph is kept as written, only trimmed at its ends."""
    blocks = [m.group(0) for m in _BLOCK.finditer(template)]
    rest = _NOTICE.sub("", _BLOCK.sub("", template))
    paragraphs = [p.strip() for p in _PARAGRAPHS.split(rest) if p.strip()]
    per_case = re.compile(
        r"\{\{\s*(?:" + "|".join(map(re.escape, case_placeholders)) + r")\s*\}\}"
        if case_placeholders
        else r"(?!)"
    )
    fixed = [p for p in paragraphs if not per_case.search(p)]
    moved = [p for p in paragraphs if per_case.search(p)]
    case_parts = [*blocks]
    if blocks:
        case_parts.append("{{" + DATA_NOTICE_NAME + "}}")
    case_parts.extend(moved)
    return "\n\n".join(fixed), "\n\n".join(case_parts)
