"""DynamoDB reads per record on AWS (moto, the stack built from template.yaml, the real stage
handlers): which catalogue items each stage reads for a batch of a first harvest, and how
(strongly or eventually consistent), so that a read that comes back is seen
(docs/decisions/0097-fewer-catalogue-reads.md)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import DocumentJob, decode
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.model import Outcome, RunState
from tests.support.aws import (
    ProvisionedStack,
    mocked_stack,
    session_hooks,
    sqs_event,
    waiting_url_jobs,
)
from tests.support.pipeline import invoke, run_pipeline

pytestmark = [pytest.mark.aws, pytest.mark.network]

EVENTS = Path(__file__).resolve().parents[2] / "infrastructure" / "events"
RUN_ID = "20261125T120000Z-reads"
PAGES = 10  # one SQS batch of each stage (the template's batch size)
ENV = {"ALLOW_LOOPBACK": "true", "IDEMPOTENCY_TABLE": ""}


@pytest.fixture(scope="module")
def datasets_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    """:data:`PAGES` pages of the demo site's CTD dataset, each under its own DOI."""
    root = tmp_path_factory.mktemp("datasets")
    page = (demo_site_dir() / "datasets/north-atlantic-ctd-2021.html").read_text()
    for number in range(PAGES):
        text = page.replace("toda.ctd.2021", f"toda.ctd.2021.{number}")
        (root / f"ctd-{number}.html").write_text(text)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\nSitemap: {{BASE}}/sitemap.xml\n")
    listed = "".join(
        f"<url><loc>{{{{BASE}}}}/ctd-{number}.html</loc><lastmod>2025-01-16</lastmod></url>"
        for number in range(PAGES)
    )
    (root / "sitemap.xml").write_text(
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{listed}</urlset>'
    )
    with PublisherSite(root) as served:
        yield served


def _plain(value: Any) -> str:
    """A key attribute as the resource (plain) or the client (``{"S": ...}``) passes it."""
    return str(value.get("S") if isinstance(value, dict) else value)


@dataclass
class Reads:
    """The items the handlers' DynamoDB clients ask for: ``"<call> <kind> <consistency>"``
    (the kind is the sort key's leading word: ``LATEST``, ``RECORD``, ``URL``, ``RUN``,
    ``GATE``), one per key asked."""

    items: Counter[str] = field(default_factory=Counter)

    def params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem":
            self._add("GetItem", params["Key"], params.get("ConsistentRead"))
        elif model.name == "BatchGetItem":
            for asked in params["RequestItems"].values():
                for key in asked["Keys"]:
                    self._add("BatchGetItem", key, asked.get("ConsistentRead"))

    def _add(self, call: str, key: dict[str, Any], consistent: Any) -> None:
        kind = _plain(key["sk"]).split("#", 1)[0]
        self.items[f"{call} {kind} {'strong' if consistent else 'eventual'}"] += 1

    def take(self) -> Counter[str]:
        """What was read since the last take."""
        taken, self.items = self.items, Counter()
        return taken


@contextmanager
def _counted() -> Iterator[tuple[ProvisionedStack, Reads]]:
    reads = Reads()
    with (
        mocked_stack() as stack,
        session_hooks([("provide-client-params.dynamodb", reads.params)]),
    ):
        yield stack, reads


def _urls(site: PublisherSite) -> list[str]:
    return [site.url(f"/ctd-{number}.html") for number in range(PAGES)]


def _received(stack: ProvisionedStack, function: str) -> list[Any]:
    """Every message waiting for ``function`` (received: no longer visible)."""
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources[function].queue_url
    messages: list[Any] = []
    while received := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(received)
    return messages


def _run_stage(stack: ProvisionedStack, function: str) -> list[Any]:
    """Deliver every message waiting for ``function`` to it as one batch; its messages."""
    messages = _received(stack, function)
    assert len(messages) == PAGES, function
    source = stack.sqs_event_sources[function]
    response = invoke(stack, function, sqs_event(messages, source.queue_arn), **ENV)
    assert response == {"batchItemFailures": []}, function
    return messages


def _first_harvest(stack: ProvisionedStack, site: PublisherSite) -> DynamoCatalog:
    """A tracked run the site's pages entered, their URL jobs waiting for the resolver."""
    return waiting_url_jobs(
        stack,
        _urls(site),
        run_id=RUN_ID,
        entry_url=site.url("/robots.txt"),
        started_at="2026-11-25T12:00:00+00:00",
        source="ctd",
    )


