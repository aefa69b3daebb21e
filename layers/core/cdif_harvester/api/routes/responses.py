"""The responses the routes answer, and how the OpenAPI document describes them.

Every route answers JSON it builds (:func:`json_response`) or a stored document as it is
(:func:`document_response`), and documents its successes and its refusals with
:func:`documented` (every refusal is an :class:`~cdif_harvester.api.models.ErrorBody`).
"""

import json
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from cdif_harvester.api.models import ErrorBody

__all__ = ["HTML", "JSON", "XML", "document_response", "documented", "json_response"]

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


def documented(
    ok: dict[int, tuple[str, type[BaseModel] | None, str]], *errors: int
) -> dict[int, OpenAPIResponse]:
    """Return a route's OpenAPI responses: the successes (description, JSON model or None,
    media type) and the error statuses it answers (401 on every route).

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
    for status in sorted({401, *errors}):
        responses[status] = {
            "description": _ERRORS[status],
            "content": {JSON: {"model": ErrorBody}},
        }
    return responses


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
