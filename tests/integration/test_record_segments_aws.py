"""Record segments on AWS (the template's stack in moto, the real handlers): with
``RECORD_SEGMENTS`` the indexer writes the records and reports of a batch as one segment object,
each catalogue entry names its ranges, and every reader goes through the entry
(docs/decisions/0086-record-segments.md)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from cdif_harvester import aws_runtime
from cdif_harvester.contracts import IndexJob, decode_staged, encode, encode_staged
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.keys import parse_segment_ref
from cdif_harvester.model import CatalogEntry
from cdif_harvester.stages.crosswalk import build_source_signmap
from tests.support import pipeline
from tests.support.aws import ProvisionedStack

pytestmark = [pytest.mark.aws, pytest.mark.network]

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "infrastructure" / "events"
STAGED = REPO / "tests" / "unit" / "golden" / "staged" / "v1.staged.json"
SEGMENTS = {"RECORD_SEGMENTS": "true"}
RECORDS = 5  # the demo site's records
BATCH = 10  # a batch of ten jobs (the indexer takes up to IndexerBatchSize, decision 0096)

Call = tuple[str, dict[str, Any]]  # (service.operation, parameters)


@pytest.fixture
def calls() -> Iterator[list[Call]]:
    """Every AWS call the handlers make while the test runs, with its parameters."""
    made: list[Call] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        made.append((f"{model.service_model.service_name}.{model.name}", dict(params)))

    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    events = session._session  # the botocore session whose emitter every new client copies
    events.register("provide-client-params", note)
    yield made
    events.unregister("provide-client-params", note)


def _harvest(stack: ProvisionedStack, url: str, **overrides: str) -> None:
    event: dict[str, Any] = json.loads((EVENTS / "intake-post-harvest.json").read_text())
    event["body"] = json.dumps({"url": url})
    operator = event["requestContext"]["identity"]["apiKeyId"]
    answer = pipeline.invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert answer["statusCode"] == 202, answer  # noqa: PLR2004
    sqs = boto3.client("sqs", region_name=stack.region)
    stats = pipeline.run_pipeline(sqs, stack, ALLOW_LOOPBACK="true", **overrides)
    assert stats.failures == []


def _keys(stack: ProvisionedStack, prefix: str) -> list[str]:
    s3 = boto3.client("s3", region_name=stack.region)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket_name, Prefix=prefix)
    return [str(item["Key"]) for page in pages for item in page.get("Contents", [])]


def _entries(stack: ProvisionedStack, source: str) -> list[CatalogEntry]:
    with pipeline.function_environment(stack, "IntakeFunction"):
        return list(aws_runtime.wiring().catalog.records(source))


def _api(stack: ProvisionedStack, record_id: str, what: str) -> dict[str, Any]:
    """GET /records/{record_id}/{what} through the API's handler, as an operator."""
    event: dict[str, Any] = json.loads(
        (EVENTS / "intake-get-record-linkset.json").read_text(encoding="utf-8")
    )
    encoded = quote(record_id, safe="")
    event["resource"] = f"/records/{{record_id}}/{what}"
    event["path"] = f"/records/{encoded}/{what}"
    event["pathParameters"] = {"record_id": encoded}
    for name in ("headers", "multiValueHeaders"):
        event[name] = {k: v for k, v in event[name].items() if k != "Accept"}
    operator = event["requestContext"]["identity"]["apiKeyId"]
    return pipeline.invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)


