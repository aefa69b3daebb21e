"""Intake API Lambda handler: the routes of the HTTP intake API (see cdif_harvester.api)."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.api import build_api
from cdif_harvester.aws_runtime import logger, metrics, tracer, wiring

app = build_api(wiring)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Route the request."""
    metrics.add_metric(name="ApiRequests", unit="Count", value=1)
    return app.resolve(event, context)
