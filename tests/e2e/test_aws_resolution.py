"""Every resolution pattern on AWS (moto): v3 messages through real SQS queues, records and
Signposting views made by the API, outcomes with their pattern in DynamoDB."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import Outcome
from tests.support.aws import ProvisionedStack, read_stored
from tests.support.httpserver import LocalHTTPServer
from tests.support.pipeline import invoke, run_pipeline
from tests.support.signposting_site import EXPECTED_PATTERNS, signposting_site

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
pytestmark = [pytest.mark.aws, pytest.mark.network]


@pytest.fixture
def publisher() -> Iterator[PublisherSite]:
    with signposting_site() as served:
        yield served


def test_every_pattern_resolves_on_aws(stack: ProvisionedStack, publisher: PublisherSite) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["body"] = json.dumps({"url": publisher.url("/robots.txt")})
    # POST /harvests is an operator's: the event file's key id is one (OPERATOR_API_KEY_IDS)
    operator = event["requestContext"]["identity"]["apiKeyId"]
    response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert response["statusCode"] == 202, response
    run_id = json.loads(response["body"])["run_id"]

    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")

    assert stats.failures == []
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    outcomes = {o.url.removeprefix(publisher.base_url): o for o in catalog.outcomes(run_id)}
    assert {path: o.pattern for path, o in outcomes.items()} == EXPECTED_PATTERNS
    assert {o.outcome for o in outcomes.values()} == {Outcome.RECORD}

    def s3_json(ref: str) -> Any:
        return json.loads(read_stored(stack, ref))

    def linkset(record_id: str) -> Any:
        """The record's linkset as the API makes it (no view is stored)."""
        get = dict(event, httpMethod="GET", body=None)
        get["path"] = get["resource"] = f"/records/{quote(record_id, safe='')}/views/linkset-json"
        answer = invoke(stack, "IntakeFunction", get, OPERATOR_API_KEY_IDS=operator)
        assert answer["statusCode"] == 200, answer
        return json.loads(answer["body"])

    # The links the resolver saw (an HTTP Link header, a linkset, a Signmap) reach the views.
    for path, href in {
        "/resource/hl": "https://doi.org/10.5072/hl",
        "/resource/ls": "https://orcid.org/0000-0002-1825-0097",
        "/resource/sm": "https://doi.org/10.5072/sm",
    }.items():
        (ref,) = outcomes[path].records
        assert ref.valid, (path, ref.errors)
        assert ref.view_keys == {}
        assert href in json.dumps(linkset(ref.record_id)), path
        provenance = s3_json(ref.report_key)["provenance"]
        assert provenance["pattern"] == EXPECTED_PATTERNS[path]


def _closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cut_pages_and_unverifiable_claims_end_as_locally_at_the_first_attempt(
    stack: ProvisionedStack, tmp_path: Path
) -> None:
    """A 60 MB landing page and a claim on an origin that refuses connections: the same outcome
    and warnings as the local runner gives, no redelivery."""
    mib = 1024 * 1024
    dead = f"http://127.0.0.1:{_closed_port()}/dataset/1"
    claim = json.dumps({"@context": "https://schema.org/", "@type": "Dataset", "@id": dead})

    def huge(after: str) -> Any:
        def chunks() -> Iterator[bytes]:
            yield b"<!doctype html><html><head><title>huge</title></head><body>"
            for _ in range(60):
                yield b"<p>" + b"x" * (mib - 8) + b"</p>\n"
            yield after.encode() + b"</body></html>"

        return chunks

    # Connection: close on every answer, so that no pooled connection outlives the test (the
    # handlers' fetcher lives as long as their execution environment).
    close = ("Connection", "close")
    with LocalHTTPServer() as site:
        site.route("/robots.txt", status=404, headers=[close])
        locs = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in ("/huge", "/claim.json"))
        site.route(
            "/sitemap.xml",
            headers=[("Content-Type", "application/xml"), close],
            body=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'.encode(),
        )
        site.route(
            "/huge",
            headers=[("Content-Type", "text/html"), close],
            body=huge(f'<script type="application/ld+json">{claim}</script>'),
        )
        site.route(
            "/claim.json",
            headers=[("Content-Type", "application/ld+json"), close],
            body=claim.encode(),
        )

        sqs = boto3.client("sqs", region_name=stack.region)
        event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
        event["body"] = json.dumps({"url": site.url("/sitemap.xml")})
        operator = event["requestContext"]["identity"]["apiKeyId"]
        response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
        assert response["statusCode"] == 202, response
        run_id = json.loads(response["body"])["run_id"]
        stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")

        with LocalHarvester(tmp_path / "local", allow_loopback=True) as harvester:
            harvester.harvest(site.url("/sitemap.xml"))

    assert stats.failures == []
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    on_aws = {o.url.removeprefix(site.url("")): o for o in catalog.outcomes(run_id)}
    huge_outcome = on_aws["/huge"]
    assert huge_outcome.outcome == Outcome.FAILED
    assert huge_outcome.reason.startswith("body-too-large: landing page larger than 5 MiB")
    (ref,) = on_aws["/claim.json"].records
    report = json.loads(read_stored(stack, ref.report_key))
    assert report["provenance"]["authority"] == "unverified"
    assert report["warnings"][0]["keyword"] == "unverified-claim"
    assert f"{dead} could not be read (connection-refused" in report["warnings"][0]["message"]

    local = [
        json.loads(line)
        for line in (tmp_path / "local" / "outcomes.jsonl").read_text().splitlines()
    ]
    assert {
        line["url"].removeprefix(site.url("")): (line["outcome"], line.get("reason"))
        for line in local
    } == {path: (str(o.outcome), o.reason) for path, o in on_aws.items()}
