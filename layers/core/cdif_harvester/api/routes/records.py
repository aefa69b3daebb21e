"""Records: ``/records/{record_id}`` (operators, the publisher of the record's host).

The record id is a URL, percent-encoded into one path segment (every ``/`` as ``%2F``).

* ``GET /records/{record_id}``: its catalogue entry, with links to what follows;
* ``GET /records/{record_id}/report``: its validation report (JSON);
* ``GET /records/{record_id}/pid-kernel``: its PID Kernel view (JSON);
* ``GET /records/{record_id}/linkset``: its Signposting linkset, by ``Accept``
  ``application/linkset+json`` (the default) or ``application/linkset`` (RFC 9264);
* ``GET /records/{record_id}/views/{view}``: any of its views, by name;
* ``GET /sources/{source_id}/records``: a source's records, by CDIF profile and verdict
  (docs/decisions/0063-per-profile-verdicts.md), one page at a time.

A record that is not valid has a report but no views. Views are made from the stored record when
asked for, with an ``ETag`` and ``Cache-Control`` (docs/decisions/0081-views-derived-on-read.md).
"""

import hashlib
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester import __version__
from cdif_harvester.api.access import publisher_may_read_record, require_source_access
from cdif_harvester.api.errors import (
    ApiError,
    Forbidden,
    NotAcceptable,
    NotFound,
    TooLargeToServe,
)
from cdif_harvester.api.models import MAX_URL_LENGTH, RecordsPage, RecordView
from cdif_harvester.api.negotiation import negotiate
from cdif_harvester.api.routes.context import MAX_DOCUMENT_BYTES, RouteContext, new_router
from cdif_harvester.api.routes.cursors import (
    CURSOR_PATTERN,
    MAX_CURSOR,
    bad_cursor,
    read_cursor,
    write_cursor,
)
from cdif_harvester.api.routes.responses import (
    JSON,
    document_response,
    documented,
    json_response,
    next_link,
)
from cdif_harvester.api.routes.sources import SourceIdParam
from cdif_harvester.domain.records.validation import profile_query
from cdif_harvester.domain.views.nquads import NQuadsError
from cdif_harvester.keys import source_of
from cdif_harvester.model import CatalogEntry, ProfileQuery, Source, entry_to_dict
from cdif_harvester.stages.crosswalk import VIEW_MEDIA_TYPES, stored_record_view

__all__ = [
    "LINKSET_MEDIA_TYPES",
    "MAX_RECORDS_PAGE",
    "RECORDS_PAGE",
    "VIEW_CACHE_CONTROL",
    "router",
    "view_etag",
]

#: The linkset's representations (RFC 9264), the first the default.
LINKSET_MEDIA_TYPES = ("application/linkset+json", "application/linkset")
# The longest path segment of a record id: a URL, every character percent-encoded.
_MAX_ENCODED_ID = 3 * MAX_URL_LENGTH
RECORDS_PAGE = 100
MAX_RECORDS_PAGE = 1000
_VERDICT_PATTERN = r"^(valid|invalid|unknown)$"
_DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}([T ][0-9:.+Z-]{2,40})?$"
_HOST_PATTERN = r"^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$"
_VIEW_PATTERN = "^(" + "|".join(VIEW_MEDIA_TYPES) + ")$"
#: How long a client or an edge cache may reuse a view without asking again (it changes only
#: when the record is harvested again, at most as often as its source is scheduled); then it
#: revalidates with If-None-Match, which costs a catalogue read and no S3 request.
VIEW_CACHE_CONTROL = "max-age=300, must-revalidate"

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


def view_etag(entry: CatalogEntry, view: str) -> str:
    """The strong ``ETag`` of ``view`` of the record of ``entry``: it changes whenever the view's
    bytes can. A view is made from the record, its verdict and the links read (the entry's
    ``content_hash`` digests them), the URL and pattern it was harvested by, and this release's
    view builders."""
    parts = (entry.content_hash, entry.url, entry.pattern, view, __version__)
    return '"' + hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:32] + '"'


