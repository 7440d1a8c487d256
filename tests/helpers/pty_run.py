"""A command run on a pseudo-terminal, as on a person's terminal: what the terminal received.
Used by the live status line's runs (tests/integration/test_progress_runs.py) and by the docs'
``shell tty`` blocks (tests/integration/test_doc_blocks.py)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def terminal_env(columns: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment as a colour terminal ``columns`` wide would have it: no
    colour switches of the outer run (``NO_COLOR``, ``PY_COLORS``, ``FORCE_COLOR``), no
    langsmith plugin (see tests/conftest.py), then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PY_COLORS", "FORCE_COLOR")}
    env.update(TERM="xterm", COLUMNS=str(columns), PYTEST_ADDOPTS="-p no:langsmith_plugin")
    env.update(extra or {})
    return env


def run_on_pty(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 120.0
) -> tuple[str, int]:
    """Run ``argv`` in ``cwd`` with stdin empty and stdout and stderr on one pseudo-terminal;
    read what it writes until it closes the terminal or exits (at most ``timeout`` seconds).
    Returns the bytes received, decoded as UTF-8 (bad bytes replaced), and the exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=dict(env),
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        status = proc.wait(timeout=30)
    return b"".join(chunks).decode("utf-8", "replace"), status
