"""The intake API through its real Lambda handler, under moto.

Every request is an API Gateway REST proxy event handed to ``functions.intake.app.handler`` in
the function's own environment (from template.yaml, with the ``OperatorApiKeyIds`` parameter
set). Sources, runs and records are read back from the moto table and bucket; records and
views are put there directly, as the pipeline's later stages would.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import boto3
import pytest
from pydantic import BaseModel

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.api import openapi_document
from cdif_harvester.api.models import (
    ErrorBody,
    HarvestStarted,
    OutcomesPage,
    RecordsPage,
    RecordView,
    RunsPage,
    RunView,
    SourceList,
    SourceView,
)
from cdif_harvester.contracts import SitemapJob, decode
from cdif_harvester.keys import VIEW_NAMES, record_hash, record_report_key, signmap_key
from cdif_harvester.model import CatalogEntry, Outcome, RunStatus, UrlOutcome
from tests.support.aws import ProvisionedStack, load_template, mocked_stack
from tests.support.pipeline import invoke

pytestmark = [pytest.mark.aws]

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs" / "openapi.json"
EVENTS = ROOT / "infrastructure" / "events"
OPERATOR = "operator-key-1"
PUBLISHER = "publisher-key-1"
OTHER_PUBLISHER = "publisher-key-2"
STRANGER = "unregistered-key"
SOURCE = {
    "source_id": "data-example-org",
    "entry_url": "https://data.example.org/robots.txt",
    "hosts": ["data.example.org"],
    "schedule": "1d",
    "contact": "metadata@data.example.org",
    "publisher_keys": [PUBLISHER],
}
OTHER_SOURCE = {
    "source_id": "repo-example-net",
    "entry_url": "https://repo.example.net/sitemap.xml",
    "publisher_keys": [OTHER_PUBLISHER],
}
RECORD_ID = "https://doi.org/10.5072/ctd-2021"
FOREIGN_RECORD_ID = "https://doi.org/10.5072/elsewhere"
INVALID_RECORD_ID = "https://data.example.org/metadata/draft"


@pytest.fixture
def api_stack() -> Iterator[ProvisionedStack]:
    """The stack with one operator key id (the template parameter, as deployed)."""
    with mocked_stack(parameters={"OperatorApiKeyIds": f"{OPERATOR},second-operator"}) as made:
        yield made


class Answer:
    """One response of the API: status, headers (lower-cased names) and body."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.status: int = response["statusCode"]
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, ",".join(values))
        self.headers = {name.lower(): str(value) for name, value in headers.items()}
        self.text: str = response.get("body") or ""

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    def shaped(self, model: type[BaseModel]) -> dict[str, Any]:
        """The JSON body, checked against the model the OpenAPI document gives it."""
        body = self.json
        model.model_validate(body)
        assert isinstance(body, dict)
        return body

    def error(self, status: int, error: str) -> Any:
        """Assert a refusal with ``status`` and ``error``, an RFC 9457 problem; return its
        detail."""
        assert self.status == status, (self.status, self.text)
        assert self.headers["content-type"] == "application/problem+json"
        body = self.shaped(ErrorBody)
        # about:blank: the problem is its status, and the title is the status's phrase
        assert (body["type"], body["title"], body["status"]) == (
            "about:blank",
            HTTPStatus(status).phrase,
            status,
        ), body
        assert body["error"] == error, body
        assert body["detail"], body
        return body["detail"]

    def next_page(self) -> tuple[str, dict[str, str]] | None:
        """The path (without the stage) and query of the Link rel="next", or None."""
        link = self.headers.get("link")
        if link is None:
            return None
        target, relation = link.split(";", 1)
        assert relation.strip() == 'rel="next"', link
        parts = urlsplit(target.strip().removeprefix("<").removesuffix(">"))
        assert parts.path.startswith("/v1/"), link
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        return parts.path.removeprefix("/v1"), query


def event(
    method: str,
    path: str,
    *,
    key: str | None = OPERATOR,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST proxy event as API Gateway sends it (stage v1)."""
    text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
    sent = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", **(headers or {})}
    if text is not None:
        sent.setdefault("Content-Type", "application/json")
    identity: dict[str, Any] = {"sourceIp": "203.0.113.10"}
    if key is not None:
        identity["apiKeyId"] = key
        sent["x-api-key"] = f"value-of-{key}"
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": sent,
        "multiValueHeaders": {name: [value] for name, value in sent.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": (
            {name: [value] for name, value in query.items()} if query else None
        ),
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": f"/v1{path}",
            "stage": "v1",
            "requestId": "00000000-0000-0000-0000-000000000001",
            "identity": identity,
        },
        "body": text,
        "isBase64Encoded": False,
    }


def call(stack: ProvisionedStack, method: str, path: str, **kwargs: Any) -> Answer:
    """Send one request through the intake function's handler."""
    return Answer(invoke(stack, "IntakeFunction", event(method, path, **kwargs)))


def catalog(stack: ProvisionedStack) -> DynamoCatalog:
    return DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )


def queued(stack: ProvisionedStack, queue: str = "SitemapExpanderQueue") -> list[str]:
    """Take every message off ``queue``."""
    sqs = boto3.client("sqs", region_name=stack.region)
    bodies = []
    url = stack.queue_urls[queue]
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def put_object(stack: ProvisionedStack, key: str, body: bytes | str, content_type: str) -> None:
    data = body.encode() if isinstance(body, str) else body
    boto3.client("s3", region_name=stack.region).put_object(
        Bucket=stack.bucket_name, Key=key, Body=data, ContentType=content_type
    )


def register(stack: ProvisionedStack, *sources: dict[str, Any]) -> None:
    for source in sources:
        answer = call(stack, "POST", "/sources", body=source)
        assert answer.status == 201, answer.text


def encoded(record_id: str) -> str:
    return quote(record_id, safe="")


# --------------------------------------------------------------------------- sources


