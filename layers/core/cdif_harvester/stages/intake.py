"""Stage 1: the scheduler and the intake API put sitemap jobs on the sitemap queue."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from urllib.parse import urlsplit

from cdif_harvester.contracts import SITEMAP_QUEUE, SitemapJob, encode
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import source_of
from cdif_harvester.ports import Clock
from cdif_harvester.stages import Ports

__all__ = ["InvalidEntryUrl", "new_run_id", "schedule_harvests", "start_harvest"]


class InvalidEntryUrl(PermanentError):
    """An entry URL that cannot start a harvest (not absolute http(s), too long, ...)."""

    reason = "invalid-entry-url"


_MAX_URL_LENGTH = 2048


def new_run_id(clock: Clock) -> str:
    """Return a new harvest run id: sortable by start time, unique by a random suffix."""
    return f"{clock.now().strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}"


def check_entry_url(url: str) -> str:
    """Return ``url`` stripped, or raise InvalidEntryUrl with the reason it cannot be used.

    The address policy itself is applied by the fetcher when the URL is fetched (after DNS
    resolution); this only refuses what can never be fetched.
    """
    text = url.strip()
    parts = urlsplit(text)
    if len(text) > _MAX_URL_LENGTH:
        raise InvalidEntryUrl(f"URL longer than {_MAX_URL_LENGTH} characters")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidEntryUrl(f"not an absolute http(s) URL: {text!r}")
    return text


def start_harvest(ports: Ports, entry_url: str, *, run_id: str | None = None) -> SitemapJob:
    """Start a harvest of a robots.txt, sitemap or single page URL: queue its sitemap job.

    Raises InvalidEntryUrl for a URL that can never be harvested.
    """
    url = check_entry_url(entry_url)
    job = SitemapJob(run_id=run_id or new_run_id(ports.clock), source=source_of(url), url=url)
    ports.queue.send(SITEMAP_QUEUE, [encode(job)])
    return job


def schedule_harvests(ports: Ports, entry_urls: Iterable[str]) -> list[SitemapJob]:
    """Start one run per configured entry URL (the EventBridge schedule's work).

    An unusable URL in the configuration is skipped (and reported by the caller's log), so one
    bad entry never stops the others.
    """
    jobs = []
    for url in entry_urls:
        if not url.strip():
            continue
        try:
            jobs.append(start_harvest(ports, url))
        except InvalidEntryUrl:
            continue
    return jobs
