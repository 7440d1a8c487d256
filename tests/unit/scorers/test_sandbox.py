"""The sandbox: each test runs real programs and checks how they ended and that the host is intact.

Most tests hold in both containment modes (namespaces, or the audit-hook fallback); the
``fallback`` tests force the fallback (the internal switch ``LLM_EVAL_SANDBOX_FORCE_WEAK=1``, as
on a machine without namespaces) and opt into it; a few check the namespace layer itself and skip
where namespaces are unavailable.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import ROOT

from pytest_llmeval.scorers import sandbox
from pytest_llmeval.scorers.sandbox import (
    SandboxLimits,
    SandboxResult,
    containment_mode,
    run_python,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

REPO = ROOT
FAST = SandboxLimits(timeout_s=1.0)
HAS_NAMESPACES = containment_mode()["namespaces"]
needs_namespaces = pytest.mark.skipif(not HAS_NAMESPACES, reason="no namespaces here")


def run(source: str, limits: SandboxLimits = FAST, *, test: str | None = None) -> SandboxResult:
    # allow_weak: the fallback tests opt in; with namespaces it changes nothing.
    return run_python(
        textwrap.dedent(source),
        limits,
        test=None if test is None else textwrap.dedent(test),
        allow_weak=True,
    )


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Force the audit-hook fallback (as if unshare were unavailable)."""
    monkeypatch.setenv(sandbox.FORCE_WEAK_ENV, "1")
    assert containment_mode()["namespaces"] is False
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


UNITTEST = """
import unittest
class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(add(2, 3), 5)
    def test_b(self):
        self.assertEqual(add(-1, 1), 0)
unittest.main()
"""
GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
TEST = "assert add(2, 3) == 5\n"


def test_program_then_test_pass_counts_the_test_run() -> None:
    r = run(GOOD, test=TEST)
    assert (r.status, r.tests_run) == ("passed", 1)
    wrong = run(WRONG, test=TEST)
    assert (wrong.status, wrong.tests_run, wrong.exception) == ("failure", 0, "AssertionError")
    assert 'File "<test>", line 1' in wrong.traceback
    assert wrong.message == "assertion failed (test line 1: assert add(2, 3) == 5)"


def test_the_program_cannot_read_the_test_from_disk() -> None:
    r = run(
        "import os\nprint(sorted(os.listdir('.')))\ndef add(a, b):\n    return a + b\n",
        test=TEST,
    )
    assert r.status == "passed"
    assert r.stdout == "['program.py']\n"


def test_unittest_main_after_a_successful_run_passes_and_a_failed_one_fails() -> None:
    ok = run(GOOD, test=UNITTEST)
    assert (ok.status, ok.tests_run) == ("passed", 1)
    bad = run(WRONG, test=UNITTEST)
    assert (bad.status, bad.exception, bad.tests_run) == ("failure", "SystemExit", 0)
    assert "FAILED" in bad.stderr


# Every way of leaving early that scored 1.0 "passed" before (issue 13, item 1), with a wrong
# function: the test would fail if it ran.
EARLY_EXITS = {
    "sys_exit_0": (WRONG + "import sys\nsys.exit(0)\n", "SystemExit(0)", "before its tests ran"),
    "exit": (WRONG + "exit()\n", "SystemExit(None)", "before its tests ran"),
    "quit": (WRONG + "quit(0)\n", "SystemExit(0)", "before its tests ran"),
    "raise_SystemExit": (WRONG + "raise SystemExit\n", "SystemExit(None)", "before its tests ran"),
    "raise_SystemExit_False": (
        WRONG + "raise SystemExit(False)\n",
        "SystemExit(False)",
        "before its tests ran",
    ),
    "exit_inside_the_function": (
        "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        "SystemExit(0)",
        "while a test ran",
    ),
    # A clean exit raised from C (no frame of the program on the stack) in the test's own line.
    "exit_from_a_slot": (
        "import functools, sys\n"
        "class Yes:\n    __bool__ = functools.partial(sys.exit)\n"
        "class R:\n    def __eq__(self, other):\n        return Yes()\n"
        "def add(a, b):\n    return R()\n",
        "outside a successful unittest.main()",
        "SystemExit(None)",
    ),
    "os__exit_0": (WRONG + "import os\nos._exit(0)\n", "exit status 0", "os._exit"),
}


