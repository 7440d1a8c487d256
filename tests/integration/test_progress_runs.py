"""The live status line (issue 14): shown on a real terminal (a pty), never mixed with pytest's
own output, absent with -q, --llm-eval-no-progress, its ini twin and a non-terminal stdout."""

from __future__ import annotations

import re
import sys
import types
from typing import Any

import pytest
from progress_support import COLUMNS, _Tty, screen
from pty_run import run_on_pty, terminal_env

from pytest_llmeval.plugin.progress import Progress
from pytest_llmeval.testing import OpenAITestServer, text

SLOW = """
import time
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(5))
def test_slow(i):
    time.sleep(0.25)
    assert_score("exact_match", output="a", expected="a", min=1.0)
"""


def run_in_pty(p: pytest.Pytester, *args: str, env: dict[str, str] | None = None) -> str:
    """``pytest ARGS`` in ``p.path`` with stdout and stderr on a pseudo-terminal: the bytes the
    terminal received."""
    # no saved runs: "-v" prints the saved run's number, which differs from run to run
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]
    argv += ["--llm-eval-no-history", *args]
    raw, _ = run_on_pty(argv, p.path, terminal_env(COLUMNS, env))
    return raw


_STATUS = re.compile(
    r"llm-eval: (?P<done>\d+)/(?P<total>\d+) cases(, ETA \w+)? \| (?P<flight>\d+) in flight \| "
    r"(?P<calls>\d+) judge calls?, (?P<cached>\d+) cached \| "
    r"\$(?P<spent>[\d.]+)(/\$(?P<budget>[\d.]+))?"
)


def statuses(raw: str) -> list[dict[str, Any]]:
    """Every status line drawn, parsed."""
    out: list[dict[str, Any]] = []
    for m in _STATUS.finditer(raw):
        d: dict[str, Any] = {
            k: int(v) for k, v in m.groupdict().items() if k not in ("spent", "budget")
        }
        d["spent"] = float(m["spent"])
        d["budget"] = m["budget"]
        out.append(d)
    assert out, "no status line drawn"
    return out


def normal(lines: list[str]) -> list[str]:
    """Lines with run times blanked (two runs differ only there)."""
    return [re.sub(r"\d+\.\d+s", "T", line) for line in lines]


@pytest.mark.smoke
def test_status_line_on_a_terminal_and_no_trace_left(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SLOW)
    raw = run_in_pty(pytester, "--llm-eval", "--llm-eval-cache=off")
    assert "llm-eval: 3/5 cases, ETA " in raw
    assert "| 1 in flight | 0 judge calls, 0 cached | $0.0000" in raw
    shown = screen(raw)
    assert not any("llm-eval:" in line for line in shown), shown
    plain = screen(
        run_in_pty(pytester, "--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-progress")
    )
    assert "5 passed" in plain[-1]
    # What stays on screen is exactly pytest's output without the status line.
    assert normal(shown) == normal(plain)


def test_verbose_lines_are_never_mixed_with_the_status(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SLOW)
    raw = run_in_pty(pytester, "--llm-eval", "-v", "--llm-eval-cache=off")
    assert "llm-eval: 3/5 cases" in raw
    shown = screen(raw)
    plain = screen(
        run_in_pty(pytester, "--llm-eval", "-v", "--llm-eval-cache=off", "--llm-eval-no-progress")
    )
    assert normal(shown) == normal(plain)
    verbose = [line for line in shown if "test_slow[" in line]
    assert len(verbose) == 5
    for i, line in enumerate(verbose):
        assert re.fullmatch(rf"test_slow\.py::test_slow\[{i}\] PASSED +\[ *{20 * (i + 1)}%\]", line)


def test_xdist_shows_the_status_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SLOW)
    raw = run_in_pty(pytester, "--llm-eval", "-n", "2")
    assert re.search(r"llm-eval: [1-4]/5 cases, ETA \d+s \| [12] in flight", raw), raw
    shown = screen(raw)
    assert not any("llm-eval:" in line for line in shown), shown
    # (a progress line, not a wrapped header line that happens to start with a dot)
    dots = [line for line in shown if re.match(r"\.+ +\[", line)]
    assert len(dots) == 1 and re.fullmatch(r"\.{5} +\[100%\]", dots[0]), shown


