"""The local adapters: directory store, SQLite catalogue, in-process queue, notifications."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cdif_harvester import keys
from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    NotifyingObjectStore,
    SqliteCatalog,
)
from cdif_harvester.errors import StorageError
from cdif_harvester.model import CatalogEntry, Outcome, RecordRef, UrlOutcome
from cdif_harvester.stages.crosswalk import keys_from_s3_event


def test_directory_store_round_trip_and_listing(tmp_path: Path) -> None:
    store = DirectoryObjectStore(tmp_path)
    store.put("records/s/b.jsonld", b"{}")
    store.put("records/s/a.jsonld", b"[]")
    store.put("reports/s/a.json", b"{}")
    assert store.get("records/s/a.jsonld") == b"[]"
    assert store.exists("reports/s/a.json")
    assert not store.exists("reports/s/zzz.json")
    assert list(store.list("records/")) == ["records/s/a.jsonld", "records/s/b.jsonld"]
    with pytest.raises(KeyError):
        store.get("records/s/missing.jsonld")


@pytest.mark.parametrize("key", ["../escape", "records/../../x", "/etc/passwd"])
def test_directory_store_refuses_keys_that_escape(tmp_path: Path, key: str) -> None:
    with pytest.raises(StorageError):
        DirectoryObjectStore(tmp_path / "store").put(key, b"x")


def test_notifying_store_announces_records_only(tmp_path: Path) -> None:
    queue = InProcessQueue()
    store = NotifyingObjectStore(
        DirectoryObjectStore(tmp_path), queue, prefix="records/", target="cw"
    )
    store.put("raw/s/x.html", b"x")
    assert queue.pending("cw") == 0
    store.put("records/s/x.jsonld", b"{}")
    body = queue.receive("cw")
    assert body is not None
    assert keys_from_s3_event(json.loads(body)) == ["records/s/x.jsonld"]


def _outcome(run: str, url: str, outcome: Outcome) -> UrlOutcome:
    ref = RecordRef(
        record_id="r1",
        resource_id="d1",
        valid=False,
        errors=("schema:name is required",),
        record_key="records/s/k.jsonld",
        report_key="reports/s/k.json",
    )
    return UrlOutcome(
        run_id=run,
        source="s",
        url=url,
        outcome=outcome,
        pattern="embedded-script",
        records=(ref,) if outcome is Outcome.RECORD else (),
    )


def test_catalogue_keeps_one_outcome_per_url_and_run(tmp_path: Path) -> None:
    catalog = SqliteCatalog(tmp_path / "c.sqlite")
    catalog.put_outcome(_outcome("run1", "https://e.org/b", Outcome.FAILED))
    catalog.put_outcome(_outcome("run1", "https://e.org/a", Outcome.RECORD))
    catalog.put_outcome(_outcome("run1", "https://e.org/b", Outcome.NO_METADATA))  # replaces
    catalog.put_outcome(_outcome("run2", "https://e.org/a", Outcome.UNCHANGED))
    run1 = list(catalog.outcomes("run1"))
    assert [(o.url, o.outcome) for o in run1] == [
        ("https://e.org/a", Outcome.RECORD),
        ("https://e.org/b", Outcome.NO_METADATA),
    ]
    assert run1[0].records[0].errors == ("schema:name is required",)
    catalog.close()
    reopened = SqliteCatalog(tmp_path / "c.sqlite")  # a rerun continues the same catalogue
    assert [o.outcome for o in reopened.outcomes("run2")] == [Outcome.UNCHANGED]


def test_catalogue_records(tmp_path: Path) -> None:
    catalog = SqliteCatalog(tmp_path / "c.sqlite")
    entry = CatalogEntry(
        record_id="https://e.org/md/1",
        resource_id="https://doi.org/10.5072/1",
        source="e.org",
        url="https://e.org/1",
        title="T",
        pattern="embedded-script",
        valid=True,
        conformance="https://w3id.org/cdif/core/1.0",
        date_modified="2024-01-01",
        sd_date_published=None,
        content_hash="abc",
        record_key="records/e.org/k.jsonld",
        report_key="reports/e.org/k.json",
        run_id="run1",
        harvested_at="2024-01-01T00:00:00+00:00",
    )
    catalog.put_record(entry)
    assert catalog.get_record("https://e.org/md/1") == entry
    assert catalog.get_record("nope") is None
    assert list(catalog.records("e.org")) == [entry]


def test_record_keys_spell_the_documented_layout() -> None:
    rhash = keys.record_hash("https://e.org/md/1")
    assert rhash == hashlib.sha256(b"https://e.org/md/1").hexdigest()[:32]
    assert keys.normalised_record_key("e.org", rhash) == f"records/e.org/{rhash}.jsonld"
    assert keys.record_report_key("e.org", rhash) == f"reports/e.org/{rhash}.json"
    assert keys.view_key("e.org", rhash, "nquads") == f"views/e.org/{rhash}/record.nq"
    version = keys.version_key("e.org", rhash, "ab" * 32)
    assert version == f"versions/e.org/{rhash}/{'ab' * 16}.jsonld"


def test_key_layout_is_stable_and_safe() -> None:
    assert keys.source_of("http://127.0.0.1:8080/x") == "127.0.0.1_8080"
    assert keys.source_of("https://Data.Example.org/x") == "data.example.org"
    rkey = keys.record_hash("https://e.org/md/1")
    assert len(rkey) == 32
    record = keys.normalised_record_key("e.org", rkey)
    assert keys.parse_normalised_record_key(record) == ("e.org", rkey)
    assert keys.parse_normalised_record_key("raw/e.org/x.json") is None
    raw = keys.raw_key("e.org", "https://e.org/a", b"<html>", "html")
    assert raw.startswith("raw/e.org/") and raw.endswith(".html")
    assert keys.raw_meta_key(raw).endswith(".meta.json")
    assert set(keys.view_keys("e.org", rkey)) == set(keys.VIEW_NAMES)
