from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmeval.stores.cache import ResultCache

CONCURRENT_TEST = """
import os, pytest
from pytest_llmeval.stores.cache import ResultCache

PER_TEST = 5
DIR = os.environ["CACHE_UNDER_TEST"]

@pytest.mark.parametrize("t", range(400))
def test_write(t):
    c = _cache()
    for i in range(t * PER_TEST, (t + 1) * PER_TEST):
        c.put(f"key-{i}", "s", {"value": i})
        # read entries other workers are writing at the same time (present or a clean miss)
        for j in (i - 1, i - 7, i - 31):
            got = c.get(f"key-{j}")
            assert got is None or got == {"value": j}

_c = None
def _cache():
    global _c
    if _c is None:
        _c = ResultCache(DIR)
    return _c
"""


def test_four_xdist_workers_write_2000_entries_none_lost(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytest.importorskip("xdist")
    cache_dir = tmp_path / "shared-cache"
    pytester.makepyfile(test_concurrent=CONCURRENT_TEST)
    pytester._monkeypatch.setenv("CACHE_UNDER_TEST", str(cache_dir))
    result = pytester.runpytest_subprocess("-n", "4", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=400)
    result.stdout.no_fnmatch_line("*database is locked*")
    c = ResultCache(cache_dir)
    assert len(c) == 2000
    assert all(c.get(f"key-{i}") == {"value": i} for i in range(2000))


CUTOFF = """
import os
from pytest_llmeval import scorer

CUTOFF = float(os.environ.get("ATK_CUTOFF", "3"))

@scorer(name="long_enough")
def long_enough(output):
    return 1.0 if len(output) >= CUTOFF else 0.0
"""


LONG = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
def test_q():
    assert_score("long_enough", output="abcd", min=1)
"""


def test_a_changed_constant_of_a_custom_scorer_is_not_replayed_from_the_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a custom deterministic scorer reads a module constant (``CUTOFF``). Tightening it
    from 3 to 10 changes neither its code fingerprint nor its cache key, so the default cache
    mode replays the old score 1.0: the test passes, and fails only with --llm-eval-cache=off.
    A cached result must be the result of the scorer as it now is."""
    pytester.makeconftest(CUTOFF)
    pytester.makepyfile(test_q=LONG)
    args = ("--llm-eval", "-p", "no:cacheprovider", "--llm-eval-no-history")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    monkeypatch.setenv("ATK_CUTOFF", "10")
    pytester.runpytest_subprocess(*args, "--llm-eval-cache=off").assert_outcomes(failed=1)
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)