def test_concurrent_cases_count_as_in_flight(pytester: pytest.Pytester) -> None:
    """The cases running beside the one in its protocol count as in flight. No timing decides
    it: c0 ends after the first rendering is old enough to be redrawn (0.5 s > MIN_INTERVAL),
    and c1 and c2 keep running until c0's teardown report, which comes after the status line
    was redrawn for c0's call report; so that rendering sees at least c1 and c2 (and c3 when it
    started in time: 2 or 3 in flight, never 1)."""
    pytester.makefile(".jsonl", cases="\n".join(f'{{"id": "c{i}"}}' for i in range(6)))
    pytester.makeconftest(
        """
        def pytest_runtest_logreport(report):
            if report.when == "teardown" and report.nodeid.endswith("[c0]"):
                open("c0-reported", "w").close()
        """
    )
    pytester.makepyfile(
        test_conc="""
        import asyncio, os, time
        import pytest

        @pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=3)
        async def test_case(case):
            if case.id == "c0":
                await asyncio.sleep(0.5)
            elif case.id in ("c1", "c2"):
                deadline = time.monotonic() + 60
                while not os.path.exists("c0-reported") and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
        """
    )
    raw = run_in_pty(pytester, "--llm-eval")
    assert re.search(r"\| [23] in flight \|", raw), raw
    assert "6 passed" in screen(raw)[-1]


def test_judge_calls_and_spend_against_the_budget(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytester.makepyfile(
        test_judged="""
        import time
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.parametrize("i", range(4))
        def test_judged(i):
            time.sleep(0.25)
            assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)
        """
    )
    pytester.makeini(
        "[pytest]\n"
        "llm_eval_judge_model = test-judge\n"
        "llm_eval_max_tries = 1\n"
        # 1000 prompt tokens at $100 per million: $0.10 a call
        "llm_eval_prices =\n    test-judge 100 0\n"
    )
    judge_server.set_default(
        text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(1000, 1))
    )
    env = {"OPENAI_BASE_URL": judge_server.base_url, "OPENAI_API_KEY": "sk-progress-SECRET"}
    raw = run_in_pty(pytester, "--llm-eval", "--llm-eval-budget=5", env=env)
    assert "sk-progress-SECRET" not in raw
    seen = statuses(raw)
    # Calls and cache hits come with each finished case's records; the spend is live (the
    # running case's call may already be paid).
    assert max(s["done"] for s in seen) >= 2
    for s in seen:
        assert s["total"] == 4 and s["calls"] == s["done"] and s["cached"] == 0, s
        assert s["spent"] in (
            pytest.approx(0.1 * s["calls"]),
            pytest.approx(0.1 * s["calls"] + 0.1),
        )
        assert s["budget"] == "5.00"
    # Second run: every scoring from the cache, no call, nothing spent.
    seen = statuses(run_in_pty(pytester, "--llm-eval", "--llm-eval-budget=5", env=env))
    assert max(s["cached"] for s in seen) >= 2
    for s in seen:
        assert s["calls"] == 0 and s["cached"] == s["done"] and s["spent"] == 0.0, s
    assert len(judge_server.requests) == 4


@pytest.mark.parametrize(
    "args",
    [
        ("--llm-eval", "-q"),
        ("--llm-eval", "--llm-eval-no-progress"),
        ("--llm-eval", "-o", "llm_eval_no_progress=true"),
        ("--llm-eval", "-s"),
        (),  # without --llm-eval
    ],
    ids=["quiet", "option", "ini", "no-capture", "no-llm-eval"],
)
def test_absent_on_request(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    pytester.makepyfile(test_slow=SLOW.replace("0.25", "0.05"))
    raw = run_in_pty(pytester, *args)
    assert "passed" in raw or "skipped" in raw or "5 passed" in raw
    assert "llm-eval:" not in raw
    assert "in flight" not in raw


def test_absent_when_output_is_not_a_terminal(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SLOW.replace("0.25", "0.05"))
    result = pytester.runpytest_subprocess("--llm-eval", "--color=yes")
    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    assert "llm-eval:" not in out and "in flight" not in out


def test_eta_from_the_recent_rate(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    tw = types.SimpleNamespace(_file=_Tty(), fullwidth=80)
    progress = Progress(config, tw, None)
    try:
        progress.total = 10
        progress.first_start = 100.0
        assert progress.eta(101.0) is None  # nothing done yet
        for t in (102.0, 104.0):
            progress.finished.add(f"t{t}")
            progress.completions.append(t)
        # 2 done in 4 s (up to now), 8 left: 16 s
        assert progress.eta(104.0) == pytest.approx(16.0)
        assert progress.eta(108.0) == pytest.approx(32.0)  # slower while nothing finishes
    finally:
        progress.close()
    assert tw._file is not progress.file
