"""The AWS composition root: configuration from the environment, adapters, batch processing.

Lambda handlers import from here and stay thin. Configuration is read and validated once per
cold start; boto3 clients are built lazily on first use (never at import time) and cached for the
life of the execution environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from cdif_harvester.adapters.local import SystemClock
from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    INDEX_QUEUE,
    SITEMAP_QUEUE,
    URL_QUEUE,
    decode,
)
from cdif_harvester.errors import ContractError, PermanentError
from cdif_harvester.stages import Ports, run_job
from cdif_harvester.stages.crosswalk import keys_from_s3_event

__all__ = [
    "AwsConfig",
    "ConfigError",
    "handle_s3_notifications",
    "handle_sqs_batch",
    "logger",
    "metrics",
    "ports",
    "tracer",
]

logger = Logger()
metrics = Metrics()
tracer = Tracer()

_J = TypeVar("_J")


class ConfigError(RuntimeError):
    """The function's environment is missing a setting (a deployment error, not a data one)."""


@dataclass(frozen=True)
class AwsConfig:
    """Settings every function reads from its environment (see template.yaml)."""

    records_bucket: str
    catalog_table: str
    queue_urls: Mapping[str, str]
    allow_loopback: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AwsConfig:
        """Read and validate the settings. Raises ConfigError naming every missing variable."""
        required = ["RECORDS_BUCKET", "CATALOG_TABLE"]
        missing = [name for name in required if not env.get(name)]
        if missing:
            raise ConfigError(f"missing environment variable(s): {', '.join(missing)}")
        queues = {
            SITEMAP_QUEUE: env.get("SITEMAP_QUEUE_URL", ""),
            URL_QUEUE: env.get("URL_QUEUE_URL", ""),
            DOCUMENT_QUEUE: env.get("DOCUMENT_QUEUE_URL", ""),
            INDEX_QUEUE: env.get("INDEX_QUEUE_URL", ""),
        }
        return cls(
            records_bucket=env["RECORDS_BUCKET"],
            catalog_table=env["CATALOG_TABLE"],
            queue_urls={name: url for name, url in queues.items() if url},
            allow_loopback=env.get("ALLOW_LOOPBACK", "false").lower() == "true",
        )


@cache
def ports() -> Ports:
    """Build (once per execution environment) the ports of a Lambda function."""
    # Imported on first use, not at module import: keeps the handler's cold start light.
    import boto3  # noqa: PLC0415

    from cdif_harvester.adapters.aws import (  # noqa: PLC0415
        DynamoCatalog,
        S3ObjectStore,
        SqsQueue,
    )
    from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher  # noqa: PLC0415

    config = AwsConfig.from_env(os.environ)
    return Ports(
        store=S3ObjectStore(boto3.client("s3"), config.records_bucket),
        catalog=DynamoCatalog(boto3.resource("dynamodb").Table(config.catalog_table)),
        queue=SqsQueue(boto3.client("sqs"), config.queue_urls),
        fetcher=SafeFetcher(FetchPolicy(allow_loopback=config.allow_loopback)),
        clock=SystemClock(),
    )


def handle_sqs_batch(
    event: dict[str, Any],
    context: Any,
    contract: type[_J],
    stage: Callable[[Ports, _J], Any],
) -> dict[str, Any]:
    """Run ``stage`` on every SQS record of ``event``, reporting partial batch failures.

    A record whose body breaks its contract is logged and consumed (retrying cannot fix it);
    permanent errors become the URL's outcome; retryable errors fail only that record, which SQS
    redelivers and finally dead-letters. Raises ContractError when ``event`` is not an SQS
    event at all (a dict without ``Records`` is not an empty batch).
    """
    _require_sqs_event(event)
    processor = BatchProcessor(event_type=EventType.SQS)
    bundle = ports()

    def record_handler(record: SQSRecord) -> None:
        try:
            job = decode(record.body, contract)
        except ContractError as exc:
            logger.error(
                "message breaks its contract", message_id=record.message_id, error=str(exc)
            )
            metrics.add_metric(name="BadMessages", unit=MetricUnit.Count, value=1)
            return
        logger.append_keys(run_id=getattr(job, "run_id", None), url=getattr(job, "url", None))
        result = run_job(bundle, job, stage)  # type: ignore[type-var]
        outcome = getattr(result, "outcome", None)
        if outcome is not None:
            metrics.add_metric(name=f"Outcome_{outcome}", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="JobsProcessed", unit=MetricUnit.Count, value=1)

    metrics.add_metric(name="Batches", unit=MetricUnit.Count, value=1)
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return dict(response)


def handle_s3_notifications(
    event: dict[str, Any], context: Any, stage: Callable[[Ports, str], Any]
) -> dict[str, Any]:
    """Run ``stage`` on every object key of the S3 notifications carried by an SQS batch.

    A notification that names no record (the ``s3:TestEvent``, a key outside ``records/``) is
    logged and consumed.
    """
    _require_sqs_event(event)
    processor = BatchProcessor(event_type=EventType.SQS)
    bundle = ports()

    def record_handler(record: SQSRecord) -> None:
        try:
            notification = json.loads(record.body)
        except ValueError:
            logger.error("notification is not JSON", message_id=record.message_id)
            return
        for key in keys_from_s3_event(notification):
            try:
                stage(bundle, key)
            except PermanentError as exc:
                logger.warning("record not crosswalked", key=key, error=str(exc))
        metrics.add_metric(name="JobsProcessed", unit=MetricUnit.Count, value=1)

    metrics.add_metric(name="Batches", unit=MetricUnit.Count, value=1)
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return dict(response)


def _require_sqs_event(event: Any) -> None:
    """Refuse an event that is not an SQS batch (a dict without Records is not an empty batch)."""
    if not isinstance(event, dict) or not isinstance(event.get("Records"), list):
        metrics.add_metric(name="BadEvents", unit=MetricUnit.Count, value=1)
        raise ContractError("not an SQS event: no Records list")
