"""Per-profile verdicts, harvested end to end: the catalogue answers by profile and verdict.

A real HTTP server on 127.0.0.1 serves two landing pages, one with a CDIF 1.1 record that
meets core 1.1 but breaks a discovery 1.1 rule and claims a profile we hold no rules for, one
with a CDIF 1.0 record; the local runner runs every stage, then the `catalog` command and the
publisher report are read (see docs/decisions/0063-per-profile-verdicts.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import lxml.html
import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

pytestmark = pytest.mark.network

HTML = {"Content-Type": "text/html; charset=utf-8"}
GOLDEN = Path(__file__).parents[1] / "unit" / "golden" / "normalisation"


def _record_11(page: str) -> dict[str, Any]:
    return {
        "@context": {
            "schema": "http://schema.org/",
            "dcterms": "http://purl.org/dc/terms/",
            "dcat": "http://www.w3.org/ns/dcat#",
            "prov": "http://www.w3.org/ns/prov#",
        },
        "@id": "https://doi.org/10.5072/soil-11",
        "@type": ["schema:Dataset"],
        "schema:name": "Soil moisture, Bay of Biscay",
        "schema:identifier": "https://doi.org/10.5072/soil-11",
        "schema:url": page,
        "schema:dateModified": "2026-01-12",
        "schema:license": ["https://creativecommons.org/publicdomain/zero/1.0/"],
        # discovery 1.1 wants a place here, not a string
        "schema:spatialCoverage": "somewhere in the bay",
        "schema:subjectOf": {
            "@id": page + "#metadata",
            "@type": ["schema:Dataset"],
            "schema:additionalType": [{"@id": "dcat:CatalogRecord"}],
            "schema:about": {"@id": "https://doi.org/10.5072/soil-11"},
            "dcterms:conformsTo": [
                {"@id": "https://w3id.org/cdif/core/1.1"},
                {"@id": "https://w3id.org/cdif/discovery/1.1"},
                {"@id": "https://w3id.org/cdif/somethingnew/1.1"},
            ],
        },
    }


def _page(record: dict[str, Any]) -> str:
    script = json.dumps(record).replace("</", "<\\/")
    return f'<html><head><script type="application/ld+json">{script}</script></head></html>'


def _catalog(out: Path, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "catalog", "--out", str(out), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_records_are_judged_per_profile_and_found_by_profile_and_verdict(tmp_path: Path) -> None:
    record_10 = json.loads((GOLDEN / "cdif_shaped.input.json").read_text(encoding="utf-8"))
    with PublisherSite(None) as server:
        page_11 = server.url("/soil-11.html")
        server.add_route("/soil-11.html", headers=HTML, body=_page(_record_11(page_11)))
        server.add_route("/soil-10.html", headers=HTML, body=_page(record_10))
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            harvester.harvest([page_11, server.url("/soil-10.html")])
    lines = {
        line["url"]: line
        for line in map(json.loads, (tmp_path / "outcomes.jsonl").read_text().splitlines())
    }
    (record,) = lines[page_11]["records"]
    # core 1.1 decides validity; the other profiles are reported beside it
    assert record["valid"] is True
    assert record["profiles"] == [
        "core 1.1 valid",
        "discovery 1.1: 1 error",
        "somethingnew 1.1: profile unknown",
    ]
    report = json.loads((tmp_path / record["report"]).read_text())
    discovery = report["profiles"][1]
    assert (discovery["profile"], discovery["status"]) == ("discovery", "invalid")
    assert [e["pointer"] for e in discovery["errors"]] == ["/schema:spatialCoverage/0"]

    found = _catalog(tmp_path, "records", "--profile", "discovery/1.1", "--verdict", "invalid")
    assert [row["record_id"] for row in found] == [record["record_id"]]
    assert found[0]["profiles"] == {
        "core/1.1": "valid",
        "discovery/1.1": "invalid",
        "somethingnew/1.1": "unknown",
    }
    source = found[0]["source"]
    assert _catalog(tmp_path, "records", "--source", source, "--profile", "core/1.0") == [
        row for row in _catalog(tmp_path, "records") if row["url"].endswith("/soil-10.html")
    ]
    assert len(_catalog(tmp_path, "records", "--profile", "discovery")) == 2
    assert _catalog(tmp_path, "records", "--profile", "somethingnew", "--verdict", "valid") == []

    page = lxml.html.fromstring((tmp_path / "report.html").read_bytes())
    rows = page.xpath('//section[@id="profiles"]//tbody/tr')
    table = {row[0].text_content(): [int(cell.text_content()) for cell in row[1:]] for row in rows}
    # profile: valid, invalid, errors, no rules held (core first)
    assert table == {
        "core 1.0": [1, 0, 0, 0],
        "core 1.1": [1, 0, 0, 0],
        "discovery 1.0": [1, 0, 0, 0],
        "discovery 1.1": [0, 1, 1, 0],
        "somethingnew 1.1": [0, 0, 0, 1],
    }


def test_a_bad_profile_query_is_refused_with_what_is_accepted(tmp_path: Path) -> None:
    with LocalHarvester(tmp_path, allow_loopback=True):
        pass
    done = subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "catalog", "--out", str(tmp_path)]
        + ["records", "--profile", "discovery/one"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown profile 'discovery/one'" in done.stderr
