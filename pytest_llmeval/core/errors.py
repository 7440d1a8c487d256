"""The exceptions pytest-llmeval raises.

Every user-facing error names what went wrong, where, and what to do. ``ScorerInputError`` is a
bad input (a missing field, a value of the wrong type); ``JudgeError`` is a judge that could not
give a verdict (a test ERROR, never a score, never cached).

No message shows a secret: :class:`LLMEvalError` redacts its text where it is made
(:func:`pytest_llmeval.core.redaction.redact_text`), so the terminal, JUnit, the reports and the
saved runs that show it inherit that.
"""

from __future__ import annotations

from typing import Any

from pytest_llmeval.core.redaction import redact_text, redact_url

__all__ = [
    "BudgetExceededError",
    "CacheMissError",
    "CaseFixtureError",
    "CaseTimeoutError",
    "DatasetError",
    "GateError",
    "InvalidCacheEntryError",
    "JudgeError",
    "JudgeNotApplicableError",
    "JudgeSpecError",
    "LLMEvalError",
    "ReportFormatError",
    "ScorerConfigError",
    "ScorerInputError",
    "ScorerNotAvailableError",
    "UnknownScorerError",
]


class LLMEvalError(Exception):
    """Base class of every error pytest-llmeval raises on purpose.

    Its text arguments are redacted (URL credentials, keys; :mod:`pytest_llmeval.core.redaction`):
    messages quote endpoints, Redis URLs and error texts that servers sent back."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class Skipped(LLMEvalError):
    """A scorer asks for the test to be skipped, with its reason (``qa_correctness`` with
    ``not_applicable="skip"``). Scorers know nothing of pytest: the plugin turns this into the
    test's skip; outside pytest it is an error like any other. (Named like pytest's own skip
    exception so a record of it reads the same: ``Skipped: <reason>``.)"""


class ScorerInputError(LLMEvalError, ValueError):
    """An input given to a scorer is missing or unusable.

    ``scorer`` and ``field`` name the culprit; ``where`` is ``file:line`` for a dataset row
    when known.
    """

    def __init__(
        self,
        scorer: str,
        field: str,
        problem: str,
        *,
        hint: str | None = None,
        where: str | None = None,
    ) -> None:
        self.scorer = scorer
        self.field = field
        self.problem = problem
        self.hint = hint
        self.where = where
        super().__init__(self._message())

    def _message(self) -> str:
        msg = f"scorer {self.scorer!r}: input {self.field!r} {self.problem}"
        if self.where:
            msg = f"{self.where}: {msg}"
        if self.hint:
            msg += f". {self.hint}"
        return msg

    def at(self, where: str) -> ScorerInputError:
        """Return a copy of this error located at ``where`` (``file:line``)."""
        return ScorerInputError(self.scorer, self.field, self.problem, hint=self.hint, where=where)


class ScorerConfigError(LLMEvalError, ValueError):
    """A scorer option is unknown or invalid (a bad schema, a bad model name...)."""

    def __init__(self, scorer: str, option: str, problem: str, *, hint: str | None = None) -> None:
        self.scorer = scorer
        self.option = option
        msg = f"scorer {scorer!r}: option {option!r} {problem}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class UnknownScorerError(LLMEvalError, LookupError):
    """No scorer is registered under a name; the message lists close matches."""

    def __init__(self, name: str, close: list[str]) -> None:
        self.name = name
        self.close = close
        msg = f"unknown scorer {name!r}"
        if close:
            msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
        msg += (
            " Register custom scorers with @pytest_llmeval.scorer or the "
            "pytest_llmeval_register_scorers hook."
        )
        super().__init__(msg)


class ScorerNotAvailableError(LLMEvalError, RuntimeError):
    """A scorer needs something that is not installed or not enabled (an extra, an opt-in)."""


class JudgeError(LLMEvalError, RuntimeError):
    """A judge (LLM endpoint) failed to produce a usable verdict.

    Raised after retries are exhausted, on an invalid structured reply after the re-ask, on a reply
    missing required data (e.g. logprobs), or on an "invalid" categorical verdict. Never cached.
    """

    def __init__(
        self,
        message: str,
        *,
        scorer: str | None = None,
        endpoint: str | None = None,
        model: str | None = None,
        cause: str | None = None,
    ) -> None:
        self.scorer = scorer
        # The endpoint and the cause as they may be shown (their secrets masked): both end up in
        # records, reports and the terminal.
        self.endpoint = None if endpoint is None else redact_url(endpoint)
        self.model = model
        self.cause = None if cause is None else redact_text(cause)
        parts = []
        if scorer:
            parts.append(f"scorer {scorer!r}")
        if model:
            parts.append(f"model {model!r}")
        if self.endpoint:
            parts.append(f"endpoint {self.endpoint}")
        prefix = f"judge error ({', '.join(parts)}): " if parts else "judge error: "
        text = prefix + message
        if self.cause:
            text += f" (last cause: {self.cause})"
        super().__init__(text)


class JudgeNotApplicableError(JudgeError):
    """The judge answered that the case cannot be graded (``qa_correctness``: the question is
    not about the context). An explicit verdict, not a malformed reply, and not a score: the
    test is an ERROR (never cached) with the judge's reasons in ``reasons``."""

    def __init__(
        self,
        message: str,
        *,
        reasons: str | None = None,
        scorer: str | None = None,
        model: str | None = None,
    ) -> None:
        self.reasons = reasons
        super().__init__(message, scorer=scorer, model=model)


