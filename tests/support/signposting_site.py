"""A publisher site that uses every resolution pattern, for end-to-end tests (local and AWS).

It announces an ordinary sitemap (HTML pages) and, for ``User-agent: CDIF1.0``, a Signmap of
metadata files and Signposted resources. :data:`EXPECTED_PATTERNS` says which pattern each URL
must resolve by.
"""

from __future__ import annotations

import json

from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.records.extraction import find_jsonld_scripts

__all__ = ["EXPECTED_PATTERNS", "signposting_site"]

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


def signposting_site() -> PublisherSite:
    """A publisher using every resolution pattern (not started: use it as a context manager)."""
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
    return site
