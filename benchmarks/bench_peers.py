"""Side by side with the peers (issue 24): the same work through a plain floor, this plugin with
default options, pydantic-evals and DeepEval, each a whole process in its own temp directory,
interleaved over R rounds (the order rotates each round); medians, and ratios against the floor
measured in the same run. Every process is checked: each case passed, and on the judged row
each case made exactly one judge call.

Rows (``--quick``: 400 / 1,600 / 50 / 50 cases, 1 round; a smoke check, not a measurement):

``small``   1,600 dataset cases, an exact-match check, cache warm (an untimed run first):
            floor   ``pytest -p no:llmeval``: a parametrized test doing ``assert out == expected``
            ours    ``pytest --llm-eval``, ``assert_score("exact_match", ..., min=1)`` in an
                    ``llm_eval_dataset`` test (benchmarks/bench_core.py's project)
            pydantic-evals  ``Dataset.evaluate_sync`` with ``EqualsExpected``, no pytest
                    (``progress=False``)
            DeepEval pytest  plain ``pytest`` in DeepEval's venv, ``assert_test(LLMTestCase,
                    [ExactMatchMetric()])`` per parametrized case
``large``   the same at 16,000 cases, and ours also ``--llm-eval-cache=off`` and ``-n 2`` (with
            the plain ``-n 2`` floor beside it). ``--rounds-large`` rounds (default 2, to keep
            the whole run near 15 minutes: DeepEval's path takes minutes here). Only ours is
            warmed again (its cache): byte code is warm from the small row.
``runner``  DeepEval's other two paths on 200 cases (``--runner-cases``), beside plain pytest,
            ours and DeepEval's plain-pytest path. Their time grows faster than the cases, so
            they are not in the rows above:
            ``deepeval test run test_deepeval.py``  DeepEval's own pytest runner (it writes its
                    test run to disk after every ``assert_test``; 1,600 cases took 6.5 minutes
                    on a loaded machine, 100 cases 6.8 s)
            DeepEval evaluate()  ``evaluate(cases, [ExactMatchMetric()])``, default async and
                    cache configs, ``print_results=False, show_indicator=False,
                    inspect_after_run=False`` (400 cases 34 s, 1,600 cases 296 s, loaded machine)
``judged``  200 async cases, each a 100 ms app (``asyncio.sleep``) then one judge call to the
            project's test server (``python -m pytest_llmeval.testing``, 100 ms per reply, its
            own process), 32 cases in flight:
            floor   the same requests (l3score's exact body) with openai's ``AsyncOpenAI`` under
                    a semaphore of 32, timed from before ``import openai``
            ours    ``llm_eval_dataset(..., concurrency=32)`` with
                    ``assert_score_async("l3score")``, ``--llm-eval`` only (its cache directory
                    removed before each run, untimed)
            pydantic-evals  ``Dataset.evaluate_sync(max_concurrency=32)`` with ``LLMJudge``
                    (``OpenAIChatModel`` on the test server; it answers LLMJudge's forced tool
                    call with ``{"reason": "ok", "pass": true, "score": 1.0}``)
            DeepEval evaluate()  ``GEval`` (given ``evaluation_steps``, so one call a case;
                    ``OpenAIModel("gpt-4.1", base_url=<test server>)``, a second server that
                    answers ``{"reason": "ok", "score": 8}`` with logprobs), ``evaluate(...,
                    async_config=AsyncConfig(max_concurrent=32))``. DeepEval scores finished
                    outputs: the app runs first (32 at once, asyncio), then ``evaluate``.
            DeepEval's pytest path is not in this row: ``assert_test`` runs one case at a time,
            200 x 0.2 s = 40 s at least.

The plain pytest floors and ours load the pytest plugins that installing this plugin brings
(``--plugins clean``, the default: plugin autoload off, then this plugin, pytest-xdist and
anyio's), not every plugin of the environment the benchmark runs in: a development environment
carries others (langsmith's, hypothesis', pytest-benchmark's) whose imports cost every pytest
process seconds, which the judged row's floor script never pays (``--plugins installed`` keeps
them all).

Times are whole processes (interpreter start to exit, measured by this script), with byte code
cached for every side (``PYTHONPYCACHEPREFIX``, an untimed run of each column first). No network
is needed: every judge is the local test server, and DeepEval runs with
``DEEPEVAL_TELEMETRY_OPT_OUT=YES``, ``DEEPEVAL_UPDATE_WARNING_OPT_IN=0``,
``DEEPEVAL_DISABLE_DOTENV=1``, its home in the temp directory, no ``CONFIDENT_API_KEY``, and
``HTTP(S)_PROXY`` set to a closed local port (``NO_PROXY`` for 127.0.0.1) so that any call it
makes outside this machine fails at once.

The peers: pydantic-evals comes with the ``bench`` extra (``pip install -e ".[bench]"``; any
interpreter with it: ``--pydantic-evals-python`` or ``BENCH_PYDANTIC_EVALS_PYTHON``, default
this one). DeepEval goes in its own virtualenv: it brings a pytest plugin of its own and
pytest-repeat, pytest-rerunfailures, which would load into every pytest run of this project::

    python -m venv /tmp/venv-deepeval
    /tmp/venv-deepeval/bin/pip install "deepeval==4.3.1"

(``--deepeval-python`` or ``BENCH_DEEPEVAL_PYTHON``, default ``/tmp/venv-deepeval/bin/python``).
A peer that is not installed is said at the start and its columns are skipped.

Run: python benchmarks/bench_peers.py [small large runner judged ...] [--rounds 3]
[--rounds-large 2] [--plugins clean|installed] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _services import TestJudge, test_judge, write_cases
from bench_concurrent import ASYNC_TEST
from bench_core import make_project
from bench_scale import DIRECT, l3score_body

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")

PE_EXACT = """
import json, sys
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

