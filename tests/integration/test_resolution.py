"""Resolution against publisher sites served on 127.0.0.1: every pattern and every rule.

Each test scripts real HTTP answers (status, repeated headers, bodies), runs the resolver stage
with the real safe fetcher, and checks the pattern, the documents handed on (as stored), the
links kept and, from the server's request log, what was (not) requested.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    MAX_MESSAGE_BYTES,
    RENDER_QUEUE,
    DocumentJob,
    UrlJob,
    decode,
)
from cdif_harvester.errors import BodyTooLarge, FetchFailed
from cdif_harvester.model import FetchResponse, Outcome, TypedLink, UrlOutcome
from cdif_harvester.ports import RenderedPage
from cdif_harvester.stages.extract import document_body
from cdif_harvester.stages.jobs import run_job
from cdif_harvester.stages.resolve import HttpStatusError, resolve_url
from cdif_harvester.wiring import Wiring
from tests.support.httpserver import LocalHTTPServer, Route, SeenRequest

pytestmark = pytest.mark.network

JSONLD = "application/ld+json"
CDIF_JSONLD = 'application/ld+json; profile="CDIF1.0"'
HTML = "text/html; charset=utf-8"


def dataset(identifier: str, name: str = "A dataset", **extra: Any) -> bytes:
    """A small schema.org Dataset document."""
    node = {"@context": "https://schema.org/", "@type": "Dataset", "@id": identifier, "name": name}
    node.update(extra)
    return json.dumps(node).encode("utf-8")


def page(head: str = "", body: str = "<p>A landing page.</p>") -> bytes:
    html = f"<!doctype html><html><head><title>t</title>{head}</head><body>{body}</body></html>"
    return html.encode()


def script(document: bytes, profile: str | None = None) -> str:
    attribute = f' profile="{profile}"' if profile else ""
    return f'<script type="application/ld+json"{attribute}>{document.decode()}</script>'


@dataclass
class Harness:
    """A publisher server, the resolver's wiring around the real fetcher, and helpers."""

    server: LocalHTTPServer
    wiring: Wiring
    queue: InProcessQueue
    store: DirectoryObjectStore

    def url(self, path: str) -> str:
        return self.server.url(path)

    def job(self, path: str, **fields: Any) -> UrlJob:
        return UrlJob(run_id="run-1", source="127.0.0.1", url=self.url(path), **fields)

    def resolve(self, path: str, **fields: Any) -> DocumentJob | UrlOutcome:
        result = run_job(self.wiring, self.job(path, **fields), resolve_url)
        assert isinstance(result, DocumentJob | UrlOutcome)
        return result

    def resolved(self, path: str, **fields: Any) -> DocumentJob:
        """Resolve and return the DocumentJob that reached the document queue."""
        result = self.resolve(path, **fields)
        assert isinstance(result, DocumentJob), result
        body = self.queue.receive(DOCUMENT_QUEUE)
        assert body is not None
        sent = decode(body, DocumentJob)
        assert sent == result
        return sent

    def document(self, job: DocumentJob, index: int = 0) -> Any:
        return json.loads(self.body(job, index))

    def body(self, job: DocumentJob, index: int = 0) -> bytes:
        """The bytes of a document as the extractor reads them (from the message by default)."""
        return document_body(self.wiring, job.documents[index])

    def requests(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.server.requests if method is None or r.method == method]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    with LocalHTTPServer() as server, SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher:
        queue = InProcessQueue()
        store = DirectoryObjectStore(tmp_path / "out")
        catalog = SqliteCatalog(tmp_path / "catalog.sqlite")
        wiring = Wiring(
            store=store, catalog=catalog, queue=queue, fetcher=fetcher, clock=SystemClock()
        )
        yield Harness(server, wiring, queue, store)
        catalog.close()


def rels(job: DocumentJob) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for link in job.links:
        found.setdefault(link.rel, []).append(link.href)
    return found


# --- the URL is the metadata -------------------------------------------------------------------


def test_content_type_with_cdif_profile(harness: Harness) -> None:
    harness.server.route(
        "/meta.json",
        headers=[("Content-Type", CDIF_JSONLD)],
        body=dataset(harness.url("/meta.json")),
    )
    job = harness.resolved("/meta.json", cdif_agent=True)
    assert job.pattern == "content-type"
    assert [ref.via for ref in job.documents] == ["self"]
    assert harness.document(job)["name"] == "A dataset"
    # A CDIF1.0 sitemap's URL gets a HEAD first, then the GET of the metadata.
    assert [(r.method, r.path) for r in harness.server.requests] == [
        ("HEAD", "/meta.json"),
        ("GET", "/meta.json"),
    ]


