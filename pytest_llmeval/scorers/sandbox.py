"""A sandbox for running untrusted Python source (model-written code plus its unit tests).

:func:`run_python` runs one program in a separate process and reports how it ended
(:class:`SandboxResult`). The module knows nothing of pytest or scorers, and it imports only the
standard library, because the same file is also the program that runs *inside* the sandbox: the
parent starts ``python -I sandbox.py --supervise`` and sends it the job on stdin.

Layers of containment, strongest first (``SandboxResult.containment`` says which applied):

- **Namespaces** (``unshare`` from util-linux, when we may create them): a new network namespace
  (no interface is up, not even loopback, so nothing can be reached), a new PID namespace (the
  supervisor is its PID 1; when it exits the kernel kills every process left inside, even ones
  that called ``setsid``), a new IPC namespace (no System V IPC shared with the host) and a new
  mount namespace in which every mount is remounted read-only, the working directory is a
  fresh size-limited tmpfs, ``/dev/shm`` a small private tmpfs, and directories the sandbox
  user may not traverse (``/root`` when Python lives under it) are replaced by a read-only
  tmpfs that shows only the Python installation.
- **A separate user**: when we are root the program runs under a fresh, random, unused uid/gid
  (no supplementary groups, ``no_new_privs`` set so setuid binaries cannot give root back). A
  fresh uid also gives ``RLIMIT_NPROC`` teeth: the count is per user, and root is exempt.
- **Resource limits** on the worker: address space (``RLIMIT_AS``), CPU seconds, processes and
  threads, open files, size of a written file; no core dumps.
- **Audit hooks** (PEP 578) installed before the program runs: writes, renames, deletions and
  the like outside the working directory are refused, and in every mode so is what reaches the
  harness or raw memory (``gc`` object walks, tracing and profiling, new audit hooks, other
  threads' frames, hand-made code objects, ``ctypes``/``cffi``, ``/proc/*/mem``). Without a
  network namespace the hook also refuses socket creation and, since a child program would
  escape the hooks, starting programs (``exec``, ``subprocess``, ``os.system``). Audit hooks are
  a second layer only: C extensions do not pass through them. Where ``RLIMIT_NPROC`` cannot bind
  (root without a uid switch, or root inside a user namespace) the hook refuses ``fork`` as
  well.
- The environment is minimal (nothing of the parent's, so no API key is in it), Python runs in
  isolated mode (``-I``), stdin is ``/dev/null``, and a wall-clock timeout kills the whole
  process group (and, with the PID namespace, everything inside it).

The fallback mode (no namespaces) is weak: the audit hooks are then the only network and
filesystem barrier besides the uid, and the program can defeat them. :func:`run_python` refuses
it unless called with ``allow_weak=True``.

What it does not do: the memory limit is per process (a program may hold up to
``max_processes * memory_mb``; no cgroup is created); the program can read any file that every
user may read.

**How a pass is decided.** The program runs first, then the test (``test=``), as two phases in one
module namespace, in the worker. The worker makes a per-run token after the fork, sends it to the
supervisor on a pipe it closes before any of the program's code runs, and keeps it only in the
closure of an audit hook (:func:`_make_reporter`) that writes the report when, and only when, the
harness frame raises the report event: ``passed`` after both phases returned. The supervisor
accepts nothing else on the result pipe (a report without the token, any extra byte the program
wrote there, or the program raising the report event itself makes the run ``tampered``), and a
process that ends without a report ended early. What an adversary inside the process can still
do is in ``docs/sandbox.md``.

How a run ended (``SandboxResult.status``): ``passed`` (``tests_run`` is 1 when a test was given);
``failure`` (an ``AssertionError``, or a ``SystemExit`` with a non-zero status raised by the test,
as ``unittest.main()`` raises when a test fails); ``error`` (any other exception; ``exception``
names its type); ``timeout`` (wall clock or CPU time); ``memory`` (``MemoryError``);
``process_limit`` (``fork`` refused by the process limit); ``signal`` (killed by a signal, named
in ``signal``); ``exited`` (the run ended early: ``SystemExit`` raised by the program in any
phase, with any status, or by the test outside a successful ``unittest.main()``; or the process
ended without a report, e.g. ``os._exit``); ``tampered`` (the result pipe held data that is
not the harness's report, or the program raised the report event); ``no_tests`` (the test
defines ``unittest.TestCase`` tests but returned without running them). The one clean exit that
passes is ``unittest.main()``'s after a successful run that ran every test it collected, at
least one.

Working directories are named ``llmeval-sandbox-<pid>.<start time>-<random>`` in the temporary
directory and removed after each run; those of a process that died without cleaning up (SIGKILL)
are removed by the next process's first run (:func:`remove_leftover_workdirs`).

Why this module is long: it is also the program the sandboxed child runs (``python sandbox.py
--supervise``), which may import nothing but the standard library and must be one file that the
child can run without the package.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "containment_mode",
    "remove_leftover_workdirs",
    "run_python",
]

#: Statuses a run can end with.
STATUSES = (
    "passed",
    "failure",
    "error",
    "timeout",
    "memory",
    "process_limit",
    "signal",
    "exited",
    "tampered",
)

#: Environment variable that makes :func:`containment_mode` report no namespaces, as on a machine
#: without them (for testing the weak mode; it still needs ``allow_weak=True`` to run anything).
FORCE_WEAK_ENV = "LLM_EVAL_SANDBOX_FORCE_WEAK"
#: Prefix of the sandbox's working directories in the temporary directory; the rest of the name
#: says which process owns it (``<pid>.<start time>-<random>``), so that directories left by a
#: killed run are recognised and removed by the next one.
WORKDIR_PREFIX = "llmeval-sandbox-"

_THIS_FILE = os.path.abspath(__file__)
_TEST_FILENAME = "<test>"
_MiB = 1024 * 1024
# The flags unshare(1) gets in namespace mode. --kill-child: if unshare dies (we kill the group on
# timeout) its child, PID 1 of the new namespace, gets SIGKILL, which tears the namespace down.
_NS_FLAGS = (
    "--mount",
    "--net",
    "--pid",
    "--ipc",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--propagation",
    "private",
)
# Grace added to the parent's backstop deadline (namespace setup, interpreter start-up).
_STARTUP_GRACE_S = 5.0


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up or did not report (never the program's fault)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run. Sizes in MiB, times in seconds."""

    timeout_s: float = 3.0
    """Wall clock allowed to the program (measured inside the sandbox, start-up excluded)."""
    memory_mb: int = 512
    """Address space of each process (``RLIMIT_AS``). The limit is per process: a program that
    forks can hold up to ``max_processes * memory_mb`` in all (8 GiB with the defaults)."""
    cpu_s: int | None = None
    """CPU seconds of each process (``RLIMIT_CPU``); default: the timeout rounded up, plus 1."""
    max_processes: int = 16
    """Processes and threads of the sandbox user (``RLIMIT_NPROC``; needs the uid switch)."""
    max_open_files: int = 64
    max_file_size_mb: int = 16
    """Largest file the program may write (``RLIMIT_FSIZE``)."""
    workdir_mb: int = 64
    """Size of the tmpfs working directory (namespace mode)."""
    output_chars: int = 4000
    """How much of the end of stdout, stderr and the traceback is kept."""

    def cpu_seconds(self) -> int:
        if self.cpu_s is not None:
            return max(1, int(self.cpu_s))
        return int(self.timeout_s + 0.999) + 1


