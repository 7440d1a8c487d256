"""pytest hooks (being built: see issue 2)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "llm_eval: an LLM evaluation test (run with --llm-eval)")
    config.addinivalue_line("markers", "llm_eval_dataset(path): parametrize `case` from a dataset")
