"""Indexer Lambda handler: one SQS batch -> one stage call per message.

With RECORD_SEGMENTS the batch is prepared first: its records and reports are written as one
segment object (cdif_harvester.stages.segments). Partial batch failures are reported; see
cdif_harvester.aws_runtime.handle_sqs_batch.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import handle_sqs_batch, logger, metrics, tracer
from cdif_harvester.contracts import IndexJob
from cdif_harvester.stages.index import index_records
from cdif_harvester.stages.segments import index_batch


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Process the batch; failed records are returned for SQS to redeliver."""
    return handle_sqs_batch(event, context, IndexJob, index_records, prepare=index_batch)
