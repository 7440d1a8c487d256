"""Judges you define: classifiers from your own prompt and choices, and G-Eval rubric judges.

:func:`llm_classifier` makes a :class:`~pytest_llmeval.scorers.llm.ClassifierScorer` from a prompt
and a ``choice_scores`` table; :func:`g_eval` makes a :class:`GEval` from criteria;
:func:`load_classifiers` makes either from JSON or YAML spec files. Each is registered by name,
so ``assert_score("polite", output=...)`` works like any built-in scorer.

User prompts get the built-in judges' prompt-injection defence: every ``{{field}}`` placeholder
the prompt writes inline is turned into its own delimited block (``<field>``/``{{field}}``/
``</field>`` on three lines, rendered with a nonce the value cannot contain), and
``{{data_notice}}`` is appended when the prompt does not say it. A case's text therefore never
reads as instructions, whatever the user's wording.

G-Eval (Liu et al., 2023): the judge rates the output on an integer scale (default 1-5) following
evaluation steps (given, or generated once from the criteria and cached). When the endpoint
returns the first token's top logprobs, the score is the probability-weighted mean over the
scale's tokens; otherwise the reply's integer (``metadata["method"]`` says which). The score is
normalised to [0, 1]: (s - low) / (high - low).

Why this module is long: the two kinds of judge a user defines share one path from a prompt to
a registered scorer (the prompt's fields and their fencing, the checks that name the judge and
the field at fault, spec files that make either, the swap fields of a pairwise classifier);
split, those checks would be written twice.
"""

from __future__ import annotations

import functools
import glob
import importlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import JudgeError, JudgeSpecError, ScorerConfigError
from pytest_llmeval.core.scores import Score, Usage, canonical_json
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge import judge_identity, judge_options_of
from pytest_llmeval.judge.params import JUDGE_OPTIONS
from pytest_llmeval.judge.prompt import DATA_NOTICE_NAME
from pytest_llmeval.judge.step import JudgeStep, load_prompts, prompt_sha256
from pytest_llmeval.scorers.llm import ClassifierScorer
from pytest_llmeval.stores.cache_protocol import input_key

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "CustomClassifier",
    "GEval",
    "g_eval",
    "llm_classifier",
    "load_classifiers",
    "wrap_fields",
]

_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# An existing three-line block (left as written) or a bare placeholder (wrapped into a block).
_BLOCK_OR_PLACEHOLDER = re.compile(
    r"(?P<block>^<(?P<tag>[A-Za-z][A-Za-z0-9_]*)>\n\{\{\s*(?P<field>\w+)\s*\}\}\n</(?P=tag)>$)"
    r"|(?P<ph>\{\{\s*(?P<name>\w+)\s*\}\})",
    re.MULTILINE,
)
# Names a field may not take: they are options of every classifier, so assert_score could not
# tell the input from the option.
# tool and choices: the classifier's answer instruction names them (judge.step.choice_step).
_RESERVED = frozenset({DATA_NOTICE_NAME, "use_cot", "tool", "choices", *JUDGE_OPTIONS})
# Judge options a spec file may set. api_key is left out on purpose: a key belongs in the
# environment, never in a file that is committed.
_SPEC_JUDGE_OPTIONS = ("model", "base_url", "temperature", "seed", "timeout", "max_tries", "mode")


# ----------------------------------------------------------------------------- templates


def template_fields(prompt: str) -> list[str]:
    """The case fields a user prompt names, in first-use order (``data_notice`` excluded)."""
    out: list[str] = []
    for match in _BLOCK_OR_PLACEHOLDER.finditer(prompt):
        name = match.group("field") or match.group("name")
        if name != DATA_NOTICE_NAME and name not in out:
            out.append(name)
    return out


