"""Drives Lambda handlers the way the Lambda service does, against real (moto) SQS queues.

Messages are received from the queues, wrapped in the SQS event Lambda would build, passed to the
handler, and deleted unless the handler reported them in ``batchItemFailures`` — exactly the
ReportBatchItemFailures contract. A batch is gathered as the event source mapping gathers it:
ReceiveMessage (at most 10 messages a call) again and again until the route's batch size is
reached, the queue has nothing visible (its batching window spent) or the event would pass
Lambda's 6 MB payload limit.
"""

from __future__ import annotations

import json
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


#: What one ReceiveMessage call returns at most (the SQS API's limit).
RECEIVE_LIMIT = 10
#: The event source mapping's batch size when a route names none (the template's old default).
DEFAULT_BATCH_SIZE = 10
#: Lambda's limit on a synchronous invocation's payload: the mapping stops a batch short of it.
PAYLOAD_LIMIT = 6 * 1024 * 1024


@dataclass
class Route:
    """One event source mapping: a queue, the handler it feeds, and its batch size."""

    queue_url: str
    queue_arn: str
    handler: Handler
    name: str = ""
    batch_size: int = DEFAULT_BATCH_SIZE


@dataclass
class Gathered:
    """One batch as the event source mapping gathers it: its messages, and the ReceiveMessage
    calls that returned some (what the mapping pays for, beside its empty polls)."""

    messages: list[dict[str, Any]]
    receives: int
    #: what SQS bills those calls as: one request per started 64 KiB of the messages each
    #: returned (bodies and message attributes)
    billed_receives: int = 0


@dataclass
class PumpStats:
    """What a pump did: batches and messages per route, and the failures handlers reported."""

    batches: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)


def gather(sqs: Any, route: Route) -> Gathered:
    """Up to ``route.batch_size`` messages of the route's queue, with every attribute, as the
    event source mapping gathers them: ten per ReceiveMessage, until the batch is full, the
    queue has nothing visible, or one more message would take the event past
    :data:`PAYLOAD_LIMIT` (that message is made visible again, for the next batch)."""
    messages: list[dict[str, Any]] = []
    receives = billed = 0
    size = 0
    while len(messages) < route.batch_size:
        received: list[dict[str, Any]] = sqs.receive_message(
            QueueUrl=route.queue_url,
            MaxNumberOfMessages=min(RECEIVE_LIMIT, route.batch_size - len(messages)),
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not received:
            break
        receives += 1
        billed += -(-sum(_payload_bytes(message) for message in received) // SQS_CHUNK)
        for index, message in enumerate(received):
            size += len(json.dumps(message))
            if messages and size > PAYLOAD_LIMIT:
                for left in received[index:]:
                    sqs.change_message_visibility(
                        QueueUrl=route.queue_url,
                        ReceiptHandle=left["ReceiptHandle"],
                        VisibilityTimeout=0,
                    )
                return Gathered(messages, receives, billed)
            messages.append(message)
    return Gathered(messages, receives, billed)


#: SQS bills each started 64 KiB of a request's payload as one request.
SQS_CHUNK = 64 * 1024


def _payload_bytes(message: dict[str, Any]) -> int:
    """A received message's billed bytes: its body and its message attributes (name, type
    and value)."""
    size = len(str(message.get("Body", "")).encode("utf-8"))
    for name, attribute in (message.get("MessageAttributes") or {}).items():
        value = attribute.get("StringValue") or attribute.get("BinaryValue") or ""
        size += len(name) + len(str(attribute.get("DataType", ""))) + len(value)
    return size


def receive_batch(sqs: Any, route: Route) -> list[dict[str, Any]]:
    """The messages of one batch of the route's queue (:func:`gather`)."""
    return gather(sqs, route).messages


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
