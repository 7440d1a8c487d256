"""The live status line (issue 14): shown on a real terminal (a pty), never mixed with pytest's
own output, absent with -q, --llm-eval-no-progress, its ini twin and a non-terminal stdout."""

from __future__ import annotations

import io
import re

COLUMNS = 120


_CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")


_OSC = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def screen(raw: str, width: int = COLUMNS) -> list[str]:
    """What a terminal shows after receiving ``raw`` (lines never scroll off): text, \\r, \\n,
    cursor up/down/forward (ESC[nA/B/C), erase to end of line (ESC[K); colours ignored."""
    raw = raw.replace("\n", "\r\n")  # the tty's ONLCR (a pty's output has it already)
    rows: list[list[str]] = [[]]
    r = c = 0
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\x1b":
            m = _CSI.match(raw, i) or _OSC.match(raw, i)
            assert m is not None, f"unknown escape at {i}: {raw[i : i + 10]!r}"
            if m.re is _CSI:
                n = int(m.group(1) or 1) if m.group(1).isdigit() else 1
                op = m.group(2)
                if op == "A":
                    r = max(r - n, 0)
                elif op == "B":
                    r += n
                elif op == "C":
                    c = min(c + n, width - 1)
                elif op == "K":
                    del rows[r][c:]
            i = m.end()
            continue
        while len(rows) <= r:
            rows.append([])
        if ch == "\r":
            c = 0
        elif ch == "\n":
            r += 1
        else:
            if c >= width:  # wrap
                r, c = r + 1, 0
            while len(rows) <= r:
                rows.append([])
            line = rows[r]
            line.extend(" " * (c - len(line) + 1) if len(line) <= c else "")
            line[c] = ch
            c += 1
        i += 1
    lines = ["".join(row).rstrip() for row in rows]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True
