"""The local renderer: headless Chromium driven over the DevTools Protocol through a pipe.

:class:`ChromiumRenderer` starts Chromium with ``--remote-debugging-pipe`` (no port, no
websocket) and renders one page at a time, each in a fresh browser context (no cookies or
storage kept, downloads denied). Every request of the page is paused by the ``Fetch`` domain and
answered by the safe fetcher (address policy after DNS, size caps, the host gate), so the browser
itself never opens a connection: it is started unable to resolve a name or reach a proxy.
Time, bytes, requests and the JavaScript heap are capped per page.

See docs/decisions/0075-rendering-pages-in-a-browser.md.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from cdif_harvester.adapters.netpolicy import check_url
from cdif_harvester.errors import AddressRefused, BodyTooLarge, HarvestError, PermanentError
from cdif_harvester.model import FetchResponse
from cdif_harvester.ports import Fetcher, RenderedPage

__all__ = [
    "CHROMIUM_FLAGS",
    "BrowserUnavailable",
    "ChromiumRenderer",
    "RenderLimits",
    "chromium_path",
]

#: Flags of every browser started here. The last three take the network away from Chromium
#: itself: whatever a page asks for is either answered by the safe fetcher through ``Fetch``
#: or fails (no name resolves, every connection goes to a dead proxy, loopback included).
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless=new",
    "--no-sandbox",  # may run as root (containers, Lambda), where the sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers have a small /dev/shm
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)

# Response headers not handed to the browser: the body is already decoded and whole, and no
# cookie is ever kept.
_DROPPED_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "set-cookie", "connection"}
)
# What cannot insert JSON-LD is never fetched: it would only cost the publisher bytes.
_SKIPPED_TYPES = frozenset({"Image", "Media", "Font", "Stylesheet", "Manifest", "Ping"})
# Counts the JSON-LD scripts of the page (the probe of "has it settled").
_PROBE = "document.querySelectorAll('script[type=\"application/ld+json\"]').length"


class BrowserUnavailable(PermanentError):
    """No Chromium could be found or started."""

    reason = "browser-unavailable"


@dataclass(frozen=True)
class RenderLimits:
    """The caps of one page: wall time, time to wait for an ld+json script after the load
    event, quiet time that counts as network idle, requests, bytes fetched, size of the DOM
    returned and the V8 heap of the browser's renderers (MiB)."""

    page_seconds: float = 15.0
    script_wait: float = 5.0
    idle_seconds: float = 0.5
    max_requests: int = 100
    max_bytes: int = 20 * 1024 * 1024
    max_dom_bytes: int = 5 * 1024 * 1024
    heap_mib: int = 256


def chromium_path(wanted: str | None = None) -> str:
    """The Chromium binary: ``wanted``, else ``$CHROMIUM``, else ``chromium`` or
    ``chromium-browser`` on PATH. Raises BrowserUnavailable."""
    names = [wanted] if wanted else [os.environ.get("CHROMIUM") or "chromium", "chromium-browser"]
    for name in names:
        if name and (found := shutil.which(name)):
            return found
    raise BrowserUnavailable(f"no Chromium found (tried {names}); install Debian's chromium")


class _Pipe:
    """CDP over Chromium's debugging pipe: JSON messages separated by NUL bytes; a reader
    thread queues what arrives."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._write_fd = write_fd
        self._read_fd = read_fd
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True, name="cdp-pipe")
        self._reader.start()

    def _read(self) -> None:
        pending = b""
        try:
            while chunk := os.read(self._read_fd, 1 << 16):
                pending += chunk
                *messages, pending = pending.split(b"\0")
                for message in messages:
                    self.inbox.put(json.loads(message))
        except OSError:
            pass
        self.inbox.put(None)  # the browser is gone

    def send(self, method: str, params: Mapping[str, Any] | None = None, **extra: Any) -> int:
        """Send one command; returns its id (the answer arrives in the inbox)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": dict(params or {}), **extra}
        data = json.dumps(message).encode("utf-8") + b"\0"
        while data:
            data = data[os.write(self._write_fd, data) :]
        return self._next

    def close(self) -> None:
        """Close both ends (the reader thread ends when the browser's end closes)."""
        for fd in (self._write_fd, self._read_fd):
            with suppress(OSError):
                os.close(fd)


