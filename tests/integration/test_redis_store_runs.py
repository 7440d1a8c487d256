"""The mode wrappers (store_modes) and the Redis result store, against a real redis-server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_store_support import HMAC_SECRET, _redis, readme_acl

CONFTEST = """
import os
from pathlib import Path
from pytest_llmeval import Score, Scorer, register

@register
class Counted(Scorer):
    name = "counted"
    def compute(self, inputs, ctx):
        # One line per computation, appended: atomic across xdist workers.
        with Path(os.environ["COUNTER_FILE"]).open("a") as fh:
            fh.write("x\\n")
        return Score(scorer=self.name, value=0.75)

@register
class CountedJudge(Counted):
    name = "counted_judge"
    uses_judge = True  # replay stands in for it: a miss is an error
"""


TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(3))
def test_case(i):
    assert_score("counted", output=f"answer {i}", min=0.5)
"""


JUDGE_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(2))
def test_judged(i):
    assert_score("counted_judge", output=f"answer {i}", min=0.5)
"""


def _machine(pytester: pytest.Pytester, name: str, tests: str = TESTS) -> Path:
    root = pytester.mkdir(name)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_x.py").write_text(tests)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def _run(
    pytester: pytest.Pytester, root: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[pytest.RunResult, int]:
    counter = root / "count.txt"
    counter.unlink(missing_ok=True)
    pytester.chdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COUNTER_FILE", str(counter))
        mp.delenv("LLM_EVAL_CACHE_URL", raising=False)
        mp.delenv("LLM_EVAL_REDIS_PASSWORD", raising=False)
        for k, v in (env or {}).items():
            mp.setenv(k, v)
        result = pytester.runpytest_subprocess(
            str(root), "--rootdir", str(root), "--llm-eval", "-p", "no:cacheprovider", *args
        )
    return result, len(counter.read_text().splitlines()) if counter.exists() else 0


def test_two_machines_share_results_and_keys_carry_the_ttl(
    pytester: pytest.Pytester, redis_server: Any
) -> None:
    client = _redis(redis_server)
    prefix = "t-share:"
    a, b = _machine(pytester, "a"), _machine(pytester, "b")
    opts = ("--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", prefix)
    res, calls = _run(pytester, a, *opts, "--llm-eval-cache-ttl", "600")
    res.assert_outcomes(passed=3)
    assert calls == 3
    keys = client.keys(prefix + "*")
    assert len(keys) == 3
    for k in keys:
        assert 0 < client.ttl(k) <= 600
        entry = json.loads(client.get(k))
        assert entry["scorer"] == "counted" and entry["value"]["value"] == 0.75
    # The second machine: its own empty local cache, zero computations.
    res, calls = _run(pytester, b, *opts)
    res.assert_outcomes(passed=3)
    assert calls == 0
    # The Redis hits were written to b's local store: without Redis, still zero computations.
    client.flushdb()
    res, calls = _run(pytester, b)
    res.assert_outcomes(passed=3)
    assert calls == 0
    client.close()


def test_modes_over_redis(pytester: pytest.Pytester, redis_server: Any) -> None:
    client = _redis(redis_server)
    prefix = "t-modes:"
    opts = ("--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", prefix)
    a, b, c = _machine(pytester, "a"), _machine(pytester, "b"), _machine(pytester, "c")
    res, calls = _run(pytester, a, *opts, "--llm-eval-cache=off")
    res.assert_outcomes(passed=3)
    assert calls == 3 and client.keys(prefix + "*") == []  # off: nothing stored
    res, calls = _run(pytester, a, *opts, "--llm-eval-cache=use")
    assert calls == 3 and len(client.keys(prefix + "*")) == 3
    res, calls = _run(pytester, a, *opts, "--llm-eval-cache=refresh")
    res.assert_outcomes(passed=3)
    assert calls == 3  # refresh reads neither local nor Redis
    # Replay on a fresh machine reads Redis, computes nothing and writes nothing.
    client.set(prefix + "sentinel", "x")
    before = sorted(client.keys(prefix + "*"))
    res, calls = _run(pytester, b, *opts, "--llm-eval-cache=replay")
    res.assert_outcomes(passed=3)
    assert calls == 0 and sorted(client.keys(prefix + "*")) == before
    # use on another machine with a damaged Redis entry: a miss, recomputed and rewritten.
    victim = next(k for k in before if not k.endswith(b"sentinel"))
    client.set(victim, b"{not json")
    res, calls = _run(pytester, c, *opts)
    res.assert_outcomes(passed=3)
    assert calls == 1 and json.loads(client.get(victim))["value"]["value"] == 0.75
    client.close()


def test_replay_over_redis_misses_are_errors_and_hits_stand_in_for_the_judge(
    pytester: pytest.Pytester, redis_server: Any
) -> None:
    opts = ("--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", "t-replay:")
    a, b = _machine(pytester, "a", JUDGE_TESTS), _machine(pytester, "b", JUDGE_TESTS)
    res, calls = _run(pytester, b, *opts, "--llm-eval-cache=replay")
    res.assert_outcomes(errors=2)  # nothing recorded yet: each case says it missed
    out = res.stdout.str()
    assert calls == 0
    for i in (0, 1):
        assert (
            f"no cached result (case test_judged[{i}]): not in the shared Redis store "
            f"{redis_server.url} (prefix 't-replay:')"
        ) in out
    res, calls = _run(pytester, a, *opts)
    res.assert_outcomes(passed=2)
    assert calls == 2
    res, calls = _run(pytester, b, *opts, "--llm-eval-cache=replay")
    res.assert_outcomes(passed=2)
    assert calls == 0


def test_unreachable_at_start_warns_once_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("xdist")
    from redis_server import free_port

    a = _machine(pytester, "a")
    url = f"redis://127.0.0.1:{free_port()}/0"
    res, calls = _run(pytester, a, "--llm-eval-cache-url", url, "-n", "2")
    res.assert_outcomes(passed=3)
    assert calls == 3 and res.stdout.str().count("is unavailable") == 1


def test_wrong_password_warns_once_without_the_password(
    pytester: pytest.Pytester, redis_server_auth: Any
) -> None:
    a = _machine(pytester, "a")
    url = f"redis://:wrong-PASSWORD-123@127.0.0.1:{redis_server_auth.port}/0"
    res, calls = _run(pytester, a, "--llm-eval-cache-url", url, "-W", "always")
    res.assert_outcomes(passed=3)
    out = res.stdout.str() + res.stderr.str()
    assert "wrong-PASSWORD-123" not in out
    where = f"Redis result store redis://***@127.0.0.1:{redis_server_auth.port}/0"
    assert out.count(f"{where} is unavailable: AuthenticationError") == 1  # said once at start
    assert "uses the local result cache only until Redis answers" in out
    # ... and at the end: the results stay local, with the command that pushes them later.
    assert f"llm-eval: {where} is still unavailable (AuthenticationError" in out
    assert "the 3 results computed while it was away remain in the local result cache" in out
    res, calls = _run(pytester, a, "--llm-eval-cache-url", url, "--llm-eval-cache-required")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stdout.str() + res.stderr.str()
    assert "unavailable" in err and "wrong-PASSWORD-123" not in err and calls == 0


def test_password_from_the_environment(pytester: pytest.Pytester, redis_server_auth: Any) -> None:
    a, b = _machine(pytester, "a"), _machine(pytester, "b")
    env = {
        "LLM_EVAL_CACHE_URL": redis_server_auth.url,
        "LLM_EVAL_REDIS_PASSWORD": "s3cret-Pa55-xyz",
    }
    res, calls = _run(pytester, a, "--llm-eval-cache-required", env=env)
    res.assert_outcomes(passed=3)
    assert calls == 3
    res, calls = _run(pytester, b, "--llm-eval-cache-required", env=env)
    res.assert_outcomes(passed=3)
    assert calls == 0
    assert "s3cret-Pa55-xyz" not in res.stdout.str() + res.stderr.str()


def test_unreachable_at_start_warns_once_and_runs_on_local(pytester: pytest.Pytester) -> None:
    pytest.importorskip("redis")
    from redis_server import free_port

    a = _machine(pytester, "a")
    url = f"redis://127.0.0.1:{free_port()}/0"
    res, calls = _run(pytester, a, "--llm-eval-cache-url", url)
    res.assert_outcomes(passed=3)
    out = res.stdout.str()
    assert calls == 3 and out.count("is unavailable") == 1
    res, calls = _run(pytester, a, "--llm-eval-cache-url", url)
    assert calls == 0  # the local store kept the results
    res, _ = _run(pytester, a, "--llm-eval-cache-url", url, "--llm-eval-cache-required")
    assert res.ret == pytest.ExitCode.USAGE_ERROR


def test_ini_settings_prefix_and_ttl(pytester: pytest.Pytester, redis_server: Any) -> None:
    a = _machine(pytester, "a")
    (a / "pytest.ini").write_text(
        f"[pytest]\nllm_eval_cache_url = {redis_server.url}\n"
        "llm_eval_cache_prefix = t-ini/\nllm_eval_cache_ttl = 120\nllm_eval_cache_required = true\n"
    )
    res, calls = _run(pytester, a)
    res.assert_outcomes(passed=3)
    client = _redis(redis_server)
    keys = client.keys("t-ini/*")
    assert calls == 3 and len(keys) == 3 and all(0 < client.ttl(k) <= 120 for k in keys)
    client.close()


OUTAGE_CONFTEST = """
import json, os, signal, socket, subprocess, time
from pathlib import Path

