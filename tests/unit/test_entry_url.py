"""The URL a RECORD item's entry names, read without the rest of the entry (decision 0102:
closing lists a source's URLs through its record entries)."""

from __future__ import annotations

import json

import pytest

from cdif_harvester.adapters.dynamo_items import entry_body, entry_url
from cdif_harvester.model import entry_to_dict
from tests.support.fakes import catalog_entry

ENTRY = catalog_entry(
    "https://pub.example.org/meta/1.jsonld",
    "https://pub.example.org/d/1.html",
    source="pub.example.org",
    resource_id="https://doi.org/10.5072/1",
    title="One",
    record_key="records/pub.example.org/x.jsonld",
    report_key="reports/pub.example.org/x.json",
)


def test_the_url_of_a_compact_body_and_of_an_earlier_whole_one() -> None:
    assert entry_url({"body": entry_body(ENTRY)}) == ENTRY.url
    assert entry_url({"body": json.dumps(entry_to_dict(ENTRY))}) == ENTRY.url


@pytest.mark.parametrize(
    "item",
    [{}, {"body": "{not json"}, {"body": "[1, 2]"}, {"body": '{"url": ""}'}, {"body": "{}"}],
    ids=["no-body", "not-json", "not-an-object", "empty-url", "no-url"],
)
def test_an_item_that_names_no_url_gives_none(item: dict[str, str]) -> None:
    assert entry_url(item) is None
