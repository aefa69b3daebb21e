"""Real SDK failures under moto reach the callers of the AWS adapters as the harvester's errors:
a missing table or bucket, a throttled conditional write and a dropped connection (the last two
injected with botocore's own event hooks on moto-backed clients)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from cdif_harvester.adapters.aws import DynamoCatalog, S3ObjectStore
from cdif_harvester.errors import StorageError
from cdif_harvester.model import Source
from tests.support.aws import ProvisionedStack

pytestmark = pytest.mark.aws

# One attempt per call: the faults below would otherwise be retried by botocore first.
_ONE_TRY = Config(retries={"total_max_attempts": 1})


def _catalog(stack: ProvisionedStack, table_name: str | None = None) -> DynamoCatalog:
    dynamodb = boto3.resource("dynamodb", region_name=stack.region, config=_ONE_TRY)
    return DynamoCatalog(dynamodb.Table(table_name or stack.table_name))


def _answer(code: str) -> Any:
    """A before-call hook that makes DynamoDB answer ``code`` (HTTP 400) without sending."""

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None)
        parsed = {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return http, parsed

    return answer


def test_a_missing_table_is_a_storage_error_naming_the_operation(stack: ProvisionedStack) -> None:
    catalog = _catalog(stack, "no-such-table")
    with pytest.raises(StorageError, match=r"^DynamoDB get run r1 failed: ") as raised:
        catalog.get_run("r1")
    cause = raised.value.__cause__
    assert isinstance(cause, ClientError)
    assert cause.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_missing_bucket_is_not_a_missing_key(stack: ProvisionedStack) -> None:
    s3 = boto3.client("s3", region_name=stack.region)
    store = S3ObjectStore(s3, stack.bucket_name)
    with pytest.raises(KeyError):  # the key is absent: an answer, caught by name
        store.get("records/s/absent.jsonld")
    elsewhere = S3ObjectStore(s3, "no-such-bucket")
    with pytest.raises(StorageError, match=r"^S3 get records/s/a.jsonld failed: ") as raised:
        elsewhere.get("records/s/a.jsonld")  # the bucket is absent: a fault
    assert isinstance(raised.value.__cause__, ClientError)
    assert raised.value.__cause__.response["Error"]["Code"] == "NoSuchBucket"


def test_a_throttled_conditional_write_is_a_fault_not_a_failed_condition(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    catalog.put_source(Source(source_id="s1", entry_url="https://e.org/robots.txt"))
    assert catalog.claim_source("s1", "run-a", at="2026-01-01T00:00:00Z")
    # The failed condition is an answer: another run holds the source.
    assert not catalog.claim_source("s1", "run-b", at="2026-01-01T00:00:01Z")

    events = catalog.table.meta.client.meta.events
    events.register(
        "before-call.dynamodb.UpdateItem", _answer("ProvisionedThroughputExceededException")
    )
    with pytest.raises(StorageError, match=r"^DynamoDB claim source s1 failed: ") as raised:
        catalog.claim_source("s1", "run-b", at="2026-01-01T00:00:02Z")
    cause = raised.value.__cause__
    assert isinstance(cause, ClientError)
    assert cause.response["Error"]["Code"] == "ProvisionedThroughputExceededException"


def test_a_dropped_connection_is_a_storage_error(stack: ProvisionedStack) -> None:
    catalog = _catalog(stack)

    def drop(request: Any, **_: Any) -> None:
        raise EndpointConnectionError(endpoint_url=request.url)

    catalog.table.meta.client.meta.events.register("before-send.dynamodb.GetItem", drop)
    with pytest.raises(StorageError, match=r"^DynamoDB get source s1 failed: ") as raised:
        catalog.get_source("s1")
    assert isinstance(raised.value.__cause__, EndpointConnectionError)
