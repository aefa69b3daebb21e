"""Ports: the protocols every stage is written against.

Stages take these as arguments and never import an adapter. Adapters live in
:mod:`cdif_harvester.adapters`: ``aws`` (S3, DynamoDB, SQS), ``local`` (a directory, SQLite, an
in-process queue) and ``http`` (the one safe fetcher).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from cdif_harvester.model import CatalogEntry, FetchResponse, UrlOutcome

__all__ = ["CatalogIndex", "Clock", "Fetcher", "JobQueue", "ObjectStore"]


class Fetcher(Protocol):
    """Fetches a URL safely (address policy, size and time caps, redirects handled)."""

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
    ) -> FetchResponse:
        """Fetch ``url``; any HTTP status is returned as a response.

        Raises AddressRefused, BodyTooLarge, RedirectError (permanent) or FetchTimeout,
        FetchFailed (retryable).
        """
        ...


class ObjectStore(Protocol):
    """A key/value store of bytes with the documented key layout (S3 or a directory)."""

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store ``body`` under ``key``, replacing what was there. Raises StorageError."""
        ...

    def get(self, key: str) -> bytes:
        """Return the bytes under ``key``. Raises KeyError when absent, StorageError on faults."""
        ...

    def exists(self, key: str) -> bool:
        """Tell whether ``key`` holds an object."""
        ...

    def list(self, prefix: str) -> Iterator[str]:
        """Yield every key that starts with ``prefix``, in key order."""
        ...


class CatalogIndex(Protocol):
    """The catalogue: one entry per record and one outcome per URL and run."""

    def put_record(self, entry: CatalogEntry) -> None:
        """Insert or replace the entry of ``entry.record_id``."""
        ...

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        ...

    def put_outcome(self, outcome: UrlOutcome) -> None:
        """Record the outcome of one URL in one run (replacing an earlier one for that pair)."""
        ...

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield every recorded outcome of ``run_id``."""
        ...


class JobQueue(Protocol):
    """Sends messages to the queue of a stage, named logically: sitemap, url, document, index."""

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        """Send every body in ``bodies`` to ``queue`` (batched by the adapter).

        ``delays``, one per body, asks that a message not be delivered before that many seconds
        (at most 900, the SQS limit): how Crawl-delay spreads one host's URLs over time on AWS.
        """
        ...


class Clock(Protocol):
    """Source of the current time (UTC), injectable for tests."""

    def now(self) -> datetime:
        """Return the current UTC time, timezone-aware."""
        ...