def test_item_list_is_handed_on_whole(harness: Harness) -> None:
    items = {
        "@context": "https://schema.org/",
        "@type": "ItemList",
        "itemListElement": [
            json.loads(dataset("urn:e:d1", "one")),
            json.loads(dataset("urn:e:d2", "two")),
        ],
    }
    harness.server.route(
        "/list.json",
        headers=[("Content-Type", "application/ld+json; profile='CDIF-list-1.0'")],
        body=json.dumps(items).encode(),
    )
    job = harness.resolved("/list.json")
    assert job.pattern == "item-list"
    assert len(harness.document(job)["itemListElement"]) == 2


# --- HTTP Link headers -------------------------------------------------------------------------


def test_http_link_describedby_prefers_cdif_profile_and_never_fetches_xml(
    harness: Harness,
) -> None:
    s = harness.server
    s.route(
        "/landing",
        headers=[
            ("Content-Type", HTML),
            ("Link", '</meta.xml>; rel="describedby"; type="application/xml"'),
            (
                "Link",
                '</plain.json>; rel="describedby"; type="application/ld+json", '
                '</cdif.json>; rel="describedby"; type="application/ld+json"; profile="CDIF1.0"',
            ),
            ("Link", '<https://doi.org/10.1234/abc>; rel="cite-as"'),
            ("Link", '<https://spdx.org/licenses/CC-BY-4.0>; rel="license"'),
        ],
        body=page(script(dataset("urn:e:in-page"))),
    )
    s.route("/cdif.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:c"))
    s.route("/plain.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:p"))
    job = harness.resolved("/landing")
    # Headers outrank the embedded script; the CDIF profile outranks plain JSON-LD.
    assert job.pattern == "http-link"
    assert [ref.url for ref in job.documents] == [harness.url("/cdif.json")]
    assert [ref.via for ref in job.documents] == ["describedby"]
    assert "/meta.xml" not in harness.requests() and "/plain.json" not in harness.requests()
    kept = rels(job)
    assert kept["cite-as"] == ["https://doi.org/10.1234/abc"]
    assert kept["license"] == ["https://spdx.org/licenses/CC-BY-4.0"]
    assert set(kept["describedby"]) == {
        harness.url("/meta.xml"),
        harness.url("/plain.json"),
        harness.url("/cdif.json"),
    }
    cdif = next(link for link in job.links if link.href.endswith("/cdif.json"))
    assert (cdif.type, cdif.profile, cdif.found_in) == (JSONLD, "CDIF1.0", "http-header")


def test_head_decides_without_downloading_the_resource(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/data.zip",
        headers=[
            ("Content-Type", "application/zip"),
            ("Link", '</data.json>; rel="describedby"; type="application/ld+json"'),
        ],
        body=b"PK" + b"\0" * 200_000,
    )
    s.route("/data.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:z"))
    job = harness.resolved("/data.zip", cdif_agent=True)
    assert job.pattern == "http-link"
    assert harness.requests("GET") == ["/data.json"]
    assert harness.requests("HEAD") == ["/data.zip"]


def test_large_body_is_never_read_but_its_headers_count(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/huge",
        headers=[
            ("Content-Type", "application/octet-stream"),
            ("Link", '</huge.json>; rel="describedby"; type="application/ld+json"'),
        ],
        body=lambda: iter([b"\0" * 1_000_000] * 64),
        content_length=64_000_000,
    )
    s.route("/huge.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:h"))
    job = harness.resolved("/huge")
    assert job.pattern == "http-link"
    assert any("only its headers were read" in note for note in job.notes)


def test_sloppy_link_headers_are_repaired_and_noted(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/sloppy",
        headers=[
            ("Content-Type", HTML),
            ("LINK", "/s.json; REL=describedby; type='application/ld+json'; profile=CDIF1.0"),
        ],
        body=page(),
    )
    s.route("/s.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:s"))
    job = harness.resolved("/sloppy")
    assert job.pattern == "http-link"
    assert job.documents[0].url == harness.url("/s.json")
    assert job.notes == (
        "link-header: missing angle brackets around /s.json repaired",
        "link-header: single-quoted value of parameter type repaired",
    )  # each repair noted once


def test_legacy_meta_forward_link_in_header(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/old",
        headers=[("Content-Type", HTML), ("Link", '</old-meta.json>; rel="meta"; scheme="CDIF"')],
        body=page(),
    )
    s.route("/old-meta.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:o"))
    job = harness.resolved("/old")
    assert job.pattern == "legacy-meta"
    assert [ref.via for ref in job.documents] == ["meta"]
    meta = next(link for link in job.links if link.rel == "meta")
    assert (meta.scheme, meta.reverse) == ("CDIF", False)


# --- HTML --------------------------------------------------------------------------------------


