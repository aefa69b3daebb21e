"""Incremental harvesting end to end, on one machine: a real publisher site on 127.0.0.1.

The demo site is copied so each test can change it between harvests. What is counted: the
requests the site saw (and which of them carried a body), and every file of the output
directory that a harvest added or changed, apart from the run's own files (catalogue,
summary, outcomes).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import HarvestSummary, LocalHarvester
from cdif_harvester.demo.server import PublisherSite, demo_site_dir

KELP = "/datasets/kelp-forest-survey.html"
GULF = "/datasets/gulf-sst-anomalies.html"
CTD = "/datasets/north-atlantic-ctd-2021.html"
RECORD_PAGES = {
    KELP,
    GULF,
    CTD,
    "/datasets/tide-gauge-records-1990s.html",
    "/datasets/sediment-cores-draft.html",
}
_RUN_FILES = ("catalog.sqlite", "summary.json", "report.html", "outcomes.jsonl", "runs/")


@pytest.fixture
def site_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(str(demo_site_dir()), copy)
    return copy


@pytest.fixture
def served(site_dir: Path) -> Iterator[PublisherSite]:
    with PublisherSite(site_dir) as site:
        yield site


def _snapshot(out: Path) -> dict[str, str]:
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.rglob("*")
        if path.is_file() and not str(path.relative_to(out)).startswith(_RUN_FILES)
    }


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {key for key in after.keys() | before.keys() if before.get(key) != after.get(key)}


def _harvest(site: PublisherSite, out: Path, **settings: object) -> HarvestSummary:
    with LocalHarvester(out, allow_loopback=True, **settings) as harvester:  # type: ignore[arg-type]
        return harvester.harvest(site.url("/robots.txt"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record_id_of(path: Path) -> str:
    record_id = json.loads(path.read_text())["schema:subjectOf"]["@id"]
    assert isinstance(record_id, str)
    return record_id


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_unchanged_site_is_reharvested_without_bodies_or_writes(
    served: PublisherSite, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = _harvest(served, out)
    assert first.outcomes["record"] == len(RECORD_PAGES)
    before = _snapshot(out)
    seen = len(served.timings)

    second = _harvest(served, out)

    # every URL still has exactly one outcome; those with records are unchanged
    assert second.urls == first.urls
    assert second.outcomes["unchanged"] == len(RECORD_PAGES) and second.outcomes["record"] == 0
    assert second.records == 0
    # no request of the second harvest got a body: 304 for what was kept, 404 for the page
    # that is gone; landing pages with records were not even asked (sitemap lastmod)
    later = served.timings[seen:]
    assert later and {t.status for t in later} <= {304, 404}
    assert not {t.target for t in later} & RECORD_PAGES
    # and nothing was written
    assert _changed(before, _snapshot(out)) == set()


def test_one_changed_record_is_the_only_one_rewritten_and_keeps_its_history(
    served: PublisherSite,
    site_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    _harvest(served, out)
    before = _snapshot(out)
    # a first harvest keeps each record once: no copy of it under versions/
    assert not (out / "versions").exists()
    _edit(site_dir / KELP.lstrip("/"), "Annual diver transects", "Yearly diver transects")
    _edit(
        site_dir / "sitemap-datasets.xml",
        "<lastmod>2025-01-27</lastmod>",
        "<lastmod>2025-06-01</lastmod>",
    )

    third = _harvest(served, out)

    assert third.outcomes["record"] == 1 and third.records == 1
    changed = _changed(before, _snapshot(out))
    source = f"127.0.0.1_{served.port}"
    kelp_key = next(
        key[len(f"records/{source}/") : -len(".jsonld")]
        for key in changed
        if key.startswith("records/")
    )
    # only the kelp record, its report and the version it replaced; the new raw page; the
    # source's Signmap; and the kept answers of the two resources that changed (the page and its
    # sitemap)
    for key in changed:
        top = key.split("/", 1)[0]
        assert top in {"records", "reports", "views", "versions", "raw", "cache"}, key
        if top in {"records", "reports", "versions"}:
            assert kelp_key in key, key
        if top == "views":
            assert key == f"views/{source}/signmap.xml", key
    assert len([k for k in changed if k.startswith("versions/")]) == 1
    assert len([k for k in changed if k.startswith("cache/")]) <= 4  # 2 answers x (meta, body)
    latest_key = f"records/{source}/{kelp_key}.jsonld"
    assert "Yearly diver transects" in (out / latest_key).read_text()
    # the history: the first version (as the first harvest wrote it), then the latest
    with LocalHarvester(out, allow_loopback=True) as harvester:
        entry = harvester.catalog.get_record(_record_id_of(out / latest_key))
    assert entry is not None
    capsys.readouterr()
    assert main(["history", "--out", str(out), entry.record_id]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["latest"] for line in lines] == [False, True]
    first, latest = lines
    assert first["key"].startswith(f"versions/{source}/{kelp_key}/")
    assert _sha256(out / first["key"]) == before[latest_key]
    assert (latest["key"], latest["digest"]) == (latest_key, entry.content_hash[:32])


def test_reasons_for_unchanged_lastmod_not_modified_and_sd_date_published(
    served: PublisherSite, site_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _harvest(served, out)
    sitemap = site_dir / "sitemap-datasets.xml"
    # CTD: a newer lastmod, but the page is the same -> asked conditionally, 304
    _edit(sitemap, "<lastmod>2025-03-04T09:30:00Z</lastmod>", "<lastmod>2025-07-01</lastmod>")
    # Gulf: the metadata changed but declares the same sdDatePublished -> not republished
    _edit(sitemap, "<lastmod>2025-02-14</lastmod>", "<lastmod>2025-07-01</lastmod>")
    _edit(site_dir / GULF.lstrip("/"), '"Sea surface', '"Daily sea surface')
    before = _snapshot(out)

    summary = _harvest(served, out)

    with LocalHarvester(out, allow_loopback=True) as harvester:
        reasons = {
            _path(o.url): (o.outcome.value, (o.reason or "").split(":", 1)[0])
            for o in harvester.catalog.outcomes(summary.run_id)
        }
    assert reasons[CTD] == ("unchanged", "not-modified")
    assert reasons[GULF] == ("unchanged", "sd-date-published")
    assert reasons[KELP] == ("unchanged", "lastmod")
    changed = _changed(before, _snapshot(out))
    # the gulf page's new bytes are kept as raw (the document did change); no record is written
    assert not [k for k in changed if k.split("/", 1)[0] in {"records", "reports", "versions"}]


def test_a_vanished_url_becomes_a_tombstone(
    served: PublisherSite, site_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _harvest(served, out)
    text = (site_dir / "sitemap-datasets.xml").read_text()
    start = text.index("  <url>\n    <loc>{{BASE}}/datasets/gulf-sst-anomalies.html")
    end = text.index("</url>", start) + len("</url>\n")
    (site_dir / "sitemap-datasets.xml").write_text(text[:start] + text[end:])

    summary = _harvest(served, out)

    gulf = served.url(GULF)
    assert summary.withdrawn == [gulf]
    with LocalHarvester(out, allow_loopback=True) as harvester:
        state = harvester.catalog.get_url(gulf)
        entries = [e for e in harvester.catalog.records() if e.url == gulf]
        others = [e for e in harvester.catalog.records() if e.url != gulf]
    assert state is not None and state.withdrawn_at
    assert entries and all(e.withdrawn_at for e in entries)  # kept, marked withdrawn
    assert all(e.withdrawn_at is None for e in others)
    record = out / entries[0].record_key  # type: ignore[operator]
    assert record.is_file()  # never deleted
    assert json.loads((out / entries[0].report_key).read_text())["withdrawn_at"]
    signmap = (out / "views" / f"127.0.0.1_{served.port}" / "signmap.xml").read_text()
    assert gulf not in signmap and served.url(KELP) in signmap  # no longer republished
    # a later run does not withdraw it again, and a failed sitemap withdraws nothing
    assert _harvest(served, out).withdrawn == []
    served.add_route("/sitemap-datasets.xml", status=500)
    broken = _harvest(served, out)
    assert broken.withdrawn == []


def test_a_server_without_conditional_requests_still_costs_no_writes(
    site_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with PublisherSite(site_dir, conditional=False) as site:
        with LocalHarvester(out, allow_loopback=True) as harvester:
            harvester.harvest(site.url(KELP))
        before = _snapshot(out)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            again = harvester.harvest(site.url(KELP))
            reason = next(iter(harvester.catalog.outcomes(again.run_id))).reason
    assert again.outcomes["unchanged"] == 1
    assert (reason or "").startswith("content-hash")
    assert _changed(before, _snapshot(out)) == set()


def test_full_refresh_rewrites_everything(served: PublisherSite, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _harvest(served, out)
    summary = _harvest(served, out, incremental=False)
    assert summary.outcomes["record"] == len(RECORD_PAGES) and summary.outcomes["unchanged"] == 0


def test_catalog_queries_on_the_command_line(
    served: PublisherSite, site_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["harvest", served.url("/robots.txt"), "--out", str(out), "--allow-loopback"]
    assert main([*argv, "--quiet"]) == 0
    time.sleep(1.1)  # catalogue times are whole seconds: let the second harvest be later
    _edit(site_dir / KELP.lstrip("/"), "Annual diver transects", "Yearly diver transects")
    _edit(site_dir / "sitemap-datasets.xml", "2025-01-27", "2025-06-01")
    assert main([*argv, "--quiet"]) == 0
    capsys.readouterr()
    source = f"127.0.0.1_{served.port}"

    def query(*args: str) -> list[dict[str, object]]:
        assert main(["catalog", "--out", str(out), *args]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    everything = query("records", "--source", source)
    assert len(everything) == len(RECORD_PAGES)
    kelp = [e for e in everything if str(e["url"]).endswith(KELP)]
    changed_at = str(kelp[0]["changed_at"])
    assert [e["url"] for e in query("records", "--changed-since", changed_at)] == [kelp[0]["url"]]
    (one,) = query("record", str(kelp[0]["record_id"]))
    assert one == kelp[0]
    unchanged = query("urls", "--source", source, "--outcome", "unchanged")
    assert {_path(str(u["url"])) for u in unchanged} == RECORD_PAGES - {KELP}
    assert main(["catalog", "--out", str(out), "record", "nope"]) == 1
    assert main(["catalog", "--out", str(tmp_path / "empty"), "records"]) == 2
    assert "no catalogue" in capsys.readouterr().err


def test_shacl_flag_adds_shacl_errors_to_reports(
    site_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # JSON Schema cannot tell that this interval ends before it starts; our SHACL shapes can
    _edit(
        site_dir / KELP.lstrip("/"),
        '"schema:dateModified": "2025-01-27",',
        '"schema:dateModified": "2025-01-27", '
        '"schema:temporalCoverage": ["2024-01-01/2018-01-01"],',
    )

    def report_of(out: Path, *flags: str) -> dict[str, object]:
        with PublisherSite(site_dir) as site:
            argv = ["harvest", site.url(KELP), "--out", str(out), "--allow-loopback", "--quiet"]
            assert main([*argv, *flags]) == 0
        capsys.readouterr()
        with LocalHarvester(out) as harvester:
            (entry,) = harvester.catalog.records()
        loaded: dict[str, object] = json.loads((out / entry.report_key).read_text())
        return loaded

    plain = report_of(tmp_path / "plain")
    checked = report_of(tmp_path / "shacl", "--shacl")
    assert plain["valid"] is True and "shacl" not in plain
    assert checked["valid"] is False and checked["shacl"] is True
    (error,) = checked["errors"]  # type: ignore[misc]
    assert error["keyword"].startswith("shacl:")
    assert error["pointer"] == "/schema:temporalCoverage"
