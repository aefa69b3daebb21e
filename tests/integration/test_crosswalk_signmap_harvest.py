"""An aggregator republishes what it harvested: the Signmap of a source, served on 127.0.0.1,
is harvested again by the harvester itself and gives back the same records and links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.domain.discovery.sitemap import parse_sitemap
from cdif_harvester.keys import signmap_key, source_of
from cdif_harvester.stages.crosswalk import build_source_signmap

pytestmark = pytest.mark.network


def _records(out: Path) -> dict[str, dict[str, object]]:
    """Valid records of a run directory, by record id: the outcome line's record entries."""
    found: dict[str, dict[str, object]] = {}
    for line in (out / "outcomes.jsonl").read_text(encoding="utf-8").splitlines():
        outcome = json.loads(line)
        for record in outcome["records"]:
            if record["valid"]:
                found[record["record_id"]] = {**record, "url": outcome["url"]}
    return found


def test_the_signmap_of_a_harvest_harvests_the_same_records(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a harvest of the demo publisher and the Signmap of that source
    with LocalHarvester(tmp_path / "first", allow_loopback=True) as harvester:
        harvester.harvest(site.url("/robots.txt"))
        source = source_of(site.base_url)
        key = build_source_signmap(harvester.wiring, source)
        signmap = harvester.wiring.store.get(key)
    assert key == signmap_key(source)
    assert (tmp_path / "first" / key).is_file()  # the documented place in the output directory
    first = _records(tmp_path / "first")
    assert len(first) == 4
    listed = parse_sitemap(signmap, sitemap_url=site.url("/signmap.xml"))
    assert sorted(e.loc for e in listed.entries) == sorted(str(r["url"]) for r in first.values())

    # When the Signmap is served by the publisher and harvested from scratch
    site.add_route("/signmap.xml", headers={"Content-Type": "application/xml"}, body=signmap)
    before = len(site.requests)
    with LocalHarvester(tmp_path / "second", allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/signmap.xml"))

    # Then the same valid records come back, every URL listed was visited once, and the
    # describedby links of the Signmap were followed (CDIF profile first)
    assert _records(tmp_path / "second").keys() == first.keys()
    assert summary.to_dict()["outcomes"]["record"] == len(first)
    paths = [path for _, path, _ in site.requests[before:]]
    for entry in listed.entries:
        described = [link.href for link in entry.links if link.rel == "describedby"]
        assert described
        for href in described:
            assert href.removeprefix(site.base_url) in paths
    # and each record keeps, as provenance, the links the Signmap gave it
    for record in _records(tmp_path / "second").values():
        report = json.loads((tmp_path / "second" / str(record["report"])).read_text("utf-8"))
        from_signmap = {
            (link["rel"], link["href"])
            for link in report["provenance"]["links"]
            if link["found_in"] == "signmap"
        }
        entry = next(e for e in listed.entries if e.loc == record["url"])
        assert from_signmap == {(link.rel, link.href) for link in entry.links}
