"""Rendering on AWS (moto): the resolver, which has no browser, hands the URL jobs that need one
to the renderer stack's queue; the renderer (Chromium) resolves them and the run settles exactly.

Both stacks are made from their templates (template.yaml, then functions/renderer/template.yaml
with the main stack's names, then the main stack given the render queue's ARN, as docs/deploy.md
says). A real page on 127.0.0.1 writes its JSON-LD with a script after load. The tests that
render skip when no Chromium is installed (``make browser`` installs Debian's).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.adapters.render import BrowserUnavailable, chromium_path
from cdif_harvester.aws_runtime import handle_sqs_batch
from cdif_harvester.contracts import RENDER_QUEUE, DocumentJob, UrlJob, decode, encode
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.errors import Deferred
from cdif_harvester.model import Outcome, RunState, RunStatus, Source, UrlOutcome
from functions.renderer import app as renderer_app
from tests.support.aws import (
    ACCOUNT_ID,
    REGION,
    ProvisionedStack,
    provision,
    read_stored,
    sqs_event,
)
from tests.support.lambda_driver import FakeLambdaContext, Route, pump, receive_batch
from tests.support.pipeline import function_environment, invoke, routes

pytestmark = [pytest.mark.aws, pytest.mark.network]

REPO = Path(__file__).resolve().parents[2]
RENDERER_TEMPLATE = REPO / "functions" / "renderer" / "template.yaml"
EVENTS = REPO / "infrastructure" / "events"
TICK = json.loads((EVENTS / "scheduler.json").read_text(encoding="utf-8"))
RENDER_STACK = "cdif-render"
LOOPBACK = {"ALLOW_LOOPBACK": "true"}
HTML = {"content-type": "text/html; charset=utf-8"}
DATASET = {
    "@context": "https://schema.org/",
    "@type": "Dataset",
    "@id": "https://doi.org/10.5555/rendered-on-aws",
    "name": "Sea ice extent, written by a script",
    "description": "A dataset whose landing page inserts its JSON-LD with JavaScript.",
    "identifier": "https://doi.org/10.5555/rendered-on-aws",
    "license": "https://creativecommons.org/licenses/by/4.0/",
}
PLAIN = {**DATASET, "@id": "https://doi.org/10.5555/plain", "name": "Served as it is"}
# After the load event, the script inserts the Dataset as an ld+json script.
SCRIPTED_PAGE = (
    "<html><head><title>scripted</title><script>"
    "window.addEventListener('load', () => { const s = document.createElement('script');"
    " s.type = 'application/ld+json'; s.textContent = JSON.stringify(DATA);"
    " document.head.appendChild(s); });"
    "const DATA = " + json.dumps(DATASET) + ";</script></head><body></body></html>"
)
PLAIN_PAGE = (
    '<html><head><title>plain</title><script type="application/ld+json">'
    + json.dumps(PLAIN)
    + "</script></head><body></body></html>"
)


@dataclass
class Stacks:
    """The main stack and the renderer's, provisioned in one moto account."""

    main: ProvisionedStack
    renderer: ProvisionedStack

    @property
    def render_queue_url(self) -> str:
        return self.renderer.queue_urls["RenderQueue"]

    def catalog(self) -> DynamoCatalog:
        table = boto3.resource("dynamodb", region_name=REGION).Table(self.main.table_name)
        return DynamoCatalog(table)


@contextmanager
def stacks(*, wired: bool = True) -> Iterator[Stacks]:
    """Both stacks; with ``wired`` the main stack is given the render queue's ARN."""
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{RENDER_STACK}-RenderQueue"
    with mock_aws():
        main = provision(parameters={"RenderQueueArn": arn} if wired else None)
        renderer = provision(
            RENDERER_TEMPLATE,
            stack_name=RENDER_STACK,
            parameters={
                "HarvestTable": main.table_name,
                "HarvestBucket": main.bucket_name,
                "DocumentQueueUrl": main.queue_urls["ExtractorQueue"],
                "DocumentQueueArn": main.queue_arns["ExtractorQueue"],
                "AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:cdif-test-alarms",
            },
        )
        assert renderer.queue_arns["RenderQueue"] == arn
        yield Stacks(main, renderer)


