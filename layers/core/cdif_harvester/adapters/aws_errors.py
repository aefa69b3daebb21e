"""The one mapper from AWS SDK errors to the harvester's errors.

Every call into boto3 in an adapter runs inside :func:`aws_errors`, which turns a botocore
``ClientError`` or ``BotoCoreError`` into :class:`~cdif_harvester.errors.StorageError` (retryable),
chained to the SDK error and named after the operation that failed, as
``SafeFetcher._mapped_errors`` does for HTTP. The error codes a site asks about because they are
answers, not faults (:data:`CONDITION_FAILED`, a missing key, :data:`TRANSACTION_CANCELED` with
its reasons), are named in ``passing``: those ClientErrors reach the site unchanged, which
catches them right there and says in a comment what the code means.

See docs/decisions/0042-one-aws-error-mapper.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from cdif_harvester.errors import StorageError

__all__ = [
    "CONDITION_FAILED",
    "CONDITION_FAILED_REASON",
    "SDK_ERRORS",
    "TRANSACTION_CANCELED",
    "aws_errors",
    "cancellation_codes",
    "error_code",
]

#: Every exception the AWS SDK raises for a failed call.
SDK_ERRORS: tuple[type[Exception], ...] = (BotoCoreError, ClientError)

#: DynamoDB's answer to a conditional write whose condition did not hold.
CONDITION_FAILED = "ConditionalCheckFailedException"

#: DynamoDB's answer to a cancelled TransactWriteItems; ``CancellationReasons`` says, item by
#: item, which condition failed.
TRANSACTION_CANCELED = "TransactionCanceledException"


def error_code(exc: ClientError) -> str:
    """Return the AWS error code of ``exc`` (``""`` when the answer carried none)."""
    return str(exc.response.get("Error", {}).get("Code") or "")


@contextmanager
def aws_errors(operation: str, *, passing: Collection[str] = ()) -> Iterator[None]:
    """Map the AWS SDK errors raised in the ``with`` block to the harvester's errors.

    ``operation`` names what was being done (``"S3 put records/x.jsonld"``); the error reads
    ``"<operation> failed: <SDK message>"``. A ``ClientError`` whose code is in ``passing`` is
    re-raised unchanged for the caller to catch, except a cancelled transaction that does not
    say why (no ``CancellationReasons``): the caller could not act on it. Any other exception
    (the harvester's own errors included) passes untouched.

    Raises StorageError (from the SDK error) for every other ``ClientError`` and every
    ``BotoCoreError``.
    """
    try:
        yield
    except ClientError as exc:
        if _passes(exc, passing):
            raise
        raise StorageError(f"{operation} failed: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"{operation} failed: {exc}") from exc


def _passes(exc: ClientError, passing: Collection[str]) -> bool:
    code = error_code(exc)
    if code not in passing:
        return False
    return code != TRANSACTION_CANCELED or bool(exc.response.get("CancellationReasons"))


#: The reason an item of a cancelled transaction gives when its condition failed.
CONDITION_FAILED_REASON = "ConditionalCheckFailed"

#: The reasons a transaction's item may give that are answers (its condition failed, or it had
#: nothing to say); any other (``TransactionConflict``, ``ThrottlingError``, ...) is a fault.
_ANSWERS = frozenset({"None", CONDITION_FAILED_REASON})


def cancellation_codes(exc: ClientError, operation: str) -> list[str]:
    """Return the reason code of each item of the cancelled transaction ``exc``, in order
    (``"None"`` for an item that did not cancel it).

    Raises StorageError (from ``exc``) when any item was cancelled by anything but a failed
    condition: a conflict with another transaction or a throttled item says nothing about the
    data, and the write must be tried again.
    """
    reasons = exc.response.get("CancellationReasons") or []
    codes = [str(reason.get("Code") or "None") for reason in reasons]
    if not codes or any(code not in _ANSWERS for code in codes):
        raise StorageError(f"{operation} failed: {exc}") from exc
    return codes
