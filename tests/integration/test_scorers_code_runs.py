"""python_unit_testing: the opt-in, test pairing, reasons, pass@k (runs real sandboxed code)."""

from __future__ import annotations

import sys

import pytest
from scorers_code_support import SECRET_KEY

from pytest_llmeval.core.settings import Settings
from pytest_llmeval.scorers import sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")


def test_weak_sandbox_option_twins(pytester: pytest.Pytester) -> None:
    """--llm-eval-allow-weak-sandbox, ini llm_eval_allow_weak_sandbox, env."""
    pytester.makepyfile(
        """
        import os
        from pytest_llmeval import get_context

        def test_settings():
            assert get_context().settings.sandbox_allow_weak is (os.environ["EXPECT"] == "1")
        """
    )
    env = pytester._monkeypatch
    env.delenv("LLM_EVAL_ALLOW_WEAK_SANDBOX", raising=False)
    env.setenv("EXPECT", "0")
    pytester.runpytest().assert_outcomes(passed=1)
    env.setenv("EXPECT", "1")
    pytester.runpytest("--llm-eval-allow-weak-sandbox").assert_outcomes(passed=1)
    env.setenv("LLM_EVAL_ALLOW_WEAK_SANDBOX", "1")
    pytester.runpytest().assert_outcomes(passed=1)
    env.delenv("LLM_EVAL_ALLOW_WEAK_SANDBOX")
    pytester.makeini("[pytest]\nllm_eval_allow_weak_sandbox = true\n")
    pytester.runpytest().assert_outcomes(passed=1)
    assert Settings.from_env({"LLM_EVAL_ALLOW_WEAK_SANDBOX": "1"}).sandbox_allow_weak is True
    assert Settings.from_env({}).sandbox_allow_weak is False


def test_weak_mode_end_to_end_refuses_then_warns_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_one():
            assert_score("python_unit_testing", output="x = 1", tests="assert x == 1", min=1)

        def test_two():
            assert_score("python_unit_testing", output="x = 2", tests="assert x == 2", min=1)
        """
    )
    pytester._monkeypatch.setenv(sandbox.FORCE_WEAK_ENV, "1")
    args = ["--llm-eval-allow-code-execution", "--llm-eval-cache=off", "-p", "no:cacheprovider"]
    refused = pytester.runpytest_subprocess(*args)
    refused.assert_outcomes(errors=2)
    refused.stdout.fnmatch_lines(["*--llm-eval-allow-weak-sandbox*"])
    allowed = pytester.runpytest_subprocess(*args, "--llm-eval-allow-weak-sandbox")
    allowed.assert_outcomes(passed=2)
    text = allowed.stdout.str()
    assert text.count("WeakSandboxWarning") == 1, text


def test_weak_mode_key_read_from_the_pytest_process_never_reaches_report_or_cache(
    pytester: pytest.Pytester,
) -> None:
    """Issue 13's escape: in the weak mode the program (same user) read /proc/<pytest pid>/environ,
    where the API key is, and printed it. The read is now refused; and should the key get out
    anyway (native code is not bound by the audit hooks: simulated here by handing the program
    the key), it is redacted from everything stored."""
    pytester.makepyfile(
        """
        import os
        from pytest_llmeval import score

        def test_steal():
            leaked = os.environ["OPENAI_API_KEY"]  # what native code could read
            program = (
                "import sys\\n"
                "try:\\n"
                f"    open('/proc/{os.getpid()}/environ', 'rb').read()\\n"
                "except PermissionError as exc:\\n"
                "    print('refused:', exc, file=sys.stderr)\\n"
                f"sys.stderr.write('OPENAI_API_KEY={leaked}\\\\n')\\n"
                f"raise ValueError('OPENAI_API_KEY={leaked}')\\n"
            )
            result = score("python_unit_testing", output=program, tests="x = 1")
            assert result.value == 0.0
            meta = result.metadata
            assert meta["message"] == "OPENAI_API_KEY=[REDACTED]"
            assert "OPENAI_API_KEY=[REDACTED]" in meta["stderr"]
            assert "refused:" in meta["stderr"]
            assert meta["violations"] == [
                f"opening '/proc/{os.getpid()}/environ' "
                "(another process's memory, environment or files)"
            ]
        """
    )
    pytester._monkeypatch.setenv(sandbox.FORCE_WEAK_ENV, "1")
    pytester._monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    result = pytester.runpytest_subprocess(
        "--llm-eval-allow-code-execution",
        "--llm-eval-allow-weak-sandbox",
        "--llm-eval-report=report.json",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::UserWarning",
    )
    result.assert_outcomes(passed=1)
    stored = (pytester.path / "report.json").read_bytes()
    cache_files = [f for f in (pytester.path / ".llmeval").rglob("*") if f.is_file()]
    assert cache_files
    stored += b"".join(f.read_bytes() for f in cache_files)
    assert b"[REDACTED]" in stored
    assert SECRET_KEY.encode() not in stored
