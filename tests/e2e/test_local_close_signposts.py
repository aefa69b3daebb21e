"""Closing a local harvest writes the Signmap from the signposts the catalogue keeps with each
record's entry, made by the processes that read the documents: it reads no record, and writes
what reading every record and report gives (decision 0100)."""

from __future__ import annotations

from collections.abc import Iterator
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
from cdif_harvester.cli import runner
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import FetchResponse
from cdif_harvester.stages.crosswalk import build_source_signmap
from cdif_harvester.wiring import Wiring

pytestmark = pytest.mark.network


class _Counted(DirectoryObjectStore):
    """The output folder, noting every key read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def get(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get(key)


class _NoFetcher:
    def fetch(self, url: str, **_: Any) -> FetchResponse:
        raise AssertionError(f"fetched {url}")


@pytest.fixture
def harvested(site: PublisherSite, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A harvest of the demo site with two document processes, and the keys its closing read."""
    out = tmp_path / "out"
    counted = _Counted(out)
    close_run = runner.close_run

    def counted_close(wiring: Wiring, run_id: str, **options: Any) -> Any:
        return close_run(replace(wiring, store=counted), run_id, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "close_run", counted_close)
        with LocalHarvester(out, allow_loopback=True, processes=2) as harvester:
            harvester.harvest(site.url("/robots.txt"))
    yield out, counted.reads


def test_closing_a_local_harvest_reads_no_record_and_its_signmap_is_the_one_read_from_each(
    harvested: tuple[Path, list[str]],
) -> None:
    out, reads = harvested
    (signmap,) = sorted(out.glob("views/*/signmap.xml"))
    written = signmap.read_bytes()
    assert b"<url>" in written

    # Closing read no record (the publisher report still reads the reports it shows)
    assert [key for key in reads if key.startswith("records/")] == []

    # And the Signmap is the one made by reading each record and report, as before
    catalog = SqliteCatalog(out / "catalog.sqlite")
    wiring = Wiring(
        store=DirectoryObjectStore(out),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=_NoFetcher(),
        clock=SystemClock(),
    )
    source = signmap.parent.name
    assert list(catalog.kept_signposts(source))
    for entry in list(catalog.records(source)):
        catalog.put_record(entry)  # (an entry put so keeps no signposts)
    signmap.unlink()
    build_source_signmap(wiring, source)
    catalog.close()
    assert signmap.read_bytes() == written
