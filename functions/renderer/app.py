"""Renderer Lambda handler (a container image with Chromium): the URL jobs a resolver without a
browser handed on (the render queue), resolved again with a browser at hand.

See docs/decisions/0075-rendering-pages-in-a-browser.md and
docs/decisions/0079-rendering-on-aws-hand-over.md.
"""

from dataclasses import replace
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cdif_harvester.aws_runtime import browser, handle_sqs_batch, logger, metrics, tracer
from cdif_harvester.contracts import RENDER_QUEUE, UrlJob
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring


def _resolve(wiring: Wiring, job: UrlJob) -> Any:
    # With a browser wired in, the resolver renders itself: the job is never handed on again.
    return resolve_url(replace(wiring, renderer=browser()), job)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Process the batch; failed records are returned for SQS to redeliver."""
    return handle_sqs_batch(event, context, UrlJob, _resolve, queue=RENDER_QUEUE)
