"""qa_correctness's "not applicable" verdict (Bench scores it -1): an explicit outcome, never a
score and never cached: the test's ERROR (default) or a skip (``not_applicable="skip"``)."""

from __future__ import annotations

from pytest_llmeval.testing import tool_call

NA = tool_call(
    {
        "reasons": "the context is about cooking, the question about tides",
        "choice": "not_applicable",
    }
)
