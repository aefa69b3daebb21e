"""The intake API's routers: each API built gets routers of its own.

The Lambda handler builds one API at import and ``openapi_document`` builds another; a router
made once per module would serve whichever API included it last (its routes would see that
API's wiring, event and caller). These tests build two APIs over two local registries and
interleave requests to them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.api import build_api
from cdif_harvester.model import FetchResponse, Source
from cdif_harvester.wiring import Wiring
from tests.support.lambda_driver import FakeLambdaContext

OPERATOR = "operator-key"


class NoFetcher:
    """The intake API never fetches."""

    def fetch(self, url: str, **_: Any) -> FetchResponse:
        raise AssertionError(f"the API fetched {url}")


def _wiring(root: Path, *source_ids: str) -> Wiring:
    root.mkdir()
    catalog = SqliteCatalog(root / "catalog.sqlite")
    for source_id in source_ids:
        catalog.put_source(Source(source_id, f"https://{source_id}.example.org/sitemap.xml"))
    return Wiring(
        store=DirectoryObjectStore(root / "store"),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=SystemClock(),
        sources=catalog,
    )


def _api(wiring: Wiring) -> APIGatewayRestResolver:
    return build_api(lambda: wiring, get_operators=lambda: {OPERATOR})


def _call(
    api: APIGatewayRestResolver, method: str, path: str, body: Any = None, *, stage: str = "v1"
) -> dict[str, Any]:
    event = {
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "queryStringParameters": None,
        "pathParameters": None,
        "requestContext": {
            "path": f"/{stage}{path}",
            "stage": stage,
            "identity": {"apiKeyId": OPERATOR},
        },
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }
    return api.resolve(event, FakeLambdaContext(function_name="IntakeFunction"))


def _listed(api: APIGatewayRestResolver) -> list[str]:
    answer = _call(api, "GET", "/sources")
    assert answer["statusCode"] == 200, answer
    return [source["source_id"] for source in json.loads(answer["body"])["sources"]]


def test_two_apis_of_one_process_each_answer_from_their_own_wiring(tmp_path: Path) -> None:
    first = _api(_wiring(tmp_path / "first", "alpha"))
    second = _api(_wiring(tmp_path / "second", "beta"))
    assert _listed(first) == ["alpha"]
    assert _listed(second) == ["beta"]
    assert _listed(first) == ["alpha"]


def test_a_request_to_the_api_built_first_sees_its_own_event(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path / "first")
    first = _api(wiring)
    second = _api(_wiring(tmp_path / "second"))
    source = {"source_id": "gamma", "entry_url": "https://gamma.example.org/sitemap.xml"}
    answer = _call(first, "POST", "/sources", source, stage="prod")
    assert answer["statusCode"] == 201, answer
    # The link is made from the request the first API is answering, on its stage.
    assert answer["multiValueHeaders"]["Location"] == ["/prod/sources/gamma"]
    assert wiring.sources is not None
    assert [s.source_id for s in wiring.sources.sources()] == ["gamma"]
    assert _listed(second) == []
