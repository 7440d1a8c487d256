from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the repo (parity vectors, docs)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: the parity vectors live there")
    return SHARED


@pytest.fixture
def ctx(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A scoring context with the cache off, installed as the active one for the test."""
    from pytest_llmeval.context import ScoringContext, set_context
    from pytest_llmeval.settings import Settings

    c = ScoringContext(Settings(cache_mode="off", cache_dir=tmp_path / ".llmeval"))
    prev = set_context(c)
    yield c
    set_context(prev)
    c.close()
