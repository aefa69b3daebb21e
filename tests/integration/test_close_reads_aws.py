"""Closing a run on DynamoDB reads the states of the URLs the run had no outcome for, only.

Withdrawing vanished URLs walks every URL of the run's sources beside the run's outcomes. The
sources' URLs come from ``gsi1`` (which projects them); a state is read, a read unit each, only
for a URL the run did not settle. Before, every URL of the source was read whole at each close:
one read unit per URL per run, the largest read of an unchanged re-harvest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdif_harvester import external_sort
from cdif_harvester.adapters.local import InProcessQueue, MemoryObjectStore, SystemClock
from cdif_harvester.model import Outcome, UrlOutcome, UrlState
from cdif_harvester.stages.finish import STATE_CHUNK, withdraw_vanished
from cdif_harvester.wiring import Wiring
from tests.support.aws import ProvisionedStack, catalog_of, session_hooks
from tests.support.fakes import TableFetcher, catalog_entry

pytestmark = [pytest.mark.aws]

SOURCE = "pub.example.org"
SITEMAP = f"https://{SOURCE}/sitemap.xml"
URLS = [f"https://{SOURCE}/d/{n:03d}.html" for n in range(STATE_CHUNK + 30)]
VANISHED = URLS[5:8] + URLS[-2:]


@pytest.fixture
def read_keys(stack: ProvisionedStack) -> Iterator[list[str]]:
    """The ``pk`` of every item read by key (GetItem, BatchGetItem) while the test runs."""
    keys: list[str] = []

    def params(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem":
            keys.append(str(params["Key"]["pk"]))
        if model.name == "BatchGetItem":
            for request in params["RequestItems"].values():
                keys.extend(str(key["pk"]) for key in request["Keys"])

    with session_hooks([("provide-client-params.dynamodb", params)]):
        yield keys


@pytest.fixture(params=["in memory", "on disk"])
def ordering(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int] | None:
    """Listings put in order in memory (None), or on disk with a handful held at most: then
    how many pairs were held when each listing went to disk."""
    if request.param == "in memory":
        return None
    spills: list[int] = []
    monkeypatch.setattr(external_sort, "SPILL_AFTER", 7)
    on_disk = external_sort._on_disk

    def counted(held: Any, rest: Any, *, unique: bool) -> Any:
        spills.append(len(held))
        return on_disk(held, rest, unique=unique)

    monkeypatch.setattr(external_sort, "_on_disk", counted)
    return spills


def test_closing_reads_only_the_states_of_urls_without_an_outcome(
    stack: ProvisionedStack, read_keys: list[str], ordering: list[int] | None
) -> None:
    # Given a source whose URLs all held records, and a run that settled all but five
    catalog = catalog_of(stack)
    catalog.put_outcomes(
        [UrlOutcome("run-1", SOURCE, url, Outcome.RECORD) for url in URLS],
        states=[UrlState(url=url, source=SOURCE, sitemap=SITEMAP) for url in URLS],
    )
    catalog.put_outcomes(
        [UrlOutcome("run-2", SOURCE, url, Outcome.UNCHANGED) for url in URLS if url not in VANISHED]
    )
    wiring = Wiring(
        store=MemoryObjectStore(),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )
    read_keys.clear()

    # When the run is closed
    withdrawn = withdraw_vanished(wiring, "run-2", sitemaps=[SITEMAP], entry_urls=[SITEMAP])
    spilled = None if ordering is None else list(ordering)

    # Then the vanished URLs are withdrawn, and the URL items read are theirs alone
    assert withdrawn == sorted(VANISHED)
    url_reads = [key for key in read_keys if key.startswith("URL#")]
    assert len(url_reads) == len(VANISHED)
    assert {state.url for state in catalog.urls(SOURCE) if state.withdrawn_at} == set(VANISHED)
    # (on disk: the source's URLs and the run's outcomes, neither held whole to be ordered)
    assert spilled is None or spilled == [8, 8]


def test_a_large_sources_records_and_urls_come_in_order_the_same_through_disk(
    stack: ProvisionedStack, ordering: list[int] | None
) -> None:
    # Given record entries written in an order neither by id nor by URL, two naming one page
    catalog = catalog_of(stack)
    entries = [
        catalog_entry(f"https://doi.org/10.5072/r{(n * 37) % 40:02d}", url, source=SOURCE)
        for n, url in enumerate(URLS[:40])
    ]
    entries.append(catalog_entry("https://doi.org/10.5072/zz", URLS[3], source=SOURCE))
    for entry in entries:
        catalog.put_record(entry)

    # When the catalogue lists them, as closing a run does
    records = [entry.record_id for entry in catalog.records(SOURCE)]
    urls = list(catalog.source_urls(SOURCE))

    # Then by id and by URL, each URL once, whether ordered in memory or on disk
    assert records == sorted(entry.record_id for entry in entries)
    assert urls == sorted({entry.url for entry in entries})
    assert ordering is None or ordering == [8, 8]
