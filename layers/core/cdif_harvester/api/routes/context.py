"""What every route module of one intake API shares: :class:`RouteContext`.

One is made per API (by ``build_api``) and handed to each resource's router, so that routes
reach the current request's caller, the wiring, links into the API and the look-ups that
refuse what the caller may not see, without any state at module level (two APIs built in one
process, as the handler and the OpenAPI document are, never share a request).
"""

from collections.abc import Callable
from urllib.parse import quote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from cdif_harvester.api.access import Caller
from cdif_harvester.api.errors import NotFound, TooLargeToServe, Unauthenticated
from cdif_harvester.model import Source
from cdif_harvester.ports import SourceRegistry
from cdif_harvester.stages.sources import UnknownSource, registry_of
from cdif_harvester.wiring import Wiring

__all__ = ["CALLER", "MAX_DOCUMENT_BYTES", "RouteContext", "new_router"]

#: The key of the admitted caller in the resolver's per-request context.
CALLER = "caller"
#: The largest stored document a route returns: a Lambda response is at most 6 MB, JSON-encoded
#: (a document's quotes and non-ASCII characters grow when escaped).
MAX_DOCUMENT_BYTES = 5 * 1024 * 1024


def new_router() -> APIGatewayRouter:
    """Return an empty router of REST (API Gateway v1) routes, for one resource's module."""
    # Powertools leaves Router.__init__ unannotated; this is the one call mypy has to trust.
    return APIGatewayRouter()  # type: ignore[no-untyped-call]


class RouteContext:
    """The routes' view of one API: the caller, the wiring, links, and look-ups that refuse
    what the caller may not see."""

    def __init__(self, app: APIGatewayRestResolver, get_wiring: Callable[[], Wiring]) -> None:
        self.app = app
        self.get_wiring = get_wiring

    def caller(self) -> Caller:
        """Return the admitted caller of the current request.

        Raises Unauthenticated when the request was not admitted (the admission middleware
        always admits it first).
        """
        found = self.app.context.get(CALLER)
        if not isinstance(found, Caller):
            raise Unauthenticated("the request was not admitted")
        return found

    def header(self, name: str) -> str | None:
        """Return the current request's header ``name`` (any case), or None."""
        value: str | None = self.app.current_event.headers.get(name)
        return value

    def wiring(self) -> Wiring:
        """Return the adapters (built on first use)."""
        return self.get_wiring()

    def registry(self) -> SourceRegistry:
        """Return the sources registry; raises UnknownSource when none is configured."""
        return registry_of(self.get_wiring())

    def base_path(self) -> str:
        """Return the API's own path prefix (the stage, or a custom domain's base path), so
        links and Location headers resolve against the API however it is reached."""
        event = self.app.current_event
        full = event.request_context.path or ""
        path = event.path
        return full[: -len(path)] if path and full.endswith(path) else ""

    def link(self, *segments: str) -> str:
        """Return the path of a resource of this API, each segment percent-encoded."""
        return self.base_path() + "".join("/" + quote(part, safe="") for part in segments)

    def query(self) -> dict[str, list[str]]:
        """Return the current request's query parameters, each with all its values."""
        found = self.app.current_event.multi_value_query_string_parameters or {}
        return {name: list(values or []) for name, values in found.items()}

    def registered(self, source_id: str) -> Source:
        """Return the source ``source_id``; raises UnknownSource."""
        source = self.registry().get_source(source_id)
        if source is None:
            raise UnknownSource(f"no source {source_id!r} is registered")
        return source

    def stored(self, key: str, missing: str) -> bytes:
        """Return the object under ``key``.

        Raises NotFound(``missing``) when there is none and TooLargeToServe when it does not
        fit in a response.
        """
        try:
            body = self.get_wiring().store.get(key)
        except KeyError:
            raise NotFound(missing) from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise TooLargeToServe(
                f"{key} is {len(body)} bytes; the API returns documents of at most "
                f"{MAX_DOCUMENT_BYTES} bytes: read it from the records bucket"
            )
        return body
