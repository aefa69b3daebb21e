"""Politeness on AWS, under moto with real SQS events and real HTTP on 127.0.0.1.

A job whose host cannot take a request now is deferred: sent again to its queue with a message
delay and counted as processed (no failure, no receive count), then resumed from its journal
without asking the host again. A retryable error that carries ``Retry-After`` makes SQS redeliver
the message only after that delay (ChangeMessageVisibility).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from cdif_harvester import aws_runtime
from cdif_harvester.adapters.aws import DynamoHostGate
from cdif_harvester.adapters.politeness import GatedFetcher
from cdif_harvester.contracts import SitemapJob, UrlJob, encode
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.errors import RetryableError
from cdif_harvester.keys import origin_of
from cdif_harvester.stages.expand import expand_sitemap
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring
from tests.support.aws import ProvisionedStack
from tests.support.lambda_driver import PumpStats, Route, pump
from tests.support.pipeline import function_environment

FUNCTION = "UrlResolverFunction"
PAGE = """<html><head><script type="application/ld+json">
{"@context": "https://schema.org/", "@type": "Dataset", "@id": "{{BASE}}/ds/1",
 "name": "Polite dataset", "description": "A dataset served slowly and politely.",
 "url": "{{BASE}}/page.html", "identifier": "{{BASE}}/ds/1"}
</script></head><body>polite</body></html>"""


def head_then_get(wiring: Wiring, job: UrlJob) -> None:
    """A stage that asks its host twice per job, as the resolver does (HEAD, then GET)."""
    wiring.fetcher.fetch(job.url, method="HEAD")
    wiring.fetcher.fetch(job.url)


@pytest.fixture
def sqs(stack: ProvisionedStack) -> Any:
    return boto3.client("sqs", region_name=stack.region)


@pytest.fixture
def resolver_env(stack: ProvisionedStack) -> Iterator[Wiring]:
    """The resolver's execution environment; deferrals come back exactly on time."""
    with function_environment(stack, FUNCTION, ALLOW_LOOPBACK="true"):
        bundle = aws_runtime.wiring()
        assert isinstance(bundle.fetcher, GatedFetcher)
        bundle.fetcher.jitter = lambda wait: 0.0
        aws_runtime.metrics.clear_metrics()
        yield bundle
        aws_runtime.metrics.clear_metrics()


def _drive(sqs: Any, stack: ProvisionedStack, stage: Callable[[Wiring, UrlJob], Any]) -> PumpStats:
    source = stack.sqs_event_sources[FUNCTION]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            return aws_runtime.handle_sqs_batch(event, context, UrlJob, stage)
        except BatchProcessingError:  # every record failed: Lambda retries the whole batch
            return {
                "batchItemFailures": [
                    {"itemIdentifier": record["messageId"]} for record in event["Records"]
                ]
            }

    return pump(sqs, [Route(source.queue_url, source.queue_arn, handler, name=FUNCTION)])


def _send(sqs: Any, stack: ProvisionedStack, url: str, **limits: Any) -> None:
    job = UrlJob(run_id="20260301T120000Z-polite", source="127.0.0.1", url=url, **limits)
    queue = stack.sqs_event_sources[FUNCTION].queue_url
    sqs.send_message(QueueUrl=queue, MessageBody=encode(job))


