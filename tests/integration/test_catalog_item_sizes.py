"""The DynamoDB catalogue's items: under 1 KB for realistic records (one write unit each, by the
cost model's size rule, bench/cost_model.py), read back exactly, and items of the earlier,
larger shape still read as they were written (docs/decisions/0082-smaller-catalogue-writes.md).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.keys import (
    normalised_record_key,
    record_hash,
    record_report_key,
    url_hash,
    view_keys,
)
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RecordRef,
    RequestValidator,
    UrlOutcome,
    UrlState,
)
from tests.support.aws import ProvisionedStack

pytestmark = [pytest.mark.aws]

COST_MODEL = Path(__file__).resolve().parents[2] / "bench" / "cost_model.py"
KB = 1024
SOURCE = "data.example-observatory.org"
URL = f"https://{SOURCE}/datasets/ocean-temperature/2024/mooring-station-17-hourly.html"
RUN = "20261125T063938Z-6c7eafcf"
AT = "2026-11-25T06:39:40+00:00"


def _cost_model() -> Any:
    spec = importlib.util.spec_from_file_location("cost_model_sizes", COST_MODEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cost_model_sizes"] = module
    spec.loader.exec_module(module)
    return module


def _catalog(stack: ProvisionedStack) -> DynamoCatalog:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    return DynamoCatalog(table)


def _raw(stack: ProvisionedStack, pk: str, sk: str) -> dict[str, Any]:
    """The item as DynamoDB holds it (wire form), for the cost model's size rule."""
    client = boto3.client("dynamodb", region_name=stack.region)
    item = client.get_item(
        TableName=stack.table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )["Item"]
    return dict(item)


def _record_id(n: int) -> str:
    return f"https://{SOURCE}/metadata/ocean-temperature/mooring-station-17-hourly-{n}.jsonld"


def _ref(n: int, *, valid: bool) -> RecordRef:
    rhash = record_hash(_record_id(n))
    errors = (
        ()
        if valid
        else (
            "schema:subjectOf/schema:additionalType is required (Metadata record type, must "
            "include dcat:CatalogRecord, 1)",
            "schema:distribution/0/schema:encodingFormat is required (1)",
        )
    )
    return RecordRef(
        record_id=_record_id(n),
        resource_id=f"https://doi.org/10.5072/ocean-temperature.mooring-17.{n}",
        valid=valid,
        errors=errors,
        record_key=normalised_record_key(SOURCE, rhash),
        report_key=record_report_key(SOURCE, rhash),
        view_keys=view_keys(SOURCE, rhash) if valid else {},
        profiles=("core 1.1 valid", "discovery 1.1 valid")
        if valid
        else ("core 1.1: 2 errors", "discovery 1.1: 3 errors"),
    )


def _outcome(*refs: RecordRef) -> UrlOutcome:
    return UrlOutcome(
        run_id=RUN,
        source=SOURCE,
        url=URL,
        outcome=Outcome.RECORD,
        pattern="embedded-script",
        records=refs,
        recorded_at=AT,
    )


def _entry(n: int) -> CatalogEntry:
    rhash = record_hash(_record_id(n))
    return CatalogEntry(
        record_id=_record_id(n),
        resource_id=f"https://doi.org/10.5072/ocean-temperature.mooring-17.{n}",
        source=SOURCE,
        url=URL,
        title="Hourly sea water temperature and salinity at mooring station 17, 2024 "
        "(quality controlled)",
        pattern="embedded-script",
        valid=True,
        conformance="https://w3id.org/cdif/core/1.1",
        date_modified="2025-01-15",
        sd_date_published="2025-01-16",
        content_hash="ddf5c475d77befdef6cbe1f614604cd1d9a1f38a4a3add4bc07ec9a48bd8fe4c",
        record_key=normalised_record_key(SOURCE, rhash),
        report_key=record_report_key(SOURCE, rhash),
        run_id=RUN,
        harvested_at=AT,
        extra={"change": "new", "authority": "authoritative"},
        changed_at=AT,
        profiles={"core/1.1": "valid", "discovery/1.1": "valid", "dataDescription/1.1": "unknown"},
    )


def _state(*record_ids: str) -> UrlState:
    return UrlState(
        url=URL,
        source=SOURCE,
        sitemap=f"https://{SOURCE}/sitemaps/datasets-2024.xml",
        lastmod="2025-01-16T00:00:00Z",
        fingerprint="6e67f1f8a59bd104d8f5546a1bd4338569ab7451b2ff14d2ecac3bf240ff54ff",
        blocks=tuple(f"{n:064x}" for n in range(len(record_ids))),
        sd_dates=("2025-01-16",),
        record_ids=record_ids,
        harvest_run=RUN,
        # the page's answer and its linked record's, to be revalidated next time
        validators=(
            RequestValidator("GET", "", etag='"5f2a-61c3b7e04d2c0"'),
            RequestValidator(
                "GET",
                f"https://{SOURCE}/metadata/ocean-temperature/mooring-station-17-hourly.jsonld",
                accept="application/ld+json",
                last_modified="Thu, 16 Jan 2025 08:00:00 GMT",
            ),
        ),
    )


