"""The HTTP intake API (API Gateway REST API, API key required on every route).

Routes:

* ``POST /harvests`` with ``{"url": "<robots.txt, sitemap or page URL>"}``: start a harvest run;
  answers 202 with the run id.
* ``GET /runs/{run_id}``: the run's outcomes counted by kind, and the URLs recorded so far.
* ``GET /records/{record_id}``: the catalogue entry of a record (record id URL-encoded).

Every input is validated and refused with a clear 4xx JSON error. Issue 7 adds sources,
per-publisher host checks, the views and the OpenAPI document.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import BadRequestError, NotFoundError

from cdif_harvester.model import outcome_to_dict
from cdif_harvester.stages import Ports
from cdif_harvester.stages.intake import InvalidEntryUrl, start_harvest

__all__ = ["build_api"]

_MAX_BODY = 8 * 1024


def build_api(get_ports: Callable[[], Ports]) -> APIGatewayRestResolver:
    """Return the intake API; ``get_ports`` builds the adapters on first use."""
    app = APIGatewayRestResolver()

    @app.post("/harvests")
    def post_harvest() -> Response[dict[str, Any]]:
        raw = app.current_event.body or ""
        if len(raw) > _MAX_BODY:
            raise BadRequestError(f"request body larger than {_MAX_BODY} bytes")
        try:
            body = app.current_event.json_body
        except ValueError as exc:
            raise BadRequestError("request body is not JSON") from exc
        if not isinstance(body, dict) or not isinstance(body.get("url"), str):
            raise BadRequestError('request body must be {"url": "<robots.txt or sitemap URL>"}')
        try:
            job = start_harvest(get_ports(), body["url"])
        except InvalidEntryUrl as exc:
            raise BadRequestError(str(exc)) from exc
        return Response(
            status_code=202,
            content_type="application/json",
            body={"run_id": job.run_id, "url": job.url, "source": job.source},
        )

    @app.get("/runs/<run_id>")
    def get_run(run_id: str) -> dict[str, Any]:
        outcomes = list(get_ports().catalog.outcomes(unquote(run_id)))
        if not outcomes:
            raise NotFoundError(f"no outcomes recorded for run {run_id}")
        counts = Counter(item.outcome.value for item in outcomes)
        return {
            "run_id": run_id,
            "urls": len(outcomes),
            "outcomes": dict(sorted(counts.items())),
            "results": [outcome_to_dict(item) for item in outcomes],
        }

    @app.get("/records/<record_id>")
    def get_record(record_id: str) -> dict[str, Any]:
        entry = get_ports().catalog.get_record(unquote(record_id))
        if entry is None:
            raise NotFoundError(f"no record {unquote(record_id)}")
        return asdict(entry)

    return app
