"""What several benchmarks start and write: the project's test judge server in a child process,
a throwaway redis-server, and the dataset of ``q{i}`` cases they all score.

Imported as ``_services`` by the scripts in this folder (``python benchmarks/bench_x.py`` puts
the folder first on ``sys.path``). The test suite has its own fixtures for the same services
(tests/conftest.py, tests/helpers/redis_server.py): those install, skip and report as tests do;
these start the service or stop the benchmark with a message.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class TestJudge:
    """The test server's addresses: ``base_url`` for the OpenAI client, and its statistics."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.stats_url = base_url.rsplit("/v1", 1)[0] + "/_test/stats"

    def stats(self, *, clear: bool = False) -> dict[str, Any]:
        """The server's request counts (``requests``, ``max_in_flight``...); ``clear=True`` also
        resets them (and returns the counts before the reset)."""
        req = urllib.request.Request(self.stats_url, data=b"{}" if clear else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            data: dict[str, Any] = json.loads(resp.read())
        return data

    def judge_calls(self, *, clear: bool = False) -> int:
        """Chat completions answered (since the last clear)."""
        return int(self.stats(clear=clear)["requests"].get("chat", 0))


@contextlib.contextmanager
def test_judge(
    latency: float = 0.0,
    *,
    reply_text: str = "Yes",
    top_logprobs: str = "Yes=-0.1,No=-2.5",
    tool_arguments: str | None = None,
) -> Iterator[TestJudge]:
    """``python -m pytest_llmeval.testing`` answering every judge call ``reply_text`` ("Yes",
    with the first token's ``top_logprobs``), ``latency`` seconds added per reply; a request
    that offers tools gets a tool call with ``tool_arguments`` (JSON text) when given."""
    cmd = [
        sys.executable,
        "-m",
        "pytest_llmeval.testing",
        "--latency",
        str(latency),
        "--reply-text",
        reply_text,
        "--top-logprobs",
        top_logprobs,
    ]
    if tool_arguments is not None:
        cmd += ["--tool-arguments", tool_arguments]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        if not base_url:
            raise SystemExit("the test judge server did not start: " + " ".join(cmd))
        yield TestJudge(base_url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def write_cases(path: Path, cases: int) -> None:
    """``cases`` JSONL rows ``q0, q1...`` whose output equals the expected answer."""
    with path.open("w") as fh:
        for i in range(cases):
            row = {
                "id": f"q{i}",
                "input": f"question {i}?",
                "expected": f"answer {i}",
                "output": f"answer {i}",
            }
            fh.write(json.dumps(row) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def redis_server() -> Iterator[int]:
    """A throwaway redis-server on 127.0.0.1 (no persistence); its port. Needs ``redis-server``
    on PATH and redis-py (the caller checks and says so)."""
    import redis

    binary = shutil.which("redis-server")
    assert binary is not None
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        proc = subprocess.Popen(
            [*argv, "--appendonly", "no"],
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port, socket_connect_timeout=1)
            deadline = time.monotonic() + 15
            while True:
                try:
                    client.ping()
                    break
                except redis.RedisError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.05)
            client.close()
            yield port
        finally:
            proc.terminate()
            proc.wait(10)