@pytest.mark.parametrize("name", sorted(EARLY_EXITS))
def test_leaving_early_in_any_way_is_not_a_pass(name: str) -> None:
    source, *named = EARLY_EXITS[name]
    r = run(source, test=TEST)
    assert r.status == "exited", r
    assert r.tests_run == 0
    for text in named:
        assert text in (r.message or "")


def test_a_test_that_exits_cleanly_outside_unittest_is_not_a_pass() -> None:
    r = run(WRONG, test="import sys\nsys.exit(0)\nassert add(2, 3) == 5\n")
    assert r.status == "exited"
    assert "outside a successful unittest.main()" in (r.message or "")


def test_unittest_main_that_ran_no_test_is_not_a_pass() -> None:
    r = run(GOOD, test="import unittest\nunittest.main()\n")
    assert (r.status, r.tests_run) == ("exited", 0)


def test_leaving_the_process_early_is_not_a_pass() -> None:
    r = run("import os\nos._exit(0)\nassert False")
    assert r.status == "exited"
    assert "exit status 0" in (r.message or "")


FORGE = """
import json, os
def add(a, b):
    return a - b
report = json.dumps({"status": "passed", "tests_run": 1, "token": "0" * 32, "violations": []})
for fd in range(3, 64):
    try:
        os.write(fd, report.encode())
    except OSError:
        pass
"""


def test_a_forged_report_on_the_inherited_pipe_then_os_exit_is_tampered() -> None:
    r = run(FORGE + "os._exit(0)\n", test=TEST)
    assert r.status == "tampered", r
    assert r.tests_run == 0
    assert "the program wrote to it" in (r.message or "")


def test_writing_to_the_result_pipe_spoils_even_a_passing_run() -> None:
    # The function is right this time and the harness does report; the extra bytes still
    # make the run tampered (anything on the channel that is not exactly the report).
    r = run(FORGE.replace("a - b", "a + b"), test=TEST)
    assert r.status == "tampered"


def test_fallback_forged_report_is_tampered(fallback: None) -> None:
    r = run(FORGE + "os._exit(0)\n", test=TEST)
    assert r.containment["network"] == "audit_hook"
    assert r.status == "tampered"


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
        run_python("pass", FAST, allow_weak=True, require_namespaces=True)


def test_without_namespaces_the_weak_fallback_is_refused_unless_allowed(fallback: None) -> None:
    with pytest.raises(sandbox.SandboxError) as info:
        run_python("pass", FAST)
    msg = str(info.value)
    assert "namespaces are not available here (LLM_EVAL_SANDBOX_FORCE_WEAK=1 is set)" in msg
    assert "allow_weak=True" in msg
    assert run_python("pass", FAST, allow_weak=True).status == "passed"