import pytest

def _answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False

@pytest.fixture
def kill_redis():
    def kill():
        # Under xdist the cases before the outage may run on another worker: wait for them.
        deadline = time.monotonic() + 60
        while len(list(Path(os.environ["OUTAGE_MARK"]).parent.glob("before-*.mark"))) < 3:
            assert time.monotonic() < deadline, "the cases before the outage never ran"
            time.sleep(0.02)
        os.kill(int(os.environ["REDIS_PID"]), signal.SIGKILL)
        port = int(os.environ["REDIS_PORT"])
        while _answers(port):
            time.sleep(0.02)
        Path(os.environ["OUTAGE_MARK"]).write_text("down")
    return kill

@pytest.fixture
def wait_for_outage():
    def wait():
        deadline = time.monotonic() + 60
        while not Path(os.environ["OUTAGE_MARK"]).exists():
            assert time.monotonic() < deadline, "the outage never started"
            time.sleep(0.02)
    return wait

RESTARTED = []

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # The last step of the run, before the plugin pushes: Redis is back (same port, same data).
    if hasattr(session.config, "workerinput") or not os.environ.get("RESTART_REDIS"):
        return
    proc = subprocess.Popen(
        json.loads(os.environ["REDIS_ARGV"]), cwd=os.environ["REDIS_DIR"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    RESTARTED.append(proc)  # the test's own cleanup stops it
    Path(os.environ["REDIS_RESTARTED_PID"]).write_text(str(proc.pid))
    port = int(os.environ["REDIS_PORT"])
    while not _answers(port):
        time.sleep(0.02)
"""


OUTAGE_TESTS = """
import os
from pathlib import Path

import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(3))
def test_a_before(i):
    assert_score("counted", output=f"before {i}", min=0.5)
    if "OUTAGE_MARK" in os.environ:
        (Path(os.environ["OUTAGE_MARK"]).parent / f"before-{i}.mark").write_text("done")

def test_b_redis_goes_away(kill_redis):
    kill_redis()

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(4))
def test_c_during(i, wait_for_outage):
    wait_for_outage()
    assert_score("counted", output=f"during {i}", min=0.5)
