"""Batches of more than ten jobs on AWS (moto, the stack built from template.yaml, the real
indexer handler): the test driver gathers a batch of the size the template's event source
mapping names, ten messages per ReceiveMessage; a batch of 25 index jobs is one invocation, one
segment and one settling, every URL's outcome recorded once; a job of it that fails is the only
one reported failed, and its redelivery settles it once
(docs/decisions/0096-bigger-batches.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from cdif_harvester import aws_runtime
from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import IndexJob, decode, encode
from cdif_harvester.keys import segment_signposts_key
from cdif_harvester.model import RunState, RunStatus
from tests.support.aws import (
    ProvisionedStack,
    catalog_of,
    golden_index_jobs,
    load_template,
    mocked_stack,
    session_hooks,
)
from tests.support.lambda_driver import Route, gather, pump
from tests.support.pipeline import STAGE_FUNCTIONS, routes

pytestmark = [pytest.mark.aws]

RUN_ID = "20261125T120000Z-0000b1b1"
SOURCE = "pub.example.org"
JOBS = 25  # more than one ReceiveMessage brings, fewer than the indexer's batch
INDEXER = "IndexerFunction"


def _parameter_default(value: Any) -> int:
    """A BatchSize of the template: a number, or a parameter's default."""
    if isinstance(value, dict):
        return int(load_template()["Parameters"][value["Ref"]]["Default"])
    return int(value)


def _template_batch_sizes() -> dict[str, int]:
    """Each stage's BatchSize as template.yaml deploys it by default."""
    resources = load_template()["Resources"]
    sizes = {}
    for function in STAGE_FUNCTIONS:
        events = resources[function]["Properties"]["Events"].values()
        (event,) = [e["Properties"] for e in events if e["Type"] == "SQS"]
        sizes[function] = _parameter_default(event["BatchSize"])
    return sizes


def _urls() -> list[str]:
    return [f"https://{SOURCE}/page-{n}" for n in range(JOBS)]


def _queue_jobs(stack: ProvisionedStack) -> DynamoCatalog:
    """A tracked run whose URLs entered it, and their index jobs waiting in the indexer's
    queue."""
    catalog = catalog_of(stack)
    catalog.start_run(
        RunStatus(
            run_id=RUN_ID,
            entry_urls=(f"https://{SOURCE}/robots.txt",),
            started_at="2026-11-25T12:00:00+00:00",
        )
    )
    catalog.enter_urls(RUN_ID, _urls(), step="test")
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources[INDEXER].queue_url
    for job in golden_index_jobs(RUN_ID, SOURCE, JOBS):
        sqs.send_message(QueueUrl=queue, MessageBody=encode(job))
    return catalog


def _indexer(stack: ProvisionedStack) -> Route:
    (route,) = [route for route in routes(stack) if route.name == INDEXER]
    return route


def _settled_once(catalog: DynamoCatalog) -> None:
    """Every URL of the run has exactly one outcome, a record, and the run's counters say so."""
    outcomes = list(catalog.outcomes(RUN_ID))
    assert sorted(o.url for o in outcomes) == sorted(_urls())
    assert {o.outcome.value for o in outcomes} == {"record"}
    run = catalog.get_run(RUN_ID)
    assert run is not None
    assert (run.entered, run.settled, run.state) == (JOBS, JOBS, RunState.FINISHED)
    assert {kind: n for kind, n in run.outcomes.items() if n} == {"record": JOBS}


# ----------------------------------------------------------------------------- the driver


def test_the_driver_delivers_the_batch_size_of_each_stage_s_event_source_mapping() -> None:
    with mocked_stack() as stack:
        sizes = {route.name: route.batch_size for route in routes(stack)}
    assert sizes == _template_batch_sizes()
    assert max(sizes.values()) > 10  # (else nothing here tells a batch size from the default)
    # A stack deployed with another batch size is driven with that one.
    with mocked_stack(parameters={"IndexerBatchSize": "37"}) as stack:
        assert _indexer(stack).batch_size == 37  # noqa: PLR2004


def test_a_batch_is_gathered_ten_messages_per_receive_up_to_its_size() -> None:
    with mocked_stack() as stack:
        sqs = boto3.client("sqs", region_name=stack.region)
        route = replace(_indexer(stack), batch_size=JOBS - 5)
        for n in range(JOBS):
            sqs.send_message(QueueUrl=route.queue_url, MessageBody=f"m-{n}")
        first = gather(sqs, route)
        second = gather(sqs, route)
        third = gather(sqs, route)
    assert (len(first.messages), first.receives) == (JOBS - 5, 2)
    assert (len(second.messages), second.receives) == (5, 1)
    assert (third.messages, third.receives) == ([], 0)
    bodies = [m["Body"] for m in first.messages + second.messages]
    assert sorted(bodies) == sorted(f"m-{n}" for n in range(JOBS))


