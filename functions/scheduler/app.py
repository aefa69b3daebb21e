"""Scheduler Lambda handler: on each EventBridge tick, start the runs of the sources that are due
and close the runs that finished (see cdif_harvester.stages.sources.tick)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import logger, metrics, tracer, wiring
from cdif_harvester.stages.sources import tick


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run one tick; return the runs started, closed and stalled."""
    result = tick(wiring())
    logger.info("scheduler tick", busy=result.busy, errors=result.errors)
    metrics.add_metric(name="RunsStarted", unit="Count", value=len(result.started))
    metrics.add_metric(name="RunsClosed", unit="Count", value=len(result.closed))
    metrics.add_metric(name="RunsStalled", unit="Count", value=len(result.stalled))
    return {
        "started": [{"run_id": r.run_id, "source_id": r.source_id} for r in result.started],
        "closed": result.closed,
        "stalled": result.stalled,
        "busy": result.busy,
        "errors": result.errors,
    }
