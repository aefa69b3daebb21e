"""Runs: ``/runs/{run_id}`` (operators, the publisher of the run's source).

* ``GET /runs/{run_id}``: its progress (state, URLs entered, settled and queued, sitemap jobs
  left, outcomes counted, and its report's path once closed);
* ``GET /runs/{run_id}/report``: its HTML report, written when the run is closed;
* ``GET /runs/{run_id}/outcomes``: its outcomes URL by URL, a page at a time;
* ``GET /sources/{source_id}/runs``: a source's runs, newest first, a page at a time.

A page links the next one (``Link: <...>; rel="next"``) as well as naming its ``next_cursor``.
"""

from collections.abc import Iterable
from http import HTTPStatus
from itertools import islice
from typing import Annotated, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import require_run_access, require_source_access
from cdif_harvester.api.errors import NotFound
from cdif_harvester.api.models import OutcomesPage, RunsPage, RunView
from cdif_harvester.api.routes.context import RouteContext, new_router
from cdif_harvester.api.routes.cursors import (
    CURSOR_PATTERN,
    MAX_CURSOR,
    bad_cursor,
    read_cursor,
    write_cursor,
)
from cdif_harvester.api.routes.responses import (
    HTML,
    JSON,
    document_response,
    documented,
    json_response,
    next_link,
)
from cdif_harvester.api.routes.sources import SourceIdParam
from cdif_harvester.model import Outcome, RunStatus, outcome_to_dict, run_to_dict

__all__ = ["MAX_OUTCOMES_PAGE", "MAX_RUNS_PAGE", "OUTCOMES_PAGE", "RUNS_PAGE", "router"]

#: Outcomes per page of ``GET /runs/{run_id}/outcomes``: the default and the most.
OUTCOMES_PAGE = 100
MAX_OUTCOMES_PAGE = 1000
#: Runs per page of ``GET /sources/{source_id}/runs``: the default and the most.
RUNS_PAGE = 20
MAX_RUNS_PAGE = 100
_OFFSET_PATTERN = r"^\d{1,9}$"  # (the runs of a source: few, paged by offset)

RunIdParam = Annotated[str, Path(min_length=1, max_length=128, description="The run's id.")]


