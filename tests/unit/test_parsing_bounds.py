"""The caps of the parsers as the stages see them: what is cut is said, never silent."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cdif_harvester.contracts import DocumentJob, UrlJob
from cdif_harvester.domain.records import extraction
from cdif_harvester.domain.resolution import weblinks
from cdif_harvester.domain.resolution.weblinks import (
    parse_html_head,
    parse_link_header,
    parse_linkset_json,
)
from cdif_harvester.stages.extract import MalformedMetadata, extract_documents
from cdif_harvester.stages.resolve import resolve_url
from tests.unit.test_stages import BASE, HTML, _wiring

DATASET = '{"@context": "https://schema.org", "@type": "Dataset", "@id": "%s", "name": "X"}'


def _script(text: str) -> str:
    return f'<script type="application/ld+json">{text}</script>'


def _document_job(tmp_path: Path, page: str) -> tuple[object, DocumentJob]:
    wiring = _wiring(tmp_path, {f"{BASE}/p.html": (200, HTML, page.encode())})
    job = resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/p.html"))
    assert isinstance(job, DocumentJob)
    return wiring, job


def test_the_extractor_lists_the_blocks_left_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extraction, "MAX_SCRIPTS", 2)
    page = "".join(_script(DATASET % f"https://doi.org/10.5072/{n}") for n in range(5))
    wiring, job = _document_job(tmp_path, page)
    index_job = extract_documents(wiring, job)  # type: ignore[arg-type]
    staged = json.loads(index_job.staged)  # type: ignore[attr-defined, union-attr]
    # Two Datasets read, each its own record (docs/decisions/0061); the rest listed as unread.
    assert [record["block"] for record in staged["records"]] == [0, 1]
    reasons = [item["reason"] for item in staged["skipped"]]
    assert reasons == [
        "too-many-scripts: the page has 5 JSON-LD blocks; only the first 2 were read"
    ]


def test_a_page_whose_blocks_are_too_deep_fails_at_once_with_that_reason(
    tmp_path: Path,
) -> None:
    deep = '{"@type": "Dataset", "a": ' + "[" * 200 + "]" * 200 + "}"
    page = _script(DATASET % "https://doi.org/10.5072/x") + _script(deep)
    wiring, job = _document_job(tmp_path, page)
    # The resolver found the good block; the extractor is then given only the deep one.
    # (the page travels in the message, in place of the blocks the resolver read: decisions
    # 0080, 0101)
    only_deep = _wiring(tmp_path / "deep", {})
    document = replace(job.documents[0], body=_script(deep), encoding=None, kept=False)
    with pytest.raises(MalformedMetadata) as failed:
        extract_documents(only_deep, replace(job, documents=(document,), scripts=()))
    assert str(failed.value) == ("json-too-deep: JSON nested more than 100 levels deep; not read")
    assert failed.value.reason == "malformed-json"


def test_html_elements_past_the_cap_are_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weblinks, "MAX_HTML_ELEMENTS", 2)
    links = "".join(f'<link rel="item" href="/{n}">' for n in range(3))
    metas = "".join(f'<meta name="dc.subject" content="{n}">' for n in range(4))
    head = parse_html_head(f"<html><head>{links}{metas}</head></html>".encode(), BASE + "/")
    assert [link.href for link in head.links] == [f"{BASE}/0", f"{BASE}/1"]
    assert [tag.content for tag in head.meta] == ["0", "1"]
    assert head.notes == (
        "html: the page has 3 <link> elements; only the first 2 were read",
        "html: the page has 4 <meta> elements; only the first 2 were read",
    )


def test_link_values_and_notes_past_the_caps_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weblinks, "MAX_LINK_VALUES", 3)
    monkeypatch.setattr(weblinks, "MAX_NOTES", 2)
    parsed = parse_link_header(
        [", , , </a>; rel=item, </b>; rel=item, </c>; rel=item, </d>; rel=item"], BASE + "/"
    )
    assert [link.href for link in parsed.links] == [f"{BASE}/a", f"{BASE}/b", f"{BASE}/c"]
    assert parsed.repairs == (
        "link-header: empty list element ignored",
        "link-header: empty list element ignored",
        "link-header: only the first 3 link-values read; the rest ignored",
        "1 more repair notes not listed",
    )
    targets = [{"href": f"/{n}"} for n in range(5)]
    linkset = json.dumps({"linkset": [{"anchor": BASE + "/", "item": targets}]})
    as_json = parse_linkset_json(linkset, BASE + "/")
    assert len(as_json.links) == 3
    assert as_json.repairs == ("linkset: links read up to 3; any more ignored",)


@pytest.mark.parametrize(
    ("header", "targets"),
    [
        ("< https://a.example/x >; rel=item", ["https://a.example/x"]),
        ("<https://a.example/x\x0b>; rel=item", ["https://a.example/x"]),
        ("<https://a.example/ x>; rel=item", ["https://a.example/"]),
    ],
)
def test_bracketed_targets_read_as_before(header: str, targets: list[str]) -> None:
    assert [link.href for link in parse_link_header([header], BASE).links] == targets