@dataclass(frozen=True)
class SandboxResult:
    """How one run ended. ``to_json()`` is JSON-safe."""

    status: str
    exception: str | None = None
    """Type name of the exception that ended the program (``failure``/``error``/``memory``...)."""
    message: str | None = None
    """A one-line explanation (the exception's message, the signal, the limit hit)."""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    signal: str | None = None
    duration_s: float = 0.0
    tests_run: int = 0
    """Test programs that ran to their end (0 or 1; 0 when no ``test`` was given). Reported by
    the harness with the run's token, after the test returned: never by the program."""
    violations: list[str] = field(default_factory=list)
    """Operations the audit hooks refused (even when the program caught the error)."""
    containment: dict[str, Any] = field(default_factory=dict)
    pgid: int | None = None
    """Process group the sandbox ran in (gone when :func:`run_python` returns)."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def weak(self) -> bool:
        """The run had no namespaces (the audit-hook fallback)."""
        return self.containment.get("network") != "namespace"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------

_mode_lock = threading.Lock()
_mode_cache: dict[str, Any] | None = None


def _probe_namespaces(unshare: str, extra: tuple[str, ...]) -> bool:
    try:
        done = subprocess.run(
            [unshare, *extra, *_NS_FLAGS, "--", "/bin/sh", "-c", "exit 0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def containment_mode(*, refresh: bool = False) -> dict[str, Any]:
    """What this machine allows (probed once per process).

    ``{"namespaces": bool, "user_namespace": bool, "switch_uid": bool, "unshare": path|None}``:
    namespaces via ``unshare`` (as root; or, not root, inside a new user namespace), and whether
    the program can run as a separate user (only when we are root without a user namespace).
    With the environment variable ``LLM_EVAL_SANDBOX_FORCE_WEAK=1`` namespaces count as
    unavailable (``"forced_weak": True``): the weak mode can be tested on a machine that has them.
    """
    mode = _probed_mode(refresh)
    if os.environ.get(FORCE_WEAK_ENV, "") == "1":
        mode.update(namespaces=False, user_namespace=False, forced_weak=True)
    return mode


def _probed_mode(refresh: bool) -> dict[str, Any]:
    global _mode_cache
    with _mode_lock:
        if _mode_cache is not None and not refresh:
            return dict(_mode_cache)
        is_root = os.geteuid() == 0
        unshare = shutil.which("unshare") or (
            "/usr/bin/unshare" if os.path.exists("/usr/bin/unshare") else None
        )
        mode: dict[str, Any] = {
            "namespaces": False,
            "user_namespace": False,
            "switch_uid": is_root,
            "unshare": unshare,
        }
        if unshare is not None and sys.platform.startswith("linux"):
            if _probe_namespaces(unshare, ()):
                mode["namespaces"] = True
            elif not is_root and _probe_namespaces(unshare, ("--user", "--map-root-user")):
                mode["namespaces"] = True
                mode["user_namespace"] = True
        _mode_cache = mode
        return dict(mode)


def _minimal_env(workdir: str) -> dict[str, str]:
    # Nothing from the parent's environment: no API keys, no proxies, no PYTHON* variables.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _random_id() -> int:
    # A uid/gid nobody else uses (far above any real account), so that RLIMIT_NPROC counts only
    # this run's processes and the program owns no file outside its working directory.
    return 1_000_000_000 + secrets.randbelow(900_000_000)


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), which tells it from a later process
    that got the same pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            stat_line = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat_line.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _owner_tag() -> str:
    return f"{os.getpid()}.{_start_time(os.getpid()) or 0}"


_leftovers_lock = threading.Lock()
_leftovers_checked = False


def remove_leftover_workdirs(base: str | None = None) -> list[str]:
    """Remove working directories whose owning process is gone (a run killed by SIGKILL, where
    no ``finally`` ran). A directory is left alone while a process with its pid and start time
    lives. Returns the paths removed. :func:`run_python` calls this once per process."""
    root = base if base is not None else tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(WORKDIR_PREFIX):
            continue
        owner = name[len(WORKDIR_PREFIX) :].partition("-")[0]
        pid_text, _, start = owner.partition(".")
        if not pid_text.isdigit() or not start.isdigit():
            continue  # not one of ours (or the old unnamed form): leave it
        if _start_time(int(pid_text)) == start:
            continue  # its owner still runs
        path = os.path.join(root, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def _remove_leftovers_once() -> None:
    global _leftovers_checked
    with _leftovers_lock:
        if _leftovers_checked:
            return
        _leftovers_checked = True
    remove_leftover_workdirs()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_python(
    source: str,
    limits: SandboxLimits | None = None,
    *,
    test: str | None = None,
    python: str | None = None,
    allow_weak: bool = False,
    require_namespaces: bool = False,
) -> SandboxResult:
    """Run Python ``source`` in the sandbox and report how it ended.

    ``test``: a test program, run after ``source`` in the same module namespace. The run passes
    only when the harness saw both return normally and said so with the run's token
    (``tests_run == 1``); leaving early in any way (``SystemExit`` raised by the program,
    ``os._exit``, a signal) is not a pass. Without ``test``, ``source`` passes by running to its
    end.

    ``allow_weak``: run in the audit-hook fallback when namespaces are unavailable; without it
    that raises :class:`SandboxError` (the fallback is weak: see ``docs/sandbox.md``).
    ``require_namespaces``: refuse the fallback even with ``allow_weak``.
    ``python``: the interpreter (default: this one).
    Raises :class:`SandboxError` when the sandbox cannot be set up or reports nothing.
    """
    lim = limits if limits is not None else SandboxLimits()
    if lim.timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    mode = containment_mode()
    if not mode["namespaces"] and (require_namespaces or not allow_weak):
        why = (
            f"{FORCE_WEAK_ENV}=1 is set"
            if mode.get("forced_weak")
            else "unshare --mount --net --pid failed or is missing"
        )
        raise SandboxError(
            f"namespaces are not available here ({why}); the only other containment is the "
            "weak audit-hook fallback (same user, hooks the program can defeat), used only when "
            + (
                "require_namespaces is off"
                if require_namespaces
                else "explicitly allowed (allow_weak=True)"
            )
        )
    _remove_leftovers_once()
    exe = python or sys.executable
    workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{_owner_tag()}-")
    expose = _paths_to_expose(exe)
    uid = gid = None
    # Without a mount namespace we cannot re-expose a Python installation that other users may
    # not enter (e.g. under /root): then the program keeps our uid.
    if mode["switch_uid"] and (
        mode["namespaces"] or all(_blocked_ancestor(p + "/x") is None for p in expose)
    ):
        uid, gid = _random_id(), _random_id()
    if not mode["namespaces"] and uid is not None:
        # No tmpfs in this mode: the real directory must belong to the sandbox user.
        os.chown(workdir, uid, gid if gid is not None else -1)
    job = {
        "source": source,
        "test": test,
        "workdir": workdir,
        "uid": uid,
        "gid": gid,
        "namespaces": bool(mode["namespaces"]),
        "user_namespace": bool(mode["user_namespace"]),
        "limits": asdict(lim),
        "cpu_s": lim.cpu_seconds(),
        "expose": expose,
    }
    cmd = [exe, "-I", _THIS_FILE, "--supervise"]
    if mode["namespaces"]:
        extra = ("--user", "--map-root-user") if mode["user_namespace"] else ()
        cmd = [str(mode["unshare"]), *extra, *_NS_FLAGS, "--", *cmd]
    # The supervisor writes its report on its stdout (the program's stdout goes elsewhere),
    # after this marker: communicate() drains the pipe while it runs, so no report size can
    # block it, and nothing else printed there (a start-up message) can be taken for it.
    marker = "\n--llmeval-sandbox-report-" + secrets.token_hex(8) + "--\n"
    job["marker"] = marker
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_minimal_env(workdir),
            cwd=workdir,
            start_new_session=True,
        )
        pgid = proc.pid
        timed_out = False
        try:
            out, err = proc.communicate(
                json.dumps(job).encode(), timeout=lim.timeout_s + _STARTUP_GRACE_S
            )
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(pgid)
            out, err = proc.communicate()
        # Whatever is left of the group (fallback mode: the program's children) goes too.
        _kill_group(pgid)
        duration = time.monotonic() - t0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    containment = _describe(mode, uid is not None)
    if timed_out:
        return SandboxResult(
            status="timeout",
            message=f"no result within {lim.timeout_s:g} s (killed)",
            returncode=proc.returncode,
            duration_s=duration,
            containment=containment,
            pgid=pgid,
        )
    _, found, verdict = out.decode("utf-8", "replace").rpartition(marker)
    if not found:
        tail = (err.decode("utf-8", "replace") + out.decode("utf-8", "replace"))[-2000:]
        raise SandboxError(
            f"the sandbox did not report (exit status {proc.returncode}); its output: {tail!r}"
        )
    try:
        data = json.loads(verdict)
    except ValueError as exc:
        raise SandboxError(f"the sandbox sent an unreadable report: {verdict[:200]!r}") from exc
    if data.get("setup_error"):
        raise SandboxError(f"the sandbox could not be set up: {data['setup_error']}")
    containment.update(data.get("containment") or {})
    message = data.get("message")
    line = data.get("test_line")
    if test is not None and type(line) is int and message is not None:
        lines = test.splitlines()
        if 1 <= line <= len(lines):
            message = f"{message} (test line {line}: {lines[line - 1].strip()[:200]})"
    return SandboxResult(
        status=str(data["status"]),
        exception=data.get("exception"),
        message=message,
        traceback=str(data.get("traceback") or ""),
        stdout=str(data.get("stdout") or ""),
        stderr=str(data.get("stderr") or ""),
        returncode=data.get("returncode"),
        signal=data.get("signal"),
        duration_s=duration,
        tests_run=1 if data.get("tests_run") == 1 and data["status"] == "passed" else 0,
        violations=[str(v) for v in data.get("violations") or []],
        containment=containment,
        pgid=pgid,
    )


def _drain(fd: int) -> list[bytes]:
    """What a non-blocking pipe holds now."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return chunks


