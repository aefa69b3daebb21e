"""The HTTP intake API (API Gateway REST API, an API key on every route).

Routes for sources, harvests, runs, records and checking one document:
:mod:`cdif_harvester.api.routes`, one Powertools router per resource. Every input is validated
(pydantic models, :mod:`cdif_harvester.api.models`); every refusal is an RFC 9457 problem with
``error`` and ``detail`` (:mod:`cdif_harvester.api.errors`, where exceptions become responses);
who may do what is :mod:`cdif_harvester.api.access`.
``python -m cdif_harvester.api`` prints the OpenAPI document (committed as docs/openapi.json).

See docs/api.md for every route, who may call it and what it answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cdif_harvester import __version__
from cdif_harvester.api.routes import build_api
from cdif_harvester.api.routes.check import REQUEST_BODY as CHECK_REQUEST_BODY
from cdif_harvester.wiring import Wiring

__all__ = ["OPENAPI_TITLE", "build_api", "openapi_document"]

OPENAPI_TITLE = "CDIF harvester intake API"
_DESCRIPTION = (
    "Register publishers (sources), start harvests, follow runs and read the harvested "
    "records and their views, and check one metadata document before publishing it. Every "
    "request needs an API key in the x-api-key header; the key's id decides the caller's role "
    "(operator, or publisher of the sources that list it). "
    "Errors are RFC 9457 problems (application/problem+json): type, title and status, with "
    '"error" (a stable code) and "detail". A known path asked with another method answers 405 '
    "with Allow. Lists come a page at a time: next_cursor in the body, and a Link header with "
    'rel="next". See docs/api.md.'
)


def _no_wiring() -> Wiring:
    raise RuntimeError("the OpenAPI document is made without wiring")


def openapi_document() -> dict[str, Any]:
    """Return the OpenAPI document of the intake API, as generated from its routes.

    Powertools documents a 422 for request validation on every route; this API answers 400
    (with the same detail), which every route documents itself, so the 422s are dropped; the
    body of ``POST /check`` is declared here.
    """
    from aws_lambda_powertools.event_handler.openapi.models import (  # noqa: PLC0415
        APIKey,
        SecurityScheme,
    )

    app = build_api(_no_wiring)
    schemes: dict[str, SecurityScheme] = {
        "apiKey": APIKey.model_validate({"type": "apiKey", "in": "header", "name": "x-api-key"})
    }
    document: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title=OPENAPI_TITLE,
            version=__version__,
            description=_DESCRIPTION,
            security_schemes=schemes,
            security=[{"apiKey": []}],
        )
    )
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    # (The check reads its body itself, a document of any shape: Powertools cannot know it.)
    document["paths"]["/check"]["post"]["requestBody"] = CHECK_REQUEST_BODY
    schemas = document.get("components", {}).get("schemas", {})
    text = json.dumps(document["paths"])
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        if f"#/components/schemas/{name}" not in text:
            schemas.pop(name, None)
    return document


def main(out: Callable[[str], Any] = print) -> None:
    """Print the OpenAPI document (``python -m cdif_harvester.api > docs/openapi.json``)."""
    out(json.dumps(openapi_document(), indent=2, sort_keys=True))