def _visible_run(ctx: RouteContext, run_id: str) -> RunStatus:
    """The run ``run_id`` if the caller may see it; raises NotFound or Forbidden."""
    run = ctx.wiring().catalog.get_run(run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    who = ctx.caller()
    if not who.operator:
        source = ctx.registry().get_source(run.source_id) if run.source_id else None
        require_run_access(who, run, source)
    return run


def _run_view(ctx: RouteContext, run: RunStatus) -> dict[str, object]:
    view = run_to_dict(run)
    view["report"] = ctx.link("runs", run.run_id, "report") if run.report_key else None
    return view


T = TypeVar("T")


def _offset_page(items: Iterable[T], start: int, limit: int) -> tuple[list[T], bool, str | None]:
    """The page of ``items`` from ``start``: at most ``limit`` of them, whether more follow
    (one more is read to know, without counting them all), and the next page's cursor."""
    page = list(islice(items, start, start + limit + 1))
    truncated = len(page) > limit
    return page[:limit], truncated, str(start + limit) if truncated else None


def router(ctx: RouteContext) -> APIGatewayRouter:
    """Return the router of ``/runs/{run_id}`` and its report and outcomes, answering through
    ``ctx``."""
    routes = new_router()

    @routes.get(
        "/runs/<run_id>",
        summary="A run's progress (operators, its source's publisher)",
        description="Its state (running, finished, stalled), the URLs entered, settled and "
        "queued, the sitemap jobs left, the settled URLs by outcome, and the path of its "
        "report once the run is closed.",
        operation_id="getRun",
        tags=["runs"],
        responses=documented({200: ("The run's status.", RunView, JSON)}, 400, 403, 404),
    )
    def get_run(run_id: RunIdParam) -> Response[str]:
        return json_response(HTTPStatus.OK, _run_view(ctx, _visible_run(ctx, run_id)))

    @routes.get(
        "/runs/<run_id>/report",
        summary="A run's HTML report (operators, its source's publisher)",
        operation_id="getRunReport",
        tags=["runs"],
        responses=documented({200: ("The report.", None, "text/html")}, 400, 403, 404, 501),
    )
    def get_run_report(run_id: RunIdParam) -> Response[str]:
        run = _visible_run(ctx, run_id)
        if run.report_key is None:
            raise NotFound(
                f"run {run_id!r} has no report yet: it is written when the run is closed "
                f"(the run is {run.state.value})"
            )
        report = ctx.stored(run.report_key, f"the report of run {run_id!r} is gone")
        return document_response(report, HTML)

    @routes.get(
        "/runs/<run_id>/outcomes",
        summary="A run's outcomes, URL by URL (operators, its source's publisher)",
        description=f"One page of at most limit outcomes (default {OUTCOMES_PAGE}, at most "
        f"{MAX_OUTCOMES_PAGE}), in the catalogue's order of the run's URLs; when truncated is "
        "true, ask again with cursor=next_cursor (an opaque token). With outcome, a page may "
        "hold fewer than limit, even none, and still be truncated.",
        operation_id="listRunOutcomes",
        tags=["runs"],
        responses=documented(
            {200: ("One page of outcomes.", OutcomesPage, JSON)}, 400, 403, 404, paginated=True
        ),
    )
    def list_run_outcomes(
        run_id: RunIdParam,
        limit: Annotated[int, Query(ge=1, le=MAX_OUTCOMES_PAGE)] = OUTCOMES_PAGE,
        cursor: Annotated[
            str | None,
            Query(
                max_length=MAX_CURSOR, pattern=CURSOR_PATTERN, description="next_cursor of a page."
            ),
        ] = None,
        outcome: Annotated[Outcome | None, Query(description="Only this outcome.")] = None,
    ) -> Response[str]:
        run = _visible_run(ctx, run_id)
        _, after = read_cursor(cursor, 1)
        try:
            page = ctx.wiring().catalog.outcomes_page(
                run.run_id,
                limit=limit,
                after=after,
                outcome=None if outcome is None else outcome.value,
            )
        except ValueError as exc:
            raise bad_cursor() from exc
        next_cursor = None if page.after is None else write_cursor(0, page.after)
        return json_response(
            HTTPStatus.OK,
            {
                "run_id": run.run_id,
                "outcomes": [outcome_to_dict(item) for item in page.items],
                "count": len(page.items),
                "truncated": next_cursor is not None,
                "next_cursor": next_cursor,
            },
            next_link(ctx.link("runs", run.run_id, "outcomes"), ctx.query(), next_cursor),
        )

    @routes.get(
        "/sources/<source_id>/runs",
        summary="The runs of a source, newest first (operators, its publisher)",
        description=f"One page of at most limit runs (default {RUNS_PAGE}, at most "
        f"{MAX_RUNS_PAGE}), newest first. When truncated is true, ask again with "
        "cursor=next_cursor (or follow the Link header).",
        operation_id="listSourceRuns",
        tags=["sources"],
        responses=documented(
            {200: ("One page of runs.", RunsPage, JSON)}, 400, 403, 404, paginated=True
        ),
    )
    def list_source_runs(
        source_id: SourceIdParam,
        limit: Annotated[int, Query(ge=1, le=MAX_RUNS_PAGE)] = RUNS_PAGE,
        cursor: Annotated[
            str | None, Query(pattern=_OFFSET_PATTERN, description="next_cursor of a page.")
        ] = None,
    ) -> Response[str]:
        source = ctx.registered(source_id)
        require_source_access(ctx.caller(), source, "listing this source's runs")
        start = int(cursor or 0)
        runs = ctx.wiring().catalog.runs(source_id, limit=start + limit + 1)
        page, truncated, next_cursor = _offset_page(runs, start, limit)
        return json_response(
            HTTPStatus.OK,
            {
                "source_id": source_id,
                "runs": [_run_view(ctx, run) for run in page],
                "count": len(page),
                "truncated": truncated,
                "next_cursor": next_cursor,
            },
            next_link(ctx.link("sources", source_id, "runs"), ctx.query(), next_cursor),
        )

    return routes
