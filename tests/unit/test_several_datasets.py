"""Several Datasets on one page: one record each, with ids that do not depend on their order.

See docs/decisions/0061-json-ld-glitches-and-several-datasets.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import DocumentJob, UrlJob
from cdif_harvester.domain.records.normalisation import normalise
from cdif_harvester.stages.crosswalk import _invented
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

BASE = "https://pub.example.org"
PAGE = f"{BASE}/catalogue.html"
HTML = {"content-type": "text/html; charset=utf-8"}
DOIS = [f"https://doi.org/10.5072/ds-{n}" for n in range(3)]


def _dataset(resource_id: str | None, name: str) -> dict[str, Any]:
    node: dict[str, Any] = {"@context": "https://schema.org/", "@type": "Dataset", "name": name}
    if resource_id is not None:
        node["@id"] = resource_id
    return node


def _page(*nodes: dict[str, Any]) -> bytes:
    blocks = "".join(
        f'<script type="application/ld+json">{json.dumps(node)}</script>' for node in nodes
    )
    return f"<html><head>{blocks}</head><body></body></html>".encode()


def _staged(tmp_path: Path, page: bytes) -> dict[str, Any]:
    """What the extractor hands over for ``page``, served at PAGE."""
    wiring = Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher({PAGE: (200, HTML, page)}),
        clock=SystemClock(),
    )
    job = resolve_url(wiring, UrlJob(run_id="r", source="s", url=PAGE))
    assert isinstance(job, DocumentJob)
    index_job = extract_documents(wiring, job)
    staged: dict[str, Any] = json.loads(index_job.staged)  # type: ignore[union-attr]
    return staged


def _ids(staged: dict[str, Any]) -> dict[str, str]:
    """resource id -> record id of the staged records."""
    return {record["resource_id"]: record["record_id"] for record in staged["records"]}


def test_three_blocks_give_three_records_whatever_their_order(tmp_path: Path) -> None:
    nodes = [_dataset(doi, f"Dataset {n}") for n, doi in enumerate(DOIS)]
    first = _staged(tmp_path / "a", _page(*nodes))
    again = _staged(tmp_path / "b", _page(*reversed(nodes)))
    assert len(first["records"]) == 3 and first["skipped"] == []
    ids = _ids(first)
    assert set(ids) == set(DOIS)
    assert len(set(ids.values())) == 3
    assert _ids(again) == ids  # stable: each record id follows its resource, not its place
    for record in first["records"]:
        # the made-up id stays under the page, names its resource, and is marked as made up
        assert record["record_id"] == f"{PAGE}#record:{record['resource_id']}"
        assert record["identity_fallback"] is True
        assert record["record"]["schema:subjectOf"]["@id"] == record["record_id"]


def test_two_identical_blocks_give_one_record(tmp_path: Path) -> None:
    node = _dataset(DOIS[0], "Twice")
    staged = _staged(tmp_path / "a", _page(node, node, _dataset(DOIS[1], "Other")))
    assert sorted(_ids(staged)) == sorted(DOIS[:2])
    (skipped,) = staged["skipped"]
    assert skipped["reason"] == f"duplicate of record {PAGE}#record:{DOIS[0]}"
    # Alone on its page, the Dataset keeps the record id of a page of one block.
    staged = _staged(tmp_path / "b", _page(node, node))
    (record,) = staged["records"]
    assert record["record_id"] == f"{PAGE}#record"


def test_the_same_resource_in_two_blocks_among_others_is_kept_once(tmp_path: Path) -> None:
    nodes = [_dataset(DOIS[0], "one"), _dataset(DOIS[1], "two"), _dataset(DOIS[0], "one again")]
    staged = _staged(tmp_path, _page(*nodes))
    assert sorted(_ids(staged)) == sorted(DOIS[:2])
    assert [item["block"] for item in staged["skipped"]] == [2]


def test_datasets_that_nothing_identifies_are_told_apart_by_their_block(tmp_path: Path) -> None:
    nodes = [_dataset(None, "one"), _dataset(None, "two"), _dataset(None, "one")]
    staged = _staged(tmp_path, _page(*nodes))
    records = staged["records"]
    assert [record["record"]["schema:name"] for record in records] == ["one", "two"]
    assert len({record["record_id"] for record in records}) == 2
    assert len({record["resource_id"] for record in records}) == 2
    assert all(record["identity_fallback"] for record in records)
    assert [item["block"] for item in staged["skipped"]] == [2]  # the same block again


def test_a_graph_of_three_datasets_gives_ids_that_follow_the_resources() -> None:
    nodes = [{"@type": "Dataset", "@id": doi, "name": doi} for doi in DOIS]
    results = normalise({"@context": "https://schema.org/", "@graph": nodes}, document_url=PAGE)
    backwards = normalise(
        {"@context": "https://schema.org/", "@graph": nodes[::-1]}, document_url=PAGE
    )
    ids = {result.resource_id: result.record_id for result in results}
    assert len(set(ids.values())) == 3
    assert {result.resource_id: result.record_id for result in backwards} == ids
    assert ids[DOIS[1]] == f"{PAGE}#record:{DOIS[1]}"


def test_a_resource_id_with_a_fragment_gives_a_record_id_with_one_fragment() -> None:
    nodes = [{"@type": "Dataset", "@id": f"{BASE}/data#set-{n}", "name": "x"} for n in (1, 2)]
    results = normalise({"@context": "https://schema.org/", "@graph": nodes}, document_url=PAGE)
    for result in results:
        assert result.record_id.count("#") == 1
        assert result.record_id.endswith("%23set-1") or result.record_id.endswith("%23set-2")


def test_made_up_record_ids_of_several_datasets_are_never_published_as_pids() -> None:
    report = {
        "identity_fallback": True,
        "record_id": f"{PAGE}#record:{BASE}/data%23set-1",
        "resource_id": DOIS[0],
    }
    assert _invented(report) == frozenset({report["record_id"]})
    positional = {
        **report,
        "record_id": f"{PAGE}#record-2-1",
        "resource_id": f"{PAGE}#resource-2-1",
    }
    assert _invented(positional) == frozenset({positional["record_id"], positional["resource_id"]})