def run_renderer(stack: ProvisionedStack, event: dict[str, Any], **overrides: str) -> Any:
    """Invoke the renderer's handler in the environment its template gives it."""
    with function_environment(stack, "RendererFunction", **overrides):
        return renderer_app.handler(event, FakeLambdaContext(function_name="RendererFunction"))


def renderer_route(both: Stacks) -> Route:
    """The renderer's event source mapping: its queue and its handler."""
    source = both.renderer.sqs_event_sources["RendererFunction"]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = run_renderer(both.renderer, event, **LOOPBACK)
        return result

    return Route(source.queue_url, source.queue_arn, handler, name="RendererFunction")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium binary; the tests that render skip without one."""
    try:
        return chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[PublisherSite]:
    """A sitemap of two pages: one writes its JSON-LD with a script, one serves it as it is."""
    with PublisherSite(tmp_path / "site") as site:
        locs = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in ("/scripted", "/plain"))
        site.add_route(
            "/sitemap.xml",
            headers={"content-type": "application/xml"},
            body=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
        )
        site.add_route("/scripted", headers=HTML, body=SCRIPTED_PAGE)
        site.add_route("/plain", headers=HTML, body=PLAIN_PAGE)
        yield site


def start_run(both: Stacks, site: PublisherSite, render: str = "fallback") -> str:
    """Register the site as a source that opts in to rendering; the scheduler starts its run."""
    both.catalog().put_source(
        Source(
            source_id="scripted",
            entry_url=site.url("/sitemap.xml"),
            schedule="1d",
            options={"render": render},
        )
    )
    started = invoke(both.main, "SchedulerFunction", TICK)["started"]
    assert [run["source_id"] for run in started] == ["scripted"]
    return str(started[0]["run_id"])


def waiting(sqs: Any, queue_url: str) -> list[str]:
    """The bodies of the (at most ten) messages on a queue, left there, visible."""
    messages = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    return [message["Body"] for message in messages]


def outcomes_by_path(both: Stacks, site: PublisherSite, run_id: str) -> dict[str, UrlOutcome]:
    outcomes = list(both.catalog().outcomes(run_id))
    by_path = {o.url.removeprefix(site.base_url): o for o in outcomes}
    assert len(by_path) == len(outcomes), "a URL has more than one outcome"
    return by_path


def assert_finished_exactly(run: RunStatus | None, outcomes: dict[str, UrlOutcome]) -> None:
    assert run is not None
    assert run.state is RunState.FINISHED and run.finished_at
    assert run.entered == run.settled == len(outcomes) == 2
    assert run.sitemaps == 0
    counts = Counter(o.outcome.value for o in outcomes.values())
    assert {k: v for k, v in run.outcomes.items() if v} == dict(counts)


def test_a_page_that_needs_a_browser_is_rendered_by_the_renderer_and_counted_once(
    publisher: PublisherSite, chromium: str
) -> None:
    with stacks() as both:
        sqs = boto3.client("sqs", region_name=REGION)
        run_id = start_run(both, publisher)

        # When the main stack's stages have done all they can
        stats = pump(sqs, routes(both.main, **LOOPBACK))
        assert stats.failures == []

        # Then the scripted page's job waits on the render queue, as it was sent to the
        # resolver, and the resolver recorded nothing for it; the plain page has its record
        (body,) = waiting(sqs, both.render_queue_url)
        job = decode(body, UrlJob)
        assert (job.url, job.run_id, job.options) == (
            publisher.url("/scripted"),
            run_id,
            {"render": "fallback"},
        )
        outcomes = outcomes_by_path(both, publisher, run_id)
        assert set(outcomes) == {"/plain"}
        assert outcomes["/plain"].pattern == "embedded-script"
        # and the run is not finished while the job is at the renderer
        run = both.catalog().get_run(run_id)
        assert run is not None and run.state is RunState.RUNNING
        assert (run.entered, run.settled) == (2, 1)

        # When the renderer takes its queue, and the later stages what it hands on
        stats = pump(sqs, [*routes(both.main, **LOOPBACK), renderer_route(both)])
        assert stats.failures == []
        assert stats.messages["RendererFunction"] == 1

        # Then the page has one outcome, a record found by rendering; the renderer (its own
        # queue configured) rendered rather than handing the job on again
        outcomes = outcomes_by_path(both, publisher, run_id)
        scripted = outcomes["/scripted"]
        assert scripted.outcome is Outcome.RECORD, scripted.reason
        assert scripted.pattern == "rendered"
        (ref,) = scripted.records
        report = read_stored(both.main, ref.report_key)
        assert "rendered in" in report.decode()
        assert waiting(sqs, both.render_queue_url) == []
        # and the run finished with counters equal to its outcomes
        assert_finished_exactly(both.catalog().get_run(run_id), outcomes)


def test_a_redelivered_resolver_job_hands_over_twice_and_still_ends_in_one_outcome(
    publisher: PublisherSite, chromium: str
) -> None:
    with stacks() as both:
        sqs = boto3.client("sqs", region_name=REGION)
        run_id = start_run(both, publisher, render="always")
        # Given every message delivered twice to the stages (as SQS may), idempotency off
        main_routes = routes(both.main, IDEMPOTENCY_TABLE="", **LOOPBACK)
        resolver = next(r for r in main_routes if r.name == "UrlResolverFunction")
        pump(sqs, [r for r in main_routes if r is not resolver])  # the expander's work
        received = receive_batch(sqs, resolver)
        event = sqs_event(received, resolver.queue_arn)
        for _ in range(2):
            assert resolver.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
        for message in received:
            sqs.delete_message(QueueUrl=resolver.queue_url, ReceiptHandle=message["ReceiptHandle"])

        # Then both pages went to the renderer ("always"), each twice
        bodies = waiting(sqs, both.render_queue_url)
        assert sorted(decode(b, UrlJob).url.removeprefix(publisher.base_url) for b in bodies) == [
            "/plain",
            "/plain",
            "/scripted",
            "/scripted",
        ]

        # When the renderer and the later stages take every copy
        stats = pump(sqs, [*main_routes, renderer_route(both)])
        assert stats.failures == []

        # Then each URL has one outcome and the run's counters are exact
        outcomes = outcomes_by_path(both, publisher, run_id)
        assert {path: o.pattern for path, o in outcomes.items()} == {
            "/scripted": "rendered",
            # the served page already holds it; rendered ("always") all the same
            "/plain": "rendered",
        }
        assert_finished_exactly(both.catalog().get_run(run_id), outcomes)


def test_a_failed_send_to_the_render_queue_retries_the_resolver_job(
    publisher: PublisherSite, chromium: str
) -> None:
    with stacks() as both:
        sqs = boto3.client("sqs", region_name=REGION)
        run_id = start_run(both, publisher)
        main_routes = routes(both.main, **LOOPBACK)
        resolver = next(r for r in main_routes if r.name == "UrlResolverFunction")
        pump(sqs, [r for r in main_routes if r is not resolver])

        # When the render queue cannot be written (it is gone) while the resolver hands over
        received = receive_batch(sqs, resolver)
        gone = both.render_queue_url.rsplit("/", 1)[0] + "/no-such-queue"
        response = invoke(
            both.main,
            "UrlResolverFunction",
            sqs_event(received, resolver.queue_arn),
            RENDER_QUEUE_URL=gone,
            **LOOPBACK,
        )

        # Then the scripted page's job failed (SQS redelivers it), with no outcome recorded
        by_url = {decode(m["Body"], UrlJob).url: m["MessageId"] for m in received}
        failed = [item["itemIdentifier"] for item in response["batchItemFailures"]]
        assert failed == [by_url[publisher.url("/scripted")]]
        # (the plain page's outcome is the indexer's, later)
        assert outcomes_by_path(both, publisher, run_id) == {}
        for message in received:
            if message["MessageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=resolver.queue_url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=0,
                )
            else:
                sqs.delete_message(
                    QueueUrl=resolver.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

        # When it is redelivered with the queue back, and everything runs
        stats = pump(sqs, [*main_routes, renderer_route(both)])
        assert stats.failures == []

        # Then nothing was lost: the page was rendered, once, and the run settled exactly
        outcomes = outcomes_by_path(both, publisher, run_id)
        assert outcomes["/scripted"].pattern == "rendered"
        assert_finished_exactly(both.catalog().get_run(run_id), outcomes)


def test_without_a_render_queue_the_page_ends_noting_no_browser(
    publisher: PublisherSite,
) -> None:
    with stacks(wired=False) as both:
        sqs = boto3.client("sqs", region_name=REGION)
        assert "RENDER_QUEUE_URL" not in both.main.function_env("UrlResolverFunction")
        run_id = start_run(both, publisher)

        stats = pump(sqs, routes(both.main, **LOOPBACK))

        assert stats.failures == []
        outcomes = outcomes_by_path(both, publisher, run_id)
        scripted = outcomes["/scripted"]
        assert scripted.outcome is Outcome.NO_METADATA
        assert "rendering (no browser available here)" in (scripted.reason or "")
        assert waiting(sqs, both.render_queue_url) == []
        assert_finished_exactly(both.catalog().get_run(run_id), outcomes)


def test_the_renderer_runs_its_event_file(chromium: str) -> None:
    event = json.loads((EVENTS / "renderer.json").read_text(encoding="utf-8"))
    with PublisherSite(demo_site_dir()) as site, stacks() as both:
        text = json.dumps(event).replace("https://data.example.org", site.base_url)
        response = run_renderer(both.renderer, json.loads(text), **LOOPBACK)

        assert response == {"batchItemFailures": []}
        sqs = boto3.client("sqs", region_name=REGION)
        (body,) = waiting(sqs, both.main.queue_urls["ExtractorQueue"])
        job = decode(body, DocumentJob)
        assert job.url == site.url("/datasets/north-atlantic-ctd-2021.html")
        assert job.pattern == "rendered"


def test_a_job_the_renderer_defers_goes_back_to_the_render_queue() -> None:
    """Politeness defers a render job (its host is busy): it waits on the render queue, not on
    the resolver's, which would only hand it back."""
    with stacks() as both:
        sqs = boto3.client("sqs", region_name=REGION)
        job = UrlJob(run_id="r", source="s", url="https://data.example.org/page")
        sqs.send_message(QueueUrl=both.render_queue_url, MessageBody=encode(job))
        received = sqs.receive_message(
            QueueUrl=both.render_queue_url, AttributeNames=["All"], MessageAttributeNames=["All"]
        )["Messages"]

        def busy_host(wiring: Any, job: UrlJob) -> None:
            raise Deferred("the host's slots are taken", delay=30)

        with function_environment(both.renderer, "RendererFunction"):
            response = handle_sqs_batch(
                sqs_event(received, both.renderer.queue_arns["RenderQueue"]),
                FakeLambdaContext(),
                UrlJob,
                busy_host,
                queue=RENDER_QUEUE,
            )

        assert response == {"batchItemFailures": []}
        (message,) = received
        sqs.delete_message(QueueUrl=both.render_queue_url, ReceiptHandle=message["ReceiptHandle"])
        delayed = sqs.get_queue_attributes(
            QueueUrl=both.render_queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]
        assert delayed["ApproximateNumberOfMessagesDelayed"] == "1"
        assert waiting(sqs, both.main.queue_urls["UrlResolverQueue"]) == []
