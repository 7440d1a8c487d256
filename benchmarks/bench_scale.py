"""Speed at scale (issue 24): per-case overhead, the judged hot path with default options, and
batch scoring outside pytest, each against a floor measured in the same run.

``cases``   N dataset cases (16,000) with a cached ``assert_score("exact_match", ...)`` against
            the same rows as a plain parametrized pytest test (``-p no:llmeval``): pytest's
            session time ("passed in") and peak RSS, interleaved, best of R, byte code and the
            result cache warm. Targets: time <= 1.15x, RSS <= 1.3x. ``--xdist`` adds both with
            ``-n 2`` (xdist loaded in all four) and checks that the plugin costs no more over
            plain ``-n 2`` than it does over plain ``-n 0``. Default options (history on).
``judged``  200 async dataset cases, each a 100 ms app then one ``l3score`` judge call (100 ms
            per reply, the project's test server in its own process), ``concurrency=32``, with
            no option but ``--llm-eval`` (a fresh cache per repeat). Floor: a process doing the
            same requests (l3score's exact body) with openai's ``AsyncOpenAI`` under a
            semaphore of 32, timed from before ``import openai``. Target: session <= 1.3x the
            floor; every case judged once; at least 30 calls in flight; no wait for judge
            slots. Then the negative check: ``--llm-eval-concurrency=8`` warns and reports the
            wait.
``batch``   in one process: ``score_many("exact_match", rows)`` over 16,000 rows against
            pydantic-evals' ``Dataset.evaluate`` with ``EqualsExpected``; and
            ``score_many("l3score", rows, max_concurrency=32)`` over 200 rows against
            ``Dataset.evaluate(max_concurrency=32)`` with an evaluator making the identical
            request with ``AsyncOpenAI``. Target: ours no slower on each.

Prints one line per measurement and a verdict per target; exits 1 when a target is missed (re-run
on a quiet machine before concluding: these are ratios of wall times).

Run: python benchmarks/bench_scale.py {cases,judged,batch,all} [--repeats R] [--quick]
(pydantic-evals comes with the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _services import TestJudge, test_judge, write_cases
from bench_concurrent import ASYNC_TEST
from bench_core import make_project

# pytest.main() in a subprocess: pytest's own session time is in its output; this adds the
# peak RSS of the process (KiB on Linux).
RUNNER = """
import resource, sys, time
import pytest
rc = pytest.main(sys.argv[1:])
print(f"\\nBENCH-RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", flush=True)
sys.exit(rc)
"""

# The judged floor: the same requests straight through openai's client, in its own process,
# timed from before the import of openai (the plugin's session pays that import too).
DIRECT = """
import time
t0 = time.perf_counter()
import asyncio, json, sys
from openai import AsyncOpenAI
body = json.loads(open(sys.argv[1]).read())
cases, concurrency, app = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])

async def main():
    client = AsyncOpenAI(base_url=sys.argv[2], api_key="sk-bench", max_retries=0)
    gate = asyncio.Semaphore(concurrency)

    async def one(i):
        async with gate:
            await asyncio.sleep(app)
            reply = await client.chat.completions.create(**body)
            assert reply.choices[0].logprobs is not None

    await asyncio.gather(*(one(i) for i in range(cases)))
    await client.close()

