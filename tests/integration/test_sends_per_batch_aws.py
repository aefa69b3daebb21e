"""Hand-overs sent once per SQS batch on AWS (moto, the stack built from template.yaml, the real
resolver handler): the document jobs of a resolver batch go in SendMessageBatch requests of up to
ten, not one request per job; a request that fails fails exactly the records whose messages were
in it, and their redelivery ends each URL with one outcome
(docs/decisions/0093-sends-once-per-batch.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws import DynamoCatalog, SqsQueue
from cdif_harvester.contracts import DocumentJob, UrlJob, decode
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.model import RunState
from tests.support.aws import (
    ProvisionedStack,
    mocked_stack,
    session_hooks,
    sqs_event,
    waiting_url_jobs,
)
from tests.support.pipeline import invoke, run_pipeline

pytestmark = [pytest.mark.aws, pytest.mark.network]

RUN_ID = "20261125T110000Z-sends"
PAGES = 12  # pages with a dataset each: every resolver job hands a document job over
# Idempotency off: with a Powertools table each job sends its own hand-over (decision 0093).
ENV = {"ALLOW_LOOPBACK": "true", "IDEMPOTENCY_TABLE": ""}


@pytest.fixture(scope="module")
def datasets_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    """:data:`PAGES` pages of the demo site's CTD dataset, each under its own DOI."""
    root = tmp_path_factory.mktemp("datasets")
    page = (demo_site_dir() / "datasets/north-atlantic-ctd-2021.html").read_text()
    for number in range(PAGES):
        text = page.replace("toda.ctd.2021", f"toda.ctd.2021.{number}")
        (root / f"ctd-{number}.html").write_text(text)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    with PublisherSite(root) as served:
        yield served


@dataclass
class Sends:
    """Counts the SendMessageBatch requests (their entries each), and fails the first one
    ``before`` moto sees it or ``after`` moto applied it, when asked."""

    fail: Literal["before", "after"] | None = None
    requests: list[int] = field(default_factory=list)
    failed_bodies: list[str] = field(default_factory=list)
    fired: bool = False

    def params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        entries = params.get("Entries", [])
        self.requests.append(len(entries))
        if self.fail is not None and not self.fired:
            self.fired = context["fails"] = True
            self.failed_bodies = [entry["MessageBody"] for entry in entries]

    def before(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        if not context.get("fails") or self.fail != "before":
            return None
        error = {"Code": "ThrottlingException", "Message": "injected"}
        http = AWSResponse("https://sqs.us-east-1.amazonaws.com/", 400, {}, None)
        return http, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}

    def after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not context.get("fails") or self.fail != "after":
            return
        error = {"Code": "ThrottlingException", "Message": "injected"}
        raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, model.name)


@contextmanager
def _stack(sends: Sends) -> Iterator[ProvisionedStack]:
    """The stack in moto, ``sends`` on every SQS client the handlers build in it."""
    hooks = [
        ("provide-client-params.sqs.SendMessageBatch", sends.params),
        ("before-call.sqs.SendMessageBatch", sends.before),
        ("after-call.sqs.SendMessageBatch", sends.after),
    ]
    with mocked_stack() as stack, session_hooks(hooks):
        yield stack


def _urls(site: PublisherSite) -> list[str]:
    return [site.url(f"/ctd-{number}.html") for number in range(PAGES)]


def _batch(stack: ProvisionedStack, site: PublisherSite) -> tuple[DynamoCatalog, list[Any]]:
    """A tracked run the site's pages entered, and their URL jobs received as one batch."""
    catalog = waiting_url_jobs(
        stack,
        _urls(site),
        run_id=RUN_ID,
        entry_url=site.url("/robots.txt"),
        started_at="2026-11-25T11:00:00+00:00",
        source="ctd",
    )
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources["UrlResolverFunction"].queue_url
    messages: list[Any] = []
    while received := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(received)
    assert len(messages) == PAGES
    return catalog, messages


def _resolve(stack: ProvisionedStack, messages: list[Any]) -> dict[str, Any]:
    source = stack.sqs_event_sources["UrlResolverFunction"]
    return invoke(stack, "UrlResolverFunction", sqs_event(messages, source.queue_arn), **ENV)


