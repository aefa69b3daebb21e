"""A whole local harvest of a publisher that uses every resolution pattern, through to records.

The site announces an ordinary sitemap (HTML pages) and, for ``User-agent: CDIF1.0``, a Signmap
of metadata files and Signposted resources. Every URL must end as a record made from the
document its pattern points to, with the links the resolver saw kept in the record's views.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.extraction import find_jsonld_scripts

pytestmark = pytest.mark.network

NS = (
    'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
    'xmlns:rs="http://www.openarchives.org/rs/terms/"'
)
JSONLD = {"Content-Type": "application/ld+json"}
HTML = {"Content-Type": "text/html; charset=utf-8"}
DOI = "https://doi.org/10.5072/toda.ctd.2021"


def _record(name: str) -> str:
    """A valid CDIF record (the demo's), renamed, with its resource on the site itself."""
    page = (demo_site_dir() / "datasets" / "north-atlantic-ctd-2021.html").read_bytes()
    text = next(iter(find_jsonld_scripts(page))).text
    text = text if isinstance(text, str) else text.decode()
    text = text.replace(DOI, "{{BASE}}/resource/" + name)
    text = text.replace("{{BASE}}/metadata/north-atlantic-ctd-2021", "{{BASE}}/metadata/" + name)
    return text


def _page(head: str = "", body: str = "") -> str:
    return f"<!doctype html><html><head><title>p</title>{head}</head><body>{body}</body></html>"


EXPECTED_PATTERNS = {
    "/files/ct.json": "content-type",
    "/files/list.json": "item-list",
    "/resource/hl": "http-link",
    "/resource/ls": "linkset",
    "/resource/sm": "signmap",
    "/pages/script.html": "embedded-script",
    "/pages/link.html": "html-link",
    "/pages/meta.html": "html-meta",
}


@pytest.fixture
def signposting_site() -> Iterator[PublisherSite]:
    site = PublisherSite(None)
    site.add_route(
        "/robots.txt",
        headers={"Content-Type": "text/plain"},
        body=(
            "User-agent: *\nAllow: /\nSitemap: {{BASE}}/sitemap.xml\n\n"
            "User-agent: CDIF1.0\nAllow: /\nSitemap: {{BASE}}/cdif-signmap.xml\n"
        ),
    )
    pages = ["/pages/script.html", "/pages/link.html", "/pages/meta.html"]
    site.add_route(
        "/sitemap.xml",
        headers={"Content-Type": "application/xml"},
        body=f"<urlset {NS}>"
        + "".join(f"<url><loc>{{{{BASE}}}}{p}</loc></url>" for p in pages)
        + "</urlset>",
    )
    signmap_entries = "".join(
        f"<url><loc>{{{{BASE}}}}{p}</loc></url>"
        for p in ("/files/ct.json", "/files/list.json", "/resource/hl", "/resource/ls")
    ) + (
        "<url><loc>{{BASE}}/resource/sm</loc>"
        '<rs:ln rel="describedby" href="{{BASE}}/files/sm.json" type="application/ld+json" '
        'profile="https://w3id.org/cdif/core/1.0"/>'
        '<rs:ln rel="cite-as" href="https://doi.org/10.5072/sm"/></url>'
    )
    site.add_route(
        "/cdif-signmap.xml",
        headers={"Content-Type": "application/xml"},
        body=f"<urlset {NS}>{signmap_entries}</urlset>",
    )
    cdif = {"Content-Type": 'application/ld+json; profile="CDIF1.0"'}
    site.add_route("/files/ct.json", headers=cdif, body=_record("ct"))
    items = [json.loads(_record(f"item{i}").replace("{{BASE}}", "http://x")) for i in (1, 2)]
    site.add_route(
        "/files/list.json",
        headers={"Content-Type": 'application/ld+json; profile="CDIF-list-1.0"'},
        body=json.dumps(
            {"@context": "https://schema.org/", "@type": "ItemList", "itemListElement": items}
        ).replace("http://x", "{{BASE}}"),
    )
    site.add_route(
        "/resource/hl",
        headers=[
            ("Content-Type", "application/x-netcdf"),
            ("Link", '</files/hl.json>; rel="describedby"; type="application/ld+json"'),
            ("Link", '<https://doi.org/10.5072/hl>; rel="cite-as"'),
        ],
        body=b"CDF\x01" + b"\0" * 1000,
    )
    site.add_route("/files/hl.json", headers=JSONLD, body=_record("hl"))
    site.add_route(
        "/resource/ls",
        headers=[("Content-Type", "image/tiff"), ("Link", '</ls.json>; rel="linkset"')],
        body=b"II*\0",
    )
    site.add_route(
        "/ls.json",
        headers={"Content-Type": "application/linkset+json"},
        body=json.dumps(
            {
                "linkset": [
                    {
                        "anchor": "{{BASE}}/resource/ls",
                        "describedby": [{"href": "/files/ls.json", "type": "application/ld+json"}],
                        "author": [{"href": "https://orcid.org/0000-0002-1825-0097"}],
                    }
                ]
            }
        ),
    )
    site.add_route("/files/ls.json", headers=JSONLD, body=_record("ls"))
    site.add_route("/files/sm.json", headers=JSONLD, body=_record("sm"))
    site.add_route(
        "/pages/script.html",
        headers=HTML,
        body=_page(f'<script type="application/ld+json">{_record("script")}</script>'),
    )
    site.add_route(
        "/pages/link.html",
        headers=HTML,
        body=_page('<link rel="describedby" href="/files/link.json" type="application/ld+json">'),
    )
    site.add_route("/files/link.json", headers=JSONLD, body=_record("link"))
    site.add_route(
        "/pages/meta.html",
        headers=HTML,
        body=_page(
            '<meta name="DC.title" content="Harbour soundings">'
            '<meta name="DC.creator" content="Doe, Jane">'
            '<meta name="DC.identifier" content="doi:10.5072/meta">'
        ),
    )
    with site:
        yield site


def _lines(out: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    return {str(line["url"]): line for line in lines}


def test_every_pattern_ends_in_records(signposting_site: PublisherSite, tmp_path: Path) -> None:
    site = signposting_site
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
    linkset = json.loads((out / hl["views"]["linkset-json"]).read_text())
    assert "https://doi.org/10.5072/hl" in json.dumps(linkset)
    (ls,) = by_path["/resource/ls"]["records"]
    linkset = json.loads((out / ls["views"]["linkset-json"]).read_text())
    assert "https://orcid.org/0000-0002-1825-0097" in json.dumps(linkset)

    # The record built from <meta> tags says where it came from.
    (meta,) = by_path["/pages/meta.html"]["records"]
    report = json.loads((out / meta["report"]).read_text())
    assert report["provenance"]["via"] == "html-meta"
    assert any("discourages" in note for note in report["provenance"]["resolution_notes"])
