"""The AWS adapters against the moto stack made from template.yaml."""

from __future__ import annotations

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog, S3ObjectStore, SqsQueue
from cdif_harvester.errors import StorageError
from cdif_harvester.model import CatalogEntry, Outcome, RecordRef, UrlOutcome
from tests.support.aws import ProvisionedStack

pytestmark = pytest.mark.aws


def test_s3_store_round_trip(stack: ProvisionedStack) -> None:
    store = S3ObjectStore(boto3.client("s3", region_name=stack.region), stack.bucket_name)
    store.put("records/s/b.jsonld", b"{}", content_type="application/ld+json")
    store.put("records/s/a.jsonld", b"[]")
    assert store.get("records/s/a.jsonld") == b"[]"
    assert store.exists("records/s/b.jsonld") and not store.exists("records/s/zz.jsonld")
    assert list(store.list("records/s/")) == ["records/s/a.jsonld", "records/s/b.jsonld"]
    with pytest.raises(KeyError):
        store.get("records/s/zz.jsonld")
    with pytest.raises(StorageError):
        S3ObjectStore(boto3.client("s3", region_name=stack.region), "no-such-bucket").put("k", b"")


def test_dynamo_catalogue_round_trip_with_pagination(stack: ProvisionedStack) -> None:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = DynamoCatalog(table)
    ref = RecordRef(
        record_id="r",
        resource_id="d",
        valid=True,
        errors=(),
        record_key="records/s/k.jsonld",
        report_key="reports/s/k.json",
        view_keys={"pid-kernel": "views/s/k/pid-kernel.json"},
    )
    # enough long items to need more than one 1 MB query page
    for i in range(300):
        catalog.put_outcome(
            UrlOutcome(
                run_id="run",
                source="s",
                url=f"https://e.org/{i:04d}" + "x" * 4000,
                outcome=Outcome.RECORD,
                pattern="embedded-script",
                records=(ref,),
            )
        )
    outcomes = list(catalog.outcomes("run"))
    assert len(outcomes) == 300 and outcomes[0].records == (ref,)
    entry = CatalogEntry(
        record_id="https://e.org/md/" + "r" * 3000,  # longer than a DynamoDB sort key may be
        resource_id="d",
        source="s",
        url="https://e.org/1",
        title="T",
        pattern="embedded-script",
        valid=True,
        conformance=None,
        date_modified=None,
        sd_date_published=None,
        content_hash="h",
        record_key=None,
        report_key="reports/s/k.json",
        run_id="run",
        harvested_at="2026-01-01T00:00:00+00:00",
    )
    catalog.put_record(entry)
    assert catalog.get_record(entry.record_id) == entry and catalog.get_record("nope") is None


def test_sqs_queue_sends_in_batches_of_ten_with_delays(stack: ProvisionedStack) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    url = stack.queue_urls["UrlResolverQueue"]
    queue = SqsQueue(sqs, {"url": url})
    queue.send("url", [f"m{i}" for i in range(23)], delays=[0] * 13 + [60] * 10)
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert attributes == {
        "ApproximateNumberOfMessages": "13",
        "ApproximateNumberOfMessagesDelayed": "10",
    }
    with pytest.raises(StorageError, match="no queue URL"):
        queue.send("document", ["x"])
