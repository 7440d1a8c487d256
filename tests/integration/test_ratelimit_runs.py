"""One rate limit for the run and the fleet (--llm-eval-rpm, --llm-eval-tpm): the bucket's
arithmetic, four xdist workers against the test server, two "machines" sharing a real
redis-server, tokens reserved and settled, Redis failing mid-run, and bad values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ratelimit_support import INI, TESTS, WHO, YES, _arrivals, max_in_window, posix_only

from pytest_llmeval.testing import OpenAITestServer


@pytest.fixture
def project(pytester: pytest.Pytester, judge_server: OpenAITestServer) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-rate-SECRET")
    for name in ("LLM_EVAL_RPM", "LLM_EVAL_TPM", "LLM_EVAL_RATE_BURST", "LLM_EVAL_CACHE_URL"):
        pytester._monkeypatch.delenv(name, raising=False)
    run_tmp = pytester.path / "run-tmp"  # this run's own temporary directory
    run_tmp.mkdir()
    pytester._monkeypatch.setenv("TMPDIR", str(run_tmp))
    judge_server.set_default(YES)
    return pytester


@posix_only
def test_four_xdist_workers_share_one_rpm(
    project: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """120 rpm = 2 requests a second, burst 2: in any second at most 2 + 2 requests start,
    and 10 requests take at least (10 - 2) / 2 = 4 s. Four separate limits would let all 10 go
    within a second."""
    pytest.importorskip("xdist")
    project.makepyfile(test_judged=TESTS.format(n=10))
    result = project.runpytest_subprocess("-n", "4", "--llm-eval-rpm", "120", "-p", "no:randomly")
    result.assert_outcomes(passed=10)
    times = _arrivals(judge_server)
    assert len(times) == 10
    workers = {m.group(1) for r in judge_server.requests for m in [WHO.search(json.dumps(r.body))]}
    most = max_in_window(times)
    span = max(times) - min(times)
    print(f"4 workers, --llm-eval-rpm 120: max {most} requests in a 1 s window, span {span:.2f} s")
    assert most <= 2 + 2, times
    # the bucket allows no less than 4 s between the first and the last start; arrivals may
    # come a little closer (the first request of a fresh process takes longer to arrive)
    assert span >= 4.0 * 0.8, times
    assert workers == {"gw0", "gw1", "gw2", "gw3"}, workers
    out = result.stdout.str()
    assert "rate limit 120 rpm (burst 2) for this machine's run (file lock): " in out
    assert not list((project.path / "run-tmp").glob("llmeval-rate-*"))  # the file is removed


STOPS_REDIS = """
import os

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pytest_llmeval import assert_score


def test_a_first():
    assert_score("l3score", input="main@- q first?", expected="a", output="a", min=0.5)
    port = int(os.environ["REDIS_PORT"])
    redis.Redis(port=port, retry=Retry(NoBackoff(), 0)).shutdown(nosave=True)


@pytest.mark.parametrize("i", range(6))
def test_after(i):
    assert_score("l3score", input=f"main@- q{i}?", expected="a", output="a", min=0.5)
