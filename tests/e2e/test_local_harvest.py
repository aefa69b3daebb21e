"""The local runner end to end: the demo publisher served on 127.0.0.1, every stage in process."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.domain.views.nquads import record_nquads
from cdif_harvester.domain.views.pidkernel import pid_kernel_view
from cdif_harvester.keys import VIEW_NAMES

pytestmark = pytest.mark.network

EXPECTED = {
    "/datasets/north-atlantic-ctd-2021.html": ("record", True),
    "/datasets/gulf-sst-anomalies.html": ("record", True),
    "/datasets/kelp-forest-survey.html": ("record", True),
    "/datasets/tide-gauge-records-1990s.html": ("record", True),
    "/datasets/sediment-cores-draft.html": ("record", False),
    "/datasets/glider-mission-notes.html": ("no-metadata", None),
    "/datasets/retired-mooring-2009.html": ("failed", None),
    "/private/whale-acoustics-embargoed.html": ("disallowed", None),
}


def _lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]


def test_harvest_of_the_demo_site_writes_the_documented_files(
    site: PublisherSite, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/robots.txt"))

    lines = _lines(out)
    by_path = {str(line["url"]).removeprefix(site.base_url): line for line in lines}
    assert {path: line["outcome"] for path, line in by_path.items()} == {
        path: outcome for path, (outcome, _) in EXPECTED.items()
    }
    for path, (outcome, valid) in EXPECTED.items():
        line = by_path[path]
        if outcome != "record":
            assert line["reason"], path  # every non-record outcome says why
            assert line["records"] == []
            continue
        assert "reason" not in line
        assert line["pattern"] == "embedded-script"
        (record,) = line["records"]  # type: ignore[misc]
        assert record["valid"] is valid
        assert bool(record["errors"]) is (not valid)
        assert (out / record["record"]).is_file() and (out / record["report"]).is_file()
        report = json.loads((out / record["report"]).read_text())
        assert report["valid"] is valid and report["provenance"]["url"] == line["url"]
        normalised = json.loads((out / record["record"]).read_text())
        assert "schema:Dataset" in normalised["@type"]
        assert normalised["schema:subjectOf"]["@id"] == record["record_id"]
        # No view is stored: each is made from the record when asked for (the CLI here)
        assert "views" not in record
        views = _printed_views(out, str(record["record_id"]), capsysbinary)
        if valid:
            assert set(views) == set(VIEW_NAMES) and all(views.values())
            # the bytes the builders make of the stored record
            assert views["pid-kernel"] == _json(pid_kernel_view(normalised))
            graph = str(record["record_id"])
            nquads = record_nquads(normalised, graph=graph, contexts=JsonLdContexts())
            assert views["nquads"] == nquads.encode("utf-8")
        else:
            assert views == {}
    assert "robots-txt" in str(by_path["/private/whale-acoustics-embargoed.html"]["reason"])
    assert "http-404" in str(by_path["/datasets/retired-mooring-2009.html"]["reason"])

    # summary.json agrees with outcomes.jsonl
    written = json.loads((out / "summary.json").read_text())
    assert written == summary.to_dict()
    assert written["urls"] == len(lines) == len(EXPECTED)
    assert written["outcomes"] == {
        k: Counter(str(line["outcome"]) for line in lines).get(k, 0) for k in written["outcomes"]
    }
    assert (written["records"], written["valid_records"], written["invalid_records"]) == (5, 4, 1)
    assert written["views"] == 0
    # views/ holds the Signmap only: no view files by default
    assert [p.name for p in (out / "views").rglob("*") if p.is_file()] == ["signmap.xml"]
    assert (out / "runs" / summary.run_id / "outcomes.jsonl").is_file()
    assert not (out / "staging").exists()  # hand-over objects cleaned up
    # the disallowed page was never fetched
    assert all("/private/" not in path for _, path, _ in site.requests)


def _json(value: object) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")


def _printed_views(
    out: Path, record_id: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> dict[str, bytes]:
    """Every view ``cdif-harvest view`` prints of the record (none for an invalid record)."""
    printed = {}
    for name in VIEW_NAMES:
        capsysbinary.readouterr()
        code = main(["view", "--out", str(out), record_id, "--view", name])
        captured = capsysbinary.readouterr()
        if code == 0:
            printed[name] = captured.out
        else:
            assert code == 1 and b"not valid" in captured.err and captured.out == b""
    return printed


def test_views_are_written_as_files_when_asked_for(site: PublisherSite, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True, views=True) as harvester:
        summary = harvester.harvest(site.url("/sitemap-datasets.xml"))
    assert summary.valid_records > 0 and summary.views == summary.valid_records * len(VIEW_NAMES)
    for line in _lines(out):
        for record in line["records"]:  # type: ignore[attr-defined]
            if not record["valid"]:
                assert "views" not in record
                continue
            assert set(record["views"]) == set(VIEW_NAMES)
            for view in record["views"].values():
                assert (out / view).is_file() and (out / view).stat().st_size > 0


def test_a_second_harvest_continues_the_same_catalogue(site: PublisherSite, tmp_path: Path) -> None:
    with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
        first = harvester.harvest(site.url("/sitemap-datasets.xml"))
    with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
        second = harvester.harvest(site.url("/sitemap-datasets.xml"))
        records = list(harvester.catalog.records())
        earlier = list(harvester.catalog.outcomes(first.run_id))
    assert first.run_id != second.run_id
    assert len(earlier) == first.urls  # the first run's outcomes are still there
    # nothing changed, so the records are those the first run wrote (see test_incremental.py)
    assert {entry.run_id for entry in records} == {first.run_id}
    assert (
        len(records) == first.records and second.outcomes["unchanged"] == first.outcomes["record"]
    )
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(
        [first.run_id, second.run_id]
    )


def test_a_single_landing_page_can_be_harvested(site: PublisherSite, tmp_path: Path) -> None:
    with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/datasets/kelp-forest-survey.html"))
    assert summary.outcomes["record"] == 1 and summary.urls == 1
    assert summary.valid_records == 1


def test_loopback_is_blocked_without_the_flag_and_nothing_is_sent(
    site: PublisherSite, tmp_path: Path
) -> None:
    with LocalHarvester(tmp_path) as harvester:
        summary = harvester.harvest(site.url("/robots.txt"))
    (line,) = _lines(tmp_path)
    assert line["outcome"] == "blocked"
    assert str(line["reason"]).startswith("loopback-address")
    assert summary.outcomes["blocked"] == 1
    assert site.requests == []


def test_a_5xx_page_is_retried_then_recorded_as_failed(site: PublisherSite, tmp_path: Path) -> None:
    site.add_route("/flaky.html", status=503, body=b"try later")
    site.add_route(
        "/one.xml",
        headers={"Content-Type": "application/xml"},
        body=(
            b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            b"<url><loc>{{BASE}}/flaky.html</loc></url></urlset>"
        ),
    )
    with LocalHarvester(tmp_path / "out", allow_loopback=True, max_attempts=3) as harvester:
        harvester.harvest(site.url("/one.xml"))
    (line,) = _lines(tmp_path / "out")
    assert line["outcome"] == "failed"
    assert str(line["reason"]).startswith("http-503")
    assert sum(1 for _, path, _ in site.requests if path == "/flaky.html") == 3


def test_cdif_harvest_demo_prints_a_summary_and_leaves_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path), "--port", "0"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["urls"] == len(EXPECTED)
    assert summary["valid_records"] == 4
    assert "8 URLs" in captured.err  # the human summary and the progress go to stderr
    for name in ("summary.json", "outcomes.jsonl", "catalog.sqlite"):
        assert (tmp_path / name).is_file()


def test_cdif_harvest_refuses_a_bad_url_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["harvest", "file:///etc/passwd", "--out", str(tmp_path)]) == 2
    assert "absolute http(s) URL" in capsys.readouterr().err


def test_cdif_harvest_format_parameter_asks_a_metadata_server_for_cdif(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PublisherSite(None) as server:
        server.add_route(
            "/sitemap.xml",
            headers={"Content-Type": "application/xml"},
            body='<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            "<url><loc>{{BASE}}/csw?id=7</loc></url></urlset>",
        )
        server.add_route("/csw?id=7", headers={"Content-Type": "application/xml"}, body="<r/>")
        server.add_route(
            "/csw?id=7&format=CDIF1.0",
            headers={"Content-Type": "application/ld+json"},
            body='{"@context": "https://schema.org/", "@type": "Dataset", "@id": "urn:x:7", '
            '"name": "From the metadata server"}',
        )
        argv = ["harvest", server.url("/sitemap.xml"), "--out", str(tmp_path), "--quiet"]
        assert main([*argv, "--allow-loopback", "--format-parameter"]) == 0
        asked = [target for _, target, _ in server.requests]
    (line,) = _lines(tmp_path)
    assert (line["outcome"], line["pattern"]) == ("record", "format-parameter")
    assert sorted(asked) == ["/csw?id=7&format=CDIF1.0", "/robots.txt", "/sitemap.xml"]
    capsys.readouterr()
    assert main([*argv, "--format-parameter", "format=CDIF 1.0"]) == 2
    assert "format_parameter must look like name=value" in capsys.readouterr().err
