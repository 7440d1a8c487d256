"""Tracebacks that show the user's code: the frames of pytest-llmeval, pytest and the
standard library are hidden from a failing assertion's traceback, so it ends at the test line
that asserted."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from types import TracebackType

import pytest

from pytest_llmeval.plugin import pytest_compat as compat
from pytest_llmeval.plugin.options import host_option

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # pytest_llmeval/, not plugin/


def _library_dirs() -> tuple[Path, ...]:
    """The standard library and site-packages folders (frames there are nobody's own code)."""
    import site
    import sysconfig

    found = {Path(os.__file__).resolve().parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            found.add(Path(path).resolve())
    try:
        found.update(Path(p).resolve() for p in site.getsitepackages())
    except AttributeError:  # some virtualenv builds lack it
        pass
    return tuple(found)


def _frame_path(tb: TracebackType) -> Path | None:
    try:
        return Path(tb.tb_frame.f_code.co_filename).resolve()
    except (ValueError, OSError):
        return None


_PYTEST_DIRS = compat.pytest_source_dirs()


def _is_pytest_frame(tb: TracebackType) -> bool:
    path = _frame_path(tb)
    return path is not None and (
        any(path.is_relative_to(d) for d in _PYTEST_DIRS) or "pluggy" in path.parts
    )


def _hide_package_frames(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An error of ours (unknown scorer, bad option or input, judge failure) is shown from the
    user's own frames: the message says what to do, and pytest-llmeval's internal frames (and
    the standard library's under them, e.g. the future a judge call ran in: dozens of lines per
    test) say nothing to the user. A user's own code called from ours (a custom scorer) stays.
    ``--fulltrace`` shows everything.

    The frames are unlinked from the raw traceback chain: pytest rebuilds its traceback from
    the raw entries when it cuts it at the test function, so filtering its Traceback object
    would not last."""
    if host_option(item.config, "fulltrace", False):
        return
    chain: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        chain.append(tb)
        tb = tb.tb_next
    libraries: tuple[Path, ...] | None = None
    kept: list[TracebackType] = []
    entered = False  # past the first frame of ours
    for t in chain:
        path = _frame_path(t)
        if path is not None and path.is_relative_to(_PACKAGE_DIR):
            entered = True
            continue
        if entered and path is not None:
            if libraries is None:
                libraries = _library_dirs()
            if any(path.is_relative_to(d) for d in libraries):
                continue
        kept.append(t)
    if not kept or kept[0] is not chain[0] or len(kept) == len(chain):
        return
    if all(_is_pytest_frame(t) for t in kept):
        # Raised by this plugin outside any user code (a concurrent case's timeout, handed
        # over in its call phase): hiding our frames would leave only pytest's own, which pytest
        # then shows in full. Keep the chain: pytest cuts its own frames and shows ours.
        return
    for before, after in itertools.pairwise(kept):
        before.tb_next = after
    kept[-1].tb_next = None
    # rebuild pytest's view from the shortened chain (it may have been computed already)
    compat.rebuild_traceback(excinfo)
