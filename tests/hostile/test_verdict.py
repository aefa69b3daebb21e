"""Same verdict everywhere: the same hostile input, run by the local runner and by the Lambda
handlers (moto), ends in the same outcome and reason at the first attempt: the page is fetched
once, nothing is retried or dead-lettered, and the run finishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.model import RunState
from tests.support.aws import ProvisionedStack
from tests.support.bounds import measure
from tests.support.httpserver import LocalHTTPServer
from tests.support.lambda_driver import Route, pump
from tests.support.pipeline import invoke, routes, run_pipeline

pytestmark = [pytest.mark.aws, pytest.mark.network]

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
DEEP = "[" * 100_000 + "]" * 100_000
GOOD = {
    "@context": "https://schema.org/",
    "@type": "Dataset",
    "@id": "https://doi.org/10.5072/good",
    "name": "A good dataset",
}

Outcomes = dict[str, tuple[str, str | None]]


def _page(json_ld: str) -> bytes:
    return (
        '<html><head><script type="application/ld+json">'
        f"{json_ld}</script></head><body>dataset</body></html>"
    ).encode()


def _site(server: LocalHTTPServer, locations: list[str]) -> str:
    """Serve a sitemap of ``locations`` (paths on the server, or absolute URLs), a page whose
    JSON-LD is 100,000 levels deep and a good page; return the sitemap's URL."""
    urls = "".join(
        f"<url><loc>{loc if '://' in loc else server.url(loc)}</loc></url>" for loc in locations
    )
    # (Connection: close: the AWS wiring's fetcher is dropped, not closed, between invocations.)
    close = ("Connection", "close")
    server.route(
        "/sitemap.xml",
        body=f'<urlset xmlns="{SITEMAP_NS}">{urls}</urlset>'.encode(),
        headers=[("Content-Type", "application/xml"), close],
    )
    html = [("Content-Type", "text/html"), close]
    server.route("/deep.html", body=_page(DEEP), headers=html)
    server.route("/good.html", body=_page(json.dumps(GOOD)), headers=html)
    server.route("/robots.txt", status=404, headers=[close])
    return server.url("/sitemap.xml")


def _local(out: Path, entry: str) -> tuple[Outcomes, RunState]:
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(entry)
        outcomes = {
            o.url: (o.outcome.value, o.reason) for o in harvester.catalog.outcomes(summary.run_id)
        }
        run = harvester.catalog.get_run(summary.run_id)
    assert run is not None
    return outcomes, run.state


def _aws(stack: ProvisionedStack, entry: str) -> tuple[Outcomes, RunState]:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["path"] = event["resource"] = "/harvests"
    event["body"] = json.dumps({"url": entry})
    operator = event["requestContext"]["identity"]["apiKeyId"]
    response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert response["statusCode"] == 202, response
    run_id = json.loads(response["body"])["run_id"]
    sqs = boto3.client("sqs", region_name=stack.region)

    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")

    # No job failed (none is redelivered), and no dead-letter queue holds anything.
    assert stats.failures == []
    for name, url in stack.queue_urls.items():
        if "DeadLetter" in name:
            attributes = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            assert attributes["ApproximateNumberOfMessages"] == "0", name
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = DynamoCatalog(table)
    run = catalog.get_run(run_id)
    assert run is not None
    return {o.url: (o.outcome.value, o.reason) for o in catalog.outcomes(run_id)}, run.state


@pytest.mark.parametrize(
    "locations",
    [
        pytest.param(["/deep.html", "/good.html"], id="json-ld-100000-deep"),
        pytest.param(["http://[::1/x", "/good.html"], id="malformed-location"),
    ],
)
def test_local_and_aws_give_the_same_verdict_at_the_first_attempt(
    stack: ProvisionedStack, tmp_path: Path, locations: list[str]
) -> None:
    # Given a site whose sitemap lists a hostile location and a good page
    with LocalHTTPServer() as server:
        entry = _site(server, locations)

        # When it is harvested locally, and then on AWS
        local, local_state = _local(tmp_path / "out", entry)
        local_paths = server.paths()
        del server.requests[:]
        aws, aws_state = _aws(stack, entry)
        aws_paths = server.paths()

    # Then both give every URL the same outcome and reason, and both runs finished
    assert local == aws
    assert local_state is aws_state is RunState.FINISHED
    # and nothing was fetched again (a deterministic error is not retried): the deep page is
    # asked for once, and once more by content negotiation (another pattern, not a retry)
    for paths in (local_paths, aws_paths):
        assert paths.count("/deep.html") <= 2
        assert paths.count("/sitemap.xml") == 1
    if "/deep.html" in locations:
        assert local[server.url("/good.html")][0] == "record"
        # The domain refuses JSON nested too deeply (JsonTooDeep) before any recursion: the
        # page has no readable metadata, and its reason says why.
        outcome, reason = local[server.url("/deep.html")]
        assert outcome == "no-metadata"
        assert "embedded script (1 of 1 unreadable: json-too-deep)" in reason
        assert local_paths.count("/deep.html") == aws_paths.count("/deep.html") == 2