"""


@posix_only
def test_redis_stopped_mid_run_the_run_goes_on_limited_and_says_so(
    project: pytest.Pytester, judge_server: OpenAITestServer, own_redis: Any
) -> None:
    project.makepyfile(test_stops=STOPS_REDIS)
    project._monkeypatch.setenv("REDIS_PORT", str(own_redis.port))
    result = project.runpytest_subprocess(
        "--llm-eval-rpm", "120", "--llm-eval-cache-url", own_redis.url, "-p", "no:randomly"
    )
    result.assert_outcomes(passed=7)  # never an error
    out = result.stdout.str()
    failed = f"the shared rate limit in Redis {own_redis.url} failed (ConnectionError)"
    assert out.count(failed) == 1
    assert "(Redis failed in 1 process: limited locally from then on)" in out
    after = _arrivals(judge_server)[1:]  # the file bucket, full: 2 at once, then 2 a second
    assert len(after) == 6 and max(after) - min(after) >= 2.0 - 0.8, after


def test_redis_unreachable_at_start_limits_the_machine_and_says_so(
    project: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    pytest.importorskip("redis")
    from redis_server import free_port

    project.makepyfile(test_judged=TESTS.format(n=6))
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = project.runpytest_subprocess(
        "--llm-eval-rpm", "120", "--llm-eval-cache-url", url, "-p", "no:randomly"
    )
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert out.count("hold for this machine's run only (120 rpm (burst 2), file lock)") == 1
    assert "rate limit 120 rpm (burst 2) for this machine's run (file lock): " in out
    times = _arrivals(judge_server)
    assert max(times) - min(times) >= 2.0 - 0.8  # 6 requests: 2 at once, then 2 a second


RPM = "--llm-eval-rpm / ini llm_eval_rpm / env LLM_EVAL_RPM"


TPM = "--llm-eval-tpm / ini llm_eval_tpm / env LLM_EVAL_TPM"


@pytest.mark.parametrize(
    ("args", "ini", "env", "message", "given"),
    [
        (["--llm-eval-rpm", "0"], "", {}, f"{RPM}: '0' is not a", "--llm-eval-rpm"),
        (["--llm-eval-rpm", "-5"], "", {}, f"{RPM}: '-5' is not a", "--llm-eval-rpm"),
        (["--llm-eval-rpm", "1.5"], "", {}, f"{RPM}: '1.5' is not a", "--llm-eval-rpm"),
        (["--llm-eval-tpm", "lots"], "", {}, f"{TPM}: 'lots' is not", "--llm-eval-tpm"),
        ([], "llm_eval_tpm = 0\n", {}, f"{TPM}: '0' is not a", "ini llm_eval_tpm"),
        ([], "", {"LLM_EVAL_RPM": "-1"}, f"{RPM}: '-1' is not a positive", "env LLM_EVAL_RPM"),
        (
            ["--llm-eval-rpm", "60", "--llm-eval-rate-burst", "0"],
            "",
            {},
            "--llm-eval-rate-burst / ini llm_eval_rate_burst / env LLM_EVAL_RATE_BURST: '0' is "
            "not a positive number of",
            "--llm-eval-rate-burst",
        ),
    ],
)
def test_bad_values_are_clear_errors_naming_the_option(
    pytester: pytest.Pytester,
    args: list[str],
    ini: str,
    env: dict[str, str],
    message: str,
    given: str,
) -> None:
    pytester.makeini("[pytest]\n" + ini)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    for name in ("LLM_EVAL_RPM", "LLM_EVAL_TPM", "LLM_EVAL_RATE_BURST"):
        pytester._monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        pytester._monkeypatch.setenv(name, value)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert "per minute" in result.stderr.str() or "seconds" in result.stderr.str()
    assert result.stderr.lines[0].endswith(f"(given by {given})")


BROKEN_HASHES = [
    pytest.param({"t": "NOW", "r": "-1e18", "k": "10"}, "r=-1e18", id="negative-requests"),
    pytest.param({"t": "NOW", "r": "1", "k": "-1e300"}, "k=-1e300", id="absurd-debt"),
    pytest.param({"t": "NOW", "r": "nan", "k": "10"}, "r=nan", id="nan"),
    pytest.param({"t": "NOW", "r": "inf", "k": "10"}, "r=inf", id="infinity"),
    pytest.param({"t": "NOW", "r": "lots", "k": "10"}, "r=lots", id="not-a-number"),
    pytest.param({"t": "NOW", "r": "1e300", "k": "10"}, "r=1e300", id="above-capacity"),
    pytest.param({"t": "1e18", "r": "1", "k": "10"}, "t=1e18", id="future"),
    pytest.param({"r": "1"}, "t=nil", id="partial"),
    pytest.param("a string", "a string, not a hash", id="wrong-type"),
]


@pytest.mark.parametrize(("state", "shown"), BROKEN_HASHES)
def test_a_broken_redis_bucket_is_reset_with_one_warning_and_never_hangs(
    project: pytest.Pytester,
    judge_server: OpenAITestServer,
    redis_server: Any,
    state: Any,
    shown: str,
) -> None:
    """A hash written by hand (or by a broken client) with a negative, absurd, NaN or
    non-numeric count, a time in the future, missing fields or the wrong type: the run
    finishes at its rate with one warning naming the key, instead of waiting for ever (or not
    limiting at all, for NaN)."""
    import redis

    prefix = f"t-broken-{shown.split('=')[0].replace(' ', '')}-{len(shown)}:"
    key = prefix + "ratelimit"
    client = redis.Redis(port=redis_server.port)
    client.delete(key)
    if isinstance(state, dict):
        now = client.time()
        filled = {f: v.replace("NOW", f"{now[0]}.{now[1]:06d}") for f, v in state.items()}
        client.hset(key, mapping=filled)
    else:
        client.set(key, state)
    project.makepyfile(test_judged=TESTS.format(n=4))
    started = time.monotonic()
    result = project.runpytest_subprocess(
        "--llm-eval-rpm", "240", "--llm-eval-tpm", "600000",
        "--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", prefix,
        "-p", "no:randomly", "-W", "always",
        timeout=120,
    )  # fmt: skip
    took = time.monotonic() - started
    result.assert_outcomes(passed=4)
    out = result.stdout.str() + result.stderr.str()
    warning = f"the rate-limit bucket {key!r} in Redis {redis_server.url} was broken ("
    assert out.count(warning) == 1, out
    assert shown in out, out
    assert "it is reset (full)" in out
    # 4 requests at 4 a second, burst 4: no wait; generous for a loaded machine, far below any
    # wait the broken state asked for
    assert took < 60, took
    level = client.hgetall(key)
    assert 0.0 <= float(level[b"r"]) <= 4.0 and float(level[b"k"]) <= 10_000.0
    client.delete(key)
    client.close()


def test_a_read_only_redis_user_limits_each_machine_with_its_file_and_says_why(
    project: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    """The README's pull-request user may not write, so it may not run the bucket's script: its
    run limits itself with the run's file (never unlimited), says so once, and passes."""
    import redis
    from redis_server import start
    from redis_store_support import readme_acl

    for server in start():
        admin = redis.Redis(port=server.port)
        for args in readme_acl():
            args = [a.replace("PR_PASSWORD", "pr-Pw-2") for a in args]
            admin.execute_command("ACL", "SETUSER", *args)
        admin.close()
        url = f"redis://llmeval-pr:pr-Pw-2@127.0.0.1:{server.port}/0"
        project.makepyfile(test_judged=TESTS.format(n=6))
        result = project.runpytest_subprocess(
            "--llm-eval-rpm", "120", "--llm-eval-cache-url", url, "-p", "no:randomly",
            "-W", "always", timeout=120,
        )  # fmt: skip
        result.assert_outcomes(passed=6)
        out = result.stdout.str() + result.stderr.str()
        assert out.count("the Redis user may not run the rate-limit script") == 1, out
        assert "(NOPERM: a read-only user); judge requests are now limited to 120 rpm" in out
        assert "for this machine's run (file lock) only, not for the fleet" in out
        assert "pr-Pw-2" not in out
        times = _arrivals(judge_server)
        assert max(times) - min(times) >= 2.0 - 0.8  # 6 requests at 2 a second, burst 2