"""


def _outage_run(
    pytester: pytest.Pytester, server: Any, root: Path, restart: bool, *args: str
) -> tuple[pytest.RunResult, int]:
    env = {
        "REDIS_PID": str(server.proc.pid),
        "REDIS_PORT": str(server.port),
        "REDIS_ARGV": json.dumps(server.argv),
        "REDIS_DIR": server.directory,
        "REDIS_RESTARTED_PID": str(Path(server.directory) / "restarted.pid"),
        "OUTAGE_MARK": str(root / "outage.mark"),
    }
    if restart:
        env["RESTART_REDIS"] = "1"
    return _run(pytester, root, *args, "-W", "always", env=env)


def _outage_machine(pytester: pytest.Pytester, name: str) -> Path:
    root = _machine(pytester, name, OUTAGE_TESTS)
    (root / "conftest.py").write_text(CONFTEST + OUTAGE_CONFTEST)
    return root


def _quiet_machine(pytester: pytest.Pytester, name: str) -> Path:
    """Another machine running the same tests while Redis stays up."""
    tests = OUTAGE_TESTS.replace("kill_redis()", "pass").replace("wait_for_outage()", "pass")
    root = _machine(pytester, name, tests)
    (root / "conftest.py").write_text(CONFTEST + OUTAGE_CONFTEST)
    return root


def _result_keys(client: Any, prefix: str) -> list[bytes]:
    return sorted(k for k in client.keys(prefix + "*") if len(k) == len(prefix) + 64)


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist-2"])
def test_outage_mid_run_results_are_pushed_when_redis_is_back(
    pytester: pytest.Pytester, restartable_redis: Any, workers: int
) -> None:
    if workers:
        pytest.importorskip("xdist")
    server = restartable_redis
    prefix = "t-outage:"
    opts = ["--llm-eval-cache-url", server.url, "--llm-eval-cache-prefix", prefix]
    opts += ["-n", str(workers)] if workers else []
    a = _outage_machine(pytester, "a")
    res, calls = _outage_run(pytester, server, a, True, *opts)
    res.assert_outcomes(passed=8)
    assert calls == 7  # every case scored once: the outage did not stop the run
    out = res.stdout.str()
    assert out.count("stopped answering") >= 1  # one warning per process that met it
    assert (
        f"llm-eval: Redis result store {server.url} did not answer during part of the run; "
        "4 results computed meanwhile pushed to it now"
    ) in out
    assert "remain in the local result cache" not in out
    # Nothing lost: the 3 results from before and the 4 from during the outage are in Redis.
    client = _redis(server)
    keys = _result_keys(client, prefix)
    assert len(keys) == 7
    for k in keys:
        entry = json.loads(client.get(k))
        assert entry["scorer"] == "counted" and entry["value"]["value"] == 0.75
        assert entry["created"] > 0 and entry["parts"]["version"] == "1"
    client.close()
    # A second machine: an empty local store, everything from Redis, zero computations.
    b = _quiet_machine(pytester, "b")
    res, calls = _run(pytester, b, *opts)
    res.assert_outcomes(passed=8)
    assert calls == 0


def test_outage_until_the_end_leaves_results_local_and_cache_push_sends_them(
    pytester: pytest.Pytester, restartable_redis: Any
) -> None:
    server = restartable_redis
    prefix = "t-outage-end:"
    opts = ("--llm-eval-cache-url", server.url, "--llm-eval-cache-prefix", prefix)
    a = _outage_machine(pytester, "a")
    res, calls = _outage_run(pytester, server, a, False, *opts)
    res.assert_outcomes(passed=8)
    assert calls == 7
    out = res.stdout.str()
    assert "did not answer during part of the run" not in out
    command = (
        f"python -m pytest_llmeval cache push --dir {a / '.llmeval'} --url {server.url} "
        f"--prefix {prefix}"
    )
    assert (
        f"llm-eval: Redis result store {server.url} is still unavailable (ConnectionRefusedError "
        f"connecting to 127.0.0.1:{server.port}: [Errno 111] Connection refused); "
    ) in out
    assert "the 4 results computed while it was away remain in the local result cache only" in out
    assert f"push when it is back: {command}" in out.replace("\n", "")
    # Redis comes back (with the 3 results from before); the suggested command pushes the rest.
    server.start()
    client = _redis(server)
    assert len(_result_keys(client, prefix)) == 3
    pushed = subprocess.run(
        [sys.executable, *command.split()[1:]], capture_output=True, text=True, cwd=a
    )
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip().splitlines()[-1] == (
        f"pushed 4 entries to Redis {server.url} (prefix {prefix!r}); 3 were already there"
    )
    assert len(_result_keys(client, prefix)) == 7
    client.close()
    b = _quiet_machine(pytester, "b")
    res, calls = _run(pytester, b, *opts)
    res.assert_outcomes(passed=8)
    assert calls == 0


def test_down_at_start_the_results_are_pushed_when_it_is_back_at_the_end(
    pytester: pytest.Pytester, restartable_redis: Any
) -> None:
    server = restartable_redis
    prefix = "t-down-start:"
    opts = ("--llm-eval-cache-url", server.url, "--llm-eval-cache-prefix", prefix)
    a = _quiet_machine(pytester, "a")
    server.stop()
    env = {
        "REDIS_PORT": str(server.port),
        "REDIS_ARGV": json.dumps(server.argv),
        "REDIS_DIR": server.directory,
        "REDIS_RESTARTED_PID": str(Path(server.directory) / "restarted.pid"),
        "RESTART_REDIS": "1",
    }
    res, calls = _run(pytester, a, *opts, "-n", "2", env=env)
    res.assert_outcomes(passed=8)
    out = res.stdout.str()
    assert calls == 7 and out.count("uses the local result cache only until Redis answers") == 1
    assert (
        f"llm-eval: Redis result store {server.url} did not answer during part of the run; "
        "7 results computed meanwhile pushed to it now"
    ) in out
    client = _redis(server)
    assert len(_result_keys(client, prefix)) == 7
    client.close()
    res, calls = _run(pytester, _quiet_machine(pytester, "b"), *opts)
    res.assert_outcomes(passed=8)
    assert calls == 0


GATED_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_gate("counted", min_mean=0.9)
@pytest.mark.parametrize("i", range(3))
def test_gated(i):
    assert_score("counted", output=f"answer {i}")
"""