def test_embedded_scripts_several_blocks(harness: Harness) -> None:
    blocks = (
        script(dataset("urn:e:a"), "CDIF1.0")
        + script(b'{"@context": "https://schema.org/", "@type": "WebSite", "name": "x"}')
        + script(dataset("urn:e:b"))
    )
    harness.server.route("/page", headers=[("Content-Type", HTML)], body=page(blocks))
    job = harness.resolved("/page")
    assert job.pattern == "embedded-script"
    assert [ref.media_type for ref in job.documents] == ["text/html"]
    # the page travels as its three blocks, read here (decision 0101), not as the page
    assert job.documents[0].body is None and job.documents[0].staged_key is None
    (scripts,) = job.scripts
    assert scripts.key == job.documents[0].key
    assert [(b.index, b.profile) for b in scripts.blocks] == [(0, "CDIF1.0"), (1, None), (2, None)]
    assert "urn:e:b" in scripts.blocks[2].text


def test_a_page_whose_json_ld_is_too_large_for_its_message_waits_whole_in_staging(
    harness: Harness,
) -> None:
    big = dataset("urn:e:huge", "Huge", description="x" * (MAX_MESSAGE_BYTES + 1000))
    body = page(script(big))
    harness.server.route("/huge", headers=[("Content-Type", HTML)], body=body)
    job = harness.resolved("/huge")
    assert job.pattern == "embedded-script"
    (ref,) = job.documents
    # its blocks would not fit: the page itself is staged, as any large body is
    assert job.scripts == ()
    assert ref.staged_key is not None and ref.staged_key.startswith("staging/run-1/")
    assert harness.body(job) == body


def test_html_link_describedby_resolved_against_base(harness: Harness) -> None:
    s = harness.server
    head = (
        '<base href="/records/">'
        '<link rel="describedby" href="r1.json" type="application/ld+json">'
        '<link rel="cite-as" href="https://doi.org/10.1/r1">'
    )
    s.route("/landing-html", headers=[("Content-Type", HTML)], body=page(head))
    s.route("/records/r1.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:r1"))
    job = harness.resolved("/landing-html")
    assert job.pattern == "html-link"
    assert job.documents[0].url == harness.url("/records/r1.json")
    assert rels(job)["cite-as"] == ["https://doi.org/10.1/r1"]
    html_link = next(link for link in job.links if link.rel == "describedby")
    assert html_link.found_in == "html"


def test_legacy_meta_in_html(harness: Harness) -> None:
    s = harness.server
    head = '<link rel="meta" href="/m.json" scheme="DC">'
    s.route("/old-html", headers=[("Content-Type", HTML)], body=page(head))
    s.route("/m.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:m"))
    job = harness.resolved("/old-html")
    assert job.pattern == "legacy-meta"


def test_html_meta_is_the_last_resort(harness: Harness) -> None:
    head = (
        '<meta name="DC.title" content="Ocean temperatures">'
        '<meta name="DC.creator" content="Doe, Jane">'
        '<meta name="DC.identifier" content="doi:10.5555/ocean">'
    )
    harness.server.route("/dc", headers=[("Content-Type", HTML)], body=page(head))
    job = harness.resolved("/dc")
    assert job.pattern == "html-meta"
    record = harness.document(job)
    assert record["name"] == "Ocean temperatures"
    assert job.documents[0].media_type == JSONLD
    assert any("discourages" in note for note in job.notes)
    # Content negotiation was tried before falling back to <meta>.
    assert len(harness.requests("GET")) == 2


# --- linksets ----------------------------------------------------------------------------------


def test_linkset_json_only_links_anchored_at_the_resource(harness: Harness) -> None:
    s = harness.server
    landing = harness.url("/item")
    linkset = {
        "linkset": [
            {
                "anchor": landing,
                "describedby": [{"href": "/item.json", "type": "application/ld+json"}],
                "cite-as": [{"href": "https://doi.org/10.9/item"}],
            },
            {
                "anchor": harness.url("/other"),
                "describedby": [{"href": "/other.json", "type": "application/ld+json"}],
            },
        ]
    }
    s.route(
        "/item",
        headers=[
            ("Content-Type", HTML),
            ("Link", '</ls.json>; rel="linkset"; type="application/linkset+json"'),
        ],
        body=page(),
    )
    s.route(
        "/ls.json",
        headers=[("Content-Type", "application/linkset+json")],
        body=json.dumps(linkset).encode(),
    )
    s.route("/item.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:item"))
    s.route("/other.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:x"))
    job = harness.resolved("/item")
    assert job.pattern == "linkset"
    assert [ref.url for ref in job.documents] == [harness.url("/item.json")]
    assert "/other.json" not in harness.requests()
    assert rels(job)["cite-as"] == ["https://doi.org/10.9/item"]
    assert any("anchored at other resources" in note for note in job.notes)


