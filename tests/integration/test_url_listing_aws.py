"""A URL one of whose record entries names it is listed through that entry, not through an
index entry of its own (docs/decisions/0102-urls-listed-through-their-records.md).

On a first harvest each URL that gives a record wrote two ``gsi1`` entries: its LATEST item's
(the source's URL listing) and its record's (the source's record listing), a write unit each.
The record's entry names the URL, so the LATEST item stays out of ``gsi1`` while it does: the
source's URLs are the LATEST entries in ``gsi1`` and the URLs of its record entries. These tests
hold the DynamoDB catalogue to that, and to listing every URL all the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters import aws as aws_adapters
from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.adapters.local import InProcessQueue, MemoryObjectStore, SystemClock
from cdif_harvester.keys import record_hash, url_hash
from cdif_harvester.model import CatalogEntry, Outcome, UrlOutcome, UrlState
from cdif_harvester.stages.finish import withdraw_vanished
from cdif_harvester.wiring import Wiring
from tests.support.aws import ProvisionedStack, catalog_of, own_index_urls
from tests.support.fakes import TableFetcher, catalog_entry

pytestmark = [pytest.mark.aws]

SOURCE = "pub.example.org"
SITEMAP = f"https://{SOURCE}/sitemap.xml"
AT = "2026-12-01T10:00:00+00:00"


def _url(n: int) -> str:
    return f"https://{SOURCE}/d/{n:03d}.html"


def _entry(record_id: str, url: str, run_id: str = "run-1") -> CatalogEntry:
    return catalog_entry(record_id, url, source=SOURCE, run_id=run_id, harvested_at=AT)


def _state(url: str, *record_ids: str, run_id: str = "run-1") -> UrlState:
    return UrlState(
        url=url, source=SOURCE, sitemap=SITEMAP, record_ids=record_ids, harvest_run=run_id
    )


def _outcome(url: str, outcome: Outcome = Outcome.RECORD, run_id: str = "run-1") -> UrlOutcome:
    return UrlOutcome(run_id, SOURCE, url, outcome, recorded_at=AT)


def _latest(stack: ProvisionedStack, url: str) -> dict[str, Any]:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    item = table.get_item(Key={"pk": f"URL#{url_hash(url)}", "sk": "LATEST"}, ConsistentRead=True)
    return dict(item["Item"])


def _index_urls(stack: ProvisionedStack) -> set[str]:
    return own_index_urls(stack, SOURCE)


def _index_one(catalog: DynamoCatalog, url: str, record_id: str, run_id: str = "run-1") -> None:
    """What the indexer does for a URL with one new record: read its entry, put the entry,
    settle the URL with its state."""
    catalog.peek_record(record_id)
    catalog.put_record(_entry(record_id, url, run_id))
    catalog.put_outcomes([_outcome(url, run_id=run_id)], states=[_state(url, record_id)])


def test_a_url_its_record_names_has_no_index_entry_and_is_listed_all_the_same(
    stack: ProvisionedStack,
) -> None:
    catalog = catalog_of(stack)
    # Given URLs that gave a record each, and one that gave none
    for n in range(3):
        _index_one(catalog, _url(n), f"rec-{n}")
    catalog.put_outcomes([_outcome(_url(9), Outcome.FAILED)])

    # Then only the URL without a record has an index entry of its own
    assert _index_urls(stack) == {_url(9)}
    assert "gsi1sk" not in _latest(stack, _url(0))
    # and every URL is listed, in URL order, with its state
    assert list(catalog.source_urls(SOURCE)) == [_url(0), _url(1), _url(2), _url(9)]
    assert [s.url for s in catalog.urls(SOURCE)] == [_url(0), _url(1), _url(2), _url(9)]
    assert [s.url for s in catalog.urls(SOURCE, outcome="record")] == [_url(0), _url(1), _url(2)]


def test_a_url_whose_record_names_another_url_keeps_its_index_entry(
    stack: ProvisionedStack,
) -> None:
    # Given a record whose entry names page b, also published by page a
    catalog_of(stack).put_record(_entry("shared", _url(2)))
    catalog = catalog_of(stack)
    catalog.peek_record("shared")  # (the indexer reads the entry: it names page b)

    # When page a is settled with that record in its state
    catalog.put_outcomes([_outcome(_url(1))], states=[_state(_url(1), "shared")])

    # Then page a stays in the index: no record entry lists it
    assert _index_urls(stack) == {_url(1)}
    assert list(catalog.source_urls(SOURCE)) == [_url(1), _url(2)]


def test_a_catalogue_that_never_read_the_entry_keeps_the_index_entry(
    stack: ProvisionedStack,
) -> None:
    # Given an entry written by one catalogue (one Lambda) and a state by another
    catalog_of(stack).put_record(_entry("rec-1", _url(1)))
    catalog_of(stack).put_outcomes([_outcome(_url(1))], states=[_state(_url(1), "rec-1")])

    # Then the URL is listed by its own index entry: what it cannot tell, it lists
    assert _index_urls(stack) == {_url(1)}
    assert list(catalog_of(stack).source_urls(SOURCE)) == [_url(1)]


def test_a_record_moving_to_another_url_puts_the_first_url_back_in_the_index(
    stack: ProvisionedStack,
) -> None:
    # Given page a listed through its record
    catalog = catalog_of(stack)
    _index_one(catalog, _url(1), "shared")
    assert _index_urls(stack) == set()

    # When another page's harvest writes the record's entry naming itself
    other = catalog_of(stack)
    other.peek_record("shared")
    other.put_record(_entry("shared", _url(2), "run-2"))

    # Then page a is back in the index, and both pages are listed
    assert _index_urls(stack) == {_url(1)}
    assert list(other.source_urls(SOURCE)) == [_url(1), _url(2)]


def test_an_outcome_without_a_state_leaves_a_listed_url_out_of_the_index(
    stack: ProvisionedStack,
) -> None:
    # Given a URL listed through its record
    catalog = catalog_of(stack)
    _index_one(catalog, _url(1), "rec-1")

    # When later runs settle it without a state (unchanged by its lastmod, then failing)
    catalog.put_outcomes([_outcome(_url(1), Outcome.UNCHANGED, run_id="run-2")])
    catalog.put_outcomes([_outcome(_url(1), Outcome.FAILED, run_id="run-3")])

    # Then it is not put back in the index (a write unit each time for nothing)
    assert "gsi1sk" not in _latest(stack, _url(1))
    assert _latest(stack, _url(1))["outcome"] == "failed"
    assert list(catalog.source_urls(SOURCE)) == [_url(1)]


def test_a_url_whose_state_loses_its_records_goes_back_in_the_index(
    stack: ProvisionedStack,
) -> None:
    # Given a URL listed through its record
    catalog = catalog_of(stack)
    _index_one(catalog, _url(1), "rec-1")

    # When a later harvest finds no record there
    catalog.put_outcomes(
        [_outcome(_url(1), Outcome.NO_METADATA, run_id="run-2")],
        states=[_state(_url(1), run_id="run-2")],
    )

    # Then its own index entry lists it again
    assert _index_urls(stack) == {_url(1)}


def test_the_memo_of_entries_is_bounded(
    stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a catalogue that remembers two entries at most
    monkeypatch.setattr(aws_adapters, "_NAMED_MEMO", 2)
    catalog = catalog_of(stack)
    for n in range(3):
        catalog.put_record(_entry(f"rec-{n}", _url(n)))

    # Then it forgot the first ones, and the URL whose entry it forgot keeps its index entry
    assert len(catalog._named) <= 2
    catalog.put_outcomes([_outcome(_url(0))], states=[_state(_url(0), "rec-0")])
    catalog.put_outcomes([_outcome(_url(2))], states=[_state(_url(2), "rec-2")])
    assert _index_urls(stack) == {_url(0)}


def test_closing_withdraws_a_vanished_url_listed_through_its_record(
    stack: ProvisionedStack,
) -> None:
    # Given three pages listed through their records, and a run that settled two of them
    catalog = catalog_of(stack)
    for n in range(3):
        _index_one(catalog, _url(n), f"rec-{n}")
    assert _index_urls(stack) == set()
    catalog.put_outcomes([_outcome(_url(n), Outcome.UNCHANGED, run_id="run-2") for n in (0, 2)])
    wiring = Wiring(
        store=MemoryObjectStore(),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )

    # When the run is closed
    withdrawn = withdraw_vanished(wiring, "run-2", sitemaps=[SITEMAP], entry_urls=[SITEMAP])

    # Then the page the run did not see is withdrawn, its record with it
    assert withdrawn == [_url(1)]
    assert catalog.get_url(_url(1)).withdrawn_at is not None
    entry = catalog.get_record("rec-1")
    assert entry is not None and entry.withdrawn_at is not None
    assert replace(entry, withdrawn_at=None).url == _url(1)


def test_an_entry_written_over_an_unreadable_item_is_written_all_the_same(
    stack: ProvisionedStack,
) -> None:
    # Given a RECORD item no reader can read (a body that is not JSON)
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    key = {"pk": f"RECORD#{record_hash('rec-1')}", "sk": "RECORD"}
    table.put_item(Item={**key, "record_id": "rec-1", "body": "{not json"})

    # When an entry is put over it
    catalog = catalog_of(stack)
    catalog.put_record(_entry("rec-1", _url(1)))

    # Then it is written, and the item it replaced named no URL to put back in the index
    assert catalog.get_record("rec-1") == _entry("rec-1", _url(1))
    assert _index_urls(stack) == set()
