"""Moving messages from a dead-letter queue back to the queue they came from, losing none.

:func:`redrive` receives a batch, sends it to the target queue (checked against SQS's MD5
digests) and deletes from the dead-letter queue only what was sent and matched: a crash can leave
a message in both queues, never in neither. Errors of a receive (or of reading the queues'
attributes) are mapped to :class:`~cdif_harvester.errors.StorageError` by
:func:`~cdif_harvester.adapters.aws_errors.aws_errors`; a send or a delete that fails is part of
the result, counted and reported with SQS's own error code.

See docs/decisions/0011-dead-letter-redrive.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws_errors import SDK_ERRORS, aws_errors, error_code

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueOutputTypeDef,
        MessageTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

__all__ = [
    "BATCH_PAYLOAD_BYTES",
    "BATCH_SIZE",
    "EMPTY_RECEIVES",
    "VISIBILITY_TIMEOUT",
    "NotItsSource",
    "QueueCounts",
    "RedriveFailure",
    "RedriveResult",
    "check_source",
    "count",
    "redrive",
]

#: Most messages SQS receives, sends or deletes in one call.
BATCH_SIZE = 10
#: Seconds a received batch stays hidden: far longer than one send and one delete take, so no
#: other reader (another redrive, the console) sees it meanwhile.
VISIBILITY_TIMEOUT = 120
#: Empty receives in a row after which the dead-letter queue counts as empty: a receive may come
#: back empty while messages remain (SQS samples its servers), several in a row do not.
EMPTY_RECEIVES = 3
#: Most bytes of message bodies and attributes sent in one SendMessageBatch: SQS's limit before
#: it was raised to 1 MiB in 2025, so that the split is safe with any queue and any endpoint.
BATCH_PAYLOAD_BYTES = 256 * 1024
#: Seconds each receive waits for messages (long polling asks every SQS server).
WAIT_SECONDS = 2

Progress = Callable[[str], None]


class NotItsSource(ValueError):
    """The target queue does not dead-letter into the queue to be redriven.

    Sent to another stage, a job would break that stage's contract and be consumed unread:
    lost. So a redrive goes only back to a queue whose redrive policy names the dead-letter
    queue.
    """


@dataclass(frozen=True)
class RedriveFailure:
    """A message left in the dead-letter queue (or left in both queues), and why."""

    message_id: str
    code: str
    reason: str
    step: str = "send"

    def to_dict(self) -> dict[str, str]:
        """The failure as JSON-ready values."""
        return {
            "message_id": self.message_id,
            "step": self.step,
            "code": self.code,
            "reason": self.reason,
        }


@dataclass
class RedriveResult:
    """What a redrive did.

    ``moved``: sent to the target and deleted from the dead-letter queue. ``failed``: not sent,
    still in the dead-letter queue (a message refused again after its :data:`VISIBILITY_TIMEOUT`,
    in a long redrive, counts again). ``not_deleted``: sent, but the delete failed, so the message
    is in both queues (harmless: redelivery is idempotent). ``stopped``: ``empty`` (several
    empty receives), ``max`` (``max_messages`` reached) or ``send-error`` (a whole batch failed).
    """

    moved: int = 0
    failed: int = 0
    not_deleted: int = 0
    batches: int = 0
    stopped: str = ""
    failures: list[RedriveFailure] = field(default_factory=list)

    @property
    def handled(self) -> int:
        """Messages received and dealt with, either way."""
        return self.moved + self.failed + self.not_deleted

    @property
    def complete(self) -> bool:
        """Whether every message received reached the target and left the dead-letter queue."""
        return self.failed == 0 and self.not_deleted == 0

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""
        return {
            "moved": self.moved,
            "failed": self.failed,
            "not_deleted": self.not_deleted,
            "batches": self.batches,
            "stopped": self.stopped,
            "failures": [failure.to_dict() for failure in self.failures],
        }


@dataclass(frozen=True)
class QueueCounts:
    """SQS's approximate counts of a queue (eventually consistent, about a minute behind)."""

    visible: int
    in_flight: int
    delayed: int

    def to_dict(self) -> dict[str, int]:
        """The counts as JSON-ready values."""
        return {"visible": self.visible, "in_flight": self.in_flight, "delayed": self.delayed}


