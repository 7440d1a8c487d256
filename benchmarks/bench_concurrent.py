"""Concurrent async dataset cases against sync per-case tests (issue 14).

N dataset cases (400 by default), each: the app (100 ms, ``asyncio.sleep`` in the async test,
``time.sleep`` in the sync one) then one judge call (``l3score``) against the scripted test
server in its own process with 100 ms added latency per reply, cache off. All in one run:

(a) the async test, ``llm_eval_dataset(..., concurrency=C)`` (C = 32), in one process: within
    1.5x of the ideal N x 0.2 / C s (2.5 s for 400 cases at 32);
(b) at least 10x faster than the same cases as a sync test with ``-n 0``, and at least 3x faster
    than the sync test with ``-n 4``;
(c) the async test with ``-n 2`` (C per worker): at least as fast as (a). Each worker gets its
    contiguous half of the cases at once (pytest_llmeval/plugin/xdist_sched.py). Also printed,
    without a target: the same with ``--dist worksteal`` (which must not judge any case twice).

The judge engine caps judge calls in flight per process (``--llm-eval-concurrency``, default
8): with 32 cases in flight and the default, 24 of them would queue for the judge and (a) could
not reach 1.5x. Every run here passes ``--llm-eval-concurrency C`` (the same for the sync runs,
where it changes nothing: a sync test has one judge call in flight per process).

Three times per run: "wall" is pytest's own session time (the ``passed in X s`` line: from
session start, collection included, to the end of the terminal summary; with xdist it includes
starting and stopping the workers), "main" is timed around ``pytest.main()`` inside the
subprocess (adds configuration and the import of every installed plugin), "process" is the
whole subprocess (adds interpreter start-up and ``import pytest``). Targets and ratios use the
wall (session) time; the other two are printed beside it. Each run checks that every case
passed.

Floors of (c), measured in the same run: "bare" is ``pytest -n 2 -p no:llmeval`` on two
trivially passing tests (two workers' start-up and exit: interpreter, pytest and the installed
plugins, collection, pytest's own clean-up at exit); "with this plugin" is the async test on 2
cases with ``-n 2`` (adds the plugin and each worker's first judge call: importing the OpenAI
SDK, building its client). It runs twice: the first fills the byte-code cache (in the run's own
directory, see ``PYTHONPYCACHEPREFIX`` below). (a)'s session time has no such costs: its
process starts and exits outside its session, while (c)'s workers start and exit inside it.
"Floor of (a)" is the async test on 2 cases in one process (collection, the first judge call).
Printed beside the targets: the cases' own time above the floors ((c) minus its floor with this
plugin against (a) minus its floor), (c) minus each floor against (a), and the whole-process
ratio.

Every run checks that the server saw exactly one judge call per case (a case judged twice, as
work stealing did before, fails the run).

Exits 1 when a target is missed. ``--quick``: 100 cases (a development run of about 1.5
minutes; the ideal is then 0.6 s, which the fixed costs above dominate).

Run: python benchmarks/bench_concurrent.py [--cases 400] [--concurrency 32] [--latency 0.1]
[--quick] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _services import TestJudge, test_judge, write_cases

ASYNC_TEST = """
import asyncio
import pytest
from pytest_llmeval import assert_score_async

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency={concurrency})
async def test_async(case):
    await asyncio.sleep({app})  # the app under test
    await assert_score_async("l3score", input=case.input, expected=case.expected,
                             output=case.output, min=0.5)
"""

SYNC_TEST = """
import time
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_sync(case):
    time.sleep({app})  # the app under test
    assert_score("l3score", input=case.input, expected=case.expected, output=case.output,
                 min=0.5)
"""

# The start-up floor of (c) without this plugin: two trivially passing tests on two workers.
TRIVIAL_TEST = """
def test_one():
    pass


def test_two():
    pass