def _not_modified(ctx: RouteContext, etag: str) -> bool:
    """True when the request's If-None-Match names ``etag`` (or ``*``): the client holds it."""
    asked = ctx.header("if-none-match")
    if not asked:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in asked.split(",")}
    return "*" in tags or etag in tags


def _view_response(
    ctx: RouteContext,
    entry: CatalogEntry,
    view: str,
    media_type: str,
    headers: dict[str, str] | None = None,
) -> Response[str]:
    """One view of a valid record, made from its stored record (304 when the client holds it);
    raises NotFound (or TooLargeToServe)."""
    if not entry.valid:
        raise NotFound(
            f"record {entry.record_id!r} is not valid: it has no views (its report says why)"
        )
    etag = view_etag(entry, view)
    cache = {"ETag": etag, "Cache-Control": VIEW_CACHE_CONTROL, **(headers or {})}
    if _not_modified(ctx, etag):
        return Response(status_code=HTTPStatus.NOT_MODIFIED.value, body="", headers=cache)
    wiring = ctx.wiring()
    try:
        body = stored_record_view(wiring.store, wiring.contexts, entry, view)
    except KeyError:
        raise NotFound(f"the record or report of {entry.record_id!r} is gone") from None
    except NQuadsError as exc:  # as the crosswalk did: a record that is not RDF has no N-Quads
        raise NotFound(f"record {entry.record_id!r} has no {view} view: {exc}") from None
    if body is None:  # its report says invalid: the entry is of an earlier verdict
        raise NotFound(f"record {entry.record_id!r} is not valid: it has no views")
    if len(body) > MAX_DOCUMENT_BYTES:
        raise TooLargeToServe(
            f"the {view} view of {entry.record_id!r} is {len(body)} bytes; the API returns "
            f"documents of at most {MAX_DOCUMENT_BYTES} bytes: read the record from the bucket"
        )
    return document_response(body, media_type, cache)


def _entry_view(ctx: RouteContext, entry: CatalogEntry) -> dict[str, Any]:
    """The catalogue entry with the paths of its report and (valid records) views."""
    links = {"report": ctx.link("records", entry.record_id, "report")}
    if entry.valid:
        links["pid-kernel"] = ctx.link("records", entry.record_id, "pid-kernel")
        links["linkset"] = ctx.link("records", entry.record_id, "linkset")
        for view in VIEW_MEDIA_TYPES:
            links[f"views/{view}"] = ctx.link("records", entry.record_id, "views", view)
    return {**entry_to_dict(entry), "links": links}


def _catalogue_sources(source: Source, host: str | None) -> list[str]:
    """The catalogue's names (host and port) of the source's hosts, or of ``host`` alone."""
    if host is not None:
        return [source_of(f"https://{host.lower()}/")]
    urls = [source.entry_url, *(f"https://{name}/" for name in source.hosts)]
    return sorted({source_of(url) for url in urls})


