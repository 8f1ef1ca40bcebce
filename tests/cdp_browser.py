"""A headless Chromium driven over the Chrome DevTools Protocol, for the html export's tests.

The protocol runs over two pipes (``--remote-debugging-pipe``: the browser reads commands on its
fd 3 and writes answers and events on its fd 4, each message JSON ended by a NUL byte), so no
websocket client and no network port are needed.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import apt_installed

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--window-size=1400,900")


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def install_chromium() -> str | None:
    """Debian's chromium, installed with apt-get when this process may (root, apt present); else None."""
    return apt_installed("chromium", *CHROMIUM_NAMES)


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless browser with one page; every event it sends is kept in `events`, in order."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # The child's ends, moved above the numbers 3 and 4 so that the shell's redirections below
        # cannot overwrite one with the other; bash (dash knows no fd above 9) puts them on 3 and 4 and becomes the browser.
        reading = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD, 10)
        writing = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD, 10)
        for fd in (to_browser_read, from_browser_write):
            os.close(fd)
        command = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{reading} 4>&{writing}', "bash", *command],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(reading, writing))
        os.close(reading)
        os.close(writing)
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr or []), daemon=True).start()
        self.session: str | None = None

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_browser, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        answer = self._answers.get(message["id"])
                    if answer is not None:
                        answer.put(message)
                else:
                    self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True,
             timeout: float = 30.0) -> dict[str, Any]:
        message_id = next(self._ids)
        answer: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._answers[message_id] = answer
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session and self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"no answer to {method} within {timeout} s; stderr: {self.stderr()[-2000:]}") from None
        if "error" in reply:
            raise BrowserError(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def open_page(self) -> None:
        """A new page, attached, with the domains that report errors, dialogs and requests enabled."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """The value of `expression` once it is truthy; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} still false after {timeout} s; problems: {self.problems()}")
            time.sleep(0.05)

    def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "clickCount": 1 if kind != "mouseMoved" else 0})

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 8) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": start[0], "y": start[1],
                                               "button": "left", "clickCount": 1})
        for step in range(1, steps + 1):
            x = start[0] + (end[0] - start[0]) * step / steps
            y = start[1] + (end[1] - start[1]) * step / steps
            self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "left",
                                                   "buttons": 1})
        self.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": end[0], "y": end[1],
                                               "button": "left", "clickCount": 1})

    def wheel(self, x: float, y: float, delta: float) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta})

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, log errors (CSP violations, failed loads) and dialogs so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params.get('message')}")
        return found

    def requested_urls(self) -> list[str]:
        return [event["params"]["request"]["url"] for event in self.events
                if event.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=10)  # the browser's end closed with it: the reader sees the end
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture(scope="module")
def chromium() -> str:
    executable = install_chromium()
    if executable is None:
        pytest.fail("these tests need a real Chromium: none is here, and apt-get cannot install one (not root, or no apt)")
    return executable


@contextmanager
def browser_in(chromium: str, directory: Path, *, viewport: tuple[int, int] | None = None) -> Iterator[Browser]:
    """A Chromium with a fresh profile in `directory` and one page open (`viewport`: its width and
    height in CSS pixels), closed after."""
    profile = directory / "profile"
    profile.mkdir()
    opened = Browser(chromium, profile)
    try:
        opened.open_page()
        if viewport is not None:
            opened.send("Emulation.setDeviceMetricsOverride", {"width": viewport[0], "height": viewport[1],
                                                               "deviceScaleFactor": 1, "mobile": False})
        yield opened
    finally:
        opened.close()
