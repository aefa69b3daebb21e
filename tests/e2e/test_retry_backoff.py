"""Retries back off, end to end: a publisher on 127.0.0.1 that answers 503 (no Retry-After)
twice, then 200; the local runner waits before each retry (through its sleeper, so the test
never sleeps for real) and the record is harvested in the end."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.e2e.test_entry_url import JSONLD, TEXT, demo_record

pytestmark = pytest.mark.network


def test_a_503_twice_is_retried_after_a_growing_backoff(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a document whose server is overloaded for two requests
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    site.add_route("/metadata.jsonld", status=503, headers=TEXT, body="busy\n", times=2)
    url = site.url("/metadata.jsonld")
    slept: list[float] = []
    progress = io.StringIO()

    # When it is harvested, the backoff drawn at the top of each step
    with LocalHarvester(
        tmp_path / "out",
        allow_loopback=True,
        sleep=slept.append,
        progress=progress,
        jitter=lambda low, high: high,
    ) as harvester:
        summary = harvester.harvest(url)

    # Then the runner waited 1 s, then 2 s (base 1 s, doubled), and got the record
    assert slept == [pytest.approx(1.0, abs=0.1), pytest.approx(2.0, abs=0.1)]
    assert summary.outcomes["record"] == 1
    statuses = [t.status for t in site.timings if t.target == "/metadata.jsonld"]
    assert statuses[:3] == [503, 503, 200]
    said = progress.getvalue()
    assert f"retrying {url} in 1.0 s (http-503; attempt 2 of 3)" in said
    assert f"retrying {url} in 2.0 s (http-503; attempt 3 of 3)" in said
