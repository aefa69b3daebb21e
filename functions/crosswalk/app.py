"""Crosswalk Lambda handler: S3 "record created" notifications (via SQS) -> the views of each
record (PID Kernel, Signposting in four forms, N-Quads); see cdif_harvester.stages.crosswalk."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import handle_s3_notifications, logger, metrics, tracer
from cdif_harvester.stages.crosswalk import build_views


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Build the views of every record named in the batch."""
    return handle_s3_notifications(event, context, build_views)