def test_linkset_text_from_html_link(harness: Harness) -> None:
    s = harness.server
    landing = harness.url("/t")
    text = (
        f'<{harness.url("/t.json")}>; rel="describedby"; type="application/ld+json"; '
        f'anchor="{landing}",\n'
        f'<https://orcid.org/0000-0002-1825-0097>; rel="author"; anchor="{landing}"'
    )
    s.route("/t", headers=[("Content-Type", HTML)], body=page('<link rel="linkset" href="/t.ls">'))
    s.route("/t.ls", headers=[("Content-Type", "application/linkset")], body=text.encode())
    s.route("/t.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:t"))
    job = harness.resolved("/t")
    assert job.pattern == "linkset"
    assert rels(job)["author"] == ["https://orcid.org/0000-0002-1825-0097"]


# --- Signmap -----------------------------------------------------------------------------------


def test_signmap_links_skip_the_landing_page(harness: Harness) -> None:
    harness.server.route("/sm.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:sm"))
    links = (
        TypedLink(
            href=harness.url("/sm.json"),
            rel="describedby",
            type=JSONLD,
            profile="https://w3id.org/cdif/core/1.0",
            found_in="signmap",
        ),
        TypedLink(href="https://doi.org/10.7/sm", rel="cite-as", found_in="signmap"),
    )
    job = harness.resolved("/never-fetched", links=links)
    assert job.pattern == "signmap"
    assert harness.requests() == ["/sm.json"]
    assert rels(job)["cite-as"] == ["https://doi.org/10.7/sm"]


# --- content negotiation and format parameter ------------------------------------------------


def _negotiating(request: SeenRequest) -> Route:
    if "application/ld+json" in (request.header("accept") or ""):
        return Route(headers=[("Content-Type", JSONLD)], body=dataset("urn:e:cn"))
    return Route(headers=[("Content-Type", HTML)], body=page())


def test_content_negotiation(harness: Harness) -> None:
    harness.server.route("/cn", respond=_negotiating)
    job = harness.resolved("/cn")
    assert job.pattern == "content-negotiation"
    assert harness.document(job)["@id"] == "urn:e:cn"


def test_content_negotiation_answered_with_html_is_not_metadata(harness: Harness) -> None:
    harness.server.route("/plain", headers=[("Content-Type", HTML)], body=page())
    result = harness.resolve("/plain")
    assert isinstance(result, UrlOutcome)
    assert result.outcome is Outcome.NO_METADATA
    assert "content negotiation" in (result.reason or "")


def _format_server(request: SeenRequest) -> Route:
    if "format=CDIF1.0" in request.path:
        return Route(headers=[("Content-Type", JSONLD)], body=dataset("urn:e:fp"))
    return Route(headers=[("Content-Type", "application/xml")], body=b"<record/>")


def test_format_parameter_when_the_source_says_so(harness: Harness) -> None:
    harness.server.route("/csw", respond=_format_server)
    job = harness.resolved("/csw?id=7", options={"format_parameter": "format=CDIF1.0"})
    assert job.pattern == "format-parameter"
    assert harness.requests() == ["/csw?id=7&format=CDIF1.0"]


# --- statuses and redirects --------------------------------------------------------------------


def test_redirect_chain_then_link_relative_to_the_final_url(harness: Harness) -> None:
    s = harness.server
    s.route("/doi/1", status=302, headers=[("Location", "/hop")])
    s.route("/hop", status=301, headers=[("Location", "/final/landing")])
    s.route(
        "/final/landing",
        headers=[
            ("Content-Type", HTML),
            ("Link", '<meta.json>; rel="describedby"; type="application/ld+json"'),
        ],
        body=page(),
    )
    s.route("/final/meta.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:f"))
    job = harness.resolved("/doi/1")
    assert job.pattern == "http-link"
    assert job.documents[0].url == harness.url("/final/meta.json")


def test_tombstone_410_links_still_read(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/gone",
        status=410,
        headers=[
            ("Content-Type", HTML),
            ("Link", '</gone.json>; rel="describedby"; type="application/ld+json"'),
        ],
        body=page(),
    )
    s.route("/gone.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:e:g"))
    job = harness.resolved("/gone")
    assert job.pattern == "http-link"
    assert any("410" in note for note in job.notes)


def test_tombstone_without_links_is_no_metadata(harness: Harness) -> None:
    harness.server.route("/gone2", status=410, headers=[("Content-Type", HTML)], body=page())
    result = harness.resolve("/gone2")
    assert isinstance(result, UrlOutcome)
    assert result.outcome is Outcome.NO_METADATA
    assert "410" in (result.reason or "")


