"""A tiny Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket library needed).

Chromium reads commands from fd 3 and writes replies and events to fd 4, each a JSON message ended by a NUL
byte. Used by tests/dashboard/test_server.py to load the page in real headless Chromium, read its console errors,
evaluate expressions in it and take a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class Chromium:
    """One headless Chromium with one page; ``errors`` collects console errors and uncaught exceptions."""

    def __init__(self, exe: str, profile: Path, width: int = 1400, height: int = 1000) -> None:
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes to us
            # via fds ≥ 10 first: a pipe end may already be fd 3 or 4 (dup2 onto itself keeps close-on-exec)
            r, w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-pipe",
        ]
        args += [f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(
            args, preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next, self._replies, self.events = 0, {}, []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                with self._cond:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._cond.notify_all()

    def call(self, method: str, session: bool = False, timeout: float = 30, **params: Any) -> dict:
        with self._cond:
            self._next += 1
            ident = self._next
        message = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: ident in self._replies, timeout):
                raise TimeoutError(f"{method}: no reply in {timeout}s")
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll ``expression`` in the page until it is truthy; returns its value."""
        end = time.time() + timeout
        while time.time() < end:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"{expression!r} still falsy after {timeout}s")

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads the page produced so far."""
        found = []
        with self._cond:
            events = list(self.events)
        for e in events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                found.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                found.append(f"{p['entry'].get('text')} {p['entry'].get('url', '')}")
        return found

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)[
            "data"
        ]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