rows = [json.loads(line) for line in open(sys.argv[1])]

async def task(inputs):
    return inputs["output"]

ds = Dataset(
    name="exact",
    cases=[Case(name=r["id"], inputs=r, expected_output=r["expected"]) for r in rows],
    evaluators=[EqualsExpected()],
)
report = ds.evaluate_sync(task, progress=False)
ok = sum(all(a.value for a in c.assertions.values()) for c in report.cases)
print(f"BENCH-OK {ok} of {len(rows)}")
"""

PE_JUDGED = """
import asyncio, json, sys
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import LLMJudge
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

rows = [json.loads(line) for line in open(sys.argv[1])]
base_url, concurrency, app = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
model = OpenAIChatModel("test-judge", provider=OpenAIProvider(base_url=base_url, api_key="sk-b"))
judge = LLMJudge(
    rubric="The output answers the input as the expected output does.",
    model=model,
    include_input=True,
    include_expected_output=True,
)

async def task(inputs):
    await asyncio.sleep(app)  # the app under test
    return inputs["output"]

ds = Dataset(
    name="judged",
    cases=[Case(name=r["id"], inputs=r, expected_output=r["expected"]) for r in rows],
    evaluators=[judge],
)
report = ds.evaluate_sync(task, max_concurrency=concurrency, progress=False)
ok = sum(bool(c.assertions) and all(a.value for a in c.assertions.values()) for c in report.cases)
print(f"BENCH-OK {ok} of {len(rows)}")
"""

DE_TEST = """
import json, pathlib, pytest
from deepeval import assert_test
from deepeval.metrics import ExactMatchMetric
from deepeval.test_case import LLMTestCase

ROWS = [json.loads(l) for l in (pathlib.Path(__file__).parent / "cases.jsonl").open()]

@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_deepeval(row):
    out, expected = row["output"], row["expected"]
    case = LLMTestCase(input=row["id"], actual_output=out, expected_output=expected)
    assert_test(case, [ExactMatchMetric()])
"""

DE_EXACT = """
import json, sys
from deepeval import evaluate
from deepeval.evaluate import DisplayConfig
from deepeval.metrics import ExactMatchMetric
from deepeval.test_case import LLMTestCase