def test_204_and_203_are_read(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/nc",
        status=204,
        headers=[("Link", '</nc.json>; rel="describedby"; type="application/ld+json"')],
    )
    s.route("/nc.json", status=203, headers=[("Content-Type", JSONLD)], body=dataset("urn:e:nc"))
    job = harness.resolved("/nc")
    assert job.pattern == "http-link"


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_5xx_are_retried_with_retry_after(harness: Harness, status: int) -> None:
    harness.server.route("/busy", status=status, headers=[("Retry-After", "7")], body=b"busy")
    with pytest.raises(FetchFailed) as caught:
        resolve_url(harness.wiring, harness.job("/busy"))
    assert caught.value.retry_after == 7
    assert caught.value.reason == f"http-{status}"


def test_404_is_recorded(harness: Harness) -> None:
    with pytest.raises(HttpStatusError):
        resolve_url(harness.wiring, harness.job("/missing"))


def test_head_refused_falls_back_to_get(harness: Harness) -> None:
    def no_head(request: SeenRequest) -> Route:
        if request.method == "HEAD":
            return Route(status=405)
        return Route(headers=[("Content-Type", CDIF_JSONLD)], body=dataset("urn:e:nh"))

    harness.server.route("/nohead.json", respond=no_head)
    job = harness.resolved("/nohead.json", cdif_agent=True)
    assert job.pattern == "content-type"
    assert any("HEAD answered 405" in note for note in job.notes)


def test_conflicting_cite_as_is_a_warning(harness: Harness) -> None:
    s = harness.server
    s.route(
        "/two-cites",
        headers=[
            ("Content-Type", HTML),
            (
                "Link",
                '<https://doi.org/10.1/a>; rel="cite-as", <https://doi.org/10.1/b>; rel="cite-as"',
            ),
        ],
        body=page(script(dataset("urn:e:tc"))),
    )
    job = harness.resolved("/two-cites")
    assert any(note.startswith("conflicting cite-as") for note in job.notes)


# --- anti-spoofing -----------------------------------------------------------------------------


@pytest.fixture
def other_origin() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as server:
        yield server


def test_spoofed_claim_is_not_authoritative_and_the_forward_metadata_wins(
    harness: Harness, other_origin: LocalHTTPServer
) -> None:
    resource = other_origin.url("/dataset/1")
    other_origin.route(
        "/dataset/1",
        headers=[
            ("Content-Type", HTML),
            ("Link", '</dataset/1.json>; rel="describedby"; type="application/ld+json"'),
        ],
        body=page(),
    )
    other_origin.route(
        "/dataset/1.json",
        headers=[("Content-Type", JSONLD)],
        body=dataset(resource, "The real one", url=resource),
    )
    harness.server.route(
        "/claim.json",
        headers=[("Content-Type", CDIF_JSONLD)],
        body=dataset(resource, "A forged one", url=resource),
    )
    job = harness.resolved("/claim.json")
    assert job.pattern == "content-type"
    verdicts = [(ref.url, ref.authority) for ref in job.documents]
    assert verdicts == [
        (other_origin.url("/dataset/1.json"), "authoritative"),
        (harness.url("/claim.json"), "not-authoritative"),
    ]
    assert any("not authoritative" in note for note in job.notes)


def test_claim_confirmed_by_the_resource_is_authoritative(
    harness: Harness, other_origin: LocalHTTPServer
) -> None:
    resource = other_origin.url("/dataset/2")
    claim = harness.url("/claim2.json")
    other_origin.route(
        "/dataset/2",
        headers=[("Content-Type", HTML)],
        body=page(f'<link rel="describedby" href="{claim}" type="application/ld+json">'),
    )
    harness.server.route(
        "/claim2.json", headers=[("Content-Type", JSONLD)], body=dataset(resource, url=resource)
    )
    job = harness.resolved("/claim2.json")
    assert [ref.authority for ref in job.documents] == ["authoritative"]


def test_claim_by_reverse_link_on_a_silent_resource_is_unverified(
    harness: Harness, other_origin: LocalHTTPServer
) -> None:
    resource = other_origin.url("/silent")
    other_origin.route("/silent", headers=[("Content-Type", HTML)], body=page())
    harness.server.route(
        "/rev.json",
        headers=[("Content-Type", JSONLD), ("Link", f'<{resource}>; rev="meta"')],
        body=dataset("urn:e:rev"),
    )
    job = harness.resolved("/rev.json")
    assert [ref.authority for ref in job.documents] == ["unverified"]
    assert other_origin.requests, "the claimed resource was checked"


