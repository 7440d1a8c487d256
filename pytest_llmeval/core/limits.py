"""The run's rate limits as settings: requests and tokens per minute and the burst they allow
(``--llm-eval-rpm``, ``--llm-eval-tpm``, ``--llm-eval-rate-burst``). The buckets that enforce
them live with the stores (:mod:`pytest_llmeval.stores.ratelimit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import final

#: The largest token debt, in seconds of the token rate: a reply far larger than its estimate
#: makes later requests wait at most this long. A stored state beyond it is broken (reset).
MAX_DEBT_S = 3600.0


def _named(option: str, problem: str) -> str:
    return f"{option}: {problem}" if option else problem


def parse_rate(text: str, option: str = "") -> int:
    """A per-minute rate: a positive whole number; a clear error (naming ``option``, when
    given) otherwise."""
    value = text.strip().removeprefix("+")
    if not (value.isascii() and value.isdigit()) or int(value) <= 0:
        raise ValueError(
            _named(
                option,
                f"{text!r} is not a positive whole number per minute "
                "(e.g. 500; leave it unset for no limit)",
            )
        )
    return int(value)


def parse_burst(text: str, option: str = "") -> float:
    """The burst in seconds: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            _named(
                option,
                f"{text!r} is not a positive number of seconds (the bucket holds this "
                "many seconds of the rate; default 1)",
            )
        )
    return value


@final
@dataclass(frozen=True)
class RateLimits:
    """Requests and tokens per minute (None: not limited) and the burst in seconds."""

    rpm: int | None = None
    tpm: int | None = None
    burst_s: float = 1.0

    def __post_init__(self) -> None:
        for name, value in (("rpm", self.rpm), ("tpm", self.tpm)):
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ValueError(f"--llm-eval-{name} must be a positive whole number, not {value}")
        if not (math.isfinite(self.burst_s) and self.burst_s > 0):
            raise ValueError(f"--llm-eval-rate-burst must be > 0 seconds, not {self.burst_s}")

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    @property
    def request_rate(self) -> float:
        """Requests per second (0: not limited)."""
        return self.rpm / 60.0 if self.rpm else 0.0

    @property
    def token_rate(self) -> float:
        """Tokens per second (0: not limited)."""
        return self.tpm / 60.0 if self.tpm else 0.0

    @property
    def request_capacity(self) -> float:
        return max(1.0, self.request_rate * self.burst_s)

    @property
    def token_capacity(self) -> float:
        return max(1.0, self.token_rate * self.burst_s)

    def describe(self) -> str:
        parts = []
        if self.rpm:
            parts.append(f"{self.rpm} rpm (burst {self.request_capacity:g})")
        if self.tpm:
            parts.append(f"{self.tpm} tpm (burst {self.token_capacity:g})")
        return ", ".join(parts) or "no limit"

    @property
    def token_debt(self) -> float:
        """The largest token debt (:data:`MAX_DEBT_S` of the token rate; a token bucket that is
        not limited keeps its capacity and never owes)."""
        return max(MAX_DEBT_S * self.token_rate, self.token_capacity)

    @property
    def longest_wait(self) -> float:
        """More than any wait a sound bucket answers (one request at the request rate after the
        largest debt): a longer one means a broken bucket."""
        return MAX_DEBT_S + (60.0 / self.rpm if self.rpm else 0.0) + self.burst_s + 1.0

    def state_problem(self, last: float, requests: float, tokens: float, now: float) -> str | None:
        """What makes a stored bucket state impossible for these limits (None: sound): values
        not finite, a count outside [0, capacity] or a token debt beyond
        :attr:`token_debt`, an update time after ``now``."""
        slack = 1e-6
        if not (math.isfinite(last) and 0 <= last <= now + 1.0):
            return f"last update {last!r}"
        if not (math.isfinite(requests) and -slack <= requests <= self.request_capacity + slack):
            return f"requests {requests!r} (capacity {self.request_capacity:g})"
        if not (
            math.isfinite(tokens)
            and -self.token_debt * (1 + slack) - slack
            <= tokens
            <= self.token_capacity * (1 + slack) + slack
        ):
            return (
                f"tokens {tokens!r} (capacity {self.token_capacity:g}, largest debt "
                f"{self.token_debt:g})"
            )
        return None

    def args(self) -> tuple[float, float, float, float]:
        """(request rate, request capacity, token rate, token capacity), rates per second."""
        return (
            self.request_rate,
            self.request_capacity,
            self.token_rate,
            self.token_capacity,
        )
