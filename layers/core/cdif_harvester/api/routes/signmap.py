"""A source's Signmap: ``GET /sources/{source_id}/signmap`` (operators, its publisher).

The Signmap (a sitemap with Signposting links) of the source's valid records, as XML: of its
entry URL's host, or of another of its hosts (``?host=``). It is written when a run of the
source is closed.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import require_source_access
from cdif_harvester.api.errors import ApiError
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.responses import XML, document_response, documented
from cdif_harvester.api.routes.sources import SourceIdParam
from cdif_harvester.keys import signmap_key, source_of

__all__ = ["router"]

_HOST_PATTERN = r"^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$"


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of ``/sources/{source_id}/signmap``, answering through ``ctx``."""
    routes = new_router()

    @routes.get(
        "/sources/<source_id>/signmap",
        summary="The source's Signmap (operators, its publisher)",
        description="The Signmap (a sitemap with Signposting links) of the source's valid "
        "records, written at the end of each run: of its entry URL's host, or of another of "
        "its hosts (host).",
        operation_id="getSourceSignmap",
        tags=["sources"],
        responses=documented({200: ("The Signmap.", None, XML)}, 400, 403, 404, 501),
    )
    def get_source_signmap(
        source_id: SourceIdParam,
        host: Annotated[
            str | None,
            Query(pattern=_HOST_PATTERN, description="One of the source's hosts."),
        ] = None,
    ) -> Response[str]:
        who = ctx.caller()
        source = ctx.registered(source_id)
        require_source_access(who, source, "reading this source's Signmap")
        url = source.entry_url if host is None else f"https://{host.lower()}/"
        if host is not None and host.lower() not in source.hosts:
            raise ApiError(
                f"{host} is not a host of source {source_id!r} "
                f"(its hosts: {', '.join(source.hosts)})",
                error="invalid-request",
            )
        name = source_of(url)
        body = ctx.stored(
            signmap_key(name),
            f"no Signmap of {name} yet: it is written when a run of the source is closed",
        )
        return document_response(body, XML)

    return routes
