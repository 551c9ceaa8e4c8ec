"""Headless Chromium driven through the Chrome DevTools Protocol, for tests that look at a page as a person does.

Chromium talks CDP over a pair of pipes (``--remote-debugging-pipe``: commands in on fd 3,
answers and events out on fd 4, each message JSON ending in a NUL byte), so no port is opened and
no client library is needed. A reader thread files each answer under its command id; events are
kept for the failure messages (uncaught page errors, console errors).

Only what the tests need: open a page, navigate, type into a field, click, evaluate JavaScript,
wait for a condition and take a screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_executable() -> str | None:
    """The first Chromium-family browser on PATH (Debian's package installs ``chromium``)."""
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


def _high(pair: tuple[int, int]) -> tuple[int, int]:
    """The pipe's ends moved to descriptors above 9, clear of the 3 and 4 the child must receive."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in pair)
    for fd in pair:
        os.close(fd)
    return moved[0], moved[1]


class BrowserError(AssertionError):
    """The browser refused a command, or a page never reached what a test waited for."""


class Chromium:
    """One headless Chromium process with its own profile; :meth:`page` opens a tab."""

    def __init__(self, executable: str, profile: Path, *, width: int = 1440, height: int = 1000):
        self.width, self.height = width, height
        commands_read, self._commands = _high(os.pipe())
        self._answers, answers_write = _high(os.pipe())
        args = [
            executable, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", "--mute-audio", f"--user-data-dir={profile}", f"--window-size={width},{height}",
            "about:blank",
        ]
        # bash (dash takes one-digit descriptors only) puts the pipes on the descriptors Chromium
        # reads (3) and writes (4).
        script = f'exec "$0" "$@" 3<&{commands_read} 4>&{answers_write}'
        self.process = subprocess.Popen(
            ["bash", "-c", script, *args], pass_fds=(commands_read, answers_write),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._next_id = 0
        self._answers_by_id: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._ready = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._answers, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._ready:
                    self._ready.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._ready:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._answers_by_id[message["id"]] = message
                    else:
                        self.events.append(message)
                self._ready.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, timeout: float = 30) -> dict[str, Any]:
        """Send one command and wait for its answer; a refusal raises :class:`BrowserError`."""
        with self._ready:
            self._next_id += 1
            ident = self._next_id
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._ready:
            while ident not in self._answers_by_id:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise BrowserError(f"no answer to {method} (browser exit code {self.process.poll()})")
                self._ready.wait(min(left, 0.5))
            answer = self._answers_by_id.pop(ident)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page.enable", "Runtime.enable"):
            page.send(domain)
        page.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return page

    def page_errors(self) -> list[str]:
        """Uncaught exceptions and console errors the pages reported so far."""
        found = []
        for event in list(self.events):
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(str((details.get("exception") or {}).get("description") or details.get("text")))
            elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except BrowserError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._commands, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab of :class:`Chromium`."""

    def __init__(self, browser: Chromium, session: str):
        self.browser = browser
        self.session = session

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise BrowserError(f"{expression[:200]!r} threw {(details.get('exception') or {}).get('description') or details.get('text')}")
        return answer.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 30) -> Any:
        """Poll ``expression`` until it is truthy; fail saying ``what``, the last value and the page's errors."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.evaluate(expression)
            except BrowserError as error:
                last = error
            else:
                if last:
                    return last
            time.sleep(0.1)
        url = self.evaluate("location.href")
        text = self.evaluate("document.body ? document.body.innerText.slice(0, 1500) : ''")
        raise BrowserError(f"timed out after {timeout:.0f}s waiting for {what} on {url}; last: {last!r}; "
                           f"page errors: {self.browser.page_errors()}; page text: {text!r}")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", f"{url} to load")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type ``text`` as keyboard input (what a form's own handlers see)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
