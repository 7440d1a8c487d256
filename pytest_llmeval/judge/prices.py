"""What judge calls cost: a per-model price table in USD per million tokens (input, output and,
for models with prompt caching, cached input).

The built-in table holds OpenAI's published list prices for common models at the time of writing;
prices change, so a run can override or extend it (``llm_eval_prices`` in ini, or
``Settings.prices``): ``{"my-local-model": (0.0, 0.0)}``. A model found in neither gives a cost of
``None`` (tokens are still counted), never a guess.

Cached prompt tokens (``usage.prompt_tokens_details.cached_tokens``, a part of ``prompt_tokens``)
are priced at the model's cached-input rate, the optional third number of a price; a price without
one prices them as ordinary input (no discount assumed: an overestimate, never an underestimate).

The built-in table describes OpenAI's own API only: a local or third-party server that happens
to be asked for "gpt-4o-mini" (the default model name) does not charge OpenAI's prices, so the
judge client prices such endpoints from the run's own table alone (``builtin=False``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DEFAULT_PRICES", "Price", "cost_usd", "price_of"]

#: (USD per 1M input tokens, USD per 1M output tokens[, USD per 1M cached input tokens]).
Price = tuple[float, ...]

#: model -> (input, output[, cached input]) USD per 1M tokens. A model without prompt caching (or
#: without a listed cached rate) has no third number: its cached tokens cost the input price.
DEFAULT_PRICES: Mapping[str, Price] = {
    "gpt-5": (1.25, 10.00, 0.125),
    "gpt-5-mini": (0.25, 2.00, 0.025),
    "gpt-5-nano": (0.05, 0.40, 0.005),
    "gpt-4.1": (2.00, 8.00, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.025),
    "gpt-4o": (2.50, 10.00, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00, 7.50),
    "o1-mini": (1.10, 4.40, 0.55),
    "o3": (2.00, 8.00, 0.50),
    "o3-mini": (1.10, 4.40, 0.55),
    "o4-mini": (1.10, 4.40, 0.275),
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
    overrides: Mapping[str, Price] | None = None,
    *,
    builtin: bool = True,
) -> tuple[float, float, float] | None:
    """The (input, output, cached input) USD-per-million-token price of ``model``, or None when
    unknown. A price without a cached-input rate gives the input rate for it.

    Overrides win over the built-in table (not consulted with ``builtin=False``); a dated
    snapshot name falls back to its base model.
    """
    tables: list[Mapping[str, Price]] = [overrides or {}]
    if builtin:
        tables.append(DEFAULT_PRICES)
    for table in tables:
        if model in table:
            price = table[model]
            p_in, p_out = float(price[0]), float(price[1])
            return p_in, p_out, float(price[2]) if len(price) > 2 else p_in
    m = _SNAPSHOT.match(model)
    if m is not None:
        return price_of(m.group("base"), overrides, builtin=builtin)
    return None


def cost_usd(
    models: tuple[str | None, ...],
    prompt_tokens: int,
    completion_tokens: int,
    overrides: Mapping[str, Price] | None = None,
    *,
    builtin: bool = True,
    cached_prompt_tokens: int = 0,
) -> float | None:
    """The cost of one call, priced as the first of ``models`` that has a price (None if none).

    ``cached_prompt_tokens`` are the part of ``prompt_tokens`` the endpoint served from its
    prompt cache, priced at the cached-input rate. Token counts must be valid (non-negative,
    cached no more than prompt); the judge client checks them before pricing."""
    if prompt_tokens < 0 or completion_tokens < 0:
        return None
    if not 0 <= cached_prompt_tokens <= prompt_tokens:
        return None
    for model in models:
        if not model:
            continue
        price = price_of(model, overrides, builtin=builtin)
        if price is not None:
            p_in, p_out, p_cached = price
            uncached = prompt_tokens - cached_prompt_tokens
            return (
                uncached * p_in + cached_prompt_tokens * p_cached + completion_tokens * p_out
            ) / 1_000_000
    return None
