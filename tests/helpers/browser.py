"""Headless Chromium for the HTML report tests: load a ``file://`` page, dump its DOM after the
page's scripts ran, take screenshots.

The page renders synchronously in an inline script, so ``--dump-dom`` (which dumps after the load
event) sees the finished DOM; page state (filter, sort, open row) is driven by the URL hash.

When Chromium is missing the tests are skipped with the reason, except under CI (``CI=true``),
where they fail: CI installs it (scripts/run-tests.sh) and must really run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["Node", "chromium_path", "dump_dom", "parse_dom", "screenshot"]

INSTALL_HINT = "install it with `apt-get install -y chromium` (scripts/run-tests.sh does, as root)"
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}  # fmt: skip


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"chromium unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"chromium unavailable: {reason}")


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    _unavailable(f"no `chromium` on PATH; {INSTALL_HINT}")


def _run(args: list[str], timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [chromium_path(), *_FLAGS, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish within {timeout:.0f} s: {args}", pytrace=False)


def dump_dom(
    path: Path, fragment: str = "", window: str = "1280,900", extra: list[str] | None = None
) -> str:
    """The serialised DOM of ``path`` (opened as file://...#fragment) after its scripts ran."""
    url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    out = _run([f"--window-size={window}", *(extra or []), "--dump-dom", url])
    if out.returncode != 0 or "<html" not in out.stdout:
        pytest.fail(f"chromium --dump-dom failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def screenshot(path: Path, png: Path, fragment: str = "", window: str = "1280,1000") -> Path:
    url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    out = _run([f"--window-size={window}", f"--screenshot={png}", url])
    if out.returncode != 0 or not png.is_file():
        pytest.fail(f"chromium --screenshot failed ({out.returncode}): {out.stderr[-2000:]}")
    return png


class Node:
    """A minimal element tree for asserting on a dumped DOM."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Node | str] = []

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> list[Node]:
        out: list[Node] = []
        stack: list[Node] = [self]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(reversed([c for c in n.children if isinstance(c, Node)]))
        return out

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
        ]

    def by_id(self, ident: str) -> Node:
        for n in self.iter():
            if n.attrs.get("id") == ident:
                return n
        raise AssertionError(f"no element with id {ident!r} in the DOM")


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_endtag(self, tag: str) -> None:
        n: Node | None = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def parse_dom(html: str) -> Node:
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root
