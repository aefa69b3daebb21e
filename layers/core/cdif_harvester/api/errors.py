"""The intake API's errors, and the one place where every exception becomes a response.

Every refusal is an RFC 9457 problem (``application/problem+json``): ``type``, ``title`` and
``status``, with ``error`` (a short, stable code a client can branch on) and ``detail`` (what was
wrong in words, or the fields of a request that does not match its schema).
:func:`register_error_handlers` gives each exception its status and code; a known path asked
with another method answers 405 with ``Allow``.

See docs/decisions/0040-api-errors.md and
docs/decisions/0074-template-hardening-and-api-conventions.md.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from cdif_harvester.errors import PermanentError, RetryableError
from cdif_harvester.stages.intake import InvalidEntryUrl, InvalidOptions
from cdif_harvester.stages.sources import (
    HostNotAllowed,
    InvalidSource,
    SourceBusy,
    UnknownSource,
)

__all__ = [
    "PROBLEM_JSON",
    "ApiError",
    "Conflict",
    "Forbidden",
    "NotAcceptable",
    "NotFound",
    "PayloadTooLarge",
    "TooLargeToServe",
    "Unauthenticated",
    "UnsupportedMediaType",
    "error_response",
    "register_error_handlers",
]

logger = Logger(child=True)

#: The media type of every refusal (RFC 9457, section 3).
PROBLEM_JSON = "application/problem+json"
#: The problem type of every refusal: no type of ours is published at a URL, so each problem
#: means what its status means (RFC 9457, section 4.2.1), and ``error`` says which one it is.
PROBLEM_TYPE = "about:blank"

#: Seconds a client is asked to wait after a 503 (a throttled table, a passing S3 fault).
RETRY_AFTER_SECONDS = 5

# Domain errors of the core, by the status they answer; ``error`` is the exception's reason.
_DOMAIN_STATUS: dict[type[PermanentError], HTTPStatus] = {
    InvalidEntryUrl: HTTPStatus.BAD_REQUEST,
    InvalidOptions: HTTPStatus.BAD_REQUEST,
    InvalidSource: HTTPStatus.BAD_REQUEST,
    HostNotAllowed: HTTPStatus.FORBIDDEN,
    UnknownSource: HTTPStatus.NOT_FOUND,
    SourceBusy: HTTPStatus.CONFLICT,
}


class ApiError(Exception):
    """A request the API refuses: ``status`` and ``error`` (a stable code) and ``detail``."""

    status: HTTPStatus = HTTPStatus.BAD_REQUEST
    error: str = "bad-request"

    def __init__(self, detail: Any, *, error: str | None = None) -> None:
        super().__init__(detail if isinstance(detail, str) else json.dumps(detail))
        self.detail = detail
        if error is not None:
            self.error = error


class Unauthenticated(ApiError):
    """The request carries no API key identity (``requestContext.identity.apiKeyId``)."""

    status = HTTPStatus.UNAUTHORIZED
    error = "unauthenticated"


class Forbidden(ApiError):
    """The caller's key may not do this, or not to this resource."""

    status = HTTPStatus.FORBIDDEN
    error = "forbidden"


class NotFound(ApiError):
    """No such source, run, record or view (yet)."""

    status = HTTPStatus.NOT_FOUND
    error = "not-found"


class NotAcceptable(ApiError):
    """The request's ``Accept`` allows none of the media types the resource has."""

    status = HTTPStatus.NOT_ACCEPTABLE
    error = "not-acceptable"


class Conflict(ApiError):
    """The resource exists already, or is busy."""

    status = HTTPStatus.CONFLICT
    error = "conflict"


