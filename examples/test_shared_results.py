"""Two machines share judgements through Redis, then the cache tools look at what is stored.

Needs a `redis-server` binary (Debian: `apt-get install redis-server`) and redis-py
(`pip install ".[redis]"`); without them this example is skipped and says why. It starts its
own throwaway server on 127.0.0.1, so nothing else is touched. The same steps in a shell:

    # machine A judges and stores in its local cache and in Redis
    pytest --llm-eval --llm-eval-cache-url redis://cache.internal:6379/0
    # machine B (another checkout, empty .llmeval/): every judgement comes from Redis
    pytest --llm-eval --llm-eval-cache-url redis://cache.internal:6379/0
    # what is stored, by scorer, version and judge model
    python -m pytest_llmeval cache stats --url redis://cache.internal:6379/0
    # move it: export from Redis, import into a local cache (or commit the JSONL file)
    python -m pytest_llmeval cache export --url redis://cache.internal:6379/0 -o cache.jsonl
    python -m pytest_llmeval cache import cache.jsonl --dir .llmeval
    # after an outage that outlasted a run: send the local results to Redis
    python -m pytest_llmeval cache push --url redis://cache.internal:6379/0
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CASES = [
    {"id": "france", "input": "What is the capital of France?", "expected": "Paris"},
    {"id": "hamlet", "input": "Who wrote Hamlet?", "expected": "William Shakespeare"},
]

PROJECT_TEST = """
import pytest
from pytest_llmeval import assert_score

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "Who wrote Hamlet?": "Hamlet was written by William Shakespeare.",
}

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_answers(case):
    assert_score("l3score", input=case.input, expected=case.expected,
                 output=ANSWERS[case.input], min=0.5)
"""


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A throwaway redis-server on a free port (skips when none is installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    redis = pytest.importorskip(
        "redis", reason='redis-py is not installed (pip install ".[redis]")'
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL)
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 15
            while True:
                try:
                    client.ping()
                    break
                except redis.RedisError:
                    assert time.monotonic() < deadline, "redis-server did not start"
                    time.sleep(0.05)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


def _machine(root: Path) -> Path:
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    (root / "test_answers.py").write_text(PROJECT_TEST)
    return root


def _pytest(root: Path, url: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LLM_EVAL_CACHE_URL"}
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--llm-eval", "-p", "no:cacheprovider"),
            *("--llm-eval-cache-url", url, "--llm-eval-cache-required"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def _cache(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.llm_eval
def test_a_second_machine_takes_its_judgements_from_redis(redis_url: str, tmp_path: Path) -> None:
    a = _machine(tmp_path / "machine-a")
    b = _machine(tmp_path / "machine-b")
    first = _pytest(a, redis_url)
    assert "2 scores, 0 from cache, 2 judge calls" in first
    second = _pytest(b, redis_url)
    assert "2 scores, 2 from cache, 0 judge calls" in second  # nothing judged twice

    stats = _cache("stats", "--url", redis_url, cwd=tmp_path)
    print(stats)
    assert stats.startswith(f"result store: Redis {redis_url} (prefix 'llmeval:')")
    row = next(line for line in stats.splitlines() if line.startswith("l3score"))
    assert row.split()[3] == "2"  # scorer, version, judge model, entries

    # Export from Redis, import into a fresh local cache: the same two entries.
    exported = tmp_path / "cache.jsonl"
    _cache("export", "--url", redis_url, "-o", str(exported), cwd=tmp_path)
    lines = exported.read_text().splitlines()
    assert [json.loads(line)["scorer"] for line in lines] == ["l3score", "l3score"]
    print(_cache("import", str(exported), "--dir", "copy", cwd=tmp_path))
    again = tmp_path / "again.jsonl"
    _cache("export", "--dir", "copy", "-o", str(again), cwd=tmp_path)
    assert again.read_text() == exported.read_text()  # lines round-trip exactly