def test_an_operator_registers_reads_replaces_lists_and_removes_sources(
    api_stack: ProvisionedStack,
) -> None:
    # Given an operator registering a source
    answer = call(api_stack, "POST", "/sources", body=SOURCE)
    # Then it is stored checked, with its creation time, and Location names it
    assert answer.status == 201, answer.text
    created = answer.shaped(SourceView)
    assert answer.headers["location"] == "/v1/sources/data-example-org"
    assert created["hosts"] == ["data.example.org"]
    assert created["publisher_keys"] == [PUBLISHER]
    assert created["created_at"] and created["created_at"] == created["updated_at"]
    stored = catalog(api_stack).get_source("data-example-org")
    assert stored is not None and stored.entry_url == SOURCE["entry_url"]

    # A second registration of the same id is a conflict, and changes nothing
    again = call(api_stack, "POST", "/sources", body={**SOURCE, "schedule": "2d"})
    assert "PUT /sources/data-example-org" in again.error(409, "source-exists")
    assert (
        call(api_stack, "GET", "/sources/data-example-org").shaped(SourceView)["schedule"] == "1d"
    )

    # PUT replaces it whole, keeping when it was created and how it last ran
    assert catalog(api_stack).claim_source(
        "data-example-org", "run-1", at="2026-01-02T00:00:00+00:00"
    )
    replaced = call(
        api_stack,
        "PUT",
        "/sources/data-example-org",
        body={k: v for k, v in SOURCE.items() if k != "source_id"} | {"schedule": "6h"},
    )
    assert replaced.status == 200, replaced.text
    body = replaced.shaped(SourceView)
    assert body["schedule"] == "6h"
    assert body["created_at"] == created["created_at"]
    assert body["active_run"] == "run-1" and body["last_run_id"] == "run-1"

    # PUT of a new id creates it
    made = call(api_stack, "PUT", "/sources/repo-example-net", body=OTHER_SOURCE)
    assert made.status == 201, made.text
    assert made.headers["location"] == "/v1/sources/repo-example-net"
    # The entry URL's host is always one of the hosts
    assert made.shaped(SourceView)["hosts"] == ["repo.example.net"]

    listed = call(api_stack, "GET", "/sources").shaped(SourceList)
    assert [s["source_id"] for s in listed["sources"]] == ["data-example-org", "repo-example-net"]

    # DELETE removes it (204, no body); a second DELETE finds nothing
    removed = call(api_stack, "DELETE", "/sources/repo-example-net")
    assert removed.status == 204 and removed.text == ""
    assert catalog(api_stack).get_source("repo-example-net") is None
    call(api_stack, "DELETE", "/sources/repo-example-net").error(404, "unknown-source")
    call(api_stack, "GET", "/sources/repo-example-net").error(404, "unknown-source")


@pytest.mark.parametrize(
    ("request_kwargs", "status", "error", "fragment"),
    [
        ({"raw_body": '{"source_id": '}, 400, "invalid-request", "json_invalid"),
        ({"body": [SOURCE]}, 400, "invalid-request", "dict_type"),
        (
            {"body": {k: v for k, v in SOURCE.items() if k != "entry_url"}},
            400,
            "invalid-request",
            '"entry_url"], "type": "missing"',
        ),
        ({"body": {**SOURCE, "owner": "me"}}, 400, "invalid-request", "extra_forbidden"),
        # strict: a number as a string is refused, not converted
        ({"body": {**SOURCE, "requests_per_host": "2"}}, 400, "invalid-request", "int_type"),
        ({"body": {**SOURCE, "source_id": "Data Example"}}, 400, "invalid-request", "pattern"),
        ({"body": {**SOURCE, "publisher_keys": ["a key"]}}, 400, "invalid-request", "pattern"),
        # the core's own checks answer with their reason
        ({"body": {**SOURCE, "schedule": "5m"}}, 400, "invalid-source", "15 minutes"),
        ({"body": {**SOURCE, "requests_per_host": 99}}, 400, "invalid-source", "between 1"),
        ({"body": {**SOURCE, "entry_url": "ftp://x.org/"}}, 400, "invalid-source", "http(s)"),
        ({"body": {**SOURCE, "hosts": ["not a host"]}}, 400, "invalid-source", "not a host"),
        ({"body": {**SOURCE, "options": {"x": "1"}}}, 400, "invalid-source", "unknown"),
        (
            {"body": SOURCE, "headers": {"Content-Type": "text/plain"}},
            415,
            "unsupported-media-type",
            "application/json",
        ),
        # size before parsing: an oversized body is refused even when it is not JSON at all
        ({"raw_body": "x" * (8 * 1024 + 1)}, 413, "payload-too-large", "8192"),
    ],
)
def test_a_registration_is_validated_with_a_clear_error(
    api_stack: ProvisionedStack,
    request_kwargs: dict[str, Any],
    status: int,
    error: str,
    fragment: str,
) -> None:
    answer = call(api_stack, "POST", "/sources", **request_kwargs)
    detail = answer.error(status, error)
    assert fragment in json.dumps(detail) or fragment in str(detail), detail
    assert catalog(api_stack).sources() == []


def test_a_body_of_exactly_8_kib_is_read(api_stack: ProvisionedStack) -> None:
    body = json.dumps({**SOURCE, "contact": None})
    padded = body[:-1] + " " * (8 * 1024 - len(body)) + "}"
    assert len(padded) == 8 * 1024
    assert call(api_stack, "POST", "/sources", raw_body=padded).status == 201


def test_a_replacement_names_the_source_of_its_path(api_stack: ProvisionedStack) -> None:
    answer = call(api_stack, "PUT", "/sources/data-example-org", body={**OTHER_SOURCE})
    assert "differs" in answer.error(400, "invalid-request")
    call(api_stack, "PUT", "/sources/Bad%20Id", body=SOURCE).error(400, "invalid-request")


# --------------------------------------------------------------------------- hostile bodies

_NOT_UTF8 = base64.b64encode(b'{"url": "https://data.example.org/\xff\xfe"}').decode()
HOSTILE_BODIES = [
    # (raw body, isBase64Encoded, status, error, a fragment of the detail)
    pytest.param((_NOT_UTF8, True, 400, "invalid-request", "not UTF-8"), id="invalid-utf8"),
    pytest.param(("!!!not base64", True, 400, "invalid-request", "base64"), id="invalid-base64"),
    pytest.param(
        ('{"url": "\udcff"}', False, 400, "invalid-request", "UTF-8"), id="lone-surrogate"
    ),
    pytest.param(("[" * 4000 + "]" * 4000, False, 400, "invalid-request", "deep"), id="4000-deep"),
    pytest.param(
        (
            '{"url": "https://data.example.org/", "options": ' + '{"a": ' * 40 + "1" + "}" * 41,
            False,
            400,
            "invalid-request",
            "deeper than",
        ),
        id="40-deep-object",
    ),
    pytest.param(('{"url": NaN}', False, 400, "invalid-request", "NaN"), id="nan"),
    pytest.param(
        ('{"url": ' + "9" * 5000 + "}", False, 400, "invalid-request", "limit"), id="huge-int"
    ),
    pytest.param(
        ('["https://x.example.org/"]', False, 400, "invalid-request", "object"), id="a-list"
    ),
    pytest.param(('"a string"', False, 400, "invalid-request", "object"), id="a-string"),
    pytest.param(("null", False, 400, "invalid-request", "object"), id="null"),
    pytest.param(("{not json", False, 400, "invalid-request", "json_invalid"), id="not-json"),
    pytest.param(
        ("{" + " " * 9000 + "}", False, 413, "payload-too-large", "8192"), id="over-8-kib"
    ),
]


