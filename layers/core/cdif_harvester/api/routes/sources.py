"""The sources registry: ``/sources``.

* ``POST /sources``: register a source (operators; 201, 409 when it exists);
* ``PUT /sources/{source_id}``: create or replace one (operators; keeps when and how it last
  ran, and its run under way);
* ``GET /sources``: list them by id, a page at a time (operators);
* ``GET /sources/{source_id}``: read one (operators, its publisher);
* ``DELETE /sources/{source_id}``: remove one (operators; its records and runs stay).
"""

from dataclasses import replace
from datetime import datetime
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import Caller, require_operator, require_source_access
from cdif_harvester.api.errors import ApiError, Conflict
from cdif_harvester.api.models import (
    SOURCE_ID_PATTERN,
    NewSource,
    SourceList,
    SourceReplacement,
    SourceView,
)
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.responses import JSON, documented, json_response, next_link
from cdif_harvester.model import Source, source_to_dict
from cdif_harvester.stages.sources import UnknownSource, check_source
from cdif_harvester.wiring import Wiring

__all__ = ["MAX_SOURCES_PAGE", "SOURCES_PAGE", "SourceIdParam", "router"]

#: Sources per page of ``GET /sources``: the default and the most.
SOURCES_PAGE = 100
MAX_SOURCES_PAGE = 1000

#: The ``{source_id}`` path parameter (of this resource and of its Signmap and harvests).
SourceIdParam = Annotated[str, Path(pattern=SOURCE_ID_PATTERN, description="The source's id.")]


def _now(wiring: Wiring) -> str:
    when: datetime = wiring.clock.now()
    return when.isoformat(timespec="seconds")


def _source_of_body(body: NewSource | SourceReplacement, source_id: str) -> Source:
    return Source(
        source_id=source_id,
        entry_url=body.entry_url,
        hosts=tuple(body.hosts),
        schedule=body.schedule,
        requests_per_host=body.requests_per_host,
        crawl_delay=body.crawl_delay,
        options=dict(body.options),
        contact=body.contact,
        publisher_keys=tuple(body.publisher_keys),
    )


