"""Importing the package and loading the plugin must not import heavy dependencies."""

from __future__ import annotations

#: opentelemetry and the Agents SDK (agents) load only when a test asks for llm_eval_trace
HEAVY = (
    "openai",
    "torch",
    "transformers",
    "bert_score",
    "scipy",
    "numpy",
    "rapidfuzz",
    "redis",
    "opentelemetry",
    "agents",
)
