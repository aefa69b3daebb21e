"""A landing page's JSON-LD travels in its document job as the blocks the resolver read, in place
of the page: the extractor finds in them what it finds in the page
(docs/decisions/0101-pages-handed-on-as-their-json-ld.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    DocumentJob,
    DocumentRef,
    PageScripts,
    ScriptBlock,
    UrlJob,
    decode,
    encode,
)
from cdif_harvester.domain.records.extraction import MAX_SCRIPTS, read_jsonld_scripts
from cdif_harvester.stages.extract import read_documents
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

BASE = "https://pub.example.org"
HTML = {"content-type": "text/html; charset=utf-8"}


def _dataset(identifier: str, **extra: object) -> str:
    node = {"@context": "https://schema.org", "@type": "Dataset", "@id": identifier, "name": "X"}
    node.update(extra)
    return json.dumps(node)


def _script(text: str, attributes: str = "") -> str:
    return f'<script type="application/ld+json"{attributes}>{text}</script>'


PAGES = {
    "one": _script(_dataset("https://doi.org/10.5072/one")),
    # a CDIF block after a plain one: the CDIF one goes first; a WebSite block beside them
    "profiles": _script(_dataset("https://doi.org/10.5072/p", description="plain"))
    + _script('{"@context": "https://schema.org", "@type": "WebSite", "name": "w"}')
    + _script(
        _dataset("https://doi.org/10.5072/p", description="cdif"),
        ' profile="https://w3id.org/cdif/core/1.0"',
    ),
    # a block that cannot be read, and one with a trailing comma to repair
    "broken": _script('{"@type": "Dataset", "name": ')
    + _script(_dataset("https://doi.org/10.5072/b")[:-1] + ",}"),
    # more blocks than are read: the note says how many were left
    "many": _script(_dataset("https://doi.org/10.5072/m")) + _script("{}") * (MAX_SCRIPTS + 1),
    # the type with parameters and in capitals, text escaped as HTML
    "typed": '<script type="Application/LD+JSON; charset=utf-8">'
    + _dataset("https://doi.org/10.5072/t", name="A &amp; B").replace('"', "&quot;")
    + "</script>",
}


def _page(blocks: str) -> bytes:
    return f"<!doctype html><html><head>{blocks}</head><body><p>x</p></body></html>".encode()


def _wiring(tmp_path: Path, pages: dict[str, bytes]) -> Wiring:
    return Wiring(
        store=DirectoryObjectStore(tmp_path / "out"),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher({url: (200, HTML, body) for url, body in pages.items()}),
        clock=SystemClock(),
    )


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_extractor_finds_in_the_blocks_what_it_finds_in_the_page(
    tmp_path: Path, name: str
) -> None:
    body = _page(PAGES[name])
    wiring = _wiring(tmp_path, {})
    ref = DocumentRef(key="raw/s/x.html", url=f"{BASE}/{name}", media_type="text/html")
    as_page = DocumentJob(
        run_id="r1",
        source="s",
        url=ref.url,
        pattern="embedded-script",
        documents=(replace(ref, kept=False, body=body.decode()),),
    )
    read = read_jsonld_scripts(body)
    scripts = PageScripts(
        key=ref.key,
        blocks=tuple(ScriptBlock(b.index, b.text, b.profile) for b in read.blocks),
        unread=read.unread,
    )
    as_blocks = replace(as_page, documents=(replace(ref, kept=False),), scripts=(scripts,))
    # (through the message, as the extractor receives it, when it fits in one: the resolver
    # stages the page itself otherwise)
    received = as_blocks if name == "many" else decode(encode(as_blocks), DocumentJob)
    assert received == as_blocks
    from_page, from_blocks = (
        read_documents(wiring, as_page, None),
        read_documents(wiring, received, None),
    )
    assert from_blocks == from_page
    assert from_page.staged is not None
    assert from_page.staged.records or from_page.staged.skipped


def test_the_resolver_hands_a_page_on_as_its_blocks_and_the_message_shrinks(
    tmp_path: Path,
) -> None:
    filler = "<p>" + "text of the landing page " * 2000 + "</p>"
    body = _page(PAGES["profiles"]).replace(b"<p>x</p>", filler.encode())
    url = f"{BASE}/profiles"
    wiring = _wiring(tmp_path, {url: body})
    job = resolve_url(wiring, UrlJob(run_id="r1", source="s", url=url))
    assert isinstance(job, DocumentJob)
    message = wiring.queue.receive(DOCUMENT_QUEUE)
    assert message is not None and wiring.queue.receive(DOCUMENT_QUEUE) is None
    sent = decode(message, DocumentJob)
    (ref,) = sent.documents
    assert ref.body is None and ref.staged_key is None and not ref.kept
    (scripts,) = sent.scripts
    assert scripts.key == ref.key
    assert [b.text for b in scripts.blocks] == [b.text for b in read_jsonld_scripts(body).blocks]
    assert len(message) < len(body) // 5
