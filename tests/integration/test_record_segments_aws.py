"""Record segments on AWS (the template's stack in moto, the real handlers): with
``RECORD_SEGMENTS`` the indexer writes the records and reports of a batch as one segment object,
each catalogue entry names its ranges, and every reader goes through the entry
(docs/decisions/0086-record-segments.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from cdif_harvester import aws_runtime
from cdif_harvester.contracts import decode_staged, encode
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.keys import parse_segment_ref, segment_signposts_key
from cdif_harvester.model import CatalogEntry
from cdif_harvester.stages.crosswalk import build_source_signmap
from tests.support import pipeline
from tests.support.aws import GOLDEN_STAGED, ProvisionedStack, golden_index_jobs, session_hooks

pytestmark = [pytest.mark.aws, pytest.mark.network]

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "infrastructure" / "events"
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

    with session_hooks([("provide-client-params", note)]):
        yield made


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
    jobs = golden_index_jobs("20260101T000000Z-0000e0e0", "pub.example.org", BATCH)
    event = _sqs_event(stack, [encode(job) for job in jobs])
    result = pipeline.invoke(stack, "IndexerFunction", event, **SEGMENTS)
    assert result == {"batchItemFailures": []}
    # Then its records and reports were written with one PUT, of a segment, and what the
    # Signmap lists of them with another, beside it
    puts = [params["Key"] for name, params in calls if name == "s3.PutObject"]
    assert len(puts) == 2 and puts[0].startswith("segments/pub.example.org/")  # noqa: PLR2004
    assert puts[1] == segment_signposts_key(puts[0])
    # And each record's report is served at one catalogue read and one ranged GET
    entries = _entries(stack, "pub.example.org")
    per_job = len(decode_staged(GOLDEN_STAGED.read_bytes()).records)
    assert len(entries) == BATCH * per_job
    for entry in entries:
        calls.clear()
        answer = _api(stack, entry.record_id, "report")
        assert answer["statusCode"] == 200, answer  # noqa: PLR2004
        assert json.loads(answer["body"])["record_id"] == entry.record_id
        reads = [(n, p) for n, p in calls if n.startswith("s3.") or "GetItem" in n]
        assert [n for n, _ in reads] == ["dynamodb.GetItem", "s3.GetObject"], reads
        assert reads[1][1]["Key"] == puts[0] and reads[1][1]["Range"].startswith("bytes=")
