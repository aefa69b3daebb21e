"""Fault injection for the AWS handlers under moto, through botocore's own event hooks.

:class:`WriteFaults` is installed on every boto3 client created while it is active (the clients
the handlers build at each cold start): it numbers the writes (S3, DynamoDB and SQS operations
that change something) and fails the ``at``-th one, either ``before`` it reaches moto (nothing
was written) or ``after`` moto applied it (the write happened, the caller sees an error: a
process that died half-way). :func:`drain` plays the Lambda service: it delivers each queue's
messages to its handler, deletes those that succeeded and makes the failed ones visible again at
once (SQS would after their visibility timeout), optionally delivering every batch twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from tests.support.aws import sqs_event
from tests.support.lambda_driver import FakeLambdaContext, Route, receive_batch

#: The operations that write, by service (what a crash point can follow).
WRITES: dict[str, frozenset[str]] = {
    "s3": frozenset({"PutObject", "DeleteObject", "DeleteObjects", "CopyObject"}),
    "dynamodb": frozenset(
        {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
    ),
    "sqs": frozenset(
        {
            "SendMessage",
            "SendMessageBatch",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
        }
    ),
}

# A transient answer of each service (what throttling looks like to the SDK).
_TRANSIENT = {
    "s3": ("SlowDown", 503),
    "dynamodb": ("ProvisionedThroughputExceededException", 400),
    "sqs": ("ThrottlingException", 400),
}

When = Literal["before", "after"]
_KEY = "injected_write"


@dataclass
class WriteFaults:
    """Numbers the writes of the clients it is installed on and fails the ``at``-th one."""

    at: int | None = None
    when: When = "before"
    writes: list[str] = field(default_factory=list)
    fired: str | None = None

    def before_call(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        service = model.service_model.service_name
        if model.name not in WRITES.get(service, ()):
            return None
        self.writes.append(f"{service}.{model.name}")
        context[_KEY] = len(self.writes)
        if len(self.writes) != self.at or self.when != "before":
            return None
        self.fired = self.writes[-1]
        code, status = _TRANSIENT[service]
        http = AWSResponse(f"https://{service}.us-east-1.amazonaws.com/", status, {}, None)
        return http, {
            "Error": {"Code": code, "Message": f"injected before write {self.at}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

    def after_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if context.get(_KEY) != self.at or self.when != "after" or self.fired:
            return
        service = model.service_model.service_name
        self.fired = f"{service}.{model.name}"
        code, status = _TRANSIENT[service]
        raise ClientError(
            {
                "Error": {"Code": code, "Message": f"injected after write {self.at}"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            model.name,
        )


@contextmanager
def installed(faults: WriteFaults) -> Iterator[WriteFaults]:
    """Install ``faults`` on every botocore client created inside the block."""
    original = botocore.session.Session.create_client
    # One client per service and region, as a warm Lambda execution environment keeps them
    # (building a client costs tens of milliseconds; the handlers rebuild theirs every call).
    clients: dict[tuple[Any, ...], Any] = {}

    def create_client(self: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
        key = (service_name, *args, *sorted(kwargs.items()))
        if key not in clients or kwargs.get("config") is not None:
            client = original(self, service_name, *args, **kwargs)
            client.meta.events.register("before-call", faults.before_call)
            client.meta.events.register("after-call", faults.after_call)
            clients[key] = client
        return clients[key]

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    try:
        yield faults
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]


@dataclass
class Delivery:
    """What :func:`drain` did: deliveries per route and the messages that failed."""

    deliveries: int = 0
    failures: list[str] = field(default_factory=list)


def drain(sqs: Any, routes: list[Route], *, twice: bool = False, max_rounds: int = 200) -> Delivery:
    """Deliver messages to handlers until every queue is empty, redelivering failed ones.

    Raises AssertionError when the queues are still busy after ``max_rounds`` rounds.
    """
    done = Delivery()
    for _ in range(max_rounds):
        delivered = False
        for route in routes:
            received = receive_batch(sqs, route)
            if not received:
                continue
            delivered = True
            failed: set[str] = set()
            for _copy in range(2 if twice else 1):
                done.deliveries += 1
                failed |= _deliver(route, received)
            done.failures.extend(sorted(failed))
            for message in received:
                if message["MessageId"] in failed:  # SQS makes it visible again
                    sqs.change_message_visibility(
                        QueueUrl=route.queue_url,
                        ReceiptHandle=message["ReceiptHandle"],
                        VisibilityTimeout=0,
                    )
                else:
                    sqs.delete_message(
                        QueueUrl=route.queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
        if not delivered:
            return done
    raise AssertionError(f"queues still busy after {max_rounds} rounds")


def _deliver(route: Route, received: list[dict[str, Any]]) -> set[str]:
    """One invocation of the route's handler; the ids of the messages it failed."""
    try:
        response = route.handler(sqs_event(received, route.queue_arn), FakeLambdaContext())
    except Exception:  # the whole invocation failed: Lambda retries the whole batch
        return {message["MessageId"] for message in received}
    return {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
