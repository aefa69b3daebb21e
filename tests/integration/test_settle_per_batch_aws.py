"""Outcomes settled once per SQS batch on AWS (moto, the stack built from template.yaml, the real
resolver handler): the jobs of a batch hold their outcomes, and the batch writes them together,
the run's counters moved once per run and chunk rather than once per job; a failure of that
write fails the batch's settled records, and their redelivery settles each exactly once
(docs/decisions/0089-settle-once-per-batch.md, refining 0054).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import UrlJob, encode
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.model import RunState, RunStatus
from tests.support.aws import ProvisionedStack, mocked_stack, session_hooks, sqs_event
from tests.support.pipeline import invoke

pytestmark = [pytest.mark.aws, pytest.mark.network]

RUN_ID = "20261125T100000Z-batch"
PAGES = 6  # pages without metadata: each resolver job settles its URL (no-metadata)
# Idempotency off: with a Powertools table each job settles its own outcome (decision 0089).
ENV = {"ALLOW_LOOPBACK": "true", "IDEMPOTENCY_TABLE": ""}


@pytest.fixture(scope="module")
def notes_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    """:data:`PAGES` copies of the demo site's page without metadata, on 127.0.0.1."""
    root = tmp_path_factory.mktemp("notes")
    page = (demo_site_dir() / "datasets/glider-mission-notes.html").read_bytes()
    for number in range(PAGES):
        (root / f"notes-{number}.html").write_bytes(page)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    with PublisherSite(root) as served:
        yield served


def _sort_key(item: dict[str, Any]) -> Any:
    value = item.get("sk")
    return value.get("S") if isinstance(value, dict) else value


def _settled_by(put: dict[str, Any]) -> int:
    """The outcomes a transaction's Put counts: the slots a ``SETTLE#`` marker names (the
    outcomes' items are put on their own, each naming its chunk and slot: decision 0094)."""
    item = put["Item"]
    sort_key = str(_sort_key(item))
    if not sort_key.startswith("SETTLE#"):
        return 0
    slots = item["slots"]
    return bin(int(str(slots.get("S") if isinstance(slots, dict) else slots), 16)).count("1")


@dataclass
class RunSettles:
    """Counts the transactions that move a run's counters (an Update of its ``RUN`` item), and
    fails the first of them ``before`` moto sees it or ``after`` moto applied it, when asked."""

    fail: Literal["before", "after"] | None = None
    transactions: list[int] = field(default_factory=list)  # the outcomes each one counted
    fired: bool = False

    def params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        items = params.get("TransactItems", [])
        if any(_sort_key(item["Update"]["Key"]) == "RUN" for item in items if "Update" in item):
            self.transactions.append(
                sum(_settled_by(item["Put"]) for item in items if "Put" in item)
            )
            context["settles_run"] = True

    def before(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        if not context.get("settles_run") or self.fail != "before" or self.fired:
            return None
        self.fired = True
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
        http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None)
        return http, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}

    def after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not context.get("settles_run") or self.fail != "after" or self.fired:
            return
        self.fired = True
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
        raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, model.name)


@contextmanager
def _stack(counter: RunSettles) -> Iterator[ProvisionedStack]:
    """The stack in moto, ``counter`` on every DynamoDB client the handlers build in it."""
    with mocked_stack() as stack, _watched(counter):
        yield stack


def _watched(counter: RunSettles) -> AbstractContextManager[None]:
    return session_hooks(
        [
            ("provide-client-params.dynamodb.TransactWriteItems", counter.params),
            ("before-call.dynamodb.TransactWriteItems", counter.before),
            ("after-call.dynamodb.TransactWriteItems", counter.after),
        ]
    )


def _batch(
    stack: ProvisionedStack, site: PublisherSite, counter: RunSettles
) -> tuple[DynamoCatalog, list[Any]]:
    """A tracked run the site's pages entered, and their URL jobs received as one batch."""
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    urls = [site.url(f"/notes-{number}.html") for number in range(PAGES)]
    catalog.start_run(
        RunStatus(
            run_id=RUN_ID,
            entry_urls=(site.url("/robots.txt"),),
            started_at="2026-11-25T10:00:00+00:00",
        )
    )
    catalog.enter_urls(RUN_ID, urls, step="test")
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources["UrlResolverFunction"].queue_url
    for url in urls:
        job = UrlJob(run_id=RUN_ID, source="notes", url=url)
        sqs.send_message(QueueUrl=queue, MessageBody=encode(job))
    messages: list[Any] = []
    while received := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(received)
    assert len(messages) == PAGES
    counter.transactions.clear()  # (entering the URLs moved the counters too)
    return catalog, messages


def _resolve(stack: ProvisionedStack, messages: list[Any]) -> dict[str, Any]:
    source = stack.sqs_event_sources["UrlResolverFunction"]
    return invoke(stack, "UrlResolverFunction", sqs_event(messages, source.queue_arn), **ENV)


def test_a_batch_moves_its_runs_counters_once(notes_site: PublisherSite) -> None:
    settles = RunSettles()
    with _stack(settles) as stack:
        # Given a run whose URLs wait in the resolver's queue, delivered as one batch
        catalog, messages = _batch(stack, notes_site, settles)

        # When the resolver runs the batch
        response = _resolve(stack, messages)

        # Then one transaction counted every outcome and moved the run's counters
        assert response == {"batchItemFailures": []}
        assert settles.transactions == [PAGES]
        # and the counters and outcomes are exact: the run is finished
        run = catalog.get_run(RUN_ID)
        assert run is not None
        assert (run.entered, run.settled, run.state) == (PAGES, PAGES, RunState.FINISHED)
        assert {kind: n for kind, n in run.outcomes.items() if n} == {"no-metadata": PAGES}
        outcomes = list(catalog.outcomes(RUN_ID))
        assert sorted(o.url for o in outcomes) == sorted(
            notes_site.url(f"/notes-{n}.html") for n in range(PAGES)
        )
        assert {o.outcome.value for o in outcomes} == {"no-metadata"}


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_settling_fails_the_batch_and_its_redelivery_counts_once(
    notes_site: PublisherSite, when: Literal["before", "after"]
) -> None:
    settles = RunSettles()
    with _stack(settles) as stack:
        # Given a batch of a run's URL jobs, and the count of their outcomes failing (before it
        # is made, or after: made, but the caller sees an error)
        catalog, messages = _batch(stack, notes_site, settles)
        settles.fail = when

        # When the resolver runs the batch
        response = _resolve(stack, messages)

        # Then every record whose outcome was in that count is reported failed
        assert settles.fired
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        assert failed == {message["MessageId"] for message in messages}
        run = catalog.get_run(RUN_ID)
        assert run is not None and run.state is RunState.RUNNING
        assert run.settled == (PAGES if when == "after" else 0)

        # And when SQS delivers them again, each URL is settled exactly once
        again = _resolve(stack, messages)
        assert again == {"batchItemFailures": []}
        run = catalog.get_run(RUN_ID)
        assert run is not None
        assert (run.entered, run.settled, run.state) == (PAGES, PAGES, RunState.FINISHED)
        assert {kind: n for kind, n in run.outcomes.items() if n} == {"no-metadata": PAGES}
        assert len(list(catalog.outcomes(RUN_ID))) == PAGES
