"""Records: ``/records/{record_id}`` (operators, the publisher of the record's host).

The record id is a URL, percent-encoded into one path segment (every ``/`` as ``%2F``).

* ``GET /records/{record_id}``: its catalogue entry, with links to what follows;
* ``GET /records/{record_id}/report``: its validation report (JSON);
* ``GET /records/{record_id}/pid-kernel``: its PID Kernel view (JSON);
* ``GET /records/{record_id}/linkset``: its Signposting linkset, by ``Accept``
  ``application/linkset+json`` (the default) or ``application/linkset`` (RFC 9264).

A record that is not valid has a report but no views.
"""

from http import HTTPStatus
from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import publisher_may_read_record
from cdif_harvester.api.errors import Forbidden, NotAcceptable, NotFound
from cdif_harvester.api.models import MAX_URL_LENGTH, RecordView
from cdif_harvester.api.negotiation import negotiate
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.responses import JSON, document_response, documented, json_response
from cdif_harvester.keys import record_hash, view_key
from cdif_harvester.model import CatalogEntry, entry_to_dict

__all__ = ["LINKSET_MEDIA_TYPES", "router"]

#: The linkset's representations (RFC 9264), the first the default.
LINKSET_MEDIA_TYPES = ("application/linkset+json", "application/linkset")
# The longest path segment of a record id: a URL, every character percent-encoded.
_MAX_ENCODED_ID = 3 * MAX_URL_LENGTH

RecordIdParam = Annotated[
    str,
    Path(
        min_length=1,
        max_length=_MAX_ENCODED_ID,
        description="The metadata record id, percent-encoded (every '/' as %2F).",
    ),
]


def _visible_record(ctx: RouteContext, encoded_id: str) -> CatalogEntry:
    """The catalogue entry of the (percent-encoded) record id if the caller may see it;
    raises NotFound or Forbidden."""
    record_id = unquote(encoded_id)
    entry = ctx.wiring().catalog.get_record(record_id)
    if entry is None:
        raise NotFound(f"no record {record_id!r} in the catalogue")
    who = ctx.caller()
    if not who.operator and not publisher_may_read_record(who, entry, ctx.registry().sources()):
        raise Forbidden(
            f"record {record_id!r} was harvested from {entry.url}, which is not on a host "
            "of a source this API key publishes"
        )
    return entry


def _view_of(ctx: RouteContext, entry: CatalogEntry, view: str) -> bytes:
    """One view of a valid record; raises NotFound (or TooLargeToServe)."""
    if not entry.valid:
        raise NotFound(
            f"record {entry.record_id!r} is not valid: it has no views (its report says why)"
        )
    key = view_key(entry.source, record_hash(entry.record_id), view)
    return ctx.stored(key, f"the {view} view of record {entry.record_id!r} is not written yet")


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of ``/records/{record_id}`` and its report and views, answering
    through ``ctx``."""
    routes = new_router()

    @routes.get(
        "/records/<record_id>",
        summary="A record's catalogue entry (operators, the publisher of its host)",
        operation_id="getRecord",
        tags=["records"],
        responses=documented({200: ("The catalogue entry.", RecordView, JSON)}, 400, 403, 404),
    )
    def get_record(record_id: RecordIdParam) -> Response[str]:
        entry = _visible_record(ctx, record_id)
        links = {"report": ctx.link("records", entry.record_id, "report")}
        if entry.valid:
            links["pid-kernel"] = ctx.link("records", entry.record_id, "pid-kernel")
            links["linkset"] = ctx.link("records", entry.record_id, "linkset")
        return json_response(HTTPStatus.OK, {**entry_to_dict(entry), "links": links})

    @routes.get(
        "/records/<record_id>/report",
        summary="A record's validation report (operators, the publisher of its host)",
        operation_id="getRecordReport",
        tags=["records"],
        responses=documented({200: ("The validation report.", None, JSON)}, 400, 403, 404, 501),
    )
    def get_record_report(record_id: RecordIdParam) -> Response[str]:
        entry = _visible_record(ctx, record_id)
        body = ctx.stored(entry.report_key, f"the report of record {entry.record_id!r} is gone")
        return document_response(body, JSON)

    @routes.get(
        "/records/<record_id>/pid-kernel",
        summary="A record's PID Kernel view (operators, the publisher of its host)",
        operation_id="getRecordPidKernel",
        tags=["records"],
        responses=documented({200: ("The PID Kernel view.", None, JSON)}, 400, 403, 404, 501),
    )
    def get_record_pid_kernel(record_id: RecordIdParam) -> Response[str]:
        return document_response(_view_of(ctx, _visible_record(ctx, record_id), "pid-kernel"), JSON)

    @routes.get(
        "/records/<record_id>/linkset",
        summary="A record's Signposting linkset (operators, the publisher of its host)",
        description="Content negotiation on Accept: application/linkset+json (the default) "
        "or application/linkset (RFC 9264); 406 when Accept allows neither.",
        operation_id="getRecordLinkset",
        tags=["records"],
        responses=documented(
            {200: ("The linkset.", None, LINKSET_MEDIA_TYPES[0])}, 400, 403, 404, 406, 501
        ),
    )
    def get_record_linkset(record_id: RecordIdParam) -> Response[str]:
        entry = _visible_record(ctx, record_id)
        media_type = negotiate(ctx.header("accept"), LINKSET_MEDIA_TYPES)
        if media_type is None:
            raise NotAcceptable(
                f"Accept allows neither {' nor '.join(LINKSET_MEDIA_TYPES)}",
            )
        view = "linkset-json" if media_type == LINKSET_MEDIA_TYPES[0] else "linkset"
        return document_response(_view_of(ctx, entry, view), media_type, {"Vary": "Accept"})

    return routes