def _describe(mode: dict[str, Any], switched: bool) -> dict[str, Any]:
    ns = bool(mode["namespaces"])
    # Root (also root inside a user namespace) is exempt from RLIMIT_NPROC: the worker then
    # refuses fork() through its audit hook instead.
    fork_refused = not switched and (os.geteuid() == 0 or bool(mode["user_namespace"]))
    # Without the uid switch, a non-root user's process count includes its other processes.
    nproc = "+rlimit_nproc" if switched else ("" if fork_refused else "+rlimit_nproc_shared")
    return {
        "network": "namespace" if ns else "audit_hook",
        "filesystem": ("read_only_mounts" if ns else "audit_hook")
        + ("+separate_uid" if switched else "")
        + "+audit_hook" * ns,
        "processes": ("pid_namespace" if ns else "process_group")
        + nproc
        + ("+fork_refused" if fork_refused else ""),
        "user": "separate_uid" if switched else "unchanged",
        "rlimits": ["AS", "CPU", "NPROC", "NOFILE", "FSIZE", "CORE"],
        "isolated_python": True,
        "environment": "minimal",
    }


def _paths_to_expose(exe: str) -> list[str]:
    """The Python installation and its import path (needed by the program, read-only)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.realpath(exe)))
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            paths.add(entry)
    real = sorted({os.path.realpath(p) for p in paths if os.path.isabs(p)})
    # Drop paths inside another listed path.
    kept: list[str] = []
    for p in real:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


# --------------------------------------------------------------------------------------------
# Inside the sandbox: the supervisor (PID 1 of the namespace, still privileged) and the worker
# (the forked process that drops privileges and runs the program).
# --------------------------------------------------------------------------------------------

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_MOVE = 8192
_MS_REC = 16384
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_RELATIME = 1 << 21
_MS_STRICTATIME = 1 << 24
# Flags a read-only remount must keep (inside a user namespace they are locked).
_KEPT_FLAGS = {
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
    "strictatime": _MS_STRICTATIME,
}
_PR_SET_NO_NEW_PRIVS = 38


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def _mount(
    libc: Any, src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    import ctypes

    rc = libc.mount(
        src.encode() if src else None,
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    )
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def _traversable_by_others(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return False


def _blocked_ancestor(path: str) -> str | None:
    """The highest directory above ``path`` that other users may not enter, if any."""
    parts = path.strip("/").split("/")
    current = ""
    for part in parts[:-1]:
        current += "/" + part
        if not _traversable_by_others(current):
            return current
    return None


def _setup_filesystem(job: dict[str, Any], info: dict[str, Any]) -> None:
    """Mount-namespace set-up, as root inside the new namespaces (see the module docstring)."""
    libc = _libc()
    workdir = job["workdir"]
    lim = job["limits"]
    # 1. Re-expose the Python installation under directories the sandbox user cannot enter
    #    (e.g. /root/.pyenv): bind each needed tree to a staging point, cover the blocked
    #    directory with a tmpfs, recreate the path in it and move the bind there.
    exposed: list[str] = []
    if job["uid"] is not None:
        groups: dict[str, list[str]] = {}
        for path in job["expose"]:
            anc = _blocked_ancestor(path)
            if anc is not None and anc != "/":
                groups.setdefault(anc, []).append(path)
        if groups:
            _mount(libc, "tmpfs", workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0700")
            for anc, paths in sorted(groups.items()):
                stages = []
                for i, path in enumerate(paths):
                    stage = os.path.join(workdir, f"stage{len(exposed)}-{i}")
                    os.mkdir(stage)
                    _mount(libc, path, stage, None, _MS_BIND | _MS_REC)
                    stages.append((stage, path))
                _mount(libc, "tmpfs", anc, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
                for stage, path in stages:
                    os.makedirs(path, mode=0o755, exist_ok=True)
                    _mount(libc, stage, path, None, _MS_MOVE)
                    exposed.append(path)
            if libc.umount2(workdir.encode(), 2) != 0:  # MNT_DETACH
                raise OSError("could not unmount the staging tmpfs")
    info["exposed"] = exposed
    # 2. Every mount read-only (keeping nosuid/nodev/noexec, which may not be cleared).
    failed: list[str] = []
    count = 0
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        entries = [line.split() for line in fh]
    for fields in entries:
        target = fields[4].replace("\\040", " ")
        opts = fields[5].split(",")
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for opt in opts:
            flags |= _KEPT_FLAGS.get(opt, 0)
        try:
            _mount(libc, None, target, None, flags)
            count += 1
        except OSError:
            failed.append(target)
    info["read_only_mounts"] = count
    if "/" in failed:
        raise OSError("could not make / read-only")
    info["read_only_failed"] = failed
    # 3. Writable places: the working directory (a fresh tmpfs owned by the sandbox user) and a
    #    small private /dev/shm (multiprocessing needs it).
    owner = ""
    if job["uid"] is not None:
        owner = f",uid={job['uid']},gid={job['gid']}"
    _mount(
        libc,
        "tmpfs",
        workdir,
        "tmpfs",
        _MS_NOSUID | _MS_NODEV,
        f"size={int(lim['workdir_mb'])}m,mode=0700{owner}",
    )
    if os.path.isdir("/dev/shm"):
        try:
            _mount(
                libc,
                "tmpfs",
                "/dev/shm",
                "tmpfs",
                _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                f"size=8m,mode=1777{owner}",
            )
        except OSError:
            pass


def _tail(text: str, n: int) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def _read_tail(fd: int, n: int) -> str:
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4 * n, max(0, size - 4 * n))
    except OSError:
        return ""
    return _tail(data.decode("utf-8", "replace"), n)


def _hidden_file(workdir: str, name: str) -> int:
    """A file in the working directory, unlinked at once: the program cannot swap it for a
    symlink or a FIFO, and the supervisor reads it through its own descriptor."""
    path = os.path.join(workdir, f".{name}-{secrets.token_hex(8)}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.unlink(path)
    return fd


def _supervise() -> None:
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    marker = str(job["marker"])
    lim = job["limits"]
    info: dict[str, Any] = {}
    if job["namespaces"]:
        try:
            _setup_filesystem(job, info)
        except OSError as exc:
            _report(marker, {"setup_error": str(exc)})
            os._exit(3)
    workdir = job["workdir"]
    out_fd = _hidden_file(workdir, "stdout")
    err_fd = _hidden_file(workdir, "stderr")
    rfd, wfd = os.pipe()
    # The token pipe: the worker makes the run's token after the fork (so no frame or object of
    # this process, which the worker inherits, holds it), sends it here and closes its end
    # before any of the program's code runs.
    token_r, token_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            os.close(token_r)
            _worker(job, wfd, token_w, out_fd, err_fd)
        finally:
            os._exit(70)
    os.close(wfd)
    os.close(token_w)
    os.set_blocking(rfd, False)
    deadline = t0 + float(lim["timeout_s"])
    status: int | None = None
    timed_out = False
    chunks: list[bytes] = []
    while status is None:
        chunks.extend(_drain(rfd))  # keep the pipe empty: a blocked writer would look hung
        # Reap every child that ends (we are PID 1 of the namespace: orphans come to us).
        try:
            wpid, wstatus = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if wpid == pid:
            status = wstatus
            break
        if wpid != 0:
            continue
        if time.monotonic() >= deadline:
            timed_out = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    chunks.extend(_drain(rfd))
    os.close(rfd)
    report = b"".join(chunks)
    token = _read_token(token_r)
    n = int(lim["output_chars"])
    verdict = _check_report(report, token, has_test=job.get("test") is not None)
    if verdict.get("setup_error"):
        _report(marker, {"setup_error": str(verdict["setup_error"])})
        os._exit(3)
    if timed_out:
        verdict = {
            "status": "timeout",
            "message": f"still running after {float(lim['timeout_s']):g} s (killed)",
            "violations": verdict.get("violations", []),
        }
    elif not verdict.get("status"):
        verdict = _status_from_wait(status, job)
    if status is not None:
        if os.WIFSIGNALED(status):
            verdict["returncode"] = -os.WTERMSIG(status)
        elif os.WIFEXITED(status):
            verdict["returncode"] = os.WEXITSTATUS(status)
    verdict["stdout"] = _read_tail(out_fd, n)
    verdict["stderr"] = _read_tail(err_fd, n)
    verdict["traceback"] = _tail(str(verdict.get("traceback") or ""), n)
    verdict["containment"] = info
    _report(marker, verdict)
    if not job["namespaces"]:
        # Without a PID namespace, stop the program's children still in our group (the parent
        # kills the whole group again after we exit).
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(0)


def _read_token(fd: int) -> str:
    """The token the worker sent before the program ran ("" when it sent none)."""
    data = b""
    try:
        while len(data) < 64:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    os.close(fd)
    return data.decode("ascii", "replace").strip()


def _check_report(report: bytes, token: str, *, has_test: bool) -> dict[str, Any]:
    """The worker's report, if it is one: exactly one JSON object that the reporter hook wrote,
    carrying the run's token, the kind (``passed``, ``failed``, ``setup_error``) and the
    harness's details.

    Empty: the process ended without reporting (``{}``; the wait status says how). Anything else
    that is not exactly that report (the program wrote to the inherited result pipe, with or
    without a forged report of its own), or a report saying the program raised the report event
    itself, is ``tampered``, never a pass. Only the kind ``passed`` passes: the details cannot
    turn a failure into a pass.
    """
    import hmac

    if not report:
        return {}
    tampered = {
        "status": "tampered",
        "message": "the result channel held data that is not the harness's report "
        f"({len(report)} bytes without the run's token): the program wrote to it",
    }
    try:
        data = json.loads(report.decode("utf-8", "strict"))
    except ValueError:
        return tampered
    if (
        not isinstance(data, dict)
        or len(token) < 32
        or not isinstance(data.get("token"), str)
        or not hmac.compare_digest(data["token"].encode(), token.encode())
    ):
        return tampered
    details = data.get("report")
    if not isinstance(details, dict):
        details = {}
    kind = data.get("kind")
    if kind == "setup_error":
        return {"setup_error": str(details.get("setup_error") or "unknown")}
    if data.get("forged") != 0:
        return {
            "status": "tampered",
            "message": "the program raised the sandbox's report event itself (a forged report)",
            "violations": details.get("violations", []),
        }
    if kind == "passed":
        return {
            "status": "passed",
            "tests_run": 1 if has_test else 0,
            "violations": details.get("violations", []),
        }
    if kind != "failed" or details.get("status") in (None, "passed"):
        return {
            "status": "error",
            "message": "the harness's report was incomplete",
            **{k: details[k] for k in ("violations", "traceback") if k in details},
        }
    details.pop("tests_run", None)
    return details


def _status_from_wait(status: int | None, job: dict[str, Any]) -> dict[str, Any]:
    if status is None:
        return {"status": "error", "message": "the program's process vanished"}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            return {
                "status": "timeout",
                "signal": name,
                "message": f"CPU time limit of {job['cpu_s']} s exceeded",
            }
        hint = ""
        if sig == signal.SIGKILL:
            hint = " (possibly out of memory)"
        elif sig == signal.SIGXFSZ:
            hint = " (file size limit)"
        return {"status": "signal", "signal": name, "message": f"killed by {name}{hint}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    return {
        "status": "exited",
        "message": f"the program ended its process (exit status {code}, e.g. os._exit) "
        "before its tests finished",
    }


def _report(marker: str, data: dict[str, Any]) -> None:
    """The supervisor's report to the parent: marker and JSON on its stdout."""
    sys.stdout.flush()
    _send(1, data, prefix=marker.encode("utf-8"))


