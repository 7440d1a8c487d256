"""The sandbox: each test runs real programs and checks how they ended and that the host is intact.

Most tests hold in both containment modes (namespaces, or the audit-hook fallback); the
``fallback`` tests force the fallback; a few check the namespace layer itself and skip where
namespaces are unavailable.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmeval import sandbox
from pytest_llmeval.sandbox import SandboxLimits, SandboxResult, containment_mode, run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

REPO = Path(__file__).resolve().parent.parent
FAST = SandboxLimits(timeout_s=1.0)
HAS_NAMESPACES = containment_mode()["namespaces"]
needs_namespaces = pytest.mark.skipif(not HAS_NAMESPACES, reason="no namespaces here")


def run(source: str, limits: SandboxLimits = FAST) -> SandboxResult:
    return run_python(textwrap.dedent(source), limits)


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Force the audit-hook fallback (as if unshare were unavailable)."""
    mode = {**containment_mode(), "namespaces": False, "user_namespace": False}
    monkeypatch.setattr(sandbox, "_mode_cache", mode)
    yield


def group_gone(pgid: int | None) -> bool:
    assert pgid is not None
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# -- outcomes ----------------------------------------------------------------------------------


def test_passing_code_passes_and_output_is_captured() -> None:
    r = run(
        """
        def add(a, b):
            return a + b
        print("hello from the sandbox")
        assert add(2, 3) == 5
        """
    )
    assert r.status == "passed"
    assert r.passed is True
    assert r.stdout == "hello from the sandbox\n"
    assert r.exception is None


def test_failing_assertion_is_a_failure() -> None:
    r = run("assert 1 + 1 == 3, 'arithmetic is broken'")
    assert r.status == "failure"
    assert r.exception == "AssertionError"
    assert r.message == "arithmetic is broken"
    assert "program.py" in r.traceback


def test_exception_is_an_error_with_its_type() -> None:
    r = run("def f():\n    return {}['missing']\nf()")
    assert r.status == "error"
    assert r.exception == "KeyError"
    assert "'missing'" in (r.message or "")


def test_system_exit_zero_passes_and_unittest_failure_fails() -> None:
    ok = run("import sys\nsys.exit(0)")
    assert ok.status == "passed"
    bad = run(
        """
        import unittest
        class T(unittest.TestCase):
            def test_a(self):
                self.assertEqual(1, 2)
        unittest.main()
        """
    )
    assert bad.status == "failure"
    assert bad.exception == "SystemExit"
    assert "FAILED" in bad.stderr


def test_leaving_the_process_early_is_not_a_pass() -> None:
    r = run("import os\nos._exit(0)\nassert False")
    assert r.status == "exited"
    assert "exit status 0" in (r.message or "")


def test_huge_output_is_truncated_and_does_not_block() -> None:
    # Far more than a pipe holds, non-ASCII, plus many refused writes with long paths.
    r = run(
        """
        print("é" * 200_000)
        for i in range(200):
            try:
                open("/tmp/" + "ü" * 200 + str(i), "w")
            except PermissionError:
                pass
        raise ValueError("ß" * 100_000)
        """
    )
    assert r.status == "error"
    assert r.exception == "ValueError"
    assert len(r.stdout) <= 4003
    assert r.stdout.rstrip("\n").endswith("é" * 100)
    assert len(r.violations) == 50
    assert len(r.traceback) <= 4003


def test_killed_by_signal_is_reported() -> None:
    r = run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert r.status == "signal"
    assert r.signal == "SIGSEGV"


def test_infinite_loop_times_out_and_the_process_group_is_gone() -> None:
    r = run("while True:\n    pass")
    assert r.status == "timeout"
    assert "1 s" in (r.message or "")
    assert group_gone(r.pgid)


@needs_namespaces
def test_escaped_session_is_killed_with_the_namespace() -> None:
    # The program starts a detached child (new session) that would outlive it; the PID
    # namespace takes it down when the sandbox ends.
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid()}"
    r = run(
        f"""
        import os
        if os.fork() == 0:
            os.setsid()
            os.execv("/bin/sleep", ["sleep", "{marker}"])
        """
    )
    assert r.status == "passed"
    leftovers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd:
                leftovers.append(entry)
    assert leftovers == []
    assert group_gone(r.pgid)


def test_fork_bomb_is_contained() -> None:
    r = run(
        """
        import os
        while True:
            os.fork()
        """,
        SandboxLimits(timeout_s=2.0, max_processes=16),
    )
    if "rlimit_nproc" in r.containment["processes"]:
        assert r.status == "process_limit"
        assert r.exception == "BlockingIOError"
    else:  # root without a uid switch: fork is refused by the audit hook
        assert r.status == "error"
        assert any("os.fork" in v for v in r.violations)
    assert group_gone(r.pgid)
    # The host still forks fine.
    assert subprocess.run(["true"], check=False).returncode == 0


def test_memory_hog_hits_the_memory_limit() -> None:
    r = run("block = bytearray(4 * 1024 ** 3)\nassert len(block) > 0")
    assert r.status == "memory"
    assert r.exception == "MemoryError"


