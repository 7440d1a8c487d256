"""The fenced code blocks of README.md and docs/**/*.md, each with the directive that says how the
test suite checks it (tests/integration/test_doc_blocks.py).

A directive is an HTML comment on the line before the block's opening fence (invisible on the
site and on GitHub)::

    <!-- block: test -->

See :data:`DIRECTIVES` for the vocabulary. A block without one is reported by the tests, so a new
block cannot be added unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: directive -> what the harness does with the block
DIRECTIVES = {
    "test [FILE] [--OPTION...]": "a test file: written into the page's project (as FILE, the "
    "name in a first '# test_x.py' line, or test_doc_LINE.py) and run with pytest --llm-eval "
    "(judge: the scripted test server; and the --OPTIONs given); the run must pass, unless an "
    "output transcript ('$ pytest ...') follows, which runs it instead",
    "file PATH": "a data file the page asks for: written into the page's project at PATH",
    "run": "a script: executed in the page's project; its stdout (or, when the output block "
    "after it starts with the error's class name, the error it raises) is what that output "
    "block is checked against",
    "setup NAME": "a script other blocks of the page continue: executed like run, and its code "
    "is prepended to every block marked uses NAME",
    "uses NAME": "a fragment continuing setup NAME: run (or, for a test file, tested) after it",
    "excerpt PATH": "an excerpt of a file of the repository (an example that is run by "
    "scripts/run-examples.sh): compiled, and its code lines must be lines of PATH, in order",
    "shell [tty]": "shell commands run in the page's project (pytest ..., python -m "
    "pytest_llmeval ...; a * is expanded; a path under examples/ is the repository's examples, "
    "copied in; a redis://127.0.0.1:PORT URL (or $REDIS_URL) is the page's own redis-server, "
    "started on a free port when first named and again, its data kept, when named after a "
    "block shut it down; without redis-server the page is skipped, saying why, or, for a "
    "'$ command' of an output block, that command alone is not run); tty: pytest runs on a "
    "pseudo-terminal and its output is what the terminal "
    "received, escape sequences dropped and each carriage return a line break (so a live line "
    "drawn and erased is a line of it)",
    "output [PATH]": "output shown: checked against the real output of the block before it "
    "(timings, ports and paths normalised, the project's directory written /path/to/project; a "
    "line '...' stands for lines left out; a block starting '$ command' runs the command "
    "itself); with PATH, "
    "against the file PATH of the page's project as the blocks before it left it",
    "not-run: REASON": "cannot run here (installs, the network, the real local judge, CI "
    "files); a Python block is still compiled, a YAML block parsed and the --llm-eval options "
    "it names checked against the option table",
}

_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w-]*)")
_DIRECTIVE = re.compile(r"^\s*<!-- block: (?P<text>.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path  # relative to the repository
    line: int  # of the opening fence, 1-based
    lang: str
    code: str  # dedented, with a trailing newline
    directive: str | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """The directive's first word ("test", "not-run", ...), "" without one."""
        if self.directive is None:
            return ""
        return re.split(r"[\s:]", self.directive, maxsplit=1)[0]

    @property
    def arg(self) -> str:
        """What follows the directive's first word (a name, a path, a reason)."""
        if self.directive is None:
            return ""
        return self.directive[len(self.kind) :].lstrip(":").strip()


def doc_files(root: Path) -> list[Path]:
    """README.md and every page under docs/ (the generated reference pages hold only a marker
    where the generated content goes, so their hand-written blocks are all there is)."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(root: Path, path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        close = re.compile(rf"^[ ]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[i + 1 : j]]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        d = _DIRECTIVE.match(lines[k]) if k >= 0 else None
        found.append(
            Block(
                path=path.relative_to(root),
                line=i + 1,
                lang=m["lang"],
                code="\n".join(body) + "\n",
                directive=d["text"] if d else None,
            )
        )
        i = j + 1
    return found


#: the project's directory as shown output on a page writes it (the real one is a temporary path)
PROJECT = "/path/to/project"

_TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?s\b")
_PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")


_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def terminal_text(raw: str) -> str:
    """What a pseudo-terminal received, as lines: escape sequences (colours, cursor moves,
    erasures) dropped and each carriage return a line break, so a line drawn and then erased
    (a live status line) is a line of the result."""
    return _ESCAPE.sub("", raw).replace("\r\n", "\n").replace("\r", "\n")


def normalise(text: str, *paths: Path) -> list[str]:
    """Lines as compared: timings, local ports, UTC dates, sizes of stored results, cache key
    hashes, OpenTelemetry trace and span ids and the given paths replaced by placeholders,
    pytest's ``====`` rules and runs of spaces squeezed."""
    for p in paths:
        text = text.replace(str(p), "<path>")
    text = text.replace(PROJECT, "<path>")  # how a page writes the project's directory
    out = []
    for line in text.splitlines():
        line = _TIMING.sub("<t>", line)
        line = _PORT.sub(r"\1:<port>", line)
        line = re.sub(r"\bkey [0-9a-f]{8,}", "key <hash>", line)
        line = re.sub(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\b", "<date>", line)
        # the size of stored results, which hold their recording time (a float of varying digits)
        line = re.sub(r"\b\d+ bytes of results\b", "<n> bytes of results", line)
        # OpenTelemetry's random trace and span ids
        line = re.sub(r"\b[0-9a-f]{32}\b", "<trace-id>", line)
        line = re.sub(r"\b[0-9a-f]{16}\b", "<span-id>", line)
        line = re.sub(r"={3,}", "==", line)
        line = re.sub(r"\s+", " ", line).strip()
        if line:
            out.append(line)
    return out


def missing_lines(shown: str, real: str, *paths: Path) -> list[str]:
    """The shown lines that are not in the real output, in order (a shown line ``...`` skips)."""
    real_lines = normalise(real, *paths)
    missing, pos = [], 0
    for line in normalise(shown, *paths):
        if line == "...":
            continue
        try:
            pos = real_lines.index(line, pos) + 1
        except ValueError:
            missing.append(line)
    return missing
