"""The routes of the intake API (one Powertools REST resolver; see the package docstring)."""

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from http import HTTPStatus
from itertools import islice
from typing import Annotated, Any
from urllib.parse import quote, unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from cdif_harvester.api.access import (
    Caller,
    admit,
    operator_keys,
    publisher_may_read_record,
    require_operator,
    require_run_access,
    require_source_access,
)
from cdif_harvester.api.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotAcceptable,
    NotFound,
    TooLargeToServe,
    Unauthenticated,
    register_error_handlers,
)
from cdif_harvester.api.models import (
    MAX_URL_LENGTH,
    SOURCE_ID_PATTERN,
    ErrorBody,
    HarvestRequest,
    HarvestStarted,
    NewSource,
    OutcomesPage,
    RecordView,
    RunView,
    SourceHarvestRequest,
    SourceList,
    SourceReplacement,
    SourceView,
)
from cdif_harvester.api.negotiation import negotiate
from cdif_harvester.keys import record_hash, signmap_key, source_of, view_key
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RunStatus,
    Source,
    entry_to_dict,
    outcome_to_dict,
    run_to_dict,
    source_to_dict,
)
from cdif_harvester.ports import SourceRegistry
from cdif_harvester.stages.intake import start_harvest
from cdif_harvester.stages.sources import (
    UnknownSource,
    check_source,
    registry_of,
    start_source_run,
)
from cdif_harvester.wiring import Wiring

__all__ = ["LINKSET_MEDIA_TYPES", "build_api"]

#: The linkset's representations (RFC 9264), the first the default.
LINKSET_MEDIA_TYPES = ("application/linkset+json", "application/linkset")
JSON = "application/json"
HTML = "text/html; charset=utf-8"
XML = "application/xml"
#: Outcomes per page of ``GET /runs/{run_id}/outcomes``: the default and the most.
OUTCOMES_PAGE = 100
MAX_OUTCOMES_PAGE = 1000
#: The largest stored document a route returns: a Lambda response is at most 6 MB, JSON-encoded
#: (a document's quotes and non-ASCII characters grow when escaped).
MAX_DOCUMENT_BYTES = 5 * 1024 * 1024
#: How API Gateway runs are started (RunStatus.trigger).
TRIGGER = "api"
# The longest path segment of a record id: a URL, every character percent-encoded.
_MAX_ENCODED_ID = 3 * MAX_URL_LENGTH
_HOST_PATTERN = r"^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$"
_CURSOR_PATTERN = r"^\d{1,9}$"

SourceIdParam = Annotated[str, Path(pattern=SOURCE_ID_PATTERN, description="The source's id.")]
RunIdParam = Annotated[str, Path(min_length=1, max_length=128, description="The run's id.")]
RecordIdParam = Annotated[
    str,
    Path(
        min_length=1,
        max_length=_MAX_ENCODED_ID,
        description="The metadata record id, percent-encoded (every '/' as %2F).",
    ),
]

_ERRORS: dict[int, str] = {
    400: "The body or a parameter is invalid (error invalid-request, or the core's reason).",
    401: "The request carries no API key identity.",
    403: "This API key may not do this, or not to this resource.",
    404: "No such resource (yet).",
    406: "The Accept header allows none of the representations.",
    409: "The resource exists already, or a run of the source is under way.",
    413: "The body is larger than 8 KiB.",
    415: "The body is not application/json.",
    501: "The stored document is larger than a response may be; read it from the bucket.",
}


def _responses(
    ok: dict[int, tuple[str, type[BaseModel] | None, str]], *errors: int
) -> dict[int, OpenAPIResponse]:
    """OpenAPI responses: the successes (description, JSON model or None, media type) and
    the error statuses a route answers (401 on every route)."""
    documented: dict[int, OpenAPIResponse] = {}
    for status, (description, model, media_type) in ok.items():
        if model is not None:
            documented[status] = {
                "description": description,
                "content": {media_type: {"model": model}},
            }
        elif media_type:
            documented[status] = {
                "description": description,
                "content": {media_type: {"schema": {"type": "string"}}},
            }
        else:
            documented[status] = {"description": description}
    for status in sorted({401, *errors}):
        documented[status] = {
            "description": _ERRORS[status],
            "content": {JSON: {"model": ErrorBody}},
        }
    return documented


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


def _json(status: HTTPStatus, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status.value,
        content_type=JSON,
        body=json.dumps(body),
        headers=dict(headers or {}),
    )


