"""Checking a document: ``POST /check`` (any API key).

The body is one metadata document (JSON-LD, or an HTML page with embedded JSON-LD) of at most
1 MiB; the answer (200, whatever the verdict) is the report ``cdif-harvest check --json`` prints.
Nothing is fetched and nothing is stored: the check runs on a wiring of its own, in memory.
``?url=`` names where the document will be published (relative ids resolve against it).
See docs/decisions/0072-the-publisher-checker.md.
"""

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.errors import UnsupportedMediaType
from cdif_harvester.api.models import MAX_URL_LENGTH, CheckAnswer
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.responses import JSON, documented, json_response

__all__ = ["CHECK_MEDIA_TYPES", "DEFAULT_URL", "REQUEST_BODY", "router"]

#: The body's media types, and what each is read as (HTML: embedded JSON-LD is looked for).
CHECK_MEDIA_TYPES = {
    "application/ld+json": "application/ld+json",
    "application/json": "application/ld+json",
    "text/html": "text/html",
    "application/xhtml+xml": "text/html",
}
#: Where a document is judged when the request names no ``url`` (a reserved name, RFC 2606).
DEFAULT_URL = "https://document.invalid/"
#: The request body as the OpenAPI document declares it (the route reads the body itself).
REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": "One metadata document: JSON-LD, or HTML with embedded JSON-LD (1 MiB at most).",
    "content": {
        "application/ld+json": {"schema": {"type": "object"}},
        "application/json": {"schema": {"type": "object"}},
        "text/html": {"schema": {"type": "string"}},
    },
}

UrlParam = Annotated[
    str | None,
    Query(
        max_length=MAX_URL_LENGTH,
        description="where the document will be published: relative ids resolve against it",
    ),
]


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of ``/check``, answering through ``ctx``."""
    routes = new_router()

    @routes.post(
        "/check",
        summary="Check one metadata document as the harvester would read it (any API key)",
        description="Validates the body (CDIF JSON-LD, or HTML with embedded JSON-LD) and "
        "answers its verdict (valid, invalid, no-metadata, malformed), every record's errors, "
        "warnings and per-profile verdicts with their fixes. Fetches nothing, stores nothing.",
        operation_id="checkDocument",
        tags=["check"],
        responses=documented(
            {200: ("The check's report, whatever the verdict.", CheckAnswer, JSON)}, 400, 413, 415
        ),
    )
    def check(url: UrlParam = None) -> Response[str]:
        ctx.caller()  # any admitted key: the check reads and keeps nothing of the API's
        event = ctx.app.current_event
        given = (ctx.header("content-type") or "").split(";", 1)[0].strip().lower()
        media = CHECK_MEDIA_TYPES.get(given)
        if media is None:
            raise UnsupportedMediaType(
                "send the document as application/ld+json, application/json or text/html"
            )
        body = (event.decoded_body or "").encode("utf-8")
        # Imported here: the extractor's rules and schemas load only when a check is asked for,
        # not on the cold start of every other route.
        from cdif_harvester.local_runtime import check_wiring  # noqa: PLC0415
        from cdif_harvester.stages.check import check_document  # noqa: PLC0415

        with check_wiring() as wiring:
            report = check_document(wiring, body, url=url or DEFAULT_URL, media_type=media)
        return json_response(HTTPStatus.OK, report.to_dict())

    return routes
