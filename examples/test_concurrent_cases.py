"""Concurrent dataset cases: an async test's cases run at once (here 4 at a time) in one process.

The "app" is a fake async client whose answers take a moment, as a model call would. Each case
is still its own pytest test (own result, output, fixture), and `assert_score_async` records
like `assert_score`. Run with `pytest examples --llm-eval`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pytest_llmeval import assert_score_async

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Kenya": "Nairobi",
    "Peru": "Lima",
    "Canada": "Ottawa",
    "Egypt": "Cairo",
    "Norway": "Oslo",
    "Chile": "Santiago",
}


class FakeAsyncApp:
    """Stands in for an LLM application client: async, slow-ish, deterministic."""

    def __init__(self) -> None:
        self.closed = False

    async def acomplete(self, question: str) -> str:
        await asyncio.sleep(0.05)  # the "model call"
        country = question.rstrip("?").rsplit(" ", 1)[-1]
        return CAPITALS.get(country, "I don't know")

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
async def app() -> AsyncIterator[FakeAsyncApp]:
    """One client per case, set up and closed on the loop the case runs on."""
    client = FakeAsyncApp()
    yield client
    await client.aclose()


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/capitals.jsonl", concurrency=4)
async def test_capitals(case, app):  # type: ignore[no-untyped-def]
    answer = await app.acomplete(case.input)
    await assert_score_async("exact_match", output=answer, expected=case.expected, min=1)
    await assert_score_async("levenshtein", output=answer, expected=case.expected, min=0.9)
