"""One rate limit for the run and the fleet (--llm-eval-rpm, --llm-eval-tpm): the bucket's
arithmetic, four xdist workers against the test server, two "machines" sharing a real
redis-server, tokens reserved and settled, Redis failing mid-run, and bad values."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmeval.stores.spend import shared_spend_supported
from pytest_llmeval.testing import OpenAITestServer, text

posix_only = pytest.mark.skipif(not shared_spend_supported(), reason="needs fcntl (POSIX)")


YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(100, 1))


TESTS = """
import os
import pytest
from pytest_llmeval import assert_score

WHO = os.environ.get("PYTEST_XDIST_WORKER", "main") + "@" + os.environ.get("MACHINE", "-")

@pytest.mark.parametrize("i", range({n}))
def test_judged(i):
    assert_score("l3score", input=f"{{WHO}} q{{i}}?", expected=f"a{{i}}", output=f"a{{i}}", min=0.5)
"""


INI = "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\nllm_eval_cache = off\n"


#: who sent a request: "<xdist worker>@<machine>" in the judged input
WHO = re.compile(r"(gw\d+|main)@(\w+|-) q")


def max_in_window(times: list[float], window: float = 1.0) -> int:
    """The most arrivals in any half-open window [t, t + window)."""
    times = sorted(times)
    best = 0
    j = 0
    for i, start in enumerate(times):
        j = max(j, i)
        while j < len(times) and times[j] < start + window:
            j += 1
        best = max(best, j - i)
    return best


def _arrivals(server: OpenAITestServer) -> list[float]:
    return [r.received_at for r in server.requests_to("chat")]


@pytest.fixture
def own_redis() -> Iterator[Any]:
    """A redis-server of this test alone (it is stopped in the middle)."""
    from redis_server import start

    yield from start()
