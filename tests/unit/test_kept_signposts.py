"""The local catalogue keeps each valid record's signposts with its entry, and the Signmap takes
them from there instead of reading every record and report (decision 0100)."""

from __future__ import annotations

import pickle
import sqlite3
from dataclasses import replace
from pathlib import Path

from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.contracts import IndexJob
from cdif_harvester.model import CatalogEntry
from cdif_harvester.ports import KeptSignposts
from cdif_harvester.stages.crosswalk import build_source_signmap
from cdif_harvester.stages.index import index_prepared, index_records, prepare_index
from cdif_harvester.wiring import Wiring
from tests.unit.test_handover import _wiring
from tests.unit.test_record_segments import _CountedStore, _jobs

SOURCE = "a.example"


def _jobs_sharing_pages() -> list[IndexJob]:
    """Six jobs of a source, two of them at the same URL (their records share a landing page,
    whose links the Signmap merges in record hash order)."""
    jobs = _jobs([SOURCE] * 6)
    return [*jobs[:5], replace(jobs[5], url=jobs[0].url)]


def _valid(wiring: Wiring) -> list[CatalogEntry]:
    return [e for e in wiring.catalog.records(SOURCE) if e.valid and not e.withdrawn_at]


def _indexed(tmp_path: Path) -> Wiring:
    """The local catalogue and store with the source's jobs indexed one by one."""
    wiring = _wiring(tmp_path)
    for job in _jobs_sharing_pages():
        index_records(wiring, job)
    return wiring


def _signmap(wiring: Wiring, root: Path) -> tuple[bytes, list[str]]:
    """The Signmap of the source built anew, and the keys the build read."""
    counted = replace(wiring, store=_CountedStore(root))
    key = build_source_signmap(counted, SOURCE)
    assert isinstance(counted.store, _CountedStore)
    reads = list(counted.store.reads)
    body = counted.store.get(key)
    (root / key).unlink()
    return body, reads


def _records_read(reads: list[str]) -> list[str]:
    return [key for key in reads if key.startswith(("records/", "reports/"))]


def _forget_signposts(wiring: Wiring) -> None:
    """Put every entry again without signposts, as a version before them wrote it."""
    for entry in list(wiring.catalog.records(SOURCE)):
        wiring.catalog.put_record(entry)
    assert isinstance(wiring.catalog, KeptSignposts)
    assert list(wiring.catalog.kept_signposts(SOURCE)) == []


def test_the_signmap_from_kept_signposts_is_the_one_read_from_each_record(
    tmp_path: Path,
) -> None:
    # Given a source's records indexed job by job into the local catalogue
    wiring = _indexed(tmp_path)
    entries = _valid(wiring)
    assert len(entries) >= 6  # noqa: PLR2004
    assert isinstance(wiring.catalog, KeptSignposts)
    kept = dict(wiring.catalog.kept_signposts(SOURCE))
    assert kept.keys() == {entry.record_id for entry in entries}

    # When the Signmap is built from what the catalogue keeps, and again from each record
    root = tmp_path / "store"
    from_kept, kept_reads = _signmap(wiring, root)
    _forget_signposts(wiring)
    read_each, each_reads = _signmap(wiring, root)

    # Then both are the same bytes, which list the records
    assert from_kept == read_each
    assert b"<url>" in from_kept
    assert b"<rs:ln " in from_kept
    # And the first read no record and no report, where the second read every one
    assert _records_read(kept_reads) == []
    assert len(_records_read(each_reads)) == 2 * len(entries)


def test_work_prepared_in_another_process_keeps_the_signposts_too(tmp_path: Path) -> None:
    # Given jobs prepared as a document process does (its own catalogue in memory, the work
    # pickled to the main process), then indexed there
    wiring = _wiring(tmp_path)
    elsewhere = replace(wiring, catalog=SqliteCatalog(Path(":memory:")))
    for job in _jobs_sharing_pages():
        prepared = prepare_index(elsewhere, job)
        index_prepared(wiring, pickle.loads(pickle.dumps(prepared)))  # noqa: S301

    # When the Signmap is built
    root = tmp_path / "store"
    from_kept, kept_reads = _signmap(wiring, root)

    # Then it read no record nor report, and is what reading each record gives
    assert _records_read(kept_reads) == []
    _forget_signposts(wiring)
    read_each, _ = _signmap(wiring, root)
    assert from_kept == read_each


def test_an_entry_put_again_without_signposts_is_read_and_the_rest_are_not(
    tmp_path: Path,
) -> None:
    wiring = _indexed(tmp_path)
    root = tmp_path / "store"
    whole, _ = _signmap(wiring, root)
    # (one entry rewritten by put_record, as withdrawing or an older version does)
    first = _valid(wiring)[0]
    wiring.catalog.put_record(first)

    again, reads = _signmap(wiring, root)

    assert again == whole
    assert sorted(_records_read(reads)) == sorted([first.report_key, first.record_key or ""])


def test_a_catalogue_of_before_the_signposts_opens_and_its_signmap_reads_each_record(
    tmp_path: Path,
) -> None:
    # Given a catalogue written by a version without the signposts column
    wiring = _indexed(tmp_path)
    root = tmp_path / "store"
    expected, _ = _signmap(wiring, root)
    entries = _valid(wiring)
    assert isinstance(wiring.catalog, SqliteCatalog)
    wiring.catalog.close()
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("ALTER TABLE records DROP COLUMN signposts")
    db.close()

    # When it is opened again
    reopened = replace(wiring, catalog=SqliteCatalog(tmp_path / "c.sqlite"))

    # Then its entries are there, none with signposts, and the Signmap reads each record
    assert _valid(reopened) == entries
    assert isinstance(reopened.catalog, KeptSignposts)
    assert list(reopened.catalog.kept_signposts(SOURCE)) == []
    listed, reads = _signmap(reopened, root)
    assert listed == expected
    assert len(_records_read(reads)) == 2 * len(entries)
