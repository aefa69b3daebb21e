"""AWS adapters: S3 as object store, DynamoDB as catalogue, SQS as job queue (boto3).

Clients are passed in (built lazily by :mod:`cdif_harvester.runtime`), never created at import
time. Every botocore error is wrapped in :class:`~cdif_harvester.errors.StorageError`, a retryable
error: the message is redelivered and, after maxReceiveCount tries, dead-lettered.

DynamoDB layout (single table, ``pk``/``sk``):

=============================  ===================  ==========================================
pk                             sk                   item
=============================  ===================  ==========================================
``RECORD#<record key>``        ``RECORD``           catalogue entry of a record
``RUN#<run id>``               ``URL#<url hash>``   outcome of a URL in a run
``URL#<url hash>``             ``LATEST``           latest outcome of a URL
=============================  ===================  ==========================================

``gsi1pk``/``gsi1sk`` index records by source (``SOURCE#<source>`` / ``RECORD#<key>``) and URL
outcomes by source (``SOURCE#<source>`` / ``URL#<url hash>``) for the operator queries of later
issues. URLs and record ids are keyed by their hashes (:func:`cdif_harvester.keys.url_hash`,
:func:`cdif_harvester.keys.record_key`, the same as in object keys) because DynamoDB limits a sort
key to 1,024 bytes and both may be longer; the values themselves are attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from cdif_harvester.errors import StorageError
from cdif_harvester.keys import record_key, url_hash
from cdif_harvester.model import (
    CatalogEntry,
    UrlOutcome,
    entry_from_dict,
    entry_to_dict,
    outcome_from_dict,
    outcome_to_dict,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_sqs.client import SQSClient

__all__ = ["DynamoCatalog", "S3ObjectStore", "SqsQueue"]

_SQS_BATCH = 10  # SendMessageBatch takes at most ten entries
_SQS_MAX_DELAY = 900  # seconds, the SQS limit on DelaySeconds


class S3ObjectStore:
    """Objects in one S3 bucket, under the documented key layout."""

    def __init__(self, client: S3Client, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Put ``body`` under ``key``. Raises StorageError."""
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                Metadata=dict(metadata or {}),
            )
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"S3 put {key} failed: {exc}") from exc

    def get(self, key: str) -> bytes:
        """Get the object under ``key``. Raises KeyError when absent, StorageError otherwise."""
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"NoSuchKey", "404"}:
                raise KeyError(key) from exc
            raise StorageError(f"S3 get {key} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 get {key} failed: {exc}") from exc

    def exists(self, key: str) -> bool:
        """Tell whether ``key`` holds an object (HEAD)."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return False
            raise StorageError(f"S3 head {key} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 head {key} failed: {exc}") from exc

    def list(self, prefix: str) -> Iterator[str]:
        """Yield the keys under ``prefix`` (S3 lists in key order)."""
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield item["Key"]
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"S3 list {prefix} failed: {exc}") from exc


class DynamoCatalog:
    """The catalogue in one DynamoDB table (see the module docstring for the item layout)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def put_record(self, entry: CatalogEntry) -> None:
        """Insert or replace the entry of ``entry.record_id``."""
        self._put(
            {
                "pk": f"RECORD#{record_key(entry.record_id)}",
                "sk": "RECORD",
                "record_id": entry.record_id,
                "gsi1pk": f"SOURCE#{entry.source}",
                "gsi1sk": f"RECORD#{record_key(entry.record_id)}",
                # Stored as a JSON document: DynamoDB cannot hold floats or empty strings
                # everywhere, and the entry is read whole anyway.
                "body": json.dumps(entry_to_dict(entry), sort_keys=True),
            }
        )

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        try:
            item = self.table.get_item(
                Key={"pk": f"RECORD#{record_key(record_id)}", "sk": "RECORD"}
            )
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"DynamoDB get {record_id} failed: {exc}") from exc
        found = item.get("Item")
        return entry_from_dict(json.loads(str(found["body"]))) if found else None

    def put_outcome(self, outcome: UrlOutcome) -> None:
        """Record the outcome of a URL in a run, and as the URL's latest outcome."""
        body = json.dumps(outcome_to_dict(outcome), sort_keys=True)
        url_key = f"URL#{url_hash(outcome.url)}"
        common = {
            "url": outcome.url,
            "outcome": outcome.outcome.value,
            "gsi1pk": f"SOURCE#{outcome.source}",
            "body": body,
        }
        self._put({"pk": f"RUN#{outcome.run_id}", "sk": url_key, **common})
        self._put({"pk": url_key, "sk": "LATEST", **common, "gsi1sk": url_key})

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield every outcome of ``run_id`` (paginated query on the run's partition)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :url)",
            "ExpressionAttributeValues": {":pk": f"RUN#{run_id}", ":url": "URL#"},
        }
        while True:
            try:
                page = self.table.query(**kwargs)
            except (BotoCoreError, ClientError) as exc:
                raise StorageError(f"DynamoDB query run {run_id} failed: {exc}") from exc
            for item in page.get("Items", []):
                yield outcome_from_dict(json.loads(str(item["body"])))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _put(self, item: dict[str, Any]) -> None:
        try:
            self.table.put_item(Item=item)
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"DynamoDB put {item['pk']} failed: {exc}") from exc


class SqsQueue:
    """Sends to the stage queues, addressed by logical name (sitemap, url, document, index)."""

    def __init__(self, client: SQSClient, urls: Mapping[str, str]) -> None:
        self.client = client
        self.urls = dict(urls)

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        """Send ``bodies`` in batches of ten; any entry SQS rejects raises StorageError.

        ``delays`` (seconds, one per body) become each entry's DelaySeconds, capped at 900.
        """
        try:
            url = self.urls[queue]
        except KeyError as exc:
            raise StorageError(f"no queue URL configured for {queue!r}") from exc
        for start in range(0, len(bodies), _SQS_BATCH):
            chunk = bodies[start : start + _SQS_BATCH]
            entries: list[dict[str, Any]] = [
                {"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)
            ]
            if delays is not None:
                for entry, delay in zip(entries, delays[start : start + _SQS_BATCH], strict=True):
                    entry["DelaySeconds"] = max(0, min(_SQS_MAX_DELAY, int(delay)))
            try:
                response = self.client.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
            except (BotoCoreError, ClientError) as exc:
                raise StorageError(f"SQS send to {queue} failed: {exc}") from exc
            failed = response.get("Failed", [])
            if failed:
                raise StorageError(f"SQS rejected {len(failed)} message(s) to {queue}: {failed}")