def wrap_fields(prompt: str) -> str:
    """``prompt`` made into a judge-step template: a ``{{field}}`` on a line of its own becomes
    a three-line delimited block (a block already written as one is kept); a ``{{field}}``
    inside a sentence becomes the reference ``<field>``, with the field's block appended after
    the prompt; ``{{data_notice}}`` is appended when absent. So :func:`render_prompt` accepts
    it and fences each value off, and the judge step can put the prompt's text first and the
    case's blocks last (the text refers to them by their tag)."""
    appended: list[str] = []
    blocks: set[str] = set()

    def sub(match: re.Match[str]) -> str:
        if match.group("block") is not None:
            blocks.add(match.group("field"))
            return match.group(0)
        name = match.group("name")
        if name == DATA_NOTICE_NAME:
            return match.group(0)
        start, end = match.span()
        line_start = prompt.rfind("\n", 0, start) + 1
        line_end = prompt.find("\n", end)
        line_end = len(prompt) if line_end < 0 else line_end
        if prompt[line_start:start].strip() or prompt[end:line_end].strip():
            if name not in appended:
                appended.append(name)
            return f"<{name}>"
        blocks.add(name)
        return f"<{name}>\n{{{{{name}}}}}\n</{name}>"

    wrapped = _BLOCK_OR_PLACEHOLDER.sub(sub, prompt).rstrip()
    for name in appended:
        if name not in blocks:
            wrapped += f"\n\n<{name}>\n{{{{{name}}}}}\n</{name}>"
    if not re.search(r"\{\{\s*" + DATA_NOTICE_NAME + r"\s*\}\}", wrapped):
        wrapped += "\n\n{{" + DATA_NOTICE_NAME + "}}"
    return wrapped


# ----------------------------------------------------------------------------- classifiers


class CustomClassifier(ClassifierScorer):
    """A classifier built from a user's prompt and ``choice_scores`` (see :func:`llm_classifier`).

    The wrapped ``template`` goes into the judge step's identity (with the choices and their
    scores), so editing any of them never replays an old result.
    """

    # 2: the judge step: the prompt's text first, the case's blocks last (prompt caching);
    #    inline fields are referred to by their tag.
    version: ClassVar[str] = "2"
    user_prompt: ClassVar[str] = ""
    source: ClassVar[str | None] = None


def _fail(where: str | None, name: str, field: str, problem: str, hint: str = "") -> Exception:
    if where is not None:
        return JudgeSpecError(where, field, problem, judge=name, hint=hint or None)
    return ScorerConfigError(name or "llm_classifier", field, problem, hint=hint or None)


def _check_name(name: Any, where: str | None) -> str:
    if not isinstance(name, str) or not name.strip():
        raise _fail(where, "", "name", f"must be a non-empty string, not {name!r}")
    return name.strip()


