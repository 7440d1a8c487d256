"""The judge holds its limits whatever the endpoint does: deadlines, reply size, impossible usage,
missing credentials, parameters a model refuses. Through the real ``openai`` client against the
scripted test server."""

from __future__ import annotations

from pytest_llmeval.testing import (
    text,
)

YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)])