def count(sqs: SQSClient, queue_url: str) -> QueueCounts:
    """Return the approximate message counts of ``queue_url``; changes nothing.

    Raises StorageError when SQS cannot be asked (no such queue, access denied, network).
    """
    with aws_errors(f"SQS read of the attributes of {queue_url}"):
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
    return QueueCounts(
        visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


def check_source(sqs: SQSClient, dlq_url: str, target_url: str) -> None:
    """Make sure ``target_url``'s redrive policy sends its dead letters to ``dlq_url``.

    Raises NotItsSource when it does not, and StorageError when SQS cannot be asked.
    """
    with aws_errors("SQS read of the queues' attributes"):
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        target = sqs.get_queue_attributes(QueueUrl=target_url, AttributeNames=["RedrivePolicy"])
    # (SQS leaves out "Attributes" when the queue has none of those asked for.)
    policy = json.loads(target.get("Attributes", {}).get("RedrivePolicy") or "{}")
    named = policy.get("deadLetterTargetArn")
    if named != dlq_arn:
        raise NotItsSource(
            f"{target_url} dead-letters into {named or 'no queue'}, not into {dlq_arn}: "
            "its messages did not come from there"
        )


def redrive(
    sqs: SQSClient,
    dlq_url: str,
    target_url: str,
    *,
    max_messages: int | None = None,
    progress: Progress | None = None,
    wait_seconds: int = WAIT_SECONDS,
) -> RedriveResult:
    """Move the messages of ``dlq_url`` to ``target_url``, deleting only those sent intact.

    Stops when :data:`EMPTY_RECEIVES` receives in a row find nothing, after ``max_messages``
    messages (sent or not), or after a batch whose send failed as a whole. ``progress`` gets one
    line per batch. Messages that could not be sent are made visible in the dead-letter queue
    again before returning. Raises ValueError for ``max_messages`` below 1, and StorageError
    when the dead-letter queue cannot be read (what was moved stays moved; the error says how
    many).
    """
    if max_messages is not None and max_messages < 1:
        raise ValueError("max_messages must be at least 1")
    move = _Redrive(sqs, dlq_url, target_url)
    try:
        move.run(max_messages, wait_seconds, progress)
    finally:
        move.show_again()
    return move.result


class _Redrive:
    """One redrive: the queues, the result so far, and the messages left behind."""

    def __init__(self, sqs: SQSClient, dlq_url: str, target_url: str) -> None:
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.target_url = target_url
        self.result = RedriveResult()
        self.left_behind: list[str] = []  # receipt handles of messages not sent

    def run(self, max_messages: int | None, wait_seconds: int, progress: Progress | None) -> None:
        result = self.result
        empty = 0
        while True:
            want = BATCH_SIZE
            if max_messages is not None:
                want = min(want, max_messages - result.handled)
                if want <= 0:
                    result.stopped = "max"
                    return
            messages = self.receive(want, wait_seconds)
            if not messages:
                empty += 1
                if empty >= EMPTY_RECEIVES:
                    result.stopped = "empty"
                    return
                continue
            empty = 0
            result.batches += 1
            sent_none = self.move(messages)
            if progress is not None:
                progress(
                    f"batch {result.batches}: {len(messages)} received; so far {result.moved} "
                    f"moved, {result.failed} left in the dead-letter queue"
                )
            if sent_none:
                result.stopped = "send-error"
                return

    def receive(self, want: int, wait_seconds: int) -> list[MessageTypeDef]:
        # The error says how far the redrive got: what was moved stays moved.
        done = f"{self.result.moved} message(s) moved, {self.result.failed} left behind"
        with aws_errors(f"SQS receive from {self.dlq_url} ({done})"):
            received = self.sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=want,
                VisibilityTimeout=VISIBILITY_TIMEOUT,
                WaitTimeSeconds=wait_seconds,
                MessageAttributeNames=["All"],
            )
        return list(received.get("Messages", []))

    def move(self, messages: Sequence[MessageTypeDef]) -> bool:
        """Send one received batch, delete what arrived intact; True when a send failed as a
        whole (those messages stay in the dead-letter queue)."""
        by_id = {str(index): message for index, message in enumerate(messages)}
        delivered: list[MessageTypeDef] = []
        refused = False
        for chunk in _within_payload_limit(by_id):
            try:
                sent = self.sqs.send_message_batch(QueueUrl=self.target_url, Entries=chunk)
            except SDK_ERRORS as exc:
                # Not mapped: a refused batch is part of the result, not an error of the redrive.
                # Its messages stay behind, reported with SQS's own code (or the SDK's error).
                code = error_code(exc) if isinstance(exc, ClientError) else ""
                for entry in chunk:
                    self.leave(by_id[entry["Id"]], code or type(exc).__name__, str(exc))
                refused = True
                continue
            for success in sent.get("Successful", []):
                message = by_id[success["Id"]]
                mismatch = _digest_mismatch(message, success)
                if mismatch:  # SQS stored something else than was received: keep the original
                    self.leave(message, "DigestMismatch", mismatch)
                else:
                    delivered.append(message)
            for failure in sent.get("Failed", []):
                reason = failure.get("Message", "") or "refused by the target queue"
                self.leave(by_id[failure["Id"]], failure["Code"], reason)
        self.delete(delivered)
        return refused

    def leave(self, message: MessageTypeDef, code: str, reason: str) -> None:
        """Count a message that was not sent; it stays in the dead-letter queue."""
        self.result.failed += 1
        self.result.failures.append(RedriveFailure(message["MessageId"], code, reason))
        self.left_behind.append(message["ReceiptHandle"])

    def delete(self, messages: Sequence[MessageTypeDef]) -> None:
        """Delete the delivered messages from the dead-letter queue."""
        if not messages:
            return
        by_id = {str(index): message for index, message in enumerate(messages)}
        try:
            deleted = self.sqs.delete_message_batch(
                QueueUrl=self.dlq_url,
                Entries=[
                    {"Id": entry_id, "ReceiptHandle": message["ReceiptHandle"]}
                    for entry_id, message in by_id.items()
                ],
            )
        except SDK_ERRORS as exc:
            # Not mapped: these messages reached the target, so they are reported, not raised.
            for message in messages:
                self.not_deleted(message, type(exc).__name__, str(exc))
            return
        self.result.moved += len(deleted.get("Successful", []))
        for failure in deleted.get("Failed", []):
            self.not_deleted(by_id[failure["Id"]], failure["Code"], failure.get("Message", ""))

    def not_deleted(self, message: MessageTypeDef, code: str, reason: str) -> None:
        # It reached the target; it shows again in the dead-letter queue after
        # VISIBILITY_TIMEOUT and a later redrive sends it again (a duplicate the idempotent
        # stages shrug off).
        self.result.not_deleted += 1
        self.result.failures.append(
            RedriveFailure(message["MessageId"], code, reason, step="delete")
        )

    def show_again(self) -> None:
        """Make the messages that were not sent visible again (else hidden for
        VISIBILITY_TIMEOUT seconds).

        Done at the end, not as each batch fails: shown earlier, they would be received again
        by this same redrive. Best effort: if it fails they reappear by themselves.
        """
        handles = self.left_behind
        for start in range(0, len(handles), BATCH_SIZE):
            chunk = handles[start : start + BATCH_SIZE]
            try:
                self.sqs.change_message_visibility_batch(
                    QueueUrl=self.dlq_url,
                    Entries=[
                        {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                        for index, handle in enumerate(chunk)
                    ],
                )
            except SDK_ERRORS:  # not mapped: best effort, the messages reappear by themselves
                return


def _within_payload_limit(
    by_id: Mapping[str, MessageTypeDef],
) -> list[list[SendMessageBatchRequestEntryTypeDef]]:
    """The send entries of ``by_id``, in batches whose payload SQS accepts in one call.

    Ten messages may add up to more than one batch may carry (jobs of up to 200 KiB each,
    contracts.MAX_MESSAGE_BYTES): SQS would refuse the whole batch, and the redrive would stop.
    A message is never split: one bigger than the limit goes alone.
    """
    chunks: list[list[SendMessageBatchRequestEntryTypeDef]] = []
    size = 0
    for entry_id, message in by_id.items():
        entry: SendMessageBatchRequestEntryTypeDef = {
            "Id": entry_id,
            "MessageBody": message["Body"],
        }
        attributes = _sendable_attributes(message.get("MessageAttributes", {}))
        if attributes:
            entry["MessageAttributes"] = attributes
        entry_size = _payload_size(message["Body"], attributes)
        if not chunks or size + entry_size > BATCH_PAYLOAD_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += entry_size
    return chunks


def _payload_size(body: str, attributes: Mapping[str, MessageAttributeValueOutputTypeDef]) -> int:
    """Bytes SQS counts for a message: its body, and each attribute's name, type and value."""
    size = len(body.encode("utf-8"))
    for name, value in attributes.items():
        size += len(name.encode("utf-8")) + len(value["DataType"].encode("utf-8"))
        size += len(value.get("StringValue", "").encode("utf-8"))
        size += len(value.get("BinaryValue", b""))
    return size


def _sendable_attributes(
    attributes: Mapping[str, MessageAttributeValueOutputTypeDef],
) -> dict[str, MessageAttributeValueOutputTypeDef]:
    """Message attributes as received, in the shape SendMessage takes.

    The list values are reserved by SQS (received empty, refused when sent), so they go only
    when present.
    """
    sendable: dict[str, MessageAttributeValueOutputTypeDef] = {}
    for name, value in attributes.items():
        kept: MessageAttributeValueOutputTypeDef = {"DataType": value["DataType"]}
        if "StringValue" in value:
            kept["StringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            kept["BinaryValue"] = value["BinaryValue"]
        if value.get("StringListValues"):
            kept["StringListValues"] = value["StringListValues"]
        if value.get("BinaryListValues"):
            kept["BinaryListValues"] = value["BinaryListValues"]
        sendable[name] = kept
    return sendable


def _digest_mismatch(received: MessageTypeDef, sent: Mapping[str, Any]) -> str:
    """Why SQS's digest of the sent message differs from the received one ("" if it does not)."""
    body_md5 = hashlib.md5(received["Body"].encode("utf-8"), usedforsecurity=False).hexdigest()
    if sent.get("MD5OfMessageBody") not in (None, body_md5):
        return "the target stored a different body"
    expected = received.get("MD5OfMessageAttributes")
    stored = sent.get("MD5OfMessageAttributes")
    if expected and stored and expected != stored:
        return "the target stored different message attributes"
    return ""