def test_realistic_items_are_under_one_kilobyte_and_read_back_exactly(
    stack: ProvisionedStack,
) -> None:
    size = _cost_model().item_size
    catalog = _catalog(stack)
    # A landing page with its record: valid (its views' keys, two profile verdicts), the
    # answers' validators kept for the next harvest
    outcome = _outcome(_ref(1, valid=True))
    catalog.put_url(_state(_record_id(1)))
    catalog.put_outcome(outcome)
    catalog.put_record(_entry(1))
    # and a page with two records, the second invalid (two errors): its run item
    two = replace(_outcome(_ref(1, valid=True), _ref(2, valid=False)), url=URL + "?two")
    catalog.put_outcome(two)

    latest = _raw(stack, f"URL#{url_hash(URL)}", "LATEST")
    in_run = _raw(stack, f"RUN#{RUN}", f"URL#{url_hash(two.url)}")
    record = _raw(stack, f"RECORD#{record_hash(_record_id(1))}", "RECORD")
    assert size(latest) < KB, size(latest)
    assert size(in_run) < KB, size(in_run)
    assert size(record) < KB, size(record)
    # and what was written is what is read
    assert sorted(catalog.outcomes(RUN), key=lambda o: o.url) == [outcome, two]
    assert catalog.get_record(_record_id(1)) == _entry(1)
    assert list(catalog.records(SOURCE)) == [_entry(1)]
    assert catalog.get_url(URL) == replace(
        _state(_record_id(1)), outcome="record", last_run=RUN, last_seen=AT
    )

    # what the keys cannot derive is kept: keys of another source, no record, nulls, empties
    moved = replace(
        _ref(3, valid=True),
        record_key=None,  # not normalised
        report_key=f"reports/elsewhere.org/{record_hash(_record_id(3))}.json",
        view_keys={"nquads": "views/elsewhere.org/x/record.nq"},
        profiles=(),
    )
    outcome = replace(
        _outcome(moved), run_id="run-2", reason="a reason", pattern=None, recorded_at=None
    )
    catalog.put_outcome(outcome)
    entry = replace(
        _entry(4),
        record_key=None,
        report_key="reports/elsewhere.org/r.json",
        title=None,
        changed_at=None,
        extra={},
        profiles={},
    )
    catalog.put_record(entry)
    bare = UrlState(url=URL, source=SOURCE)
    catalog.put_url(bare)

    assert list(catalog.outcomes("run-2")) == [outcome]
    assert catalog.get_record(entry.record_id) == entry
    assert catalog.get_record(_record_id(1)) == _entry(1)
    # the same outcome again: the LATEST item (outcome, run, time) is left as it was
    assert catalog.get_url(URL) == replace(bare, outcome="record", last_run=RUN, last_seen=AT)


def test_items_of_the_earlier_shape_still_read(stack: ProvisionedStack) -> None:
    """Items as the previous version wrote them: whole outcomes and entries as JSON bodies,
    nulls in the state, the outcome in the LATEST item's index key."""
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = _catalog(stack)
    outcome = _outcome(_ref(1, valid=True), _ref(2, valid=False))
    entry = _entry(1)
    state = replace(_state(_record_id(1), _record_id(2)), validators=())  # none kept then
    rhash = record_hash(entry.record_id)
    outcome_json = json.dumps(
        {
            "run_id": RUN,
            "source": SOURCE,
            "url": URL,
            "outcome": "record",
            "reason": None,
            "pattern": "embedded-script",
            "records": [
                {
                    "record_id": r.record_id,
                    "resource_id": r.resource_id,
                    "valid": r.valid,
                    "errors": list(r.errors),
                    "record": r.record_key,
                    "report": r.report_key,
                    "views": dict(r.view_keys),
                    "profiles": list(r.profiles),
                }
                for r in outcome.records
            ],
            "recorded_at": AT,
        },
        sort_keys=True,
    )
    table.put_item(
        Item={
            "pk": f"RUN#{RUN}",
            "sk": f"URL#{url_hash(URL)}",
            "url": URL,
            "outcome": "record",
            "body": outcome_json,
        }
    )
    harvest = {k: v for k, v in asdict(state).items() if k not in ("url", "source", "outcome")}
    harvest.pop("last_run"), harvest.pop("last_seen")
    table.put_item(
        Item={
            "pk": f"URL#{url_hash(URL)}",
            "sk": "LATEST",
            "url": URL,
            "source": SOURCE,
            "state": json.dumps(harvest, sort_keys=True),
            "outcome": "record",
            "last_run": RUN,
            "last_seen": AT,
            "body": outcome_json,
            "gsi1pk": f"SOURCE#{SOURCE}",
            "gsi1sk": f"URL#record#{url_hash(URL)}",
        }
    )
    table.put_item(
        Item={
            "pk": f"RECORD#{rhash}",
            "sk": "RECORD",
            "record_id": entry.record_id,
            "gsi1pk": f"SOURCE#{SOURCE}",
            "gsi1sk": f"RECORD#{AT}#{rhash}",
            "body": json.dumps(asdict(entry), sort_keys=True),
        }
    )

    assert list(catalog.outcomes(RUN)) == [outcome]
    assert catalog.get_record(entry.record_id) == entry
    assert list(catalog.records(SOURCE)) == [entry]
    read = replace(state, outcome="record", last_run=RUN, last_seen=AT)
    assert catalog.get_url(URL) == read
    assert list(catalog.urls(SOURCE)) == [read]
    assert list(catalog.urls(SOURCE, outcome="record")) == [read]
    assert list(catalog.urls(SOURCE, outcome="unchanged")) == []
    # a later outcome rewrites the older LATEST item in the new shape, in place
    catalog.put_outcome(replace(outcome, run_id="run-2", outcome=Outcome.UNCHANGED))
    assert [s.url for s in catalog.urls(SOURCE, outcome="unchanged")] == [URL]
    assert list(catalog.urls(SOURCE, outcome="record")) == []
    assert "body" not in _raw(stack, f"URL#{url_hash(URL)}", "LATEST")