@pytest.mark.parametrize("case", HOSTILE_BODIES)
@pytest.mark.parametrize("path", ["/harvests", "/sources", "/sources/data-example-org/harvests"])
def test_a_hostile_body_is_refused_with_a_json_error_not_a_500(
    api_stack: ProvisionedStack,
    path: str,
    case: tuple[str, bool, int, str, str],
) -> None:
    raw_body, base64_encoded, status, error, fragment = case
    register(api_stack, SOURCE)
    request = event("POST", path, raw_body=raw_body)
    request["isBase64Encoded"] = base64_encoded
    answer = Answer(invoke(api_stack, "IntakeFunction", request))
    detail = answer.error(status, error)
    assert fragment in json.dumps(detail), detail
    assert queued(api_stack) == []


def test_a_caller_without_a_key_hears_401_before_its_undecodable_body_is_judged(
    api_stack: ProvisionedStack,
) -> None:
    request = event("POST", "/harvests", key=None, raw_body=_NOT_UTF8)
    request["isBase64Encoded"] = True
    Answer(invoke(api_stack, "IntakeFunction", request)).error(401, "unauthenticated")


# --------------------------------------------------------------------------- who may do what

ROUTES = [
    ("POST", "/sources", SOURCE),
    ("GET", "/sources", None),
    ("GET", "/sources/data-example-org", None),
    ("PUT", "/sources/data-example-org", SOURCE),
    ("DELETE", "/sources/data-example-org", None),
    ("POST", "/sources/data-example-org/harvests", {"url": "https://data.example.org/s.xml"}),
    ("GET", "/sources/data-example-org/signmap", None),
    ("GET", "/sources/data-example-org/records", None),
    ("GET", "/sources/data-example-org/runs", None),
    ("POST", "/harvests", {"url": "https://data.example.org/robots.txt"}),
    ("GET", "/runs/20260101T000000Z-00000000", None),
    ("GET", "/runs/20260101T000000Z-00000000/report", None),
    ("GET", "/runs/20260101T000000Z-00000000/outcomes", None),
    ("GET", f"/records/{encoded(RECORD_ID)}", None),
    ("GET", f"/records/{encoded(RECORD_ID)}/report", None),
    ("GET", f"/records/{encoded(RECORD_ID)}/pid-kernel", None),
    ("GET", f"/records/{encoded(RECORD_ID)}/linkset", None),
    ("GET", f"/records/{encoded(RECORD_ID)}/views/nquads", None),
    ("POST", "/check", {"@context": "https://schema.org/", "@type": "Dataset"}),
    ("GET", "/no/such/route", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_route_refuses_a_request_without_an_api_key_identity(
    api_stack: ProvisionedStack, method: str, path: str, body: Any
) -> None:
    answer = call(api_stack, method, path, key=None, body=body)
    assert "x-api-key" in answer.error(401, "unauthenticated")
    assert queued(api_stack) == []


@pytest.mark.parametrize("raw_body", ["{not json", "x" * 20_000])
def test_no_identity_is_refused_before_the_body_is_read(
    api_stack: ProvisionedStack, raw_body: str
) -> None:
    call(api_stack, "POST", "/sources", key=None, raw_body=raw_body).error(401, "unauthenticated")


def test_every_route_of_the_api_is_in_the_openapi_document_and_the_template() -> None:
    document = openapi_document()
    api_routes = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    exercised = {(m, p) for m, p, _ in ROUTES}
    # every route is exercised by the tests above (path parameters filled in)
    assert len(api_routes) == len(exercised) - 1  # minus the route that does not exist
    template = load_template()
    events = template["Resources"]["IntakeFunction"]["Properties"]["Events"].values()
    deployed = set()
    for api_event in events:
        assert api_event["Type"] == "Api"
        properties = api_event["Properties"]
        assert properties["Auth"]["ApiKeyRequired"] is True  # no route open to the world
        assert properties["RestApiId"] == {"Ref": "IntakeApi"}
        deployed.add((properties["Method"].upper(), properties["Path"]))
    other_methods = {(m, p) for m, p in deployed if m == "ANY"}
    assert deployed - other_methods == api_routes
    # every path takes its other methods too, so that the function answers them 405
    assert other_methods == {("ANY", path) for path in document["paths"]}
    # the document says how to authenticate, on every operation
    assert document["components"]["securitySchemes"]["apiKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
    }
    assert document["security"] == [{"apiKey": []}]
    for operations in document["paths"].values():
        for operation in operations.values():
            assert "401" in operation["responses"] and "422" not in operation["responses"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/sources", {**SOURCE, "source_id": "another"}),
        ("GET", "/sources", None),
        ("PUT", "/sources/data-example-org", SOURCE),
        ("DELETE", "/sources/data-example-org", None),
        ("POST", "/harvests", {"url": "https://data.example.org/robots.txt"}),
    ],
)
def test_operator_routes_refuse_publishers(
    api_stack: ProvisionedStack, method: str, path: str, body: Any
) -> None:
    register(api_stack, SOURCE)
    before = catalog(api_stack).get_source("data-example-org")
    for key in (PUBLISHER, STRANGER):
        answer = call(api_stack, method, path, key=key, body=body)
        assert "operators only" in answer.error(403, "forbidden")
    assert catalog(api_stack).get_source("data-example-org") == before
    assert catalog(api_stack).get_source("another") is None
    assert queued(api_stack) == []
    assert catalog(api_stack).runs() == []


def test_a_publisher_reads_its_own_source_only(api_stack: ProvisionedStack) -> None:
    register(api_stack, {**SOURCE, "publisher_keys": [PUBLISHER, "colleague-key"]}, OTHER_SOURCE)
    mine = call(api_stack, "GET", "/sources/data-example-org", key=PUBLISHER).shaped(SourceView)
    assert mine["publisher_keys"] == [PUBLISHER]  # not the other keys of the source
    seen_by_operator = call(api_stack, "GET", "/sources/data-example-org").shaped(SourceView)
    assert seen_by_operator["publisher_keys"] == [PUBLISHER, "colleague-key"]
    call(api_stack, "GET", "/sources/repo-example-net", key=PUBLISHER).error(403, "forbidden")
    call(api_stack, "GET", "/sources/data-example-org", key=STRANGER).error(403, "forbidden")
    call(api_stack, "GET", "/sources/nothing-here", key=PUBLISHER).error(404, "unknown-source")


# --------------------------------------------------------------------------- harvests


def test_a_publisher_posting_a_sitemap_of_its_host_starts_a_run(
    api_stack: ProvisionedStack,
) -> None:
    register(api_stack, SOURCE)
    sitemap = "https://data.example.org/sitemap-datasets.xml"

    # A URL on another host is refused, and nothing is recorded or queued
    foreign = call(
        api_stack,
        "POST",
        "/sources/data-example-org/harvests",
        key=PUBLISHER,
        body={"url": "https://evil.example.com/sitemap.xml"},
    )
    detail = foreign.error(403, "host-not-allowed")
    assert "evil.example.com" in detail and "data.example.org" in detail
    assert queued(api_stack) == []
    assert catalog(api_stack).runs() == []
    assert catalog(api_stack).get_source("data-example-org").active_run is None  # type: ignore[union-attr]

    # Its own host: the run starts
    answer = call(
        api_stack,
        "POST",
        "/sources/data-example-org/harvests",
        key=PUBLISHER,
        body={"url": sitemap},
    )
    assert answer.status == 202, answer.text
    started = answer.shaped(HarvestStarted)
    run_id = started["run_id"]
    assert started["url"] == sitemap and started["source_id"] == "data-example-org"
    assert answer.headers["location"] == started["run"] == f"/v1/runs/{run_id}"
    run = catalog(api_stack).get_run(run_id)
    assert run is not None and run.source_id == "data-example-org" and run.entry_urls == (sitemap,)
    (body,) = queued(api_stack)
    job = decode(body, SitemapJob)
    assert (job.run_id, job.url, job.source) == (run_id, sitemap, "data.example.org")

    # One run of a source at a time
    busy = call(api_stack, "POST", "/sources/data-example-org/harvests", key=PUBLISHER)
    assert run_id in busy.error(409, "source-busy")
    assert queued(api_stack) == []


def test_a_source_run_without_a_body_starts_from_the_entry_url(api_stack: ProvisionedStack) -> None:
    register(api_stack, SOURCE, OTHER_SOURCE)
    # another publisher's key may not start it; an unknown source is not found
    call(api_stack, "POST", "/sources/data-example-org/harvests", key=OTHER_PUBLISHER).error(
        403, "forbidden"
    )
    call(api_stack, "POST", "/sources/nothing-here/harvests").error(404, "unknown-source")
    call(api_stack, "POST", "/sources/data-example-org/harvests", body={"url": "not a url"}).error(
        400, "invalid-entry-url"
    )
    assert queued(api_stack) == []

    answer = call(api_stack, "POST", "/sources/data-example-org/harvests")  # the operator
    assert answer.status == 202, answer.text
    (body,) = queued(api_stack)
    assert decode(body, SitemapJob).url == SOURCE["entry_url"]


def test_an_operator_harvests_any_url_ad_hoc(api_stack: ProvisionedStack) -> None:
    answer = call(
        api_stack,
        "POST",
        "/harvests",
        body={
            "url": "https://repo.example.net/sitemap.xml",
            "options": {"format_parameter": "f=cdif"},
        },
    )
    assert answer.status == 202, answer.text
    started = answer.shaped(HarvestStarted)
    assert started["source_id"] is None and started["source"] == "repo.example.net"
    (body,) = queued(api_stack)
    job = decode(body, SitemapJob)
    assert job.run_id == started["run_id"] and job.options == {"format_parameter": "f=cdif"}

    call(api_stack, "POST", "/harvests", body={"url": "ftp://x.org/"}).error(
        400, "invalid-entry-url"
    )
    call(
        api_stack,
        "POST",
        "/harvests",
        body={"url": "https://x.org/", "options": {"depth": "9"}},
    ).error(400, "invalid-options")
    call(api_stack, "POST", "/harvests", body={"nope": 1}).error(400, "invalid-request")
    assert queued(api_stack) == []


# --------------------------------------------------------------------------- runs


def _outcome(run_id: str, number: int, outcome: Outcome) -> UrlOutcome:
    return UrlOutcome(
        run_id=run_id,
        source="data.example.org",
        url=f"https://data.example.org/datasets/{number:02d}.html",
        outcome=outcome,
        reason=None if outcome is Outcome.RECORD else "http-404",
        recorded_at="2026-01-01T00:01:00+00:00",
    )


def test_a_runs_progress_report_and_outcomes(api_stack: ProvisionedStack) -> None:
    register(api_stack, SOURCE, OTHER_SOURCE)
    started = call(api_stack, "POST", "/sources/data-example-org/harvests", key=PUBLISHER)
    run_id = started.json["run_id"]
    adhoc = call(api_stack, "POST", "/harvests", body={"url": "https://x.example/robots.txt"})
    adhoc_id = adhoc.json["run_id"]
    table = catalog(api_stack)
    table.enter_urls(run_id, [_outcome(run_id, n, Outcome.RECORD).url for n in range(5)], step="s")
    for number in range(5):
        table.put_outcome(
            _outcome(run_id, number, Outcome.FAILED if number == 3 else Outcome.RECORD)
        )

    # Progress, counted by outcome, for the publisher of the run's source
    progress = call(api_stack, "GET", f"/runs/{run_id}", key=PUBLISHER).shaped(RunView)
    assert progress["state"] == "running"
    assert (progress["entered"], progress["settled"], progress["queued"]) == (5, 5, 0)
    assert progress["outcomes"]["record"] == 4 and progress["outcomes"]["failed"] == 1
    assert progress["report"] is None
    report = call(api_stack, "GET", f"/runs/{run_id}/report", key=PUBLISHER)
    assert "closed" in report.error(404, "not-found")

    # Not for another publisher, nor for an unregistered key; an ad-hoc run is the operator's
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/report", f"/runs/{run_id}/outcomes"):
        call(api_stack, "GET", path, key=OTHER_PUBLISHER).error(403, "forbidden")
        call(api_stack, "GET", path, key=STRANGER).error(403, "forbidden")
    call(api_stack, "GET", f"/runs/{adhoc_id}", key=PUBLISHER).error(403, "forbidden")
    assert call(api_stack, "GET", f"/runs/{adhoc_id}").shaped(RunView)["source_id"] is None
    call(api_stack, "GET", "/runs/20990101T000000Z-ffffffff").error(404, "not-found")

    # Outcomes page by page
    first = call(api_stack, "GET", f"/runs/{run_id}/outcomes", key=PUBLISHER, query={"limit": "2"})
    page = first.shaped(OutcomesPage)
    assert (page["count"], page["truncated"]) == (2, True) and page["next_cursor"]
    seen = [item["url"] for item in page["outcomes"]]
    while page["truncated"]:
        page = call(
            api_stack,
            "GET",
            f"/runs/{run_id}/outcomes",
            key=PUBLISHER,
            query={"limit": "2", "cursor": page["next_cursor"]},
        ).shaped(OutcomesPage)
        seen += [item["url"] for item in page["outcomes"]]
    assert sorted(seen) == sorted(_outcome(run_id, n, Outcome.RECORD).url for n in range(5))
    assert page["next_cursor"] is None
    failed = call(api_stack, "GET", f"/runs/{run_id}/outcomes", query={"outcome": "failed"}).shaped(
        OutcomesPage
    )
    assert [item["reason"] for item in failed["outcomes"]] == ["http-404"]
    assert failed["truncated"] is False
    bad_cursors = ("abc", "2", "WzAsIlVSTCN4Il0", "WzEsbnVsbF0")  # [0,"URL#x"], [1,null]
    for query in (
        {"limit": "0"},
        {"limit": "5000"},
        {"outcome": "great"},
        *({"cursor": cursor} for cursor in bad_cursors),
    ):
        call(api_stack, "GET", f"/runs/{run_id}/outcomes", query=query).error(
            400, "invalid-request"
        )

    # Once the run is closed, its report is linked and served as HTML
    key = f"runs/{run_id}/report.html"
    put_object(api_stack, key, "<!doctype html><title>Run report</title>", "text/html")
    table.finish_run(run_id, at="2026-01-01T00:02:00+00:00")
    table.close_run(run_id, at="2026-01-01T00:03:00+00:00", report_key=key)
    progress = call(api_stack, "GET", f"/runs/{run_id}", key=PUBLISHER).shaped(RunView)
    assert progress["state"] == "finished"
    assert progress["report"] == f"/v1/runs/{run_id}/report"
    html = call(api_stack, "GET", f"/runs/{run_id}/report", key=PUBLISHER)
    assert html.status == 200
    assert html.headers["content-type"] == "text/html; charset=utf-8"
    assert html.text == "<!doctype html><title>Run report</title>"


# --------------------------------------------------------------------------- records


def _entry(record_id: str, url: str, *, valid: bool = True) -> CatalogEntry:
    source = url.split("/")[2]
    rkey = record_hash(record_id)
    return CatalogEntry(
        record_id=record_id,
        resource_id=record_id,
        source=source,
        url=url,
        title="CTD casts",
        pattern="embedded-script",
        valid=valid,
        conformance="cdif-core-1.0",
        date_modified=None,
        sd_date_published=None,
        content_hash="0" * 64,
        record_key=f"records/{source}/{rkey}.jsonld",
        report_key=record_report_key(source, rkey),
        run_id="20260101T000000Z-00000000",
        harvested_at="2026-01-01T00:00:00+00:00",
    )


#: A valid record, its report and each of its views as the crosswalk wrote them (golden files).
CROSSWALK_GOLDEN = Path(__file__).parents[1] / "unit" / "golden" / "crosswalk"
MEDIA_TYPES = {
    "pid-kernel": "application/json",
    "linkset-json": "application/linkset+json",
    "linkset": "application/linkset",
    "link-header": "text/plain; charset=utf-8",
    "html-links": "text/html; charset=utf-8",
    "nquads": "application/n-quads",
}


def golden_view(view: str) -> bytes:
    """The golden file of ``view`` of the golden record."""
    return (CROSSWALK_GOLDEN / f"landing.{VIEW_NAMES[view]}").read_bytes()


def store_golden_record(stack: ProvisionedStack, entry: CatalogEntry) -> None:
    """Store the golden record and its report under the keys ``entry`` names (no view)."""
    assert entry.record_key is not None
    record = (CROSSWALK_GOLDEN / "landing.record.jsonld").read_bytes()
    put_object(stack, entry.record_key, record, "application/ld+json")
    report = (CROSSWALK_GOLDEN / "landing.report.json").read_bytes()
    put_object(stack, entry.report_key, report, "application/json")


@pytest.fixture
def records(api_stack: ProvisionedStack) -> ProvisionedStack:
    """Two sources, a valid record of each with its record and report (no view stored), and an
    invalid one with its report."""
    register(api_stack, SOURCE, OTHER_SOURCE)
    table = catalog(api_stack)
    for record_id, url, valid in (
        (RECORD_ID, "https://data.example.org/datasets/ctd.html", True),
        (INVALID_RECORD_ID, "https://data.example.org/datasets/draft.html", False),
        (FOREIGN_RECORD_ID, "https://repo.example.net/d/1", True),
    ):
        entry = _entry(record_id, url, valid=valid)
        verdict = "valid" if valid else "invalid"
        entry = replace(entry, profiles={"core/1.1": "valid", "discovery/1.1": verdict})
        table.put_record(entry)
        if valid:
            store_golden_record(api_stack, entry)
        else:
            report = json.dumps({"valid": False})
            put_object(api_stack, entry.report_key, report, "application/json")
    return api_stack


def test_a_publisher_reads_the_records_of_its_hosts_only(records: ProvisionedStack) -> None:
    mine = f"/records/{encoded(RECORD_ID)}"
    entry = call(records, "GET", mine, key=PUBLISHER).shaped(RecordView)
    assert entry["record_id"] == RECORD_ID and entry["valid"] is True
    assert entry["links"] == {
        "report": f"/v1{mine}/report",
        "pid-kernel": f"/v1{mine}/pid-kernel",
        "linkset": f"/v1{mine}/linkset",
        **{f"views/{view}": f"/v1{mine}/views/{view}" for view in VIEW_NAMES},
    }
    report = call(records, "GET", f"{mine}/report", key=PUBLISHER)
    assert (report.status, report.headers["content-type"]) == (200, "application/json")
    assert report.text.encode() == (CROSSWALK_GOLDEN / "landing.report.json").read_bytes()
    kernel = call(records, "GET", f"{mine}/pid-kernel", key=PUBLISHER)
    assert kernel.status == 200 and kernel.text.encode() == golden_view("pid-kernel")

    theirs = f"/records/{encoded(FOREIGN_RECORD_ID)}"
    for suffix in ("", "/report", "/pid-kernel", "/linkset", "/views/nquads"):
        detail = call(records, "GET", theirs + suffix, key=PUBLISHER).error(403, "forbidden")
        assert "repo.example.net" in detail
        call(records, "GET", mine + suffix, key=STRANGER).error(403, "forbidden")
        assert call(records, "GET", theirs + suffix).status == 200  # the operator reads all
    call(records, "GET", f"/records/{encoded('https://doi.org/none')}").error(404, "not-found")

    # An invalid record has its report, and no views
    draft = f"/records/{encoded(INVALID_RECORD_ID)}"
    assert call(records, "GET", draft, key=PUBLISHER).shaped(RecordView)["links"] == {
        "report": f"/v1{draft}/report"
    }
    assert call(records, "GET", f"{draft}/report", key=PUBLISHER).json == {"valid": False}
    assert "not valid" in call(records, "GET", f"{draft}/pid-kernel").error(404, "not-found")
    assert "not valid" in call(records, "GET", f"{draft}/views/nquads").error(404, "not-found")


@pytest.mark.parametrize("view", list(VIEW_NAMES))
def test_every_view_is_made_from_the_stored_record_as_the_crosswalk_wrote_it(
    records: ProvisionedStack, view: str
) -> None:
    path = f"/records/{encoded(RECORD_ID)}/views/{view}"
    answer = call(records, "GET", path, key=PUBLISHER)
    assert answer.status == 200, answer.text
    assert answer.headers["content-type"] == MEDIA_TYPES[view]
    assert answer.text.encode("utf-8") == golden_view(view)
    # cacheable: a strong ETag, and a client that holds it is answered 304 without a body
    etag = answer.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 10
    assert "max-age=" in answer.headers["cache-control"]
    again = call(records, "GET", path, key=PUBLISHER, headers={"If-None-Match": etag})
    assert (again.status, again.text, again.headers["etag"]) == (304, "", etag)
    stale = call(records, "GET", path, key=PUBLISHER, headers={"If-None-Match": '"other"'})
    assert stale.status == 200 and stale.text == answer.text


def test_a_view_s_etag_changes_with_the_record(records: ProvisionedStack) -> None:
    path = f"/records/{encoded(RECORD_ID)}/views/pid-kernel"
    before = call(records, "GET", path, key=PUBLISHER).headers["etag"]
    table = catalog(records)
    entry = table.get_record(RECORD_ID)
    assert entry is not None
    table.put_record(replace(entry, content_hash="1" * 64))
    after = call(records, "GET", path, key=PUBLISHER, headers={"If-None-Match": before})
    assert after.status == 200 and after.headers["etag"] != before
    # another view of the same record has another tag
    other = call(records, "GET", f"/records/{encoded(RECORD_ID)}/views/nquads", key=PUBLISHER)
    assert other.headers["etag"] != after.headers["etag"]


def test_a_record_that_cannot_become_rdf_has_no_nquads_and_its_other_views(
    records: ProvisionedStack,
) -> None:
    entry = catalog(records).get_record(RECORD_ID)
    assert entry is not None and entry.record_key is not None
    record = json.loads((CROSSWALK_GOLDEN / "landing.record.jsonld").read_text())
    record["@context"] = "https://contexts.example.org/unknown.jsonld"  # never fetched
    put_object(records, entry.record_key, json.dumps(record), "application/ld+json")
    path = f"/records/{encoded(RECORD_ID)}/views"
    detail = call(records, "GET", f"{path}/nquads", key=PUBLISHER).error(404, "not-found")
    assert "no nquads view" in detail
    assert call(records, "GET", f"{path}/linkset", key=PUBLISHER).status == 200


def test_an_unknown_view_is_a_bad_request(records: ProvisionedStack) -> None:
    path = f"/records/{encoded(RECORD_ID)}/views/record.nq"
    call(records, "GET", path, key=PUBLISHER).error(400, "invalid-request")


def test_a_source_s_records_are_listed_by_profile_and_verdict(records: ProvisionedStack) -> None:
    path = "/sources/data-example-org/records"

    def ids(key: str | None = PUBLISHER, **query: str) -> list[str]:
        page = call(records, "GET", path, key=key, query=query or None).shaped(RecordsPage)
        assert page["count"] == len(page["records"])
        return [row["record_id"] for row in page["records"]]

    assert ids() == sorted([RECORD_ID, INVALID_RECORD_ID])
    assert ids(profile="discovery/1.1", verdict="invalid") == [INVALID_RECORD_ID]
    assert ids(profile="discovery", verdict="valid") == [RECORD_ID]
    assert ids(profile="core/1.1", verdict="invalid") == []
    assert ids(key=OPERATOR, verdict="valid") == [RECORD_ID]
    # one page at a time
    first = call(records, "GET", path, key=PUBLISHER, query={"limit": "1"}).json
    assert (first["count"], first["truncated"]) == (1, True)
    query = {"limit": "1", "cursor": first["next_cursor"]}
    second = call(records, "GET", path, key=PUBLISHER, query=query).json
    assert [r["record_id"] for r in first["records"] + second["records"]] == ids()
    assert second["truncated"] is False
    # bad queries are refused saying what is accepted; others' sources are not listed
    wrong = call(records, "GET", path, query={"profile": "discovery/one"})
    assert "unknown profile 'discovery/one'" in wrong.error(400, "invalid-request")
    call(records, "GET", path, query={"verdict": "maybe"}).error(400, "invalid-request")
    call(records, "GET", path, key=OTHER_PUBLISHER).error(403, "forbidden")
    call(records, "GET", "/sources/nobody/records").error(404, "unknown-source")


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        (None, "application/linkset+json"),
        ("*/*", "application/linkset+json"),
        ("application/*", "application/linkset+json"),
        ("application/linkset+json", "application/linkset+json"),
        ("application/linkset", "application/linkset"),
        ("text/html, application/linkset;q=0.8", "application/linkset"),
        ("application/linkset;q=0.5, application/linkset+json;q=0.9", "application/linkset+json"),
        ("application/linkset+json;q=0, application/*;q=0.1", "application/linkset"),
    ],
)
def test_the_linkset_is_negotiated_on_accept(
    records: ProvisionedStack, accept: str | None, media_type: str
) -> None:
    headers = {"Accept": accept} if accept is not None else {}
    answer = call(
        records, "GET", f"/records/{encoded(RECORD_ID)}/linkset", key=PUBLISHER, headers=headers
    )
    assert answer.status == 200, answer.text
    assert answer.headers["content-type"] == media_type
    assert answer.headers["vary"] == "Accept"
    view = "linkset-json" if media_type == "application/linkset+json" else "linkset"
    assert answer.text.encode("utf-8") == golden_view(view)