def test_same_origin_claim_is_not_checked(harness: Harness) -> None:
    harness.server.route(
        "/own.json",
        headers=[("Content-Type", JSONLD)],
        body=dataset(harness.url("/own"), url=harness.url("/own")),
    )
    job = harness.resolved("/own.json")
    assert [ref.authority for ref in job.documents] == [None]
    assert harness.requests() == ["/own.json"]


def test_claim_checks_can_be_turned_off(harness: Harness, other_origin: LocalHTTPServer) -> None:
    harness.wiring.settings = replace(harness.wiring.settings, verify_claims=False)
    resource = other_origin.url("/dataset/3")
    harness.server.route(
        "/claim3.json", headers=[("Content-Type", JSONLD)], body=dataset(resource, url=resource)
    )
    job = harness.resolved("/claim3.json")
    assert [ref.authority for ref in job.documents] == [None]
    assert other_origin.requests == []


def test_a_page_with_thousands_of_item_links_keeps_its_message_small(harness: Harness) -> None:
    # 1,200 links (some 30 KiB): the Link header reader keeps the first 1,000 (decision 0066).
    items = ", ".join(f'</i/{i}>; rel="item"' for i in range(1200))
    harness.server.route(
        "/collection",
        headers=[("Content-Type", HTML), ("Link", items)],
        body=page(script(dataset("urn:e:collection"))),
    )
    job = harness.resolved("/collection")
    assert job.pattern == "embedded-script"
    assert len(job.links) == 300
    assert "link-header: the first 1000 link-values kept; 200 more read and dropped" in job.notes
    assert "1000 links seen; the first 300 are kept" in job.notes


# --- bodies over the cap -----------------------------------------------------------------------

MiB = 1024 * 1024


def _big_page(before: str, after: str, size: int = 60 * MiB) -> Any:
    """A landing page of ``size`` bytes: ``before`` in its head, ``after`` at its very end."""
    head = f"<!doctype html><html><head><title>big</title>{before}</head><body>".encode()
    tail = f"{after}</body></html>".encode()
    filler = size - len(head) - len(tail)
    step = 1024 * 1024

    def chunks() -> Iterator[bytes]:
        yield head
        left = filler
        while left > 0:
            yield b"<p>" + b"x" * (min(step, left) - 7) + b"</p>\n"
            left -= min(step, left)
        yield tail

    return chunks


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_page_cut_at_the_cap_uses_the_metadata_before_the_cut_and_says_so(
    harness: Harness, declared: bool
) -> None:
    size = 60 * MiB
    harness.server.route(
        "/big",
        headers=[("Content-Type", HTML)],
        body=_big_page(script(dataset("urn:e:big", "Before the cut")), ""),
        content_length=size if declared else "auto",
    )
    job = harness.resolved("/big")
    assert job.pattern == "embedded-script"
    (ref,) = job.documents
    assert [w.partition(":")[0] for w in ref.warnings] == ["truncated-page"]
    assert "metadata past it was not seen" in ref.warnings[0]
    assert any("read up to the cut" in note for note in job.notes)
    # the page as read up to the cut is handed on as the block read there: small enough for
    # its message, so nothing waits in the staging area, and nothing is kept
    ((block,),) = [scripts.blocks for scripts in job.scripts]
    assert "Before the cut" in block.text
    assert ref.staged_key is None and ref.body is None and not harness.store.exists(ref.key)
    assert not list(harness.store.list("staging/"))


def test_a_page_cut_at_the_cap_with_nothing_before_the_cut_fails_too_large(
    harness: Harness,
) -> None:
    harness.server.route(
        "/big",
        headers=[("Content-Type", HTML)],
        body=_big_page("", script(dataset("urn:e:late", "After the cut"))),
    )
    result = harness.resolve("/big")
    assert isinstance(result, UrlOutcome)
    assert result.outcome == Outcome.FAILED
    assert result.reason.startswith(
        "body-too-large: landing page larger than 5 MiB; metadata past the cut cannot be seen"
    )
    # Content negotiation was asked with HEAD: a large body is not downloaded twice more.
    assert harness.requests("HEAD") == ["/big"]


def test_a_cut_page_with_meta_tags_only_is_not_a_meta_record(harness: Harness) -> None:
    meta = '<meta name="DC.title" content="A title"><meta name="DC.identifier" content="x:1">'
    harness.server.route(
        "/big", headers=[("Content-Type", HTML)], body=_big_page(meta, "", size=6 * MiB)
    )
    result = harness.resolve("/big")
    assert isinstance(result, UrlOutcome)
    assert result.outcome == Outcome.FAILED
    assert result.reason.startswith("body-too-large: landing page larger than 5 MiB")