def _source_view(source: Source, caller: Caller) -> dict[str, Any]:
    view = source_to_dict(source)
    view["hosts"] = list(source.hosts)
    # Other publishers' key ids are none of a publisher's business.
    view["publisher_keys"] = list(source.publisher_keys) if caller.operator else [caller.key_id]
    return view


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of ``/sources`` and ``/sources/{source_id}``, answering through
    ``ctx``."""
    routes = new_router()

    @routes.post(
        "/sources",
        summary="Register a source (operators)",
        description="Registers a publisher for harvesting. The source is checked (entry URL, "
        "hosts, schedule, politeness, options, contact) and stored with its entry URL's host "
        "among its hosts.",
        operation_id="registerSource",
        tags=["sources"],
        responses=documented(
            {201: ("The source, as registered.", SourceView, JSON)}, 400, 403, 409, 413, 415
        ),
    )
    def register_source(body: Annotated[NewSource, Body()]) -> Response[str]:
        who = ctx.caller()
        require_operator(who, "registering a source")
        now = _now(ctx.wiring())
        source = check_source(_source_of_body(body, body.source_id))
        source = replace(source, created_at=now, updated_at=now)
        if not ctx.registry().add_source(source):  # atomic: two registrations, one wins
            raise Conflict(
                f"source {source.source_id!r} is registered already; "
                f"PUT /sources/{source.source_id} replaces it",
                error="source-exists",
            )
        return json_response(
            HTTPStatus.CREATED,
            _source_view(source, who),
            {"Location": ctx.link("sources", source.source_id)},
        )

    @routes.put(
        "/sources/<source_id>",
        summary="Create or replace a source (operators)",
        description="Replaces the whole registration; when and how it last ran, and its run "
        "under way, are kept.",
        operation_id="replaceSource",
        tags=["sources"],
        responses=documented(
            {
                200: ("The source, replaced.", SourceView, JSON),
                201: ("The source, created.", SourceView, JSON),
            },
            400,
            403,
            413,
            415,
        ),
    )
    def replace_source(
        source_id: SourceIdParam, body: Annotated[SourceReplacement, Body()]
    ) -> Response[str]:
        who = ctx.caller()
        require_operator(who, "replacing a source")
        if body.source_id is not None and body.source_id != source_id:
            raise ApiError(
                f"source_id {body.source_id!r} in the body differs from {source_id!r} in the path",
                error="invalid-request",
            )
        now = _now(ctx.wiring())
        old = ctx.registry().get_source(source_id)
        checked = check_source(_source_of_body(body, source_id))
        kept: dict[str, Any] = {"created_at": now}
        if old is not None:
            kept = {
                "created_at": old.created_at or now,
                "last_run_id": old.last_run_id,
                "last_run_at": old.last_run_at,
                "active_run": old.active_run,
            }
        source = replace(checked, **kept, updated_at=now)
        ctx.registry().put_source(source)
        if old is None:
            return json_response(
                HTTPStatus.CREATED,
                _source_view(source, who),
                {"Location": ctx.link("sources", source_id)},
            )
        return json_response(HTTPStatus.OK, _source_view(source, who))

    @routes.get(
        "/sources",
        summary="List the sources (operators)",
        operation_id="listSources",
        tags=["sources"],
        description=f"One page of at most limit sources (default {SOURCES_PAGE}, at most "
        f"{MAX_SOURCES_PAGE}), by id. When truncated is true, ask again with "
        "cursor=next_cursor (or follow the Link header).",
        responses=documented(
            {200: ("One page of the registered sources, by id.", SourceList, JSON)},
            400,
            403,
            paginated=True,
        ),
    )
    def list_sources(
        limit: Annotated[int, Query(ge=1, le=MAX_SOURCES_PAGE)] = SOURCES_PAGE,
        cursor: Annotated[
            str | None,
            Query(pattern=SOURCE_ID_PATTERN, description="next_cursor of a page."),
        ] = None,
    ) -> Response[str]:
        who = ctx.caller()
        require_operator(who, "listing the sources")
        # The registry answers by id: the cursor is the last id of the page before.
        after = [s for s in ctx.registry().sources() if cursor is None or s.source_id > cursor]
        page = after[:limit]
        truncated = len(after) > limit
        next_cursor = page[-1].source_id if truncated else None
        return json_response(
            HTTPStatus.OK,
            {
                "sources": [_source_view(s, who) for s in page],
                "count": len(page),
                "truncated": truncated,
                "next_cursor": next_cursor,
            },
            next_link(ctx.link("sources"), ctx.query(), next_cursor),
        )

    @routes.get(
        "/sources/<source_id>",
        summary="Read a source (operators, its publisher)",
        operation_id="getSource",
        tags=["sources"],
        responses=documented({200: ("The source.", SourceView, JSON)}, 400, 403, 404),
    )
    def get_source(source_id: SourceIdParam) -> Response[str]:
        who = ctx.caller()
        source = ctx.registered(source_id)
        require_source_access(who, source, "reading this source")
        return json_response(HTTPStatus.OK, _source_view(source, who))

    @routes.delete(
        "/sources/<source_id>",
        summary="Remove a source (operators)",
        description="Its records and runs stay in the catalogue.",
        operation_id="deleteSource",
        tags=["sources"],
        responses=documented({204: ("Removed.", None, "")}, 400, 403, 404),
    )
    def delete_source(source_id: SourceIdParam) -> Response[str]:
        require_operator(ctx.caller(), "removing a source")
        if not ctx.registry().delete_source(source_id):
            raise UnknownSource(f"no source {source_id!r} is registered")
        return Response(status_code=HTTPStatus.NO_CONTENT.value, body="")

    return routes
