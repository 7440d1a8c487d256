"""Capturing an agent's trace (issue 21, "Speed, scale and bad input"): the cost of
``llm_eval_trace`` in time and memory, each against a floor measured in the same run.

``agent``   One real pydantic-ai agent run (``agent.instrument = True``, its GenAI
            instrumentation: ``chat`` spans with ``gen_ai.input.messages`` /
            ``gen_ai.output.messages`` JSON and usage, ``execute_tool`` spans with arguments
            and results, under one ``invoke_agent`` span) of 50 model calls and 50 tool calls
            (the first reply asks for two tools at once, the next 48 for one each, the 50th
            answers), against the project's test server (``OpenAITestServer``, in this
            process, no added latency: the fastest model there is, so the capture's share is
            the largest it can be). Each tool returns ``--result-chars`` characters, so the
            conversation each chat span records grows to ~50 times that. A real agent rather
            than spans made by hand: its spans are what the instrumentation really emits, and
            the floor carries what a real run costs besides the capture (HTTP, pydantic-ai's
            own work, the instrumentation serialising the history at every call).
            Capture: the test requests ``llm_eval_trace`` and checks the 50 + 50 calls in it.
            Floor: the same test without the fixture. Both under ``--llm-eval``, both with the
            same SDK ``TracerProvider`` set (and pydantic-ai imported) in the conftest, the
            same ``assert_score`` on the answer. Measured: pytest's session time ("passed in",
            which includes the fixture's imports, setup and summary) and the agent run's own
            wall time inside the test (where the processor's per-span work happens), over
            interleaved rounds (order alternating). Target: medians within 1.1x, on each.
``memory``  1,000 dataset cases (``llm_eval_dataset``), each emitting four real SDK spans
            shaped as pydantic-ai emits them (``invoke_agent``, ``chat``, ``execute_tool``,
            ``chat``; ~40 KB of message and tool-result text a case) and scoring its answer
            (``assert_score``, so its record carries the trace summary into the reports).
            Capture vs the same cases without the fixture, default options: peak RSS of the
            pytest process. Target: <= 1.3x (the house memory target, bench_scale). Then the
            same at 250 cases: the capture's *extra* growth from 250 to 1,000 cases (its
            growth minus the floor's, per case) must stay under 16 KiB a case. Why that
            bound: what a case may keep is its record's trace summary, capped by
            ``--llm-eval-trace-spans`` / ``--llm-eval-trace-chars`` (four entries, texts cut
            to 500 characters: a few KiB); a capture that kept its spans (or just their
            message text) would keep ~40 KB a case, more than twice the bound.

Prints one line per measurement and a verdict per target; exits 1 when a target is missed (re-run
on a quiet machine before concluding: these are ratios of wall times and of RSS).

Run (from the repository root): python benchmarks/bench_trace.py [{agent,memory,all}]
[--rounds R] [--quick]. Needs the otel extra and pydantic-ai (both pinned in the dev extra).
langsmith's pytest plugin is turned off on both sides (it only adds start-up time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# pytest.main() in a subprocess: pytest's own session time is in its output; this adds the
# peak RSS of the process (KiB on Linux).
RUNNER = """
import resource, sys
import pytest
rc = pytest.main(sys.argv[1:])
print(f"\\nBENCH-RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", flush=True)
sys.exit(rc)
"""

# Both sides: the same SDK provider (no processor of ours until the fixture adds one) and the
# heavy imports before the session starts, so the session time is the test's.
AGENT_CONFTEST = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())

import pydantic_ai  # noqa: E402,F401
import pydantic_ai.models.openai  # noqa: E402,F401
import pydantic_ai.providers.openai  # noqa: E402,F401
"""

AGENT_TEST = """
import os
import time

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pytest_llmeval import assert_score

RECORD = "r" * RESULT_CHARS
model = OpenAIChatModel(
    "gpt-test",
    provider=OpenAIProvider(base_url=os.environ["BENCH_BASE_URL"], api_key="sk-bench"),
)
agent = Agent(model, name="bench")
agent.instrument = True


@agent.tool_plain
def lookup(item: int) -> dict:
    return {"item": item, "record": RECORD}


def test_agent(ARGS):
    t0 = time.perf_counter()
    result = agent.run_sync("Look the items up, one by one.")
    elapsed = time.perf_counter() - t0
    with open(os.environ["BENCH_OUT"], "w") as fh:
        fh.write(repr(elapsed))
    assert result.output == "done"
CHECK
    assert_score("exact_match", output=result.output, expected="done", min=1)
"""