def test_a_transient_failure_is_retried_then_ends_failed_on_its_last_delivery(
    stack: ProvisionedStack, tmp_path: Path
) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    with LocalHTTPServer() as server:
        # Given a page that always answers 503 (a transient fault, as far as anyone can tell)
        entry = _site(server, ["/flaky.html", "/good.html"])
        server.route("/flaky.html", status=503, headers=[("Connection", "close")])

        # When it is harvested locally (three attempts) ...
        local, local_state = _local(tmp_path / "out", entry)
        assert server.paths().count("/flaky.html") == 3
        del server.requests[:]

        # ... and on AWS, where SQS redelivers a failed message at once (visibility 0) until
        # its receive count reaches the queue's maxReceiveCount
        event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
        event["path"] = event["resource"] = "/harvests"
        event["body"] = json.dumps({"url": entry})
        operator = event["requestContext"]["identity"]["apiKeyId"]
        response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
        run_id = json.loads(response["body"])["run_id"]
        stats = pump(
            sqs, [_redelivering(sqs, route) for route in routes(stack, ALLOW_LOOPBACK="true")]
        )
        aws_paths = server.paths()

    # Then AWS asked as many times as SQS delivers (no dead letter), and both runs end the URL
    # failed with the fetch's reason
    assert aws_paths.count("/flaky.html") == 5
    assert len(stats.failures) == 4
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = DynamoCatalog(table)
    aws = {o.url: (o.outcome.value, o.reason) for o in catalog.outcomes(run_id)}
    flaky = server.url("/flaky.html")
    assert local[flaky] == aws[flaky]
    assert local[flaky][0] == "failed" and str(local[flaky][1]).startswith("http-503: ")
    run = catalog.get_run(run_id)
    assert run is not None and local_state is run.state is RunState.FINISHED


def _redelivering(sqs: Any, route: Route) -> Route:
    """``route``, with every failed message made visible again at once (SQS would wait out its
    visibility timeout first)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            answer = route.handler(event, context)
        except BatchProcessingError:  # every record failed: Lambda retries the whole batch
            answer = {
                "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]
            }
        failed = {item["itemIdentifier"] for item in answer.get("batchItemFailures", [])}
        for record in event["Records"]:
            if record["messageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=route.queue_url,
                    ReceiptHandle=record["receiptHandle"],
                    VisibilityTimeout=0,
                )
        return answer

    return Route(
        route.queue_url, route.queue_arn, handler, name=route.name, batch_size=route.batch_size
    )


def test_a_page_of_json_ld_100000_deep_costs_little_locally() -> None:
    # The whole local harvest of the page, in a process of its own: peak memory and CPU.
    measured = measure(
        """
        import json, sys, tempfile
        from pathlib import Path
        from cdif_harvester.cli.runner import LocalHarvester
        from tests.hostile.test_verdict import _site
        from tests.support.httpserver import LocalHTTPServer

        with LocalHTTPServer() as server:
            entry = _site(server, ["/deep.html"])
            with LocalHarvester(Path(tempfile.mkdtemp()), allow_loopback=True) as harvester:
                summary = harvester.harvest(entry)
                outcomes = [o.reason for o in harvester.catalog.outcomes(summary.run_id)]
        print(json.dumps(outcomes))
        """
    )
    assert measured.returncode == 0, measured.stderr
    [reason] = json.loads(measured.stdout)
    assert reason.startswith("no-metadata: ") and "unreadable: json-too-deep" in reason
    assert measured.peak_rss_mib < 256, measured
    assert measured.cpu_seconds < 10, measured
