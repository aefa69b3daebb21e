"""Every typed link kept as published, and conflicts settled, through a whole local harvest.

A publisher on 127.0.0.1 announces its metadata the ways FAIR Signposting allows and publishers
get slightly wrong: one target in two types, two profiles, a linkset in both forms, links
anchored at other resources, a cite-as that differs between the Link header and the HTML, a PID
that redirects to the landing page. Each record's report must list every link read (source, use)
and its views must carry the published targets exactly (decision 0065).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.support.signposting_site import HTML, JSONLD, NS, _page, _record

pytestmark = pytest.mark.network

CDIF = "https://w3id.org/cdif/core/1.0"
PAGES = [
    "/typed/page",
    "/profile/page",
    "/cite/page",
    "/anchor/page",
    "/ls/page",
    "/ls2/page",
    "/pid/x",
]


def _link(*values: str) -> tuple[str, str]:
    return ("Link", ", ".join(values))


def _site() -> PublisherSite:  # noqa: PLR0915 - one route after the other
    site = PublisherSite(None)
    site.add_route(
        "/sitemap.xml",
        headers={"Content-Type": "application/xml"},
        body=f"<urlset {NS}>"
        + "".join(f"<url><loc>{{{{BASE}}}}{p}</loc></url>" for p in PAGES)
        + "</urlset>",
    )
    # One target announced as Turtle and as JSON-LD.
    site.add_route(
        "/typed/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/typed/metadata>; rel="describedby"; type="text/turtle"',
                '<{{BASE}}/typed/metadata>; rel="describedby"; type="application/ld+json"',
            ),
        ],
        body=_page(),
    )
    site.add_route("/typed/metadata", headers=JSONLD, body=_record("typed"))
    # One target announced with two profiles, the CDIF one among several URIs.
    site.add_route(
        "/profile/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/profile/m.json>; rel="describedby"; type="application/ld+json"; '
                'profile="https://example.org/other"',
                '<{{BASE}}/profile/m.json>; rel="describedby"; type="application/ld+json"; '
                f'profile="https://example.org/x {CDIF}"',
            ),
        ],
        body=_page(),
    )
    site.add_route("/profile/m.json", headers=JSONLD, body=_record("profile"))
    # The header's cite-as and the HTML's differ by a fragment; two items differ only by theirs.
    site.add_route(
        "/cite/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link('<https://w3id.org/x/>; rel="cite-as"'),
        ],
        body=_page(
            '<link rel="cite-as" href="https://w3id.org/x/#different">'
            '<link rel="describedby" type="application/ld+json" href="/cite/metadata.json">'
            '<link rel="item" type="text/csv" href="/cite/data.csv#part1">'
            '<link rel="item" type="text/csv" href="/cite/data.csv#part2">'
        ),
    )
    site.add_route("/cite/metadata.json", headers=JSONLD, body=_record("cite"))
    # Links anchored at other resources, in the header and in the HTML, are not this page's.
    site.add_route(
        "/anchor/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/anchor/wrong.json>; rel="describedby"; type="application/ld+json"; '
                'anchor="{{BASE}}/anchor/other"'
            ),
        ],
        body=_page(
            '<link rel="describedby" type="application/ld+json" href="/anchor/wrong2.json" '
            'anchor="/anchor/other2">'
            '<link rel="describedby" type="application/ld+json" href="/anchor/right.json" '
            'anchor="/anchor/page">'
        ),
    )
    for name in ("wrong", "wrong2", "right"):
        site.add_route(f"/anchor/{name}.json", headers=JSONLD, body=_record(f"anchor-{name}"))
    # A linkset in both forms, at two URLs ...
    site.add_route(
        "/ls/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/ls/set.txt>; rel="linkset"; type="application/linkset"',
                '<{{BASE}}/ls/set.json>; rel="linkset"; type="application/linkset+json"',
            ),
        ],
        body=_page(),
    )
    site.add_route(
        "/ls/set.json",
        headers={"Content-Type": "application/linkset+json"},
        body=json.dumps(
            {
                "linkset": [
                    {
                        "anchor": "{{BASE}}/ls/page",
                        "describedby": [
                            {"href": "{{BASE}}/ls/metadata.json", "type": "application/ld+json"}
                        ],
                    }
                ]
            }
        ),
    )
    site.add_route(
        "/ls/set.txt",
        headers={"Content-Type": "application/linkset"},
        body='<{{BASE}}/ls/metadata.json>; rel="describedby"; type="application/ld+json"; '
        'anchor="{{BASE}}/ls/page"\n',
    )
    site.add_route("/ls/metadata.json", headers=JSONLD, body=_record("ls"))
    # ... and at one URL, the text form announced first.
    site.add_route(
        "/ls2/page",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/ls2/set>; rel="linkset"; type="application/linkset"',
                '<{{BASE}}/ls2/set>; rel="linkset"; type="application/linkset+json"',
            ),
        ],
        body=_page(),
    )
    site.add_route(
        "/ls2/set",
        headers={"Content-Type": "application/linkset+json"},
        body=json.dumps(
            {
                "linkset": [
                    {
                        "anchor": "{{BASE}}/ls2/page",
                        "describedby": [
                            {"href": "{{BASE}}/ls2/metadata.json", "type": "application/ld+json"}
                        ],
                    }
                ]
            }
        ),
    )
    site.add_route("/ls2/metadata.json", headers=JSONLD, body=_record("ls2"))
    # A PID that redirects to the landing page, whose Link header (anchored at the PID) counts.
    site.add_route("/pid/x", status=302, headers={"Location": "{{BASE}}/landing/x"})
    site.add_route(
        "/landing/x",
        headers=[
            ("Content-Type", HTML["Content-Type"]),
            _link(
                '<{{BASE}}/pid/md.json>; rel="describedby"; type="application/ld+json"; '
                'anchor="{{BASE}}/pid/x"',
                '<{{BASE}}/pid/x>; rel="cite-as"',
            ),
        ],
        body=_page(),
    )
    site.add_route("/pid/md.json", headers=JSONLD, body=_record("pid"))
    return site


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PublisherSite, Path]]:
    out = tmp_path_factory.mktemp("links") / "out"
    with _site() as site, LocalHarvester(out, allow_loopback=True) as harvester:
        harvester.harvest(site.url("/sitemap.xml"))
        yield site, out


def _outcome(harvested: tuple[PublisherSite, Path], path: str) -> dict[str, Any]:
    site, out = harvested
    for line in (out / "outcomes.jsonl").read_text().splitlines():
        outcome = json.loads(line)
        if outcome["url"] == site.url(path):
            assert isinstance(outcome, dict)
            return outcome
    raise AssertionError(f"no outcome for {path}")


def _only_record(harvested: tuple[PublisherSite, Path], path: str) -> dict[str, Any]:
    outcome = _outcome(harvested, path)
    assert outcome["outcome"] == "record", outcome
    (record,) = outcome["records"]
    assert isinstance(record, dict)
    return record


def _report(harvested: tuple[PublisherSite, Path], path: str) -> dict[str, Any]:
    report = json.loads((harvested[1] / _only_record(harvested, path)["report"]).read_text())
    assert isinstance(report, dict)
    return report


def _view_text(harvested: tuple[PublisherSite, Path], path: str, view: str) -> str:
    """The view as ``cdif-harvest view`` prints it (views are made on read, not stored)."""
    record = _only_record(harvested, path)
    assert "views" not in record
    printed = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with redirect_stdout(printed):
        assert main(["view", "--out", str(harvested[1]), record["record_id"], "--view", view]) == 0
    printed.flush()
    buffer = printed.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def _view(harvested: tuple[PublisherSite, Path], path: str, view: str) -> Any:
    return json.loads(_view_text(harvested, path, view))


def _read(report: dict[str, Any], rel: str) -> list[tuple[Any, ...]]:
    return [
        (link["href"], link.get("type"), link.get("profile"), link["found_in"], link.get("used"))
        for link in report["provenance"]["links"]
        if link["rel"] == rel
    ]


def _gets(site: PublisherSite) -> list[str]:
    return [target for method, target, _ in site.requests if method == "GET"]


def test_a_target_in_two_types_is_two_links_and_the_json_ld_one_is_used(harvested: Any) -> None:
    site, _ = harvested
    assert _outcome(harvested, "/typed/page")["pattern"] == "http-link"
    assert _read(_report(harvested, "/typed/page"), "describedby") == [
        (site.url("/typed/metadata"), "text/turtle", None, "http-header", False),
        (site.url("/typed/metadata"), "application/ld+json", None, "http-header", True),
    ]


def test_a_target_with_two_profiles_is_two_links_and_the_cdif_one_is_used(harvested: Any) -> None:
    site, _ = harvested
    target = site.url("/profile/m.json")
    assert _read(_report(harvested, "/profile/page"), "describedby") == [
        (target, "application/ld+json", "https://example.org/other", "http-header", False),
        (target, "application/ld+json", f"https://example.org/x {CDIF}", "http-header", True),
    ]
    linkset = json.dumps(_view(harvested, "/profile/page", "linkset-json"))
    assert "https://example.org/other" in linkset and "https://example.org/x" in linkset


def test_a_cite_as_conflict_is_a_warning_and_the_header_wins(harvested: Any) -> None:
    report = _report(harvested, "/cite/page")
    assert _outcome(harvested, "/cite/page")["pattern"] == "html-link"
    (warning,) = [w for w in report["warnings"] if w["keyword"] == "conflicting-links"]
    assert "https://w3id.org/x/#different" in warning["message"]
    assert "the HTTP Link header is more authoritative" in warning["message"]
    cites = [
        (link["href"], link["found_in"], link.get("used"), link.get("ignored"))
        for link in report["provenance"]["links"]
        if link["rel"] == "cite-as"
    ]
    assert cites == [
        ("https://w3id.org/x/", "http-header", True, None),
        ("https://w3id.org/x/#different", "html", False, "overruled"),
    ]
    # The views carry the header's cite-as and not the overruled one; fragments as published.
    header = _view_text(harvested, "/cite/page", "link-header")
    assert "<https://w3id.org/x/>" in header and "#different" not in header
    site, _ = harvested
    for part in ("part1", "part2"):
        assert f"<{site.url('/cite/data.csv')}#{part}>" in header


def test_links_anchored_at_other_resources_are_not_this_pages(harvested: Any) -> None:
    site, _ = harvested
    record = _only_record(harvested, "/anchor/page")
    assert _outcome(harvested, "/anchor/page")["pattern"] == "html-link"
    assert record["resource_id"] == site.url("/resource/anchor-right")
    gets = _gets(site)
    assert "/anchor/wrong.json" not in gets and "/anchor/wrong2.json" not in gets
    report = _report(harvested, "/anchor/page")
    ignored = {
        link["href"]: link.get("ignored")
        for link in report["provenance"]["links"]
        if link["rel"] == "describedby"
    }
    assert ignored == {
        site.url("/anchor/wrong.json"): "anchor",
        site.url("/anchor/wrong2.json"): "anchor",
        site.url("/anchor/right.json"): None,
    }


def test_a_linkset_in_both_forms_at_two_urls_is_read_in_json_only(harvested: Any) -> None:
    site, _ = harvested
    assert _outcome(harvested, "/ls/page")["pattern"] == "linkset"
    assert "/ls/set.txt" not in _gets(site)
    assert _read(_report(harvested, "/ls/page"), "linkset") == [
        (site.url("/ls/set.txt"), "application/linkset", None, "http-header", False),
        (site.url("/ls/set.json"), "application/linkset+json", None, "http-header", True),
    ]


def test_a_linkset_in_both_forms_at_one_url_is_asked_for_in_json(harvested: Any) -> None:
    site, _ = harvested
    assert _outcome(harvested, "/ls2/page")["pattern"] == "linkset"
    accepts = [
        headers.get("accept") for _, target, headers in site.requests if target == "/ls2/set"
    ]
    assert accepts == ["application/linkset+json"]
    assert _read(_report(harvested, "/ls2/page"), "linkset") == [
        (site.url("/ls2/set"), "application/linkset", None, "http-header", False),
        (site.url("/ls2/set"), "application/linkset+json", None, "http-header", True),
    ]


def test_a_redirecting_pid_finds_the_link_header_of_its_landing_page(harvested: Any) -> None:
    site, _ = harvested
    assert _outcome(harvested, "/pid/x")["pattern"] == "http-link"
    report = _report(harvested, "/pid/x")
    assert _read(report, "describedby") == [
        (site.url("/pid/md.json"), "application/ld+json", None, "http-header", True)
    ]
    header = _view_text(harvested, "/pid/x", "link-header")
    assert f'<{site.url("/pid/x")}> ; rel="cite-as"' in header
