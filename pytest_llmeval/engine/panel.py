"""Judge panels (issue 20): one judged scoring asked of several judges, each a model with its
own endpoint and key, reduced to one score.

``assert_score("factuality", ..., judges=[Judge("gpt-4o"), Judge("local",
base_url="http://127.0.0.1:8080/v1", api_key="none")], panel_reduce="majority")``

* ``panel_reduce``: ``mean`` (the mean of the judges' scores; the default), ``majority`` (the
  score more than half of the judges reach or beat in the scorer's direction: against one
  bound the majority's verdict, a tie fails) or ``min`` (the worst judge's score in the
  scorer's direction: the lowest for a higher-is-better scorer, the highest for a
  lower-is-better one; the strictest panel).
* ``panel_errors``: what a judge that fails does to the case. ``error`` (the default): the
  case is an error naming that judge and its cause; the others' answers are cached, never
  lost. ``survivors``: the panel reduces the judges that answered, and the record lists the
  one that failed with its error; it is never chosen silently. With no judge answering the
  case is an error whatever the rule.

Each judge's answer is its own scoring (its own cache entry: the key holds its model and
endpoint), made with everything else the call asked (``judge_samples``, ``swap``). The record's
``metadata["panel"]`` keeps, per judge, its name, model, score, choice, error, tokens, cost and
whether it came from the cache; a judge's key never appears there, and an endpoint's
credentials are masked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.errors import BudgetExceededError, JudgeError, ScorerConfigError
from pytest_llmeval.core.redaction import redact_text, redact_url
from pytest_llmeval.core.scores import Score, Usage, spent_usage
from pytest_llmeval.core.settings import Secret

if TYPE_CHECKING:
    from pytest_llmeval.engine.scoring import Scorer

__all__ = ["PANEL_ERRORS", "PANEL_KEYWORDS", "PANEL_REDUCERS", "Judge", "Panel", "panel_of"]

PANEL_REDUCERS = ("mean", "majority", "min")
PANEL_ERRORS = ("error", "survivors")
#: the call keywords of a panel
PANEL_KEYWORDS = frozenset({"judges", "panel_reduce", "panel_errors"})
#: judge options a panel member may set besides its model, endpoint and key
_MEMBER_OPTIONS = ("temperature", "seed", "timeout", "max_tries", "mode")


@final
@dataclass(frozen=True)
class Judge:
    """One judge of a panel: a ``model`` at ``base_url`` (None: the run's endpoint) with its
    own ``api_key`` (None: the run's key), optionally a display ``name`` and other judge
    options (``temperature``, ``seed``, ``timeout``, ``max_tries``, ``mode``). The key is kept
    as a :class:`Secret`: no repr, record or report shows it."""

    model: str
    base_url: str | None = None
    api_key: Secret | str | None = field(default=None, repr=False)
    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.api_key, str):
            object.__setattr__(self, "api_key", Secret(self.api_key))

    @property
    def label(self) -> str:
        """The judge's name in records and reports: ``name``, else the model at its endpoint's
        host (credentials masked)."""
        if self.name:
            return self.name
        if not self.base_url:
            return self.model
        from urllib.parse import urlsplit

        try:
            host = urlsplit(self.base_url).netloc.rpartition("@")[2]
        except ValueError:
            host = ""
        # (no host without a scheme: "user:pw@host/v1" is shown masked)
        return f"{self.model}@{host or redact_url(self.base_url)}"

    def __repr__(self) -> str:
        # the endpoint may hold credentials (user-info, a key in the query); the key is never shown
        url = None if self.base_url is None else redact_url(self.base_url)
        return (
            f"Judge(model={self.model!r}, base_url={url!r}, name={self.name!r}, "
            f"options={dict(self.options)!r})"
        )

    def call_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, **self.options}
        if self.base_url is not None:
            out["base_url"] = self.base_url
        if self.api_key is not None:
            out["api_key"] = self.api_key
        return out

    def describe(self) -> dict[str, Any]:
        """What an instrument and a record say of the judge (no key)."""
        out: dict[str, Any] = {"judge": self.label, "model": self.model}
        if self.base_url:
            out["base_url"] = redact_url(self.base_url)
        for k in sorted(self.options):
            out[k] = self.options[k]
        return out


def _member(scorer: str, i: int, item: Any) -> Judge:
    """A panel member from a :class:`Judge`, a model name, or a mapping of judge options."""
    if isinstance(item, Judge):
        judge = item
    elif isinstance(item, str) and item.strip():
        judge = Judge(item.strip())
    elif isinstance(item, Mapping):
        known = {"model", "base_url", "api_key", "name", *_MEMBER_OPTIONS}
        unknown = sorted(str(k) for k in item if k not in known)
        if unknown:
            raise ScorerConfigError(
                scorer,
                "judges",
                f"judge {i + 1} has an unknown option {unknown[0]!r}",
                hint=f"A judge takes {', '.join(sorted(known))}",
            )
        if not isinstance(item.get("model"), str) or not item["model"].strip():
            raise ScorerConfigError(
                scorer, "judges", f"judge {i + 1} has no model", hint="Give each judge a model="
            )
        judge = Judge(
            item["model"].strip(),
            base_url=item.get("base_url"),
            api_key=item.get("api_key"),
            name=item.get("name"),
            options={k: item[k] for k in _MEMBER_OPTIONS if item.get(k) is not None},
        )
    else:
        raise ScorerConfigError(
            scorer,
            "judges",
            f"judge {i + 1} is {type(item).__name__}, not a Judge, a model name or a mapping",
            hint='e.g. judges=["gpt-4o", Judge("local", base_url="http://127.0.0.1:8080/v1")]',
        )
    if not isinstance(judge.model, str) or not judge.model.strip():
        raise ScorerConfigError(scorer, "judges", f"judge {i + 1} has no model")
    if judge.base_url is not None and not isinstance(judge.base_url, str):
        raise ScorerConfigError(scorer, "judges", f"judge {i + 1}'s base_url is not a string")
    unknown = sorted(set(judge.options) - set(_MEMBER_OPTIONS))
    if unknown:
        raise ScorerConfigError(
            scorer,
            "judges",
            f"judge {i + 1} ({judge.label}) has an unknown option {unknown[0]!r}",
            hint=f"A judge's options: {', '.join(_MEMBER_OPTIONS)}",
        )
    return judge


@final
@dataclass(frozen=True)
class Panel:
    """The checked panel of a call (see the module docstring)."""

    scorer: str
    judges: tuple[Judge, ...]
    reduce: str = "mean"
    errors: str = "error"

    def describe(self) -> dict[str, Any]:
        """How the panel asked, for the instrument."""
        return {
            "panel": [j.describe() for j in self.judges],
            "panel_reduce": self.reduce,
            "panel_errors": self.errors,
        }

    def combine(self, inst: Scorer, answers: Sequence[Score | BaseException], t0: float) -> Score:
        """One score from the judges' answers (a :class:`Score` or the judge's error)."""
        failed = [
            (j, a) for j, a in zip(self.judges, answers, strict=True) if not isinstance(a, Score)
        ]
        scored = [(j, a) for j, a in zip(self.judges, answers, strict=True) if isinstance(a, Score)]
        if failed and (self.errors == "error" or not scored):
            raise self._failure(failed, [s for _, s in scored])
        values = [s.value for _, s in scored]
        if self.reduce == "mean":
            value = math.fsum(values) / len(values)
            chosen = min(range(len(values)), key=lambda i: abs(values[i] - value))
        else:
            order = sorted(
                range(len(values)), key=lambda i: values[i], reverse=inst.higher_is_better
            )
            chosen = order[len(values) // 2] if self.reduce == "majority" else order[-1]
            value = values[chosen]
        usage: Usage | None = None
        members = []
        for judge, answer in zip(self.judges, answers, strict=True):
            entry: dict[str, Any] = {"judge": judge.label, "model": judge.model}
            spent = answer.usage if isinstance(answer, Score) else None
            if isinstance(answer, Score):
                entry["score"] = answer.value
                entry["cached"] = answer.cached
                if "choice" in answer.metadata:
                    entry["choice"] = answer.metadata["choice"]
            else:
                entry["score"] = None
                entry["error"] = redact_text(f"{type(answer).__name__}: {answer}")
                spent = getattr(answer, "llm_eval_usage", None)
            if spent is not None:
                entry["prompt_tokens"] = spent.prompt_tokens
                entry["completion_tokens"] = spent.completion_tokens
                entry["judge_calls"] = spent.calls
                entry["cost_usd"] = spent.cost_usd
                if not (isinstance(answer, Score) and answer.cached):
                    usage = spent if usage is None else usage + spent
            members.append(entry)
        rep_judge, rep = scored[chosen]
        listed = ", ".join(f"{j.label} {s.value:.4g}" for j, s in scored)
        head = f"panel of {len(self.judges)} judges ({listed}), {self.reduce} {value:.4g}"
        if failed:
            head += (
                f"; {len(failed)} failed and not counted (panel_errors='survivors'): "
                + ", ".join(j.label for j, _ in failed)
            )
        rationale = f"{head}; {rep_judge.label}: {rep.rationale}" if rep.rationale else head
        metadata = {
            **rep.metadata,
            "panel": members,
            "panel_reduce": self.reduce,
            "panel_errors": self.errors,
        }
        if self.reduce == "mean" and len({s.metadata.get("choice") for _, s in scored}) > 1:
            # the mean of split judges is no one judge's choice (each judge's is in "panel")
            metadata.pop("choice", None)
        return Score(
            value=value,
            scorer=inst.name,
            rationale=rationale,
            metadata=metadata,
            usage=usage,
            cached=all(s.cached for _, s in scored) and not failed,
            duration_s=time.perf_counter() - t0,
        )

    def _failure(
        self, failed: Sequence[tuple[Judge, BaseException]], scored: Sequence[Score]
    ) -> JudgeError:
        answered = len(scored)
        causes = "; ".join(
            f"{j.label}: {redact_text(f'{type(e).__name__}: {e}')}" for j, e in failed
        )
        what = (
            "no judge of the panel answered"
            if not answered
            else f"{len(failed)} of the panel's {len(self.judges)} judges failed ({answered} "
            "answered, cached for the next run)"
        )
        hint = (
            ""
            if not answered
            else " (panel_errors='survivors' would reduce the judges that answered)"
        )
        err = JudgeError(f"judge panel for scorer {self.scorer!r}: {what}: {causes}{hint}")
        # what the failed judges paid, and the judges that answered (cached: not paid again)
        total = spent_usage(scored, (getattr(e, "llm_eval_usage", None) for _, e in failed))
        if total is not None:
            err.llm_eval_usage = total  # type: ignore[attr-defined]
        return err


def member_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one judge's failure (counted by the panel's rule) rather than the
    call's (a bad input, a spent budget: those stop the case at once)."""
    return isinstance(exc, JudgeError) and not isinstance(exc, BudgetExceededError)


def panel_of(scorer: str, scorer_cls: type[Scorer], kwargs: Mapping[str, Any]) -> Panel | None:
    """The checked panel of a call, or None without ``judges``. Raises
    :class:`ScorerConfigError` naming the scorer and the keyword for a bad one."""
    judges = kwargs.get("judges")
    how = kwargs.get("panel_reduce")
    errors = kwargs.get("panel_errors")
    if judges is None:
        for name, value in (("panel_reduce", how), ("panel_errors", errors)):
            if value is not None:
                raise ScorerConfigError(
                    scorer, name, "is given without judges", hint="Add judges=[...]"
                )
        return None
    if isinstance(judges, (str, Judge, Mapping)) or not isinstance(judges, Sequence):
        raise ScorerConfigError(
            scorer,
            "judges",
            f"is {type(judges).__name__}, not a list of judges",
            hint='e.g. judges=["gpt-4o", Judge("local", base_url="http://127.0.0.1:8080/v1")]',
        )
    if len(judges) < 2:
        raise ScorerConfigError(
            scorer,
            "judges",
            f"lists {len(judges)} judge(s); a panel needs two or more",
            hint="Give one judge with model= instead",
        )
    if not scorer_cls.uses_judge:
        raise ScorerConfigError(
            scorer,
            "judges",
            "asks a panel of judges, and this scorer computes its score without one",
            hint="Drop judges=",
        )
    for option in ("model", "base_url", "api_key"):
        if kwargs.get(option) is not None:
            raise ScorerConfigError(
                scorer,
                option,
                "is given with judges=, which names each judge's own",
                hint=f"Drop {option}= from the call (set it per judge)",
            )
    members = tuple(_member(scorer, i, j) for i, j in enumerate(judges))
    labels = [j.label for j in members]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise ScorerConfigError(
            scorer,
            "judges",
            f"names the judge {dup!r} twice",
            hint="Give each judge its own name= when two share a model and endpoint",
        )
    asks = [(j.model, j.base_url, sorted(j.options.items())) for j in members]
    same = next((i for i, x in enumerate(asks) if asks.index(x) != i), None)
    if same is not None:
        # (the cache key holds no name and no key: the second would read the first's answer)
        raise ScorerConfigError(
            scorer,
            "judges",
            f"asks {members[asks.index(asks[same])].label!r} and {members[same].label!r} the "
            "same question (one model, endpoint and options): the second would read the "
            "first's cached answer, one verdict counted twice",
            hint="Ask one judge several times with judge_samples=K, or give the two different "
            "options (e.g. temperature)",
        )
    if how is not None and how not in PANEL_REDUCERS:
        raise ScorerConfigError(
            scorer, "panel_reduce", f"is {how!r}", hint=f"Use one of {', '.join(PANEL_REDUCERS)}"
        )
    if errors is not None and errors not in PANEL_ERRORS:
        raise ScorerConfigError(
            scorer,
            "panel_errors",
            f"is {errors!r}",
            hint=f"Use one of {', '.join(PANEL_ERRORS)}",
        )
    return Panel(scorer, members, how or "mean", errors or "error")
