"""Record segments with the local stores: references name ranges of one object, a batch of
jobs is one segment per source, and without the setting nothing changes
(docs/decisions/0086-record-segments.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import DirectoryObjectStore, MemoryObjectStore
from cdif_harvester.contracts import IndexJob, decode_staged, encode_staged
from cdif_harvester.keys import (
    parse_segment_ref,
    segment_key,
    segment_ref,
    segment_signposts_key,
)
from cdif_harvester.model import Outcome
from cdif_harvester.stages.crosswalk import build_source_signmap
from cdif_harvester.stages.finish import withdraw_vanished
from cdif_harvester.stages.index import StagedObjectMissing, index_records
from cdif_harvester.stages.records import record_versions
from cdif_harvester.stages.segments import index_batch
from cdif_harvester.wiring import Wiring
from tests.unit.test_handover import STAGED, _wiring


@pytest.mark.parametrize("kind", ["directory", "memory"])
def test_a_segment_reference_reads_its_range_and_no_more(tmp_path: Path, kind: str) -> None:
    store = DirectoryObjectStore(tmp_path) if kind == "directory" else MemoryObjectStore()
    key = segment_key("s", "2026-01-01", "abc")
    store.put(key, b"0123456789")
    assert parse_segment_ref(segment_ref(key, 3, 4)) == (key, 3, 4)
    assert parse_segment_ref("records/s/x.jsonld") is None
    assert store.get(segment_ref(key, 3, 4)) == b"3456"
    assert store.get(segment_ref(key, 0, 10)) == b"0123456789"
    with pytest.raises(KeyError):
        store.get(segment_ref(key, 8, 4))  # past the end
    with pytest.raises(KeyError):
        store.get(segment_ref(segment_key("s", "2026-01-01", "gone"), 0, 1))


def _jobs(sources: list[str]) -> list[IndexJob]:
    golden = decode_staged((STAGED / "v1.staged.json").read_bytes())
    jobs = []
    for n, source in enumerate(sources):
        url = f"https://{source}/page-{n}"
        records = tuple(replace(r, record_id=f"{r.record_id}-{n}") for r in golden.records)
        staged = replace(golden, url=url, records=records)
        jobs.append(
            IndexJob(
                run_id="r1",
                source=source,
                url=url,
                pattern="embedded-script",
                staged=encode_staged(staged).decode("utf-8"),
            )
        )
    return jobs


def _segmented(wiring: Wiring) -> Wiring:
    wiring.settings = replace(wiring.settings, record_segments=True)
    return wiring


def test_a_batch_is_one_segment_per_source_and_each_entry_names_its_ranges(
    tmp_path: Path,
) -> None:
    wiring = _segmented(_wiring(tmp_path))
    jobs = _jobs(["a.example", "b.example", "a.example"])
    stage = index_batch(wiring, jobs)
    segments = sorted(key for key in wiring.store.list("segments/") if key.endswith(".seg"))
    assert [key.split("/")[1] for key in segments] == ["a.example", "b.example"]
    # (beside each, what the Signmap lists of its valid records: nothing else is written)
    assert sorted(wiring.store.list("segments/")) == sorted(
        [*segments, *(segment_signposts_key(key) for key in segments)]
    )
    for job in jobs:
        outcome = stage(wiring, job)
        assert outcome.outcome is Outcome.RECORD
        for ref in outcome.records:
            entry = wiring.catalog.get_record(ref.record_id)
            assert entry is not None
            report = json.loads(wiring.store.get(entry.report_key))
            assert report["record_id"] == ref.record_id
            assert report["provenance"]["url"] == job.url
            where = parse_segment_ref(entry.report_key)
            assert where is not None and where[0] in segments
            assert where[0].split("/")[1] == job.source
    assert list(wiring.store.list("records/")) == list(wiring.store.list("reports/")) == []


def test_the_same_records_are_stored_with_and_without_segments(tmp_path: Path) -> None:
    (job,) = _jobs(["a.example"])
    plain = _wiring(tmp_path / "plain")
    alone = index_records(plain, job)
    segmented = _segmented(_wiring(tmp_path / "segmented"))
    batched = index_batch(segmented, [job])(segmented, job)
    assert [r.record_id for r in batched.records] == [r.record_id for r in alone.records]
    for ref in alone.records:
        old, new = (
            plain.catalog.get_record(ref.record_id),
            segmented.catalog.get_record(ref.record_id),
        )
        assert old is not None and new is not None
        assert segmented.store.get(new.report_key) == plain.store.get(old.report_key)
        if old.record_key is not None:
            assert new.record_key is not None
            assert segmented.store.get(new.record_key) == plain.store.get(old.record_key)
        assert replace(new, record_key=old.record_key, report_key=old.report_key) == old


def test_without_the_setting_a_batch_is_indexed_job_by_job(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    jobs = _jobs(["a.example"])
    assert index_batch(wiring, jobs) is index_records
    assert list(wiring.store.list("segments/")) == []


def test_a_job_that_cannot_be_planned_runs_alone_and_meets_its_error(tmp_path: Path) -> None:
    wiring = _segmented(_wiring(tmp_path))
    (good,) = _jobs(["a.example"])
    gone = IndexJob(
        run_id="r1", source="a.example", url="https://a.example/gone", pattern="p",
        staged_key="staging/r1/gone.json",
    )  # fmt: skip
    stage = index_batch(wiring, [gone, good])
    assert len([k for k in wiring.store.list("segments/") if k.endswith(".seg")]) == 1
    with pytest.raises(StagedObjectMissing):
        stage(wiring, gone)
    assert stage(wiring, good).outcome is Outcome.RECORD


def test_a_changed_record_keeps_the_version_its_segment_held(tmp_path: Path) -> None:
    # Given a job indexed with segments, then the same URL again with its first record changed
    wiring = _segmented(_wiring(tmp_path))
    (job,) = _jobs(["a.example"])
    first = index_batch(wiring, [job])(wiring, job)
    staged = decode_staged(job.staged or "")
    item = next(r for r in staged.records if r.record is not None)
    assert item.record is not None
    changed = replace(item, record={**item.record, "schema:name": "Renamed"})
    again = replace(
        job,
        run_id="r2",
        staged=encode_staged(
            replace(staged, records=tuple(changed if r is item else r for r in staged.records))
        ).decode("utf-8"),
    )
    before = wiring.catalog.get_record(item.record_id)
    assert before is not None and parse_segment_ref(before.record_key or "") is not None
    index_batch(wiring, [again])(wiring, again)
    # Then the entry names the new version in a new segment, and the one it replaced is kept
    entry = wiring.catalog.get_record(item.record_id)
    assert entry is not None and entry.record_key != before.record_key
    versions = record_versions(wiring.store, entry)
    assert [latest for _key, _digest, latest in versions] == [False, True]
    kept = json.loads(wiring.store.get(versions[0][0]))
    assert kept == item.record and versions[0][1] == before.content_hash[:32]
    assert json.loads(wiring.store.get(versions[1][0]))["schema:name"] == "Renamed"
    assert first.outcome is Outcome.RECORD


def test_a_withdrawn_record_in_a_segment_is_marked_in_its_entry_and_no_object_is_written(
    tmp_path: Path,
) -> None:
    # Given a URL indexed with segments, which the source's sitemap no longer lists
    wiring = _segmented(_wiring(tmp_path))
    (job,) = _jobs(["a.example"])
    outcome = index_batch(wiring, [job])(wiring, job)
    segments = {key: wiring.store.get(key) for key in wiring.store.list("")}
    sitemap = decode_staged(job.staged or "").sitemap
    assert sitemap is not None
    # When the next run closes, having read that sitemap whole
    withdrawn = withdraw_vanished(
        wiring, "r2", sitemaps=[sitemap], entry_urls=["https://a.example/robots.txt"]
    )
    # Then the URL's records are withdrawn in the catalogue, and the store is as it was (a
    # segment is never rewritten, and no object is written under a reference)
    assert withdrawn == [job.url]
    for ref in outcome.records:
        entry = wiring.catalog.get_record(ref.record_id)
        assert entry is not None and entry.withdrawn_at
    assert {key: wiring.store.get(key) for key in wiring.store.list("")} == segments


class _CountedStore(DirectoryObjectStore):
    """The directory store, counting reads; ``hide_signposts`` hides segments' signposts (as a
    segment written before them has none)."""

    def __init__(self, root: Path, *, hide_signposts: bool = False) -> None:
        super().__init__(root)
        self.hide_signposts = hide_signposts
        self.reads: list[str] = []

    def get(self, key: str) -> bytes:
        self.reads.append(key)
        if self.hide_signposts and key.endswith(".signposts.json"):
            raise KeyError(key)
        return super().get(key)


def test_the_signmap_reads_one_object_per_segment_and_lists_what_each_record_gives(
    tmp_path: Path,
) -> None:
    # Given two batches of a source's valid records indexed into segments
    wiring = _segmented(_wiring(tmp_path))
    jobs = _jobs(["a.example"] * 6)
    for batch in (jobs[:4], jobs[4:]):
        stage = index_batch(wiring, batch)
        for job in batch:
            stage(wiring, job)
    entries = [e for e in wiring.catalog.records("a.example") if e.valid]
    assert len(entries) >= len(jobs)
    segments = sorted(key for key in wiring.store.list("segments/") if key.endswith(".seg"))
    assert len(segments) == 2  # noqa: PLR2004

    # When the Signmap is built with the segments' signposts, and again without them
    root = tmp_path / "store"
    with_signposts = replace(wiring, store=_CountedStore(root))
    key = build_source_signmap(with_signposts, "a.example")
    listed = with_signposts.store.get(key)
    without = replace(wiring, store=_CountedStore(root, hide_signposts=True))
    (root / key).unlink()
    assert build_source_signmap(without, "a.example") == key
    read_each = without.store.get(key)

    # Then both list the same, which is not nothing
    assert listed == read_each
    assert b"<url>" in listed and b"<rs:ln " in listed
    # And the first read one object per segment (and the Signmap it replaces), not the records
    assert isinstance(with_signposts.store, _CountedStore)
    assert isinstance(without.store, _CountedStore)
    assert sorted(with_signposts.store.reads[:-2]) == sorted(
        segment_signposts_key(segment) for segment in segments
    )
    assert len(without.store.reads) >= 2 * len(entries)