def _send(fd: int, data: dict[str, Any], prefix: bytes = b"") -> None:
    payload = prefix + json.dumps(data, default=str, ensure_ascii=False).encode("utf-8")
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.close(fd)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_ALLOWED_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/full"})
# Audit events whose arguments are paths the program wants to change: event -> argument indexes.
_PATH_EVENTS: dict[str, tuple[int, ...]] = {
    "os.mkdir": (0,),
    "os.rmdir": (0,),
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "shutil.chown": (0,),
}
_SPAWN_EVENTS = frozenset(
    {"os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "os.forkpty"}
)
# Refused in every mode once the program runs: they reach objects (audit hooks, other threads'
# frames, any object on the heap, raw memory) that only the harness may use, or let code run
# inside the harness's frames (tracing, profiling, new audit hooks).
_INTROSPECTION_EVENTS = frozenset(
    {
        "sys.addaudithook",
        "sys._current_frames",
        "sys._current_exceptions",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        # Hand-made code objects: CPython does not verify bytecode, and out-of-range operands
        # read arbitrary memory.
        "code.__new__",
    }
)
# Modules that read or write raw memory (refused in every mode: they could read the run's token).
_NATIVE_MODULES = frozenset({"_ctypes", "ctypes", "cffi", "_cffi_backend"})
_REPORT_EVENT = "llmeval.sandbox.report"


def _install_hooks(
    workdir: str, with_network: bool, allow_fork: bool, violations: list[str]
) -> None:
    root = os.path.realpath(workdir)
    prefix = root.rstrip("/") + "/"
    realpath = os.path.realpath
    normpath = os.path.normpath
    join = os.path.join
    getcwd = os.getcwd
    fspath = os.fspath
    proc_private = re.compile(
        r"/proc/[^/]+/(?:task/[^/]+/)?(?:environ|mem|fd/.*|fdinfo/.*|map_files/.*)\Z"
    )

    def inside(raw: Any) -> bool:
        if isinstance(raw, int):
            return True  # an already open descriptor
        try:
            text = fspath(raw)
        except TypeError:
            return False
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        full = realpath(text)
        return full == root or full.startswith(prefix) or full in _ALLOWED_DEVICES

    def private_proc_file(raw: Any) -> bool:
        """A process's memory, environment or open descriptors under /proc (as written, or
        once resolved): another process's secrets (same user in the weak mode) or the
        harness's own memory and pipes."""
        try:
            text = fspath(raw)
        except TypeError:
            return False
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        return bool(proc_private.match(normpath(join(getcwd(), text)))) or bool(
            proc_private.match(realpath(text))
        )

    def refuse(what: str, kind: type[Exception] = PermissionError) -> None:
        if len(violations) < 50:
            violations.append(what if len(what) <= 300 else what[:297] + "...")
        if kind is ImportError:
            raise ImportError(f"sandbox: {what} is not allowed")
        raise PermissionError(errno.EACCES, f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        # First, and touching nothing the program could have replaced: the reporter's own
        # sys._getframe call passes through here while it holds the token (see _make_reporter).
        if event == "sys._getframe":
            return
        if event in _INTROSPECTION_EVENTS:
            # Ways to reach the reporter (an audit hook) or another thread's frames.
            refuse(f"{event} (the sandbox's harness is off limits)")
        if event == "import" and args and isinstance(args[0], str):
            name = args[0]
            if name in _NATIVE_MODULES or name.startswith(("_test", "ctypes.")):
                refuse(f"importing {name} (native memory access)", ImportError)
            if not with_network and name == "_posixsubprocess":
                refuse(f"importing {name}", ImportError)
            return
        if event.startswith("ctypes."):
            refuse(event)
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            if path is not None and not isinstance(path, int) and private_proc_file(path):
                refuse(f"opening {path!r} (another process's memory, environment or files)")
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags > 0 and bool(flags & _WRITE_FLAGS)
            )
            if writing and path is not None and not inside(path):
                refuse(f"writing {path!r} (outside the working directory)")
            return
        indexes = _PATH_EVENTS.get(event)
        if indexes is not None:
            for i in indexes:
                if i < len(args) and args[i] is not None and not inside(args[i]):
                    refuse(f"{event} on {args[i]!r} (outside the working directory)")
            return
        if not allow_fork and event in {"os.fork", "os.forkpty"}:
            refuse(f"starting a process ({event}) without a process limit")
        if with_network:
            return
        if event.startswith("socket."):
            if event in {
                "socket.__new__",
                "socket.connect",
                "socket.bind",
                "socket.sendto",
                "socket.sendmsg",
                "socket.getaddrinfo",
                "socket.gethostbyname",
                "socket.gethostbyaddr",
                "socket.gethostbyname_ex",
            }:
                refuse(f"network access ({event})")
        elif event in _SPAWN_EVENTS:
            refuse(f"starting a program ({event})")

    sys.addaudithook(hook)


def _set_limits(job: dict[str, Any]) -> None:
    import resource

    lim = job["limits"]

    def setl(which: int, value: int) -> None:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            _soft, hard = resource.getrlimit(which)
            capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (capped, capped))

    setl(resource.RLIMIT_CORE, 0)
    setl(resource.RLIMIT_CPU, int(job["cpu_s"]))
    setl(resource.RLIMIT_NOFILE, int(lim["max_open_files"]))
    setl(resource.RLIMIT_FSIZE, int(lim["max_file_size_mb"]) * _MiB)
    setl(resource.RLIMIT_NPROC, int(lim["max_processes"]))


