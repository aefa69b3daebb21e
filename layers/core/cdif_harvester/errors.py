"""The one error hierarchy of the harvester, and the map of every exception it defines.

Every error the core raises derives from :class:`HarvestError` and falls in one of two families,
which decide what a stage does with the work item that raised it:

* :class:`RetryableError`: a passing fault (network trouble, throttling, a 5xx answer). On AWS the
  message is reported as a batch item failure, SQS redelivers it, and after ``maxReceiveCount``
  tries it goes to the stage's dead-letter queue. Locally the runner retries it a few times and
  then records the outcome ``failed``.
* :class:`PermanentError`: trying again cannot help (bad metadata, a refused address, a body that
  is too large). The stage records the outcome and the message is consumed.

Adapters map SDK and HTTP errors to these classes (``raise ... from exc``), one mapper per
boundary: ``SafeFetcher._mapped_errors`` (:mod:`cdif_harvester.adapters.http`) for httpx and
:func:`~cdif_harvester.adapters.aws_errors.aws_errors` for botocore, so no stage ever has to know
about botocore or httpx exceptions.

Every exception class defined in the package, under its base class, with its module (relative to
``cdif_harvester``), whether it is retryable or permanent, and when it is raised. Classes outside
:class:`HarvestError` are not outcomes of a URL: they are answered where they are raised. A unit
test keeps this tree complete::

    Exception
        HarvestError (errors): the base, never raised itself; ``outcome`` and ``reason``
            RetryableError (errors): retryable; the base of passing faults
                FetchTimeout (errors): retryable; time ran out before the server sent anything
                FetchFailed (errors): retryable; connection refused or reset, TLS, a 5xx answer
                StorageError (errors): retryable; S3, DynamoDB, SQS or the local store failed
                WorkerDied (cli.processes): retryable; the process reading a job's documents
                    died (a local harvest with processes)
            Deferred (errors): neither; a host's slot is busy, the job runs again after a delay
            PermanentError (errors): permanent; also raised itself: a bad URL, an undecodable body
                ContractError (errors): permanent; a message between stages breaks its contract
                AddressRefused (errors): permanent (outcome ``blocked``); refused by address policy
                BodyTooLarge (errors): permanent; a response body over the fetcher's cap
                RedirectError (errors): permanent; too many redirects, a loop, no Location
                TooSlow (errors): permanent; the server was still sending at the deadline
                SitemapError (domain.discovery.sitemap): permanent; not a readable sitemap
                InvalidUrl (domain.discovery.urls): permanent; a location no fetch can take
                ExtractionError (domain.records.extraction): permanent; JSON beyond repair
                    JsonTooDeep (domain.records.extraction): permanent; nested past 100 levels
                NormalisationError (domain.records.normalisation): permanent; no Dataset,
                    or JSON-LD processing failed
                ShaclUnavailable (domain.records.shacl): permanent; SHACL without pyshacl
                NQuadsError (domain.views.nquads): permanent; a record that is not RDF
                SitemapFetchError (stages.expand): permanent; no usable sitemap or robots.txt
                HttpStatusError (stages.resolve): permanent; a page answered 4xx or an odd status
                MalformedMetadata (stages.extract): permanent; no JSON-LD block readable
                StagedObjectMissing (stages.index): permanent; the extractor's hand-over is gone
                NotARecordKey (stages.crosswalk): permanent; notified of an object not a record
                UnknownView (stages.crosswalk): permanent; a view name none of the six
                InvalidEntryUrl (stages.intake): permanent; an entry URL that cannot start a run
                InvalidOptions (stages.intake): permanent; unknown or unusable options
                InvalidSource (stages.sources): permanent; an unusable source registration
                UnknownSource (stages.sources): permanent; no source under that id
                SourceBusy (stages.sources): permanent; the source has a run under way
                HostNotAllowed (stages.sources): permanent; a URL on a host the source does not list
                BrowserUnavailable (adapters.render): permanent; no Chromium found or started
        ApiError (api.errors): permanent; the intake API refuses a request (400)
            Unauthenticated (api.errors): permanent; no API key identity (401)
            Forbidden (api.errors): permanent; the key may not do this (403)
            NotFound (api.errors): permanent; no such source, run, record or view (404)
            NotAcceptable (api.errors): permanent; ``Accept`` allows no media type (406)
            Conflict (api.errors): permanent; the resource exists already, or is busy (409)
            PayloadTooLarge (api.errors): permanent; a body over 8 KiB (1 MiB: /check) (413)
            UnsupportedMediaType (api.errors): permanent; a body of a type not taken (415)
            TooLargeToServe (api.errors): permanent; a document too big for Lambda (501)
        UsageError (cli.dlq): permanent; ``cdif-harvest dlq`` given no usable queue (exit 2)
        UnreadableFile (cli.check): permanent; ``cdif-harvest check`` cannot read its FILE (exit 2)
        HarvestInterrupted (cli.runner): a local run stopped by SIGINT or SIGTERM, marked
            ``interrupted`` (exit 130 or 143)
        Declined (domain.records.jsonld_fast): internal, caught there; pyld takes over
    KeyboardInterrupt
        Terminated (cli.runner): SIGTERM, raised by the command line's handler; stops a run
    RuntimeError
        ConfigError (aws_runtime): fatal until redeployed; the environment lacks a setting
        NotImplementedError
            UnsupportedTemplate (cli.moto_stack): ``cdif-harvest invoke`` meets a template
                construct it cannot reproduce in moto (exit 2)
    ValueError
        NotItsSource (adapters.dlq): permanent; a redrive target that does not dead-letter there
        InvalidContact (contact): the operator's contact cannot go in the User-Agent (exit 2;
            on AWS a configuration error at start-up)
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
    "TooSlow",
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


class TooSlow(PermanentError):
    """A server was still sending its answer (head or body) when the fetch's deadline passed.

    Permanent, unlike :class:`FetchTimeout`: a server that trickles bytes defeats every
    per-read timeout by design (a slow-loris publisher), and retrying it would only multiply
    the time it holds a worker. See docs/decisions/0048-one-fetch-deadline.md.
    """

    reason = "too-slow"


class FetchTimeout(RetryableError):
    """A connect or read timeout, or the total deadline passed before the server sent anything.

    A server still sending at the deadline raises :class:`TooSlow` instead.
    """

    reason = "timeout"


class FetchFailed(RetryableError):
    """A network-level failure (connection refused, reset, TLS error, 5xx answer)."""

    reason = "network"


class StorageError(RetryableError):
    """The object store, catalogue or queue failed (wraps SDK and filesystem errors)."""

    reason = "storage"
