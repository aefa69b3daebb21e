"""A source's Signmap is built without holding its records in memory.

The records listed, the landing pages and the parts go to local disk or out as they are made:
what the build allocates must not grow with the source (a million records made some 300 MB
of keys and every part, up to 50 MB each, before). Measured with ``tracemalloc`` at two sizes;
the store keeps no part (a store's copy is not the build's).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import InProcessQueue, SqliteCatalog, SystemClock
from cdif_harvester.keys import record_hash, segment_key, segment_ref, segment_signposts_key
from cdif_harvester.model import TypedLink
from cdif_harvester.stages import crosswalk
from cdif_harvester.stages.crosswalk import Signposts, build_source_signmap, signposts_body
from cdif_harvester.wiring import Wiring
from tests.support.fakes import catalog_entry
from tests.unit.test_crosswalk_stage import MemoryStore, NoFetcher

SOURCE = "data.example.org"
PER_SEGMENT = 50


class PartsGoStore(MemoryStore):
    """A MemoryStore that keeps the segments' signposts but not the Signmap it is given."""

    def put(self, key: str, body: bytes, **kwargs: object) -> None:
        if key.startswith("views/"):
            self.puts.append(key)  # (written, and not held here)
            return
        super().put(key, body, **kwargs)  # type: ignore[arg-type]


def _source(tmp_path: Path, records: int) -> Wiring:
    store = PartsGoStore()
    catalog = SqliteCatalog(tmp_path / f"catalog-{records}.sqlite")
    for first in range(0, records, PER_SEGMENT):
        segment = segment_key(SOURCE, "2026-12-07", f"{first:08d}")
        signposts: dict[str, Signposts] = {}
        for number in range(first, min(first + PER_SEGMENT, records)):
            record_id = f"https://doi.org/10.5072/dataset.{number:07d}"
            page = f"https://{SOURCE}/datasets/{number:07d}.html"
            catalog.put_record(
                catalog_entry(
                    record_id,
                    page,
                    source=SOURCE,
                    record_key=segment_ref(segment, number * 3000, 2900),
                    report_key=segment_ref(segment, number * 3000 + 2900, 100),
                )
            )
            links = (
                TypedLink(record_id, "cite-as"),
                TypedLink(f"https://{SOURCE}/md/{number}.jsonld", "describedby"),
            )
            signposts[record_hash(record_id)] = (page, "2026-12-01", links)
        store.put(segment_signposts_key(segment), signposts_body(signposts))
    return Wiring(
        store=store,
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=SystemClock(),
    )


def _peak(wiring: Wiring) -> int:
    tracemalloc.start()
    try:
        build_source_signmap(wiring, SOURCE, max_urls=200, readers=2)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_signmap_build_holds_no_more_for_a_larger_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads go ahead by a window of objects (256 segments' signposts: bounded by design, some
    # megabytes); a window of 4 lets two small sources show what grows beyond it.
    monkeypatch.setattr(crosswalk, "_READ_WINDOW", 4)
    # (sizes beyond two of the SQLite catalogue's pages of 1,000 rows, which a read holds)
    small, large = _source(tmp_path, 2_000), _source(tmp_path, 6_000)
    _peak(small)  # (the first build imports and caches what any build needs)
    grown = _peak(large) - _peak(small)
    parts = [key for key in large.store.puts if "signmap-" in key]  # type: ignore[attr-defined]
    assert len(parts) == 30  # every record listed, 200 a part
    # about 300 bytes a record were held before (keys and places), and every part
    assert grown / 4_000 < 60, f"{grown / 4_000:.0f} bytes more per record"
