"""A headless Chromium driven over the DevTools protocol on a pipe: the page tests' real browser (issue 37).

Why a pipe and no driver library: ``chromium --remote-debugging-pipe`` reads DevTools commands on its file
descriptor 3 and writes answers and events on 4, NUL-terminated JSON; the standard library is enough, and nothing
listens on a port. Chromium comes from the system packages (``.ci/run`` installs it, ``apt-get install
chromium`` for a developer); :func:`chromium` is None where it is absent and the test skips saying so.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import struct
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 60.0


def chromium() -> str | None:
    """The first Chromium on PATH (``TPRIMAT_CHROMIUM`` names another), or None."""
    named = os.environ.get("TPRIMAT_CHROMIUM")
    if named:
        return shutil.which(named)
    return next((found for name in NAMES if (found := shutil.which(name))), None)


@dataclass
class Visit:
    """What opening a page showed: its text, console errors and warnings, requests beyond the page, a screenshot."""

    text: str
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    scripts: int = 0
    screenshot: bytes = b""

    @property
    def screenshot_size(self) -> tuple[int, int]:
        """(width, height) from the PNG's IHDR chunk."""
        assert self.screenshot[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
        return struct.unpack(">II", self.screenshot[16:24])


class Browser:
    """One Chromium process; :meth:`visit` opens a file and reports (use as a context manager)."""

    def __init__(self, executable: str, profile: Path):
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def descriptors() -> None:  # in the child: DevTools reads fd 3, writes fd 4
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(profile)},  # its NSS database and caches stay out of the real home
            pass_fds=(3, 4), preexec_fn=descriptors)
        os.close(to_child)
        os.close(from_child)
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._events: list[dict[str, Any]] = []
        self._next = 0
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self) -> None:
        buffer = b""
        with os.fdopen(self._read, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                buffer += chunk
                *whole, buffer = buffer.split(b"\0")
                for message in whole:
                    self._messages.put(json.loads(message))
        self._messages.put(None)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """One command; its result (events that arrive meanwhile are kept for :meth:`events`)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._messages.get(timeout=TIMEOUT_S)
            if answer is None:
                raise RuntimeError(f"chromium closed the pipe during {method}")
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_for(self, method: str) -> dict[str, Any]:
        for event in self._events:
            if event.get("method") == method:
                return event
        while True:
            event = self._messages.get(timeout=TIMEOUT_S)
            if event is None:
                raise RuntimeError(f"chromium closed the pipe waiting for {method}")
            self._events.append(event)
            if event.get("method") == method:
                return event

    def visit(self, page: Path, width: int = 1400, height: int = 1000) -> Visit:
        """Open ``page`` in a fresh tab, wait for its load event, read what it showed, take a full-page screenshot."""
        self._events = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session)
        self.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        url = page.resolve().as_uri()
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        text = self.send("Runtime.evaluate", session, expression="document.body.innerText",
                         returnByValue=True)["result"]["value"]
        scripts = self.send("Runtime.evaluate", session, expression="document.scripts.length",
                            returnByValue=True)["result"]["value"]
        shot = self.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)["data"]
        visit = Visit(text, scripts=scripts, screenshot=base64.b64decode(shot))
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                visit.console.append(json.dumps(params.get("args"))[:300])
            elif method == "Runtime.exceptionThrown":
                visit.console.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                visit.console.append(params["entry"].get("text", "")[:300])
            elif method == "Network.requestWillBeSent":
                requested = params.get("request", {}).get("url", "")
                if requested != url and not requested.startswith("data:"):
                    visit.requests.append(requested)
            elif method == "Page.javascriptDialogOpening":
                visit.dialogs.append(params.get("message", ""))
        self.send("Target.closeTarget", targetId=target)
        return visit

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, queue.Empty):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