def _document(
    body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> Response[str]:
    return Response(
        status_code=HTTPStatus.OK.value,
        content_type=content_type,
        body=body.decode("utf-8"),
        headers=dict(headers or {}),
    )


class _Requests:
    """What the routes of one API share: the caller, the wiring, links, and look-ups that
    refuse what the caller may not see."""

    def __init__(self, app: APIGatewayRestResolver, get_ports: Callable[[], Wiring]) -> None:
        self.app = app
        self.get_ports = get_ports

    def caller(self) -> Caller:
        """The admitted caller of the current request."""
        found = self.app.context.get("caller")
        if not isinstance(found, Caller):  # the admission middleware always sets it
            raise Unauthenticated("the request was not admitted")
        return found

    def wiring(self) -> Wiring:
        """The adapters (built on first use)."""
        return self.get_ports()

    def registry(self) -> SourceRegistry:
        """The sources registry."""
        return registry_of(self.get_ports())

    def base_path(self) -> str:
        """The API's own path prefix (the stage, or a custom domain's base path), so links
        and Location headers resolve against the API however it is reached."""
        event = self.app.current_event
        full = event.request_context.path or ""
        path = event.path
        return full[: -len(path)] if path and full.endswith(path) else ""

    def link(self, *segments: str) -> str:
        """The path of a resource of this API, each segment percent-encoded."""
        return self.base_path() + "".join("/" + quote(part, safe="") for part in segments)

    def registered(self, source_id: str) -> Source:
        """The source ``source_id``; raises UnknownSource."""
        source = self.registry().get_source(source_id)
        if source is None:
            raise UnknownSource(f"no source {source_id!r} is registered")
        return source

    def visible_run(self, run_id: str) -> RunStatus:
        """The run ``run_id`` if the caller may see it; raises NotFound or Forbidden."""
        run = self.get_ports().catalog.get_run(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r}")
        who = self.caller()
        if not who.operator:
            source = self.registry().get_source(run.source_id) if run.source_id else None
            require_run_access(who, run, source)
        return run

    def visible_record(self, encoded_id: str) -> CatalogEntry:
        """The catalogue entry of the (percent-encoded) record id if the caller may see it;
        raises NotFound or Forbidden."""
        record_id = unquote(encoded_id)
        entry = self.get_ports().catalog.get_record(record_id)
        if entry is None:
            raise NotFound(f"no record {record_id!r} in the catalogue")
        who = self.caller()
        if not who.operator and not publisher_may_read_record(
            who, entry, self.registry().sources()
        ):
            raise Forbidden(
                f"record {record_id!r} was harvested from {entry.url}, which is not on a host "
                "of a source this API key publishes"
            )
        return entry

    def stored(self, key: str, missing: str) -> bytes:
        """The object under ``key``; raises NotFound(``missing``) when there is none and
        TooLargeToServe when it does not fit in a response."""
        try:
            body = self.get_ports().store.get(key)
        except KeyError:
            raise NotFound(missing) from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise TooLargeToServe(
                f"{key} is {len(body)} bytes; the API returns documents of at most "
                f"{MAX_DOCUMENT_BYTES} bytes: read it from the records bucket"
            )
        return body

    def view_of(self, entry: CatalogEntry, view: str) -> bytes:
        """One view of a valid record; raises NotFound."""
        if not entry.valid:
            raise NotFound(
                f"record {entry.record_id!r} is not valid: it has no views (its report says why)"
            )
        key = view_key(entry.source, record_hash(entry.record_id), view)
        return self.stored(key, f"the {view} view of record {entry.record_id!r} is not written yet")

    def started(self, run_id: str, url: str, source_id: str | None) -> Response[str]:
        """202 for a run that started, its status as Location."""
        location = self.link("runs", run_id)
        body = {
            "run_id": run_id,
            "url": url,
            "source": source_of(url),
            "source_id": source_id,
            "run": location,
        }
        return _json(HTTPStatus.ACCEPTED, body, {"Location": location})


def build_api(
    get_ports: Callable[[], Wiring],
    *,
    get_operators: Callable[[], Iterable[str]] = operator_keys,
) -> APIGatewayRestResolver:
    """Return the intake API.

    ``get_ports`` builds the adapters on first use (never at import time); ``get_operators``
    returns the operator key ids (by default ``OPERATOR_API_KEY_IDS``).
    """

    def read_json(text: str) -> Any:
        # The request validation parses the body before any middleware runs: admit the request
        # here first, so that a caller without a key, or an oversized body, is refused before a
        # byte of it is parsed.
        admit(app.current_event.raw_event, get_operators())
        value = json.loads(text)
        if not isinstance(value, dict):
            # (Powertools would take the first item of a list for an object.)
            raise RequestValidationError(
                [{"loc": ("body",), "type": "dict_type", "msg": "the body must be a JSON object"}]
            )
        return value

    app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=read_json)
    register_error_handlers(app)

    def admission(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        app.context["caller"] = admit(app.current_event.raw_event, get_operators())
        return next_middleware(app)

    app.use([admission])
    requests = _Requests(app, get_ports)
    _source_routes(app, requests)
    _harvest_routes(app, requests)
    _run_routes(app, requests)
    _record_routes(app, requests)
    return app


def _source_routes(app: APIGatewayRestResolver, api: _Requests) -> None:
    """The sources registry: register, replace, list, read, remove; the Signmap."""

    @app.post(
        "/sources",
        summary="Register a source (operators)",
        description="Registers a publisher for harvesting. The source is checked (entry URL, "
        "hosts, schedule, politeness, options, contact) and stored with its entry URL's host "
        "among its hosts.",
        operation_id="registerSource",
        tags=["sources"],
        responses=_responses(
            {201: ("The source, as registered.", SourceView, JSON)}, 400, 403, 409, 413, 415
        ),
    )
    def register_source(body: Annotated[NewSource, Body()]) -> Response[str]:
        who = api.caller()
        require_operator(who, "registering a source")
        wiring = api.wiring()
        now = _now(wiring)
        source = check_source(_source_of_body(body, body.source_id))
        source = replace(source, created_at=now, updated_at=now)
        if not api.registry().add_source(source):  # atomic: two registrations, one wins
            raise Conflict(
                f"source {source.source_id!r} is registered already; "
                f"PUT /sources/{source.source_id} replaces it",
                error="source-exists",
            )
        return _json(
            HTTPStatus.CREATED,
            _source_view(source, who),
            {"Location": api.link("sources", source.source_id)},
        )

    @app.put(
        "/sources/<source_id>",
        summary="Create or replace a source (operators)",
        description="Replaces the whole registration; when and how it last ran, and its run "
        "under way, are kept.",
        operation_id="replaceSource",
        tags=["sources"],
        responses=_responses(
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
        who = api.caller()
        require_operator(who, "replacing a source")
        if body.source_id is not None and body.source_id != source_id:
            raise ApiError(
                f"source_id {body.source_id!r} in the body differs from {source_id!r} in the path",
                error="invalid-request",
            )
        wiring = api.wiring()
        now = _now(wiring)
        old = api.registry().get_source(source_id)
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
        api.registry().put_source(source)
        if old is None:
            return _json(
                HTTPStatus.CREATED,
                _source_view(source, who),
                {"Location": api.link("sources", source_id)},
            )
        return _json(HTTPStatus.OK, _source_view(source, who))

    @app.get(
        "/sources",
        summary="List the sources (operators)",
        operation_id="listSources",
        tags=["sources"],
        responses=_responses({200: ("Every registered source, by id.", SourceList, JSON)}, 403),
    )
    def list_sources() -> Response[str]:
        who = api.caller()
        require_operator(who, "listing the sources")
        return _json(
            HTTPStatus.OK, {"sources": [_source_view(s, who) for s in api.registry().sources()]}
        )

    @app.get(
        "/sources/<source_id>",
        summary="Read a source (operators, its publisher)",
        operation_id="getSource",
        tags=["sources"],
        responses=_responses({200: ("The source.", SourceView, JSON)}, 400, 403, 404),
    )
    def get_source(source_id: SourceIdParam) -> Response[str]:
        who = api.caller()
        source = api.registered(source_id)
        require_source_access(who, source, "reading this source")
        return _json(HTTPStatus.OK, _source_view(source, who))

    @app.delete(
        "/sources/<source_id>",
        summary="Remove a source (operators)",
        description="Its records and runs stay in the catalogue.",
        operation_id="deleteSource",
        tags=["sources"],
        responses=_responses({204: ("Removed.", None, "")}, 400, 403, 404),
    )
    def delete_source(source_id: SourceIdParam) -> Response[str]:
        require_operator(api.caller(), "removing a source")
        if not api.registry().delete_source(source_id):
            raise UnknownSource(f"no source {source_id!r} is registered")
        return Response(status_code=HTTPStatus.NO_CONTENT.value, body="")

    @app.get(
        "/sources/<source_id>/signmap",
        summary="The source's Signmap (operators, its publisher)",
        description="The Signmap (a sitemap with Signposting links) of the source's valid "
        "records, written at the end of each run: of its entry URL's host, or of another of "
        "its hosts (host).",
        operation_id="getSourceSignmap",
        tags=["sources"],
        responses=_responses({200: ("The Signmap.", None, XML)}, 400, 403, 404, 501),
    )
    def get_source_signmap(
        source_id: SourceIdParam,
        host: Annotated[
            str | None,
            Query(pattern=_HOST_PATTERN, description="One of the source's hosts."),
        ] = None,
    ) -> Response[str]:
        who = api.caller()
        source = api.registered(source_id)
        require_source_access(who, source, "reading this source's Signmap")
        url = source.entry_url if host is None else f"https://{host.lower()}/"
        if host is not None and host.lower() not in source.hosts:
            raise ApiError(
                f"{host} is not a host of source {source_id!r} "
                f"(its hosts: {', '.join(source.hosts)})",
                error="invalid-request",
            )
        name = source_of(url)
        body = api.stored(
            signmap_key(name),
            f"no Signmap of {name} yet: it is written when a run of the source is closed",
        )
        return _document(body, XML)


def _harvest_routes(app: APIGatewayRestResolver, api: _Requests) -> None:
    """Starting runs: of a registered source, or ad hoc."""

    @app.post(
        "/sources/<source_id>/harvests",
        summary="Start a run of a source now (operators, its publisher)",
        description="Starts from the source's entry URL, or from the sitemap or robots.txt "
        "in the body, which must be on one of the source's hosts (403 host-not-allowed "
        "otherwise). One run of a source at a time (409 source-busy).",
        operation_id="startSourceHarvest",
        tags=["harvests"],
        responses=_responses(
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
        who = api.caller()
        require_source_access(who, api.registered(source_id), "starting a harvest of this source")
        run = start_source_run(
            api.wiring(), source_id, trigger=TRIGGER, entry_url=body.url if body else None
        )
        return api.started(run.run_id, run.entry_urls[0], source_id)

    @app.post(
        "/harvests",
        summary="Start an ad-hoc harvest of any URL (operators)",
        operation_id="startHarvest",
        tags=["harvests"],
        responses=_responses(
            {202: ("The run started; Location is its status.", HarvestStarted, JSON)},
            400,
            403,
            413,
            415,
        ),
    )
    def start_adhoc_harvest(body: Annotated[HarvestRequest, Body()]) -> Response[str]:
        require_operator(api.caller(), "an ad-hoc harvest of any URL")
        job = start_harvest(api.wiring(), body.url, options=body.options, trigger=TRIGGER)
        return api.started(job.run_id, job.url, None)


def _run_routes(app: APIGatewayRestResolver, api: _Requests) -> None:
    """A run's progress, report and outcomes."""

    @app.get(
        "/runs/<run_id>",
        summary="A run's progress (operators, its source's publisher)",
        description="Its state (running, finished, stalled), the URLs entered, settled and "
        "queued, the sitemap jobs left, the settled URLs by outcome, and the path of its "
        "report once the run is closed.",
        operation_id="getRun",
        tags=["runs"],
        responses=_responses({200: ("The run's status.", RunView, JSON)}, 400, 403, 404),
    )
    def get_run(run_id: RunIdParam) -> Response[str]:
        run = api.visible_run(run_id)
        view = run_to_dict(run)
        view["report"] = api.link("runs", run.run_id, "report") if run.report_key else None
        return _json(HTTPStatus.OK, view)

    @app.get(
        "/runs/<run_id>/report",
        summary="A run's HTML report (operators, its source's publisher)",
        operation_id="getRunReport",
        tags=["runs"],
        responses=_responses({200: ("The report.", None, "text/html")}, 400, 403, 404, 501),
    )
    def get_run_report(run_id: RunIdParam) -> Response[str]:
        run = api.visible_run(run_id)
        if run.report_key is None:
            raise NotFound(
                f"run {run_id!r} has no report yet: it is written when the run is closed "
                f"(the run is {run.state.value})"
            )
        return _document(api.stored(run.report_key, f"the report of run {run_id!r} is gone"), HTML)

    @app.get(
        "/runs/<run_id>/outcomes",
        summary="A run's outcomes, URL by URL (operators, its source's publisher)",
        description=f"One page of at most limit outcomes (default {OUTCOMES_PAGE}, at most "
        f"{MAX_OUTCOMES_PAGE}); when truncated is true, ask again with cursor=next_cursor.",
        operation_id="listRunOutcomes",
        tags=["runs"],
        responses=_responses({200: ("One page of outcomes.", OutcomesPage, JSON)}, 400, 403, 404),
    )
    def list_run_outcomes(
        run_id: RunIdParam,
        limit: Annotated[int, Query(ge=1, le=MAX_OUTCOMES_PAGE)] = OUTCOMES_PAGE,
        cursor: Annotated[
            str | None, Query(pattern=_CURSOR_PATTERN, description="next_cursor of a page.")
        ] = None,
        outcome: Annotated[Outcome | None, Query(description="Only this outcome.")] = None,
    ) -> Response[str]:
        run = api.visible_run(run_id)
        start = int(cursor or 0)
        kept = (
            item
            for item in api.wiring().catalog.outcomes(run.run_id)
            if outcome is None or item.outcome is outcome
        )
        # One more than the page: whether another page follows, without counting them all.
        page = list(islice(kept, start, start + limit + 1))
        truncated = len(page) > limit
        page = page[:limit]
        return _json(
            HTTPStatus.OK,
            {
                "run_id": run.run_id,
                "outcomes": [outcome_to_dict(item) for item in page],
                "count": len(page),
                "truncated": truncated,
                "next_cursor": str(start + limit) if truncated else None,
            },
        )


def _record_routes(app: APIGatewayRestResolver, api: _Requests) -> None:
    """A record's catalogue entry, report and views."""

    @app.get(
        "/records/<record_id>",
        summary="A record's catalogue entry (operators, the publisher of its host)",
        operation_id="getRecord",
        tags=["records"],
        responses=_responses({200: ("The catalogue entry.", RecordView, JSON)}, 400, 403, 404),
    )
    def get_record(record_id: RecordIdParam) -> Response[str]:
        entry = api.visible_record(record_id)
        links = {"report": api.link("records", entry.record_id, "report")}
        if entry.valid:
            links["pid-kernel"] = api.link("records", entry.record_id, "pid-kernel")
            links["linkset"] = api.link("records", entry.record_id, "linkset")
        return _json(HTTPStatus.OK, {**entry_to_dict(entry), "links": links})

    @app.get(
        "/records/<record_id>/report",
        summary="A record's validation report (operators, the publisher of its host)",
        operation_id="getRecordReport",
        tags=["records"],
        responses=_responses({200: ("The validation report.", None, JSON)}, 400, 403, 404, 501),
    )
    def get_record_report(record_id: RecordIdParam) -> Response[str]:
        entry = api.visible_record(record_id)
        body = api.stored(entry.report_key, f"the report of record {entry.record_id!r} is gone")
        return _document(body, JSON)

    @app.get(
        "/records/<record_id>/pid-kernel",
        summary="A record's PID Kernel view (operators, the publisher of its host)",
        operation_id="getRecordPidKernel",
        tags=["records"],
        responses=_responses({200: ("The PID Kernel view.", None, JSON)}, 400, 403, 404, 501),
    )
    def get_record_pid_kernel(record_id: RecordIdParam) -> Response[str]:
        return _document(api.view_of(api.visible_record(record_id), "pid-kernel"), JSON)

    @app.get(
        "/records/<record_id>/linkset",
        summary="A record's Signposting linkset (operators, the publisher of its host)",
        description="Content negotiation on Accept: application/linkset+json (the default) "
        "or application/linkset (RFC 9264); 406 when Accept allows neither.",
        operation_id="getRecordLinkset",
        tags=["records"],
        responses=_responses(
            {200: ("The linkset.", None, LINKSET_MEDIA_TYPES[0])}, 400, 403, 404, 406, 501
        ),
    )
    def get_record_linkset(record_id: RecordIdParam) -> Response[str]:
        entry = api.visible_record(record_id)
        media_type = negotiate(app.current_event.headers.get("accept"), LINKSET_MEDIA_TYPES)
        if media_type is None:
            raise NotAcceptable(
                f"Accept allows neither {' nor '.join(LINKSET_MEDIA_TYPES)}",
            )
        view = "linkset-json" if media_type == LINKSET_MEDIA_TYPES[0] else "linkset"
        return _document(api.view_of(entry, view), media_type, {"Vary": "Accept"})
