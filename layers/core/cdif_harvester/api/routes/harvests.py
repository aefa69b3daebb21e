"""Starting runs: ``POST /sources/{source_id}/harvests`` and ``POST /harvests``.

* ``POST /sources/{source_id}/harvests`` (operators, its publisher): a run of a registered
  source now, from its entry URL or from ``{"url": ...}`` on one of its hosts (403
  ``host-not-allowed`` otherwise; 409 ``source-busy`` while a run of it is under way);
* ``POST /harvests`` (operators): an ad-hoc harvest of any URL.

Both answer 202 with the run's status as ``Location``.
"""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import require_operator, require_source_access
from cdif_harvester.api.models import HarvestRequest, HarvestStarted, SourceHarvestRequest
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.responses import JSON, documented, json_response
from cdif_harvester.api.routes.sources import SourceIdParam
from cdif_harvester.keys import source_of
from cdif_harvester.stages.intake import start_harvest
from cdif_harvester.stages.sources import start_source_run

__all__ = ["TRIGGER", "router"]

#: How API Gateway runs are started (RunStatus.trigger).
TRIGGER = "api"


def _started(ctx: RouteContext, run_id: str, url: str, source_id: str | None) -> Response[str]:
    """202 for a run that started, its status as Location."""
    location = ctx.link("runs", run_id)
    body = {
        "run_id": run_id,
        "url": url,
        "source": source_of(url),
        "source_id": source_id,
        "run": location,
    }
    return json_response(HTTPStatus.ACCEPTED, body, {"Location": location})


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of the harvests (of a source, and ad hoc), answering through ``ctx``."""
    routes = new_router()

    @routes.post(
        "/sources/<source_id>/harvests",
        summary="Start a run of a source now (operators, its publisher)",
        description="Starts from the source's entry URL, or from the sitemap or robots.txt "
        "in the body, which must be on one of the source's hosts (403 host-not-allowed "
        "otherwise). One run of a source at a time (409 source-busy).",
        operation_id="startSourceHarvest",
        tags=["harvests"],
        responses=documented(
            {202: ("The run started; Location is its status.", HarvestStarted, JSON)},
            400,
            403,
            404,
            409,
            413,
            415,
        ),
    )
    def start_source_harvest(
        source_id: SourceIdParam,
        body: Annotated[SourceHarvestRequest | None, Body()] = None,
    ) -> Response[str]:
        who = ctx.caller()
        require_source_access(who, ctx.registered(source_id), "starting a harvest of this source")
        run = start_source_run(
            ctx.wiring(), source_id, trigger=TRIGGER, entry_url=body.url if body else None
        )
        return _started(ctx, run.run_id, run.entry_urls[0], source_id)

    @routes.post(
        "/harvests",
        summary="Start an ad-hoc harvest of any URL (operators)",
        operation_id="startHarvest",
        tags=["harvests"],
        responses=documented(
            {202: ("The run started; Location is its status.", HarvestStarted, JSON)},
            400,
            403,
            413,
            415,
        ),
    )
    def start_adhoc_harvest(body: Annotated[HarvestRequest, Body()]) -> Response[str]:
        require_operator(ctx.caller(), "an ad-hoc harvest of any URL")
        job = start_harvest(ctx.wiring(), body.url, options=body.options, trigger=TRIGGER)
        return _started(ctx, job.run_id, job.url, None)

    return routes