class _Browser:
    """One Chromium process with a throw-away profile, spoken to over its pipe."""

    def __init__(self, binary: str, limits: RenderLimits) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="cdif-render-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Chromium reads commands from fd 3 and writes to fd 4: move both ends out of the way
        # first, so the dup2s below cannot clobber one another.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
        devnull = os.open(os.devnull, os.O_RDWR)
        argv = [
            binary,
            *CHROMIUM_FLAGS,
            f"--js-flags=--max-old-space-size={limits.heap_mib}",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile.name}",
            "about:blank",
        ]
        try:
            self.pid = os.posix_spawn(
                binary,
                argv,
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, devnull, 1),
                    (os.POSIX_SPAWN_DUP2, devnull, 2),
                    (os.POSIX_SPAWN_DUP2, high[0], 3),
                    (os.POSIX_SPAWN_DUP2, high[1], 4),
                ],
                setsid=True,  # its own process group, so its helpers can be ended with it
            )
        except OSError as exc:
            raise BrowserUnavailable(f"chromium could not be started: {exc}") from exc
        finally:
            for fd in (to_child_r, from_child_w, *high, devnull):
                os.close(fd)
        self.pipe = _Pipe(from_child_r, to_child_w)

    def call(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float = 10.0
    ) -> dict[str, Any]:
        """One browser-level command, waited for (events meanwhile are of pages already done
        with, or of the browser, and are dropped)."""
        wanted = self.pipe.send(method, params)
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(deadline)
            if message is None:
                raise BrowserUnavailable(f"chromium did not answer {method} within {timeout} s")
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserUnavailable(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def next(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None at the deadline. Raises BrowserUnavailable when the
        browser has gone."""
        try:
            message = self.pipe.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if message is None:
            self.pipe.inbox.put(None)
            raise BrowserUnavailable("chromium closed its pipe (it crashed or was ended)")
        return message

    def close(self) -> None:
        """Ask the browser to quit, end its process group if it does not, remove the profile."""
        with suppress(OSError):
            self.pipe.send("Browser.close")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with suppress(ChildProcessError):
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
            time.sleep(0.05)
        else:
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)  # the group started for this browser only
            with suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        self.pipe.close()
        self.profile.cleanup()


class ChromiumRenderer:
    """Renders pages in one headless Chromium, started at the first page; thread-safe (pages
    are rendered one at a time). ``fetcher`` answers every request of the page (use the gated
    fetcher: politeness applies to the browser's requests too); ``allow_loopback`` is the
    address policy's, checked before the fetcher is asked."""

    def __init__(
        self,
        fetcher: Fetcher,
        *,
        limits: RenderLimits | None = None,
        allow_loopback: bool = False,
        binary: str | None = None,
    ) -> None:
        self.fetcher = fetcher
        self.limits = limits or RenderLimits()
        self.allow_loopback = allow_loopback
        self.binary = binary
        self._browser: _Browser | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """End the browser (if one was started)."""
        with self._lock:
            if self._browser is not None:
                self._browser.close()
                self._browser = None

    def __enter__(self) -> ChromiumRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def render(self, url: str, *, page: FetchResponse | None = None) -> RenderedPage:
        """Load ``url`` (answered with ``page`` when given: the page as already fetched) and
        return its DOM once settled, or what stopped it. Raises BrowserUnavailable when no
        browser can be started or it stops answering (it is started again next time)."""
        with self._lock:
            if self._browser is None:
                self._browser = _Browser(chromium_path(self.binary), self.limits)
            try:
                return _PageRun(self, self._browser, url, page).run()
            except BrowserUnavailable:
                self._browser.close()
                self._browser = None
                raise


class _PageRun:
    """One page in its own browser context: the event loop that answers its requests."""

    def __init__(
        self,
        renderer: ChromiumRenderer,
        browser: _Browser,
        url: str,
        page: FetchResponse | None,
    ) -> None:
        self.renderer = renderer
        self.limits = renderer.limits
        self.browser = browser
        self.url = url
        # Answers ready before they are asked for: the page itself, the end of a redirect chain.
        self.ready: dict[str, FetchResponse] = {}
        if page is not None:
            self.ready[url] = page
        self.requests = 0
        self.bytes = 0
        self.refused: list[str] = []
        self.last_request = time.monotonic()
        self.session = ""
        self.final_url = url

    def run(self) -> RenderedPage:
        started = time.monotonic()
        deadline = started + self.limits.page_seconds
        context = self.browser.call("Target.createBrowserContext", {"disposeOnDetach": True})
        context_id = context["browserContextId"]
        try:
            self.browser.call(
                "Browser.setDownloadBehavior",
                {"behavior": "deny", "browserContextId": context_id},
            )
            target = self.browser.call(
                "Target.createTarget", {"url": "about:blank", "browserContextId": context_id}
            )["targetId"]
            self.session = self.browser.call(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )["sessionId"]
            for method, params in (
                ("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
                ("Page.enable", {}),
                ("Inspector.enable", {}),
            ):
                self._call(method, params)
            html, stopped = self._load(deadline)
        finally:
            # Disposing of the context ends its renderer processes, a page stuck in a loop too.
            with suppress(BrowserUnavailable):
                self.browser.call("Target.disposeBrowserContext", {"browserContextId": context_id})
        return RenderedPage(
            url=self.final_url,
            html=html,
            seconds=round(time.monotonic() - started, 3),
            requests=self.requests,
            bytes=self.bytes,
            refused=tuple(self.refused),
            stopped=stopped,
        )

    def _call(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        wanted = self.browser.pipe.send(method, params, sessionId=self.session)
        deadline = time.monotonic() + 10
        while True:
            message = self.browser.next(deadline)
            if message is None:
                raise BrowserUnavailable(f"chromium did not answer {method}")
            if message.get("id") == wanted:
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def _load(self, deadline: float) -> tuple[bytes, str | None]:
        """Navigate, answer requests until the page settles or a cap stops it, read the DOM."""
        self.browser.pipe.send("Page.navigate", {"url": self.url}, sessionId=self.session)
        self.loaded_at: float | None = None
        self.crashed = False
        self.scripts = 0
        probe: int | None = None
        cap_s = self.limits.page_seconds
        next_probe = time.monotonic()
        while True:
            now = time.monotonic()
            if self.crashed:
                return b"", "crashed: the page ran out of memory or its renderer died"
            if now >= deadline:
                break
            if self._settled(now):
                html = self._dom(deadline)
                if html:
                    return html, None
                # Settled on the network, but the main thread never answered: a script that
                # runs without end, stopped by disposing of its context.
                return b"", f"page-time cap: the page's scripts ran for {cap_s:g} s"
            if probe is None and now >= next_probe:
                probe = self.browser.pipe.send(
                    "Runtime.evaluate", {"expression": _PROBE}, sessionId=self.session
                )
            message = self.browser.next(min(deadline, now + 0.1))
            if message is None:
                continue
            if probe is not None and message.get("id") == probe:
                value = message.get("result", {}).get("result", {}).get("value")
                self.scripts = value if isinstance(value, int) else 0
                probe, next_probe = None, time.monotonic() + 0.1
                continue
            self._event(message)
        # Out of time: stop loading and take the DOM if the page still answers.
        self.browser.pipe.send("Page.stopLoading", sessionId=self.session)
        html = self._dom(time.monotonic() + 1.0)
        cap = f"page-time cap: stopped after {cap_s:g} s"
        return html, cap if not html else f"{cap} (the DOM so far was read)"

    def _settled(self, now: float) -> bool:
        if self.loaded_at is None:
            return False
        idle = now - self.last_request >= self.limits.idle_seconds
        if self.scripts:
            return idle
        return idle and now - self.loaded_at >= self.limits.script_wait

    def _dom(self, deadline: float) -> bytes:
        cap = self.limits.max_dom_bytes
        expression = f"document.documentElement.outerHTML.slice(0, {cap})"
        wanted = self.browser.pipe.send(
            "Runtime.evaluate", {"expression": expression}, sessionId=self.session
        )
        while True:
            message = self.browser.next(deadline)
            if message is None:
                return b""  # the page's main thread is busy (a loop): no DOM to read
            if message.get("id") == wanted:
                value = message.get("result", {}).get("result", {}).get("value")
                return value.encode("utf-8")[:cap] if isinstance(value, str) else b""
            self._event(message)

    # ------------------------------------------------------------------------ the requests

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if message.get("sessionId") != self.session:
            return
        params = message.get("params", {})
        if method == "Fetch.requestPaused":
            self._answer(params)
            # Quiet is counted from the end of the last answer (a gate may have waited).
            self.last_request = time.monotonic()
        elif method == "Page.loadEventFired":
            self.loaded_at = time.monotonic()
        elif method == "Inspector.targetCrashed":
            self.crashed = True
        elif method == "Page.frameNavigated" and not params.get("frame", {}).get("parentId"):
            self.final_url = str(params["frame"].get("url") or self.final_url)

    def _refuse(self, request_id: str, url: str, why: str) -> None:
        self.refused.append(f"{url[:200]}: {why}")
        self.browser.pipe.send(
            "Fetch.failRequest",
            {"requestId": request_id, "errorReason": "BlockedByClient"},
            sessionId=self.session,
        )

    def _answer(self, params: Mapping[str, Any]) -> None:
        """Answer one paused request through the policy and the fetcher, or refuse it."""
        request_id = str(params["requestId"])
        request = params.get("request", {})
        url, method = str(request.get("url", "")), str(request.get("method", "GET"))
        try:
            check_url(url, allow_loopback=self.renderer.allow_loopback)
        except PermanentError as exc:
            self._refuse(request_id, url, exc.reason)
            return
        if params.get("resourceType") in _SKIPPED_TYPES or url.endswith("/favicon.ico"):
            self.browser.pipe.send(
                "Fetch.failRequest",
                {"requestId": request_id, "errorReason": "BlockedByClient"},
                sessionId=self.session,
            )
            return
        if method not in ("GET", "HEAD"):
            # A harvester reads; it never submits forms or calls write APIs.
            self._refuse(request_id, url, f"method-not-allowed ({method})")
            return
        response = self.ready.pop(url, None)
        if response is None:
            response = self._fetch(request_id, url, method, request.get("headers", {}))
            if response is None:
                return
        if response.redirects and response.url != url:
            # Let the browser see the redirect, so relative URLs resolve against the final one;
            # the answer at its end is ready for the request that follows.
            self.ready[response.url] = response
            self._fulfil(request_id, 302, [("location", response.url)], b"")
            return
        headers = [(k, v) for k, v in response.headers if k not in _DROPPED_HEADERS]
        self._fulfil(request_id, response.status, headers, response.body)

    def _fetch(
        self, request_id: str, url: str, method: str, headers: Mapping[str, str]
    ) -> FetchResponse | None:
        if self.requests >= self.limits.max_requests:
            self._refuse(request_id, url, f"request cap ({self.limits.max_requests})")
            return None
        left = self.limits.max_bytes - self.bytes
        if left <= 0:
            self._refuse(request_id, url, f"byte cap ({self.limits.max_bytes})")
            return None
        self.requests += 1
        accept = next((v for k, v in headers.items() if k.lower() == "accept"), None)
        try:
            response = self.renderer.fetcher.fetch(
                url, method=method, headers={"Accept": accept} if accept else None, max_bytes=left
            )
        except AddressRefused as exc:
            self._refuse(request_id, url, exc.reason)
            return None
        except BodyTooLarge:
            self._refuse(request_id, url, f"byte cap ({self.limits.max_bytes})")
            return None
        except HarvestError as exc:
            self.refused.append(f"{url[:200]}: failed: {exc.reason}")
            self.browser.pipe.send(
                "Fetch.failRequest",
                {"requestId": request_id, "errorReason": "Failed"},
                sessionId=self.session,
            )
            return None
        self.bytes += len(response.body)
        return response

    def _fulfil(
        self, request_id: str, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        self.browser.pipe.send(
            "Fetch.fulfillRequest",
            {
                "requestId": request_id,
                "responseCode": status,
                "responseHeaders": [{"name": k, "value": v} for k, v in headers],
                "body": base64.b64encode(body).decode("ascii"),
            },
            sessionId=self.session,
        )