@pytest.mark.parametrize("accept", ["text/html", "application/json", "application/linkset;q=0"])
def test_an_accept_allowing_neither_linkset_is_refused_with_406(
    records: ProvisionedStack, accept: str
) -> None:
    answer = call(
        records, "GET", f"/records/{encoded(RECORD_ID)}/linkset", headers={"Accept": accept}
    )
    detail = answer.error(406, "not-acceptable")
    assert "application/linkset+json" in detail and "application/linkset" in detail


def test_the_signmap_of_a_source(records: ProvisionedStack) -> None:
    path = "/sources/data-example-org/signmap"
    assert "no Signmap" in call(records, "GET", path, key=PUBLISHER).error(404, "not-found")
    signmap = '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>'
    put_object(records, signmap_key("data.example.org"), signmap, "application/xml")
    answer = call(records, "GET", path, key=PUBLISHER)
    assert (answer.status, answer.headers["content-type"]) == (200, "application/xml")
    assert answer.text == signmap
    assert call(records, "GET", path, query={"host": "data.example.org"}).text == signmap
    call(records, "GET", path, query={"host": "repo.example.net"}).error(400, "invalid-request")
    call(records, "GET", path, key=OTHER_PUBLISHER).error(403, "forbidden")
    call(records, "GET", "/sources/nothing-here/signmap").error(404, "unknown-source")


