"""Scheduled runs on AWS (moto): the scheduler's tick starts runs only for due sources, a run
reaches finished with counts equal to its per-URL outcomes, and the next tick closes it (the
publisher report in S3, the source free again)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.model import RunState, RunStatus, Source
from tests.support.aws import ProvisionedStack
from tests.support.pipeline import invoke, run_pipeline

pytestmark = [pytest.mark.aws, pytest.mark.network]

TICK = json.loads(
    (Path(__file__).resolve().parents[2] / "infrastructure/events/scheduler.json").read_text()
)


def _catalog(stack: ProvisionedStack) -> DynamoCatalog:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    return DynamoCatalog(table)


def _tick(stack: ProvisionedStack) -> dict[str, Any]:
    return invoke(stack, "SchedulerFunction", TICK)


def test_tick_starts_due_sources_only_and_closes_finished_runs(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    catalog = _catalog(stack)
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    recently = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    # Given a source never harvested (due), one harvested an hour ago on a daily schedule (not
    # due) and one harvested on demand only
    catalog.put_source(Source(source_id="demo", entry_url=site.url("/robots.txt"), schedule="1d"))
    catalog.put_source(
        Source(
            source_id="recent",
            entry_url="https://recent.example.org/robots.txt",
            schedule="1d",
            last_run_at=recently,
        )
    )
    catalog.put_source(Source(source_id="manual", entry_url="https://manual.example.org/"))

    # When the scheduler ticks
    first = _tick(stack)

    # Then only the due source has a run, recorded and holding the source
    assert [run["source_id"] for run in first["started"]] == ["demo"]
    run_id = first["started"][0]["run_id"]
    assert catalog.get_source("demo").active_run == run_id
    assert catalog.get_source("recent").active_run is None
    run = catalog.get_run(run_id)
    assert run.state is RunState.RUNNING and run.trigger == "schedule"

    # and a second tick while it runs starts nothing (the source was harvested just now, and
    # its run is under way)
    assert _tick(stack)["started"] == []

    # When the pipeline has delivered every message
    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")
    assert stats.failures == []

    # Then the run is finished, with counters equal to its per-URL outcomes
    run = catalog.get_run(run_id)
    outcomes = list(catalog.outcomes(run_id))
    assert run.state is RunState.FINISHED and run.finished_at
    assert run.entered == run.settled == len(outcomes) > 0
    assert run.sitemaps == 0
    counts = Counter(o.outcome.value for o in outcomes)
    assert {k: v for k, v in run.outcomes.items() if v} == dict(counts)
    assert run.closed_at is None  # the end of the run is the next tick's work

    # When the scheduler ticks again
    closing = _tick(stack)

    # Then the run is closed: summary, outcomes and the publisher report are in S3, the
    # summary's counts are the run's, and the source is free for its next run
    assert closing["closed"] == [run_id]
    run = catalog.get_run(run_id)
    assert run.closed_at and run.report_key == f"runs/{run_id}/report.html"
    summary = json.loads(
        s3.get_object(Bucket=stack.bucket_name, Key=f"runs/{run_id}/summary.json")["Body"].read()
    )
    assert summary["urls"] == run.settled
    assert {k: v for k, v in summary["outcomes"].items() if v} == dict(counts)
    report = s3.get_object(Bucket=stack.bucket_name, Key=run.report_key)
    assert report["ContentType"].startswith("text/html")
    assert run_id.encode() in report["Body"].read()
    assert catalog.get_source("demo").active_run is None
    assert _tick(stack)["closed"] == []  # closed once


def test_a_run_with_no_progress_is_recounted_then_marked_stalled(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    long_ago = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="seconds")
    catalog.put_source(Source(source_id="stuck", entry_url="https://stuck.example.org/robots.txt"))
    # Given a run of the source that entered a URL two days ago and never heard of it again
    # (its job went to a dead-letter queue)
    catalog.start_run(
        RunStatus(
            run_id="old-run",
            entry_urls=("https://stuck.example.org/robots.txt",),
            started_at=long_ago,
            source_id="stuck",
            updated_at=long_ago,
        )
    )
    assert catalog.claim_source("stuck", "old-run", at=long_ago)
    catalog.enter_urls("old-run", ["https://stuck.example.org/a"], step="s")

    # When the scheduler ticks
    result = _tick(stack)

    # Then the run is stalled (not finished: a URL has no outcome) and the source is free
    assert result["stalled"] == ["old-run"]
    run = catalog.get_run("old-run")
    assert run.state is RunState.STALLED and run.entered == 1 and run.settled == 0
    assert catalog.get_source("stuck").active_run is None


def test_a_vanished_url_becomes_a_tombstone_when_its_run_is_closed(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    catalog = _catalog(stack)
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog.put_source(Source(source_id="demo", entry_url=site.url("/robots.txt"), schedule="1d"))
    gulf = site.url("/datasets/gulf-sst-anomalies.html")

    def harvest() -> str:
        # make the source due, tick (start), deliver everything, tick (close)
        table.update_item(
            Key={"pk": "SOURCE#demo", "sk": "SOURCE"},
            UpdateExpression="SET last_run_at = :old",
            ExpressionAttributeValues={":old": "2020-01-01T00:00:00+00:00"},
        )
        (started,) = _tick(stack)["started"]
        assert run_pipeline(sqs, stack, ALLOW_LOOPBACK="true").failures == []
        assert _tick(stack)["closed"] == [started["run_id"]]
        return str(started["run_id"])

    harvest()
    assert catalog.get_url(gulf).withdrawn_at is None
    # Given the publisher drops one dataset from its sitemap
    text = (demo_site_dir() / "sitemap-datasets.xml").read_text(encoding="utf-8")
    start = text.index("  <url>\n    <loc>{{BASE}}/datasets/gulf-sst-anomalies.html")
    end = text.index("</url>", start) + len("</url>\n")
    site.add_route(
        "/sitemap-datasets.xml",
        headers={"Content-Type": "application/xml"},
        body=text[:start] + text[end:],
    )

    # When the next scheduled run is closed
    run_id = harvest()

    # Then the URL is a tombstone: kept, marked withdrawn, out of the source's Signmap
    assert catalog.get_url(gulf).withdrawn_at
    entries = [e for e in catalog.records(f"127.0.0.1_{site.port}") if e.url == gulf]
    assert entries and all(e.withdrawn_at for e in entries)
    summary = json.loads(
        s3.get_object(Bucket=stack.bucket_name, Key=f"runs/{run_id}/summary.json")["Body"].read()
    )
    assert summary["withdrawn"] == [gulf]
    signmap = s3.get_object(
        Bucket=stack.bucket_name, Key=f"views/127.0.0.1_{site.port}/signmap.xml"
    )["Body"].read()
    assert gulf.encode() not in signmap
    assert site.url("/datasets/kelp-forest-survey.html").encode() in signmap
