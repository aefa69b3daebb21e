"""Every handler on every event file of infrastructure/events, under moto.

The event files are what ``sam local invoke`` sends; running them here keeps them valid. They are
run in pipeline order, so each one does real work: the publisher host of the files
(``https://data.example.org``) is served by the demo site on 127.0.0.1, and objects the later
events name are the ones the earlier events made.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import (
    CONTRACT_VERSION,
    DocumentJob,
    IndexJob,
    SitemapJob,
    UrlJob,
    decode,
    encode,
)
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.errors import ContractError
from cdif_harvester.keys import VIEW_NAMES, parse_normalised_record_key, record_report_key
from cdif_harvester.model import Source
from cdif_harvester.stages.crosswalk import record_view
from tests.support.aws import ProvisionedStack
from tests.support.pipeline import invoke

pytestmark = [pytest.mark.aws, pytest.mark.network]

EVENTS = Path(__file__).resolve().parents[2] / "infrastructure" / "events"
PUBLISHER = "https://data.example.org"
FUNCTIONS = {
    "scheduler.json": "SchedulerFunction",
    "intake-post-harvest.json": "IntakeFunction",
    "intake-post-source.json": "IntakeFunction",
    "intake-post-source-harvest.json": "IntakeFunction",
    "intake-get-record-linkset.json": "IntakeFunction",
    "sitemap-expander.json": "SitemapExpanderFunction",
    "url-resolver.json": "UrlResolverFunction",
    "extractor.json": "ExtractorFunction",
    "indexer.json": "IndexerFunction",
    "crosswalk.json": "CrosswalkFunction",
}
# The renderer's, of its own stack (functions/renderer/template.yaml): run by
# tests/e2e/test_aws_rendering.py, where that stack is provisioned.
RENDERER_EVENTS = {"renderer.json": "RendererFunction"}


def _event(name: str, site: PublisherSite | None = None) -> dict[str, Any]:
    text = (EVENTS / name).read_text(encoding="utf-8")
    if site is not None:  # send the fetching stages to the demo publisher on 127.0.0.1
        text = text.replace(PUBLISHER, site.base_url)
    event: dict[str, Any] = json.loads(text)
    return event


def _take(sqs: Any, stack: ProvisionedStack, queue: str) -> list[str]:
    url = stack.queue_urls[queue]
    bodies = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_every_function_has_an_event_file_and_its_environment(stack: ProvisionedStack) -> None:
    assert sorted(p.name for p in EVENTS.glob("*.json")) == sorted({**FUNCTIONS, **RENDERER_EVENTS})
    assert set(FUNCTIONS.values()) == set(stack.environments)
    env = json.loads((EVENTS.parent / "env.json").read_text(encoding="utf-8"))
    for function in FUNCTIONS.values():
        # sam local invoke --env-vars: "Parameters" applies to every function
        given = set(env["Parameters"]) | set(env.get(function, {}))
        assert set(stack.function_env(function)) <= given, function


def test_every_message_of_the_event_files_is_at_the_current_contract() -> None:
    # A contract change (a new version, a new field) must come with event files that speak it:
    # each job message is exactly what a producer of this release would send.
    messages = 0
    for path in sorted(EVENTS.glob("*.json")):
        for record in json.loads(path.read_text(encoding="utf-8")).get("Records", []):
            body = record["body"]
            assert record["md5OfBody"] == hashlib.md5(body.encode()).hexdigest(), path.name
            if "v" not in json.loads(body):
                continue  # the crosswalk's S3 notification: no contract of ours
            messages += 1
            assert json.loads(body)["v"] == CONTRACT_VERSION, path.name
            assert body == encode(decode(body)), path.name
    assert messages == 5  # sitemap expander, URL resolver, renderer, extractor, indexer


def test_every_handler_runs_its_event_file(stack: ProvisionedStack, site: PublisherSite) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    loopback = {"ALLOW_LOOPBACK": "true"}

    # scheduler: one run per registered source that is due
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    DynamoCatalog(table).put_source(
        Source(source_id="demo", entry_url=site.url("/robots.txt"), schedule="1d")
    )
    result = invoke(stack, "SchedulerFunction", _event("scheduler.json"))
    assert [run["source_id"] for run in result["started"]] == ["demo"]
    (body,) = _take(sqs, stack, "SitemapExpanderQueue")
    assert decode(body, SitemapJob).url == site.url("/robots.txt")

    # intake: an operator posts a robots.txt, registers a source; its publisher posts a sitemap
    # (the operator key id of the event files is the one env.json gives the intake function)
    env = json.loads((EVENTS.parent / "env.json").read_text(encoding="utf-8"))
    operators = env["IntakeFunction"]["OPERATOR_API_KEY_IDS"]
    result = invoke(
        stack, "IntakeFunction", _event("intake-post-harvest.json"), OPERATOR_API_KEY_IDS=operators
    )
    assert result["statusCode"] == 202, result
    (body,) = _take(sqs, stack, "SitemapExpanderQueue")
    assert decode(body, SitemapJob).url == f"{PUBLISHER}/robots.txt"
    for name, status in (
        ("intake-post-source.json", 201),
        ("intake-post-source-harvest.json", 202),
    ):
        result = invoke(stack, "IntakeFunction", _event(name), OPERATOR_API_KEY_IDS=operators)
        assert result["statusCode"] == status, result
    (body,) = _take(sqs, stack, "SitemapExpanderQueue")
    assert decode(body, SitemapJob).url == f"{PUBLISHER}/sitemap-datasets.xml"

    # sitemap expander: the datasets sitemap becomes URL jobs
    result = invoke(
        stack, "SitemapExpanderFunction", _event("sitemap-expander.json", site), **loopback
    )
    assert result == {"batchItemFailures": []}
    urls = [decode(b, UrlJob).url for b in _take(sqs, stack, "UrlResolverQueue")]
    assert site.url("/datasets/north-atlantic-ctd-2021.html") in urls

    # URL resolver: the landing page holds embedded JSON-LD
    result = invoke(stack, "UrlResolverFunction", _event("url-resolver.json", site), **loopback)
    assert result == {"batchItemFailures": []}
    (body,) = _take(sqs, stack, "ExtractorQueue")
    assert decode(body, DocumentJob).pattern == "embedded-script"

    # extractor: its document is the demo page, stored where the event says
    extractor_event = _event("extractor.json")
    job = decode(extractor_event["Records"][0]["body"], DocumentJob)
    page = (demo_site_dir() / "datasets" / "north-atlantic-ctd-2021.html").read_text()
    s3.put_object(
        Bucket=stack.bucket_name,
        Key=job.documents[0].key,
        Body=page.replace("{{BASE}}", PUBLISHER).encode(),
    )
    result = invoke(stack, "ExtractorFunction", extractor_event)
    assert result == {"batchItemFailures": []}
    (body,) = _take(sqs, stack, "IndexerQueue")
    indexer_event = _event("indexer.json")
    assert decode(body, IndexJob) == decode(indexer_event["Records"][0]["body"], IndexJob)

    # indexer: writes the record the crosswalk event names. That event is the notification of
    # a record stored as an object of its own, so the indexer writes per-record objects here
    # (with segments, the default, no records/ object is written: decision 0086)
    result = invoke(stack, "IndexerFunction", indexer_event, RECORD_SEGMENTS="false")
    assert result == {"batchItemFailures": []}
    crosswalk_event = _event("crosswalk.json")
    notification = json.loads(crosswalk_event["Records"][0]["body"])
    record_key = notification["Records"][0]["s3"]["object"]["key"]
    assert s3.head_object(Bucket=stack.bucket_name, Key=record_key)

    # crosswalk: acknowledges the record; its views are made on read, none is stored
    result = invoke(stack, "CrosswalkFunction", crosswalk_event)
    assert result == {"batchItemFailures": []}
    parsed = parse_normalised_record_key(record_key)
    assert parsed is not None
    listed = s3.list_objects_v2(Bucket=stack.bucket_name, Prefix="views/")
    assert listed.get("Contents", []) == []
    # ... and the indexer kept the record once: no copy of a first version under versions/
    assert s3.list_objects_v2(Bucket=stack.bucket_name, Prefix="versions/").get("Contents") is None

    # intake: the publisher reads that record's linkset, as application/linkset
    result = invoke(
        stack,
        "IntakeFunction",
        _event("intake-get-record-linkset.json"),
        OPERATOR_API_KEY_IDS=operators,
    )
    assert result["statusCode"] == 200, result
    assert result["multiValueHeaders"]["Content-Type"] == ["application/linkset"]
    # the bytes the crosswalk's builders make of the stored record and report
    stored = {
        key: json.loads(s3.get_object(Bucket=stack.bucket_name, Key=key)["Body"].read())
        for key in (record_key, record_report_key(*parsed))
    }
    record, report = stored[record_key], stored[record_report_key(*parsed)]
    assert report["valid"] is True
    built = record_view(record, report, "linkset", JsonLdContexts())
    assert result["body"].encode("utf-8") == built
    # every other view, by name
    for name in VIEW_NAMES:
        event = _event("intake-get-record-linkset.json")
        for holder in (event, event["requestContext"]):
            holder["path"] = holder["path"].removesuffix("/linkset") + f"/views/{name}"
        event["resource"] = event["requestContext"]["resourcePath"] = (
            "/records/{record_id}/views/{view}"
        )
        event["pathParameters"]["view"] = name
        answer = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operators)
        assert answer["statusCode"] == 200, answer
        assert answer["body"].encode("utf-8") == record_view(record, report, name, JsonLdContexts())
        assert answer["multiValueHeaders"]["ETag"]


def test_a_dict_without_records_is_not_an_empty_batch(stack: ProvisionedStack) -> None:
    with pytest.raises(ContractError, match="no Records"):
        invoke(stack, "UrlResolverFunction", {"hello": "world"})


def test_a_message_that_breaks_its_contract_is_consumed_not_retried(
    stack: ProvisionedStack,
) -> None:
    event = _event("url-resolver.json")
    event["Records"][0]["body"] = json.dumps({"v": 99, "kind": "url-job"})
    assert invoke(stack, "UrlResolverFunction", event) == {"batchItemFailures": []}