def _delayed(sqs: Any, stack: ProvisionedStack) -> int:
    queue = stack.sqs_event_sources[FUNCTION].queue_url
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_a_deferred_job_goes_back_delayed_and_resumes_from_its_journal(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    with PublisherSite(None) as site:
        site.add_route("/page.html", headers={"Content-Type": "text/html"}, body=PAGE)
        # Given a host whose Crawl-delay (1 s) the expander has recorded on its gate item
        table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        DynamoHostGate(table).set_interval(origin_of(site.base_url), 1.0)
        _send(sqs, stack, site.url("/page.html"))

        # When the resolver runs the job, its second request must wait: the job is deferred
        first = _drive(sqs, stack, head_then_get)
        assert first.failures == []  # processed, not failed: no receive count spent
        assert [method for method, _, _ in site.requests] == ["HEAD"]
        assert _delayed(sqs, stack) == 1
        assert "Deferred" in aws_runtime.metrics.metric_set
        s3 = boto3.client("s3", region_name=stack.region)
        saved = s3.list_objects_v2(Bucket=stack.bucket_name, Prefix="staging/")
        assert any(o["Key"].endswith("/journal.json") for o in saved.get("Contents", []))

        # Then, once the delay is over, it resumes: the HEAD is replayed, only the GET is sent
        time.sleep(1.2)
        second = _drive(sqs, stack, head_then_get)
        assert second.failures == []
        assert second.messages == {FUNCTION: 1}
        assert [method for method, _, _ in site.requests] == ["HEAD", "GET"]
        assert _delayed(sqs, stack) == 0


def test_a_sources_own_crawl_delay_defers_on_aws_without_any_robots_txt(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    with PublisherSite(None) as site:
        site.add_route("/page.html", headers={"Content-Type": "text/html"}, body=PAGE)
        # Given a job of a registered source that asks for 1 s between requests (its host
        # has no Crawl-delay of its own)
        _send(sqs, stack, site.url("/page.html"), requests_per_host=1, crawl_delay=1.0)

        # When the resolver runs it, the second request waits: the job is deferred
        first = _drive(sqs, stack, head_then_get)
        assert first.failures == []
        assert [method for method, _, _ in site.requests] == ["HEAD"]
        assert _delayed(sqs, stack) == 1
        # and the hold is on the host's gate item, where every worker sees it
        table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        item = table.get_item(Key={"pk": f"HOST#{origin_of(site.base_url)}", "sk": "GATE"})
        assert float(item["Item"]["held_until"]) > time.time()

        # Then it resumes after the delay and sends only the GET
        time.sleep(1.2)
        second = _drive(sqs, stack, head_then_get)
        assert second.failures == []
        assert [method for method, _, _ in site.requests] == ["HEAD", "GET"]


def test_retry_after_delays_the_redelivery(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    def busy(wiring: Wiring, job: UrlJob) -> None:
        raise RetryableError("answered 503", reason="http-503", retry_after=1.0)

    queue = stack.sqs_event_sources[FUNCTION].queue_url
    _send(sqs, stack, "http://127.0.0.1:9/anything")
    stats = _drive(sqs, stack, busy)
    assert len(stats.failures) == 1
    # The failed message is back after one second, not after the 360 s visibility timeout
    assert sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0).get("Messages") is None
    assert "RetryAfter" in aws_runtime.metrics.metric_set
    time.sleep(1.2)
    (message,) = sqs.receive_message(QueueUrl=queue, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"


def test_the_resolver_honours_a_429_retry_after(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    with PublisherSite(None) as site:
        site.add_route("/page.html", headers={"Content-Type": "text/html"}, body=PAGE)
        site.add_route("/page.html", status=429, headers={"Retry-After": "1"}, times=1)
        _send(sqs, stack, site.url("/page.html"))
        first = _drive(sqs, stack, resolve_url)
        assert len(first.failures) == 1
        time.sleep(1.2)
        second = _drive(sqs, stack, resolve_url)
        assert second.failures == []
        statuses = [timing.status for timing in site.timings]
        assert statuses == [429, 200]
        gap = site.timings[1].started - site.timings[0].finished
        assert gap >= 1.0 - 0.05  # neither SQS nor the gate let it come back earlier


def test_the_expander_records_a_robots_crawl_delay_on_the_hosts_gate_item(
    stack: ProvisionedStack,
) -> None:
    with (
        PublisherSite(None) as site,
        function_environment(stack, "SitemapExpanderFunction", ALLOW_LOOPBACK="true"),
    ):
        robots = "User-agent: *\nCrawl-delay: 2\nSitemap: {{BASE}}/sitemap.xml\n"
        site.add_route("/robots.txt", headers={"Content-Type": "text/plain"}, body=robots)
        bundle = aws_runtime.wiring()
        job = SitemapJob(run_id="20260301T120000Z-polite", source="s", url=site.url("/robots.txt"))
        expand_sitemap(bundle, job)
        # Read by the expander, the delay is on the gate item every resolver reads
        table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        origin = origin_of(site.base_url)
        item = table.get_item(Key={"pk": f"HOST#{origin}", "sk": "GATE"})["Item"]
        assert float(item["crawl_delay"]) == 2.0


def test_a_503_without_retry_after_is_redelivered_after_a_growing_backoff(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The visibility changes the handler asks SQS for; the backoff drawn at the top of its step
    client = resolver_env.queue.client  # type: ignore[attr-defined]
    asked: list[dict[str, Any]] = []
    change = client.change_message_visibility

    def record(**kwargs: Any) -> Any:
        asked.append(kwargs)
        return change(**kwargs)

    monkeypatch.setattr(client, "change_message_visibility", record)
    monkeypatch.setattr(aws_runtime, "retry_jitter", lambda low, high: high)
    queue = stack.sqs_event_sources[FUNCTION].queue_url
    with PublisherSite(None) as site:
        # Given a page whose server answers 503, without Retry-After, twice
        site.add_route("/page.html", headers={"Content-Type": "text/html"}, body=PAGE)
        site.add_route("/page.html", status=503, headers={"Content-Type": "text/plain"}, times=2)
        _send(sqs, stack, site.url("/page.html"))

        # When it is delivered, and redelivered as soon as SQS would let it come back
        failures = []
        for _ in range(3):
            failures.append(len(_drive(sqs, stack, resolve_url).failures))
            if failures[-1]:  # (time passing, without waiting: the message is made visible now)
                assert (
                    sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0).get("Messages") is None
                )
                sqs.change_message_visibility(
                    QueueUrl=queue, ReceiptHandle=asked[-1]["ReceiptHandle"], VisibilityTimeout=0
                )
            if len(failures) == 1:
                assert "RetryBackoff" in aws_runtime.metrics.metric_set

    # Then each failed delivery was held 1 s, then 2 s, not the queue's visibility timeout,
    # and the third delivery harvested the page
    assert failures == [1, 1, 0]
    assert [call["VisibilityTimeout"] for call in asked] == [1, 2]
    assert [timing.status for timing in site.timings] == [503, 503, 200]


def _gate_writes(bundle: Wiring) -> list[dict[str, Any]]:
    """Every UpdateItem the resolver's host gate makes from now on (its client's calls)."""
    gate = bundle.fetcher.gate  # type: ignore[attr-defined]
    writes: list[dict[str, Any]] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        writes.append(params)

    gate.table.meta.client.meta.events.register("provide-client-params.dynamodb.UpdateItem", count)
    return writes


def _slots_taken(stack: ProvisionedStack, origin: str) -> list[str]:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    item = table.get_item(Key={"pk": f"HOST#{origin}", "sk": "GATE"}, ConsistentRead=True)
    return sorted(name for name in item.get("Item", {}) if name.startswith("slot"))


def test_a_resolver_batch_takes_its_hosts_slot_once_and_gives_it_back_once(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    with PublisherSite(None) as site:
        # Given a batch of five URL jobs on one host, each asking it twice (HEAD, GET)
        for n in range(5):
            site.add_route(f"/p{n}.html", headers={"Content-Type": "text/html"}, body=PAGE)
            _send(sqs, stack, site.url(f"/p{n}.html"))
        writes = _gate_writes(resolver_env)
        stats = _drive(sqs, stack, head_then_get)
        assert stats.batches == {FUNCTION: 1} and stats.failures == []
        # Then the ten requests were made within one slot: taken once, given back once
        assert len(site.requests) == 10
        assert len(writes) == 2
        assert _slots_taken(stack, origin_of(site.base_url)) == []


def test_a_resolver_batch_whose_jobs_all_fail_still_gives_its_slot_back(
    stack: ProvisionedStack, sqs: Any, resolver_env: Wiring
) -> None:
    def broken(wiring: Wiring, job: UrlJob) -> None:
        wiring.fetcher.fetch(job.url)
        raise RetryableError("the store failed", reason="storage")

    with PublisherSite(None) as site:
        for n in range(3):
            site.add_route(f"/p{n}.html", headers={"Content-Type": "text/html"}, body=PAGE)
            _send(sqs, stack, site.url(f"/p{n}.html"))
        writes = _gate_writes(resolver_env)
        # When every job of the batch raises (the whole batch fails, for SQS to redeliver)
        stats = _drive(sqs, stack, broken)
        assert stats.batches == {FUNCTION: 1} and len(stats.failures) == 3
        # Then the host's slot was still given back at the batch's end
        assert len(site.requests) == 3
        assert len(writes) == 2
        assert _slots_taken(stack, origin_of(site.base_url)) == []