def _gate_run(
    pytester: pytest.Pytester, root: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[pytest.RunResult, int, dict[str, Any]]:
    report = root / "report.json"
    report.unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LLM_EVAL_CACHE_HMAC_KEY", raising=False)
        res, calls = _run(pytester, root, f"--llm-eval-report={report}", *args, env=env)
    return res, calls, json.loads(report.read_text())


def _tamper(client: Any, prefix: str, change: Any) -> list[str]:
    """Apply ``change`` to the JSON of every result entry under ``prefix``; the keys."""
    keys = _result_keys(client, prefix)
    for name in keys:
        data = json.loads(client.get(name))
        client.set(name, change(data))
    return sorted(k.decode()[len(prefix) :] for k in keys)


def _local_values(root: Path) -> list[Any]:
    import sqlite3

    conn = sqlite3.connect(root / ".llmeval" / "results.sqlite3")
    rows = conn.execute("SELECT value FROM results ORDER BY key").fetchall()
    conn.close()
    return [json.loads(v)["value"] for (v,) in rows]


def _with(data: dict[str, Any], **value: Any) -> str:
    return json.dumps({**data, "value": {**data["value"], **value}})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: _with(d, value=100), "'value' 100 is outside the scorer's range [0.0, 1.0]"),
        (lambda d: _with(d, value="1"), "'value' is str '1', not a number"),
        (lambda d: _with(d, value=True), "'value' is bool True, not a number"),
        (lambda d: _with(d, value=1e300), "'value' 1e+300 is outside"),
        (lambda d: json.dumps(d).replace('"value": 0.75', '"value": NaN'), "NaN is not a JSON"),
    ],
    ids=["out-of-range", "string", "bool", "absurd", "nan"],
)
def test_a_tampered_redis_value_never_passes_a_gate_on_another_machine(
    pytester: pytest.Pytester, redis_server: Any, change: Any, problem: str
) -> None:
    """Finding 11/13 over Redis: the gate fails on machine a (0.75 < 0.9); an entry changed in
    Redis is a miss on machine b (under -n 2: no INTERNALERROR), recomputed (the gate still
    fails), written over in Redis, and b's local cache holds the recomputed value only."""
    client = _redis(redis_server)
    prefix = f"t-tamper-{len(problem)}:"
    opts = ("--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", prefix)
    a = _machine(pytester, "a", GATED_TESTS)
    b = _machine(pytester, "b", GATED_TESTS)
    res, calls, report = _gate_run(pytester, a, *opts)
    assert res.ret == 1 and calls == 3 and report["gates"][0]["verdict"] == "fail"
    keys = _tamper(client, prefix, change)
    res, calls, report = _gate_run(pytester, b, *opts, "-n", "2", "-W", "always::UserWarning")
    out = res.stdout.str()
    assert "INTERNALERROR" not in out
    assert res.ret == 1 and report["gates"][0]["verdict"] == "fail", out
    assert calls == 3 and [r["score"] for r in report["records"]] == [0.75] * 3
    assert f"Redis {redis_server.url} prefix {prefix!r}: invalid entry " in out
    assert any(k in out for k in keys) and problem in out, out
    assert _local_values(b) == [0.75] * 3
    assert [json.loads(client.get(prefix + k))["value"]["value"] for k in keys] == [0.75] * 3
    client.close()


