"""Pages whose JSON-LD is written by JavaScript, harvested with rendering in headless Chromium.

Real pages are served on 127.0.0.1; the harvest (or the renderer alone) loads them in Chromium,
whose every request is answered by the safe fetcher. The tests skip when no Chromium is
installed (``make browser`` installs Debian's).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

import pytest

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.render import (
    BrowserUnavailable,
    ChromiumRenderer,
    RenderLimits,
    chromium_path,
)
from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import FetchResponse, Outcome, UrlOutcome

pytestmark = [pytest.mark.network, pytest.mark.serial]  # (wall-clock bounds)

HTML = {"content-type": "text/html; charset=utf-8"}
DATASET = {
    "@context": "https://schema.org/",
    "@type": "Dataset",
    "@id": "https://doi.org/10.5555/rendered",
    "name": "Ocean temperatures, written by a script",
    "description": "A dataset whose landing page inserts its JSON-LD with JavaScript.",
    "identifier": "https://doi.org/10.5555/rendered",
    "url": "{{BASE}}/page",
    "license": "https://creativecommons.org/licenses/by/4.0/",
}
# Inserts its argument (a JSON string) as an ld+json script.
INSERT = (
    "function insert(text) { const s = document.createElement('script');"
    " s.type = 'application/ld+json'; s.textContent = text; document.head.appendChild(s); }"
)
LIMITS = RenderLimits(page_seconds=6.0, script_wait=1.5, idle_seconds=0.3, heap_mib=64)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium binary; the module skips without one."""
    try:
        return chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


def _page(script: str) -> str:
    head = f"<title>t</title><script>{INSERT}\n{script}</script>"
    return f"<html><head>{head}</head><body></body></html>"


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[PublisherSite]:
    """An empty site whose routes each test adds."""
    with PublisherSite(tmp_path / "site") as site:
        yield site


def _harvest(
    site: PublisherSite, tmp_path: Path, chromium: str, render: str | None
) -> tuple[UrlOutcome, float]:
    """Harvest the site's /page with rendering ``render``; its outcome and the run's time."""
    with LocalHarvester(tmp_path / "out", allow_loopback=True, render=render) as harvester:
        renderer = harvester.wiring.renderer
        assert isinstance(renderer, ChromiumRenderer)
        renderer.limits, renderer.binary = LIMITS, chromium
        started = time.monotonic()
        summary = harvester.harvest([site.url("/page")])
        took = time.monotonic() - started
        outcomes = list(harvester.catalog.outcomes(summary.run_id))
    assert len(outcomes) == 1, outcomes
    return outcomes[0], took


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("insert(JSON.stringify(DATA));", id="immediately"),
        pytest.param(
            "window.addEventListener('load', () => setTimeout(() =>"
            " insert(JSON.stringify(DATA)), 800));",
            id="after-a-timer",
        ),
        pytest.param(
            "const x = new XMLHttpRequest(); x.open('GET', '/meta.json');"
            " x.onload = () => insert(x.responseText); x.send();",
            id="after-an-xhr",
        ),
    ],
)
def test_json_ld_written_by_a_script_is_harvested_as_rendered(
    publisher: PublisherSite, tmp_path: Path, chromium: str, script: str
) -> None:
    data = json.dumps(DATASET)
    publisher.add_route("/page", headers=HTML, body=_page(f"const DATA = {data};\n{script}"))
    publisher.add_route("/meta.json", headers={"content-type": "application/json"}, body=data)
    outcome, _ = _harvest(publisher, tmp_path, chromium, "fallback")
    assert outcome.outcome is Outcome.RECORD, outcome.reason
    assert outcome.pattern == "rendered"
    out = tmp_path / "out"
    (record,) = (out / "records").rglob("*.jsonld")
    assert "Ocean temperatures, written by a script" in record.read_text()
    (report,) = (out / "reports").rglob("*.json")
    assert "rendered in" in report.read_text(), "the record's report does not say the time"


def test_without_rendering_the_same_page_has_no_metadata(
    publisher: PublisherSite, tmp_path: Path, chromium: str
) -> None:
    script = f"insert(JSON.stringify({json.dumps(DATASET)}));"
    publisher.add_route("/page", headers=HTML, body=_page(script))
    outcome, _ = _harvest(publisher, tmp_path, chromium, None)
    assert outcome.outcome is Outcome.NO_METADATA


def test_a_page_that_never_writes_json_ld_ends_no_metadata_within_the_cap(
    publisher: PublisherSite, tmp_path: Path, chromium: str
) -> None:
    publisher.add_route("/page", headers=HTML, body=_page("document.title = 'nothing here';"))
    outcome, took = _harvest(publisher, tmp_path, chromium, "always")
    assert outcome.outcome is Outcome.NO_METADATA
    assert "rendering" in (outcome.reason or "")
    # The browser starts, waits script_wait after the load and gives up: far inside the cap.
    assert took < LIMITS.page_seconds + 5


def _renderer(chromium: str, fetcher: SafeFetcher | _Spy) -> ChromiumRenderer:
    return ChromiumRenderer(fetcher, limits=LIMITS, allow_loopback=True, binary=chromium)