def test_a_cut_page_keeps_its_head_links(harness: Harness) -> None:
    link = '<link rel="describedby" href="/big.json" type="application/ld+json">'
    harness.server.route("/big", headers=[("Content-Type", HTML)], body=_big_page(link, ""))
    harness.server.route("/big.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:b"))
    job = harness.resolved("/big")
    assert job.pattern == "html-link"
    assert job.documents[0].warnings == ()  # the metadata document itself is whole
    assert any("read up to the cut" in note for note in job.notes)


def test_a_metadata_target_over_its_cap_fails_too_large_not_no_metadata(
    harness: Harness,
) -> None:
    harness.wiring.settings = replace(harness.wiring.settings, max_document_bytes=1000)
    harness.server.route(
        "/p",
        headers=[("Content-Type", HTML)],
        body=page('<link rel="describedby" href="/p.json" type="application/ld+json">'),
    )
    harness.server.route(
        "/p.json", headers=[("Content-Type", JSONLD)], body=dataset("urn:p", "y" * 2000)
    )
    result = harness.resolve("/p")
    assert isinstance(result, UrlOutcome)
    assert result.outcome == Outcome.FAILED
    assert result.reason.startswith("body-too-large: describedby target over its size cap")


def test_the_fetcher_cuts_at_the_cap_only_when_asked(harness: Harness) -> None:
    harness.server.route("/b", body=b"a" * 5000)
    fetcher = harness.wiring.fetcher
    cut = fetcher.fetch(harness.url("/b"), max_bytes=1000, truncate=True)
    assert (len(cut.body), cut.truncated) == (1000, True)
    whole = fetcher.fetch(harness.url("/b"), max_bytes=5000, truncate=True)
    assert (len(whole.body), whole.truncated) == (5000, False)
    with pytest.raises(BodyTooLarge):
        fetcher.fetch(harness.url("/b"), max_bytes=1000)


# --- claims that cannot be verified ------------------------------------------------------------


def _no_dns(host: str, port: int) -> list[str]:
    """A resolver for tests: every name fails as an unknown name does (no query is sent)."""
    raise socket.gaierror(socket.EAI_NONAME, f"Name or service not known: {host}")


@pytest.fixture
def dead_dns(harness: Harness) -> Iterator[Harness]:
    with SafeFetcher(FetchPolicy(allow_loopback=True, resolver=_no_dns)) as fetcher:
        harness.wiring.fetcher = fetcher
        yield harness


@pytest.mark.parametrize(
    ("resource", "why"),
    [
        ("http://nowhere.invalid/dataset/1", "dns-failure: could not resolve nowhere.invalid"),
        ("http://10.0.0.1/dataset/1", "private-address: refused 10.0.0.1"),
    ],
    ids=["no-dns", "private-address"],
)
def test_a_claim_on_an_unreachable_origin_keeps_the_record_unverified(
    dead_dns: Harness, resource: str, why: str
) -> None:
    harness = dead_dns
    harness.server.route(
        "/claim.json",
        headers=[("Content-Type", CDIF_JSONLD)],
        body=dataset(resource, "Claims elsewhere", url=resource),
    )
    job = harness.resolved("/claim.json")
    assert job.pattern == "content-type"
    (ref,) = job.documents
    assert ref.authority == "unverified"
    (warning,) = ref.warnings
    assert warning.startswith(f"unverified-claim: {resource} could not be read ({why}")
    assert any("unverified" in note and why in note for note in job.notes)
    assert harness.requests() == ["/claim.json"]


def test_a_claim_on_an_origin_answering_503_is_unverified_not_retried(
    harness: Harness, other_origin: LocalHTTPServer
) -> None:
    resource = other_origin.url("/down")
    other_origin.route("/down", status=503, headers=[("Retry-After", "3600")])
    harness.server.route(
        "/c.json", headers=[("Content-Type", JSONLD)], body=dataset(resource, url=resource)
    )
    job = harness.resolved("/c.json")
    (ref,) = job.documents
    assert ref.authority == "unverified"
    assert ref.warnings == (f"unverified-claim: {resource} could not be read (it answered 503)",)


def test_a_claim_on_a_silent_resource_says_why_it_is_unverified(
    harness: Harness, other_origin: LocalHTTPServer
) -> None:
    resource = other_origin.url("/silent")
    other_origin.route("/silent", headers=[("Content-Type", HTML)], body=page())
    harness.server.route(
        "/s.json", headers=[("Content-Type", JSONLD)], body=dataset(resource, url=resource)
    )
    (ref,) = harness.resolved("/s.json").documents
    assert ref.warnings == (f"unverified-claim: {resource} names no metadata",)