AGENT_CHECK = """
    trace = llm_eval_trace
    assert len(trace.model_calls) == 50, trace.render()
    assert trace.tool_names == ("lookup",) * 50
    assert sorted(c.arguments["item"] for c in trace.tool_calls) == list(range(50))
    assert len(trace.agent_steps) == 1 and len(trace.spans) == 101
"""

MODEL_CALLS = 50
TOOL_CALLS = 50


def agent_reply(body: dict[str, Any]) -> Any:
    """The server's script: two tool calls first, then one a reply, then the answer."""
    from pytest_llmeval.testing import ChatReply, text

    done = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if done >= TOOL_CALLS:
        return text("done", usage=(40 * done, 2))
    items = (0, 1) if done == 0 else (done,)
    calls = tuple(("lookup", json.dumps({"item": i})) for i in items)
    return ChatReply(tool_calls=calls, usage=(40 * done + 20, 12))


# The spans of one memory case, shaped as pydantic-ai's instrumentation emits them. Shared by
# the test files and this script (which counts the text they carry).
SPANS_SRC = """
import json

SYSTEM = "You answer questions about the catalogue, citing the records you looked up. " * 60


def _text(role, content):
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def case_spans(case_id):
    user = _text("user", f"What does the catalogue say about item {case_id}?")
    call = {"type": "tool_call", "id": f"call_{case_id}", "name": "lookup",
            "arguments": json.dumps({"item": case_id})}
    result = json.dumps({"item": case_id, "record": f"record of {case_id}: " + "x" * 8000})
    first_in = [_text("system", SYSTEM), user]
    first_out = [{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]
    tool_msg = {"role": "user", "parts": [{"type": "tool_call_response", "id": call["id"],
                                           "name": "lookup", "result": result}]}
    second_in = [*first_in, *first_out, tool_msg]
    answer = f"Item {case_id} is in the catalogue."
    second_out = [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
                   "finish_reason": "stop"}]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.system": "openai", "gen_ai.request.model": "gpt-test",
            "gen_ai.response.model": "gpt-test", "gen_ai.agent.name": "bench"}
    return answer, [
        ("invoke_agent bench", None, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench",
            "agent_name": "bench", "final_result": answer,
            "pydantic_ai.all_messages": json.dumps([*second_in, *second_out]),
        }),
        ("chat gpt-test", 0, {
            **chat, "gen_ai.input.messages": json.dumps(first_in),
            "gen_ai.output.messages": json.dumps(first_out),
            "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 20,
            "gen_ai.response.finish_reasons": ("tool_call",),
        }),
        ("execute_tool lookup", 0, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": call["id"], "gen_ai.tool.call.arguments": call["arguments"],
            "gen_ai.tool.call.result": result, "gen_ai.agent.name": "bench",
        }),
        ("chat gpt-test", 0, {
            **chat, "gen_ai.input.messages": json.dumps(second_in),
            "gen_ai.output.messages": json.dumps(second_out),
            "gen_ai.usage.input_tokens": 3300, "gen_ai.usage.output_tokens": 12,
            "gen_ai.response.finish_reasons": ("stop",),
        }),
    ]
"""

MEMORY_CONFTEST = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())
"""

MEMORY_TEST = (
    SPANS_SRC
    + """
import pytest
from opentelemetry import trace

from pytest_llmeval import assert_score

tracer = trace.get_tracer("bench")


def run_agent(case_id):
    answer, spans = case_spans(case_id)
    (name, _, attributes), children = spans[0], spans[1:]
    with tracer.start_as_current_span(name, attributes=attributes):
        for name, _, attributes in children:
            with tracer.start_as_current_span(name, attributes=attributes):
                pass
    return answer


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_case(case, ARGS):
    output = run_agent(int(case.id[1:]))
CHECK
    assert_score("exact_match", output=output, expected=case.expected, min=1)
"""
)

MEMORY_CHECK = """
    trace = llm_eval_trace
    assert len(trace.spans) == 4 and len(trace.model_calls) == 2, trace.render()
    assert trace.tool_names == ("lookup",)