def test_fallback_environment_holds_no_secret(
    fallback: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    monkeypatch.setenv("LLM_EVAL_TEST_SECRET", "hunter2-hunter2")
    r = run(
        f"""
        import os
        text = repr(sorted(os.environ.items()))
        assert "sk-test-secret" not in text and "hunter2" not in text, text
        assert "OPENAI_API_KEY" not in os.environ
        # The environment of the supervisor and of pytest (our user in this mode) is refused.
        for pid in (os.getppid(), {os.getpid()}):
            try:
                open(f"/proc/{{pid}}/environ", "rb").read()
            except PermissionError:
                continue
            raise AssertionError(pid)
        """
    )
    assert r.containment["environment"] == "minimal"
    assert r.status == "passed", r
    assert len(r.violations) == 2
    assert all("/environ' (another process's memory" in v for v in r.violations)
    assert r.violations[1].startswith(f"opening '/proc/{os.getpid()}/environ'")


# -- working directories ---------------------------------------------------------------------


def _workdirs(base: Path) -> list[Path]:
    return sorted(base.glob(sandbox.WORKDIR_PREFIX + "*"))


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of the sandbox's own (nothing else's leftovers in it). Not under
    ``tmp_path``: pytest's base directory is private to root, and the sandbox user must be able
    to reach its working directory (as under the usual /tmp)."""
    base = Path(tempfile.mkdtemp(prefix="llmeval-test-tmp-"))
    base.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_workdir_is_named_by_its_owner_and_removed(private_tmp: Path) -> None:
    r = run(
        """
        import os
        print(os.path.basename(os.getcwd()))
        open("left.txt", "w").write("x")
        """
    )
    assert r.status == "passed", r
    name = r.stdout.strip()
    start = sandbox._start_time(os.getpid())
    assert name.startswith(f"{sandbox.WORKDIR_PREFIX}{os.getpid()}.{start}-")
    assert _workdirs(private_tmp) == []


def _start_killed_run(base: Path, *, weak: bool) -> Path:
    """A separate Python process starts a sandbox run and is SIGKILLed in the middle of it
    (no ``finally`` runs); returns the working directory it leaves behind."""
    code = textwrap.dedent(
        """
        from pytest_llmeval.scorers.sandbox import SandboxLimits, run_python
        run_python("import time\\nopen('busy', 'w').write('x')\\ntime.sleep(30)",
                   SandboxLimits(timeout_s=3), allow_weak=True)
        """
    )
    env = {**os.environ, "TMPDIR": str(base)}
    env.pop(sandbox.FORCE_WEAK_ENV, None)
    if weak:
        env[sandbox.FORCE_WEAK_ENV] = "1"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _workdirs(base):
            time.sleep(0.05)
        dirs = _workdirs(base)
        assert len(dirs) == 1, dirs
        if weak:  # the real directory is the working directory: wait for the program's file
            while time.monotonic() < deadline and not (dirs[0] / "busy").exists():
                time.sleep(0.05)
            assert (dirs[0] / "busy").exists()
        else:
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert dirs[0].exists()  # the killed run could not clean up
    return dirs[0]


@pytest.mark.parametrize("weak", [True, False], ids=["fallback", "namespaces"])
def test_workdir_of_a_killed_run_is_removed_by_the_next_run(
    private_tmp: Path, monkeypatch: pytest.MonkeyPatch, weak: bool
) -> None:
    if not weak and not HAS_NAMESPACES:
        pytest.skip("no namespaces here")
    left = _start_killed_run(private_tmp, weak=weak)
    # A directory whose owner still lives (this process) is not touched.
    mine = Path(tempfile.mkdtemp(prefix=f"{sandbox.WORKDIR_PREFIX}{sandbox._owner_tag()}-"))
    # The next run (first of its process) removes what the dead one left.
    monkeypatch.setattr(sandbox, "_leftovers_checked", False)
    assert run("pass").status == "passed"
    assert not left.exists()
    assert mine.exists()
    assert _workdirs(private_tmp) == [mine]


def test_remove_leftover_workdirs_keeps_foreign_and_live_names(tmp_path: Path) -> None:
    dead = tmp_path / f"{sandbox.WORKDIR_PREFIX}999999999.12345-abc"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "f").write_text("x")
    live = tmp_path / f"{sandbox.WORKDIR_PREFIX}{sandbox._owner_tag()}-abc"
    live.mkdir()
    reused = tmp_path / f"{sandbox.WORKDIR_PREFIX}{os.getpid()}.1-abc"  # pid reused since
    reused.mkdir()
    foreign = tmp_path / f"{sandbox.WORKDIR_PREFIX}abc"
    foreign.mkdir()
    removed = sandbox.remove_leftover_workdirs(str(tmp_path))
    assert sorted(removed) == sorted([str(dead), str(reused)])
    assert live.exists() and foreign.exists()
    assert not dead.exists() and not reused.exists()


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        run_python("pass", SandboxLimits(timeout_s=0))


# -- the harness is out of the program's reach ---------------------------------------------------

# Walks every frame the program can reach and every value in their locals, looking for the run's
# token (32 hex digits), then forges a passing report with each candidate on every descriptor.
STEAL_TOKEN = """
import json, os, re, sys
def add(a, b):
    return a - b
hexes = set()
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
        hexes.update(re.findall(r"[0-9a-f]{32}", repr(value)))
        for cell in getattr(value, "__closure__", None) or ():
            try:
                hexes.update(re.findall(r"[0-9a-f]{32}", repr(cell.cell_contents)))
            except ValueError:
                pass
    frame = frame.f_back
print(len(hexes), flush=True)
for token in hexes:
    for kind in ("passed",):
        msg = json.dumps(
            {"token": token, "kind": kind, "forged": 0, "report": {}, "status": "passed",
             "tests_run": 1}
        ).encode()
        for fd in range(3, 64):
            try:
                os.write(fd, msg)
            except OSError:
                pass
