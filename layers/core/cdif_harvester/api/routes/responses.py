"""The responses the routes answer, and how the OpenAPI document describes them.

Every route answers JSON it builds (:func:`json_response`) or a stored document as it is
(:func:`document_response`), and documents its successes and its refusals with
:func:`documented` (every refusal is an :class:`~cdif_harvester.api.models.ErrorBody`); a page
of a list links the next with :func:`next_link`.
"""

import json
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseHeader,
)
from pydantic import BaseModel

from cdif_harvester.api.errors import PROBLEM_JSON
from cdif_harvester.api.models import ErrorBody

__all__ = [
    "HTML",
    "JSON",
    "XML",
    "document_response",
    "documented",
    "json_response",
    "next_link",
]

JSON = "application/json"
HTML = "text/html; charset=utf-8"
XML = "application/xml"

_ERRORS: dict[int, str] = {
    400: "The body or a parameter is invalid (error invalid-request, or the core's reason).",
    401: "The request carries no API key identity.",
    403: "This API key may not do this, or not to this resource.",
    404: "No such resource (yet).",
    406: "The Accept header allows none of the representations.",
    409: "The resource exists already, or a run of the source is under way.",
    413: "The body is larger than 8 KiB (1 MiB for POST /check).",
    415: "The body is not application/json (POST /check: JSON-LD, JSON or HTML).",
    501: "The stored document is larger than a response may be; read it from the bucket.",
}

# The headers an answer carries, as the OpenAPI document declares them.
_LOCATION: OpenAPIResponseHeader = {
    "description": "Path of the resource created (201), or of the run's status (202).",
    "schema": {"type": "string"},
}
_LINK: OpenAPIResponseHeader = {
    "description": 'The next page, when truncated: <path?...&cursor=next_cursor>; rel="next" '
    "(RFC 8288).",
    "schema": {"type": "string"},
}


def documented(
    ok: dict[int, tuple[str, type[BaseModel] | None, str]], *errors: int, paginated: bool = False
) -> dict[int, OpenAPIResponse]:
    """Return a route's OpenAPI responses: the successes (description, JSON model or None,
    media type) and the error statuses it answers (401 on every route). A 201 or 202 declares
    its ``Location``; the 200 of a ``paginated`` route its ``Link`` to the next page.

    Raises KeyError for an error status this API never answers.
    """
    responses: dict[int, OpenAPIResponse] = {}
    for status, (description, model, media_type) in ok.items():
        if model is not None:
            responses[status] = {
                "description": description,
                "content": {media_type: {"model": model}},
            }
        elif media_type:
            responses[status] = {
                "description": description,
                "content": {media_type: {"schema": {"type": "string"}}},
            }
        else:
            responses[status] = {"description": description}
        if status in {201, 202}:
            responses[status]["headers"] = {"Location": _LOCATION}
        elif status == 200 and paginated:
            responses[status]["headers"] = {"Link": _LINK}
    for status in sorted({401, *errors}):
        responses[status] = {
            "description": _ERRORS[status],
            "content": {PROBLEM_JSON: {"model": ErrorBody}},
        }
    return responses


def next_link(path: str, query: dict[str, list[str]], cursor: str | None) -> dict[str, str]:
    """The ``Link`` header to the next page: ``path`` with the request's ``query`` (every
    parameter kept, ``cursor`` replaced); no header when there is no next page."""
    if cursor is None:
        return {}
    kept = [(name, value) for name, values in query.items() if name != "cursor" for value in values]
    target = f"{path}?{urlencode([*kept, ('cursor', cursor)])}"
    return {"Link": f'<{target}>; rel="next"'}


def json_response(
    status: HTTPStatus, body: Any, headers: dict[str, str] | None = None
) -> Response[str]:
    """Return ``body`` as a JSON response with ``status`` (and ``headers``)."""
    return Response(
        status_code=status.value,
        content_type=JSON,
        body=json.dumps(body),
        headers=dict(headers or {}),
    )


def document_response(
    body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> Response[str]:
    """Return a stored (UTF-8) document as it is: 200 with ``content_type`` (and ``headers``).

    Raises UnicodeDecodeError when ``body`` is not UTF-8.
    """
    return Response(
        status_code=HTTPStatus.OK.value,
        content_type=content_type,
        body=body.decode("utf-8"),
        headers=dict(headers or {}),
    )