"""

# Times pytest.main() inside the subprocess: what the process spends after start-up.
RUNNER = """
import sys, time
import pytest
t0 = time.perf_counter()
rc = pytest.main(sys.argv[1:])
print(f"\\nBENCH-MAIN {time.perf_counter() - t0:.4f}", flush=True)
sys.exit(rc)
"""


@dataclass(frozen=True)
class Run:
    label: str
    session: float
    main: float
    process: float
    calls: int
    max_in_flight: int


def write_project(root: Path, cases: int, concurrency: int, app: float) -> None:
    write_cases(root / "cases.jsonl", cases)
    (root / "test_async.py").write_text(ASYNC_TEST.format(concurrency=concurrency, app=app))
    (root / "test_sync.py").write_text(SYNC_TEST.format(app=app))
    (root / "test_trivial.py").write_text(TRIVIAL_TEST)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "run_pytest.py").write_text(RUNNER)


def run_pytest(
    root: Path,
    env: dict[str, str],
    judge: TestJudge,
    *,
    label: str,
    test_file: str,
    workers: int,
    judge_concurrency: int,
    cases: int,
    extra: tuple[str, ...] = (),
    bare: bool = False,
) -> Run:
    judge.stats(clear=True)
    plugin = (
        ["-p", "no:llmeval"]
        if bare
        else ["--llm-eval", "--llm-eval-cache=off", f"--llm-eval-concurrency={judge_concurrency}"]
    )
    cmd = [
        sys.executable,
        "run_pytest.py",
        "-q",
        "-p",
        "no:cacheprovider",
        *plugin,
        "-n",
        str(workers),
        *extra,
        test_file,
    ]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    process = time.perf_counter() - t0
    tail = out.stdout[-3000:] + out.stderr[-3000:]
    if out.returncode != 0:
        raise SystemExit(f"{label}: pytest exited {out.returncode}\n{tail}")
    m = re.search(r"^(\d+) passed[^\n]* in ([0-9.]+)s", out.stdout, re.MULTILINE)
    main_m = re.search(r"^BENCH-MAIN ([0-9.]+)$", out.stdout, re.MULTILINE)
    if m is None or main_m is None or int(m.group(1)) != cases:
        raise SystemExit(f"{label}: expected {cases} passed cases\n{tail}")
    st = judge.stats()
    requests = st["requests"]
    assert isinstance(requests, dict)
    calls = int(requests.get("chat", 0))
    # One judge call per case, exactly: a case judged twice (e.g. taken back by work stealing
    # after it started) fails the run.
    if calls != (0 if bare else cases):
        raise SystemExit(f"{label}: the server saw {calls} judge calls for {cases} cases\n{tail}")
    max_in_flight = st["max_in_flight"]
    assert isinstance(max_in_flight, int)
    return Run(label, float(m.group(2)), float(main_m.group(1)), process, calls, max_in_flight)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=32, help="concurrency= of the async test")
    ap.add_argument("--latency", type=float, default=0.1, help="seconds per judge reply")
    ap.add_argument("--app", type=float, default=0.1, help="seconds the fake app takes")
    ap.add_argument("--repeats", type=int, default=1, help="best of R for each configuration")
    ap.add_argument("--quick", action="store_true", help="100 cases (a short development run)")
    args = ap.parse_args()
    cases = 100 if args.quick else args.cases
    conc = args.concurrency
    ideal = cases * (args.app + args.latency) / conc

    runs: dict[str, Run] = {}
    with test_judge(args.latency) as judge, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "OPENAI_BASE_URL": judge.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "LLM_EVAL_JUDGE_MODEL": "test-judge",
            # Byte-code caching as on a developer's machine, in this run's own directory:
            # with PYTHONDONTWRITEBYTECODE every process would compile again the modules
            # pytest rewrites (this plugin's and those of the installed plugins) - seconds
            # per process on a busy 2-core machine, and again in every xdist worker.
            "PYTHONPYCACHEPREFIX": str(root / "pycache"),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        write_project(root, cases, conc, args.app)
        two = ("-k", "test_async[q0] or test_async[q1]")
        for _ in range(2):  # the first fills the byte-code cache, the second is timed
            floor = run_pytest(
                root,
                env,
                judge,
                label="2 cases, -n 2",
                test_file="test_async.py",
                workers=2,
                judge_concurrency=conc,
                cases=2,
                extra=two,
            )
        worksteal = ("--dist", "worksteal")
        plan: list[tuple[str, str, str, int, tuple[str, ...]]] = [
            ("bare", "bare pytest, -n 2", "test_trivial.py", 2, ()),
            ("a2", "2 cases, -n 0", "test_async.py", 0, two),
            ("a", "async, -n 0", "test_async.py", 0, ()),
            ("c", "async, -n 2", "test_async.py", 2, ()),
            ("cw", "async, -n 2 --dist worksteal", "test_async.py", 2, worksteal),
            ("s4", "sync, -n 4", "test_sync.py", 4, ()),
            ("s0", "sync, -n 0", "test_sync.py", 0, ()),
        ]
        for key, label, test_file, workers, extra in plan:
            best: Run | None = None
            for _ in range(args.repeats if key != "s0" else 1):
                r = run_pytest(
                    root,
                    env,
                    judge,
                    label=label,
                    test_file=test_file,
                    workers=workers,
                    judge_concurrency=conc,
                    cases=2 if key in ("bare", "a2") else cases,
                    extra=extra,
                    bare=key == "bare",
                )
                if best is None or r.session < best.session:
                    best = r
            assert best is not None
            runs[key] = best

    a, c, s0, s4 = runs["a"], runs["c"], runs["s0"], runs["s4"]
    rows = [
        # case, run, ratio text, target text, ok
        (
            f"(a) async, concurrency {conc}, 1 process",
            a,
            f"{a.session / ideal:.2f}x ideal",
            f"<= 1.5x ideal ({ideal:.2f} s)",
            a.session <= 1.5 * ideal,
        ),
        (
            "(b) sync, -n 0",
            s0,
            f"{s0.session / a.session:.1f}x (a)",
            ">= 10x (a)",
            s0.session >= 10 * a.session,
        ),
        (
            "(b) sync, -n 4",
            s4,
            f"{s4.session / a.session:.1f}x (a)",
            ">= 3x (a)",
            s4.session >= 3 * a.session,
        ),
        (
            f"(c) async, concurrency {conc}, -n 2",
            c,
            f"{c.session / a.session:.2f}x (a)",
            "<= 1.0x (a)",
            c.session <= a.session,
        ),
    ]
    print(
        f"{cases} dataset cases: app {args.app * 1000:.0f} ms + one l3score judge call "
        f"({args.latency * 1000:.0f} ms per reply), cache off, --llm-eval-concurrency {conc} "
        f"(the judge limit, default 8, raised to the case concurrency)"
    )
    print(
        "wall s = pytest's session time (the target's measure); main s = around pytest.main(); "
        "process s = the whole subprocess"
    )
    print()
    print("| case | wall s | main s | process s | ratio | target | ok |")
    print("|---|---|---|---|---|---|---|")
    for name, run, ratio, target, ok in rows:
        print(
            f"| {name} | {run.session:.2f} | {run.main:.2f} | {run.process:.2f} | {ratio} | "
            f"{target} | {'yes' if ok else 'NO'} |"
        )
    cw, bare, a2 = runs["cw"], runs["bare"], runs["a2"]
    print(
        f"| (c) the same, --dist worksteal (no target) | {cw.session:.2f} | {cw.main:.2f} | "
        f"{cw.process:.2f} | {cw.session / a.session:.2f}x (a) | | |"
    )
    print(
        f"| floor of (c), bare: pytest -n 2 -p no:llmeval, 2 trivial tests (workers' start-up "
        f"and exit) | {bare.session:.2f} | {bare.main:.2f} | {bare.process:.2f} | "
        f"{bare.session / a.session:.2f}x (a) | | |"
    )
    print(
        f"| floor of (c), with this plugin: 2 cases, -n 2 (adds each worker's first judge call) "
        f"| {floor.session:.2f} | {floor.main:.2f} | {floor.process:.2f} | "
        f"{floor.session / a.session:.2f}x (a) | | |"
    )
    print(
        f"| floor of (a): 2 cases, -n 0 (collection, the first judge call) | {a2.session:.2f} | "
        f"{a2.main:.2f} | {a2.process:.2f} | {a2.session / a.session:.2f}x (a) | | |"
    )
    print()
    per_a, per_c = a.session - a2.session, c.session - floor.session
    print(
        f"above their floors (the cases' own time): (a) {per_a:.2f} s, (c) {per_c:.2f} s = "
        f"{per_c / per_a:.2f}x (a)"
        if per_a > 0
        else "above their floors: (a) none"
    )
    print(
        f"(c) minus the bare floor: {c.session - bare.session:.2f} s = "
        f"{(c.session - bare.session) / a.session:.2f}x (a); minus the floor with this plugin: "
        f"{c.session - floor.session:.2f} s = {(c.session - floor.session) / a.session:.2f}x (a)"
    )
    print(
        f"whole processes (process s): (c) {c.process / a.process:.2f}x (a); "
        f"(c) worksteal {cw.process / a.process:.2f}x (a)"
    )
    print(
        f"judge calls in flight at most: (a) {a.max_in_flight}, (c) {c.max_in_flight}, "
        f"(c) worksteal {cw.max_in_flight}, sync -n 4 {s4.max_in_flight}; judge calls for "
        f"{cases} cases: (c) {c.calls}, (c) worksteal {cw.calls} (one per case, checked)"
    )
    if c.session > a.session and bare.session >= a.session:
        print(
            f"(c) cannot reach (a) here: two workers' start-up and exit alone (bare floor, "
            f"{bare.session:.2f} s) take longer than all of (a) ({a.session:.2f} s)"
        )
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
