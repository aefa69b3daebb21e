"""Logs and metrics of the Lambda handlers, under moto with real SQS events.

The handlers print CloudWatch embedded metric format (EMF) documents and JSON log lines to
stdout, as on Lambda; these tests read them back and check what the alarms and the dashboard of
template.yaml rely on: every metric names its stage, outcomes are counted per stage and kind, a
batch logs one summary line (decision 0089) and every log line of a job carries its run id as the
correlation id.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from cdif_harvester import aws_runtime
from cdif_harvester.contracts import UrlJob, encode
from cdif_harvester.demo.server import PublisherSite
from tests.support.aws import ProvisionedStack, sqs_event
from tests.support.pipeline import invoke

pytestmark = [pytest.mark.aws, pytest.mark.network]

NAMESPACE = "CDIFHarvester"
SERVICE = "cdif-harvester"
RUN_ID = "20260301T120000Z-observed"


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at the time (capsys swaps it only around the call)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def stdout(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    """capsys, with the log lines in it too.

    Metrics print to the current stdout; Powertools' logger keeps the stdout of the moment its
    module was imported (Lambda's, on Lambda), so it is pointed at the current one here.
    """
    handler = aws_runtime.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    previous = handler.stream
    handler.stream = _CurrentStdout()
    yield capsys
    handler.stream = previous


def _documents(out: str) -> list[dict[str, Any]]:
    """Every JSON object printed on its own line."""
    found = []
    for line in out.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def _points(documents: list[dict[str, Any]]) -> list[tuple[str, dict[str, str], float]]:
    """(metric name, dimensions, value) of every metric in the EMF documents, namespace checked."""
    points = []
    for doc in documents:
        if "_aws" not in doc:
            continue
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == NAMESPACE, directive
            (dimension_names,) = directive["Dimensions"]
            dimensions = {name: doc[name] for name in dimension_names}
            for metric in directive["Metrics"]:
                value = doc[metric["Name"]]
                for item in value if isinstance(value, list) else [value]:
                    points.append((metric["Name"], dimensions, float(item)))
    return points


def _receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", []):
        messages.extend(batch)
    return messages


def test_a_resolver_batch_counts_outcomes_by_stage_and_kind(
    stack: ProvisionedStack, site: PublisherSite, stdout: pytest.CaptureFixture[str]
) -> None:
    # Given a batch of URL jobs of one run, ending in different outcomes, and a broken message
    sqs = boto3.client("sqs", region_name=stack.region)
    source = stack.sqs_event_sources["UrlResolverFunction"]
    paths = [
        "/datasets/glider-mission-notes.html",  # no metadata
        "/datasets/retired-mooring-2009.html",  # gone: failed
        "/datasets/kelp-forest-survey.html",  # handed to the extractor: no outcome yet
    ]
    for path in paths:
        job = UrlJob(run_id=RUN_ID, source="127.0.0.1", url=site.url(path))
        sqs.send_message(QueueUrl=source.queue_url, MessageBody=encode(job))
    # a host that refuses connections: the job fails, to be tried again (a per-job warning)
    refused = UrlJob(run_id=RUN_ID, source="127.0.0.1", url="http://127.0.0.1:9/refused.html")
    sqs.send_message(QueueUrl=source.queue_url, MessageBody=encode(refused))
    sqs.send_message(QueueUrl=source.queue_url, MessageBody='{"not": "a job"}')
    messages = _receive_all(sqs, source.queue_url)
    assert len(messages) == 5
    refused_id = next(m["MessageId"] for m in messages if "refused.html" in m["Body"])
    stdout.readouterr()

    # When the resolver's handler runs the batch
    response = invoke(
        stack,
        "UrlResolverFunction",
        sqs_event(messages, source.queue_arn),
        ALLOW_LOOPBACK="true",
    )

    # Then its metrics name the stage, and the outcomes are counted by stage and kind
    assert response == {"batchItemFailures": [{"itemIdentifier": refused_id}]}
    documents = _documents(stdout.readouterr().out)
    points = _points(documents)
    stage = {"service": SERVICE, "Stage": "url-resolver"}
    outcomes = {
        dims["Outcome"]: value
        for name, dims, value in points
        if name == "Outcomes" and {k: v for k, v in dims.items() if k != "Outcome"} == stage
    }
    assert outcomes == {"no-metadata": 1.0, "failed": 1.0}
    assert ("JobsProcessed", stage, 3.0) in _summed(points)
    assert ("BadMessages", stage, 1.0) in _summed(points)
    assert ("Batches", stage, 1.0) in _summed(points)
    assert ("JobsFailed", stage, 1.0) in _summed(points)
    # (No stage metric goes out without its stage; only the cold start names the function.)
    for name, dims, _ in points:
        assert "Stage" in dims or name == "ColdStart", (name, dims)

    # And the batch logs one summary line, the run id its correlation id (a job that went well
    # logs nothing of its own: decision 0089)
    lines = [doc for doc in documents if "level" in doc]
    (summary,) = [line for line in lines if line["message"] == "batch done"]
    assert summary["stage"] == "url-resolver"
    assert (summary["jobs"], summary["failed"]) == (3, 1)
    assert summary["outcomes"] == {"no-metadata": 1, "failed": 1}
    assert summary["correlation_id"] == RUN_ID
    assert "url" not in summary and "message_id" not in summary
    assert [line for line in lines if line["level"] == "INFO"] == [summary]
    # and every log line of a job carries the run id as correlation id, its URL and message id
    (warned,) = [line for line in lines if line["message"] == "job failed; SQS redelivers it"]
    assert warned["url"] == refused.url
    assert warned["message_id"] == refused_id
    for line in lines:
        if "url" in line:
            assert line["correlation_id"] == RUN_ID, line
            assert line["run_id"] == RUN_ID, line
            assert line["stage"] == "url-resolver", line
            assert line["message_id"] in {message["MessageId"] for message in messages}, line
    (broken,) = [line for line in lines if line["message"] == "message breaks its contract"]
    # The broken message's line must not borrow the run or URL of the record before it.
    assert "correlation_id" not in broken and "url" not in broken and "run_id" not in broken


def test_crosswalk_metrics_and_logs_name_their_stage(
    stack: ProvisionedStack, stdout: pytest.CaptureFixture[str]
) -> None:
    # Given the s3:TestEvent that S3 sent to the crosswalk queue when the stack was made
    sqs = boto3.client("sqs", region_name=stack.region)
    source = stack.sqs_event_sources["CrosswalkFunction"]
    messages = _receive_all(sqs, source.queue_url)
    assert len(messages) == 1
    stdout.readouterr()

    # When the crosswalk handler runs it
    response = invoke(stack, "CrosswalkFunction", sqs_event(messages, source.queue_arn))

    # Then the metrics say "crosswalk", and the log says why nothing was done
    assert response == {"batchItemFailures": []}
    documents = _documents(stdout.readouterr().out)
    stage = {"service": SERVICE, "Stage": "crosswalk"}
    assert ("JobsProcessed", stage, 1.0) in _summed(_points(documents))
    (line,) = [doc for doc in documents if doc.get("message") == "notification names no object"]
    assert line["event"] == "s3:TestEvent"
    assert line["stage"] == "crosswalk"
    assert line["message_id"] == messages[0]["MessageId"]


def _summed(
    points: list[tuple[str, dict[str, str], float]],
) -> list[tuple[str, dict[str, str], float]]:
    """Points of the same metric and dimensions added up (EMF may list several values)."""
    totals: dict[tuple[str, str], tuple[str, dict[str, str], float]] = {}
    for name, dims, value in points:
        key = (name, json.dumps(dims, sort_keys=True))
        previous = totals.get(key, (name, dims, 0.0))[2]
        totals[key] = (name, dims, previous + value)
    return list(totals.values())
