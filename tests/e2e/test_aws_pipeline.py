"""All six stages on AWS (moto): real SQS events from real queues, records in the S3 bucket,
entries in the DynamoDB table, views made by the API on read — against the demo publisher on
127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.domain.views.pidkernel import pid_kernel_view
from cdif_harvester.keys import VIEW_NAMES
from cdif_harvester.model import Outcome
from tests.support.aws import ProvisionedStack, object_of, read_stored
from tests.support.pipeline import invoke, run_pipeline

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
pytestmark = [pytest.mark.aws, pytest.mark.network]

EXPECTED = {
    "/datasets/north-atlantic-ctd-2021.html": (Outcome.RECORD, True),
    "/datasets/gulf-sst-anomalies.html": (Outcome.RECORD, True),
    "/datasets/kelp-forest-survey.html": (Outcome.RECORD, True),
    "/datasets/tide-gauge-records-1990s.html": (Outcome.RECORD, True),
    "/datasets/sediment-cores-draft.html": (Outcome.RECORD, False),
    "/datasets/glider-mission-notes.html": (Outcome.NO_METADATA, None),
    "/datasets/retired-mooring-2009.html": (Outcome.FAILED, None),
    "/private/whale-acoustics-embargoed.html": (Outcome.DISALLOWED, None),
}


def _api_post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["path"] = event["resource"] = path
    event["body"] = json.dumps(body)
    return event


def _api_get(path: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["path"] = event["resource"] = path
    event["httpMethod"] = "GET"
    event["body"] = None
    return event


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")


def _intake(stack: ProvisionedStack, event: dict[str, Any]) -> dict[str, Any]:
    """Invoke the intake function; POST /harvests is an operator's, and the event file's key
    id is one (OPERATOR_API_KEY_IDS)."""
    operator = event["requestContext"]["identity"]["apiKeyId"]
    return invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)


@pytest.mark.parametrize(
    ("keep_bodies", "segments"),
    [(False, True), (True, True), (False, False)],
    ids=["default", "keep-bodies", "per-record-objects"],
)
def test_a_posted_sitemap_flows_through_all_six_stages(
    stack: ProvisionedStack, site: PublisherSite, keep_bodies: bool, segments: bool
) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    # (The crosswalk queue starts with S3's s3:TestEvent, as on AWS: the handler must shrug it
    # off, which the "no batch item failed" check below covers.)
    # Given a publisher posting its robots.txt to the intake API
    response = _intake(stack, _api_post("/harvests", {"url": site.url("/robots.txt")}))
    assert response["statusCode"] == 202, response
    run_id = json.loads(response["body"])["run_id"]

    # When every queued message is delivered to its stage, as Lambda's event source mappings do
    stats = run_pipeline(
        sqs,
        stack,
        ALLOW_LOOPBACK="true",
        KEEP_BODIES=str(keep_bodies).lower(),
        RECORD_SEGMENTS=str(segments).lower(),
    )

    # Then no batch item failed, every stage ran, and every URL has exactly its outcome
    assert stats.failures == []
    assert set(stats.batches) == {
        "SitemapExpanderFunction",
        "UrlResolverFunction",
        "ExtractorFunction",
        "IndexerFunction",
        "CrosswalkFunction",
    }
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    outcomes = {o.url.removeprefix(site.base_url): o for o in catalog.outcomes(run_id)}
    assert {path: o.outcome for path, o in outcomes.items()} == {
        path: outcome for path, (outcome, _) in EXPECTED.items()
    }
    keys = {
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket_name)
        for item in page.get("Contents", [])
    }
    for path, (outcome, valid) in EXPECTED.items():
        if outcome is not Outcome.RECORD:
            continue
        (ref,) = outcomes[path].records
        assert ref.valid is valid, (path, ref.errors)
        assert object_of(ref.record_key) in keys and object_of(ref.report_key) in keys
        # (a range of a batch's segment, or an object of its own: decision 0086)
        records_at, reports_at = ("segments/",) * 2 if segments else ("records/", "reports/")
        assert ref.record_key.startswith(records_at) and ref.report_key.startswith(reports_at)
        entry = catalog.get_record(ref.record_id)
        assert entry is not None and entry.valid is valid and entry.record_key == ref.record_key
        record = json.loads(read_stored(stack, ref.record_key))
        assert "schema:Dataset" in record["@type"]
        # No view is stored, valid or not: the API makes each from the record when asked
        assert ref.view_keys == {}
        assert not [
            key
            for key in keys
            if key.startswith(f"views/{entry.source}/") and not key.endswith("signmap.xml")
        ]
        for view in VIEW_NAMES:
            answer = _intake(
                stack, _api_get(f"/records/{quote(ref.record_id, safe='')}/views/{view}")
            )
            if not valid:
                assert answer["statusCode"] == 404, answer
                continue
            assert answer["statusCode"] == 200, answer
            if view == "pid-kernel":
                assert answer["body"].encode() == _json(pid_kernel_view(record))
                kernel = json.loads(answer["body"])
                assert kernel["pid"] == ref.resource_id  # the view is of this record's resource
    # And the records bucket holds the raw documents with their provenance only when asked;
    # the answers kept for conditional requests are those of robots.txt and the sitemaps
    # (the expander reads them again on a 304), and of the pages only when asked
    raw = [key for key in keys if key.startswith("raw/")]
    kept = {
        json.loads(s3.get_object(Bucket=stack.bucket_name, Key=key)["Body"].read())["url"]
        for key in keys
        if key.startswith("cache/") and key.endswith(".json")
    }
    pages = {site.url(path) for path in EXPECTED}
    if keep_bodies:
        assert any(key.endswith(".meta.json") for key in raw)
        assert kept & pages
    else:
        assert raw == []
        assert kept and not kept & pages
        assert all(url.endswith((".xml", ".xml.gz", "/robots.txt")) for url in kept), kept
    # And the queues are empty: nothing waits, nothing was dead-lettered
    for url in stack.queue_urls.values():
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        assert attributes["ApproximateNumberOfMessages"] == "0", url


def test_loopback_is_refused_unless_the_deployment_allows_it(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    response = _intake(stack, _api_post("/harvests", {"url": site.url("/robots.txt")}))
    run_id = json.loads(response["body"])["run_id"]
    stats = run_pipeline(
        boto3.client("sqs", region_name=stack.region), stack
    )  # ALLOW_LOOPBACK false
    assert stats.failures == []
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    (outcome,) = catalog.outcomes(run_id)
    assert outcome.outcome is Outcome.BLOCKED
    assert outcome.reason and outcome.reason.startswith("loopback-address")
    assert site.requests == []  # refused before any connection


@pytest.mark.parametrize(
    ("body", "fragment"),
    [({"url": "ftp://example.org/sitemap.xml"}, "absolute http"), ({"nope": 1}, "invalid-request")],
)
def test_intake_refuses_bad_input_with_400(
    stack: ProvisionedStack, body: dict[str, Any], fragment: str
) -> None:
    response = _intake(stack, _api_post("/harvests", body))
    assert response["statusCode"] == 400
    assert fragment in response["body"]
