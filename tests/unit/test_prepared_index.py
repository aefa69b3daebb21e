"""An index job prepared in a document process and finished in the runner writes what the
indexer writes doing it all itself, though the runner is handed only what it reads of each
record's tree (decision 0095)."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.contracts import encode_staged
from cdif_harvester.stages.index import (
    index_prepared,
    index_records,
    load_staged,
    prepare_index,
)
from tests.unit.test_handover import _wiring
from tests.unit.test_record_segments import _jobs


def _variants(job_record: dict[str, object], n: int) -> dict[str, object]:
    """The golden record made different per job in what a catalogue entry takes of it."""
    record = dict(job_record)
    if n % 3 == 1:
        record.pop("schema:name", None)
        record["schema:subjectOf"] = [record.get("schema:subjectOf")]  # (not an object)
    elif n % 3 == 2:
        record["schema:name"] = {"@value": "not text"}
        record["schema:dateModified"] = f"2026-01-0{n % 9 + 1}"
    return record


def test_work_prepared_elsewhere_writes_the_entries_and_files_of_the_indexer(
    tmp_path: Path,
) -> None:
    one, two = _wiring(tmp_path / "one"), _wiring(tmp_path / "two")
    elsewhere = replace(two, catalog=SqliteCatalog(Path(":memory:")))
    sources = ["a.example"] * 6
    for n, golden in enumerate(_jobs(sources)):
        staged = load_staged(elsewhere, golden)
        records = tuple(
            replace(item, record=None if item.record is None else _variants(item.record, n))
            for item in staged.records
        )
        job = replace(golden, staged=encode_staged(replace(staged, records=records)).decode())
        index_records(one, job)
        prepared = pickle.loads(pickle.dumps(prepare_index(elsewhere, job)))  # noqa: S301
        index_prepared(two, prepared)

    entries_one = list(one.catalog.records("a.example"))
    entries_two = list(two.catalog.records("a.example"))
    assert entries_one == entries_two
    # (the records differ in what the entries take of them)
    assert {e.title for e in entries_one} >= {None}
    assert len({(e.title, e.date_modified, e.sd_date_published) for e in entries_one}) >= 3
    assert list(one.catalog.outcomes("r1")) == list(two.catalog.outcomes("r1"))
    files_one = {p.relative_to(tmp_path / "one"): p.read_bytes() for p in _files(tmp_path / "one")}
    files_two = {p.relative_to(tmp_path / "two"): p.read_bytes() for p in _files(tmp_path / "two")}
    assert files_one == files_two


def _files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "store").rglob("*") if p.is_file())
