"""Per-case judge tests with pytest-xdist (issue 5, part b).

400 dataset cases, each a test calling ``assert_score("l3score", ...)`` (one judge call), against
the scripted test server in its own process with 100 ms added latency per call, cache off.
Whole-run wall time with ``-n 0`` against ``-n 4``, same machine, same run, best of R.
Target: -n 4 at least 3.5x faster. Also prints the pytest-reported session time (which leaves
out interpreter start-up) and the number of judge calls the server saw.

Two configurations: the plugins installed in this environment (each xdist worker imports all
of them: hypothesis, anyio, pytest-benchmark ... cost about 1.5 s of CPU per worker here), and
only pytest-llmeval + xdist (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1), which isolates what this plugin
itself costs.

Then two floors without this plugin (only pytest + xdist, ``--no-floors`` skips them): tests
that just sleep as long as a judge call, and the same with each worker importing the official
openai SDK and making one client, as any judge run must. On a 2-core machine these bound what
the plugin can reach.

``--workers`` and ``--cases`` show where the time goes: with -n 2 (one worker per core here) or
with more cases the fixed start-up of each worker weighs less.

Run: python benchmarks/bench_xdist.py [--cases 400] [--latency 0.1] [--repeats 1] [--workers 4]
[--config both|installed|isolated]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _services import test_judge, write_cases

TEST = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_judged(case):
    assert_score("l3score", input=case.input, expected=case.expected, output=case.output,
                 min=0.5)
"""

# The floors: the same number of tests and the same wait, without this plugin (only pytest +
# xdist), first bare, then with each worker importing the official openai SDK and making one
# client, as any judge run must. What these reach bounds what any plugin can reach here.
FLOOR_TEST = """
import os, time
import pytest

@pytest.mark.parametrize("i", range({cases}))
def test_wait(i):
    if os.environ.get("FLOOR_WITH_OPENAI"):
        import openai
        if not hasattr(test_wait, "client"):
            # built as the plugin builds it for a local plain-HTTP judge (no CA bundle)
            test_wait.client = openai.AsyncOpenAI(
                api_key="x",
                base_url="{base_url}",
                http_client=openai.DefaultAsyncHttpxClient(verify=False, follow_redirects=False),
            )
    time.sleep({latency})
"""


PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def floor_runs(
    cases: int, latency: float, workers: int, base_url: str
) -> dict[str, tuple[float, float]]:
    """Wall seconds of -n 0 and -n ``workers`` for the two floor suites."""
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "test_wait.py").write_text(
            FLOOR_TEST.format(cases=cases, latency=latency, base_url=base_url)
        )
        for label, with_openai in (("bare", ""), ("openai", "1")):
            env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
            env["FLOOR_WITH_OPENAI"] = with_openai
            walls = []
            for n in (0, workers):
                t0 = time.perf_counter()
                subprocess.run(
                    [*PYTEST, "-p", "xdist.plugin", "-n", str(n)],
                    cwd=root,
                    env=env,
                    capture_output=True,
                    check=True,
                )
                walls.append(time.perf_counter() - t0)
            out[label] = (walls[0], walls[1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4, help="the -n of the parallel run")
    ap.add_argument(
        "--config",
        choices=("both", "installed", "isolated"),
        default="both",
        help="installed plugins, only pytest-llmeval + xdist, or both",
    )
    ap.add_argument("--no-floors", action="store_true", help="skip the runs without this plugin")
    args = ap.parse_args()
    with test_judge(args.latency) as judge, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_cases(root / "cases.jsonl", args.cases)
        (root / "test_judged.py").write_text(TEST)
        (root / "pytest.ini").write_text("[pytest]\n")
        env = {
            **os.environ,
            "OPENAI_BASE_URL": judge.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "LLM_EVAL_JUDGE_MODEL": "test-judge",
        }

        def run(workers: int, isolated: bool) -> tuple[float, float, int]:
            extra = ["-p", "xdist.plugin", "-p", "pytest_llmeval.plugin"] if isolated else []
            run_env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if isolated else env
            judge.stats(clear=True)
            t0 = time.perf_counter()
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    *extra,
                    "--llm-eval",
                    "--llm-eval-cache=off",
                    "-n",
                    str(workers),
                ],
                cwd=root,
                env=run_env,
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.perf_counter() - t0
            if out.returncode != 0:
                raise SystemExit(out.stdout[-3000:] + out.stderr[-3000:])
            m = re.search(r"passed in ([0-9.]+)s", out.stdout)
            calls = judge.judge_calls()
            return wall, float(m.group(1)) if m else float("nan"), calls

        results = {}
        configs = {"both": (False, True), "installed": (False,), "isolated": (True,)}
        for isolated in configs[args.config]:
            serial = min((run(0, isolated) for _ in range(args.repeats)), key=lambda r: r[0])
            parallel = min(
                (run(args.workers, isolated) for _ in range(args.repeats)), key=lambda r: r[0]
            )
            results[isolated] = (serial, parallel)
        floors = (
            {}
            if args.no_floors
            else floor_runs(args.cases, args.latency, args.workers, judge.base_url)
        )
    print(f"{args.cases} per-case judge tests, {args.latency * 1000:.0f} ms per judge call")
    for isolated, (serial, parallel) in results.items():
        label = "only pytest-llmeval + xdist" if isolated else "all installed plugins"
        print(f" {label}:")
        print(f"  -n 0: wall {serial[0]:.2f} s (pytest says {serial[1]:.2f} s), {serial[2]} calls")
        print(
            f"  -n {args.workers}: wall {parallel[0]:.2f} s (pytest says {parallel[1]:.2f} s), "
            f"{parallel[2]} calls"
        )
        print(
            f"  speed-up: wall {serial[0] / parallel[0]:.2f}x, "
            f"session {serial[1] / parallel[1]:.2f}x (target for -n 4, 400 cases: >= 3.5x)"
        )
    labels = {
        "bare": "pytest + xdist alone, each test sleeping as long as a judge call",
        "openai": "the same, each worker importing openai and making one AsyncOpenAI client",
    }
    for key, (serial_wall, parallel_wall) in floors.items():
        print(f" floor, {labels[key]}:")
        print(
            f"  -n 0: wall {serial_wall:.2f} s, -n {args.workers}: wall {parallel_wall:.2f} s, "
            f"speed-up {serial_wall / parallel_wall:.2f}x"
        )


if __name__ == "__main__":
    main()
