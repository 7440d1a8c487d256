"""The run's judge spend, shared by every process of one pytest run (xdist workers included).

``--llm-eval-budget`` is a budget for the run, not for each worker: the controller creates one
small file, hands its path to each worker (``workerinput``), and every process adds what its
judge calls cost and reads the run's total before starting a call. The file holds one float64
(the dollars spent), updated under an exclusive ``flock``; a read takes a shared lock.

POSIX only (``fcntl``); elsewhere :func:`shared_spend_supported` is false and each process keeps
its own total, which the plugin says in ``--help``.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from pathlib import Path
from typing import final

__all__ = ["SharedSpend", "shared_spend_supported"]

_FORMAT = "<d"
_SIZE = struct.calcsize(_FORMAT)
_PREFIX = "llmeval-spend-"


def shared_spend_supported() -> bool:
    """Whether this platform can share the spend between processes (it needs ``fcntl``)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


@final
class SharedSpend:
    """Dollars spent on judge calls by all processes of a run, kept in one locked file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls) -> SharedSpend:
        """A new, zeroed spend file in the temporary directory (the caller removes it).

        Its name carries the creating process's pid: files left by runs that died (killed by a
        CI timeout, say) are removed here once their process is gone.
        """
        remove_stale_files(Path(tempfile.gettempdir()), _PREFIX)
        fd, name = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", suffix=".bin")
        try:
            os.write(fd, struct.pack(_FORMAT, 0.0))
        finally:
            os.close(fd)
        return cls(name)

    def add(self, usd: float) -> float:
        """Add ``usd`` to the run's spend; the new total."""
        import fcntl

        with self.path.open("r+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                total = _unpack(fh.read(_SIZE)) + usd
                fh.seek(0)
                fh.write(struct.pack(_FORMAT, total))
                fh.flush()
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return total

    def total(self) -> float:
        """The run's spend so far (0.0 if the file is gone: the run is over)."""
        import fcntl

        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return 0.0
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                return _unpack(fh.read(_SIZE))
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def remove(self) -> None:
        """Delete the file (end of the run, controller only)."""
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"SharedSpend({str(self.path)!r})"


def _unpack(data: bytes) -> float:
    if len(data) != _SIZE:
        raise OSError(f"the run's spend file is damaged ({len(data)} bytes, expected {_SIZE})")
    (value,) = struct.unpack(_FORMAT, data)
    # NaN would make every budget check false (no limit at all) and a negative amount would
    # add to the budget: neither is a sum of costs. (A huge amount only stops judge calls.)
    if not (math.isfinite(value) and value >= 0):
        raise OSError(
            f"the run's spend file is damaged (it holds {value!r}, not an amount of dollars)"
        )
    return float(value)


def remove_stale_files(directory: Path, prefix: str) -> None:
    """Delete ``<prefix><pid>-*.bin`` files (spend, rate limit) whose creating process no longer
    exists."""
    try:
        candidates = list(directory.glob(f"{prefix}*.bin"))
    except OSError:
        return
    for path in candidates:
        pid_text = path.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            path.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True
