"""Sources, runs and schedules on one machine, through the ``cdif-harvest`` command: register a
source, harvest it, read its run, schedule what is due, and count a URL two sitemaps share once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import RunState
from tests.support.httpserver import LocalHTTPServer

pytestmark = pytest.mark.network


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    """Run the command; return its exit status, its JSON lines and its stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    lines = []
    for line in captured.out.splitlines():
        if line.startswith("{") and line.endswith("}"):
            lines.append(json.loads(line))
    return code, lines, captured.err


def test_register_harvest_and_read_a_source_run(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    # Given a registered source
    code, (source,), _ = _cli(
        capsys,
        "source", "add", "demo", "--out", out,
        "--entry-url", site.url("/robots.txt"),
        "--schedule", "1d", "--per-host", "1", "--contact", "data@example.org",
    )  # fmt: skip
    assert code == 0
    assert source["hosts"] == [f"127.0.0.1:{site.port}"]
    assert source["schedule"] == "1d" and source["active_run"] is None

    # Bad registrations are refused with the reason
    code, _, err = _cli(
        capsys, "source", "add", "fast", "--out", out,
        "--entry-url", site.url("/robots.txt"), "--schedule", "5m",
    )  # fmt: skip
    assert code == 2 and "more often than every 15 minutes" in err
    code, _, err = _cli(capsys, "source", "add", "Bad Name", "--out", out, "--entry-url", "x")
    assert code == 2 and "source_id" in err
    code, _, err = _cli(
        capsys, "source", "add", "demo", "--out", out, "--entry-url", site.url("/robots.txt")
    )
    assert code == 2 and "exists" in err

    # When it is harvested by name
    code, _, _ = _cli(capsys, "harvest", "--source", "demo", "--out", out, "--allow-loopback")
    assert code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())

    # Then its run is finished, with counts equal to the per-URL outcomes
    code, (run,), _ = _cli(capsys, "run", "status", summary["run_id"], "--out", out)
    assert code == 0
    outcomes = [
        json.loads(line) for line in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()
    ]
    counts = Counter(o["outcome"] for o in outcomes)
    assert run["state"] == "finished" and run["source_id"] == "demo"
    assert run["entered"] == run["settled"] == len(outcomes) == summary["urls"]
    assert run["queued"] == 0 and run["sitemaps"] == 0
    assert {k: v for k, v in run["outcomes"].items() if v} == dict(counts)
    assert run["closed_at"]
    # the source is free again and remembers its last run
    code, (shown,), _ = _cli(capsys, "source", "show", "demo", "--out", out)
    assert shown["active_run"] is None and shown["last_run_id"] == summary["run_id"]
    code, listed, _ = _cli(capsys, "run", "list", "--source", "demo", "--out", out)
    assert [r["run_id"] for r in listed] == [summary["run_id"]]

    # A URL on a host the source is not registered for is refused, before anything is fetched
    code, _, err = _cli(
        capsys, "harvest", "--source", "demo", "https://elsewhere.example.org/sitemap.xml",
        "--out", out,
    )  # fmt: skip
    assert code == 2 and "not a host of source 'demo'" in err

    # Updating keeps what is not given; removing keeps the records
    code, (updated,), _ = _cli(capsys, "source", "update", "demo", "--out", out, "--schedule", "6h")
    assert updated["schedule"] == "6h" and updated["contact"] == "data@example.org"
    code, _, _ = _cli(capsys, "source", "remove", "demo", "--out", out)
    assert code == 0
    code, listed, _ = _cli(capsys, "source", "list", "--out", out)
    assert listed == []
    assert _cli(capsys, "source", "show", "demo", "--out", out)[0] == 1
    assert _cli(capsys, "run", "status", "no-such-run", "--out", out)[0] == 1


def test_schedule_harvests_only_due_sources(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    for name in ("daily", "ondemand"):
        _cli(
            capsys, "source", "add", name, "--out", out, "--entry-url", site.url("/robots.txt"),
            *(["--schedule", "1d"] if name == "daily" else []),
        )  # fmt: skip
    # The first tick harvests the scheduled source (never harvested yet), not the on-demand one
    code, (first,), _ = _cli(capsys, "schedule", "--out", out, "--allow-loopback", "--quiet")
    assert code == 0 and first["due"] == ["daily"] and len(first["runs"]) == 1
    # The next tick finds nothing due: the daily source ran moments ago
    code, (second,), _ = _cli(capsys, "schedule", "--out", out, "--allow-loopback", "--quiet")
    assert second == {"due": [], "runs": []}


def test_a_url_two_sitemaps_list_enters_the_run_once(tmp_path: Path) -> None:
    page = (
        b'<html><head><script type="application/ld+json">{"@context": "https://schema.org/",'
        b' "@type": "Dataset", "@id": "https://example.org/ds/1", "name": "Shared"}'
        b"</script></head><body></body></html>"
    )
    with LocalHTTPServer() as server:
        shared = server.url("/shared.html")
        server.route(
            "/robots.txt",
            body=f"Sitemap: {server.url('/a.xml')}\nSitemap: {server.url('/b.xml')}\n".encode(),
        )
        for name, extra in (("a", "/only-a.html"), ("b", "/only-b.html")):
            urls = "".join(f"<url><loc>{u}</loc></url>" for u in (shared, server.url(extra)))
            server.route(
                f"/{name}.xml",
                body=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}'
                f"</urlset>".encode(),
                headers=[("Content-Type", "application/xml")],
            )
        for path in ("/shared.html", "/only-a.html", "/only-b.html"):
            server.route(path, body=page, headers=[("Content-Type", "text/html")])

        with LocalHarvester(tmp_path / "out", allow_loopback=True) as harvester:
            summary = harvester.harvest(server.url("/robots.txt"))
            run = harvester.catalog.get_run(summary.run_id)

        # The shared page was fetched once, and counts once
        assert server.paths().count("/shared.html") == 1
    assert run is not None and run.state is RunState.FINISHED
    assert run.entered == run.settled == summary.urls == 3
    assert run.outcomes["record"] == 3
