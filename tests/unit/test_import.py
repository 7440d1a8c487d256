"""Importing the package and loading the plugin must not import heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from import_support import HEAVY

PROBE = """
import json, sys
import pytest_llmeval
import pytest_llmeval.plugin
import pytest_llmeval.stores.redis_store  # redis-py only when a Redis store is made
pytest_llmeval.default_registry.names()
pytest_llmeval.default_registry.canonical("Factuality")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)))
""".replace("HEAVY", repr(HEAVY))


@pytest.mark.smoke
def test_import_and_plugin_load_import_no_heavy_module() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_api_is_exactly_all() -> None:
    import pytest_llmeval

    public = {n for n in dir(pytest_llmeval) if not n.startswith("_")}
    # submodules appear as attributes once imported; they are not API
    import types

    public = {
        n
        for n in public
        if not isinstance(getattr(pytest_llmeval, n), types.ModuleType) and n != "annotations"
    }
    assert public == set(pytest_llmeval.__all__) - {"__version__"}