def test_a_document_too_large_for_a_response_is_refused_clearly(records: ProvisionedStack) -> None:
    huge = "<urlset>" + " " * (5 * 1024 * 1024) + "</urlset>"
    put_object(records, signmap_key("data.example.org"), huge, "application/xml")
    answer = call(records, "GET", "/sources/data-example-org/signmap")
    detail = answer.error(501, "too-large-to-serve")
    assert signmap_key("data.example.org") in detail and "records bucket" in detail


# --------------------------------------------------------------------------- files


def _event_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


def test_the_intake_event_files_run_in_order(api_stack: ProvisionedStack) -> None:
    """What ``sam local invoke IntakeFunction -e infrastructure/events/intake-*.json`` sends."""
    names = sorted(path.name for path in EVENTS.glob("intake-*.json"))
    assert names == [
        "intake-get-record-linkset.json",
        "intake-post-harvest.json",
        "intake-post-source-harvest.json",
        "intake-post-source.json",
    ]
    for name in names:  # every one is a REST proxy event with an API key identity
        assert _event_file(name)["requestContext"]["identity"]["apiKeyId"]

    def send(name: str) -> Answer:
        return Answer(invoke(api_stack, "IntakeFunction", _event_file(name)))

    assert send("intake-post-harvest.json").status == 202
    assert decode(queued(api_stack)[0], SitemapJob).url == "https://data.example.org/robots.txt"
    assert send("intake-post-source.json").status == 201
    started = send("intake-post-source-harvest.json")
    assert started.status == 202, started.text
    (body,) = queued(api_stack)
    assert decode(body, SitemapJob).url == "https://data.example.org/sitemap-datasets.xml"

    record_id = "https://data.example.org/metadata/north-atlantic-ctd-2021"
    entry = _entry(record_id, "https://data.example.org/datasets/north-atlantic-ctd-2021.html")
    catalog(api_stack).put_record(entry)
    store_golden_record(api_stack, entry)
    answer = send("intake-get-record-linkset.json")
    assert (answer.status, answer.headers["content-type"]) == (200, "application/linkset")
    assert answer.text.encode("utf-8") == golden_view("linkset")