def _records_page(
    ctx: RouteContext,
    names: list[str],
    cursor: str | None,
    *,
    limit: int,
    changed_since: str | None,
    query: ProfileQuery | None,
) -> tuple[list[CatalogEntry], str | None]:
    """One page of the records of the catalogue's ``names``, one name after the other, from
    ``cursor`` on; and the cursor of the next page (None: none). A page reads what it shows,
    not the whole source (decision 0105). Raises ApiError for a cursor no page gave."""
    first, after = read_cursor(cursor, len(names))
    catalog = ctx.wiring().catalog
    entries: list[CatalogEntry] = []
    for index in range(first, len(names)):
        if len(entries) == limit:  # full, with names left: the next page starts with them
            return entries, write_cursor(index, None)
        try:
            page = catalog.records_page(
                names[index],
                limit=limit - len(entries),
                after=after if index == first else None,
                changed_since=changed_since,
                query=query,
            )
        except ValueError as exc:
            raise bad_cursor() from exc
        entries.extend(page.items)
        if page.after is not None:
            return entries, write_cursor(index, page.after)
    return entries, None


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
        return json_response(HTTPStatus.OK, _entry_view(ctx, entry))

    @routes.get(
        "/sources/<source_id>/records",
        summary="The records of a source, by CDIF profile and verdict (operators, its publisher)",
        description=f"One page of at most limit catalogue entries (default {RECORDS_PAGE}, at "
        f"most {MAX_RECORDS_PAGE}) of the source's hosts (or of one, host), host by host, "
        "oldest change first: only those judged by profile (discovery/1.1, discovery for any "
        "version, or a conformance URI) with verdict (valid, invalid, unknown; without "
        "profile: the record's own verdict), changed at or after changed_since. When "
        "truncated is true, ask again with cursor=next_cursor (an opaque token); with a "
        "filter that keeps few records, a page may hold fewer than limit, even none, and "
        "still be truncated.",
        operation_id="listSourceRecords",
        tags=["sources"],
        responses=documented(
            {200: ("One page of records.", RecordsPage, JSON)}, 400, 403, 404, paginated=True
        ),
    )
    def list_source_records(  # noqa: PLR0913 - the route's query parameters
        source_id: SourceIdParam,
        *,
        profile: Annotated[
            str | None, Query(max_length=200, description="A CDIF profile, e.g. discovery/1.1.")
        ] = None,
        verdict: Annotated[
            str | None, Query(pattern=_VERDICT_PATTERN, description="valid, invalid or unknown.")
        ] = None,
        changed_since: Annotated[
            str | None, Query(pattern=_DATE_PATTERN, description="An ISO date or datetime.")
        ] = None,
        host: Annotated[
            str | None, Query(pattern=_HOST_PATTERN, description="One of the source's hosts.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_RECORDS_PAGE)] = RECORDS_PAGE,
        cursor: Annotated[
            str | None,
            Query(
                max_length=MAX_CURSOR,
                pattern=CURSOR_PATTERN,
                description="next_cursor of a page.",
            ),
        ] = None,
    ) -> Response[str]:
        who = ctx.caller()
        source = ctx.registered(source_id)
        require_source_access(who, source, "listing this source's records")
        try:
            query = profile_query(profile, verdict)
        except ValueError as exc:
            raise ApiError(str(exc), error="invalid-request") from exc
        if host is not None and host.lower() not in source.hosts:
            raise ApiError(
                f"{host} is not a host of source {source_id!r} "
                f"(its hosts: {', '.join(source.hosts)})",
                error="invalid-request",
            )
        names = _catalogue_sources(source, host)
        page, next_cursor = _records_page(
            ctx,
            names,
            cursor,
            limit=limit,
            changed_since=changed_since,
            query=query,
        )
        return json_response(
            HTTPStatus.OK,
            {
                "source_id": source_id,
                "records": [_entry_view(ctx, entry) for entry in page],
                "count": len(page),
                "truncated": next_cursor is not None,
                "next_cursor": next_cursor,
            },
            next_link(ctx.link("sources", source_id, "records"), ctx.query(), next_cursor),
        )

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
        return _view_response(ctx, _visible_record(ctx, record_id), "pid-kernel", JSON)

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
        return _view_response(ctx, entry, view, media_type, {"Vary": "Accept"})

    @routes.get(
        "/records/<record_id>/views/<view>",
        summary="One view of a record, by name (operators, the publisher of its host)",
        description="Made from the stored record when asked for: pid-kernel (application/json), "
        "linkset-json (application/linkset+json), linkset (application/linkset), link-header "
        "(the HTTP Link header value, text/plain), html-links (HTML <link> elements, text/html), "
        "nquads (application/n-quads). Answers carry an ETag and Cache-Control; "
        "If-None-Match with the ETag is answered 304.",
        operation_id="getRecordView",
        tags=["records"],
        responses=documented({200: ("The view.", None, "")}, 400, 403, 404, 501),
    )
    def get_record_view(
        record_id: RecordIdParam,
        view: Annotated[
            str, Path(pattern=_VIEW_PATTERN, description=", ".join(VIEW_MEDIA_TYPES) + ".")
        ],
    ) -> Response[str]:
        entry = _visible_record(ctx, record_id)
        return _view_response(ctx, entry, view, VIEW_MEDIA_TYPES[view])

    return routes