#: Both "machines" judge together (so that they overlap, and two separate limits would show):
#: each says it is ready, then waits for the other; and again once each made its first call.
BARRIER = """
import os
import time
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def both_machines_ready():
    # The judge's heavy imports first: on a loaded machine they took seconds, long enough for
    # the other machine to finish judging before this one began.
    import openai  # noqa: F401
    import pytest_llmeval.judge.client  # noqa: F401

    _wait_for_both("ready")


def _wait_for_both(step):
    ready = Path(os.environ["BARRIER_DIR"])
    (ready / f"{os.environ['MACHINE']}-{step}").touch()
    deadline = time.monotonic() + 60
    while len(list(ready.glob(f"*-{step}"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def both_judged_once(request):
    # Before each machine's second case, both have made their first judge call: the rest of
    # their calls then go out while the other machine is judging too (on a loaded machine one
    # machine once reached its first call after the other had made all six).
    if request.node.name == "test_judged[1]":
        _wait_for_both("judged")
"""


def _machine(root: Path, name: str, n: int) -> Path:
    path = root / name
    (path / "tmp").mkdir(parents=True)
    (path / "test_fleet.py").write_text(TESTS.format(n=n))
    (path / "conftest.py").write_text(BARRIER)
    (path / "pytest.ini").write_text(INI)
    return path


