"""Running one job of a stage: its stable key, its politeness scope, and a permanent error
turned into the URL's recorded outcome."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol, TypeVar, runtime_checkable

from cdif_harvester.domain.resolution.rules import parse_retry_after
from cdif_harvester.errors import PermanentError
from cdif_harvester.model import (
    FetchResponse,
    plain,
)
from cdif_harvester.stages.outcomes import settle
from cdif_harvester.wiring import Wiring

__all__ = ["job_key", "run_job", "retry_after_of"]


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
        job_key: str,
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
    wiring: Wiring, job: _J, stage: Callable[[Wiring, _J], Any], *, resume: bool = False
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
    nothing of it.
    """
    fetcher = wiring.fetcher
    scope: AbstractContextManager[None] = (
        fetcher.job_scope(
            run_id=job.run_id,
            job_key=job_key(stage, job),
            resume=resume,
            # A registered source's own limits (sitemap and URL jobs carry them).
            requests_per_host=getattr(job, "requests_per_host", None),
            crawl_delay=getattr(job, "crawl_delay", None),
        )
        if isinstance(fetcher, _JobScoped)
        else nullcontext()
    )
    try:
        with scope:
            return stage(wiring, job)
    except PermanentError as error:
        return settle(wiring, run_id=job.run_id, source=job.source, url=job.url, error=error)


def retry_after_of(wiring: Wiring, response: FetchResponse) -> float | None:
    """Seconds a 429/503 answer asks to wait (``Retry-After``), capped by the settings."""
    value = response.header("retry-after")
    seconds = parse_retry_after(value, now=wiring.clock.now()) if value else None
    return None if seconds is None else min(seconds, wiring.settings.max_retry_after)
