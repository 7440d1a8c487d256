"""What judge calls cost: a per-model price table in USD per million tokens (input, output).

The built-in table holds OpenAI's published list prices for common models at the time of writing;
prices change, so a run can override or extend it (``llm_eval_prices`` in ini, or
``Settings.prices``): ``{"my-local-model": (0.0, 0.0)}``. A model found in neither gives a cost of
``None`` (tokens are still counted), never a guess.

The built-in table describes OpenAI's own API only: a local or third-party server that happens
to be asked for "gpt-4o-mini" (the default model name) does not charge OpenAI's prices, so the
judge client prices such endpoints from the run's own table alone (``builtin=False``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DEFAULT_PRICES", "cost_usd", "price_of"]

#: model -> (USD per 1M input tokens, USD per 1M output tokens).
DEFAULT_PRICES: Mapping[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
    "omni-moderation-latest": (0.0, 0.0),
    "text-moderation-latest": (0.0, 0.0),
}

# A dated snapshot of a listed model costs the same: "gpt-4o-mini-2024-07-18", "gpt-4-0613".
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_of(
    model: str,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    *,
    builtin: bool = True,
) -> tuple[float, float] | None:
    """The (input, output) USD-per-million-token price of ``model``, or None when unknown.

    Overrides win over the built-in table (not consulted with ``builtin=False``); a dated
    snapshot name falls back to its base model.
    """
    tables: list[Mapping[str, tuple[float, float]]] = [overrides or {}]
    if builtin:
        tables.append(DEFAULT_PRICES)
    for table in tables:
        if model in table:
            p_in, p_out = table[model]
            return float(p_in), float(p_out)
    m = _SNAPSHOT.match(model)
    if m is not None:
        return price_of(m.group("base"), overrides, builtin=builtin)
    return None


def cost_usd(
    models: tuple[str | None, ...],
    prompt_tokens: int,
    completion_tokens: int,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    *,
    builtin: bool = True,
) -> float | None:
    """The cost of one call, priced as the first of ``models`` that has a price (None if none).

    Token counts must be valid (non-negative); the judge client checks them before pricing."""
    if prompt_tokens < 0 or completion_tokens < 0:
        return None
    for model in models:
        if not model:
            continue
        price = price_of(model, overrides, builtin=builtin)
        if price is not None:
            return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
    return None
