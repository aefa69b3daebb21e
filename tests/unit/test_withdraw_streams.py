"""Withdrawing the URLs a run no longer saw walks the sources' URLs beside the run's outcomes.

Both come from the catalogue in URL order (the port says so), which is what lets the walk hold
neither. A catalogue that broke that order must stop the walk rather than withdraw URLs the run
did read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import (
    InProcessQueue,
    MemoryObjectStore,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.errors import StorageError
from cdif_harvester.model import Outcome, UrlOutcome, UrlState
from cdif_harvester.ports import CatalogIndex
from cdif_harvester.stages.finish import withdraw_vanished
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

SITEMAP = "https://pub.example.org/sitemap.xml"
SOURCE = "pub.example.org"
URLS = [f"https://pub.example.org/d/{n:03d}.html" for n in range(20)]


class _Reversed:
    """The catalogue, listing a source's URLs backwards."""

    def __init__(self, inner: CatalogIndex) -> None:
        self._inner = inner

    def source_urls(self, source: str) -> Iterator[str]:
        return reversed(list(self._inner.source_urls(source)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_urls_listed_out_of_order_stop_the_walk_before_a_url_read_is_withdrawn(
    tmp_path: Path,
) -> None:
    catalog = SqliteCatalog(tmp_path / "c.sqlite")
    for url in URLS:
        catalog.put_url(UrlState(url=url, source=SOURCE, sitemap=SITEMAP))
    # The run read every URL but the first: only that one has vanished.
    catalog.put_outcomes([UrlOutcome("run", SOURCE, url, Outcome.NO_METADATA) for url in URLS[1:]])
    wiring = Wiring(
        store=MemoryObjectStore(),
        catalog=_Reversed(catalog),  # type: ignore[arg-type]
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )
    with pytest.raises(StorageError, match="not in URL order"):
        withdraw_vanished(wiring, "run", sitemaps=[SITEMAP], entry_urls=[SITEMAP])
    withdrawn = [state.url for state in catalog.urls(SOURCE) if state.withdrawn_at]
    assert set(withdrawn) <= {URLS[0]}