class PayloadTooLarge(ApiError):
    """The request body is larger than the route accepts (8 KiB; 1 MiB for ``POST /check``)."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    error = "payload-too-large"


class UnsupportedMediaType(ApiError):
    """The request body is of a media type the route does not take."""

    status = HTTPStatus.UNSUPPORTED_MEDIA_TYPE
    error = "unsupported-media-type"


class TooLargeToServe(ApiError):
    """A stored document larger than a Lambda response may be (6 MB, JSON-encoded): it has to
    be read from the records bucket instead."""

    status = HTTPStatus.NOT_IMPLEMENTED
    error = "too-large-to-serve"


def error_response(
    status: HTTPStatus, error: str, detail: Any, *, headers: dict[str, str] | None = None
) -> Response[str]:
    """The problem response with ``status``: ``type``, ``title`` (the status's phrase, as
    ``about:blank`` asks), ``status``, ``error`` and ``detail``."""
    problem = {
        "type": PROBLEM_TYPE,
        "title": status.phrase,
        "status": status.value,
        "error": error,
        "detail": detail,
    }
    return Response(
        status_code=status.value,
        content_type=PROBLEM_JSON,
        body=json.dumps(problem),
        headers=dict(headers or {}),
    )


def allowed_methods(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods the routes of ``app`` answer on ``path`` (sorted; empty for a path no
    route knows)."""
    # Powertools keeps its routes private and offers no look-up by path alone.
    routes = app._static_routes + app._dynamic_routes  # noqa: SLF001
    return sorted({route.method for route in routes if route.rule.match(path)})


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Where and what only: pydantic's "input" and "ctx" would echo the request back, and its
    # "url" points at pydantic's documentation, not at this API's.
    return [
        {"loc": list(item.get("loc", ())), "type": item.get("type"), "msg": item.get("msg")}
        for item in exc.errors()
    ]


def register_error_handlers(
    app: APIGatewayRestResolver, *, admit_request: Callable[[], object] | None = None
) -> None:
    """Map every exception a route (or the request validation) can raise to its response.

    ``admit_request`` admits the current request (raising ApiError); it decides a decoding
    error raised before the body reached the API's parser: the body's fault (401, 413 or 400,
    as admission says) or, when the body is fine, a bug (500).
    """

    def api_error(exc: ApiError) -> Response[str]:
        return error_response(exc.status, exc.error, exc.detail)

    def domain_error(exc: PermanentError) -> Response[str]:
        status = next(s for cls, s in _DOMAIN_STATUS.items() if isinstance(exc, cls))
        return error_response(status, exc.reason, str(exc))

    def unsupported_media_type(exc: RequestUnsupportedContentType) -> Response[str]:
        return error_response(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "request bodies are JSON: send Content-Type: application/json",
        )

    def invalid_request(exc: RequestValidationError) -> Response[str]:
        return error_response(HTTPStatus.BAD_REQUEST, "invalid-request", _validation_detail(exc))

    def no_route(exc: NotFoundError) -> Response[str]:
        event = app.current_event
        allowed = allowed_methods(app, event.path)
        if allowed:
            return error_response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method-not-allowed",
                f"{event.path} answers {', '.join(allowed)}, not {event.http_method}",
                headers={"Allow": ", ".join(allowed)},
            )
        return error_response(
            HTTPStatus.NOT_FOUND,
            "not-found",
            f"no route {event.http_method} {event.path} (see the API's OpenAPI document)",
        )

    def unavailable(exc: RetryableError) -> Response[str]:
        logger.warning("request failed on a passing fault", error=str(exc))
        return error_response(
            HTTPStatus.SERVICE_UNAVAILABLE,
            "unavailable",
            "the catalogue or the object store did not answer; try again",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    def internal_error(exc: Exception) -> Response[str]:
        # A bug, not the request: log it whole, tell the client nothing about the internals.
        logger.exception("request failed unexpectedly")
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR, "internal-error", "the request could not be served"
        )

    def undecodable(exc: Exception) -> Response[str]:
        if admit_request is not None:
            try:
                admit_request()
            except ApiError as refused:
                return api_error(refused)
        return internal_error(exc)

    # (Powertools' decorator is untyped, so the handlers are registered by plain calls; the
    # most specific class of an exception picks its handler.)
    handlers: list[tuple[type[Exception] | list[type[Exception]], Callable[[Any], Response[str]]]]
    handlers = [
        (ApiError, api_error),
        (list(_DOMAIN_STATUS), domain_error),
        (RequestUnsupportedContentType, unsupported_media_type),
        (RequestValidationError, invalid_request),
        (NotFoundError, no_route),
        (RetryableError, unavailable),
        ([UnicodeError, binascii.Error], undecodable),
        (Exception, internal_error),
    ]
    for exc_class, handler in handlers:
        app.exception_handler(exc_class)(handler)
