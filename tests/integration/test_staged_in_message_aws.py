"""On AWS (the template's stack in moto, the real handlers), the extractor's hand-over to the
indexer travels in the index job's message: a harvest of small pages stages nothing in the
bucket, and only a URL whose records pass the message's cap goes through ``staging/``
(docs/decisions/0085-staged-records-in-the-message.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.demo.server import PublisherSite
from tests.support import pipeline
from tests.support.aws import ProvisionedStack, read_stored

pytestmark = [pytest.mark.aws, pytest.mark.network]

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
RECORDS = 5  # the demo site's records
MANY = 120  # Datasets on one page whose hand-over passes the message's 200 KiB


def _harvest(stack: ProvisionedStack, url: str) -> None:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["body"] = json.dumps({"url": url})
    operator = event["requestContext"]["identity"]["apiKeyId"]
    answer = pipeline.invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert answer["statusCode"] == 202, answer  # noqa: PLR2004
    sqs = boto3.client("sqs", region_name=stack.region)
    stats = pipeline.run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")
    assert stats.failures == []


def _keys(stack: ProvisionedStack, prefix: str) -> list[str]:
    s3 = boto3.client("s3", region_name=stack.region)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket_name, Prefix=prefix)
    return [str(item["Key"]) for page in pages for item in page.get("Contents", [])]


def _stored_records(stack: ProvisionedStack) -> int:
    """How many records the catalogue names, each read from where its entry says (an object
    of its own or a range of a segment)."""
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    ids = {str(item["record_id"]) for item in table.scan()["Items"] if item.get("record_id")}
    catalog = DynamoCatalog(table)
    for record_id in ids:
        entry = catalog.get_record(record_id)
        assert entry is not None and entry.record_key is not None, record_id
        assert json.loads(read_stored(stack, entry.record_key))
    return len(ids)


def _staged_records(stack: ProvisionedStack) -> list[str]:
    """The extractor's hand-over objects (``staging/<run>/<url-hash>.json``): not the documents
    or journals that share the staging area."""
    return [key for key in _keys(stack, "staging/") if key.count("/") == 2]  # noqa: PLR2004


def _many_datasets_page() -> str:
    blocks = "".join(
        '<script type="application/ld+json">'
        + json.dumps(
            {
                "@context": "https://schema.org/",
                "@type": "Dataset",
                "@id": f"https://example.org/many#d{n}",
                "name": f"Dataset {n}",
                "description": f"Dataset number {n}. " + "Measured values. " * 80,
            }
        )
        + "</script>"
        for n in range(MANY)
    )
    return f"<!doctype html><html><head>{blocks}</head><body></body></html>"


def test_a_harvest_of_small_pages_stages_no_records_and_a_large_hand_over_still_is(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    # Given a harvest of the demo site, whose pages are small
    _harvest(stack, site.url("/robots.txt"))
    # Then every record is stored, and no hand-over object was written
    assert _stored_records(stack) == RECORDS
    assert _staged_records(stack) == []

    # Given a page of so many Datasets that their hand-over passes the message's cap
    site.add_route("/many.html", headers={"Content-Type": "text/html"}, body=_many_datasets_page())
    _harvest(stack, site.url("/many.html"))
    # Then it waited under the run's staging key, and every record was stored all the same
    (staged,) = _staged_records(stack)
    s3 = boto3.client("s3", region_name=stack.region)
    held = json.loads(s3.get_object(Bucket=stack.bucket_name, Key=staged)["Body"].read())
    assert len(held["records"]) == MANY
    assert _stored_records(stack) == RECORDS + MANY
