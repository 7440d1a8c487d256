"""The option table (issue 22, part 2): one table owns every option, one rule reads a value.

- The surface is the one users had: every flag, ini key, environment twin, default, choice,
  help text and their order as on branch ``house`` before the table (tests/data/
  options_house.json, written from pytest's own parser by tests/helpers/option_surface.py).
- The rule holds for every row, generated from the table: the command line beats the ini file,
  which beats the environment, which beats the default (pytest's real parsing, in-process).
- A bad value is a usage error in one format naming every spelling and where it came from.
- Nothing outside core/options.py and plugin/options.py registers or reads an option or an
  ``LLM_EVAL_*`` variable (an AST walk of the package).
"""

from __future__ import annotations

import json

import pytest
from option_surface import SNAPSHOT

from pytest_llmeval.core.options import (
    OPTIONS,
)

HOUSE = json.loads(SNAPSHOT.read_text("utf-8"))


#: every environment variable the table names (the Azure twins included)
ENV_NAMES = sorted(
    {n for o in OPTIONS for n in (o.env, o.azure_env) if n is not None} | {"MY_JUDGE_KEY"}
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No variable of the table set (the machine's own OPENAI_API_KEY must not leak in)."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
