"""The one error hierarchy of the harvester.

Every error the core raises derives from :class:`HarvestError` and falls in one of two families,
which decide what a stage does with the work item that raised it:

* :class:`RetryableError`: a passing fault (network trouble, throttling, a 5xx answer). On AWS the
  message is reported as a batch item failure, SQS redelivers it, and after ``maxReceiveCount``
  tries it goes to the stage's dead-letter queue. Locally the runner retries it a few times and
  then records the outcome ``failed``.
* :class:`PermanentError`: trying again cannot help (bad metadata, a refused address, a body that
  is too large). The stage records the outcome and the message is consumed.

Adapters wrap SDK and HTTP errors in these classes (``raise ... from exc``) so no stage ever has to
know about botocore or httpx exceptions.
"""

from __future__ import annotations

__all__ = [
    "AddressRefused",
    "BodyTooLarge",
    "ContractError",
    "Deferred",
    "FetchFailed",
    "FetchTimeout",
    "HarvestError",
    "PermanentError",
    "RedirectError",
    "RetryableError",
    "StorageError",
]


class HarvestError(Exception):
    """Base of every error raised by the harvester core.

    ``outcome`` is the recorded outcome a URL gets when this error ends its processing, and
    ``reason`` a short, stable, machine-readable reason code (``str(error)`` holds the details).
    """

    outcome: str = "failed"
    reason: str = "error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class RetryableError(HarvestError):
    """A passing fault: the work item should be tried again later.

    ``retry_after`` (seconds), when known (an HTTP ``Retry-After``), is when to try again.
    """

    reason = "retryable"

    def __init__(
        self, message: str, *, reason: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, reason=reason)
        self.retry_after = retry_after


class Deferred(HarvestError):
    """Not a failure: the work must wait ``delay`` seconds (a host's politeness slot is busy).

    Drivers put the job back to run after the delay without counting an attempt: on AWS a new
    message with ``DelaySeconds`` (no Lambda time spent waiting), locally a later turn.
    """

    reason = "deferred"

    def __init__(self, message: str, *, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(HarvestError):
    """Trying again cannot help: record the outcome and move on."""

    reason = "permanent"


class ContractError(PermanentError):
    """A message between stages does not match its contract (wrong version, missing field)."""

    reason = "bad-message"


class AddressRefused(PermanentError):
    """The fetcher refused a URL before opening any connection (address policy, scheme, port)."""

    outcome = "blocked"
    reason = "address-refused"


class BodyTooLarge(PermanentError):
    """A response body (raw or decompressed) exceeded the configured cap.

    ``status`` and ``headers`` (lower-cased names, in order) are those of the response whose
    body was refused, when the fetcher got that far: a caller that only wanted the headers
    (content type, ``Link``) can still use them.
    """

    reason = "body-too-large"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        status: int | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message, reason=reason)
        self.status = status
        self.headers = headers


class RedirectError(PermanentError):
    """Too many redirects, a redirect loop, or a redirect without a usable Location."""

    reason = "redirect"


class FetchTimeout(RetryableError):
    """Connect, read or total time limit exceeded."""

    reason = "timeout"


class FetchFailed(RetryableError):
    """A network-level failure (connection refused, reset, TLS error, 5xx answer)."""

    reason = "network"


class StorageError(RetryableError):
    """The object store, catalogue or queue failed (wraps SDK and filesystem errors)."""

    reason = "storage"
