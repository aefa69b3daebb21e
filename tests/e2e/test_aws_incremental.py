"""Incremental harvesting and idempotency on AWS (moto): the real handlers, SQS, S3, DynamoDB,
against the demo publisher on 127.0.0.1.

Object writes are counted at the source: a hook on every S3 ``PutObject`` the handlers' boto3
clients make.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import UrlJob, encode
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import Outcome, RunStatus
from tests.support.aws import ProvisionedStack, mocked_stack, own_index_urls
from tests.support.lambda_driver import PumpStats
from tests.support.pipeline import invoke, run_pipeline

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
pytestmark = [pytest.mark.aws, pytest.mark.network]
RECORD_PAGES = 5  # the demo site's pages with a record (see test_aws_pipeline.py)


@pytest.fixture
def puts() -> Iterator[list[str]]:
    """Every S3 PutObject key the handlers write while the test runs."""
    written: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        written.append(str(params.get("Key")))

    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    events = session._session  # the botocore session whose emitter every new client copies
    events.register("before-parameter-build.s3.PutObject", count)
    yield written
    events.unregister("before-parameter-build.s3.PutObject", count)


@pytest.fixture
def latest_writes() -> Iterator[list[str]]:
    """The operation of every DynamoDB write the handlers make to a URL's LATEST item."""
    written: list[str] = []

    def count(params: dict[str, Any], event_name: str, **_: Any) -> None:
        keys = [params.get("Key") or params.get("Item") or {}]
        for entry in params.get("TransactItems") or ():
            ((_, action),) = entry.items()
            keys.append(action.get("Key") or action.get("Item") or {})
        for key in keys:
            sort_key = key.get("sk")
            # the resource layer may or may not have serialised the key yet
            if sort_key in ("LATEST", {"S": "LATEST"}):
                written.append(event_name.rsplit(".", 1)[-1])

    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    events = session._session
    operations = ("PutItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem")
    for operation in operations:
        events.register(f"provide-client-params.dynamodb.{operation}", count)
    yield written
    for operation in operations:
        events.unregister(f"provide-client-params.dynamodb.{operation}", count)


def _harvest(
    stack: ProvisionedStack, site: PublisherSite, **overrides: str
) -> tuple[str, PumpStats]:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["body"] = json.dumps({"url": site.url("/robots.txt")})
    # POST /harvests is an operator's: the event file's key id is one (OPERATOR_API_KEY_IDS)
    operator = event["requestContext"]["identity"]["apiKeyId"]
    response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert response["statusCode"] == 202, response
    sqs = boto3.client("sqs", region_name=stack.region)
    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true", **overrides)
    assert stats.failures == []
    return str(json.loads(response["body"])["run_id"]), stats


def _catalog(stack: ProvisionedStack) -> DynamoCatalog:
    return DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )


# Records and reports in a batch's segment (the default), or each in an object of its own
@pytest.mark.parametrize(("segments", "written"), [("true", "segments/"), ("false", "records/")])
def test_unchanged_reharvest_on_aws_fetches_no_bodies_and_writes_no_objects(
    stack: ProvisionedStack, site: PublisherSite, puts: list[str], segments: str, written: str
) -> None:
    first, first_stats = _harvest(stack, site, RECORD_SEGMENTS=segments)
    outcomes = list(_catalog(stack).outcomes(first))
    assert sum(o.outcome is Outcome.RECORD for o in outcomes) == RECORD_PAGES
    assert any(key.startswith(written) for key in puts)
    seen = len(site.timings)
    puts.clear()

    second, second_stats = _harvest(stack, site, RECORD_SEGMENTS=segments)

    again = list(_catalog(stack).outcomes(second))
    assert len(again) == len(outcomes)
    assert sum(o.outcome is Outcome.UNCHANGED for o in again) == RECORD_PAGES
    assert {t.status for t in site.timings[seen:]} <= {304, 404}
    assert puts == []  # not one object written
    # the expander settled the pages with records by their sitemap lastmod: no URL job for them
    url_jobs = first_stats.messages["UrlResolverFunction"]
    assert second_stats.messages["UrlResolverFunction"] == url_jobs - RECORD_PAGES


# With the idempotency table (asked for: IdempotencyTableEnabled) a second copy is not run at
# all; without it (the default) it runs again, asks the page once more, and changes nothing
# (docs/decisions/0087-no-idempotency-table-by-default.md).
@pytest.mark.parametrize(("table", "asked_per_copy"), [("true", 0), ("false", 1)])
def test_a_redelivered_message_changes_nothing(
    site: PublisherSite, table: str, asked_per_copy: int
) -> None:
    with mocked_stack(parameters={"IdempotencyTableEnabled": table}) as stack:
        _harvest(stack, site)
        _redeliver(stack, site, asked_per_copy)