def _start(path: Path, server: OpenAITestServer, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    for name in ("LLM_EVAL_RPM", "LLM_EVAL_TPM", "LLM_EVAL_RATE_BURST", "LLM_EVAL_CACHE_URL"):
        env.pop(name, None)
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-rate-SECRET",
        TMPDIR=str(path / "tmp"),
        MACHINE=path.name,
        BARRIER_DIR=str(path.parent / "ready"),
    )
    argv = [sys.executable, "-m", "pytest", str(path), "--rootdir", str(path)]
    argv += ["-p", "no:cacheprovider", "-p", "no:randomly", "--llm-eval", *args]
    return subprocess.Popen(
        argv, cwd=path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_two_machines_share_one_rpm_through_redis(
    tmp_path: Path, judge_server: OpenAITestServer, redis_server: Any
) -> None:
    """Two runs (standing for two machines, each with its own file limit) share the bucket in
    Redis: 12 requests at 120 rpm in all, at most 2 + 2 in any second, at least 5 s. Each
    limiting alone would let both go at 2 a second (done in about 2 s)."""
    judge_server.set_default(YES)
    prefix = "t-rate-fleet:"
    opts = ("--llm-eval-rpm", "120", "--llm-eval-cache-url", redis_server.url)
    opts += ("--llm-eval-cache-prefix", prefix)
    machines = [_machine(tmp_path, name, 6) for name in ("a", "b")]
    (tmp_path / "ready").mkdir()
    procs = [_start(m, judge_server, *opts) for m in machines]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out
        assert "6 passed" in out
    times = _arrivals(judge_server)
    assert len(times) == 12
    by_machine: dict[str, list[float]] = {"a": [], "b": []}
    for r in judge_server.requests:
        match = WHO.search(json.dumps(r.body))
        assert match is not None
        by_machine[match.group(2)].append(r.received_at)
    assert [len(v) for v in by_machine.values()] == [6, 6]
    # They judged at the same time: each machine's requests began before the other's ended (run
    # one after the other, two separate limits would also have taken 5 s). How long the spans
    # overlap depends on which machine the shared bucket served first (0.99 s was seen).
    overlap = min(max(v) for v in by_machine.values()) - max(min(v) for v in by_machine.values())
    assert overlap > 0, by_machine
    most = max_in_window(times)
    span = max(times) - min(times)
    print(f"2 machines via Redis, --llm-eval-rpm 120: max {most} in a 1 s window, {span:.2f} s")
    assert most <= 2 + 2, times
    assert span >= 5.0 * 0.8, times  # each machine alone: about 2 s
    shared = f"for every machine sharing Redis {redis_server.url} (key '{prefix}ratelimit')"
    assert all(shared in out for out in outs)
    import redis

    client = redis.Redis(port=redis_server.port)
    assert client.exists(prefix + "ratelimit") == 1
    assert 0 < client.pttl(prefix + "ratelimit") <= 62_000  # expires once idle and full
    client.close()