# -- containment -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["tmp", "repo"])
def test_writing_outside_the_working_directory_fails(where: str) -> None:
    base = Path("/tmp") if where == "tmp" else REPO
    target = base / f"pwned-{uuid.uuid4().hex}"
    try:
        r = run(
            f"""
            import os
            try:
                open({str(target)!r}, "w").write("owned")
            except PermissionError:
                pass
            fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT, 0o666)
            """
        )
        assert r.status == "error"
        assert r.exception == "PermissionError"
        assert any(str(target) in v for v in r.violations)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


@needs_namespaces
def test_read_only_filesystem_stops_a_child_program_too() -> None:
    # A shell is not bound by the audit hooks: the read-only mounts (and the uid) stop it.
    target = Path("/tmp") / f"pwned-{uuid.uuid4().hex}"
    try:
        r = run(
            f"""
            import subprocess
            done = subprocess.run(["/bin/sh", "-c", "echo owned > {target}"],
                                  capture_output=True, text=True)
            assert done.returncode != 0, done
            print(done.stderr)
            """
        )
        assert r.status == "passed"
        assert "Read-only file system" in r.stdout or "Permission denied" in r.stdout
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_working_directory_is_fresh_and_writable() -> None:
    r = run(
        """
        import os, sys, tempfile
        assert os.listdir(".") == ["program.py"], os.listdir(".")
        with open("scratch.txt", "w") as fh:
            fh.write("data")
        assert open("scratch.txt").read() == "data"
        assert tempfile.gettempdir() == os.getcwd()
        assert sys.flags.isolated == 1
        """
    )
    assert r.status == "passed", r


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.3)
    yield srv
    srv.close()


def _connect_program(port: int) -> str:
    return f"""
        import socket
        s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
        s.sendall(b"exfiltrated")
        """


def _assert_no_connection(srv: socket.socket) -> None:
    with pytest.raises(TimeoutError):
        srv.accept()


def test_socket_cannot_reach_a_listener(listener: socket.socket) -> None:
    r = run(_connect_program(listener.getsockname()[1]))
    assert r.status == "error"
    if r.containment["network"] == "namespace":
        assert r.exception == "OSError"
        assert "unreachable" in (r.message or "").lower()
    else:
        assert r.exception == "PermissionError"
    _assert_no_connection(listener)


def test_secrets_in_the_parent_environment_do_not_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    monkeypatch.setenv("LLM_EVAL_TEST_SECRET", "hunter2")
    r = run(
        """
        import os
        print(sorted(os.environ.items()))
        assert "OPENAI_API_KEY" not in os.environ
        assert "LLM_EVAL_TEST_SECRET" not in os.environ
        for pid in ("self", "1"):
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
        """
    )
    assert r.status == "passed", r
    assert "sk-test-secret" not in r.stdout
    assert "hunter2" not in r.stdout


def test_runs_under_a_separate_user_when_root() -> None:
    r = run("import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    if os.geteuid() == 0 and r.containment["user"] == "separate_uid":
        uid, gid, groups = r.stdout.split(maxsplit=2)
        assert int(uid) >= 1_000_000_000
        assert int(gid) >= 1_000_000_000
        assert groups.strip() == "[]"
    else:
        assert r.containment["user"] == "unchanged"


@needs_namespaces
def test_namespace_mode_reports_its_containment() -> None:
    r = run("pass")
    c = r.containment
    assert c["network"] == "namespace"
    assert c["filesystem"].startswith("read_only_mounts")
    assert c["processes"].startswith("pid_namespace")
    assert c["environment"] == "minimal"
    assert c["read_only_mounts"] > 0


# -- the audit-hook fallback -----------------------------------------------------------------


def test_fallback_blocks_sockets(fallback: None, listener: socket.socket) -> None:
    r = run(_connect_program(listener.getsockname()[1]))
    assert r.containment["network"] == "audit_hook"
    assert r.status == "error"
    assert r.exception == "PermissionError"
    assert any("network access" in v for v in r.violations)
    _assert_no_connection(listener)


def test_fallback_blocks_writes_and_programs(fallback: None) -> None:
    target = Path("/tmp") / f"pwned-{uuid.uuid4().hex}"
    try:
        r = run(
            f"""
            import subprocess
            try:
                subprocess.run(["/bin/sh", "-c", "echo owned > {target}"])
            except PermissionError:
                pass
            open({str(target)!r}, "a").write("owned")
            """
        )
        assert r.containment["filesystem"].startswith("audit_hook")
        assert r.status == "error"
        assert r.exception == "PermissionError"
        assert any("subprocess.Popen" in v for v in r.violations)
        assert any(str(target) in v for v in r.violations)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_fallback_passing_code_still_passes(fallback: None) -> None:
    r = run("import json\nassert json.loads('[1]') == [1]\nopen('ok.txt', 'w').write('x')")
    assert r.status == "passed", r
    assert r.containment["processes"].startswith("process_group")


def test_require_namespaces_refuses_the_fallback(fallback: None) -> None:
    with pytest.raises(sandbox.SandboxError, match="namespaces are not available"):
        run_python("pass", FAST, require_namespaces=True)


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        run_python("pass", SandboxLimits(timeout_s=0))
