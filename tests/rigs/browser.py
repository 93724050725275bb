"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol, for tests
that check what a person sees in a web UI (e.g. Phoenix): open a page, read the rendered DOM,
save a screenshot.

    with Chromium() as browser:
        browser.navigate("http://127.0.0.1:6006/projects")
        browser.wait_for("document.body.innerText.includes('default')", timeout=30)
        browser.screenshot("page.png")

Needs the `websocket-client` package (test extra) and a chromium binary (`make chromium`).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from tracescore.testing._service import ChildProcess

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
_BINARIES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = "install it with `make chromium` (Debian: apt-get install -y chromium)"


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or a DevTools call failed."""


def chromium_binary() -> str:
    """Path of the chromium binary ($TRACESCORE_CHROMIUM, else the first on PATH)."""
    explicit = os.environ.get("TRACESCORE_CHROMIUM")
    if explicit:
        return explicit
    for name in _BINARIES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError(f"no chromium binary found on PATH ({', '.join(_BINARIES)}); {INSTALL_HINT}")


class Chromium(ChildProcess):
    """One headless chromium with a fresh profile and one page, controlled over DevTools."""

    what = "chromium"
    stop_grace_s = 5.0

    def __init__(self, *, binary: str | None = None, width: int = 1440, height: int = 900,
                 startup_timeout: float = 60.0, call_timeout: float = 30.0) -> None:
        self.binary = binary
        self.width, self.height = width, height
        self._startup_timeout = startup_timeout
        self._call_timeout = call_timeout
        self._socket: Any = None
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []  # DevTools events seen (Network, Runtime ...)

    def start(self) -> Chromium:
        try:
            import websocket  # websocket-client
        except ImportError as exc:
            raise BrowserError("the browser driver needs websocket-client "
                               "(pip install 'tracescore[test]')") from exc
        binary = self.binary or chromium_binary()
        profile = self.workdir
        port_file = profile / "DevToolsActivePort"  # chromium writes its chosen port here
        self._launch(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", f"--window-size={self.width},{self.height}",
             "about:blank"],
            ready=lambda: _port_of(port_file) is not None, timeout=self._startup_timeout,
            stdin=subprocess.DEVNULL,
        )
        try:
            port = _port_of(port_file)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.loads(r.read())
            page = next(t for t in targets if t.get("type") == "page")
            self._socket = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=self._call_timeout, suppress_origin=True
            )
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                      deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                socket.close()
            except Exception:  # noqa: BLE001, S110 - the browser may be gone already
                pass
        super().stop()

    # --- DevTools -----------------------------------------------------------------------------------
    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are skipped)."""
        if self._socket is None:
            raise BrowserError("chromium is not running")
        message_id = next(self._ids)
        self._socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        deadline = time.monotonic() + self._call_timeout
        while time.monotonic() < deadline:
            message = json.loads(self._socket.recv())
            if "method" in message:
                self.events.append(message)
            if message.get("id") != message_id:
                continue
            if "error" in message:
                raise BrowserError(f"{method} failed: {message['error']}")
            return dict(message.get("result", {}))
        raise BrowserError(f"{method}: no answer after {self._call_timeout}s")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def navigate(self, url: str, *, timeout: float = 60.0) -> None:
        """Open `url` and wait until its document has loaded."""
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'",
                      timeout=timeout)

    def wait_for(self, expression: str, *, timeout: float = 30.0, interval: float = 0.25) -> Any:
        """Poll a JavaScript expression until it is truthy (a page renders with no event to wait on);
        its value, or TimeoutError naming the expression."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(interval)
        raise TimeoutError(f"page never satisfied {expression!r} within {timeout}s "
                           f"(last value {value!r})")

    def text(self) -> str:
        """The rendered text of the page (`document.body.innerText`)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def screenshot(self, path: str | os.PathLike[str]) -> Path:
        """Save a PNG of the viewport to `path`."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data))
        return target


def _port_of(port_file: Path) -> int | None:
    try:
        first = port_file.read_text().splitlines()[0]
        return int(first)
    except (OSError, IndexError, ValueError):
        return None
