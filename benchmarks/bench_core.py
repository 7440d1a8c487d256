"""Core overhead benchmark (issue 2).

1. Whole-run wall time of N dataset cases each calling ``assert_score("exact_match", ...)`` with
   the cache warm, against the same N tests doing a plain ``assert a == b`` in plain pytest
   (plugin disabled, ``pytest.mark.parametrize`` over the same rows). Ratios at N = 100, 400,
   1600: the target is <= 1.3 and not growing with N.
2. 10,000 warm cache lookups (the SQLite store), target < 1 s.

Both sides run in the same process tree on the same machine, interleaved, best of R repeats.
Usage: python benchmarks/bench_core.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = """
import json, pathlib, pytest
ROWS = [json.loads(l) for l in (pathlib.Path(__file__).parent / "cases.jsonl").open()]

@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_plain(row):
    assert row["output"] == row["expected"]
"""

PLUGIN = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_scored(case):
    assert_score("exact_match", output=case.output, expected=case.expected, min=1)
"""


def make_project(root: Path, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with (root / "cases.jsonl").open("w") as fh:
        for i in range(n):
            text = f"answer number {i} " * 3
            fh.write(json.dumps({"id": f"c{i}", "output": text, "expected": text}) + "\n")
    (root / "test_plain.py").write_text(PLAIN)
    (root / "test_plugin.py").write_text(PLUGIN)
    (root / "pytest.ini").write_text("[pytest]\n")


def run(root: Path, *args: str) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"run failed ({args}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return elapsed


def bench_runs(repeats: int) -> list[tuple[int, float, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (100, 400, 1600):
            root = Path(tmp) / f"n{n}"
            make_project(root, n)
            run(root, "--llm-eval", "test_plugin.py")  # warm the cache (and imports)
            plain, plugin = [], []
            for _ in range(repeats):
                plain.append(run(root, "-p", "no:llmeval", "test_plain.py"))
                plugin.append(run(root, "--llm-eval", "test_plugin.py"))
            rows.append((n, min(plain), min(plugin), min(plugin) / min(plain)))
    return rows


def bench_lookups() -> tuple[float, int]:
    from pytest_llmeval.stores.cache import ResultCache, cache_key

    with tempfile.TemporaryDirectory() as tmp:
        cache = ResultCache(tmp)
        keys = [
            cache_key({"name": "exact_match", "version": "1"}, {"output": str(i)})
            for i in range(10_000)
        ]
        for k in keys:
            cache.put(
                k, "exact_match", {"value": 1.0, "rationale": None, "metadata": {}, "usage": None}
            )
        cache.close()
        cache = ResultCache(tmp)  # a fresh handle, as a new run would have
        t0 = time.perf_counter()
        found = sum(1 for k in keys if cache.get(k) is not None)
        return time.perf_counter() - t0, found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("whole-run wall time, cache warm: assert_score(exact_match) vs plain assert")
    print(f"{'cases':>6} {'plain s':>9} {'plugin s':>9} {'ratio':>6}")
    for n, plain, plugin, ratio in bench_runs(args.repeats):
        print(f"{n:>6} {plain:>9.2f} {plugin:>9.2f} {ratio:>6.2f}")
    elapsed, found = bench_lookups()
    print(f"10,000 warm cache lookups: {elapsed:.3f} s ({found} hits)")


if __name__ == "__main__":
    main()
