"""Importing the package and loading the plugin must not import heavy dependencies."""

from __future__ import annotations

HEAVY = ("openai", "torch", "transformers", "bert_score", "scipy", "numpy", "rapidfuzz", "redis")