def _redeliver(stack: ProvisionedStack, site: PublisherSite, asked_per_copy: int) -> None:
    page = site.url("/datasets/glider-mission-notes.html")  # no record: always looked at
    sqs = boto3.client("sqs", region_name=stack.region)
    catalog = _catalog(stack)
    queue = stack.queue_urls["UrlResolverQueue"]

    def asked() -> int:
        return sum(1 for t in site.timings if t.target.endswith("glider-mission-notes.html"))

    def deliver(run_id: str, copies: int) -> int:
        # a run the page entered (as a sitemap job would have it), so that the run counts it
        catalog.start_run(RunStatus(run_id=run_id, entry_urls=(page,), started_at="2026-11-25"))
        catalog.enter_urls(run_id, [page], step="sitemap")
        job = UrlJob(run_id=run_id, source=f"127.0.0.1_{site.port}", url=page)
        before = asked()
        for _ in range(copies):  # a redelivery, or a duplicate send: other message ids
            sqs.send_message(QueueUrl=queue, MessageBody=encode(job))
        stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")
        assert stats.failures == []
        assert stats.messages.get("UrlResolverFunction") == copies
        return asked() - before

    once = deliver("run-once", 1)
    twice = deliver("run-twice", 2)

    assert once >= 1 and twice == once * (1 + asked_per_copy)
    (outcome,) = list(catalog.outcomes("run-twice"))
    assert outcome.outcome is Outcome.NO_METADATA
    # and the run counts the page once, as the run that had it once
    counts = []
    for run_id in ("run-once", "run-twice"):
        run = catalog.get_run(run_id)
        assert run is not None
        counts.append((run.entered, run.settled, {k: n for k, n in run.outcomes.items() if n}))
    assert counts[1] == counts[0] == (1, 1, {Outcome.NO_METADATA.value: 1})


def test_an_unchanged_reharvest_writes_no_latest_items(
    stack: ProvisionedStack, site: PublisherSite, latest_writes: list[str]
) -> None:
    _harvest(stack, site)
    assert latest_writes  # the first harvest writes each URL's latest outcome and state
    _harvest(stack, site)  # record -> unchanged: the latest outcome changes once
    latest_writes.clear()

    third, _stats = _harvest(stack, site)

    again = list(_catalog(stack).outcomes(third))
    assert sum(o.outcome is Outcome.UNCHANGED for o in again) == RECORD_PAGES
    assert latest_writes == []  # same outcomes, same state: not one LATEST item rewritten
    # and the catalogue still says what the URLs' latest outcomes are
    source = f"127.0.0.1_{site.port}"
    assert {s.url for s in _catalog(stack).urls(source, outcome="unchanged")} == {
        o.url for o in again if o.outcome is Outcome.UNCHANGED
    }


def test_pages_asked_again_answer_304_and_end_unchanged_with_no_body_kept(
    stack: ProvisionedStack, site: PublisherSite, puts: list[str]
) -> None:
    # Given a first harvest (bodies are not kept: the validators went to the catalogue)
    _harvest(stack, site)
    paths = [
        "/datasets/north-atlantic-ctd-2021.html",
        "/datasets/gulf-sst-anomalies.html",
        "/datasets/kelp-forest-survey.html",
        "/datasets/glider-mission-notes.html",  # no metadata
    ]
    urls = {path: site.url(path) for path in paths}
    seen = len(site.timings)
    puts.clear()

    # When the pages are asked again without a sitemap lastmod (URL jobs of a later run)
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.queue_urls["UrlResolverQueue"]
    for url in urls.values():
        job = UrlJob(run_id="again", source=f"127.0.0.1_{site.port}", url=url)
        sqs.send_message(QueueUrl=queue, MessageBody=encode(job))
    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")
    assert stats.failures == []

    # Then every request was conditional and answered 304, and each URL ends as before
    asked = site.timings[seen:]
    assert {t.target for t in asked} == set(paths) and {t.status for t in asked} == {304}
    outcomes = {o.url: o for o in _catalog(stack).outcomes("again")}
    for path in paths[:3]:
        assert outcomes[urls[path]].outcome is Outcome.UNCHANGED
        assert (outcomes[urls[path]].reason or "").startswith("not-modified")
    assert outcomes[urls[paths[3]]].outcome is Outcome.NO_METADATA
    # and not one object was written, nor was any page's body kept by the first harvest
    assert puts == []
    s3 = boto3.client("s3", region_name=stack.region)
    keys = [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket_name)
        for item in page.get("Contents", [])
    ]
    assert not [key for key in keys if key.startswith("raw/")]
    cached = [
        json.loads(s3.get_object(Bucket=stack.bucket_name, Key=key)["Body"].read())["url"]
        for key in keys
        if key.startswith("cache/") and key.endswith(".json")
    ]
    assert cached and not set(cached) & set(urls.values())


def test_a_first_harvest_lists_its_record_pages_through_their_records(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    # Decision 0102, through the real handlers: the indexer read or wrote each record's entry,
    # so the pages that gave records have no index entry of their own, and are listed anyway.
    run_id, _stats = _harvest(stack, site)
    outcomes = list(_catalog(stack).outcomes(run_id))
    recorded = {o.url for o in outcomes if o.outcome is Outcome.RECORD}
    assert len(recorded) == RECORD_PAGES
    source = f"127.0.0.1_{site.port}"
    listed_by_own_entry = own_index_urls(stack, source)
    assert listed_by_own_entry.isdisjoint(recorded)
    assert listed_by_own_entry  # the pages without a record keep theirs
    listed = set(_catalog(stack).source_urls(source))
    assert recorded | listed_by_own_entry <= listed
    assert {o.url for o in outcomes if o.url.startswith(site.url("/"))} <= listed
