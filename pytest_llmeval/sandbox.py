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
  the like outside the working directory are refused. Without a network namespace the hook
  also refuses socket creation, and, since a child program would escape the hooks, starting
  programs (``exec``, ``subprocess``, ``os.system``) and ``ctypes``. Audit hooks are a second
  layer only: C extensions do not pass through them. Where ``RLIMIT_NPROC`` cannot bind (root
  without a uid switch, or root inside a user namespace) the hook refuses ``fork`` as well.
- The environment is minimal (nothing of the parent's, so no API key leaks), Python runs in
  isolated mode (``-I``), stdin is ``/dev/null``, and a wall-clock timeout kills the whole
  process group (and, with the PID namespace, everything inside it).

What it does not do: the memory limit is per process (a program may hold up to
``max_processes * memory_mb``; no cgroup is created); the program can read any file that every
user may read; in the fallback mode (no namespaces) the audit hooks are the only network and
filesystem barrier besides the uid, and they do not bind C code.

How a run ended (``SandboxResult.status``): ``passed``; ``failure`` (an ``AssertionError``, or a
``SystemExit`` with a non-zero status, as ``unittest.main()`` raises when a test fails); ``error``
(any other exception; ``exception`` names its type); ``timeout`` (wall clock or CPU time);
``memory`` (``MemoryError``); ``process_limit`` (``fork`` refused by the process limit);
``signal`` (killed by a signal, named in ``signal``); ``exited`` (the program ended the process,
e.g. ``os._exit``, before its tests finished). A ``SystemExit`` with status 0 or ``None`` counts
as passed.
"""

from __future__ import annotations

import errno
import json
import os
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
)

_THIS_FILE = os.path.abspath(__file__)
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
    violations: list[str] = field(default_factory=list)
    """Operations the audit hooks refused (even when the program caught the error)."""
    containment: dict[str, Any] = field(default_factory=dict)
    pgid: int | None = None
    """Process group the sandbox ran in (gone when :func:`run_python` returns)."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

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
    """
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


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_python(
    source: str,
    limits: SandboxLimits | None = None,
    *,
    python: str | None = None,
    require_namespaces: bool = False,
) -> SandboxResult:
    """Run Python ``source`` in the sandbox and report how it ended.

    ``python``: the interpreter (default: this one). ``require_namespaces``: raise
    :class:`SandboxError` instead of falling back to audit hooks when namespaces are unavailable.
    Raises :class:`SandboxError` when the sandbox cannot be set up or reports nothing.
    """
    lim = limits if limits is not None else SandboxLimits()
    if lim.timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    mode = containment_mode()
    if require_namespaces and not mode["namespaces"]:
        raise SandboxError(
            "namespaces are not available here (unshare --mount --net --pid failed) and "
            "require_namespaces=True"
        )
    exe = python or sys.executable
    workdir = tempfile.mkdtemp(prefix="llmeval-sandbox-")
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
    return SandboxResult(
        status=str(data["status"]),
        exception=data.get("exception"),
        message=data.get("message"),
        traceback=str(data.get("traceback") or ""),
        stdout=str(data.get("stdout") or ""),
        stderr=str(data.get("stderr") or ""),
        returncode=data.get("returncode"),
        signal=data.get("signal"),
        duration_s=duration,
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
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            _worker(job, wfd, out_fd, err_fd)
        finally:
            os._exit(70)
    os.close(wfd)
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
    n = int(lim["output_chars"])
    verdict: dict[str, Any]
    try:
        verdict = json.loads(report.decode("utf-8", "replace")) if report else {}
    except ValueError:
        verdict = {}
    if not isinstance(verdict, dict):
        verdict = {}
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
        "message": f"the program ended its process (exit status {code}) before the tests finished",
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


def _install_hooks(
    workdir: str, with_network: bool, allow_fork: bool, violations: list[str]
) -> None:
    root = os.path.realpath(workdir)
    prefix = root.rstrip("/") + "/"
    realpath = os.path.realpath
    fspath = os.fspath

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

    def refuse(what: str) -> None:
        if len(violations) < 50:
            violations.append(what if len(what) <= 300 else what[:297] + "...")
        raise PermissionError(errno.EACCES, f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
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
        elif event.startswith("ctypes.") or (
            event == "import" and args and args[0] in {"_ctypes", "ctypes", "_posixsubprocess"}
        ):
            refuse(f"{event} {args[0] if args else ''}".strip())

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


def _worker(job: dict[str, Any], result_fd: int, out_fd: int, err_fd: int) -> None:
    import resource
    import traceback
    import types

    workdir = job["workdir"]
    program_path = os.path.join(workdir, "program.py")
    try:
        _drop_privileges(job, out_fd, err_fd)
        with open(program_path, "w", encoding="utf-8") as fh:
            fh.write(job["source"])
    except BaseException as exc:  # reported to the parent, which raises SandboxError
        _send(result_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
        os._exit(72)
    my_pid = os.getpid()
    violations: list[str] = []
    forks = [0]
    # Root is exempt from RLIMIT_NPROC: without a uid switch, forking is refused outright.
    allow_fork = job["uid"] is not None or os.geteuid() != 0
    _install_hooks(
        workdir, with_network=job["namespaces"], allow_fork=allow_fork, violations=violations
    )

    def count_forks(event: str, args: tuple[Any, ...]) -> None:
        if event in {"os.fork", "subprocess.Popen", "os.posix_spawn"}:
            forks[0] += 1

    sys.addaudithook(count_forks)
    module = types.ModuleType("__main__")
    module.__file__ = program_path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = [program_path]
    result: dict[str, Any]
    memory = int(job["limits"]["memory_mb"]) * _MiB
    try:
        code = compile(job["source"], program_path, "exec")
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        exec(code, module.__dict__)  # running the program is the point
        result = {"status": "passed"}
    except BaseException as exc:  # every way the program ends is a result
        result = _classify(exc, forks[0])
        try:
            text = "".join(traceback.format_exception(exc))
        except BaseException:
            text = f"{type(exc).__name__}: (traceback unavailable)"
        if result["status"] != "passed":
            result["traceback"] = text[-8000:]
    if os.getpid() != my_pid:
        os._exit(1)  # a process the program forked: only the original one reports
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    result["violations"] = violations
    try:
        _send(result_fd, result)
    except BaseException:
        os._exit(71)
    os._exit(0)


def _classify(exc: BaseException, forks: int) -> dict[str, Any]:
    name = type(exc).__name__
    message = str(exc)[:500]
    if isinstance(exc, SystemExit):
        if exc.code in (None, 0, False):
            return {"status": "passed"}
        return {
            "status": "failure",
            "exception": name,
            "message": f"SystemExit with status {exc.code!r}",
        }
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
