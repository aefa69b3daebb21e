"""Locally too, the extractor's hand-over to the indexer travels in the index job's message: a
harvest of small pages writes no hand-over object, and a URL whose records pass the message's
cap still goes through the run's staging area
(docs/decisions/0085-staged-records-in-the-message.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import DirectoryObjectStore
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.support.httpserver import LocalHTTPServer

RECORDS = 5  # the demo site's records
MANY = 120  # Datasets on one page whose hand-over passes the message's 200 KiB


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key the local object store is asked to write while the test runs."""
    written: list[str] = []
    put = DirectoryObjectStore.put

    def noted(self: DirectoryObjectStore, key: str, *args: Any, **kwargs: Any) -> Any:
        written.append(key)
        return put(self, key, *args, **kwargs)

    monkeypatch.setattr(DirectoryObjectStore, "put", noted)
    return written


def _hand_overs(keys: list[str]) -> list[str]:
    """The hand-over objects (``staging/<run>/<url-hash>.json``) among ``keys``."""
    return [key for key in keys if key.startswith("staging/") and key.count("/") == 2]  # noqa: PLR2004


def test_a_local_harvest_of_small_pages_writes_no_hand_over_object(
    site: PublisherSite, tmp_path: Path, puts: list[str]
) -> None:
    with LocalHarvester(tmp_path / "out", allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/robots.txt"))
    assert summary.records == RECORDS
    assert any(key.startswith("records/") for key in puts)
    assert _hand_overs(puts) == []


def test_a_local_hand_over_too_large_for_its_message_goes_through_the_staging_area(
    tmp_path: Path, puts: list[str]
) -> None:
    blocks = "".join(
        '<script type="application/ld+json">'
        + json.dumps(
            {
                "@context": "https://schema.org/",
                "@type": "Dataset",
                "@id": f"https://example.org/many#d{n}",
                "name": f"Dataset {n}",
                "description": f"Dataset number {n}. " + "Measured values. " * 80,
            }
        )
        + "</script>"
        for n in range(MANY)
    )
    body = f"<!doctype html><html><head>{blocks}</head><body></body></html>".encode()
    out = tmp_path / "out"
    with LocalHTTPServer() as server:
        server.route("/many.html", headers=[("Content-Type", "text/html")], body=body)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            summary = harvester.harvest(server.url("/many.html"))
    assert summary.records == MANY
    assert len(_hand_overs(puts)) == 1
    assert not (out / "staging").exists()  # gone with the run, as before
