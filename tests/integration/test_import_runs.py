"""Importing the package and loading the plugin must not import heavy dependencies."""

from __future__ import annotations

import pytest
from import_support import HEAVY


@pytest.mark.smoke
def test_a_pytest_run_with_the_plugin_imports_no_heavy_module(pytester) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import sys
        HEAVY = HEAVY_TUPLE

        def test_modules():
            assert [m for m in sys.modules if m.split(".")[0] in HEAVY] == []
        """.replace("HEAVY_TUPLE", repr(HEAVY))
    )
    # langsmith (with langchain-core in the dev extra, for the LangGraph trace test) registers
    # a pytest plugin of its own that imports opentelemetry: not ours to measure
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:langsmith_plugin"
    ).assert_outcomes(passed=1)
