"""Files written whole or not at all: a reader (another run, a CI step, a browser) never sees
half a report or half a saved run, and concurrent writers never interleave."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to a temporary file beside ``path``, then rename it into place;
    on any failure (Ctrl-C included) the temporary file is removed and ``path`` is untouched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
