"""python_unit_testing: the opt-in, test pairing, reasons, pass@k (runs real sandboxed code)."""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from scorers_code_support import SECRET_KEY

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError, ScorerNotAvailableError
from pytest_llmeval.core.settings import Secret, Settings
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.scorers import code as code_module
from pytest_llmeval.scorers import sandbox
from pytest_llmeval.scorers.code import (
    PythonUnitTesting,
    WeakSandboxWarning,
    known_secrets,
    pass_at_k,
    redact,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

GOOD = "def add(a, b):\n    return a + b\n"


WRONG = "def add(a, b):\n    return a - b\n"


RAISES = "def add(a, b):\n    return a + None\n"


TEST = "assert add(2, 3) == 5\n"


TEST2 = "assert add(-1, 1) == 0\n"


@pytest.fixture
def enabled(ctx: ScoringContext) -> ScoringContext:
    ctx.settings = dataclasses.replace(ctx.settings, sandbox_enabled=True)
    return ctx


def test_refuses_without_opt_in_and_says_how(ctx: ScoringContext) -> None:
    assert ctx.settings.sandbox_enabled is False
    with pytest.raises(ScorerNotAvailableError) as info:
        PythonUnitTesting().compute({"output": GOOD, "tests": TEST}, ctx)
    msg = str(info.value)
    assert "--llm-eval-allow-code-execution" in msg
    assert "llm_eval_allow_code_execution" in msg
    assert "LLM_EVAL_SANDBOX=1" in msg
    assert "configure(sandbox_enabled=True)" in msg


def test_opt_in_from_the_environment() -> None:
    assert Settings.from_env({"LLM_EVAL_SANDBOX": "1"}).sandbox_enabled is True
    assert Settings.from_env({}).sandbox_enabled is False


def test_opt_in_through_configure_and_score() -> None:
    from pytest_llmeval import score as score_fn
    from pytest_llmeval.engine.context import configure, set_context

    prev = set_context(None)
    try:
        configure(sandbox_enabled=True, cache_mode="off")
        result = score_fn("PythonUnitTesting", output=GOOD, tests=[TEST])
        assert result.value == 1.0
        assert result.scorer == "python_unit_testing"
    finally:
        set_context(prev)


def test_passing_code_scores_one(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": GOOD, "tests": [TEST, TEST2]}, enabled)
    assert s.value == 1.0
    assert s.rationale == "passed all 2 test(s)"
    assert s.metadata["status"] == "passed"
    assert s.metadata["passed"] is True
    assert s.metadata["containment"]["environment"] == "minimal"


def test_failing_assertion_scores_zero_with_failure(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": WRONG, "tests": TEST}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "failure"
    assert s.metadata["exception"] == "AssertionError"
    assert s.rationale is not None and s.rationale.startswith("test 1 of 1: failure")


def test_exception_scores_zero_with_error(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": RAISES, "tests": TEST}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "error"
    assert s.metadata["exception"] == "TypeError"
    assert "error (TypeError" in (s.rationale or "")
    assert "TypeError" in s.metadata["traceback"]


def test_infinite_loop_scores_zero_with_timeout(enabled: ScoringContext) -> None:
    s = PythonUnitTesting(timeout=0.5).compute(
        {"output": "while True:\n    pass\n", "tests": TEST}, enabled
    )
    assert s.value == 0.0
    assert s.metadata["status"] == "timeout"
    assert "timeout" in (s.rationale or "")


def test_second_test_failing_is_named(enabled: ScoringContext) -> None:
    half = "def add(a, b):\n    return 5\n"
    s = PythonUnitTesting().compute({"output": half, "tests": [TEST, TEST2]}, enabled)
    assert s.value == 0.0
    assert s.metadata["failed_test"] == 1
    assert (s.rationale or "").startswith("test 2 of 2: failure")


def test_tests_from_a_directory_in_sorted_order(enabled: ScoringContext, tmp_path: Path) -> None:
    (tmp_path / "b_second.py").write_text("assert add(1, 1) == 3\n")
    (tmp_path / "a_first.py").write_text(TEST)
    scorer = PythonUnitTesting()
    assert scorer.compute({"output": GOOD, "tests": tmp_path, "test_index": 0}, enabled).value == 1
    s = scorer.compute({"output": GOOD, "tests": str(tmp_path)}, enabled)
    assert s.value == 0.0
    assert s.metadata["failed_test"] == 1


def test_unit_tests_option_paired_by_index(enabled: ScoringContext) -> None:
    scorer = PythonUnitTesting(unit_tests=[TEST, "assert add(2, 2) == 0\n"])
    assert scorer.compute({"output": GOOD, "test_index": 0}, enabled).value == 1.0
    assert scorer.compute({"output": WRONG, "test_index": 1}, enabled).value == 1.0
    assert scorer.compute({"output": GOOD, "test_index": 1}, enabled).value == 0.0


def test_a_tests_directory_is_cached_by_contents_not_path(tmp_path: Path) -> None:
    """Editing a test file under the same directory must not replay the old result."""
    from pytest_llmeval import score as score_fn
    from pytest_llmeval.engine.context import configure, set_context

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "t0.py").write_text(TEST)
    prev = set_context(None)
    ctx = configure(sandbox_enabled=True, cache_dir=tmp_path / "cache")
    try:
        first = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (first.value, first.cached) == (1.0, False)
        again = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (again.value, again.cached) == (1.0, True)  # same files: from the cache
        (tests / "t0.py").write_text("assert add(1, 1) == 3\n")
        edited = score_fn("python_unit_testing", output=GOOD, tests=str(tests))
        assert (edited.value, edited.cached) == (0.0, False)  # new contents: run again
        (tests / "t0.py").write_text(TEST)
        back = score_fn("python_unit_testing", output=GOOD, tests=tests)  # a Path, same key
        assert (back.value, back.cached) == (1.0, True)
    finally:
        ctx.close()
        set_context(prev)


def test_unit_test_dir_option(enabled: ScoringContext, tmp_path: Path) -> None:
    (tmp_path / "t0.py").write_text(TEST)
    scorer = PythonUnitTesting(unit_test_dir=str(tmp_path))
    assert scorer.compute({"output": GOOD}, enabled).value == 1.0
    ident = scorer.extra_identity(enabled)
    assert len(ident["unit_tests_sha256"]) == 64
    assert ident["sandbox"] in {"namespaces", "audit_hooks"}


def test_unit_test_dir_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ScorerConfigError, match="unit_test_dir"):
        PythonUnitTesting(unit_test_dir=str(tmp_path / "nope"))


def test_missing_tests_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        PythonUnitTesting().compute({"output": GOOD}, enabled)
    assert info.value.field == "tests"
    assert "unit_tests" in str(info.value)


def test_test_index_out_of_range_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="holds 1 test"):
        PythonUnitTesting().compute({"output": GOOD, "tests": [TEST], "test_index": 3}, enabled)


@pytest.mark.parametrize("bad", [42, [GOOD, 3], []])
def test_bad_output_is_an_input_error(enabled: ScoringContext, bad: object) -> None:
    with pytest.raises(ScorerInputError) as info:
        PythonUnitTesting().compute({"output": bad, "tests": TEST}, enabled)
    assert info.value.field == "output"


@pytest.mark.parametrize(
    ("option", "value"),
    [("timeout", 0), ("k", 0), ("memory_mb", 8), ("max_processes", -1), ("unit_tests", "x")],
)
def test_bad_options_are_config_errors(option: str, value: object) -> None:
    with pytest.raises(ScorerConfigError, match=option):
        PythonUnitTesting(**{option: value})


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 2, 0.0),
        (5, 4, 2, 1.0),  # n - c < k
        (1, 1, 1, 1.0),
        # 1 - C(187,10)/C(200,10); Codex's product form 1 - prod(1 - k/i, i=188..200) agrees
        (200, 13, 10, 0.4975511147306061),
    ],
)
def test_pass_at_k_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def test_samples_give_pass_at_k_with_per_sample_results(enabled: ScoringContext) -> None:
    samples = [GOOD, WRONG, GOOD]
    s1 = PythonUnitTesting(k=1).compute({"output": samples, "tests": TEST}, enabled)
    assert s1.value == pytest.approx(2 / 3)
    assert s1.metadata["n"] == 3
    assert s1.metadata["c"] == 2
    assert [x["status"] for x in s1.metadata["samples"]] == ["passed", "failure", "passed"]
    assert s1.rationale == "pass@1 = 0.6667: 2 of 3 samples passed all 1 test(s)"
    s2 = PythonUnitTesting(k=2).compute({"output": samples, "tests": TEST}, enabled)
    assert s2.value == 1.0  # 1 - C(1,2)/C(3,2) = 1 - 0
    assert s2.metadata["pass_at_k"] == 1.0


