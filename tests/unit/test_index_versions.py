"""The indexer keeps each version of a record once: the latest under ``records/``, the versions
it replaced under ``versions/`` (docs/decisions/0081-views-derived-on-read.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import IndexJob, decode_staged, encode_staged
from cdif_harvester.keys import record_hash, version_key
from cdif_harvester.model import CatalogEntry, FetchResponse
from cdif_harvester.stages.index import index_records
from cdif_harvester.stages.records import record_versions
from cdif_harvester.wiring import Wiring

STAGED = Path(__file__).parent / "golden" / "staged" / "v1.staged.json"


class NoFetcher:
    def fetch(self, url: str, **_: Any) -> FetchResponse:
        raise AssertionError(f"fetched {url}")


class FailingOnce:
    """A catalogue whose first write of an entry fails (with its signposts or without): a job
    that dies after writing its objects."""

    def __init__(self, inner: SqliteCatalog) -> None:
        self.inner, self.failed = inner, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _fail_once(self) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the process died")

    def put_record(self, entry: CatalogEntry) -> None:
        self._fail_once()
        self.inner.put_record(entry)

    def put_record_with_signposts(self, entry: CatalogEntry, signposts: str) -> None:
        self._fail_once()
        self.inner.put_record_with_signposts(entry, signposts)


def _wiring(root: Path) -> Wiring:
    return Wiring(
        store=DirectoryObjectStore(root / "store"),
        catalog=SqliteCatalog(root / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=SystemClock(),
    )


def _stage(wiring: Wiring, run_id: str, *, name: str | None = None) -> IndexJob:
    """Stage the golden hand-over (its first record renamed when ``name`` is given)."""
    staged = decode_staged(STAGED.read_bytes())
    if name is not None:
        first = staged.records[0]
        assert first.record is not None
        record = {**first.record, "schema:name": name}
        staged = replace(staged, records=(replace(first, record=record), *staged.records[1:]))
    key = f"staging/{run_id}/a.json"
    wiring.store.put(key, encode_staged(staged), content_type="application/json")
    return IndexJob(
        run_id=run_id,
        source="s",
        url="https://pub.example.org/a",
        pattern="embedded-script",
        staged_key=key,
    )


def _first_entry(wiring: Wiring) -> CatalogEntry:
    staged = decode_staged(STAGED.read_bytes())
    entry = wiring.catalog.get_record(staged.records[0].record_id)
    assert entry is not None and entry.record_key is not None
    return entry


def test_a_first_harvest_stores_each_record_once(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    index_records(wiring, _stage(wiring, "r1"))
    assert list(wiring.store.list("versions/")) == []
    entry = _first_entry(wiring)
    assert record_versions(wiring.store, entry) == [
        (entry.record_key, entry.content_hash[:32], True)
    ]


def test_a_changed_record_keeps_the_version_it_replaces(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    index_records(wiring, _stage(wiring, "r1"))
    first = _first_entry(wiring)
    assert first.record_key is not None
    first_body = wiring.store.get(first.record_key)

    index_records(wiring, _stage(wiring, "r2", name="Renamed"))

    latest = _first_entry(wiring)
    assert latest.content_hash != first.content_hash and latest.record_key == first.record_key
    assert latest.record_key is not None
    assert json.loads(wiring.store.get(latest.record_key))["schema:name"] == "Renamed"
    kept = version_key("s", record_hash(first.record_id), first.content_hash)
    assert wiring.store.get(kept) == first_body
    # only the changed record's version was kept
    assert list(wiring.store.list("versions/")) == [kept]
    assert record_versions(wiring.store, latest) == [
        (kept, first.content_hash[:32], False),
        (latest.record_key, latest.content_hash[:32], True),
    ]


def test_a_retry_after_records_changed_keeps_the_right_version(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    index_records(wiring, _stage(wiring, "r1"))
    first = _first_entry(wiring)
    assert first.record_key is not None
    first_body = wiring.store.get(first.record_key)
    job = _stage(wiring, "r2", name="Renamed")
    # the first attempt writes the kept version and the new record, then dies before the entry
    failing = replace(wiring, catalog=FailingOnce(wiring.catalog))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        index_records(failing, job)
    index_records(wiring, job)  # the retry: records/ holds the new version already
    kept = version_key("s", record_hash(first.record_id), first.content_hash)
    assert wiring.store.get(kept) == first_body
    assert list(wiring.store.list("versions/")) == [kept]


def test_a_version_copied_by_an_earlier_layout_is_listed_once(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    index_records(wiring, _stage(wiring, "r1"))
    entry = _first_entry(wiring)
    assert entry.record_key is not None
    # earlier layouts also copied the latest version under versions/
    copy = version_key("s", record_hash(entry.record_id), entry.content_hash)
    wiring.store.put(copy, wiring.store.get(entry.record_key), content_type="application/ld+json")
    assert record_versions(wiring.store, entry) == [
        (entry.record_key, entry.content_hash[:32], True)
    ]
