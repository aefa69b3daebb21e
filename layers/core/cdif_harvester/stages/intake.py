"""Stage 1: starting harvest runs.

The scheduler, the intake API and the local runner record a run and put its sitemap jobs on the
sitemap queue (registered sources: :mod:`cdif_harvester.stages.sources`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from cdif_harvester.contracts import (
    RENDER_MODES,
    RESOLUTION_OPTIONS,
    SITEMAP_QUEUE,
    SitemapJob,
    encode,
)
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import source_of
from cdif_harvester.model import RunStatus
from cdif_harvester.ports import Clock
from cdif_harvester.stages.runs import begin_run
from cdif_harvester.wiring import Wiring

__all__ = [
    "InvalidEntryUrl",
    "InvalidOptions",
    "check_options",
    "new_run_id",
    "start_harvest",
    "start_run",
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
    render = checked.get("render")
    if render is not None and render not in RENDER_MODES:
        raise InvalidOptions(f"render must be one of {list(RENDER_MODES)}, got {render!r}")
    keep = checked.get("keep_bodies")
    if keep is not None and keep not in ("true", "false"):
        raise InvalidOptions(f"keep_bodies must be 'true' or 'false', got {keep!r}")
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


def start_run(
    wiring: Wiring,
    entry_urls: Sequence[str],
    *,
    run_id: str | None = None,
    options: Mapping[str, str] | None = None,
    trigger: str = "manual",
    source_id: str | None = None,
    requests_per_host: int | None = None,
    crawl_delay: float | None = None,
) -> tuple[RunStatus, list[SitemapJob]]:
    """Start one harvest run of robots.txt, sitemap or page URLs: record the run, then queue
    one sitemap job per entry URL (all under one run id).

    ``options`` are the resolution options (``format_parameter``), carried to every URL job, as
    are a registered source's politeness limits ``requests_per_host`` and ``crawl_delay``.
    Raises InvalidEntryUrl for a URL that can never be harvested and InvalidOptions for
    unusable options, before anything is recorded or queued.
    """
    urls = [check_entry_url(url) for url in entry_urls]
    if not urls:
        raise InvalidEntryUrl("no entry URL given")
    checked = check_options(options)
    run_id = run_id or new_run_id(wiring.clock)
    jobs = [
        SitemapJob(
            run_id=run_id,
            source=source_of(url),
            url=url,
            options=checked,
            requests_per_host=requests_per_host,
            crawl_delay=crawl_delay,
        )
        for url in urls
    ]
    run = begin_run(wiring, run_id, urls, trigger=trigger, source_id=source_id)
    wiring.queue.send(SITEMAP_QUEUE, [encode(job) for job in jobs])
    return run, jobs


def start_harvest(
    wiring: Wiring,
    entry_url: str,
    *,
    run_id: str | None = None,
    options: Mapping[str, str] | None = None,
    trigger: str = "manual",
) -> SitemapJob:
    """Start a harvest run of one robots.txt, sitemap or single page URL (see
    :func:`start_run`); return its sitemap job."""
    _run, jobs = start_run(wiring, [entry_url], run_id=run_id, options=options, trigger=trigger)
    return jobs[0]
