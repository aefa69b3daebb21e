"""Crosswalk Lambda handler: S3 "record created" notifications (via SQS), acknowledged: a record's
views (PID Kernel, Signposting in four forms, N-Quads) are made when the API is asked for them,
not stored; see cdif_harvester.stages.crosswalk and docs/decisions/0081-views-derived-on-read.md.
With record segments (RecordSegments, the default) no record is stored under records/ and nothing
arrives here but S3's test event (docs/decisions/0086-record-segments.md)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import handle_s3_notifications, logger, metrics, tracer
from cdif_harvester.stages.crosswalk import note_record


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Acknowledge every record named in the batch (nothing is written)."""
    return handle_s3_notifications(event, context, note_record)
