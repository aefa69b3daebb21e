"""What an entry URL is, on AWS (moto): the same decision as the local runner's, made by the
sitemap expander's handler and carried through the resolver's, against a publisher on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import Outcome, Source, UrlOutcome
from tests.e2e.test_entry_url import HTML, JSONLD, TEXT, demo_record
from tests.support.aws import ProvisionedStack
from tests.support.pipeline import invoke, run_pipeline

pytestmark = [pytest.mark.aws, pytest.mark.network]

EVENTS = Path(__file__).resolve().parents[2] / "infrastructure/events"


def _catalog(stack: ProvisionedStack) -> DynamoCatalog:
    return DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )


def _post_harvest(stack: ProvisionedStack, url: str) -> str:
    """POST /harvests through the intake function (as an operator); the run id."""
    event: dict[str, Any] = json.loads((EVENTS / "intake-post-harvest.json").read_text())
    event["path"] = event["resource"] = "/harvests"
    event["body"] = json.dumps({"url": url})
    operator = event["requestContext"]["identity"]["apiKeyId"]
    response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert response["statusCode"] == 202, response
    return str(json.loads(response["body"])["run_id"])


def _outcomes(stack: ProvisionedStack, run_id: str) -> dict[str, UrlOutcome]:
    return {o.url: o for o in _catalog(stack).outcomes(run_id)}


def test_entry_urls_are_resolved_like_listed_urls_on_aws(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    # Given entry URLs that are no sitemap: a JSON-LD document, a 204 with a Link header to
    # it, a 203 landing page, a 410, and text that lists no URL
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    site.add_route(
        "/resource/x",
        status=204,
        headers={
            "Link": '<{{BASE}}/metadata.jsonld>; rel="describedby"; type="application/ld+json"'
        },
    )
    page = (site.directory / "datasets" / "north-atlantic-ctd-2021.html").read_text()
    site.add_route("/proxied.html", status=203, headers=HTML, body=page)
    site.add_route("/old", status=410, headers=HTML, body="<html><body>gone</body></html>")
    site.add_route("/notes", headers=TEXT, body="not a sitemap\n")
    expected = {
        "/metadata.jsonld": (Outcome.RECORD, "content-type"),
        "/resource/x": (Outcome.RECORD, "http-link"),
        "/proxied.html": (Outcome.RECORD, "embedded-script"),
        "/old": (Outcome.NO_METADATA, None),
        "/notes": (Outcome.NO_METADATA, None),
    }

    # When each is posted as a harvest and every message is delivered
    runs = {path: _post_harvest(stack, site.url(path)) for path in expected}
    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")

    # Then each ends as the same URL listed in a sitemap would, the only URL of its run
    assert stats.failures == []
    for path, run_id in runs.items():
        outcomes = _outcomes(stack, run_id)
        assert set(outcomes) == {site.url(path)}, path
        outcome = outcomes[site.url(path)]
        assert (outcome.outcome, outcome.pattern) == expected[path], (path, outcome.reason)
    gone = _outcomes(stack, runs["/old"])[site.url("/old")]
    assert (gone.reason or "").startswith("no-metadata: gone (410 tombstone)")


def test_a_410_entry_url_withdraws_what_it_held_when_its_run_is_closed(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    catalog = _catalog(stack)
    sqs = boto3.client("sqs", region_name=stack.region)
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    tick = json.loads((EVENTS / "scheduler.json").read_text())
    url = site.url("/metadata.jsonld")
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    catalog.put_source(Source(source_id="doc", entry_url=url, schedule="1d"))

    def harvest() -> str:
        # make the source due, tick (start), deliver everything, tick (close)
        table.update_item(
            Key={"pk": "SOURCE#doc", "sk": "SOURCE"},
            UpdateExpression="SET last_run_at = :old",
            ExpressionAttributeValues={":old": "2020-01-01T00:00:00+00:00"},
        )
        (started,) = invoke(stack, "SchedulerFunction", tick)["started"]
        assert run_pipeline(sqs, stack, ALLOW_LOOPBACK="true").failures == []
        assert invoke(stack, "SchedulerFunction", tick)["closed"] == [started["run_id"]]
        return str(started["run_id"])

    first = harvest()
    assert _outcomes(stack, first)[url].outcome is Outcome.RECORD
    # Given the publisher withdraws its document: 410 Gone
    site.add_route("/metadata.jsonld", status=410, headers=TEXT, body="Gone\n")

    # When the next scheduled run is closed
    run_id = harvest()

    # Then the URL ended as a tombstone, and what it held is kept, marked withdrawn
    assert _outcomes(stack, run_id)[url].outcome is Outcome.NO_METADATA
    assert catalog.get_url(url).withdrawn_at
    entries = [e for e in catalog.records(f"127.0.0.1_{site.port}") if e.url == url]
    assert entries and all(e.withdrawn_at for e in entries)
    s3 = boto3.client("s3", region_name=stack.region)
    summary = json.loads(
        s3.get_object(Bucket=stack.bucket_name, Key=f"runs/{run_id}/summary.json")["Body"].read()
    )
    assert summary["withdrawn"] == [url]


def test_a_site_root_is_harvested_as_a_site_on_aws(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    # Given a site whose robots.txt announces no sitemap but which serves /sitemap.xml
    site.add_route("/robots.txt", headers=TEXT, body="User-agent: *\nAllow: /\n")
    index = (site.directory / "sitemap-index.xml").read_text()
    site.add_route("/sitemap.xml", headers={"Content-Type": "application/xml"}, body=index)

    # When the site's address is posted as a harvest, every message delivered, the run closed
    run_id = _post_harvest(stack, site.url("/"))
    assert run_pipeline(sqs, stack, ALLOW_LOOPBACK="true").failures == []
    tick = json.loads((EVENTS / "scheduler.json").read_text())
    assert run_id in invoke(stack, "SchedulerFunction", tick)["closed"]

    # Then the sitemap's pages gave records, the home page itself was not resolved
    outcomes = _outcomes(stack, run_id)
    assert outcomes[site.url("/datasets/north-atlantic-ctd-2021.html")].outcome is Outcome.RECORD
    assert site.url("/") not in outcomes
    # and the run's summary says which sitemap was found, and how
    summary = json.loads(
        s3.get_object(Bucket=stack.bucket_name, Key=f"runs/{run_id}/summary.json")["Body"].read()
    )
    (found,) = summary["sites"]
    assert found["found_by"] == "well-known path"
    assert found["sitemaps"] == [site.url("/sitemap.xml")]
