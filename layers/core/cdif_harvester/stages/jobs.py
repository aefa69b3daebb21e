"""Running one job of a stage: its stable key, its politeness scope, the one verdict on an
error (:func:`verdict`) and the one backoff before a retry (:func:`retry_delay`) that both
drivers, the local runner and the AWS handlers, follow.

See docs/decisions/0052-one-verdict-on-errors.md and
docs/decisions/0070-site-roots-backoff-and-contact.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import random
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

from cdif_harvester.contracts import SitemapJob
from cdif_harvester.domain.resolution.rules import parse_retry_after
from cdif_harvester.errors import Deferred, HarvestError, PermanentError, RetryableError
from cdif_harvester.model import (
    FetchResponse,
    UrlOutcome,
    plain,
)
from cdif_harvester.settings import Settings
from cdif_harvester.stages.outcomes import settle
from cdif_harvester.stages.runs import sitemap_done
from cdif_harvester.wiring import Wiring

__all__ = ["Jitter", "give_up", "job_key", "retry_after_of", "retry_delay", "run_job", "verdict"]

Jitter = Callable[[float, float], float]
"""Draws a number between its two arguments (``random.uniform``; a test's is fixed)."""

logger = logging.getLogger(__name__)

# Storage faults that escaped an adapter's mapper (a gap in the mapping, not a fault of the
# data): retrying is right, as for the StorageError they should have been. An SDK error, or
# SQLite's OperationalError ("database is locked", "disk I/O error"); never httpx's (the
# fetcher maps its transport errors, and what escapes, such as InvalidURL, is deterministic).
_TRANSIENT_MODULES = ("botocore", "boto3", "s3transfer")
_TRANSIENT_NAMES = {("sqlite3", "OperationalError")}


class _UrlWork(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def url(self) -> str: ...


_J = TypeVar("_J", bound=_UrlWork)


@runtime_checkable
class _JobScoped(Protocol):
    def job_scope(
        self,
        *,
        run_id: str,
        job_key: str | Callable[[], str],
        resume: bool = False,
        requests_per_host: int | None = None,
        crawl_delay: float | None = None,
    ) -> AbstractContextManager[None]: ...


def job_key(stage: Callable[..., Any], job: object) -> str:
    """A stable key of one job of one stage: the same message always gives the same key."""
    data = plain(job) if dataclasses.is_dataclass(job) else repr(job)
    name = getattr(stage, "__qualname__", repr(stage))
    text = json.dumps([name, data], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def run_job(
    wiring: Wiring,
    job: _J,
    stage: Callable[[Wiring, _J], Any],
    *,
    resume: bool = False,
    scoped: bool = True,
) -> Any:
    """Run one stage on one job; a permanent error becomes the URL's recorded outcome.

    Retryable errors propagate: the driver (SQS redelivery, or the local runner's retry loop)
    decides when to give up and then calls :func:`settle` itself. So does
    :class:`~cdif_harvester.errors.Deferred`, which the driver puts back without counting an
    attempt.

    When the fetcher offers a job scope (the politeness fetcher does), the stage runs inside
    one: the requests of this job are journalled, and with ``resume`` (the job was deferred
    before) the answers it already got are replayed instead of being asked again; the job's
    source limits (``requests_per_host``, ``crawl_delay``) apply to its requests. Stages know
    nothing of it. ``scoped=False`` opens none, for a stage that never fetches (its job's key,
    a hash of the whole message, is then not worked out for nothing).
    """
    fetcher = wiring.fetcher
    scope: AbstractContextManager[None] = (
        fetcher.job_scope(
            run_id=job.run_id,
            # (the key hashes the whole message: worked out only by a scope that journals)
            job_key=partial(job_key, stage, job),
            resume=resume,
            # A registered source's own limits (sitemap and URL jobs carry them).
            requests_per_host=getattr(job, "requests_per_host", None),
            crawl_delay=getattr(job, "crawl_delay", None),
        )
        if scoped and isinstance(fetcher, _JobScoped)
        else nullcontext()
    )
    try:
        with scope:
            return stage(wiring, job)
    except Exception as exc:  # noqa: BLE001 - every exception gets its verdict
        error = verdict(exc)
        if error is None:
            raise
        if not isinstance(exc, HarvestError):
            # A bug, not the data: the URL is settled at once (retrying gives the same
            # answer), and the traceback is what an operator needs to fix it.
            logger.error("job %s of %s failed: %s", job.url, job.run_id, error, exc_info=exc)
        return give_up(wiring, job, error)


def verdict(exc: BaseException) -> PermanentError | None:
    """What an exception raised by a stage means for its job, the same on every deployment.

    Returns None when the job must be tried again or put back (a
    :class:`~cdif_harvester.errors.RetryableError`, :class:`~cdif_harvester.errors.Deferred`, a
    transport or storage fault no adapter mapped, ``MemoryError`` and anything that is not an
    ``Exception`` such as ``KeyboardInterrupt``): the caller re-raises it. Otherwise returns the
    permanent error the URL ends with at the first attempt: the error itself, or for any other
    exception (a ``RecursionError`` from a deeply nested document, a ``ValueError`` from a
    malformed URL: deterministic, so a retry gives the same answer)
    ``internal-error: <ExceptionType>: <message>``.
    """
    if isinstance(exc, PermanentError):
        return exc
    if not isinstance(exc, Exception) or isinstance(exc, (RetryableError, Deferred, MemoryError)):
        return None
    if isinstance(exc, HarvestError):  # the base itself: never raised, but keep it a failure
        return PermanentError(str(exc), reason=exc.reason)
    module = type(exc).__module__.split(".")[0]
    if (
        isinstance(exc, OSError)
        or module in _TRANSIENT_MODULES
        or (module, type(exc).__name__) in _TRANSIENT_NAMES
    ):
        return None
    message = str(exc)
    if len(message) > 500:  # the reason is stored and shown: the type and a start will do
        message = message[:500] + "..."
    return PermanentError(f"{type(exc).__name__}: {message}", reason="internal-error")


def give_up(wiring: Wiring, job: _J, error: HarvestError) -> UrlOutcome:
    """Record the outcome ``error`` ends ``job``'s URL in; a sitemap job is also counted done
    in its run, so the run can finish. Raises what the catalogue raises (StorageError)."""
    outcome = settle(wiring, run_id=job.run_id, source=job.source, url=job.url, error=error)
    if isinstance(job, SitemapJob):
        sitemap_done(wiring, job)
    return outcome


def retry_after_of(wiring: Wiring, response: FetchResponse) -> float | None:
    """Seconds a 429/503 answer asks to wait (``Retry-After``), capped by the settings."""
    value = response.header("retry-after")
    seconds = parse_retry_after(value, now=wiring.clock.now()) if value else None
    return None if seconds is None else min(seconds, wiring.settings.max_retry_after)


def retry_delay(
    failures: int,
    retry_after: float | None,
    settings: Settings,
    *,
    jitter: Jitter = random.uniform,
) -> float:
    """Seconds to wait before trying a job again after its ``failures``-th failed attempt.

    The wait the answer asked for (``Retry-After``, already capped by ``max_retry_after``)
    when there is one; else an exponential backoff, ``retry_base`` doubled with each failure
    and capped at ``retry_cap``, of which the upper half is drawn by ``jitter`` ("equal
    jitter": at least half the step is always waited, so a retry never follows at once, and
    jobs that failed together on one host do not come back together).
    """
    if retry_after is not None:
        return max(0.0, min(retry_after, settings.max_retry_after))
    step = min(settings.retry_cap, settings.retry_base * 2.0 ** max(0, failures - 1))
    return jitter(step / 2, step)
