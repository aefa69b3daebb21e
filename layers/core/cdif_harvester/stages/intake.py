"""Stage 1: the scheduler and the intake API put sitemap jobs on the sitemap queue."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from cdif_harvester.contracts import RESOLUTION_OPTIONS, SITEMAP_QUEUE, SitemapJob, encode
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import source_of
from cdif_harvester.ports import Clock
from cdif_harvester.stages import Ports

__all__ = [
    "InvalidEntryUrl",
    "InvalidOptions",
    "check_options",
    "new_run_id",
    "schedule_harvests",
    "start_harvest",
]


class InvalidEntryUrl(PermanentError):
    """An entry URL that cannot start a harvest (not absolute http(s), too long, ...)."""

    reason = "invalid-entry-url"


class InvalidOptions(PermanentError):
    """Resolution options that the harvester does not know or cannot use."""

    reason = "invalid-options"


_MAX_URL_LENGTH = 2048
# A query parameter ``name=value``: both parts plain, so appending it can never change the
# meaning of the rest of the URL.
_FORMAT_PARAMETER = re.compile(r"^[A-Za-z0-9_.~-]{1,64}=[A-Za-z0-9_.~:+-]{1,128}$")


def check_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """Return a source's resolution options checked, or raise InvalidOptions saying why."""
    checked = dict(options or {})
    unknown = sorted(set(checked) - RESOLUTION_OPTIONS)
    if unknown:
        raise InvalidOptions(
            f"unknown resolution option(s) {unknown}; known: {sorted(RESOLUTION_OPTIONS)}"
        )
    value = checked.get("format_parameter")
    if value is not None and not _FORMAT_PARAMETER.match(value):
        raise InvalidOptions(f"format_parameter must look like name=value, got {value!r}")
    return checked


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


def start_harvest(
    ports: Ports,
    entry_url: str,
    *,
    run_id: str | None = None,
    options: Mapping[str, str] | None = None,
) -> SitemapJob:
    """Start a harvest of a robots.txt, sitemap or single page URL: queue its sitemap job.

    ``options`` are the source's resolution options (``format_parameter``), carried to every
    URL job of the run. Raises InvalidEntryUrl for a URL that can never be harvested and
    InvalidOptions for unusable options.
    """
    url = check_entry_url(entry_url)
    job = SitemapJob(
        run_id=run_id or new_run_id(ports.clock),
        source=source_of(url),
        url=url,
        options=check_options(options),
    )
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
