"""Fixtures for end-to-end tests against a real local judge.

A small instruct model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF) is served by llama-cpp-python's
OpenAI-compatible server on 127.0.0.1. ``scripts/setup_local_judge.sh`` installs the server and
assembles the model; these fixtures start the server once per session and stop it at the end.

When the server package or the model is missing the tests are skipped with a reason that says how
to install them, except under CI (``CI=true``), where they fail: CI installs the judge and must
really run these tests.

Environment: ``LLM_EVAL_LOCAL_JUDGE_GGUF`` points at another GGUF file; ``PYTEST_LLMEVAL_CACHE``
moves the cache root (default ``~/.cache/pytest-llmeval``) exactly as it does for the script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = ["local_judge_ctx", "local_judge_model_path", "local_judge_url"]

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_ALIAS = "local"
READY_TIMEOUT_S = 60.0
SETUP_HINT = "run scripts/setup_local_judge.sh to install it (about 8 minutes the first time)"


def _cache_root() -> Path:
    root = os.environ.get("PYTEST_LLMEVAL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "pytest-llmeval"


def default_model_path() -> Path:
    env = os.environ.get("LLM_EVAL_LOCAL_JUDGE_GGUF")
    return Path(env) if env else _cache_root() / "models" / MODEL_FILE


def _unavailable(reason: str) -> NoReturn:
    """Skip locally; fail under CI, which is expected to have installed the judge."""
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"local judge unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"local judge unavailable: {reason}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
            body = json.loads(resp.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return False
    data = body.get("data") if isinstance(body, dict) else None
    return isinstance(data, list) and any(
        isinstance(m, dict) and m.get("id") == MODEL_ALIAS for m in data
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def local_judge_model_path() -> Path:
    """The GGUF file of the local judge (skips, or fails under CI, when it is missing)."""
    path = default_model_path()
    if not path.is_file():
        _unavailable(f"model file {path} not found; {SETUP_HINT}")
    if path.stat().st_size != MODEL_SIZE and "LLM_EVAL_LOCAL_JUDGE_GGUF" not in os.environ:
        _unavailable(f"model file {path} is incomplete ({path.stat().st_size} bytes); {SETUP_HINT}")
    return path


@pytest.fixture(scope="session")
def local_judge_url(
    local_judge_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of a llama.cpp server running the local judge
    under the model name ``local``; started once per session, stopped at its end."""
    for module in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            _unavailable(
                f"python package {module!r} (llama-cpp-python[server]) is missing; {SETUP_HINT}"
            )
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log_path = tmp_path_factory.mktemp("local_judge") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(local_judge_model_path),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", "4096",
        "--n_threads", "2",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(url):
            if proc.poll() is not None:
                pytest.fail(
                    f"the local judge server exited with code {proc.returncode} before it was "
                    f"ready; its log ({log_path}):\n{_tail(log_path)}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the local judge server was not ready within {READY_TIMEOUT_S:g} s; its log "
                    f"({log_path}):\n{_tail(log_path)}",
                    pytrace=False,
                )
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture
def local_judge_ctx(local_judge_url: str, tmp_path: Path) -> Iterator[ScoringContext]:
    """A scoring context (cache off) whose judge is the local server, installed as active."""
    from pytest_llmeval.core.settings import JudgeSettings, Settings
    from pytest_llmeval.engine.context import ScoringContext, set_context

    judge = JudgeSettings(
        base_url=local_judge_url,
        model=MODEL_ALIAS,
        temperature=0.0,
        seed=0,
        # Generous: on 2 idle cores a call takes 2 to 10 s, but a loaded machine is far slower.
        timeout=300.0,
        max_tries=2,
        overall_timeout=900.0,
        concurrency=1,  # one llama.cpp server serves one request at a time
        mode="tool",
    )
    c = ScoringContext(Settings(judge=judge, cache_mode="off", cache_dir=tmp_path / ".llmeval"))
    prev = set_context(c)
    try:
        yield c
    finally:
        set_context(prev)
        c.close()