sys.audit("llmeval.sandbox.report", "passed", "{}")
os._exit(0)
"""


def test_the_token_is_not_in_any_frame_the_program_can_walk() -> None:
    r = run(STEAL_TOKEN, test=TEST)
    # Nothing that looks like a token is found; the program's own report event marks the run
    # forged, and it ends without the harness's report.
    assert r.stdout == "0\n"
    assert r.status == "exited", r
    assert r.tests_run == 0


def test_raising_the_report_event_from_the_program_marks_the_run_forged() -> None:
    # Right code, so the harness's own report says passed; the program's call still spoils it.
    r = run(GOOD + "import sys\nsys.audit('llmeval.sandbox.report', 'passed', '{}')\n", test=TEST)
    assert r.status == "tampered"
    assert "forged report" in (r.message or "")


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("import gc\ngc.get_objects()", "gc.get_objects"),
        ("import gc\ngc.get_referrers(gc)", "gc.get_referrers"),
        ("import sys\nsys._current_frames()", "sys._current_frames"),
        ("import sys\nsys.settrace(lambda *a: None)", "sys.settrace"),
        ("import sys\nsys.setprofile(lambda *a: None)", "sys.setprofile"),
        ("import ctypes", "importing ctypes"),
        ("(lambda: 0).__code__.replace(co_code=b'')", "code.__new__"),
        ("open('/proc/self/mem', 'rb')", "opening '/proc/self/mem'"),
        ("open('/proc/1/environ', 'rb')", "opening '/proc/1/environ'"),
        ("import os\nos.open('/proc/self/fd/1', os.O_RDONLY)", "opening '/proc/self/fd/1'"),
    ],
)
def test_ways_into_the_harness_are_refused(source: str, refused: str) -> None:
    r = run(source)
    assert r.status == "error", r
    assert any(v.startswith(refused) for v in r.violations), r.violations


def test_a_new_audit_hook_is_refused_silently() -> None:
    r = run(
        "import sys\ncalls = []\nsys.addaudithook(lambda e, a: calls.append(e))\n"
        "open('x.txt', 'w').close()\nassert calls == [], calls\n"
    )
    assert r.status == "passed", r
    assert any(v.startswith("sys.addaudithook") for v in r.violations)


def test_a_signal_handler_cannot_catch_the_reporter() -> None:
    # A handler receives the frame it interrupts; a thread keeps signalling the process so that
    # one lands while the report is sent. The harness ignores every signal before reporting.
    r = run(
        """
        import json, os, re, signal, sys, threading
        def add(a, b):
            return a - b
        def handler(signum, frame):
            while frame is not None:
                for key, value in frame.f_locals.items():
                    for token in re.findall(r"[0-9a-f]{32}", repr(value)):
                        msg = json.dumps({"token": token, "kind": "passed", "forged": 0,
                                          "report": {}}).encode()
                        for fd in range(3, 64):
                            try:
                                os.write(fd, msg)
                            except OSError:
                                pass
                        os._exit(0)
                frame = frame.f_back
        signal.signal(signal.SIGUSR1, handler)
        def spam():
            while True:
                os.kill(os.getpid(), signal.SIGUSR1)
        threading.Thread(target=spam, daemon=True).start()
        """,
        test=TEST,
    )
    assert r.status != "passed", r
    assert r.tests_run == 0


def test_unittest_main_with_a_lying_runner_is_not_a_pass() -> None:
    # The program hands unittest.main() a runner whose result claims success, and makes the
    # test's own assertion raise that exit from C code (no frame of the program on the stack).
    r = run(
        """
        import functools, unittest
        class Liar(unittest.TextTestRunner):
            def run(self, test):
                result = unittest.TextTestResult(self.stream, True, 1)
                result.testsRun = test.countTestCases()
                return result
        class T(unittest.TestCase):
            def test_nothing(self):
                pass
        class Yes:
            __bool__ = functools.partial(unittest.main, testRunner=Liar, argv=["x"])
        class R:
            def __eq__(self, other):
                return Yes()
        def add(a, b):
            return R()
        """,
        test=TEST,
    )
    assert r.status == "exited", r
    assert "outside a successful unittest.main()" in (r.message or "")
