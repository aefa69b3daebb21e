"""A headless Chromium driven over the Chrome DevTools Protocol, for tests of HTML pages.

:class:`Browser` starts Debian's ``chromium`` with ``--remote-debugging-port=0``, reads the port
from ``DevToolsActivePort`` in its throw-away profile directory, and speaks CDP over the
browser's websocket (``websocket-client``): one page target, attached in flat session mode.
:meth:`Page.open` enables the Runtime, Log and Page domains before navigating, so every console
message, uncaught exception and log entry of the page is kept (:attr:`Page.errors`).

The browser must not reach the network: pages are opened from ``file://`` URLs, and the flags
below turn off Chromium's background traffic (updates, sync, translation, metrics...), send
any request that still tried through a dead proxy on loopback and resolve no host name at all.
The test suite's netguard cannot see into another process, so these flags are the guard.

Run as a script, it harvests the bundled demo site and saves a screenshot of its report::

    python -m tests.support.browser docs/report.png
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import websocket

from cdif_harvester.adapters.render import CHROMIUM_FLAGS as RENDER_FLAGS

__all__ = [
    "CHROMIUM_FLAGS",
    "Browser",
    "BrowserMissing",
    "Page",
    "chromium_binary",
    "save_report_screenshot",
]

INSTALL_HINT = (
    "chromium is needed to test the publisher report in a real browser: run `make browser` "
    "(it runs `apt-get install -y chromium` as root or with sudo), or install Debian's "
    "chromium package yourself; set CHROMIUM to use another Chromium binary"
)

# The harvester's own renderer flags (which take the network away from Chromium: no name
# resolves, every connection goes to a dead proxy), and two that keep screenshots steady.
CHROMIUM_FLAGS = (*RENDER_FLAGS, "--metrics-recording-only", "--hide-scrollbars")


class BrowserMissing(RuntimeError):
    """No Chromium binary was found."""


def chromium_binary() -> str:
    """The Chromium to run: ``$CHROMIUM`` or ``chromium`` on PATH. Raises BrowserMissing."""
    wanted = os.environ.get("CHROMIUM") or "chromium"
    found = shutil.which(wanted)
    if found is None:
        raise BrowserMissing(f"{wanted!r} not found on PATH. {INSTALL_HINT}")
    return found


class Browser:
    """One headless Chromium process with a throw-away profile; a context manager.

    ``timeout`` bounds the start-up and every protocol call (seconds).
    """

    def __init__(
        self,
        binary: str | None = None,
        *,
        timeout: float = 30.0,
        window: tuple[int, int] = (1200, 900),
    ) -> None:
        self.binary = binary or chromium_binary()
        self.timeout = timeout
        self.window = window
        self._profile: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: websocket.WebSocket | None = None
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start Chromium and connect to its browser target. Raises RuntimeError when it does
        not come up within the timeout (its stderr is in the message)."""
        self._profile = tempfile.TemporaryDirectory(prefix="cdif-chromium-")
        profile = Path(self._profile.name)
        log = (profile / "stderr.log").open("wb")
        width, height = self.window
        self._process = subprocess.Popen(
            [
                self.binary,
                *CHROMIUM_FLAGS,
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,  # its own process group, so its helpers can be ended too
        )
        log.close()
        port, path = self._wait_for_port(profile)
        # No Origin header: Chromium refuses websocket clients that send one it does not allow.
        self._socket = websocket.create_connection(
            f"ws://127.0.0.1:{port}{path}", timeout=self.timeout, suppress_origin=True
        )

    def _wait_for_port(self, profile: Path) -> tuple[int, str]:
        marker = profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                lines = marker.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= 2 and lines[0].isdigit():
                return int(lines[0]), lines[1]
            time.sleep(0.05)
        stderr = (profile / "stderr.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"chromium did not open its DevTools port; its stderr:\n{stderr}")

    def close(self) -> None:
        """Close the connection, end the browser (killed if it does not quit) and remove its
        profile."""
        if self._socket is not None:
            with suppress(Exception):  # closing anyway
                self.call("Browser.close")
            self._socket.close()
            self._socket = None
        if self._process is not None:
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                # The group is the one this browser was started in: it and its helpers only.
                with suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=5)
            self._process = None
        if self._profile is not None:
            self._profile.cleanup()
            self._profile = None

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """Send one CDP command and return its result; events that arrive meanwhile are kept.
        Raises RuntimeError for a protocol error."""
        if self._socket is None:
            raise RuntimeError("the browser is not running")
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        while True:
            answer = json.loads(self._socket.recv())
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method} failed: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            if "method" in answer:
                self._events.append(answer)

    def wait_for(
        self, method: str, *, session: str, timeout: float | None = None
    ) -> dict[str, Any]:
        """Wait for the next event ``method`` of ``session`` (kept events first)."""
        if self._socket is None:
            raise RuntimeError("the browser is not running")
        for index, event in enumerate(self._events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self._events.pop(index)
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            self._socket.settimeout(max(0.1, deadline - time.monotonic()))
            event = json.loads(self._socket.recv())
            if event.get("method") == method and event.get("sessionId") == session:
                self._socket.settimeout(self.timeout)
                return dict(event)
            if "method" in event:
                self._events.append(event)
        raise TimeoutError(f"no {method} within {timeout or self.timeout} s")

    def events(self, session: str) -> list[dict[str, Any]]:
        """Every event of ``session`` received so far."""
        return [event for event in self._events if event.get("sessionId") == session]

    @contextmanager
    def page(self) -> Iterator[Page]:
        """A new page (tab), closed afterwards."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        try:
            yield Page(self, session)
        finally:
            with suppress(RuntimeError):  # the browser may be gone already
                self.call("Target.closeTarget", {"targetId": target})


class Page:
    """One page target, through its flat CDP session."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One CDP command in this page's session."""
        return self.browser.call(method, params, session=self.session)

    def open(self, url: str) -> None:
        """Enable the Page, Runtime, Log and Network domains, navigate to ``url`` and wait for
        its load event. Raises RuntimeError when navigation fails."""
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        answer = self.call("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise RuntimeError(f"navigation to {url} failed: {answer['errorText']}")
        self.browser.wait_for("Page.loadEventFired", session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable). Raises
        RuntimeError when it throws."""
        answer = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer.get("result", {}).get("value")

    @property
    def requests(self) -> list[str]:
        """The URL of every request the page made so far (the page itself included)."""
        self.evaluate("0")
        return [
            str(event["params"]["request"]["url"])
            for event in self.browser.events(self.session)
            if event.get("method") == "Network.requestWillBeSent"
        ]

    @property
    def errors(self) -> list[str]:
        """Console errors and assertions, uncaught exceptions and log entries of level error
        the page produced so far (ask once more first, so late events are in)."""
        self.evaluate("0")
        found: list[str] = []
        for event in self.browser.events(self.session):
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                text = " ".join(
                    str(arg.get("value", arg.get("description"))) for arg in params.get("args", [])
                )
                found.append(f"console.{params['type']}: {text}")
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                thrown = details.get("exception", {}).get("description", "")
                found.append(f"exception: {details.get('text')} {thrown}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(
                    f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}"
                )
        return found

    def screenshot(self, *, width: int = 1200, max_height: int = 4000) -> bytes:
        """A PNG of the page ``width`` CSS pixels wide and as tall as its content (at most
        ``max_height``)."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False},
        )
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        height = max(1, min(height, max_height))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        return base64.b64decode(data)


def save_report_screenshot(target: Path) -> Path:
    """Harvest the bundled demo site into a temporary directory and save a screenshot of its
    report.html at ``target`` (a PNG 1200 pixels wide). Returns ``target``."""
    from cdif_harvester.cli.runner import LocalHarvester
    from cdif_harvester.demo.server import PublisherSite, demo_site_dir

    with tempfile.TemporaryDirectory(prefix="cdif-report-") as work:
        out = Path(work) / "out"
        with (
            PublisherSite(demo_site_dir()) as site,
            LocalHarvester(out, allow_loopback=True) as harvester,
        ):
            harvester.harvest(site.url("/robots.txt"))
        with Browser() as browser, browser.page() as page:
            page.open((out / "report.html").resolve().as_uri())
            problems = page.errors
            if problems:
                raise RuntimeError(f"the report has errors in the browser: {problems}")
            png = page.screenshot()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(png)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.browser [PATH]``: write the demo report's screenshot."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else "docs/report.png")
    print(save_report_screenshot(target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