def test_a_refuted_claim_whose_forward_metadata_is_unreachable_keeps_the_claiming_record(
    dead_dns: Harness, other_origin: LocalHTTPServer
) -> None:
    harness = dead_dns
    resource = other_origin.url("/dataset/9")
    other_origin.route(
        "/dataset/9",
        headers=[
            ("Content-Type", HTML),
            (
                "Link",
                '<http://nowhere.invalid/9.json>; rel="describedby"; type="application/ld+json"',
            ),
        ],
        body=page(),
    )
    harness.server.route(
        "/c9.json", headers=[("Content-Type", JSONLD)], body=dataset(resource, url=resource)
    )
    job = harness.resolved("/c9.json")
    assert [(ref.url, ref.authority) for ref in job.documents] == [
        (harness.url("/c9.json"), "not-authoritative")
    ]
    assert any("forward metadata could not be read: dns-failure" in n for n in job.notes)


# --- pages that need a browser, with none here ---------------------------------------------------


class _Browser:
    """A renderer that returns the page with a Dataset written into its DOM (a stand-in for
    Chromium, which tests/e2e/test_rendering.py runs for real)."""

    def __init__(self, document: bytes) -> None:
        self.html = page(script(document))
        self.rendered: list[str] = []

    def render(self, url: str, *, page: FetchResponse | None = None) -> RenderedPage:
        self.rendered.append(url)
        return RenderedPage(url=url, html=self.html, seconds=0.1)


def _handed_over(harness: Harness, job: UrlJob) -> None:
    """``job`` went, unchanged, to the render queue, and nothing else happened to it."""
    result = run_job(harness.wiring, job, resolve_url)
    assert result == job
    body = harness.queue.receive(RENDER_QUEUE)
    assert body is not None and decode(body, UrlJob) == job
    assert harness.queue.receive(RENDER_QUEUE) is None
    assert harness.queue.receive(DOCUMENT_QUEUE) is None
    assert list(harness.wiring.catalog.outcomes(job.run_id)) == []


@pytest.fixture
def handing(harness: Harness) -> Harness:
    """The harness as the AWS resolver with a renderer deployed: no browser, a render queue."""
    settings = replace(harness.wiring.settings, render_queue=True)
    harness.wiring = replace(harness.wiring, settings=settings)
    return harness


def test_a_page_without_metadata_as_served_is_handed_to_the_renderer_on_fallback(
    handing: Harness,
) -> None:
    handing.server.route("/scripted", headers=[("Content-Type", HTML)], body=page())
    _handed_over(handing, handing.job("/scripted", options={"render": "fallback"}))


def test_on_fallback_a_page_with_metadata_as_served_is_not_handed_over(handing: Harness) -> None:
    document = dataset("https://doi.org/10.5072/served")
    handing.server.route("/served", headers=[("Content-Type", HTML)], body=page(script(document)))
    job = handing.resolved("/served", options={"render": "fallback"})
    assert job.pattern == "embedded-script"
    assert handing.queue.receive(RENDER_QUEUE) is None


def test_on_always_an_html_page_is_handed_over_before_its_scripts_are_read(
    handing: Harness,
) -> None:
    document = dataset("https://doi.org/10.5072/served")
    handing.server.route("/served", headers=[("Content-Type", HTML)], body=page(script(document)))
    _handed_over(handing, handing.job("/served", options={"render": "always"}))


def test_on_always_a_metadata_document_is_not_handed_over(handing: Harness) -> None:
    handing.server.route(
        "/meta.json",
        headers=[("Content-Type", CDIF_JSONLD)],
        body=dataset(handing.url("/meta.json")),
    )
    job = handing.resolved("/meta.json", options={"render": "always"})
    assert job.pattern == "content-type"
    assert handing.queue.receive(RENDER_QUEUE) is None


def test_with_a_browser_at_hand_the_page_is_rendered_not_handed_over(handing: Harness) -> None:
    # The renderer function has both: its own queue configured and a browser.
    handing.server.route("/scripted", headers=[("Content-Type", HTML)], body=page())
    browser = _Browser(dataset("https://doi.org/10.5072/rendered"))
    handing.wiring = replace(handing.wiring, renderer=browser)
    job = handing.resolved("/scripted", options={"render": "fallback"})
    assert job.pattern == "rendered"
    assert browser.rendered == [handing.url("/scripted")]
    assert handing.queue.receive(RENDER_QUEUE) is None


def test_without_a_render_queue_the_page_ends_noting_that_no_browser_was_available(
    harness: Harness,
) -> None:
    harness.server.route("/scripted", headers=[("Content-Type", HTML)], body=page())
    outcome = harness.resolve("/scripted", options={"render": "fallback"})
    assert isinstance(outcome, UrlOutcome)
    assert outcome.outcome is Outcome.NO_METADATA
    assert "rendering (no browser available here)" in (outcome.reason or "")
    assert harness.queue.receive(RENDER_QUEUE) is None