def test_the_committed_openapi_document_is_the_generated_one() -> None:
    committed = json.loads(OPENAPI.read_text(encoding="utf-8"))
    assert committed == openapi_document(), (
        "docs/openapi.json is out of date: regenerate it with `make openapi` "
        "(python -m cdif_harvester.api > docs/openapi.json)"
    )


# --------------------------------------------------------------------------- conventions


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/sources", "GET, POST"),
        ("POST", "/sources/data-example-org", "DELETE, GET, PUT"),
        ("PATCH", "/runs/20260101T000000Z-00000000", "GET"),
        ("DELETE", "/sources/data-example-org/runs", "GET"),
        ("PUT", f"/records/{encoded(RECORD_ID)}/linkset", "GET"),
    ],
)
def test_a_known_path_asked_with_another_method_answers_405_with_allow(
    api_stack: ProvisionedStack, method: str, path: str, allowed: str
) -> None:
    answer = call(api_stack, method, path)
    detail = answer.error(405, "method-not-allowed")
    assert answer.headers["allow"] == allowed
    assert method in detail and allowed in detail
    # still behind the key, like every route
    call(api_stack, method, path, key=None).error(401, "unauthenticated")


def test_an_unknown_path_is_still_404_whatever_the_method(api_stack: ProvisionedStack) -> None:
    for method in ("GET", "DELETE"):
        answer = call(api_stack, method, "/no/such/route")
        assert "no route" in answer.error(404, "not-found")
        assert "allow" not in answer.headers