"""


def _fill(template: str, **parts: str) -> str:
    """``template`` with each upper-case placeholder replaced (the sources hold braces)."""
    for name, text in parts.items():
        template = template.replace(name, text)
    return template


def _run(root: Path, args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(pytest's session seconds, peak RSS in KiB, stdout) of one pytest process."""
    result = subprocess.run(
        [sys.executable, "run_pytest.py", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    m = re.search(r"(\d+) passed[^\n]* in ([0-9.]+)s", result.stdout)
    rss = re.search(r"^BENCH-RSS (\d+)$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or m is None or rss is None:
        raise SystemExit(
            f"pytest {' '.join(args)} in {root} failed:\n"
            f"{result.stdout[-4000:]}{result.stderr[-2000:]}"
        )
    if "TraceCaptureWarning" in result.stdout or "after their test" in result.stdout:
        raise SystemExit(f"pytest in {root} warned:\n{result.stdout[-4000:]}")
    return float(m.group(2)), int(rss.group(1)), result.stdout


def _verdict(name: str, ok: bool, text: str) -> bool:
    print(f"{'PASS' if ok else 'MISS'} {name}: {text}")
    return ok


def _spread(values: list[float], unit: str, fmt: str = ".3f") -> str:
    return (
        f"median {statistics.median(values):{fmt}} {unit} "
        f"(range {min(values):{fmt}}-{max(values):{fmt}})"
    )


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pyc"), **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte code cached for both sides
    return env


BASE_ARGS = ["-p", "no:xdist", "-p", "no:langsmith_plugin", "--llm-eval"]


# -- agent -------------------------------------------------------------------------------------


def bench_agent(rounds: int, result_chars: int) -> bool:
    from pytest_llmeval.testing import OpenAITestServer

    sides = {
        "floor": {"ARGS": "", "CHECK": ""},
        "capture": {"ARGS": "llm_eval_trace", "CHECK": AGENT_CHECK.strip("\n")},
    }
    with tempfile.TemporaryDirectory() as tmpdir, OpenAITestServer() as server:
        tmp = Path(tmpdir)
        server.set_default(agent_reply)
        roots: dict[str, Path] = {}
        for side, parts in sides.items():
            root = roots[side] = tmp / side
            root.mkdir()
            (root / "run_pytest.py").write_text(RUNNER)
            (root / "conftest.py").write_text(AGENT_CONFTEST)
            (root / "pytest.ini").write_text("[pytest]\n")
            (root / "test_agent.py").write_text(
                _fill(AGENT_TEST, RESULT_CHARS=str(result_chars), **parts)
            )
        out = tmp / "elapsed.txt"
        env = _env(tmp, BENCH_BASE_URL=server.base_url, BENCH_OUT=str(out))

        def one(side: str) -> tuple[float, float]:
            server.clear()
            session, _, _ = _run(roots[side], BASE_ARGS, env)
            chats = len(server.requests_to("chat"))
            if chats != MODEL_CALLS:
                raise SystemExit(f"{side}: {chats} model calls, not {MODEL_CALLS}")
            return session, float(out.read_text())

        for side in sides:  # untimed: byte code, the server's first replies
            one(side)
        got: dict[str, dict[str, list[float]]] = {s: {"session": [], "run": []} for s in sides}
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            line = []
            for side in order:
                session, run = one(side)
                got[side]["session"].append(session)
                got[side]["run"].append(run)
                line.append(f"{side} session {session:.2f} s, agent run {run:.3f} s")
            print(f"  round {r + 1}: " + "; ".join(line))
    ok = True
    print(
        f"one pydantic-ai run of {MODEL_CALLS} model and {TOOL_CALLS} tool calls "
        f"({result_chars}-char tool results), {rounds} rounds:"
    )
    for what, label in (("session", "session time"), ("run", "agent run")):
        floor, capture = got["floor"][what], got["capture"][what]
        print(f"  {label}: floor {_spread(floor, 's')}; capture {_spread(capture, 's')}")
        ratio = statistics.median(capture) / statistics.median(floor)
        extra_ms = (statistics.median(capture) - statistics.median(floor)) * 1000
        ok &= _verdict(
            f"capture vs none, {label}",
            ratio <= 1.1,
            f"{ratio:.3f}x ({extra_ms:+.0f} ms), medians of {rounds} (target 1.1x)",
        )
    return ok


# -- memory ------------------------------------------------------------------------------------


def _payload_bytes() -> int:
    """The span text one memory case emits (attribute values, as UTF-8)."""
    namespace: dict[str, Any] = {}
    exec(SPANS_SRC, namespace)
    _, spans = namespace["case_spans"](500)
    return sum(len(str(v).encode()) for _, _, attrs in spans for v in attrs.values())


def bench_memory(cases: int, small: int, rounds: int) -> bool:
    sides = {
        "floor": {"ARGS": "", "CHECK": ""},
        "capture": {"ARGS": "llm_eval_trace", "CHECK": MEMORY_CHECK.strip("\n")},
    }
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        env = _env(tmp)
        roots: dict[tuple[str, int], Path] = {}
        for n in (cases, small):
            for side, parts in sides.items():
                root = roots[side, n] = tmp / f"{side}-{n}"
                root.mkdir()
                (root / "run_pytest.py").write_text(RUNNER)
                (root / "conftest.py").write_text(MEMORY_CONFTEST)
                (root / "pytest.ini").write_text("[pytest]\n")
                (root / "test_cases.py").write_text(_fill(MEMORY_TEST, **parts))
                with (root / "cases.jsonl").open("w") as fh:
                    for i in range(n):
                        answer = f"Item {i} is in the catalogue."
                        fh.write(json.dumps({"id": f"c{i}", "expected": answer}) + "\n")
        configs = [(side, n) for n in (cases, small) for side in sides]
        for key in configs:  # untimed: byte code, the first history entries
            _run(roots[key], BASE_ARGS, env)
        rss: dict[tuple[str, int], list[int]] = {key: [] for key in configs}
        session: dict[tuple[str, int], list[float]] = {key: [] for key in configs}
        for r in range(rounds):
            order = configs if r % 2 == 0 else list(reversed(configs))
            line = []
            for key in order:
                s, kib, _ = _run(roots[key], BASE_ARGS, env)
                rss[key].append(kib)
                session[key].append(s)
                line.append(f"{key[0]} {key[1]}: {kib / 1024:.1f} MB {s:.2f} s")
            print(f"  round {r + 1}: " + "; ".join(line))

    def med(key: tuple[str, int]) -> float:
        return statistics.median(rss[key]) / 1024

    payload = _payload_bytes()
    print(
        f"{cases} and {small} captured cases of 4 spans ({payload / 1024:.0f} KiB of span text "
        f"a case), peak RSS, {rounds} rounds:"
    )
    for key in configs:
        mb = [k / 1024 for k in rss[key]]
        print(
            f"  {key[0]:7s} {key[1]:5d} cases: {_spread(mb, 'MB', '.1f')}, "
            f"session {_spread(session[key], 's', '.2f')}"
        )
    ok = True
    ratio = med(("capture", cases)) / med(("floor", cases))
    ok &= _verdict(
        f"peak RSS, {cases} cases",
        ratio <= 1.3,
        f"capture {med(('capture', cases)):.1f} MB vs none {med(('floor', cases)):.1f} MB: "
        f"{ratio:.2f}x, medians of {rounds} (target 1.3x)",
    )
    grow_c = med(("capture", cases)) - med(("capture", small))
    grow_f = med(("floor", cases)) - med(("floor", small))
    per_case = (grow_c - grow_f) * 1024 / (cases - small)
    ok &= _verdict(
        f"bounded, {small} -> {cases} cases",
        per_case <= 16,
        f"capture grew {grow_c:.1f} MB, none {grow_f:.1f} MB: the capture keeps "
        f"{per_case:.1f} KiB a case (bound 16 KiB; its spans carry {payload / 1024:.0f} KiB)",
    )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("what", nargs="?", default="all", choices=("agent", "memory", "all"))
    ap.add_argument("--rounds", type=int, default=None, help="agent rounds (memory: a third)")
    ap.add_argument("--result-chars", type=int, default=500, help="each tool result's size")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--small", type=int, default=250, help="the cases growth is measured from")
    ap.add_argument("--quick", action="store_true", help="3 agent rounds, 1 memory round")
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 15)
    ok = True
    if args.what in ("agent", "all"):
        ok &= bench_agent(rounds, args.result_chars)
    if args.what in ("memory", "all"):
        ok &= bench_memory(args.cases, args.small, max(1, rounds // 3 if not args.quick else 1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