def test_a_harvest_with_segments_stores_no_record_object_and_every_reader_finds_the_records(
    stack: ProvisionedStack, site: PublisherSite
) -> None:
    # Given a harvest of the demo site with segments
    _harvest(stack, site.url("/robots.txt"), **SEGMENTS)
    source = next(iter({e.source for e in _entries_any(stack)}))
    entries = _entries(stack, source)
    # Then no record or report has an object of its own: the entries name ranges of segments
    assert len(entries) == RECORDS
    assert _keys(stack, "records/") == [] and _keys(stack, "reports/") == []
    segments = set(_keys(stack, "segments/"))
    for entry in entries:
        for ref in (entry.record_key, entry.report_key):
            parsed = parse_segment_ref(ref or "")
            assert parsed is not None and parsed[0] in segments, ref
    # And the API serves each record's report and its views from there
    valid = [entry for entry in entries if entry.valid]
    assert valid
    for entry in entries:
        answer = _api(stack, entry.record_id, "report")
        assert answer["statusCode"] == 200, answer  # noqa: PLR2004
        assert json.loads(answer["body"])["record_id"] == entry.record_id
    for entry in valid:
        answer = _api(stack, entry.record_id, "linkset")
        assert answer["statusCode"] == 200, answer  # noqa: PLR2004
        assert entry.url in answer["body"]
    # And the Signmap of the source, made from the entries, lists every valid record's page
    with pipeline.function_environment(stack, "SchedulerFunction"):
        bundle = aws_runtime.wiring()
        key = build_source_signmap(bundle, source)
        signmap = bundle.store.get(key).decode("utf-8")
    for entry in valid:
        assert entry.url in signmap, entry.url


def _entries_any(stack: ProvisionedStack) -> list[CatalogEntry]:
    """Every record entry of the catalogue, whatever its source."""
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    items = table.scan()["Items"]
    with pipeline.function_environment(stack, "IntakeFunction"):
        catalog = aws_runtime.wiring().catalog
        ids = {str(item["record_id"]) for item in items if item.get("record_id")}
        found = [catalog.get_record(record_id) for record_id in sorted(ids)]
    return [entry for entry in found if entry is not None]


def _jobs(count: int) -> list[IndexJob]:
    """``count`` index jobs of different URLs, each with the golden hand-over's records renamed
    (their records in the message)."""
    golden = decode_staged(STAGED.read_bytes())
    jobs = []
    for n in range(count):
        url = f"https://pub.example.org/page-{n}"
        records = []
        for item in golden.records:
            record = copy.deepcopy(item.record)
            if record is not None:
                record["schema:name"] = f"Page {n}"
            records.append(replace(item, record_id=f"{item.record_id}-{n}", record=record))
        staged = replace(golden, url=url, records=tuple(records))
        jobs.append(
            IndexJob(
                run_id="20260101T000000Z-0000e0e0",
                source="pub.example.org",
                url=url,
                pattern="embedded-script",
                staged=encode_staged(staged).decode("utf-8"),
            )
        )
    return jobs


def _sqs_event(stack: ProvisionedStack, bodies: list[str]) -> dict[str, Any]:
    template = json.loads((EVENTS / "indexer.json").read_text(encoding="utf-8"))["Records"][0]
    arn = stack.sqs_event_sources["IndexerFunction"].queue_arn
    return {
        "Records": [
            {
                **template,
                "messageId": f"m-{n}",
                "body": body,
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
                "eventSourceARN": arn,
            }
            for n, body in enumerate(bodies)
        ]
    }


def test_a_batch_of_ten_jobs_is_one_segment_and_each_record_one_read_and_one_ranged_get(
    stack: ProvisionedStack, calls: list[Call]
) -> None:
    # Given a batch of ten index jobs delivered to the indexer with segments
    jobs = _jobs(BATCH)
    event = _sqs_event(stack, [encode(job) for job in jobs])
    result = pipeline.invoke(stack, "IndexerFunction", event, **SEGMENTS)
    assert result == {"batchItemFailures": []}
    # Then its records and reports were written with one PUT, of a segment
    puts = [params["Key"] for name, params in calls if name == "s3.PutObject"]
    assert len(puts) == 1 and puts[0].startswith("segments/pub.example.org/")
    # And each record's report is served at one catalogue read and one ranged GET
    entries = _entries(stack, "pub.example.org")
    per_job = len(decode_staged(STAGED.read_bytes()).records)
    assert len(entries) == BATCH * per_job
    for entry in entries:
        calls.clear()
        answer = _api(stack, entry.record_id, "report")
        assert answer["statusCode"] == 200, answer  # noqa: PLR2004
        assert json.loads(answer["body"])["record_id"] == entry.record_id
        reads = [(n, p) for n, p in calls if n.startswith("s3.") or "GetItem" in n]
        assert [n for n, _ in reads] == ["dynamodb.GetItem", "s3.GetObject"], reads
        assert reads[1][1]["Key"] == puts[0] and reads[1][1]["Range"].startswith("bytes=")
