"""Scheduler Lambda handler: on the EventBridge schedule, start a run for each entry URL."""

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import logger, metrics, ports, tracer
from cdif_harvester.stages.intake import schedule_harvests


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Queue one sitemap job per configured entry URL; return the started run ids."""
    urls = os.environ.get("SCHEDULED_ENTRY_URLS", "").split(",")
    jobs = schedule_harvests(ports(), urls)
    logger.info("scheduled harvests", runs=[job.run_id for job in jobs])
    metrics.add_metric(name="RunsStarted", unit="Count", value=len(jobs))
    return {"runs": [{"run_id": job.run_id, "url": job.url} for job in jobs]}