rows = [json.loads(line) for line in open(sys.argv[1])]
cases = [
    LLMTestCase(input=r["id"], actual_output=r["output"], expected_output=r["expected"])
    for r in rows
]
shown = DisplayConfig(print_results=False, show_indicator=False, inspect_after_run=False)
result = evaluate(cases, [ExactMatchMetric()], display_config=shown)
ok = sum(bool(t.success) for t in result.test_results)
print(f"BENCH-OK {ok} of {len(rows)}")
"""

DE_JUDGED = """
import asyncio, json, sys
from deepeval import evaluate
from deepeval.evaluate import AsyncConfig, DisplayConfig
from deepeval.metrics import GEval
from deepeval.models import OpenAIModel
from deepeval.test_case import LLMTestCase, SingleTurnParams

rows = [json.loads(line) for line in open(sys.argv[1])]
base_url, concurrency, app = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

async def outputs():
    gate = asyncio.Semaphore(concurrency)

    async def one(row):
        async with gate:
            await asyncio.sleep(app)  # the app under test
            return row["output"]

    return await asyncio.gather(*(one(r) for r in rows))

outs = asyncio.run(outputs())
cases = [
    LLMTestCase(input=r["input"], actual_output=o, expected_output=r["expected"])
    for r, o in zip(rows, outs)
]
metric = GEval(
    name="Correctness",
    evaluation_params=[
        SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT, SingleTurnParams.EXPECTED_OUTPUT
    ],
    evaluation_steps=["Check that the actual output answers the input as the expected one does."],
    model=OpenAIModel(model="gpt-4.1", base_url=base_url, api_key="sk-b"),
)
shown = DisplayConfig(print_results=False, show_indicator=False, inspect_after_run=False)
result = evaluate(
    cases, [metric], async_config=AsyncConfig(max_concurrent=concurrency), display_config=shown
)
ok = sum(bool(t.success) for t in result.test_results)
print(f"BENCH-OK {ok} of {len(rows)}")
"""

DEEPEVAL_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    # any request to an address outside this machine fails at once (port 9: nothing listens)
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


@dataclass
class Column:
    label: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    cases: int
    judge: TestJudge | None = None  # its judge calls are counted: one a case
    before: Callable[[], None] | None = None  # untimed, before each run
    warm: bool = True  # an untimed run first (byte code, the cache)
    times: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _passed(out: str, cases: int) -> str | None:
    """None when the output shows every case passed, else what it shows."""
    text = ANSI.sub("", out)
    ok = re.search(r"^BENCH-OK (\d+) of (\d+)$", text, re.MULTILINE)
    if ok:
        return None if int(ok.group(1)) == cases else f"{ok.group(1)} of {cases} passed"
    # pytest's closing line: "1600 passed, 3 warnings in 2.10s"
    final = re.findall(r"^=*\s*(\d+ passed[^\n]* in [0-9.]+s.*)$", text, re.MULTILINE)
    m = re.match(r"(\d+) passed", final[-1]) if final else None
    if m is None or int(m.group(1)) != cases or re.search(r"\d+ (failed|error)", final[-1]):
        return "pytest's summary: " + (text.strip().splitlines() or ["(no output)"])[-1]
    return None


def run(col: Column, timeout: float) -> float:
    if col.before:
        col.before()
    if col.judge:
        col.judge.stats(clear=True)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            col.argv,
            cwd=col.cwd,
            env=col.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{col.label}: over {timeout:.0f} s ({' '.join(col.argv)})") from None
    elapsed = time.perf_counter() - t0
    bad = _passed(out.stdout + out.stderr, col.cases) if out.returncode == 0 else "exit"
    if bad:
        raise SystemExit(
            f"{col.label} failed ({bad}, exit {out.returncode}): {' '.join(col.argv)}\n"
            f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    if col.judge:
        st = col.judge.stats(clear=True)
        calls, flight = int(st["requests"].get("chat", 0)), int(st["max_in_flight"])
        if calls != col.cases:
            raise SystemExit(f"{col.label}: {calls} judge calls for {col.cases} cases")
        col.notes.append(f"{flight} in flight")
    return elapsed


def interleave(title: str, cols: list[Column], rounds: int, timeout: float) -> list[str]:
    """Runs the columns to warm once untimed, then ``rounds`` rounds in a rotating order; prints
    and returns the summary lines (the first column is the floor)."""
    print(f"\n== {title}", flush=True)
    for col in (c for c in cols if c.warm):
        t = run(col, timeout)
        col.notes.clear()
        print(f"  warm-up {col.label}: {t:.2f} s", flush=True)
    for r in range(rounds):
        order = cols[r % len(cols) :] + cols[: r % len(cols)]
        for col in order:
            col.times.append(run(col, timeout))
        cells = ", ".join(f"{c.label} {c.times[-1]:.2f}" for c in cols)
        print(f"  round {r + 1}: {cells}", flush=True)
    floor = statistics.median(cols[0].times)
    lines = [f"{title}: medians of {rounds} (min-max), whole processes"]
    for col in cols:
        med = statistics.median(col.times)
        note = f"; judge calls {', '.join(sorted(set(col.notes)))}" if col.notes else ""
        lines.append(
            f"  {col.label:34s} {med:8.2f} s ({min(col.times):.2f}-{max(col.times):.2f})"
            f"  {med / floor:6.2f}x floor{note}"
        )
    print("\n".join(lines), flush=True)
    return lines


def peer_version(python: str, module: str, dist: str, env: dict[str, str]) -> str | None:
    if not python or not Path(python).exists():
        return None
    code = f"import {module}; from importlib.metadata import version; print(version({dist!r}))"
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=env, cwd="/", check=False
    )
    return out.stdout.strip() if out.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("rows", nargs="*", default=["small", "large", "runner", "judged"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rounds-large", type=int, default=2, help="rounds of the 16,000-case row")
    ap.add_argument("--small", type=int, default=1600)
    ap.add_argument("--large", type=int, default=16_000)
    ap.add_argument("--runner-cases", type=int, default=200)
    ap.add_argument(
        "--plugins",
        choices=["clean", "installed"],
        default="clean",
        help="pytest plugins of the plain floors and ours: what installing this plugin loads "
        "(clean: autoload off, then this plugin, xdist, anyio) or every installed one",
    )
    ap.add_argument("--judged", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--app", type=float, default=0.1, help="seconds the fake app takes")
    ap.add_argument("--latency", type=float, default=0.1, help="seconds per judge reply")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for one process")
    ap.add_argument(
        "--pydantic-evals-python",
        default=os.environ.get("BENCH_PYDANTIC_EVALS_PYTHON", sys.executable),
    )
    ap.add_argument(
        "--deepeval-python",
        default=os.environ.get("BENCH_DEEPEVAL_PYTHON", "/tmp/venv-deepeval/bin/python"),
    )
    ap.add_argument("--quick", action="store_true", help="400 / 1,600 / 50 / 50 cases, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.small, args.large, args.runner_cases, args.judged = 400, 1600, 50, 50
        args.rounds = args.rounds_large = 1
    unknown = set(args.rows) - {"small", "large", "runner", "judged"}
    if unknown:
        ap.error(f"unknown rows: {', '.join(sorted(unknown))}")

    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    base = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pyc")}
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    # this checkout's plugin, whatever copy of it is installed
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    for key in ("CONFIDENT_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        base.pop(key, None)
    de_env = {**base, **DEEPEVAL_ENV, "DEEPEVAL_HOME": str(tmp / "deepeval-home")}
    de_env["PYTHONPYCACHEPREFIX"] = str(tmp / "pyc-deepeval")

    pe_py, de_py = args.pydantic_evals_python, args.deepeval_python
    pe_ver = peer_version(pe_py, "pydantic_evals", "pydantic-evals", base)
    de_ver = peer_version(de_py, "deepeval", "deepeval", de_env)
    import openai
    import pytest

    import pytest_llmeval

    print(
        f"ours: pytest-llmeval {pytest_llmeval.__version__} (git {_git_head()}), pytest "
        f"{pytest.__version__}, openai {openai.__version__}, Python {sys.version.split()[0]}"
    )
    print(
        f"pydantic-evals: {pe_ver} ({pe_py})"
        if pe_ver
        else f"pydantic-evals: not installed for {pe_py} (pip install -e '.[bench]'); skipped"
    )
    print(
        f"DeepEval: {de_ver} ({de_py})"
        if de_ver
        else f"DeepEval: not installed at {de_py} (python -m venv /tmp/venv-deepeval && "
        "/tmp/venv-deepeval/bin/pip install 'deepeval==4.3.1', or --deepeval-python); skipped"
    )
    de_pytest = [de_py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    py = sys.executable
    pytest_cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if args.plugins == "clean":
        # what `pip install pytest-llmeval-suite` loads into pytest: this plugin, pytest-xdist
        # (a dependency) and anyio's (openai's httpx brings it); not the other plugins of this
        # development environment (langsmith's, hypothesis', pytest-benchmark's, ...), whose
        # imports cost every pytest process seconds that neither the floor script nor a user of
        # this plugin pays
        base["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        pytest_cmd += ["-p", "xdist.plugin", "-p", "xdist.looponfail", "-p", "anyio.pytest_plugin"]
        ours_p, plain_p = ["-p", "pytest_llmeval.plugin"], []
    else:
        ours_p, plain_p = [], ["-p", "no:llmeval"]
    print(
        f"pytest plugins: {args.plugins}"
        + (
            " (autoload off; this plugin, xdist, anyio)"
            if args.plugins == "clean"
            else " (every plugin installed in this environment)"
        )
    )
    summary: list[str] = []
    try:

        def exact_cols(root: Path, n: int, title: str) -> list[Column]:
            make_project(root, n)
            (root / "test_deepeval.py").write_text(DE_TEST)
            (root / "pe_exact.py").write_text(PE_EXACT)
            (root / "de_exact.py").write_text(DE_EXACT)
            cols = [
                Column("plain pytest", [*pytest_cmd, *plain_p, "test_plain.py"], root,
                       base, n),
                Column("ours (--llm-eval)",
                       [*pytest_cmd, *ours_p, "--llm-eval", "test_plugin.py"], root, base, n),
            ]  # fmt: skip
            if title == "large":
                cols += [
                    Column("ours, --llm-eval-cache=off",
                           [*pytest_cmd, *ours_p, "--llm-eval", "--llm-eval-cache=off",
                            "test_plugin.py"], root, base, n),
                    Column("plain pytest -n 2",
                           [*pytest_cmd, *plain_p, "-n", "2", "test_plain.py"], root,
                           base, n),
                    Column("ours -n 2",
                           [*pytest_cmd, *ours_p, "--llm-eval", "-n", "2", "test_plugin.py"],
                           root, base, n),
                ]  # fmt: skip
            if pe_ver:
                cols.append(
                    Column("pydantic-evals Dataset.evaluate", [pe_py, "pe_exact.py", "cases.jsonl"],
                           root, base, n)
                )  # fmt: skip
            if de_ver:
                cols.append(
                    Column("DeepEval pytest + assert_test", [*de_pytest, "test_deepeval.py"],
                           root, de_env, n)
                )  # fmt: skip
            if title == "large" and "small" in args.rows:
                # byte code is warm from the small row (same prefixes); only ours' cache is not
                for col in cols:
                    col.warm = col.label == "ours (--llm-eval)"
            return cols

        if "small" in args.rows:
            cols = exact_cols(tmp / "small", args.small, "small")
            summary += interleave(
                f"{args.small} cases, exact match, cache warm", cols, args.rounds, args.timeout
            )
        if "large" in args.rows:
            cols = exact_cols(tmp / "large", args.large, "large")
            summary += interleave(
                f"{args.large} cases, exact match, cache warm", cols, args.rounds_large,
                args.timeout,
            )  # fmt: skip
        if "runner" in args.rows:
            if not de_ver:
                print("\n== runner: skipped (DeepEval is not installed)")
            else:
                n = args.runner_cases
                root = tmp / "runner"
                make_project(root, n)
                (root / "test_deepeval.py").write_text(DE_TEST)
                (root / "de_exact.py").write_text(DE_EXACT)
                de_cli = str(Path(de_py).parent / "deepeval")
                cols = [
                    Column("plain pytest", [*pytest_cmd, *plain_p, "test_plain.py"],
                           root, base, n),
                    Column("ours (--llm-eval)",
                           [*pytest_cmd, *ours_p, "--llm-eval", "test_plugin.py"], root, base, n),
                    Column("DeepEval pytest + assert_test", [*de_pytest, "test_deepeval.py"],
                           root, de_env, n),
                    Column("deepeval test run", [de_cli, "test", "run", "test_deepeval.py"], root,
                           de_env, n),
                    Column("DeepEval evaluate()", [de_py, "de_exact.py", "cases.jsonl"], root,
                           de_env, n),
                ]  # fmt: skip
                if "small" in args.rows:
                    for col in cols:
                        col.warm = False  # byte code is warm from the small row
                summary += interleave(
                    f"{n} cases, exact match, DeepEval's runner and evaluate()",
                    cols,
                    args.rounds,
                    args.timeout,
                )
        if "judged" in args.rows:
            summary += judged(args, tmp, base, de_env, pe_ver, de_ver, [*pytest_cmd, *ours_p])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n== summary")
    print("\n".join(summary))
    return 0


def judged(
    args: argparse.Namespace,
    tmp: Path,
    base: dict[str, str],
    de_env: dict[str, str],
    pe_ver: str | None,
    de_ver: str | None,
    ours: list[str],
) -> list[str]:
    n, conc, app = args.judged, args.concurrency, args.app
    root = tmp / "judged"
    root.mkdir()
    write_cases(root / "cases.jsonl", n)
    (root / "test_async.py").write_text(ASYNC_TEST.format(concurrency=conc, app=app))
    (root / "pytest.ini").write_text("[pytest]\nllm_eval_judge_model = test-judge\n")
    # the floor checks each reply itself (an assertion error exits non-zero), then says so
    (root / "direct.py").write_text(DIRECT + 'print(f"BENCH-OK {cases} of {cases}")\n')
    (root / "pe_judged.py").write_text(PE_JUDGED)
    (root / "de_judged.py").write_text(DE_JUDGED)
    (root / "body.json").write_text(json.dumps(l3score_body(tmp)))
    grading = json.dumps({"reason": "ok", "pass": True, "score": 1.0})
    geval = json.dumps({"reason": "ok", "score": 8})
    with (
        test_judge(args.latency, tool_arguments=grading) as judge,
        test_judge(args.latency, reply_text=geval, top_logprobs="8=-0.1,7=-2.5") as de_judge,
    ):
        env = {**base, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": "sk-bench"}
        py = sys.executable
        sizes = [str(n), str(conc), str(app)]  # the floor's arguments; the peers' without n

        def fresh_cache() -> None:
            shutil.rmtree(root / ".llmeval", ignore_errors=True)

        cols = [
            Column("AsyncOpenAI direct", [py, "direct.py", "body.json", judge.base_url, *sizes],
                   root, env, n, judge),
            Column("ours (--llm-eval)", [*ours, "--llm-eval", "test_async.py"], root, env, n,
                   judge, fresh_cache),
        ]  # fmt: skip
        if pe_ver:
            cols.append(
                Column("pydantic-evals LLMJudge", [args.pydantic_evals_python, "pe_judged.py",
                       "cases.jsonl", judge.base_url, *sizes[1:]], root, env, n, judge)
            )  # fmt: skip
        if de_ver:
            cols.append(
                Column("DeepEval GEval evaluate()", [args.deepeval_python, "de_judged.py",
                       "cases.jsonl", de_judge.base_url, *sizes[1:]], root,
                       {**de_env, "OPENAI_API_KEY": "sk-bench"}, n, de_judge)
            )  # fmt: skip
        return interleave(
            f"{n} async judged cases, {app * 1000:.0f} ms app + {args.latency * 1000:.0f} ms "
            f"judge, {conc} in flight",
            cols,
            args.rounds,
            args.timeout,
        )


def _git_head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
