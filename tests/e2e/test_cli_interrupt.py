"""Interrupting a local harvest: Ctrl-C (SIGINT) or SIGTERM prints one line, marks the run
``interrupted``, exits 130 or 143; harvesting again on the same directory completes, the URLs
the interrupted run harvested being found unchanged."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.local_runtime import CATALOG_FILE
from cdif_harvester.model import RunState
from tests.support.httpserver import LocalHTTPServer

pytestmark = [pytest.mark.network]

PAGES = 12
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def _page(number: int) -> bytes:
    record = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": f"https://doi.org/10.5072/slow-{number}",
        "name": f"Slow dataset {number}",
        "description": "A dataset served slowly.",
    }
    return (
        f'<html><head><script type="application/ld+json">{json.dumps(record)}</script>'
        f"</head><body>{number}</body></html>"
    ).encode()


def _serve(server: LocalHTTPServer, delay: float) -> str:
    """A site of PAGES pages, each answered after ``delay`` seconds; its sitemap's URL."""
    locs = "".join(f"<url><loc>{server.url(f'/page-{n}.html')}</loc></url>" for n in range(PAGES))
    server.route(
        "/sitemap.xml",
        body=f'<urlset xmlns="{SITEMAP_NS}">{locs}</urlset>'.encode(),
        headers=[("Content-Type", "application/xml")],
    )
    server.route("/robots.txt", status=404)
    for n in range(PAGES):
        server.route(
            f"/page-{n}.html",
            body=_page(n),
            headers=[("Content-Type", "text/html")],
            headers_delay=delay,
        )
    return server.url("/sitemap.xml")


def _harvest(entry: str, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cdif_harvester.cli.main",
        "harvest",
        entry,
        "--out",
        str(out),
        "--allow-loopback",
        "--quiet",
        "--workers",
        "1",
    ]


def _settled(out: Path) -> int:
    """The URLs the harvest under way has settled (0 before its catalogue exists): read-only, so
    that the harvest's own writes are never in the way. Its document processes may take a while
    to start on a loaded machine, so pages fetched are not yet pages settled."""
    path = out / CATALOG_FILE
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
            row = db.execute("SELECT COALESCE(SUM(settled), 0) FROM runs").fetchone()
    except sqlite3.Error:  # (created but not yet holding the table)
        return 0
    return int(row[0])


def _runs(out: Path) -> list[tuple[str, RunState, int, int]]:
    catalog = SqliteCatalog(out / CATALOG_FILE)
    try:
        return [(r.run_id, r.state, r.entered, r.settled) for r in catalog.runs()]
    finally:
        catalog.close()


@pytest.mark.parametrize(
    ("signum", "status", "name"),
    [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_run_says_one_line_is_marked_and_the_next_run_completes(
    tmp_path: Path, signum: int, status: int, name: str
) -> None:
    out = tmp_path / "out"
    with LocalHTTPServer() as server:
        entry = _serve(server, delay=0.5)
        # Given a harvest of a slow site under way, some of its pages done
        process = subprocess.Popen(
            _harvest(entry, out),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while sum(p.startswith("/page-") for p in server.paths()) < 3 or _settled(out) < 1:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the harvest never reached the pages"
            time.sleep(0.05)

        # When it is interrupted
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)

        # Then it says so in one line (no traceback) and exits 128 + the signal
        assert process.returncode == status, stderr
        lines = stderr.splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith(f"cdif-harvest: {name}: run ") and "interrupted" in lines[0]
        # and the run is marked interrupted, with some but not all of its URLs settled
        [(first, state, entered, settled)] = _runs(out)
        assert state is RunState.INTERRUPTED
        assert first in lines[0]
        assert 0 < settled < PAGES

        # When the same harvest is run again (the site now quick)
        for n in range(PAGES):
            server.routes[f"/page-{n}.html"].headers_delay = 0.0
        again = subprocess.run(
            _harvest(entry, out), capture_output=True, text=True, timeout=120, check=False
        )

    # Then it completes: a new run, finished, every URL with its outcome; the pages harvested
    # before the interruption are unchanged, the others harvested now
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout[: again.stdout.rindex("}") + 1])
    runs = {run_id: state for run_id, state, *_ in _runs(out)}
    assert runs == {first: RunState.INTERRUPTED, summary["run_id"]: RunState.FINISHED}
    assert summary["urls"] == PAGES
    outcomes = summary["outcomes"]
    assert outcomes["record"] + outcomes["unchanged"] == PAGES
    assert outcomes["unchanged"] >= 1