def _document_jobs(stack: ProvisionedStack) -> list[DocumentJob]:
    """Every document job waiting in the extractor's queue (received, so no longer visible)."""
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources["ExtractorFunction"].queue_url
    jobs: list[DocumentJob] = []
    while received := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        jobs.extend(decode(message["Body"], DocumentJob) for message in received)
    return jobs


def test_a_batch_hands_over_in_requests_of_ten(datasets_site: PublisherSite) -> None:
    sends = Sends()
    with _stack(sends) as stack:
        # Given a run whose URL jobs are delivered to the resolver as one batch
        _catalog, messages = _batch(stack, datasets_site)
        sends.requests.clear()

        # When the resolver runs the batch
        response = _resolve(stack, messages)

        # Then its document jobs went in ceil(N / 10) requests, full but for the last
        assert response == {"batchItemFailures": []}
        assert sends.requests == [10] * (PAGES // 10) + [PAGES % 10] * (PAGES % 10 > 0)
        assert len(sends.requests) == math.ceil(PAGES / 10)
        # and every document job arrived, one per URL
        assert sorted(job.url for job in _document_jobs(stack)) == sorted(_urls(datasets_site))


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_request_fails_its_records_and_their_redelivery_ends_each_url_once(
    datasets_site: PublisherSite, when: Literal["before", "after"]
) -> None:
    sends = Sends()
    with _stack(sends) as stack:
        # Given a batch of a run's URL jobs, and the first request of its hand-overs failing
        # (before SQS took it, or after: taken, but the caller sees an error)
        catalog, messages = _batch(stack, datasets_site)
        sends.fail = when

        # When the resolver runs the batch
        response = _resolve(stack, messages)

        # Then exactly the records whose document jobs were in that request are reported failed
        assert sends.fired
        by_url = {decode(message["Body"], UrlJob).url: message["MessageId"] for message in messages}
        in_request = {by_url[decode(body, DocumentJob).url] for body in sends.failed_bodies}
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        assert failed == in_request
        # (the request held the hand-overs of ten records, as many as one request takes)
        assert len(failed) == min(PAGES, 10) < PAGES

        # And when SQS delivers them again, and the pipeline runs to its end, every URL has one
        # outcome, counted once, and one record
        again = _resolve(stack, [m for m in messages if m["MessageId"] in failed])
        assert again == {"batchItemFailures": []}
        sqs = boto3.client("sqs", region_name=stack.region)
        stats = run_pipeline(sqs, stack, **ENV)
        assert stats.failures == []
        run = catalog.get_run(RUN_ID)
        assert run is not None
        assert (run.entered, run.settled, run.state) == (PAGES, PAGES, RunState.FINISHED)
        assert {kind: n for kind, n in run.outcomes.items() if n} == {"record": PAGES}
        outcomes = list(catalog.outcomes(RUN_ID))
        assert sorted(o.url for o in outcomes) == sorted(_urls(datasets_site))


def test_the_sqs_queue_packs_its_requests_within_the_size_limit(stack: ProvisionedStack) -> None:
    # Given the SQS queue adapter and messages of 100 KiB, half of them delayed
    sqs = boto3.client("sqs", region_name=stack.region)
    requests: list[list[dict[str, Any]]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch",
        lambda params, **_: requests.append(list(params["Entries"])),
    )
    url = stack.queue_urls["UrlResolverQueue"]
    bodies = [str(n) * (100 * 1024) for n in range(5)]
    delays = [0, 60, 0, 60, 0]

    # When it sends them
    SqsQueue(sqs, {"url": url}).send("url", bodies, delays=delays)

    # Then no request carries more than the SQS limit of 256 KiB, and every message went, in
    # order, with its own delay
    sizes = [sum(len(entry["MessageBody"]) for entry in entries) for entries in requests]
    assert max(sizes) <= 256 * 1024
    sent = [entry for entries in requests for entry in entries]
    assert [(e["MessageBody"], e["DelaySeconds"]) for e in sent] == list(
        zip(bodies, delays, strict=True)
    )
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert attributes == {
        "ApproximateNumberOfMessages": "3",
        "ApproximateNumberOfMessagesDelayed": "2",
    }