def test_a_page_that_loops_for_ever_is_stopped_at_the_time_cap(
    publisher: PublisherSite, chromium: str
) -> None:
    publisher.add_route(
        "/page", headers=HTML, body=_page("setTimeout(() => { for (;;) {} }, 100);")
    )
    with (
        SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher,
        _renderer(chromium, fetcher) as renderer,
    ):
        rendered = renderer.render(publisher.url("/page"))
        assert rendered.stopped is not None and "page-time cap" in rendered.stopped
        assert rendered.seconds < LIMITS.page_seconds + 3
        # The browser is still usable afterwards: the stuck page's context was disposed of.
        publisher.add_route("/next", headers=HTML, body=_page("insert('{}');"))
        assert b"ld+json" in renderer.render(publisher.url("/next")).html


def test_a_page_that_allocates_without_end_is_stopped_at_the_memory_cap(
    publisher: PublisherSite, chromium: str
) -> None:
    publisher.add_route(
        "/page",
        headers=HTML,
        body=_page("const hoard = []; for (;;) hoard.push(new Array(1e6).fill(Math.random()));"),
    )
    with (
        SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher,
        _renderer(chromium, fetcher) as renderer,
    ):
        rendered = renderer.render(publisher.url("/page"))
    assert rendered.stopped is not None
    assert rendered.html == b""
    assert rendered.seconds < LIMITS.page_seconds + 3


class _Spy:
    """The safe fetcher, noting every URL it is asked for."""

    def __init__(self, inner: SafeFetcher) -> None:
        self.inner = inner
        self.asked: list[str] = []

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        self.asked.append(url)
        return self.inner.fetch(
            url, method=method, headers=headers, max_bytes=max_bytes, truncate=truncate
        )


class _Trap:
    """A listening socket on loopback that counts the connections made to it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


def test_a_script_cannot_reach_a_forbidden_address(publisher: PublisherSite, chromium: str) -> None:
    trap = _Trap()
    forbidden = [
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/",
    ]
    script = (
        f"for (const u of {json.dumps(forbidden)}) fetch(u).catch(() => 0);"
        f"try {{ new WebSocket('ws://127.0.0.1:{trap.port}/'); }} catch (e) {{}}"
        "fetch('/write', {method: 'POST', body: 'x'}).catch(() => 0);"
        "const f = document.createElement('iframe'); f.src = 'http://192.168.1.1/';"
        "document.body.appendChild(f);"
        "const g = document.createElement('iframe'); g.src = 'ftp://127.0.0.1/';"
        "document.body.appendChild(g);"
        "setTimeout(() => insert('{}'), 500);"
    )
    publisher.add_route("/page", headers=HTML, body=_page(f"window.onload = () => {{{script}}};"))
    try:
        with SafeFetcher(FetchPolicy(allow_loopback=True)) as inner:
            spy = _Spy(inner)
            with _renderer(chromium, spy) as renderer:
                rendered = renderer.render(publisher.url("/page"))
    finally:
        trap.close()
    refused = "\n".join(rendered.refused)
    for url, reason in [
        ("http://10.1.2.3/", "private-address"),
        ("http://169.254.169.254/latest/meta-data/", "cloud-metadata-address"),
        ("http://[fd00:ec2::254]/latest/", "cloud-metadata-address"),
        ("http://192.168.1.1/", "private-address"),
    ]:
        assert f"{url}: {reason}" in refused, refused
    assert "method-not-allowed (POST)" in refused
    # Refused at the interception: the fetcher was never asked, and the browser itself
    # connected nowhere (the WebSocket, which Fetch cannot see, found no network).
    assert spy.asked == [publisher.url("/page")]
    assert trap.connections == 0
    assert not any(path == "/write" for _m, path, _h in publisher.requests)


def test_the_command_line_renders_with_render_fallback(
    publisher: PublisherSite, tmp_path: Path, chromium: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHROMIUM", chromium)
    script = f"insert(JSON.stringify({json.dumps(DATASET)}));"
    publisher.add_route("/page", headers=HTML, body=_page(script))
    out = tmp_path / "out"
    argv = ["harvest", publisher.url("/page"), "--out", str(out), "--allow-loopback", "-q"]
    assert main([*argv, "--render", "fallback"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["patterns"] == {"rendered": 1}


def test_the_browsers_requests_keep_the_hosts_crawl_delay(
    publisher: PublisherSite, tmp_path: Path, chromium: str
) -> None:
    publisher.add_route(
        "/robots.txt",
        headers={"content-type": "text/plain"},
        body="User-agent: *\nCrawl-delay: 1\n",
    )
    parts = ", ".join(f"fetch('/part{n}.json')" for n in range(3))
    script = f"Promise.all([{parts}]).then(() => insert(JSON.stringify({json.dumps(DATASET)})));"
    publisher.add_route("/page", headers=HTML, body=_page(script))
    for n in range(3):
        publisher.add_route(f"/part{n}.json", headers={"content-type": "application/json"})
    outcome, _ = _harvest(publisher, tmp_path, chromium, "fallback")
    assert outcome.pattern == "rendered", outcome.reason
    starts = sorted(
        timing.started
        for (_method, path, _headers), timing in zip(
            publisher.requests, publisher.timings, strict=True
        )
        if path.startswith("/part")
    )
    assert len(starts) == 3
    # The parts were asked for at once by the page; the gate spaced them by the Crawl-delay.
    assert all(later - earlier >= 0.9 for earlier, later in pairwise(starts))
