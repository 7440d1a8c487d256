"""Which request parameters a judge model accepts, so the judge sends only those.

OpenAI's reasoning models (the o-series and the GPT-5 family, except the ``gpt-5-chat`` models)
answer 400 to ``temperature: 0``, to ``logprobs`` and to ``max_tokens`` (they want
``max_completion_tokens``). The judge would send all three on every call, so a user who picked
such a model got an ERROR on every judge test. Two layers decide what is sent:

* a static table of model families (:func:`unsupported_by_family`), known before any call, so
  the cache key can record what is actually sent from the first scoring on;
* what the run has learned (:func:`learn`): when a server still answers 400 naming an
  unsupported parameter, the client retries once without it and remembers that for the model
  for the rest of the process (one warning says so).

The learned set is per process (each xdist worker learns for itself, at the cost of one
rejected request). :func:`generation` changes whenever something is learned, so identities
memoised before (cache keys) are recomputed with what is now sent.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "DROPPABLE",
    "REQUIRED_FOR",
    "apply",
    "generation",
    "learn",
    "learned",
    "sent_identity",
    "unsupported",
    "unsupported_by_family",
]

#: Optional request parameters the judge may leave out when a model refuses them. Anything else
#: (messages, tools, response_format, the model) is never dropped: without it the call means
#: something else.
DROPPABLE = frozenset(
    {
        "temperature",
        "seed",
        "logprobs",
        "top_logprobs",
        "max_tokens",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
    }
)

#: What to send instead of a dropped parameter (same value).
RENAMED = {"max_tokens": "max_completion_tokens"}

#: Parameters a call cannot do without: asked for logprobs, a reply without them is useless.
REQUIRED_FOR = {"logprobs": ("logprobs", "top_logprobs")}

# o1, o1-mini, o3-mini, o4-mini, gpt-5, gpt-5-mini, gpt-5.1, ... (optionally behind a
# "provider/" prefix as routers spell them); gpt-5-chat-* is a chat model and samples normally.
_REASONING = re.compile(r"^(?:[\w.-]+/)?(?:o\d+(?:-[\w.-]+)?|gpt-5(?![-.]?chat)(?:[-.][\w.-]*)?)$")
_REASONING_UNSUPPORTED = frozenset(
    {
        "temperature",
        "top_p",
        "logprobs",
        "top_logprobs",
        "max_tokens",
        "frequency_penalty",
        "presence_penalty",
    }
)

_lock = threading.Lock()
_learned: dict[str, frozenset[str]] = {}
_warned: set[tuple[str, str]] = set()
_generation = 0


def unsupported_by_family(model: str) -> frozenset[str]:
    """Parameters ``model``'s family is known to refuse (empty for models that take them all)."""
    if _REASONING.match(model.strip().lower()):
        return _REASONING_UNSUPPORTED
    return frozenset()


def learned(model: str) -> frozenset[str]:
    """Parameters a server refused for ``model`` earlier in this process."""
    with _lock:
        return _learned.get(model, frozenset())


def unsupported(model: str) -> frozenset[str]:
    """Everything not to send to ``model``: its family's refusals and the learned ones."""
    return unsupported_by_family(model) | learned(model)


def generation() -> int:
    """A number that changes whenever a parameter is learned (memoised cache keys compare it)."""
    return _generation


def learn(model: str, param: str, *, endpoint: str, reason: str) -> bool:
    """Remember that ``model`` refuses ``param``; warn once per (model, parameter). False when it
    was known already."""
    global _generation
    with _lock:
        known = _learned.get(model, frozenset())
        if param in known:
            return False
        _learned[model] = known | {param}
        _generation += 1
        first = (model, param) not in _warned
        _warned.add((model, param))
    if first:
        instead = f" (sending {RENAMED[param]!r} instead)" if param in RENAMED else ""
        warnings.warn(
            f"llm-eval: the judge endpoint {endpoint} refused {param!r} for model {model!r} "
            f"({reason}); the judge retried without it{instead} and leaves it out for this "
            "model for the rest of the run",
            RuntimeWarning,
            stacklevel=2,
        )
    return True


def forget_learned() -> None:
    """Clear what was learned (tests)."""
    global _generation
    with _lock:
        _learned.clear()
        _warned.clear()
        _generation += 1


def apply(body: dict[str, Any], drop: Iterable[str]) -> dict[str, Any]:
    """``body`` without the parameters in ``drop`` (a renamed one keeps its value under its new
    name, e.g. ``max_tokens`` -> ``max_completion_tokens``)."""
    out = dict(body)
    for param in drop:
        if param in out and param in DROPPABLE:
            value = out.pop(param)
            if param in RENAMED and RENAMED[param] not in out:
                out[RENAMED[param]] = value
    return out


def sent_identity(identity: Mapping[str, Any]) -> dict[str, Any]:
    """A judge identity (model, temperature, seed, mode) as it is sent: parameters the model
    does not take are removed. Unchanged (equal dict) for models that take them all, so their
    cache keys stay as they were."""
    out = dict(identity)
    model = out.get("model")
    if isinstance(model, str):
        for param in unsupported(model):
            out.pop(param, None)
    return out


#: Options every judge-backed scorer accepts, overriding the run's judge settings for one scorer or
#: one call. ``api_key`` never enters a cache key, a record or a repr.
JUDGE_OPTIONS: Mapping[str, Any] = {
    "model": None,
    "base_url": None,
    "api_key": None,
    "temperature": None,
    "seed": None,
    "timeout": None,
    "max_tries": None,
    "mode": None,
}