def test_with_signing_a_forged_passing_score_in_redis_fails_the_gate(
    pytester: pytest.Pytester, redis_server: Any
) -> None:
    """Finding 12: a score inside the range (1.0) written into Redis by someone without the key
    would pass the gate on another machine; with LLM_EVAL_CACHE_HMAC_KEY it is a miss there."""
    client = _redis(redis_server)
    prefix = "t-forge:"
    opts = ("--llm-eval-cache-url", redis_server.url, "--llm-eval-cache-prefix", prefix)
    env = {"LLM_EVAL_CACHE_HMAC_KEY": HMAC_SECRET}
    a, b = _machine(pytester, "a", GATED_TESTS), _machine(pytester, "b", GATED_TESTS)
    res, calls, report = _gate_run(pytester, a, *opts, env=env)
    assert res.ret == 1 and calls == 3
    keys = _tamper(
        client, prefix, lambda d: _with({k: v for k, v in d.items() if k != "sig"}, value=1.0)
    )
    res, calls, report = _gate_run(pytester, b, *opts, "-W", "always::UserWarning", env=env)
    out = res.stdout.str()
    assert res.ret == 1 and report["gates"][0]["verdict"] == "fail", out
    assert calls == 3 and "it is not signed, and LLM_EVAL_CACHE_HMAC_KEY is set" in out
    assert any(k in out for k in keys)
    assert HMAC_SECRET not in out + res.stderr.str()
    # the rewritten entries are signed again: a third machine with the key reads them all
    res, calls, report = _gate_run(pytester, _machine(pytester, "c", GATED_TESTS), *opts, env=env)
    assert calls == 0 and res.ret == 1
    assert all(HMAC_SECRET not in v for v in (client.get(prefix + k).decode() for k in keys))
    client.close()