def test_more_k_than_samples_is_an_input_error(enabled: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="k=3"):
        PythonUnitTesting(k=3).compute({"output": [GOOD, GOOD], "tests": TEST}, enabled)


EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "exit()": "exit()\n",
    "raise SystemExit": "raise SystemExit\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
}


@pytest.mark.parametrize("how", sorted(EXITS))
def test_wrong_code_that_exits_early_scores_zero(enabled: ScoringContext, how: str) -> None:
    s = PythonUnitTesting().compute({"output": WRONG + EXITS[how], "tests": TEST}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "exited"
    assert s.metadata["tests_run"] == 0
    assert (s.rationale or "").startswith("test 1 of 1: exited")
    if how == "os._exit(0)":
        assert "exit status 0, e.g. os._exit" in (s.rationale or "")
    else:
        assert "before its tests ran" in (s.rationale or "")


def test_forged_result_on_the_inherited_pipe_then_os_exit_scores_zero(
    enabled: ScoringContext,
) -> None:
    forge = (
        WRONG + "import json, os\n"
        "msg = json.dumps({'status': 'passed', 'tests_run': 1}).encode()\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, msg)\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    s = PythonUnitTesting().compute({"output": forge, "tests": [TEST, TEST2]}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "tampered"
    assert s.metadata["failed_test"] == 0
    assert "the program wrote to it" in (s.rationale or "")


def test_every_test_must_run_counted(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute({"output": GOOD, "tests": [TEST, TEST2]}, enabled)
    assert (s.value, s.metadata["tests_run"], s.metadata["tests"]) == (1.0, 2, 2)


@pytest.mark.parametrize("empty", ["", "   \n# only a comment\n", '"""a docstring"""\npass\n...\n'])
def test_a_test_with_no_code_is_a_failure_not_a_pass(enabled: ScoringContext, empty: str) -> None:
    s = PythonUnitTesting().compute({"output": GOOD, "tests": [TEST, empty]}, enabled)
    assert s.value == 0.0
    assert s.metadata["status"] == "no_tests"
    assert s.metadata["tests_run"] == 0
    assert s.rationale == "test 2 of 2 holds no code: 0 tests, nothing was tested"


def test_unittest_with_zero_tests_collected_is_a_failure(enabled: ScoringContext) -> None:
    s = PythonUnitTesting().compute(
        {"output": GOOD, "tests": "import unittest\nunittest.main()\n"}, enabled
    )
    assert s.value == 0.0
    assert s.metadata["status"] == "exited"
    assert "outside a successful unittest.main() run" in (s.rationale or "")


def test_unittest_cases_that_never_ran_are_not_a_pass(enabled: ScoringContext) -> None:
    # A TestCase without unittest.main(): the test module finishes cleanly, yet nothing ran.
    test = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_a(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n"
    )
    for output in (GOOD, WRONG):
        s = PythonUnitTesting().compute({"output": output, "tests": test}, enabled)
        assert (s.value, s.metadata["status"], s.metadata["tests_run"]) == (0.0, "no_tests", 0)
        assert "unittest.TestCase tests that never ran (T)" in (s.rationale or "")
        assert "unittest.main()" in (s.rationale or "")


def test_unittest_tests_pass_when_all_ran(enabled: ScoringContext) -> None:
    test = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_a(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n"
        "unittest.main()\n"
    )
    assert PythonUnitTesting().compute({"output": GOOD, "tests": test}, enabled).value == 1.0
    bad = PythonUnitTesting().compute({"output": WRONG, "tests": test}, enabled)
    assert (bad.value, bad.metadata["status"]) == (0.0, "failure")


def test_scorer_version_is_bumped() -> None:
    assert PythonUnitTesting.version == "2"


@pytest.fixture
def weak(monkeypatch: pytest.MonkeyPatch) -> None:
    """Namespaces count as unavailable (the sandbox's internal switch), the warning not yet
    given in this process."""
    monkeypatch.setenv(sandbox.FORCE_WEAK_ENV, "1")
    monkeypatch.setattr(code_module, "_weak_warned", False)


def test_weak_fallback_is_refused_without_the_opt_in(enabled: ScoringContext, weak: None) -> None:
    assert enabled.settings.sandbox_allow_weak is False
    with pytest.raises(ScorerNotAvailableError) as info:
        PythonUnitTesting().compute({"output": GOOD, "tests": TEST}, enabled)
    msg = str(info.value)
    for name in (
        "--llm-eval-allow-weak-sandbox",
        "llm_eval_allow_weak_sandbox",
        "LLM_EVAL_ALLOW_WEAK_SANDBOX=1",
        "configure(sandbox_allow_weak=True)",
        "WEAK",
    ):
        assert name in msg


@pytest.fixture
def weak_ok(enabled: ScoringContext, weak: None) -> Iterator[ScoringContext]:
    """The weak mode, allowed; its warning is not shown (a test that counts it records it)."""
    enabled.settings = dataclasses.replace(enabled.settings, sandbox_allow_weak=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakSandboxWarning)
        yield enabled


def test_weak_fallback_with_opt_in_runs_and_warns_once(weak_ok: ScoringContext) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = PythonUnitTesting().compute({"output": GOOD, "tests": TEST}, weak_ok)
        second = PythonUnitTesting().compute({"output": WRONG, "tests": TEST}, weak_ok)
    assert (first.value, second.value) == (1.0, 0.0)
    assert first.metadata["containment"]["network"] == "audit_hook"
    weak_warnings = [w for w in caught if issubclass(w.category, WeakSandboxWarning)]
    assert len(weak_warnings) == 1
    assert "WEAK audit-hook fallback" in str(weak_warnings[0].message)


def test_require_namespaces_refuses_even_with_the_weak_opt_in(weak_ok: ScoringContext) -> None:
    with pytest.raises(ScorerNotAvailableError, match="require_namespaces=True"):
        PythonUnitTesting(require_namespaces=True).compute({"output": GOOD, "tests": TEST}, weak_ok)


SECRET_ENV = "ghp_weakSandboxTokenValue42"


# The program reads the environment of the pytest process (in the weak mode it may run as the
# same user) and prints it to stderr after 5000 other characters (so that a cap cuts through),
# then prints the secrets again and fails with them in the exception's message.
STEAL = """
import os, sys
try:
    data = open("/proc/{pid}/environ", "rb").read().decode("utf-8", "replace")
except OSError as exc:
    data = "unreadable: " + str(exc)
sys.stderr.write("x" * 5000 + data.replace(chr(0), " ") + chr(10))
sys.stderr.write("{key}" + chr(10) + "{env}" + chr(10))
raise ValueError("stolen: {key} {env}")
"""


def _steal_program() -> str:
    return STEAL.format(pid=os.getpid(), key=SECRET_KEY, env=SECRET_ENV)


def _assert_clean(text: str) -> None:
    assert SECRET_KEY not in text
    assert SECRET_ENV not in text
    for secret in (SECRET_KEY, SECRET_ENV):  # not even a piece cut by a cap
        for i in range(len(secret) - 8):
            assert secret[i : i + 8] not in text, secret[i : i + 8]


def test_weak_mode_child_environment_holds_no_secret(
    weak_ok: ScoringContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_ENV)
    check = (
        "import os\n"
        "env = repr(sorted(os.environ.items()))\n"
        f"assert {SECRET_KEY!r} not in env and {SECRET_ENV!r} not in env, env\n"
        "assert 'OPENAI_API_KEY' not in os.environ and 'GITHUB_TOKEN' not in os.environ\n"
    )
    s = PythonUnitTesting().compute({"output": GOOD + check, "tests": TEST}, weak_ok)
    assert s.value == 1.0, s.rationale
    assert s.metadata["containment"]["environment"] == "minimal"


def test_weak_mode_stored_output_is_capped_and_redacted(
    weak_ok: ScoringContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_ENV)
    weak_ok.settings = dataclasses.replace(
        weak_ok.settings,
        judge=dataclasses.replace(weak_ok.settings.judge, api_key=Secret(SECRET_KEY)),
    )
    s = PythonUnitTesting().compute({"output": _steal_program(), "tests": TEST}, weak_ok)
    assert s.value == 0.0
    meta = s.metadata
    assert meta["exception"] == "ValueError"
    assert meta["message"] == "stolen: [REDACTED] [REDACTED]"
    assert meta["stderr"].endswith("[REDACTED]\n[REDACTED]\n")
    assert len(meta["stderr"]) <= 1003
    assert len(meta["traceback"]) <= 1003
    for text in (meta["stderr"], meta["traceback"], meta["message"], meta["reason"], s.rationale):
        _assert_clean(text or "")


def test_weak_mode_secrets_never_reach_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weak: None
) -> None:
    from pytest_llmeval import score as score_fn
    from pytest_llmeval.engine.context import configure, set_context

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_ENV)
    prev = set_context(None)
    ctx = configure(
        Settings.from_env(),
        sandbox_enabled=True,
        sandbox_allow_weak=True,
        cache_dir=tmp_path / "cache",
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakSandboxWarning)
            result = score_fn("python_unit_testing", output=_steal_program(), tests=TEST)
            assert (result.value, result.cached) == (0.0, False)
            again = score_fn("python_unit_testing", output=_steal_program(), tests=TEST)
        assert again.cached is True
        _assert_clean(repr(again.metadata))
    finally:
        ctx.close()
        set_context(prev)
    stored = b"".join(f.read_bytes() for f in (tmp_path / "cache").rglob("*") if f.is_file())
    assert b"[REDACTED]" in stored
    assert SECRET_KEY.encode() not in stored
    assert SECRET_ENV.encode() not in stored


def test_redact_replaces_whole_secrets_and_pieces_cut_by_a_cap() -> None:
    secret = "sk-abcdefghijklmnop"
    assert redact(f"key={secret}!", [secret]) == "key=[REDACTED]!"
    assert redact("...ghijklmnop tail", [secret]) == "...[REDACTED] tail"  # its end, cut
    assert redact("head sk-abcdefg", [secret]) == "head [REDACTED]"  # its start, cut
    assert redact("nothing here", [secret]) == "nothing here"


def test_known_secrets_are_the_key_and_secret_looking_variables() -> None:
    env = {"GITHUB_TOKEN": "ghp_1234567890", "PATH": "/usr/bin:/bin:/x", "DB_PASSWORD": "short"}
    assert known_secrets("sk-judge-key-1", env) == ["ghp_1234567890", "sk-judge-key-1"]