def _check_choice_scores(name: str, choice_scores: Any, where: str | None) -> dict[str, float]:
    if not isinstance(choice_scores, Mapping):
        raise _fail(
            where,
            name,
            "choice_scores",
            f"must be a mapping of choice -> score, not {type(choice_scores).__name__}",
            'e.g. {"A": 1, "B": 0}',
        )
    if not choice_scores:
        raise _fail(
            where,
            name,
            "choice_scores",
            "is empty",
            'give at least two, e.g. {"A": 1, "B": 0}',
        )
    out: dict[str, float] = {}
    for choice, value in choice_scores.items():
        if not isinstance(choice, str) or not choice.strip() or choice != choice.strip():
            raise _fail(
                where,
                name,
                "choice_scores",
                f"has the choice {choice!r}; a choice is a non-empty string without surrounding "
                "spaces",
                "YAML reads a bare Yes/No/On/Off as true/false: quote such choices ('Yes': 1)"
                if isinstance(choice, bool)
                else "",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(
                where,
                name,
                f"choice_scores.{choice}",
                f"must be a number from 0 to 1, not {value!r}",
            )
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise _fail(
                where, name, f"choice_scores.{choice}", f"must be from 0 to 1, not {value!r}"
            )
        out[choice] = float(value)
    if len(out) < 2:
        raise _fail(
            where,
            name,
            "choice_scores",
            f"has one choice ({next(iter(out))!r}); the judge needs at least two to choose from",
        )
    return out


def _check_prompt(
    name: str, prompt: Any, inputs: Sequence[str] | None, where: str | None
) -> tuple[str, tuple[str, ...]]:
    if not isinstance(prompt, str) or not prompt.strip():
        raise _fail(where, name, "prompt", f"must be a non-empty string, not {prompt!r}")
    fields = template_fields(prompt)
    if not fields:
        raise _fail(
            where,
            name,
            "prompt",
            "names no case field",
            "write the fields the judge reads as {{output}}, {{input}}, {{expected}}...",
        )
    for field in fields:
        if field in _RESERVED or not _FIELD_NAME.match(field):
            raise _fail(
                where,
                name,
                "prompt",
                f"uses the field {{{{{field}}}}}, which cannot be a case field",
                "fields are names like output or input (a letter, then letters, digits or _), "
                f"not one of {', '.join(sorted(_RESERVED))}",
            )
    if inputs is not None:
        if isinstance(inputs, str) or not all(isinstance(i, str) for i in inputs):
            raise _fail(where, name, "inputs", f"must be a list of field names, not {inputs!r}")
        unknown = [f for f in fields if f not in inputs]
        if unknown:
            raise _fail(
                where,
                name,
                "prompt",
                f"uses the field {{{{{unknown[0]}}}}}, which is not in inputs "
                f"({', '.join(inputs)})",
                "add it to inputs or fix the placeholder's spelling",
            )
        unused = [i for i in inputs if i not in fields]
        if unused:
            raise _fail(
                where,
                name,
                "inputs",
                f"lists {unused[0]!r}, which the prompt never uses",
                f"write {{{{{unused[0]}}}}} in the prompt or remove it from inputs",
            )
    template = wrap_fields(prompt)
    # Make the judge step now (it renders the template once): a template the renderer refuses
    # fails here, at load time.
    try:
        JudgeStep(template)
    except (KeyError, ValueError) as exc:
        raise _fail(where, name, "prompt", f"cannot be rendered safely: {exc}") from None
    return template, tuple(fields)


def _register(cls: type[Scorer], where: str | None) -> None:
    from pytest_llmeval.engine.registry import default_registry

    _check_free(cls, where)
    default_registry.register(cls, replace=True)


def _check_free(cls: type[Scorer], where: str | None) -> None:
    """A judge you define may replace an earlier one of yours (a spec loaded again), never a
    built-in or a scorer registered otherwise."""
    from pytest_llmeval.engine.registry import default_registry

    if cls.name in default_registry:
        existing = default_registry.get(cls.name)
        if not getattr(existing, "_user_defined", False):
            raise _fail(
                where,
                cls.name,
                "name",
                f"is taken by the scorer {existing.name!r}",
                "choose another name for your judge",
            )


def _check_swap_fields(
    name: str, swap_fields: Any, fields: Sequence[str], where: str | None
) -> tuple[str, str] | None:
    if swap_fields is None:
        return None
    if (
        isinstance(swap_fields, str)
        or not isinstance(swap_fields, Sequence)
        or len(swap_fields) != 2
        or not all(isinstance(f, str) for f in swap_fields)
        or swap_fields[0] == swap_fields[1]
    ):
        raise _fail(
            where,
            name,
            "swap_fields",
            f"must be two different field names, not {swap_fields!r}",
            'name the two texts the judge compares, e.g. ["output", "expected"]',
        )
    missing = [f for f in swap_fields if f not in fields]
    if missing:
        raise _fail(
            where,
            name,
            "swap_fields",
            f"names {missing[0]!r}, which the prompt does not use",
            f"the prompt's fields: {', '.join(fields)}",
        )
    return (swap_fields[0], swap_fields[1])


def llm_classifier(
    name: str,
    prompt: str,
    choice_scores: Mapping[str, float],
    *,
    use_cot: bool = True,
    inputs: Sequence[str] | None = None,
    description: str = "",
    register: bool = True,
    swap_fields: Sequence[str] | None = None,
    _where: str | None = None,
    **judge_options: Any,
) -> type[Scorer]:
    """A registered classifier judge named ``name``: the judge reads ``prompt`` (its
    ``{{field}}`` placeholders filled from the case, each in a delimited block) and picks one of
    ``choice_scores``' keys, scored by its value (0..1).

    ``use_cot`` asks for the judge's reasons first; ``inputs`` (optional) lists the fields the
    prompt must use (a check against typos); ``swap_fields`` (two of the prompt's fields, for a
    judge that compares them, e.g. ``("output", "expected")``) lets a call ask in both orders
    (``swap=True``; a choice scored s in one order reads 1 - s in the other);
    ``judge_options`` (``model``, ``temperature``,
    ``base_url``...) become the scorer's defaults, overridable per call. A bad argument raises
    :class:`ScorerConfigError` (:class:`JudgeSpecError` naming the file for spec files).
    """
    name = _check_name(name, _where)
    scores = _check_choice_scores(name, choice_scores, _where)
    template, fields = _check_prompt(name, prompt, inputs, _where)
    if not isinstance(use_cot, bool):
        raise _fail(_where, name, "use_cot", f"must be true or false, not {use_cot!r}")
    unknown = sorted(set(judge_options) - set(JUDGE_OPTIONS))
    if unknown:
        raise _fail(
            _where,
            name,
            unknown[0],
            "is not an option of a classifier judge",
            f"options: use_cot, inputs, description, {', '.join(JUDGE_OPTIONS)}",
        )
    swap = _check_swap_fields(name, swap_fields, fields, _where)
    defaults: dict[str, Any] = {"use_cot": use_cot}
    defaults.update({k: v for k, v in judge_options.items() if v is not None})
    cls = type(
        f"CustomClassifier_{name}",
        (CustomClassifier,),
        {
            "name": name,
            "aliases": (),
            "required_inputs": fields,
            "optional_inputs": (),
            "description": description or f"Your classifier judge {name!r}.",
            "template": template,
            "user_prompt": prompt,
            "choice_scores": scores,
            "swap_fields": swap,
            "default_options": defaults,
            "source": _where,
            "_user_defined": True,
            "__module__": __name__,
        },
    )
    if register:
        _register(cls, _where)
    return cls


# ----------------------------------------------------------------------------- G-Eval

#: Top alternatives asked for the score token (OpenAI's maximum).
TOP_LOGPROBS = 20

_PROMPTS = load_prompts("g_eval")
STEPS_PROMPT: str = _PROMPTS["steps"]
SCORE_PROMPT_HEAD: str = _PROMPTS["score_head"]
SCORE_PROMPT_TAIL: str = _PROMPTS["score_tail"]

# Optional case fields, in the order they are shown, with their block tags.
_GEVAL_FIELDS = (
    ("input", "input"),
    ("expected", "expected_output"),
    ("context", "context"),
    ("output", "response"),
)

_PROMPT_SHA256 = prompt_sha256(
    {
        "steps": STEPS_PROMPT,
        "head": SCORE_PROMPT_HEAD,
        "tail": SCORE_PROMPT_TAIL,
        "fields": _GEVAL_FIELDS,
        "top_logprobs": TOP_LOGPROBS,
    }
)


@functools.lru_cache(maxsize=64)
def _score_template(present: tuple[str, ...]) -> str:
    parts = [SCORE_PROMPT_HEAD]
    for field, tag in _GEVAL_FIELDS:
        if field in present:
            parts.append(f"\n<{tag}>\n{{{{{field}}}}}\n</{tag}>\n")
    parts.append(SCORE_PROMPT_TAIL)
    return "".join(parts)


# Generated steps already fetched in this process: steps key -> text.
_steps_memo: dict[str, str] = {}


def _steps_text(steps: str | Sequence[str]) -> str:
    if isinstance(steps, str):
        return steps.strip()
    return "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(steps, 1))


def weighted_score(
    top: Sequence[tuple[str, float]], low: int, high: int
) -> tuple[float, dict[str, float]] | None:
    """The probability-weighted mean of the scale's values among the first token's top
    alternatives (tokens matched after stripping spaces; the first of each value counts),
    normalised over the matched mass; None when no alternative is a value of the scale."""
    probs: dict[str, float] = {}
    for token, logprob in top:
        text = token.strip()
        if text.isdigit() and low <= int(text) <= high and str(int(text)) not in probs:
            probs[str(int(text))] = math.exp(logprob)
    mass = sum(probs.values())
    if not probs or mass <= 0.0:
        return None
    return sum(int(v) * p for v, p in probs.items()) / mass, probs


class GEval(Scorer):
    """G-Eval: a rubric judge. Options: ``criteria`` (required), ``evaluation_steps`` (a string or
    a list of steps; generated once from the criteria when absent), ``scale`` ([low, high]
    integers, 0 <= low < high <= 9, default [1, 5]: one token per score) and the judge options.

    Inputs: ``output`` (the response), optionally ``input``, ``expected`` and ``context``.
    """

    source: ClassVar[str | None] = None
    name: ClassVar[str] = "g_eval"
    aliases: ClassVar[tuple[str, ...]] = ("GEval",)
    required_inputs: ClassVar[tuple[str, ...]] = ("output",)
    optional_inputs: ClassVar[tuple[str, ...]] = ("input", "expected", "context")
    uses_judge: ClassVar[bool] = True
    # 2: the judge step: criteria, steps and scale first, the case's fields last (prompt caching)
    version: ClassVar[str] = "2"
    description: ClassVar[str] = "Rubric score from criteria (G-Eval; logprob-weighted when given)"
    default_options: ClassVar[Mapping[str, Any]] = {
        "criteria": None,
        "evaluation_steps": None,
        "scale": (1, 5),
    }

    def validate_options(self) -> None:
        criteria = self.options.get("criteria")
        if not isinstance(criteria, str) or not criteria.strip():
            raise ScorerConfigError(
                self.name,
                "criteria",
                f"must be a non-empty string, not {criteria!r}",
                hint="say what a good response does, e.g. criteria='The answer is polite'",
            )
        steps = self.options.get("evaluation_steps")
        if steps is not None and not (
            (isinstance(steps, str) and steps.strip())
            or (
                isinstance(steps, (list, tuple))
                and steps
                and all(isinstance(s, str) and s.strip() for s in steps)
            )
        ):
            raise ScorerConfigError(
                self.name,
                "evaluation_steps",
                f"must be a non-empty string or list of strings, not {steps!r}",
                hint="leave it out to have the judge write them once from the criteria",
            )
        scale = self.options.get("scale")
        if (
            not isinstance(scale, (list, tuple))
            or len(scale) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
            or not 0 <= scale[0] < scale[1] <= 9
        ):
            raise ScorerConfigError(
                self.name,
                "scale",
                f"must be [low, high], integers with 0 <= low < high <= 9, not {scale!r}",
                hint="each score must be one token for the logprob-weighted mean; default [1, 5]",
            )

    @property
    def scale(self) -> tuple[int, int]:
        low, high = self.options["scale"]
        return int(low), int(high)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        # What is sent: temperature 0 and logprobs (left out for models that refuse them).
        return judge_identity(
            self, ctx, _PROMPT_SHA256, temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS
        )

    # -- evaluation steps -------------------------------------------------------------------

    def _steps_key(self, ctx: ScoringContext) -> str:
        ident = {
            "name": "g_eval.steps",
            "version": self.version,
            "extra": judge_identity(self, ctx, _PROMPT_SHA256, temperature=0.0),
        }
        return input_key(canonical_json(ident), {"criteria": self.options["criteria"]})

    async def evaluation_steps(self, ctx: ScoringContext) -> tuple[str, str, Usage | None]:
        """(steps, source, usage): given, else generated once per criteria and judge, kept in
        this process and in the result cache (source ``given``, ``cached`` or ``generated``)."""
        given = self.options.get("evaluation_steps")
        if given is not None:
            return _steps_text(given), "given", None
        key = self._steps_key(ctx)
        memo = _steps_memo.get(key)
        if memo is not None:
            return memo, "cached", None
        store = ctx.result_cache()
        if store is not None:
            hit = store.get(key)
            steps = hit.get("steps") if hit else None
            if isinstance(steps, str) and steps.strip():
                _steps_memo[key] = steps
                return steps, "cached", None
        criteria = self.options["criteria"].strip()
        prompt = JudgeStep(STEPS_PROMPT, constants={"criteria": criteria}).render({})
        client = ctx.judge(judge_options_of(self))
        reply = await client.chat(
            [{"role": "user", "content": prompt}], scorer=self.name, temperature=0.0
        )
        steps = (reply.content or "").strip()
        if not steps:
            raise JudgeError(
                "the judge wrote no evaluation steps for the criteria",
                scorer=self.name,
                endpoint=client.endpoint,
                model=client.settings.model,
            )
        _steps_memo[key] = steps
        if store is not None:
            store.put(key, f"{self.name}.steps", {"steps": steps})
        return steps, "generated", reply.usage

    # -- scoring ----------------------------------------------------------------------------

    def render(self, inputs: Mapping[str, Any], steps: str) -> str:
        """The scoring prompt (a judge step): the criteria, steps and scale first, then the
        case's fields that are given."""
        low, high = self.scale
        data = {f: inputs[f] for f, _ in _GEVAL_FIELDS if inputs.get(f) is not None}
        step = JudgeStep(
            _score_template(tuple(data)),
            constants={
                "low": str(low),
                "high": str(high),
                "criteria": self.options["criteria"].strip(),
                "steps": steps,
            },
        )
        return step.render(data)

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        from pytest_llmeval.judge import params

        self.check_inputs(inputs)
        steps, steps_source, steps_usage = await self.evaluation_steps(ctx)
        prompt = self.render(inputs, steps)
        client = ctx.judge(judge_options_of(self))
        refused = {"logprobs", "top_logprobs"} & params.unsupported(client.settings.model)
        reply = await client.chat(
            [{"role": "user", "content": prompt}],
            scorer=self.name,
            temperature=0.0,
            max_tokens=8,
            logprobs=not refused,
            top_logprobs=None if refused else TOP_LOGPROBS,
        )
        low, high = self.scale
        metadata: dict[str, Any] = {
            "scale": [low, high],
            "evaluation_steps": steps,
            "steps_source": steps_source,
            "reply": reply.content,
        }
        weighted = None
        if refused:
            metadata["logprobs"] = "refused by the model"
        elif reply.top_logprobs is None:
            metadata["logprobs"] = "not returned by the endpoint"
        elif not re.match(r"\s*\d", reply.content or ""):
            # The score is not the first token: the first token's alternatives say nothing
            # about it.
            metadata["logprobs"] = "the reply does not start with the score"
        else:
            weighted = weighted_score(reply.top_logprobs, low, high)
            if weighted is None:
                metadata["logprobs"] = "no score token among the first token's top alternatives"
        if weighted is not None:
            raw, probs = weighted
            metadata.update(method="logprobs", probabilities=probs)
        else:
            match = re.search(r"\d+", reply.content or "")
            value = int(match.group(0)) if match else None
            if value is None or not low <= value <= high:
                raise JudgeError(
                    f"the judge's reply {reply.content!r} holds no score from {low} to {high}",
                    scorer=self.name,
                    endpoint=client.endpoint,
                    model=client.settings.model,
                )
            raw = float(value)
            metadata["method"] = "parsed"
        metadata["raw_score"] = raw
        usage = reply.usage if steps_usage is None else steps_usage + reply.usage
        return Score(
            value=(raw - low) / (high - low),
            rationale=f"judge score {raw:.3f} on {low}-{high} ({metadata['method']})",
            metadata=metadata,
            usage=usage,
        )


def g_eval(
    name: str,
    criteria: str,
    *,
    evaluation_steps: str | Sequence[str] | None = None,
    scale: Sequence[int] = (1, 5),
    description: str = "",
    register: bool = True,
    _where: str | None = None,
    **judge_options: Any,
) -> type[Scorer]:
    """A registered G-Eval judge named ``name`` with these ``criteria`` (see :class:`GEval`);
    ``judge_options`` (``model``, ``temperature``...) become its defaults."""
    name = _check_name(name, _where)
    unknown = sorted(set(judge_options) - set(JUDGE_OPTIONS))
    if unknown:
        raise _fail(
            _where,
            name,
            unknown[0],
            "is not an option of a g_eval judge",
            f"options: criteria, evaluation_steps, scale, description, {', '.join(JUDGE_OPTIONS)}",
        )
    defaults: dict[str, Any] = {
        "criteria": criteria,
        "evaluation_steps": evaluation_steps,
        "scale": tuple(scale) if isinstance(scale, (list, tuple)) else scale,
    }
    defaults.update({k: v for k, v in judge_options.items() if v is not None})
    cls = type(
        f"GEval_{name}",
        (GEval,),
        {
            "name": name,
            "aliases": (),
            "description": description or f"Your G-Eval judge {name!r}.",
            "default_options": defaults,
            "source": _where,
            "_user_defined": True,
            "__module__": __name__,
        },
    )
    try:
        cls()  # the options are checked now, not at the first assertion
    except ScorerConfigError as exc:
        if _where is None:
            raise
        raise JudgeSpecError(_where, exc.option, str(exc), judge=name) from None
    if register:
        _register(cls, _where)
    return cls


# ----------------------------------------------------------------------------- spec files

_CLASSIFIER_KEYS = (
    "name",
    "type",
    "prompt",
    "choice_scores",
    "use_cot",
    "inputs",
    "description",
    "swap_fields",
)
_GEVAL_KEYS = ("name", "type", "criteria", "evaluation_steps", "scale", "description")
_TYPES = ("classifier", "g_eval")


def _read_spec(path: Path) -> Any:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JudgeSpecError(where, "(file)", f"cannot be read: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise JudgeSpecError(where, "(file)", f"is not valid JSON: {exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            yaml: Any = importlib.import_module("yaml")
        except ImportError:
            raise JudgeSpecError(
                where,
                "(file)",
                "is YAML, but PyYAML is not installed",
                hint="pip install pyyaml, or write the spec as .json",
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise JudgeSpecError(where, "(file)", f"is not valid YAML: {exc}") from None
    raise JudgeSpecError(
        where, "(file)", "has an unknown extension", hint="use .json, .yaml or .yml"
    )


def _load_one(spec: Any, where: str) -> type[Scorer]:
    if not isinstance(spec, Mapping):
        raise JudgeSpecError(where, "(entry)", f"must be a mapping, not {type(spec).__name__}")
    name = _check_name(spec.get("name"), where)
    kind = spec.get("type", "classifier")
    if kind not in _TYPES:
        raise JudgeSpecError(
            where, "type", f"is {kind!r}, not one of {', '.join(_TYPES)}", judge=name
        )
    keys = (_CLASSIFIER_KEYS if kind == "classifier" else _GEVAL_KEYS) + _SPEC_JUDGE_OPTIONS
    for key in spec:
        if key not in keys:
            hint = (
                "put the API key in the environment (OPENAI_API_KEY), never in a spec file"
                if key == "api_key"
                else f"known fields for a {kind} judge: {', '.join(keys)}"
            )
            raise JudgeSpecError(where, str(key), "is not a known field", judge=name, hint=hint)
    opts = {k: spec[k] for k in _SPEC_JUDGE_OPTIONS if k in spec}
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise JudgeSpecError(where, "description", "must be a string", judge=name)
    if kind == "classifier":
        for required in ("prompt", "choice_scores"):
            if required not in spec:
                raise JudgeSpecError(where, required, "is missing", judge=name)
        return llm_classifier(
            name,
            spec["prompt"],
            spec["choice_scores"],
            use_cot=spec.get("use_cot", True),
            inputs=spec.get("inputs"),
            description=description,
            register=False,
            swap_fields=spec.get("swap_fields"),
            _where=where,
            **opts,
        )
    if "criteria" not in spec:
        raise JudgeSpecError(where, "criteria", "is missing", judge=name)
    return g_eval(
        name,
        spec["criteria"],
        evaluation_steps=spec.get("evaluation_steps"),
        scale=spec.get("scale", (1, 5)),
        description=description,
        register=False,
        _where=where,
        **opts,
    )


def load_classifiers(
    *patterns: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> list[type[Scorer]]:
    """Load and register the judges of the JSON/YAML spec files matching ``patterns`` (globs,
    ``**`` allowed, relative to ``root`` or the working directory). A file holds one judge (a
    mapping) or a list of them. Every judge of every file is checked before any is registered;
    a pattern that matches no file, or a bad spec, raises :class:`JudgeSpecError` naming the
    file and the field."""
    base = Path(root) if root is not None else Path.cwd()
    paths: list[Path] = []
    for pattern in patterns:
        text = os.fspath(pattern)
        full = text if os.path.isabs(text) else os.fspath(base / text)
        found = sorted(glob.glob(full, recursive=True))
        if not found:
            raise JudgeSpecError(
                text, "(pattern)", "matches no file", hint=f"globs are relative to {base}"
            )
        paths.extend(Path(p) for p in found if Path(p).is_file() and Path(p) not in paths)
    made: list[type[Scorer]] = []
    for path in paths:
        data = _read_spec(path)
        entries = data if isinstance(data, list) else [data]
        if not entries:
            raise JudgeSpecError(str(path), "(file)", "holds no judge")
        for i, entry in enumerate(entries):
            where = str(path) if len(entries) == 1 else f"{path} (entry {i + 1})"
            made.append(_load_one(entry, where))
    names = [cls.name for cls in made]
    for cls in made:
        if names.count(cls.name) > 1:
            where = getattr(cls, "source", None) or str(cls.name)
            raise JudgeSpecError(
                str(where), "name", f"{cls.name!r} is defined twice", judge=cls.name
            )
    for cls in made:
        _check_free(cls, getattr(cls, "source", None) or cls.name)
    for cls in made:
        _register(cls, getattr(cls, "source", None) or cls.name)
    return made
