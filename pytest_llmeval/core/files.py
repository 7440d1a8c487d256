"""Files written whole or not at all: a reader (another run, a CI step, a browser) never sees
half a report or half a saved run, and concurrent writers never interleave."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["dumps_report", "write_text_atomic"]


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


def dumps_report(document: Mapping[str, Any]) -> str:
    """``document`` as JSON a person can read and a program can write fast: one top-level key
    per line, and each element of a top-level list on its own line, every value in compact form
    (json's C encoder; an ``indent`` would make json use its pure-Python encoder, several times
    slower on a report of thousands of records). NaN or infinity is a ValueError."""
    import json

    encode = json.JSONEncoder(allow_nan=False, separators=(", ", ": ")).encode
    lines = ["{"]
    items = list(document.items())
    for i, (key, value) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        head = f" {encode(str(key))}: "
        if isinstance(value, list) and value:
            lines.append(head + "[")
            lines.extend(
                "  " + encode(v) + ("," if j < len(value) - 1 else "") for j, v in enumerate(value)
            )
            lines.append(" ]" + end)
        else:
            lines.append(head + encode(value) + end)
    lines.append("}")
    return "\n".join(lines) + "\n"
