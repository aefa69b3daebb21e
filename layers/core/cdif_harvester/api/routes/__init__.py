"""The intake API's routes: one Powertools REST resolver, one router per resource.

:func:`build_api` makes the resolver (request validation by pydantic, the exception handlers
of :mod:`cdif_harvester.api.errors`, the admission of every request) and includes the router
of each resource:

* :mod:`~cdif_harvester.api.routes.sources`: ``/sources``, ``/sources/{source_id}``;
* :mod:`~cdif_harvester.api.routes.signmap`: ``/sources/{source_id}/signmap``;
* :mod:`~cdif_harvester.api.routes.harvests`: ``/sources/{source_id}/harvests``, ``/harvests``;
* :mod:`~cdif_harvester.api.routes.runs`: ``/runs/{run_id}``, its report and outcomes;
* :mod:`~cdif_harvester.api.routes.records`: ``/records/{record_id}``, its report and views;
* :mod:`~cdif_harvester.api.routes.check`: ``/check`` (one document judged, nothing kept).

What they share is :class:`~cdif_harvester.api.routes.context.RouteContext` (the caller, the
wiring, links, look-ups) and :mod:`~cdif_harvester.api.routes.responses`.
"""

import json
from collections.abc import Callable, Iterable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from cdif_harvester.api.access import admit, operator_keys
from cdif_harvester.api.errors import register_error_handlers
from cdif_harvester.api.routes import check, harvests, records, runs, signmap, sources
from cdif_harvester.api.routes.context import CALLER, RouteContext
from cdif_harvester.api.routes.records import LINKSET_MEDIA_TYPES
from cdif_harvester.wiring import Wiring

__all__ = ["LINKSET_MEDIA_TYPES", "MAX_BODY_DEPTH", "build_api", "parse_body"]

#: How deeply a request body may nest: every body of this API is a flat object of strings,
#: lists and small option maps, so anything deeper is refused (400) before it reaches pydantic.
MAX_BODY_DEPTH = 32

# The order the routes have always been registered in: Powertools tries a request against the
# routes in the order they were included.
_RESOURCES = (sources, signmap, harvests, runs, records, check)


def parse_body(text: str) -> dict[str, Any]:
    """Parse a request body: a JSON object nested at most MAX_BODY_DEPTH deep.

    Raises RequestValidationError (400 ``invalid-request``) for a body that is not an object,
    nests deeper, or is JSON Python cannot take (``NaN``, an integer of thousands of digits);
    json.JSONDecodeError for text that is not JSON (Powertools reports where).
    """
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as exc:  # (a RecursionError: nested thousands deep)
        message = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise _invalid("json_invalid", f"the body is not usable JSON: {message}") from None
    if not isinstance(value, dict):
        # (Powertools would take the first item of a list for an object.)
        raise _invalid("dict_type", "the body must be a JSON object")
    if _depth(value) > MAX_BODY_DEPTH:
        raise _invalid("json_invalid", f"the body nests deeper than {MAX_BODY_DEPTH} levels")
    return value


def _invalid(kind: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body",), "type": kind, "msg": message}])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (iteratively: no recursion on hostile input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_BODY_DEPTH:
            break
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    return deepest


def build_api(
    get_wiring: Callable[[], Wiring],
    *,
    get_operators: Callable[[], Iterable[str]] = operator_keys,
) -> APIGatewayRestResolver:
    """Return the intake API.

    ``get_wiring`` builds the adapters on first use (never at import time); ``get_operators``
    returns the operator key ids (by default ``OPERATOR_API_KEY_IDS``). Every call makes new
    routers, so two APIs of one process never share a request's context.
    """

    def read_json(text: str) -> Any:
        # The request validation parses the body before any middleware runs: admit the request
        # here first, so that a caller without a key, or an oversized body, is refused before a
        # byte of it is parsed.
        admit(app.current_event.raw_event, get_operators())
        return parse_body(text)

    app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=read_json)
    # (A body Powertools cannot even decode, bad base64 or not UTF-8, fails before read_json:
    # the error handlers admit the request again, which refuses such a body with 400.)
    register_error_handlers(
        app, admit_request=lambda: admit(app.current_event.raw_event, get_operators())
    )

    def admission(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        app.context[CALLER] = admit(app.current_event.raw_event, get_operators())
        return next_middleware(app)

    app.use([admission])
    ctx = RouteContext(app, get_wiring)
    for resource in _RESOURCES:
        app.include_router(resource.router(ctx))
    return app