def _drop_privileges(job: dict[str, Any], out_fd: int, err_fd: int) -> None:
    os.chdir(job["workdir"])  # before dropping privileges: the path above may not be traversable
    _set_limits(job)
    try:
        # No setuid binary may give privileges back (set while still root; survives setuid).
        _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    for name in ("ctypes", "_ctypes", "ctypes._endian"):
        sys.modules.pop(name, None)
    if job["uid"] is not None:
        os.setgroups([])
        os.setresgid(job["gid"], job["gid"], job["gid"])
        os.setresuid(job["uid"], job["uid"], job["uid"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.dont_write_bytecode = True


def _make_reporter(token_fd: int, result_fd: int) -> None:
    """Install the audit hook that alone can send the worker's report, and send the run's token
    to the supervisor.

    The token is made here, after the fork (nothing the worker inherited holds it), written to
    the token pipe, which is closed at once, and kept only in this hook's closure. Python code
    cannot list audit hooks, and ``gc.get_objects``/``get_referrers``/``get_referents``, new
    audit hooks, tracing and ``ctypes`` are refused once the program runs; so the program can
    neither read the token nor call the hook's inner functions.

    The hook acts only on :data:`_REPORT_EVENT` raised from the harness frame (the caller of
    this function, ``_worker``): the program can raise the event too, but from its own frames,
    which only marks the run as forged. While the hook holds the token it runs no code the
    program could have replaced: everything it calls was bound here (C functions), and the one
    audit event it raises itself (``sys._getframe``) is the first thing the other hooks return
    on.
    """
    token = secrets.token_hex(16)
    try:
        os.write(token_fd, token.encode("ascii"))
    finally:
        os.close(token_fd)
    harness = sys._getframe(1)
    getframe = sys._getframe
    getpid = os.getpid
    owner = getpid()
    write = os.write
    close = os.close
    str_type = str
    head = '{"token": "' + token + '", "kind": "'
    del token
    state = [0, False]  # [forged attempts, sent]

    def reporter(event: str, args: tuple[Any, ...]) -> None:
        if event != "llmeval.sandbox.report":  # a constant: nothing the program can replace
            return
        try:
            if getframe(1) is not harness or getpid() != owner:
                state[0] += 1
                return
            if state[1]:
                return
            state[1] = True
            kind, payload = args
            if kind.__class__ is not str_type or payload.__class__ is not str_type:
                return
            data = (
                head
                + kind
                + '", "forged": '
                + ("1" if state[0] else "0")
                + ', "report": '
                + payload
                + "}"
            ).encode("utf-8", "backslashreplace")
            while data:
                written = write(result_fd, data)
                data = data[written:]
            close(result_fd)
        except BaseException:
            return

    sys.addaudithook(reporter)


def _worker(job: dict[str, Any], result_fd: int, token_fd: int, out_fd: int, err_fd: int) -> None:
    import gc
    import resource
    import traceback
    import types

    # Everything the harness uses after the program started is bound here, before: the program
    # may replace builtins and module attributes (exec, sys.audit, os.getpid, ...), but not
    # this frame's locals.
    run = exec
    audit = sys.audit
    getpid = os.getpid
    exit_now = os._exit
    dumps = json.dumps
    is_instance = isinstance
    set_handler = signal.signal
    ignore_handler = signal.SIG_IGN
    signals = tuple(int(s) for s in signal.valid_signals())
    gc_disable = gc.disable
    gc_callbacks = gc.callbacks
    report_event = _REPORT_EVENT

    _make_reporter(token_fd, result_fd)
    workdir = job["workdir"]
    program_path = os.path.join(workdir, "program.py")
    test_source = job.get("test")
    # The test is not written to disk: a program that opens a file beside it must not find the
    # expected answers there (tracebacks show "<test>" lines without their source).
    test_path = _TEST_FILENAME
    unittest_check = _unittest_checker() if test_source is not None else None
    unrun_cases = _unrun_case_finder() if test_source is not None else None
    try:
        _drop_privileges(job, out_fd, err_fd)
        with open(program_path, "w", encoding="utf-8") as fh:
            fh.write(job["source"])
    except BaseException as exc:  # reported to the parent, which raises SandboxError
        audit(report_event, "setup_error", dumps({"setup_error": f"{type(exc).__name__}: {exc}"}))
        exit_now(72)
    my_pid = getpid()
    violations: list[str] = []
    forks = [0]

    def count_forks(event: str, args: tuple[Any, ...]) -> None:
        if event in {"os.fork", "subprocess.Popen", "os.posix_spawn"}:
            forks[0] += 1

    sys.addaudithook(count_forks)
    # Root is exempt from RLIMIT_NPROC: without a uid switch, forking is refused outright.
    allow_fork = job["uid"] is not None or os.geteuid() != 0
    # Last: from now on no audit hook can be added.
    _install_hooks(
        workdir, with_network=job["namespaces"], allow_fork=allow_fork, violations=violations
    )
    module = types.ModuleType("__main__")
    module.__file__ = program_path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = [program_path]
    result: dict[str, Any]
    memory = int(job["limits"]["memory_mb"]) * _MiB
    # The two phases run one after the other in one namespace. ``passed`` becomes True only
    # where the control flow of this frame proves it: after both returned, or after the real
    # unittest.main() ended a run that ran every test it collected.
    passed = False
    phase = "program"
    try:
        code = compile(job["source"], program_path, "exec")
        test_code = compile(test_source, test_path, "exec") if test_source is not None else None
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        run(code, module.__dict__)  # running the program is the point
        if test_code is not None:
            phase = "test"
            run(test_code, module.__dict__)
        unrun = unrun_cases(module.__dict__) if unrun_cases is not None else []
        if unrun:
            # unittest.TestCase tests that the test defined but never ran (no unittest.main()):
            # finishing without an exception proves nothing about them.
            result = {
                "status": "no_tests",
                "message": "the test defines unittest.TestCase tests that never ran ("
                + ", ".join(unrun[:5])
                + "); end the test with unittest.main()",
            }
        else:
            passed = True
            result = {"status": "passed"}
    except BaseException as exc:  # every way the program ends is a result
        if (
            phase == "test"
            and unittest_check is not None
            and is_instance(exc, SystemExit)
            and unittest_check(exc, program_path)
        ):
            passed = True
            result = {"status": "passed"}
        else:
            try:
                result = _classify(exc, forks[0], phase, program_path)
                text = "".join(traceback.format_exception(exc))
                line = _last_line_in(exc, test_path)
            except BaseException:
                result = {"status": "error", "message": "(the exception could not be described)"}
                text, line = f"{type(exc).__name__}: (traceback unavailable)", None
            if result.get("status") == "passed":
                result = {"status": "exited", "message": "the run ended without passing"}
            result["traceback"] = text[-8000:]
            if line is not None:
                result["test_line"] = line
    if getpid() != my_pid:
        exit_now(1)  # a process the program forked: only the original one reports
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    result["violations"] = violations
    try:
        payload = dumps(result)
    except BaseException:
        payload = '{"status": "error", "message": "the report could not be encoded"}'
    # No Python signal handler or gc callback of the program may run while the reporter holds
    # the token (a handler receives the current frame): all ignored (a late alarm
    # must not kill a run that passed), collection off.
    for signum in signals:
        try:
            set_handler(signum, ignore_handler)
        except (OSError, ValueError, RuntimeError):
            pass
    gc_disable()
    gc_callbacks.clear()
    audit(report_event, "passed" if passed else "failed", payload)
    exit_now(0)


def _unittest_checker() -> Any:
    """A check bound to the real unittest objects, taken before the program runs: whether a
    ``SystemExit`` is ``unittest.main()``'s after a successful run that ran every test it
    collected (at least one). The program could still patch unittest's classes, as it could
    patch ``TestCase.assertEqual``: see docs/sandbox.md."""
    import unittest
    import unittest.main

    # unittest.main is also the name of the TestProgram class (unittest/__init__.py).
    program_class = sys.modules["unittest.main"].TestProgram
    run_tests = program_class.runTests.__code__
    text_result, plain_result = unittest.TextTestResult, unittest.TestResult
    default_runner = unittest.TextTestRunner
    suite_class = unittest.TestSuite
    count_cases = unittest.TestSuite.countTestCases
    was_successful = unittest.TestResult.wasSuccessful
    traceback_of = BaseException.__dict__["__traceback__"].__get__
    code_of = SystemExit.__dict__["code"].__get__
    int_type, type_of = int, type

    def check(exc: SystemExit, program_path: str) -> bool:
        try:
            return inspect(exc, program_path)
        except Exception:  # an object of the program's that is not what it claims
            return False

    def inspect(exc: SystemExit, program_path: str) -> bool:
        code = code_of(exc)
        if not (code is None or code is False or (type_of(code) is int_type and code == 0)):
            return False
        tb = traceback_of(exc)
        last = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == program_path:
                return False  # the program's own code raised it
            last = tb
            tb = tb.tb_next
        if last is None or last.tb_frame.f_code is not run_tests:
            return False
        program = last.tb_frame.f_locals.get("self")
        if type_of(program) is not program_class:
            return False
        state = program.__dict__
        # The default runner (a runner passed in could return any result it likes), its own
        # result and suite classes; identity checks only (a class's __eq__ could lie).
        if state.get("testRunner") is not default_runner:
            return False
        result = state.get("result")
        test = state.get("test")
        result_type = type_of(result)
        if (result_type is not text_result and result_type is not plain_result) or type_of(
            test
        ) is not suite_class:
            return False
        ran = result.__dict__.get("testsRun")
        collected = count_cases(test)
        return (
            type_of(ran) is int_type
            and type_of(collected) is int_type
            and ran >= 1
            and ran == collected
            and was_successful(result) is True
        )

    return check


def _unrun_case_finder() -> Any:
    """A finder bound to the real ``unittest.TestCase``, taken before the program runs: the names
    of the ``TestCase`` subclasses with ``test*`` methods in a namespace (after the test phase
    returned normally, none of them ran through ``unittest.main()``)."""
    import unittest

    test_case = unittest.TestCase
    is_subclass, type_of, dir_of = issubclass, type, dir
    starts = str.startswith

    def find(namespace: dict[str, Any]) -> list[str]:
        found: list[str] = []
        try:
            for name, value in list(namespace.items()):
                if type_of(value) is not type_of(test_case) or value is test_case:
                    continue
                if is_subclass(value, test_case) and any(
                    starts(attr, "test") for attr in dir_of(value)
                ):
                    found.append(str(name))
        except Exception:  # a namespace object of the program's that misbehaves
            return ["(the test's namespace could not be inspected)"]
        return found

    return find


def _last_line_in(exc: BaseException, path: str) -> int | None:
    """The line of ``path`` the exception last passed through (the failing line of the test)."""
    tb = exc.__traceback__
    line = None
    seen = 0
    while tb is not None and seen < 10_000:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
        seen += 1
    return line


def _small_repr(value: Any) -> str:
    """A short description of a value the program chose (its own ``__repr__`` never runs)."""
    if value is None or type(value) in (bool, int):
        return repr(value)
    if type(value) is str:
        return repr(value[:80])
    return f"a {type(value).__name__} object"


def _raised_by(exc: BaseException, path: str) -> bool:
    """Whether a frame of the file ``path`` is in the exception's traceback."""
    tb = exc.__traceback__
    seen = 0
    while tb is not None and seen < 10_000:
        if tb.tb_frame.f_code.co_filename == path:
            return True
        tb = tb.tb_next
        seen += 1
    return False


def _classify(exc: BaseException, forks: int, phase: str, program_path: str) -> dict[str, Any]:
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        code = exc.code
        # ``is``/``type`` checks: the status is the program's object, whose __eq__ may lie.
        clean = code is None or code is False or (type(code) is int and code == 0)
        if phase == "test" and not _raised_by(exc, program_path):
            if not clean:  # e.g. unittest.main() after a failed run
                return {
                    "status": "failure",
                    "exception": name,
                    "message": f"SystemExit with status {_small_repr(code)}",
                }
            # (the harness has already checked for a successful unittest.main(): not that)
            return {
                "status": "exited",
                "exception": name,
                "message": f"the test ended with SystemExit({_small_repr(code)}) outside a "
                "successful unittest.main() run (one that ran every test it collected, at "
                "least one): a clean exit counts only from there",
            }
        when = "before its tests ran" if phase == "program" else "while a test ran"
        return {
            "status": "exited",
            "exception": name,
            "message": f"the program raised SystemExit({_small_repr(code)}) (sys.exit, exit() "
            f"or raise SystemExit) {when}",
        }
    try:
        message = str(exc)[:500]
    except Exception:
        message = "(the exception's message could not be read)"
    if isinstance(exc, AssertionError):
        return {"status": "failure", "exception": name, "message": message or "assertion failed"}
    if isinstance(exc, MemoryError):
        return {"status": "memory", "exception": name, "message": "memory limit exceeded"}
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN and forks > 0:
        return {
            "status": "process_limit",
            "exception": name,
            "message": "process limit reached (fork refused)",
        }
    return {"status": "error", "exception": name, "message": message}


if __name__ == "__main__" and sys.argv[1:] == ["--supervise"]:
    _supervise()