def _pages(
    stack: ProvisionedStack, path: str, query: dict[str, str], model: type[BaseModel]
) -> list[dict[str, Any]]:
    """Every page of a list, following Link rel="next" (checked against next_cursor)."""
    pages = []
    target: tuple[str, dict[str, str]] | None = (path, query)
    while target is not None:
        answer = call(stack, "GET", target[0], query=target[1])
        page = answer.shaped(model)
        pages.append(page)
        target = answer.next_page()
        if page["truncated"]:
            assert target is not None and target[0] == path
            # the request's own parameters are kept; only the cursor moves
            assert target[1] == {**query, "cursor": page["next_cursor"]}
        else:
            assert target is None and page["next_cursor"] is None
    return pages


def test_get_sources_honours_limit_and_links_the_next_page(api_stack: ProvisionedStack) -> None:
    ids = [f"source-{n:02d}" for n in range(5)]
    register(
        api_stack,
        *({**SOURCE, "source_id": source_id, "publisher_keys": []} for source_id in reversed(ids)),
    )
    pages = _pages(api_stack, "/sources", {"limit": "2"}, SourceList)
    assert [p["count"] for p in pages] == [2, 2, 1]
    assert [s["source_id"] for p in pages for s in p["sources"]] == ids
    everything = call(api_stack, "GET", "/sources").shaped(SourceList)
    assert everything["count"] == 5 and everything["truncated"] is False
    for query in ({"limit": "0"}, {"limit": "1001"}, {"cursor": "Not An Id"}):
        call(api_stack, "GET", "/sources", query=query).error(400, "invalid-request")


