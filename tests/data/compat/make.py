"""Writes this folder's files with the pytest-llmeval on PYTHONPATH (run once, with the old code):

    PYTHONPATH=/path/to/old/checkout python tests/data/compat/make.py

project/ is run in a temporary copy against the OpenAI-compatible test server (l3score's judge
says "Yes"); its result cache, JSON report and saved run are copied here, and written_by.txt
names the commit. tests/test_compat_files.py then reads them with the current code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    import pytest_llmeval
    from pytest_llmeval.testing import OpenAITestServer, text

    checkout = Path(pytest_llmeval.__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp, OpenAITestServer() as server:
        server.set_default(text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)]))
        work = Path(tmp) / "project"
        shutil.copytree(HERE / "project", work)
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-compat"}
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--llm-eval",
                "--llm-eval-report=report.json",
                "-q",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        print(run.stdout[-2000:])
        if run.returncode not in (0, 1):
            print(run.stderr, file=sys.stderr)
            return run.returncode
        shutil.copy(work / ".llmeval" / "results.sqlite3", HERE / "results.sqlite3")
        shutil.copy(work / "report.json", HERE / "report.json")
        shutil.copy(work / ".llmeval" / "runs" / "0001.json", HERE / "run-0001.json")
    (HERE / "written_by.txt").write_text(
        f"pytest-llmeval {pytest_llmeval.__version__} at {commit}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
