"""The LLM judge: an OpenAI-compatible client with a concurrency limit, retries, validated
structured replies, usage and cost accounting (:mod:`pytest_llmeval.judge.client`), a price
table (:mod:`pytest_llmeval.judge.prices`), the delimiting of judge prompts
(:mod:`pytest_llmeval.judge.prompt`) and the judge step every judge scorer is built on
(:mod:`pytest_llmeval.judge.step`, a public API).

Importing this package does not import ``openai``; the SDK loads on the first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_llmeval.judge.params import JUDGE_OPTIONS

if TYPE_CHECKING:
    from pytest_llmeval.judge.host import JudgedScorer, JudgeHost

__all__ = ["judge_identity", "judge_options_of"]


def judge_options_of(scorer: JudgedScorer) -> dict[str, Any]:
    """The judge options (model, base_url, api_key, ...) a scorer instance was given, for
    ``ctx.judge(...)``; unset ones are left out so the run's settings apply."""
    return {k: scorer.options[k] for k in JUDGE_OPTIONS if scorer.options.get(k) is not None}


def judge_identity(
    scorer: JudgedScorer, ctx: JudgeHost, prompt_sha256: str, **sent: Any
) -> dict[str, Any]:
    """A judge scorer's cache-key material: its prompt's hash and the judge it would ask (model,
    endpoint, sampling; ``sent`` overrides what the scorer always sends, e.g. temperature 0).

    Parameters the model does not take (known for its family, or refused earlier in the run)
    are left out: the key records what is actually sent."""
    from pytest_llmeval.judge import params

    judge = ctx.judge_settings(judge_options_of(scorer)).identity()
    judge.update(sent)
    return {"prompt_sha256": prompt_sha256, "judge": params.sent_identity(judge)}