asyncio.run(main())
print(f"BENCH-DIRECT {time.perf_counter() - t0:.4f}")
"""


def _run(root: Path, args: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(pytest's session seconds, peak RSS in KiB, stdout) of one pytest process."""
    (root / "run_pytest.py").write_text(RUNNER)
    out = subprocess.run(
        [sys.executable, "run_pytest.py", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env or {**os.environ},
        check=False,
    )
    m = re.search(r"(\d+) passed[^\n]* in ([0-9.]+)s", out.stdout)
    rss = re.search(r"^BENCH-RSS (\d+)$", out.stdout, re.MULTILINE)
    if out.returncode != 0 or m is None or rss is None:
        raise SystemExit(
            f"pytest {' '.join(args)} failed:\n{out.stdout[-3000:]}{out.stderr[-2000:]}"
        )
    return float(m.group(2)), int(rss.group(1)), out.stdout


def _verdict(name: str, ok: bool, text: str) -> bool:
    print(f"{'PASS' if ok else 'MISS'} {name}: {text}")
    return ok


# -- cases -------------------------------------------------------------------------------------


def bench_cases(n: int, repeats: int, xdist: bool) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        make_project(root, n)
        # byte code cached for both sides ("both warm"), whatever the environment says
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pyc")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        base = [] if xdist else ["-p", "no:xdist"]
        plain = [*base, "-p", "no:llmeval", "test_plain.py"]
        plugin = [*base, "--llm-eval", "test_plugin.py"]
        # untimed: byte code, the result cache, the first history entries
        _run(root, plugin, env)
        _run(root, plain, env)
        configs = {"plain -n0": plain, "plugin -n0": plugin}
        if xdist:
            configs |= {"plain -n2": [*plain, "-n", "2"], "plugin -n2": [*plugin, "-n", "2"]}
        best: dict[str, tuple[float, int]] = {}
        for r in range(repeats):
            for label, args in configs.items():
                session, rss, _ = _run(root, args, env)
                old = best.get(label)
                best[label] = (
                    min(session, old[0]) if old else session,
                    min(rss, old[1]) if old else rss,
                )
                print(f"  round {r + 1} {label:11s} {session:7.2f} s  {rss / 1024:6.0f} MB")
    f0, p0 = best["plain -n0"], best["plugin -n0"]
    print(
        f"{n} cached cases, best of {repeats}: plain {f0[0]:.2f} s {f0[1] / 1024:.0f} MB, "
        f"plugin {p0[0]:.2f} s {p0[1] / 1024:.0f} MB"
    )
    ok = _verdict("per-case time", p0[0] <= 1.15 * f0[0], f"{p0[0] / f0[0]:.2f}x (target 1.15x)")
    ok &= _verdict("memory", p0[1] <= 1.3 * f0[1], f"{p0[1] / f0[1]:.2f}x (target 1.3x)")
    if xdist:
        f2, p2 = best["plain -n2"], best["plugin -n2"]
        print(f"-n 2: plain {f2[0]:.2f} s, plugin {p2[0]:.2f} s")
        ok &= _verdict(
            "xdist overhead",
            p2[0] - f2[0] <= p0[0] - f0[0],
            f"-n 2 adds {p2[0] - f2[0]:.2f} s over plain -n 2; -n 0 adds {p0[0] - f0[0]:.2f} s",
        )
    return ok


# -- judged ------------------------------------------------------------------------------------


def l3score_body(tmp: Path) -> dict[str, Any]:
    """The request l3score sends for one case, captured from the test server in this process."""
    import pytest_llmeval
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
    from pytest_llmeval.testing import OpenAITestServer, text

    with OpenAITestServer() as server:
        server.set_default(text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)]))
        judge = JudgeSettings(base_url=server.base_url, model="test-judge", api_key=Secret("sk-b"))
        pytest_llmeval.configure(Settings(judge=judge, cache_mode="off", cache_dir=tmp / "c"))
        pytest_llmeval.score("l3score", input="question 7?", expected="answer 7", output="answer 7")
        body: dict[str, Any] = dict(server.requests[-1].body)
    return body


def _direct(tmp: Path, judge: TestJudge, body: Path, cases: int, conc: int, app: float) -> float:
    script = tmp / "direct.py"
    script.write_text(DIRECT)
    out = subprocess.run(
        [sys.executable, str(script), str(body), judge.base_url, str(cases), str(conc), str(app)],
        capture_output=True,
        text=True,
        check=True,
    )
    m = re.search(r"^BENCH-DIRECT ([0-9.]+)$", out.stdout, re.MULTILINE)
    assert m is not None, out.stdout + out.stderr
    return float(m.group(1))


