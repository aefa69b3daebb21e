"""Building a source's Signmap reads its records a window at a time.

The Signmap's readers (threads) must not run far ahead of the records written down: each one
read is a parsed report and record held until then. Writing each record down is slowed, so
readers free to run ahead would read the whole source first.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.keys import record_report_key
from cdif_harvester.stages import crosswalk
from cdif_harvester.stages.crosswalk import build_source_signmap
from tests.unit.test_crosswalk_signmap import SOURCE, _read, _store, _variant, _wiring
from tests.unit.test_crosswalk_stage import MemoryStore

RECORDS = 700
READERS = 16
AHEAD = 300  # records read and not yet written down, at most (a window and the readers)


def test_the_signmap_readers_stay_a_window_ahead_of_what_is_written_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    wiring = _wiring(tmp_path, store)
    for n in range(RECORDS):
        _store(wiring, SOURCE, *_variant(f"d{n:04d}"))
    reports = record_report_key(SOURCE, "-").rsplit("/", 1)[0] + "/"
    lock = threading.Lock()
    counts = {"read": 0, "done": 0, "ahead": 0}
    get = store.get

    def counting_get(key: str) -> bytes:
        if key.startswith(reports):
            with lock:
                counts["read"] += 1
        return get(key)

    signposts = crosswalk._signposts

    def slow_signposts(report: Any, record: Any) -> Any:
        with lock:
            counts["ahead"] = max(counts["ahead"], counts["read"] - counts["done"])
            counts["done"] += 1
        time.sleep(0.002)
        return signposts(report, record)

    monkeypatch.setattr(store, "get", counting_get)
    monkeypatch.setattr(crosswalk, "_signposts", slow_signposts)
    key = build_source_signmap(wiring, SOURCE, readers=READERS)
    assert len(_read(store.objects[key])) == RECORDS == counts["done"]
    assert counts["ahead"] <= AHEAD