def test_the_extractor_reads_no_url_state_the_resolver_sent_with_the_job(
    datasets_site: PublisherSite,
) -> None:
    with _counted() as (stack, reads):
        # Given a first harvest whose URLs the resolver handed on as one batch
        catalog = _first_harvest(stack, datasets_site)
        _run_stage(stack, "UrlResolverFunction")
        resolver = reads.take()

        # Then the resolver read each URL's LATEST item once
        assert resolver["GetItem LATEST eventual"] == PAGES
        # and each document job says what it read (nothing: a first harvest)
        sqs = boto3.client("sqs", region_name=stack.region)
        queue = stack.sqs_event_sources["ExtractorFunction"].queue_url
        peeked = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0)
        jobs = [decode(message["Body"], DocumentJob) for message in peeked["Messages"]]
        assert jobs and all(job.state_read and job.state is None for job in jobs)

        # When the extractor runs the batch
        _run_stage(stack, "ExtractorFunction")

        # Then it read no LATEST item: the state came with the job
        extractor = reads.take()
        assert not [kind for kind in extractor if " LATEST " in kind], extractor

        # And the harvest ends as before: every URL one record, counted once
        _run_stage(stack, "IndexerFunction")
        run = catalog.get_run(RUN_ID)
        assert run is not None
        assert (run.entered, run.settled, run.state) == (PAGES, PAGES, RunState.FINISHED)
        assert {o.outcome for o in catalog.outcomes(RUN_ID)} == {Outcome.RECORD}


def test_a_first_harvest_reads_each_url_state_twice_and_each_record_entry_at_half_price(
    datasets_site: PublisherSite,
) -> None:
    with _counted() as (stack, reads):
        # Given a site of PAGES pages, one dataset each, listed with their lastmod
        event = json.loads((EVENTS / "intake-post-harvest.json").read_text(encoding="utf-8"))
        event["body"] = json.dumps({"url": datasets_site.url("/robots.txt")})
        operator = event["requestContext"]["identity"]["apiKeyId"]

        # When it is harvested for the first time, every stage in its turn
        response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
        assert response["statusCode"] == 202
        run_id = json.loads(response["body"])["run_id"]
        stats = run_pipeline(boto3.client("sqs", region_name=stack.region), stack, **ENV)
        assert stats.failures == []

        # Then every URL ends with its record
        catalog = DynamoCatalog(
            boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        )
        run = catalog.get_run(run_id)
        assert run is not None and run.state is RunState.FINISHED
        assert [o.outcome for o in catalog.outcomes(run_id)] == [Outcome.RECORD] * PAGES
        read = reads.take()
        # and each URL's LATEST item was read twice, eventually consistent: by the expander,
        # whether its lastmod is news, and by the resolver; not by the extractor
        latest = {kind: n for kind, n in read.items() if " LATEST " in kind}
        assert latest == {"BatchGetItem LATEST eventual": PAGES, "GetItem LATEST eventual": PAGES}
        # and each record's entry once, by the indexer, eventually consistent
        entries = {kind: n for kind, n in read.items() if " RECORD " in kind}
        assert entries == {"GetItem RECORD eventual": PAGES}
        # and each URL's item of the run once, by the settling of its outcome, eventually
        # consistent (every put made on it is conditional on what was read)
        items = {kind: n for kind, n in read.items() if " URL " in kind}
        assert items == {"BatchGetItem URL eventual": PAGES}


@dataclass
class Stale:
    """Answers every eventually consistent BatchGetItem of a run's URL items as if none were
    visible yet (what a read of items written a moment ago may give), counting them."""

    answered: int = 0

    def before(self, params: dict[str, Any], model: Any, **_: Any) -> Any:
        asked = params.get("body") or b""
        request = json.loads(asked) if isinstance(asked, (bytes, str)) and asked else {}
        tables = request.get("RequestItems", {})
        stale = {
            table: []
            for table, keys in tables.items()
            if not keys.get("ConsistentRead")
            and all(_plain(key["sk"]).startswith("URL#") for key in keys["Keys"])
        }
        if not stale or len(stale) != len(tables):
            return None
        self.answered += 1
        http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 200, {}, None)
        return http, {"Responses": stale, "UnprocessedKeys": {}}


def test_outcomes_settled_on_run_items_read_stale_are_read_again_and_counted_once(
    datasets_site: PublisherSite,
) -> None:
    with _counted() as (stack, reads):
        # Given a first harvest whose records wait for the indexer
        catalog = _first_harvest(stack, datasets_site)
        _run_stage(stack, "UrlResolverFunction")
        _run_stage(stack, "ExtractorFunction")
        reads.take()

        # When the indexer settles them, its first reads of the run's URL items finding none
        # (written a moment ago, not visible yet to an eventually consistent read)
        stale = Stale()
        with session_hooks([("before-call.dynamodb.BatchGetItem", stale.before)]):
            _run_stage(stack, "IndexerFunction")

        # Then the puts made on them were refused, the items read again strongly, and every
        # URL settled with its record, counted once
        assert stale.answered >= 1
        assert reads.take()["BatchGetItem URL strong"] == PAGES
        run = catalog.get_run(RUN_ID)
        assert run is not None
        assert (run.entered, run.settled, run.state) == (PAGES, PAGES, RunState.FINISHED)
        assert {kind: n for kind, n in run.outcomes.items() if n} == {"record": PAGES}
        assert sorted(o.outcome for o in catalog.outcomes(RUN_ID)) == [Outcome.RECORD] * PAGES
