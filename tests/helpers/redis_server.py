"""A throwaway ``redis-server`` for the shared result store tests.

Started on a free port, bound to 127.0.0.1, without persistence, in a temporary directory; one
without and one with ``--requirepass``. When ``redis-server`` or redis-py is missing the tests
skip with the reason, except under CI (``CI=true``), where they fail: CI installs both
(scripts/run-tests.sh)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class RedisServer:
    port: int
    password: str | None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the shared store tests must run)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(password: str | None = None) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("redis-server is not installed (apt-get install redis-server)")
    try:
        import redis
    except ImportError:
        _missing('redis-py is not installed (pip install ".[redis]" in the checkout)')
    port = free_port()
    argv = [
        str(binary),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    if password is not None:
        argv += ["--requirepass", password]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            client = redis.Redis(port=port, password=password, socket_connect_timeout=1)
            deadline = time.monotonic() + 15
            while True:
                try:
                    client.ping()
                    break
                except redis.RedisError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                        _missing(f"redis-server did not start: {err[-500:]}")
                    time.sleep(0.05)
            client.close()
            yield RedisServer(port, password)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class RestartableRedis:
    """A redis-server that a test can kill and start again on the same port, keeping its data
    (append-only file, fsync on every write, in ``directory``), as a real server with
    persistence does across an outage."""

    def __init__(self, directory: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _missing("redis-server is not installed (apt-get install redis-server)")
        try:
            import redis  # noqa: F401
        except ImportError:
            _missing('redis-py is not installed (pip install ".[redis]" in the checkout)')
        self.directory = directory
        self.password: str | None = None
        self.port = free_port()
        self.argv = [
            str(binary),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            directory,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, cwd=self.directory, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_ready(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_ready(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until a redis-server answers on ``port`` (fails the test after 15 s)."""
    import redis

    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + 15
    try:
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                    stderr = proc.stderr if proc is not None else None
                    err = stderr.read().decode(errors="replace") if stderr else ""
                    pytest.fail(f"redis-server did not start on port {port}: {err[-500:]}")
                time.sleep(0.05)
    finally:
        client.close()