def test_a_run_s_outcomes_are_paged_reading_no_more_than_a_page(
    api_stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(api_stack, SOURCE)
    run_id = call(api_stack, "POST", "/sources/data-example-org/harvests").json["run_id"]
    table = catalog(api_stack)
    urls = [_outcome(run_id, n, Outcome.RECORD).url for n in range(30)]
    table.enter_urls(run_id, urls, step="s")
    for number in range(24):  # six left queued: read, never listed
        table.put_outcome(
            _outcome(run_id, number, Outcome.FAILED if number % 5 == 0 else Outcome.RECORD)
        )
    read: list[int] = []

    def count(**kwargs: Any) -> None:
        read.append(len(kwargs["parsed"].get("Items", [])))

    # (the handler's clients are made from the default session, after this registration; the
    # session is this test's alone, the one before it restored after)
    session = boto3.session.Session()
    session.events.register("after-call.dynamodb.Query", count)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    path = f"/runs/{run_id}/outcomes"
    for query, wanted in (
        ({"limit": "4"}, 24),
        ({"limit": "2", "outcome": "failed"}, 5),
    ):
        read.clear()
        pages = _pages(api_stack, path, query, OutcomesPage)
        listed = [o["url"] for page in pages for o in page["outcomes"]]
        assert len(listed) == len(set(listed)) == wanted
        # not the whole run for every page; without a filter, about once in all (a page may
        # read again what the query before it read past its end: at most limit + 1)
        assert sum(read) < 30 * len(pages)
        if "outcome" not in query:
            assert sum(read) <= 30 + len(pages) * (int(query["limit"]) + 1)
    read.clear()
    call(api_stack, "GET", path, query={"limit": "4"}).shaped(OutcomesPage)
    assert sum(read) <= 2 * 5  # queries of limit + 1 items, the queued ones read and left out


def test_a_large_source_s_records_are_paged_reading_no_more_than_a_page(
    api_stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts = ["data.example.org", "files.example.org"]
    register(api_stack, {**SOURCE, "hosts": hosts})
    table = catalog(api_stack)
    made: dict[str, bool] = {}  # record id -> valid
    for number in range(25):
        host = hosts[number % 2]
        record_id = f"https://doi.org/10.5072/paged.{number:02d}"
        valid = number % 3 != 0
        entry = _entry(record_id, f"https://{host}/d/{number}", valid=valid)
        # dates of change out of id order, some of them equal
        changed = f"2026-01-{10 + (7 * number) % 9:02d}T00:00:00+00:00"
        table.put_record(replace(entry, changed_at=changed))
        made[record_id] = valid
    read: list[int] = []
    index_items = DynamoCatalog._index_items  # noqa: SLF001 - what a request takes of gsi1

    def counted(self: DynamoCatalog, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for item in index_items(self, *args, **kwargs):
            read.append(1)
            yield item

    monkeypatch.setattr(DynamoCatalog, "_index_items", counted)
    path = "/sources/data-example-org/records"
    for query, wanted in (
        ({"limit": "4"}, set(made)),
        ({"limit": "3", "verdict": "invalid"}, {rid for rid, ok in made.items() if not ok}),
        ({"limit": "1000"}, set(made)),
    ):
        read.clear()
        pages = _pages(api_stack, path, query, RecordsPage)
        listed = [r["record_id"] for page in pages for r in page["records"]]
        assert len(listed) == len(set(listed)) and set(listed) == wanted
        # host by host, oldest change first within each
        for host in hosts:
            mine = [r for page in pages for r in page["records"] if r["source"] == host]
            assert [r["changed_at"] for r in mine] == sorted(r["changed_at"] for r in mine)
        # each page read its entries and the one that says more follow, not the source
        assert len(read) <= len(made) + len(pages) * len(hosts)
    read.clear()
    first = call(api_stack, "GET", path, query={"limit": "4"}).shaped(RecordsPage)
    assert first["count"] == 4 and len(read) == 5
    # a cursor is the API's own: anything else is refused, never read as a position
    for cursor in ("abc", "W10", first["next_cursor"] + "x", "Wzk5LG51bGxd"):
        query = {"limit": "4", "cursor": cursor}
        assert "cursor" in call(api_stack, "GET", path, query=query).error(400, "invalid-request")


def test_run_outcomes_and_source_records_link_their_next_page(records: ProvisionedStack) -> None:
    pages = _pages(
        records,
        "/sources/data-example-org/records",
        {"limit": "1", "host": "data.example.org"},
        RecordsPage,
    )
    assert len(pages) == 2
    assert all(r["source"] == "data.example.org" for p in pages for r in p["records"])
    run_id = "20260101T000000Z-0000abcd"
    table = catalog(records)
    table.start_run(
        RunStatus(
            run_id,
            ("https://data.example.org/robots.txt",),
            "2026-01-01T00:00:00+00:00",
            source_id="data-example-org",
        )
    )
    urls = [_outcome(run_id, n, Outcome.RECORD).url for n in range(3)]
    table.enter_urls(run_id, urls, step="s")
    for number in range(3):
        table.put_outcome(_outcome(run_id, number, Outcome.RECORD))
    outcomes = _pages(records, f"/runs/{run_id}/outcomes", {"limit": "2"}, OutcomesPage)
    assert sorted(o["url"] for p in outcomes for o in p["outcomes"]) == sorted(urls)


def test_a_source_s_runs_are_listed_newest_first_page_by_page(api_stack: ProvisionedStack) -> None:
    register(api_stack, SOURCE, OTHER_SOURCE)
    table = catalog(api_stack)
    started = [f"2026-01-0{day}T00:00:00+00:00" for day in range(1, 6)]
    for number, when in enumerate(started):
        table.start_run(
            RunStatus(f"run-{number}", (SOURCE["entry_url"],), when, source_id="data-example-org")
        )
    table.start_run(
        RunStatus(
            "other-run", (OTHER_SOURCE["entry_url"],), started[-1], source_id="repo-example-net"
        )
    )

    first = call(
        api_stack, "GET", "/sources/data-example-org/runs", key=PUBLISHER, query={"limit": "2"}
    )
    assert first.shaped(RunsPage)["source_id"] == "data-example-org"
    pages = _pages(api_stack, "/sources/data-example-org/runs", {"limit": "2"}, RunsPage)
    listed = [r["run_id"] for p in pages for r in p["runs"]]
    assert listed == [f"run-{n}" for n in reversed(range(5))]  # newest first, another's left out
    assert all(r["report"] is None for p in pages for r in p["runs"])

    path = "/sources/data-example-org/runs"
    call(api_stack, "GET", path, key=OTHER_PUBLISHER).error(403, "forbidden")
    call(api_stack, "GET", "/sources/nothing-here/runs").error(404, "unknown-source")
    for query in ({"limit": "0"}, {"limit": "101"}, {"cursor": "abc"}):
        call(api_stack, "GET", path, query=query).error(400, "invalid-request")


def test_the_openapi_document_declares_problems_location_and_link() -> None:
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                where = (method, path, status)
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], where
                if status in {"201", "202"}:
                    assert "Location" in response.get("headers", {}), where
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                if status == "200" and schema.get("$ref", "").endswith(("Page", "SourceList")):
                    assert "Link" in response.get("headers", {}), where
