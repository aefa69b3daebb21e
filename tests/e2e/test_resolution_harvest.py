"""A whole local harvest of a publisher that uses every resolution pattern, through to records.

The site (tests/support/signposting_site.py) announces HTML pages and a CDIF1.0 Signmap. Every
URL must end as a record made from the document its pattern points to, with the links the
resolver saw kept in the record's provenance and views.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.support.signposting_site import EXPECTED_PATTERNS, signposting_site

pytestmark = pytest.mark.network


@pytest.fixture
def site() -> Iterator[PublisherSite]:
    with signposting_site() as served:
        yield served


def _lines(out: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    return {str(line["url"]): line for line in lines}


def _linkset(out: Path, record_id: str, capsysbinary: pytest.CaptureFixture[bytes]) -> Any:
    """The record's linkset as ``cdif-harvest view`` prints it (made on read)."""
    capsysbinary.readouterr()
    assert main(["view", "--out", str(out), record_id, "--view", "linkset-json"]) == 0
    return json.loads(capsysbinary.readouterr().out)


def test_every_pattern_ends_in_records(
    site: PublisherSite, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/robots.txt"))

    lines = _lines(out)
    by_path = {url.removeprefix(site.base_url): line for url, line in lines.items()}
    assert {path: line["pattern"] for path, line in by_path.items()} == EXPECTED_PATTERNS
    assert {line["outcome"] for line in by_path.values()} == {"record"}
    assert summary.patterns == dict.fromkeys(EXPECTED_PATTERNS.values(), 1)
    # The ItemList gave one record per element; the CDIF records built from files are valid.
    assert len(by_path["/files/list.json"]["records"]) == 2
    # ... each keeping the list as its provenance, with its place in it
    provenance = [
        json.loads((out / ref["report"]).read_text())["provenance"]["item_list"]
        for ref in by_path["/files/list.json"]["records"]
    ]
    assert sorted(item["position"] for item in provenance) == [1, 2]
    assert all(item is not None for item in provenance)
    for path in ("/files/ct.json", "/resource/hl", "/resource/ls", "/resource/sm"):
        (record,) = by_path[path]["records"]
        assert record["valid"], (path, record["errors"])

    # The data file behind the Link header was never downloaded, nor the Signmap's landing page.
    gets = [target for method, target, _ in site.requests if method == "GET"]
    assert "/resource/hl" not in gets and "/resource/ls" not in gets
    assert all(not target.startswith("/resource/sm") for _, target, _ in site.requests)

    # The links the resolver saw are in the record's provenance and its Signposting views.
    (hl,) = by_path["/resource/hl"]["records"]
    report = json.loads((out / hl["report"]).read_text())
    assert report["provenance"]["via"] == "describedby"
    assert {"rel": "cite-as", "href": "https://doi.org/10.5072/hl"}.items() <= next(
        link for link in report["provenance"]["links"] if link["rel"] == "cite-as"
    ).items()
    linkset = _linkset(out, hl["record_id"], capsysbinary)
    assert "https://doi.org/10.5072/hl" in json.dumps(linkset)
    (ls,) = by_path["/resource/ls"]["records"]
    linkset = _linkset(out, ls["record_id"], capsysbinary)
    assert "https://orcid.org/0000-0002-1825-0097" in json.dumps(linkset)

    # The record built from <meta> tags says where it came from.
    (meta,) = by_path["/pages/meta.html"]["records"]
    report = json.loads((out / meta["report"]).read_text())
    assert report["provenance"]["via"] == "html-meta"
    assert any("discourages" in note for note in report["provenance"]["resolution_notes"])