class JudgeSpecError(LLMEvalError, ValueError):
    """A judge you define (a spec file, ``llm_classifier``, ``g_eval``) is invalid: raised when it
    is loaded, naming the file (``where``), the judge and the field."""

    def __init__(
        self,
        where: str,
        field: str,
        problem: str,
        *,
        judge: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.where = where
        self.field = field
        self.judge = judge
        self.problem = problem
        who = f"judge {judge!r}: " if judge else ""
        msg = f"{where}: {who}field {field!r} {problem}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class BudgetExceededError(JudgeError):
    """The run's ``--llm-eval-budget`` is spent; no new judge call was started."""


class CacheMissError(LLMEvalError, LookupError):
    """``--llm-eval-cache=replay`` found no stored result for a scoring.

    ``case`` names the test case (``faq.jsonl:3``) and ``reason`` says why the key is missing
    when the store can tell (e.g. the judge model differs from the one recorded)."""

    def __init__(
        self, scorer: str, key: str, *, case: str | None = None, reason: str | None = None
    ) -> None:
        self.scorer = scorer
        self.key = key
        self.case = case
        self.reason = reason
        where = f" (case {case})" if case else ""
        why = f": {reason}" if reason else ""
        super().__init__(
            f"scorer {scorer!r}: no cached result{where}{why}. --llm-eval-cache=replay forbids "
            f"computing it (key {key[:16]}...). "
            + ("Run with the settings it was recorded with, or record" if reason else "Record")
            + " it first by running once with --llm-eval-cache=use (the default) or "
            "--llm-eval-cache=refresh, with the judge reachable, and commit or restore the cache "
            "directory (.llmeval/ by default)."
        )


class InvalidCacheEntryError(CacheMissError):
    """``--llm-eval-cache=replay`` found a stored result that cannot be used (``problem``: not
    a score, outside the scorer's range, damaged, bound to another key, badly signed). Replay
    has no judge to fall back on, so it is an error, saying how to record the result again."""

    def __init__(self, scorer: str, key: str, problem: str, *, case: str | None = None) -> None:
        self.scorer = scorer
        self.key = key
        self.case = case
        self.reason = self.problem = problem
        where = f" (case {case})" if case else ""
        LLMEvalError.__init__(
            self,
            f"scorer {scorer!r}: the cached result (key {key[:16]}...) cannot be used: "
            f"{problem}{where}. --llm-eval-cache=replay forbids computing it. Record it again: "
            "run once with --llm-eval-cache=refresh (or =use) with the judge reachable, which "
            "stores the result over the invalid entry, and commit or restore the cache directory "
            "(.llmeval/ by default); if the entry came from a shared Redis store, find out who "
            "wrote it (see the trust model in docs/guides/caching.md).",
        )


class DatasetError(LLMEvalError, ValueError):
    """A dataset file is missing, malformed, empty, or has duplicate ids."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        super().__init__(f"{where}: {problem}")


class BaselineError(LLMEvalError, ValueError):
    """A ``--llm-eval-baseline`` value that names no saved run or file."""


class ReportFormatError(LLMEvalError, ValueError):
    """A saved run (JSON report) cannot be rendered: unreadable, not JSON, or not a report."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        super().__init__(f"{where}: {problem}")


def describe_value(value: Any) -> str:
    """A short description of a value for error messages (type and a truncated repr)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


class GateError(LLMEvalError, ValueError):
    """A suite gate (``@pytest.mark.llm_eval_gate`` or ``--llm-eval-gate``) is unusable: an
    unknown scorer, a bound outside the scorer's range, a bad keyword or value. ``source`` says
    where the gate was declared."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class CaseFixtureError(LLMEvalError, RuntimeError):
    """A concurrent case set up a fixture that cannot serve cases in flight at once (e.g.
    ``monkeypatch`` requested with ``request.getfixturevalue``): the case is an ERROR, its body
    not run."""

    scorer = "(case fixture)"


class CaseTimeoutError(LLMEvalError, TimeoutError):
    """An async dataset case (or one of its async fixtures) ran longer than
    ``--llm-eval-case-timeout``: it was cancelled and is that case's ERROR (the other cases go
    on)."""

    #: the llm-eval summary's row for these errors (they belong to no scorer)
    scorer = "(case timeout)"

    def __init__(self, nodeid: str, timeout: float, *, what: str = "case") -> None:
        self.nodeid = nodeid
        self.timeout = timeout
        limit = f"--llm-eval-case-timeout={timeout:g}s"
        if what == "stuck":
            text = (
                f"{nodeid}: the case did not finish within {limit} and went on after being "
                "cancelled (its code catches asyncio.CancelledError and carries on); it was left "
                "running and its fixtures were torn down. Let CancelledError propagate (re-raise "
                "it after cleaning up)"
            )
        elif what == "fixture":
            text = (
                f"{nodeid} did not finish within {limit} and was cancelled; raise the timeout or "
                "find what it waits for (the other cases ran on)"
            )
        else:
            text = (
                f"{nodeid}: the case did not finish within {limit} and was cancelled; raise the "
                "timeout or find what it waits for (the other cases ran on)"
            )
        super().__init__(text)
