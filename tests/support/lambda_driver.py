"""Drives Lambda handlers the way the Lambda service does, against real (moto) SQS queues.

Messages are received from the queues, wrapped in the SQS event Lambda would build, passed to the
handler, and deleted unless the handler reported them in ``batchItemFailures`` — exactly the
ReportBatchItemFailures contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.aws import sqs_event

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass
class FakeLambdaContext:
    """The attributes of the Lambda context object that Powertools reads."""

    function_name: str = "cdif-test-function"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:cdif-test-function"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/cdif-test-function"
    log_stream_name: str = "test"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


@dataclass
class Route:
    """One event source mapping: a queue and the handler it feeds."""

    queue_url: str
    queue_arn: str
    handler: Handler
    name: str = ""


@dataclass
class PumpStats:
    """What a pump did: batches and messages per route, and the failures handlers reported."""

    batches: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)


def receive_batch(sqs: Any, route: Route) -> list[dict[str, Any]]:
    """Up to 10 messages of the route's queue, with every attribute, as Lambda receives them."""
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=route.queue_url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=0,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    return messages


def pump(sqs: Any, routes: list[Route], *, max_rounds: int = 500) -> PumpStats:
    """Deliver messages to handlers until every queue is empty (or ``max_rounds`` is reached).

    Raises AssertionError when the queues are still busy after ``max_rounds`` batches.
    """
    stats = PumpStats()
    for _ in range(max_rounds):
        delivered = False
        for route in routes:
            received = receive_batch(sqs, route)
            if not received:
                continue
            delivered = True
            name = route.name or route.queue_url
            stats.batches[name] = stats.batches.get(name, 0) + 1
            stats.messages[name] = stats.messages.get(name, 0) + len(received)
            response = route.handler(sqs_event(received, route.queue_arn), FakeLambdaContext())
            failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
            stats.failures.extend((name, message_id) for message_id in failed)
            for message in received:
                if message["MessageId"] not in failed:
                    sqs.delete_message(
                        QueueUrl=route.queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
        if not delivered:
            return stats
    raise AssertionError(f"queues still busy after {max_rounds} rounds: {stats}")
