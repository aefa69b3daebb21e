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

from cdif_harvester.adapters.local import InProcessQueue, MemoryObjectStore, SystemClock
from cdif_harvester.model import Outcome, UrlOutcome, UrlState
from cdif_harvester.stages.finish import STATE_CHUNK, withdraw_vanished
from cdif_harvester.wiring import Wiring
from tests.support.aws import ProvisionedStack, catalog_of, session_hooks
from tests.support.fakes import TableFetcher

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


def test_closing_reads_only_the_states_of_urls_without_an_outcome(
    stack: ProvisionedStack, read_keys: list[str]
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

    # Then the vanished URLs are withdrawn, and the URL items read are theirs alone
    assert withdrawn == sorted(VANISHED)
    url_reads = [key for key in read_keys if key.startswith("URL#")]
    assert len(url_reads) == len(VANISHED)
    assert {state.url for state in catalog.urls(SOURCE) if state.withdrawn_at} == set(VANISHED)
