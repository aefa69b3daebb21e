"""The crosswalk stage: every view of a valid record, golden files, idempotent writes.

The golden record (``golden/crosswalk/landing.record.jsonld``) and its report (with the links
the resolver saw) go in; the six views the stage writes must equal the expected files byte for
byte. Set ``CDIF_UPDATE_GOLDEN=1`` to rewrite the expected files after a deliberate change, and
review the diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import InProcessQueue, SqliteCatalog, SystemClock
from cdif_harvester.domain.views.nquads import NQuadsError
from cdif_harvester.keys import (
    VIEW_NAMES,
    normalised_record_key,
    record_hash,
    record_report_key,
    view_keys,
)
from cdif_harvester.model import FetchResponse
from cdif_harvester.stages.crosswalk import NotARecordKey, build_views
from cdif_harvester.wiring import Wiring

GOLDEN = Path(__file__).parent / "golden" / "crosswalk"
SOURCE = "data.example.org"
UPDATE = os.environ.get("CDIF_UPDATE_GOLDEN") == "1"

CONTENT_TYPES = {
    "pid-kernel": "application/json",
    "linkset-json": "application/linkset+json",
    "linkset": "application/linkset",
    "link-header": "text/plain; charset=utf-8",
    "html-links": "text/html; charset=utf-8",
    "nquads": "application/n-quads",
}


class MemoryStore:
    """An in-memory object store that counts writes (a fake of the ObjectStore port)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.puts: list[str] = []

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.objects[key] = body
        self.content_types[key] = content_type
        self.puts.append(key)

    def get(self, key: str) -> bytes:
        return self.objects[key]

    def exists(self, key: str) -> bool:
        return key in self.objects

    def list(self, prefix: str) -> Iterator[str]:
        yield from sorted(k for k in self.objects if k.startswith(prefix))


class NoFetcher:
    def fetch(self, url: str, **_: object) -> FetchResponse:
        raise AssertionError("the crosswalk never fetches")


def _wiring(tmp_path: Path, store: MemoryStore) -> Wiring:
    return Wiring(
        store=store,
        catalog=SqliteCatalog(tmp_path / "catalog.sqlite"),
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=SystemClock(),
    )


def _stored(store: MemoryStore, record: dict[str, object], report: dict[str, object]) -> str:
    rkey = record_hash(str(report["record_id"]))
    store.put(record_report_key(SOURCE, rkey), json.dumps(report).encode())
    key = normalised_record_key(SOURCE, rkey)
    store.put(key, json.dumps(record, indent=2).encode())
    store.puts.clear()
    return key


def _golden_input() -> tuple[dict[str, object], dict[str, object]]:
    record = json.loads((GOLDEN / "landing.record.jsonld").read_text(encoding="utf-8"))
    report = json.loads((GOLDEN / "landing.report.json").read_text(encoding="utf-8"))
    return record, report


@pytest.mark.parametrize("view", sorted(VIEW_NAMES))
def test_each_view_of_the_golden_record_matches_its_golden_file(tmp_path: Path, view: str) -> None:
    # Given the golden record and its report in the store
    store = MemoryStore()
    key = _stored(store, *_golden_input())
    # When the crosswalk builds its views
    written = build_views(_wiring(tmp_path, store), key)
    # Then the view is the expected file, byte for byte, with its content type
    expected_path = GOLDEN / f"landing.{VIEW_NAMES[view]}"
    body = store.objects[written[view]]
    if UPDATE:
        expected_path.write_bytes(body)
    assert body == expected_path.read_bytes()
    assert store.content_types[written[view]] == CONTENT_TYPES[view]


def test_every_view_is_written_under_its_documented_key(tmp_path: Path) -> None:
    store = MemoryStore()
    record, report = _golden_input()
    key = _stored(store, record, report)
    written = build_views(_wiring(tmp_path, store), key)
    rkey = record_hash(str(report["record_id"]))
    assert written == view_keys(SOURCE, rkey)
    assert set(written) == set(VIEW_NAMES) == set(CONTENT_TYPES)
    assert written["nquads"] == f"views/{SOURCE}/{rkey}/record.nq"
    assert sorted(store.puts) == sorted(written.values())


def test_a_second_build_of_an_unchanged_record_writes_nothing(tmp_path: Path) -> None:
    store = MemoryStore()
    key = _stored(store, *_golden_input())
    wiring = _wiring(tmp_path, store)
    build_views(wiring, key)
    assert len(store.puts) == len(VIEW_NAMES)
    store.puts.clear()
    # When the same notification is delivered again
    again = build_views(wiring, key)
    # Then nothing is written, and the same keys are reported
    assert store.puts == []
    assert set(again) == set(VIEW_NAMES)


def test_a_changed_record_rewrites_only_the_views_that_changed(tmp_path: Path) -> None:
    store = MemoryStore()
    record, report = _golden_input()
    key = _stored(store, record, report)
    wiring = _wiring(tmp_path, store)
    written = build_views(wiring, key)
    store.puts.clear()
    # When only the version changes (a kernel attribute and a triple, no link)
    record["schema:version"] = "2.2"
    store.objects[key] = json.dumps(record).encode()
    build_views(wiring, key)
    assert sorted(store.puts) == sorted([written["pid-kernel"], written["nquads"]])


def test_an_invalid_record_gets_no_views(tmp_path: Path) -> None:
    store = MemoryStore()
    record, report = _golden_input()
    report["valid"] = False
    key = _stored(store, record, report)
    assert build_views(_wiring(tmp_path, store), key) == {}
    assert store.puts == []


def test_a_key_outside_records_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotARecordKey):
        build_views(_wiring(tmp_path, MemoryStore()), "reports/x/0123.json")


def test_a_record_that_cannot_become_rdf_writes_no_view_at_all(tmp_path: Path) -> None:
    store = MemoryStore()
    record, report = _golden_input()
    record["@context"] = "https://contexts.example.org/unknown.jsonld"  # never fetched
    key = _stored(store, record, report)
    with pytest.raises(NQuadsError):
        build_views(_wiring(tmp_path, store), key)
    assert store.puts == []


def test_invented_identities_are_not_published_as_pids(tmp_path: Path) -> None:
    # Given a record whose ids the normaliser had to make up from the page URL
    store = MemoryStore()
    record, report = _golden_input()
    page = "https://data.example.org/datasets/fjord-ctd"
    record["@id"] = f"{page}#resource-1"
    record["schema:subjectOf"]["@id"] = f"{page}#record"  # type: ignore[index]
    report.update(
        identity_fallback=True, resource_id=f"{page}#resource-1", record_id=f"{page}#record"
    )
    key = _stored(store, record, report)
    written = build_views(_wiring(tmp_path, store), key)
    kernel = json.loads(store.objects[written["pid-kernel"]])
    linkset = json.loads(store.objects[written["linkset-json"]])
    # Then the kernel has no pid and no link points to or from an invented id
    assert "pid" not in kernel and kernel["version"] == "2.1"
    text = json.dumps(linkset)
    assert "#resource-1" not in text and "#record" not in text
    # the publisher's own cite-as, seen on the page, is still there
    assert linkset["linkset"][0]["cite-as"] == [{"href": "https://doi.org/10.5072/fjord-ctd"}]