# The ACL of the trust model (docs/guides/caching.md), read from that page itself (the test keeps
# it true).


@pytest.fixture
def acl_redis() -> Iterator[Any]:
    """A redis-server of this test alone with the trust model's users (main and pr), their
    passwords filled in; the default user is switched off as the caching guide says."""
    from redis_server import start

    for server in start():
        import redis

        admin = redis.Redis(port=server.port)
        users = readme_acl()
        assert [u[0] for u in users] == ["llmeval-main", "llmeval-pr", "default"]
        for args in users:
            args = [
                a.replace("MAIN_PASSWORD", "main-Pw-1").replace("PR_PASSWORD", "pr-Pw-2")
                for a in args
            ]
            admin.execute_command("ACL", "SETUSER", *args)
        admin.close()
        yield server


def test_the_readme_acl_lets_main_write_and_pr_only_read(
    pytester: pytest.Pytester, acl_redis: Any
) -> None:
    """The pull-request user reads what the main branch's runs stored (no computation), and
    its run passes although it may not write: one warning says the store is read-only."""
    port = acl_redis.port
    main = f"redis://llmeval-main:main-Pw-1@127.0.0.1:{port}/0"
    pr = f"redis://llmeval-pr:pr-Pw-2@127.0.0.1:{port}/0"
    a = _machine(pytester, "a")
    res, calls = _run(pytester, a, "--llm-eval-cache-url", main, "--llm-eval-cache-required")
    res.assert_outcomes(passed=3)
    assert calls == 3
    b = _machine(pytester, "b", TESTS.replace("range(3)", "range(5)"))
    res, calls = _run(
        pytester, b, "--llm-eval-cache-url", pr, "--llm-eval-cache-required", "-W", "always"
    )
    res.assert_outcomes(passed=5)
    out = res.stdout.str() + res.stderr.str()
    assert calls == 2  # the 3 from main were read, 2 new ones computed
    assert out.count("this Redis user may not write (NoPermissionError") == 1, out
    assert "read-only for this run: stored results are still read" in out
    assert "pr-Pw-2" not in out and "stopped answering" not in out
    assert "still unavailable" not in out  # refused writes are not an outage
    import redis

    client = redis.Redis.from_url(main)
    assert len(list(client.scan_iter(match="llmeval:*"))) == 3  # the pr run wrote nothing
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis.Redis.from_url(pr).set("llmeval:" + "0" * 64, "{}")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=port).ping()  # the default user is off
    client.close()
