"""Run settings: the judge endpoint, the cache, the budget and opt-ins.

Settings are frozen values. The pytest plugin builds them from CLI options, ini values and the
environment; outside pytest :func:`pytest_llmeval.configure` or the environment provides them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from pytest_llmeval.core.limits import RateLimits
from pytest_llmeval.core.options import (
    CACHE_MODES,
    JUDGE_MODES,
    JUDGE_PROVIDERS,
    OPTION,
    resolve,
)
from pytest_llmeval.core.redaction import redact_url, remember_secret

__all__ = ["CACHE_MODES", "JUDGE_MODES", "JUDGE_PROVIDERS", "JudgeSettings", "Secret", "Settings"]


@final
class Secret:
    """A string that never shows itself in a repr, str, log or report.

    Its value is also remembered for :func:`pytest_llmeval.core.redaction.redact_text`, so an error
    text that quotes it (an endpoint echoing the key back) shows ``***`` instead."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        remember_secret(value)

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


@final
@dataclass(frozen=True, repr=False)
class JudgeSettings:
    """How to reach and drive the judge (an OpenAI-compatible endpoint).

    ``base_url`` is the URL as given (the client needs it whole); its repr, and every message
    or report, show it redacted (:func:`pytest_llmeval.core.redaction.redact_url`)."""

    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: Secret | None = field(default=None, repr=False)
    temperature: float = 0.0
    seed: int | None = 0
    timeout: float = 60.0
    """Seconds one judge request may take, from sending it to the last byte of the reply."""
    max_tries: int = 4
    overall_timeout: float = 120.0
    """Seconds of judge time one scoring may take in all (every call, retry and wait between
    tries; not the wait for a free concurrency slot or for the rate limit), whatever the server does
    (``--llm-eval-scoring-timeout``). Outside a scoring it bounds one call with its retries."""
    concurrency: int | None = None
    """Judge requests in flight at once per process; None (the default) follows demand: 8, or
    the most cases a concurrent test or a batch runs at once (:mod:`pytest_llmeval.core.slots`)."""
    retry_backoff: float = 0.5
    """First retry delay in seconds (doubled per try, with jitter) when no Retry-After is given."""
    mode: str = "tool"
    embedding_model: str = "text-embedding-3-small"
    max_reply_chars: int = 200_000
    """Longest judge reply accepted (characters of the message text or tool arguments); a longer
    one is a judge error and is neither cached nor reported (``--llm-eval-max-reply-chars``)."""
    provider: str = "openai"
    """``openai`` or ``azure`` (see :data:`JUDGE_PROVIDERS`). With ``azure``, ``base_url`` is the
    Azure resource endpoint (default env ``AZURE_OPENAI_ENDPOINT``), the key comes from
    ``AZURE_OPENAI_API_KEY`` and ``model`` names the deployment."""
    api_version: str | None = None
    """Azure OpenAI's ``api-version`` query parameter (default env ``OPENAI_API_VERSION``)."""

    def __post_init__(self) -> None:
        if self.provider not in JUDGE_PROVIDERS:
            # An unknown provider must not quietly become "openai" (and send the key there).
            raise ValueError(
                f"judge provider {self.provider!r} is not one of {', '.join(JUDGE_PROVIDERS)} "
                "(LLM_EVAL_JUDGE_PROVIDER / --llm-eval-judge-provider)"
            )

    def __repr__(self) -> str:
        # The dataclass repr with the base URL's credentials masked (the key is not shown).
        shown = []
        for f in dataclasses.fields(self):
            if not f.repr:
                continue
            value = getattr(self, f.name)
            if f.name == "base_url" and isinstance(value, str):
                value = redact_url(value)
            shown.append(f"{f.name}={value!r}")
        return f"JudgeSettings({', '.join(shown)})"

    @property
    def shown_base_url(self) -> str | None:
        """``base_url`` as it may be shown or stored: its secrets masked."""
        return None if self.base_url is None else redact_url(self.base_url)

    def identity(self) -> dict[str, Any]:
        """What decides a judge's verdict (cache-key material): model and sampling parameters.

        The endpoint URL and the key are left out: the same model behind another URL (a proxy, a
        recorded replay) must hit the same cache entries, and a key is a secret.
        """
        return {
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "mode": self.mode,
        }

    def with_overrides(self, overrides: Mapping[str, Any]) -> JudgeSettings:
        """Apply per-scorer or per-call judge options (``None`` means: keep the run's value)."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            if key == "api_key":
                changes["api_key"] = value if isinstance(value, Secret) else Secret(str(value))
            elif key in {f.name for f in dataclasses.fields(self)}:
                changes[key] = value
        return dataclasses.replace(self, **changes) if changes else self


@final
@dataclass(frozen=True)
class Settings:
    """Everything a run of scorers needs to know."""

    judge: JudgeSettings = field(default_factory=JudgeSettings)
    cache_dir: Path = Path(".llmeval")
    cache_mode: str = "use"
    budget_usd: float | None = None
    prices: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Per-model (input, output[, cached input]) USD per million tokens, overriding the built-in
    table; without a cached-input price, cached prompt tokens cost the input price."""
    embedding_model: str | None = None
    """Local embedding model: a hub id or a directory (for embedding/BERTScore scorers)."""
    sandbox_enabled: bool = False
    """Opt-in for ``python_unit_testing``, which runs model-written code."""
    record_chars: int = 4000
    """Characters of each scorer input a score record keeps (``--llm-eval-record-chars``; 0 keeps
    no inputs). Longer inputs are cut, and the cut is marked."""
    sandbox_allow_weak: bool = False
    """Second opt-in: let ``python_unit_testing`` run code in the weak audit-hook fallback where
    namespaces are unavailable (it refuses otherwise; see docs/sandbox.md)."""
    rate_limits: RateLimits = field(default_factory=RateLimits)
    """Judge requests and tokens per minute for the whole run (``--llm-eval-rpm``,
    ``--llm-eval-tpm``, ``--llm-eval-rate-burst``; see :mod:`pytest_llmeval.stores.ratelimit`)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from the environment twins of the options (outside pytest); a bad value is
        a ValueError naming the variable (:class:`pytest_llmeval.core.options.OptionError`)."""
        env = os.environ if environ is None else environ

        def get(name: str, azure: bool = False) -> Any:
            return resolve(OPTION[name], environ=env, azure=azure).value

        provider = get("llm_eval_judge_provider")
        azure = provider == "azure"
        key = get("openai_api_key", azure)
        judge = JudgeSettings(
            base_url=get("llm_eval_judge_base_url", azure),
            model=get("llm_eval_judge_model"),
            api_key=Secret(key) if key else None,
            provider=provider,
            api_version=get("openai_api_version") if azure else None,
        )
        base = cls(
            judge=judge,
            cache_dir=Path(get("llm_eval_cache_dir")),
            sandbox_enabled=get("llm_eval_allow_code_execution"),
            sandbox_allow_weak=get("llm_eval_allow_weak_sandbox"),
            rate_limits=rate_limits_from_env(env),
        )
        return dataclasses.replace(base, **overrides) if overrides else base


def rate_limits_from_env(env: Mapping[str, str]) -> RateLimits:
    """``LLM_EVAL_RPM``, ``LLM_EVAL_TPM`` and ``LLM_EVAL_RATE_BURST``; a bad value is a
    ValueError naming the variable."""
    return RateLimits(
        rpm=resolve(OPTION["llm_eval_rpm"], environ=env).value,
        tpm=resolve(OPTION["llm_eval_tpm"], environ=env).value,
        burst_s=resolve(OPTION["llm_eval_rate_burst"], environ=env).value,
    )