# ----------------------------------------------------------------------------- the indexer


def test_a_batch_of_25_index_jobs_is_one_invocation_one_segment_and_each_outcome_once(
    stack: ProvisionedStack,
) -> None:
    put: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "PutObject":
            put.append(str(params["Key"]))

    # Given a run's 25 index jobs waiting in the indexer's queue
    catalog = _queue_jobs(stack)
    sqs = boto3.client("sqs", region_name=stack.region)

    # When the driver delivers them as the template's event source mapping would
    with session_hooks([("provide-client-params.s3", note)]):
        stats = pump(sqs, [_indexer(stack)])

    # Then they came as one batch, and its records were written as one segment
    assert stats.batches == {INDEXER: 1}
    assert stats.messages == {INDEXER: JOBS}
    assert stats.failures == []
    assert len(put) == 2 and put[0].startswith(f"segments/{SOURCE}/"), put  # noqa: PLR2004
    assert put[1] == segment_signposts_key(put[0])  # (decision 0098)
    # And every URL's outcome is recorded once, and counted once
    _settled_once(catalog)


def _text(value: Any) -> str:
    """A DynamoDB attribute's string, typed (``{"S": ...}``) or not."""
    return str(value.get("S")) if isinstance(value, dict) else str(value)


def test_a_failed_job_of_a_big_batch_is_the_only_one_reported_and_settles_once_again(
    stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a failed job comes back at once rather than after its backoff)
    monkeypatch.setattr(aws_runtime, "retry_jitter", lambda low, high: 0.0)
    catalog = _queue_jobs(stack)
    sqs = boto3.client("sqs", region_name=stack.region)
    target = 7
    armed = True

    def mark(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        item = params.get("Item", {})
        if _text(item.get("sk")) == "RECORD":
            context["target"] = _text(item.get("record_id")).endswith(f"-{target}")

    def fail_one_record(context: dict[str, Any], **_: Any) -> Any:
        # Given the catalogue refusing the entry of one record of one job of the batch
        if not armed or not context.get("target"):
            return None
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
        http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None)
        return http, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}

    indexer = _indexer(stack)
    answers: list[tuple[dict[str, str], dict[str, Any]]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        nonlocal armed
        answer = indexer.handler(event, context)
        urls = {r["messageId"]: decode(r["body"], IndexJob).url for r in event["Records"]}
        answers.append((urls, answer))
        armed = False  # the fault was transient: the redelivery succeeds
        return answer

    # When the driver delivers the 25 jobs as one batch, and then what SQS delivers again
    hooks = [
        ("provide-client-params.dynamodb.PutItem", mark),
        ("before-call.dynamodb.PutItem", fail_one_record),
    ]
    with session_hooks(hooks):
        stats = pump(sqs, [replace(indexer, handler=handler)])

    # Then the first answer names exactly the failed job's message, which alone came again
    (first_urls, first), (again_urls, again) = answers
    assert len(first_urls) == JOBS
    failed = [item["itemIdentifier"] for item in first["batchItemFailures"]]
    assert [first_urls[key] for key in failed] == [_urls()[target]]
    assert list(again_urls) == failed
    assert stats.failures == [(INDEXER, failed[0])]
    assert again == {"batchItemFailures": []}
    # And every URL ends with one outcome, counted once
    _settled_once(catalog)


def test_a_receive_is_billed_per_started_64_kib_of_the_messages_it_returns() -> None:
    # Given ten messages of 40 KB, and three of a few bytes
    with mocked_stack() as stack:
        sqs = boto3.client("sqs", region_name=stack.region)
        route = replace(_indexer(stack), batch_size=10)
        for n in range(10):
            sqs.send_message(QueueUrl=route.queue_url, MessageBody=f"{n}" * 40_000)
        large = gather(sqs, route)
        for n in range(3):
            sqs.send_message(QueueUrl=route.queue_url, MessageBody=f"m-{n}")
        small = gather(sqs, route)
    # Then the one receive of 400,000 bytes is billed as seven requests, the small one as one
    assert (large.receives, large.billed_receives) == (1, 7)
    assert (small.receives, small.billed_receives) == (1, 1)
