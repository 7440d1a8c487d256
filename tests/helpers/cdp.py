"""A small client of Chromium's DevTools protocol: headless Chromium started with
``--remote-debugging-port=0``, one page driven over its websocket (websockets, a dev
dependency). For pages that must be typed into and waited on (the documentation site's search
runs in a web worker after load), where ``--dump-dom`` cannot wait.

Every request the page and its workers make is recorded (``requests``), and so is every console
error, uncaught exception, log error and failed load (``errors``). Waiting is by polling an
expression until it holds, with a deadline: no fixed sleep decides anything.

Chromium missing: skipped with the reason, failed under ``CI=true`` (as tests/helpers/browser.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import subprocess
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_path

__all__ = ["Page", "open_page"]

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--window-size=1280,900",
]


class Page:
    """One page target over its websocket; ``call`` sends a command and waits for its answer."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.loads = 0
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for raw in self._ws:
            message = json.loads(raw)
            if "id" in message and message["id"] in self._waiting:
                self._waiting.pop(message["id"]).set_result(message)
            elif "method" in message:
                await self._event(message["method"], message.get("params", {}), message)

    async def _event(self, method: str, params: dict[str, Any], message: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            self.errors.append(f"load failed: {params.get('errorText')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append(f"console.error: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(f"exception: {details.get('exception', {}).get('description')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Page.loadEventFired":
            self.loads += 1
        elif method == "Target.attachedToTarget":
            # a worker (the search index runs in one): record its requests too, then let it run
            session = params["sessionId"]
            for command in ("Network.enable", "Runtime.enable", "Runtime.runIfWaitingForDebugger"):
                self._send(command, {}, session)

    def _send(
        self, method: str, params: dict[str, Any], session: str | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        asyncio.get_running_loop().create_task(self._ws.send(json.dumps(message)))
        return future

    async def call(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        answer = await asyncio.wait_for(self._send(method, params), timeout)
        if "error" in answer:
            raise AssertionError(f"{method} failed: {answer['error']}")
        return dict(answer.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def goto(self, url: str, timeout: float = 90.0) -> None:
        loads = self.loads
        await self.call("Page.navigate", url=url)
        await self.wait_for(lambda: self.loads > loads, f"the load of {url}", timeout)
        await self.wait_until("document.readyState === 'complete'", timeout)

    async def wait_for(self, check: Any, what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}", pytrace=False)
            await asyncio.sleep(0.05)

    async def poll(self, expression: str, seconds: float) -> Any:
        """Poll ``expression`` for up to ``seconds``; its first truthy value, else None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.1)
        return None

    async def wait_until(self, expression: str, timeout: float = 90.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s: {expression}", pytrace=False)
            await asyncio.sleep(0.1)


def _devtools_url(process: subprocess.Popen[str], timeout: float) -> str:
    """The browser's websocket address, from the line Chromium writes to stderr."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith("DevTools listening on "):
            return line.split(" on ", 1)[1].strip()
    pytest.fail(f"chromium gave no DevTools address in {timeout:.0f} s: {''.join(seen)[-2000:]}")


def _page_target(port: str, timeout: float) -> str:
    """The websocket address of the browser's page, polled until Chromium lists it."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"http://{port}/json/list", timeout=timeout) as answer:
            targets = json.load(answer)
        pages = [t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page"]
        if pages:
            return str(pages[0])
        if time.monotonic() > deadline:
            pytest.fail(f"chromium listed no page in {timeout:.0f} s: {targets}", pytrace=False)
        time.sleep(0.2)


@contextlib.asynccontextmanager
async def open_page(profile: Path, timeout: float = 90.0) -> AsyncIterator[Page]:
    """A fresh headless Chromium (its profile in ``profile``) and its one page, instrumented."""
    import websockets

    args = [*_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"]
    process = subprocess.Popen(
        [chromium_path(), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        browser_ws = await asyncio.to_thread(_devtools_url, process, timeout)
        port = browser_ws.split("//", 1)[1].split("/", 1)[0]
        page_ws = await asyncio.to_thread(_page_target, port, timeout)
        async with websockets.connect(page_ws, max_size=None, open_timeout=timeout) as ws:
            page = Page(ws)
            for domain in ("Page", "Runtime", "Network", "Log"):
                await page.call(f"{domain}.enable")
            await page.call(
                "Target.setAutoAttach", autoAttach=True, waitForDebuggerOnStart=True, flatten=True
            )
            yield page
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
