"""Several Datasets on one landing page, harvested end to end: each is its own record.

A real HTTP server on 127.0.0.1 serves the page; the local runner runs every stage in process
(see docs/decisions/0061-json-ld-glitches-and-several-datasets.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

pytestmark = pytest.mark.network

HTML = {"Content-Type": "text/html; charset=utf-8"}


def _block(number: int) -> str:
    node = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": f"https://doi.org/10.5072/page-{number}",
        "name": f"Dataset {number}",
    }
    return f'<script type="application/ld+json">{json.dumps(node)}</script>'


def _harvest(out: Path, blocks: int) -> tuple[list[dict[str, object]], set[str], float]:
    """Harvest one page of ``blocks`` Dataset blocks; its outcome lines, the catalogue's record
    ids and the seconds the harvest took."""
    page = "<html><head>" + "".join(_block(n) for n in range(blocks)) + "</head></html>"
    with PublisherSite(None) as server:
        server.add_route("/catalogue.html", headers=HTML, body=page)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            started = time.perf_counter()
            harvester.harvest(server.url("/catalogue.html"))
            took = time.perf_counter() - started
            held = {entry.record_id for entry in harvester.catalog.records()}
    lines = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    return lines, held, took


def test_a_page_of_three_dataset_blocks_ends_with_three_records(tmp_path: Path) -> None:
    lines, held, _ = _harvest(tmp_path, 3)
    (line,) = lines
    assert line["outcome"] == "record"
    records = line["records"]
    assert isinstance(records, list) and len(records) == 3
    assert len(held) == 3 == len({record["record_id"] for record in records})
    for record in records:
        normalised = json.loads((tmp_path / record["record"]).read_text())
        assert normalised["schema:subjectOf"]["@id"] == record["record_id"]


def test_a_page_of_ten_thousand_dataset_blocks_ends_with_ten_thousand_records(
    tmp_path: Path,
) -> None:
    lines, held, took = _harvest(tmp_path, 10_000)
    (line,) = lines
    assert line["outcome"] == "record"
    assert len(held) == 10_000
    print(f"10,000 records harvested from one page in {took:.1f} s")