def bench_judged(cases: int, conc: int, app: float, latency: float, repeats: int) -> bool:
    import json

    ok = True
    with tempfile.TemporaryDirectory() as tmpdir, test_judge(latency) as judge:
        tmp = Path(tmpdir)
        body = tmp / "body.json"
        body.write_text(json.dumps(l3score_body(tmp)))
        root = tmp / "p"
        root.mkdir()
        write_cases(root / "cases.jsonl", cases)
        (root / "test_async.py").write_text(ASYNC_TEST.format(concurrency=conc, app=app))
        (root / "pytest.ini").write_text("[pytest]\nllm_eval_judge_model = test-judge\n")
        env = {
            **os.environ,
            "OPENAI_BASE_URL": judge.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "PYTHONPYCACHEPREFIX": str(tmp / "pyc"),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        _direct(tmp, judge, body, 4, 2, 0.0)  # untimed: byte code, the server's first replies
        # untimed: the plugin's byte code (the first pytest process compiles what it imports)
        _run(root, ["-p", "no:xdist", "--llm-eval", f"--llm-eval-cache-dir={tmp / 'warm'}"], env)
        floors, ours = [], []
        for r in range(repeats):
            judge.stats(clear=True)
            floors.append(_direct(tmp, judge, body, cases, conc, app))
            judge.stats(clear=True)
            cache = f"--llm-eval-cache-dir={tmp / f'cache{r}'}"
            session, _, stdout = _run(root, ["-p", "no:xdist", "--llm-eval", cache], env)
            st = judge.stats(clear=True)
            calls, in_flight = int(st["requests"].get("chat", 0)), int(st["max_in_flight"])
            ours.append(session)
            print(
                f"  round {r + 1}: direct AsyncOpenAI {floors[-1]:.2f} s, plugin {session:.2f} s "
                f"({calls} judge calls, {in_flight} in flight at most)"
            )
            ok &= _verdict("one judge call per case", calls == cases, f"{calls} for {cases}")
            ok &= _verdict("calls in flight", in_flight >= min(30, conc), f"{in_flight}")
            ok &= _verdict(
                "no wait for judge slots", "judge slots" not in stdout, "summary has no slot line"
            )
        f, o = min(floors), min(ours)
        fm, om = statistics.median(floors), statistics.median(ours)
        print(
            f"{cases} judged cases at {conc} in flight: best of {repeats} floor {f:.2f} s, "
            f"ours {o:.2f} s ({o / f:.2f}x); medians floor {fm:.2f} s, ours {om:.2f} s"
        )
        ok &= _verdict(
            "judged hot path",
            om <= 1.3 * fm,
            f"{om / fm:.2f}x the direct client, medians of {repeats} (target 1.3x)",
        )
        # the negative check: a smaller limit the user set is kept and said
        cache = f"--llm-eval-cache-dir={tmp / 'cache-limited'}"
        _, _, stdout = _run(
            root, ["-v", "-p", "no:xdist", "--llm-eval", cache, "--llm-eval-concurrency=8"], env
        )
        said = "JudgeSlotsWarning" in stdout and re.search(
            r"^judge slots 8 per process \(--llm-eval-concurrency\): "
            r"\d+ judge requests queued for a free slot",
            stdout,
            re.MULTILINE,
        )
        ok &= _verdict("a smaller limit is said", bool(said), "warning and summary line")
        if not said:
            print(stdout[-3000:])
    return ok


# -- batch -------------------------------------------------------------------------------------


def bench_batch(rows: int, judged: int, conc: int, latency: float, repeats: int) -> bool:
    from dataclasses import dataclass

    try:
        from pydantic_evals import Case, Dataset
        from pydantic_evals.evaluators import EqualsExpected, Evaluator, EvaluatorContext
    except ImportError:
        sys.exit('bench_scale batch: pydantic-evals is missing; pip install -e ".[bench]"')

    import pytest_llmeval
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings

    ok = True
    data = [
        {"id": f"r{i}", "output": f"answer {i}", "expected": f"answer {i}" if i % 10 else "no"}
        for i in range(rows)
    ]

    async def task(inputs: dict[str, str]) -> str:
        return inputs["output"]

    with tempfile.TemporaryDirectory() as tmpdir, test_judge(latency) as judge:
        tmp = Path(tmpdir)
        body = l3score_body(tmp)
        settings = Settings(
            judge=JudgeSettings(base_url=judge.base_url, model="test-judge", api_key=Secret("sk")),
            cache_dir=tmp / "cache",
        )
        pytest_llmeval.configure(settings)
        ours_t, theirs_t = [], []
        for r in range(repeats):
            t0 = time.perf_counter()
            result = pytest_llmeval.score_many("exact_match", data)
            ours_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ds = Dataset(
                name="bench",
                cases=[
                    Case(name=row["id"], inputs=row, expected_output=row["expected"])
                    for row in data
                ],
                evaluators=[EqualsExpected()],
            )
            report = ds.evaluate_sync(task, progress=False)
            theirs_t.append(time.perf_counter() - t0)
            ours_pass = [s.value == 1.0 for s in result.scores]
            theirs_pass = [next(iter(c.assertions.values())).value for c in report.cases]
            same = ours_pass == theirs_pass
            print(
                f"  round {r + 1}: score_many {ours_t[-1]:.2f} s, "
                f"Dataset.evaluate {theirs_t[-1]:.2f} s"
            )
            ok &= _verdict("same verdicts", same, f"{sum(ours_pass)} of {rows} pass on both")
        o, t = min(ours_t), min(theirs_t)
        ok &= _verdict(
            "deterministic batch",
            o <= t,
            f"ours {o:.2f} s, pydantic-evals {t:.2f} s ({o / t:.2f}x)",
        )

        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=judge.base_url, api_key="sk", max_retries=0)

        @dataclass
        class SameRequest(Evaluator):  # type: ignore[type-arg]
            async def evaluate(self, ctx: EvaluatorContext) -> bool:  # type: ignore[type-arg]
                reply = await client.chat.completions.create(**body)
                return reply.choices[0].logprobs is not None

        ours_j, theirs_j = [], []
        for r in range(repeats):
            jrows = [
                {
                    "id": f"j{r}-{i}",
                    "input": f"run {r} question {i}?",
                    "output": f"a{i}",
                    "expected": f"a{i}",
                }
                for i in range(judged)
            ]
            judge.stats(clear=True)
            t0 = time.perf_counter()
            jres = pytest_llmeval.score_many("l3score", jrows, max_concurrency=conc)
            ours_j.append(time.perf_counter() - t0)
            st = judge.stats(clear=True)
            ok &= _verdict(
                "judged batch calls",
                st["requests"].get("chat", 0) == judged and st["max_in_flight"] >= min(30, conc),
                f"{st['requests'].get('chat', 0)} calls, {st['max_in_flight']} in flight",
            )
            assert all(s.value > 0.5 for s in jres.scores)
            ds = Dataset(
                name="judged",
                cases=[Case(name=row["id"], inputs=row) for row in jrows],
                evaluators=[SameRequest()],
            )
            t0 = time.perf_counter()
            ds.evaluate_sync(task, max_concurrency=conc, progress=False)
            theirs_j.append(time.perf_counter() - t0)
            st = judge.stats(clear=True)
            print(
                f"  round {r + 1}: score_many {ours_j[-1]:.2f} s, Dataset.evaluate "
                f"{theirs_j[-1]:.2f} s ({st['requests'].get('chat', 0)} calls, "
                f"{st['max_in_flight']} in flight)"
            )
        o, t = min(ours_j), min(theirs_j)
        ok &= _verdict(
            "judged batch", o <= t, f"ours {o:.2f} s, pydantic-evals {t:.2f} s ({o / t:.2f}x)"
        )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("what", choices=("cases", "judged", "batch", "all"))
    ap.add_argument("--cases", type=int, default=16_000, help="cases of `cases` and `batch`")
    ap.add_argument("--judged", type=int, default=200, help="judged cases / rows")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--app", type=float, default=0.1, help="seconds the fake app takes")
    ap.add_argument("--latency", type=float, default=0.1, help="seconds per judge reply")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--xdist", action="store_true", help="`cases` also with -n 2")
    ap.add_argument("--quick", action="store_true", help="1,600 cases, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.cases, args.repeats = 1600, 1
    ok = True
    if args.what in ("cases", "all"):
        ok &= bench_cases(args.cases, args.repeats, args.xdist)
    if args.what in ("judged", "all"):
        ok &= bench_judged(args.judged, args.concurrency, args.app, args.latency, args.repeats)
    if args.what in ("batch", "all"):
        ok &= bench_batch(args.cases, args.judged, args.concurrency, args.latency, args.repeats)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
