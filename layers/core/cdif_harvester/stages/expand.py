"""Stage 2: the sitemap expander turns robots.txt, sitemaps and sitemap indexes into URL jobs.

Main path: robots.txt -> its ``Sitemap:`` lines -> sitemap index -> sitemaps -> one URL job per
``<loc>``. A URL disallowed by the host's robots.txt ends here with the outcome ``disallowed``
and is never fetched. An entry URL that turns out to be an HTML page is harvested as a single page.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from cdif_harvester.contracts import SITEMAP_QUEUE, URL_QUEUE, SitemapJob, UrlJob, encode
from cdif_harvester.domain.robots import RobotsPolicy, allow_all, parse_robots
from cdif_harvester.domain.sitemap import parse_sitemap
from cdif_harvester.errors import FetchFailed, PermanentError
from cdif_harvester.model import HTML_MEDIA_TYPES, FetchResponse, Outcome
from cdif_harvester.stages import Ports, record_outcome

__all__ = ["ExpansionResult", "expand_sitemap"]


class SitemapFetchError(PermanentError):
    """The sitemap or robots.txt could not be had (4xx, not a sitemap, too deep)."""

    reason = "sitemap"


@dataclass(frozen=True)
class ExpansionResult:
    """What one sitemap job produced."""

    url_jobs: int = 0
    sitemap_jobs: int = 0
    disallowed: int = 0
    partial_error: str | None = None


def expand_sitemap(ports: Ports, job: SitemapJob) -> ExpansionResult:
    """Expand one robots.txt, sitemap, sitemap index, or single page into queued jobs.

    Raises SitemapFetchError (permanent) when the document is unusable, FetchFailed (retryable)
    on a 5xx answer, and whatever the fetcher raises.
    """
    if urlsplit(job.url).path == "/robots.txt":
        return _expand_robots(ports, job)
    response = _fetch(ports, job.url, max_bytes=ports.settings.max_sitemap_bytes)
    if job.depth == 0 and response.media_type in HTML_MEDIA_TYPES:
        # The entry URL is a landing page, not a sitemap: harvest that one page.
        return _emit_urls(ports, job, [(job.url, None)])
    parsed = parse_sitemap(
        response.body,
        sitemap_url=response.url,
        max_urls=ports.settings.max_sitemap_urls,
        max_bytes=ports.settings.max_sitemap_bytes,
    )
    if parsed.kind == "sitemapindex":
        return _emit_children(ports, job, [entry.loc for entry in parsed.entries])
    result = _emit_urls(ports, job, [(entry.loc, entry.lastmod) for entry in parsed.entries])
    return ExpansionResult(
        url_jobs=result.url_jobs,
        disallowed=result.disallowed,
        partial_error=parsed.error or parsed.limit_hit,
    )


def _fetch(ports: Ports, url: str, *, max_bytes: int) -> FetchResponse:
    response = ports.fetcher.fetch(url, max_bytes=max_bytes)
    if response.status >= 500:
        raise FetchFailed(f"{url} answered {response.status}", reason=f"http-{response.status}")
    if response.status != 200:
        raise SitemapFetchError(
            f"{url} answered {response.status}", reason=f"http-{response.status}"
        )
    return response


def _expand_robots(ports: Ports, job: SitemapJob) -> ExpansionResult:
    policy = _robots_for(ports, job.url)
    if not policy.sitemaps:
        raise SitemapFetchError(
            f"{job.url} announces no Sitemap: lines", reason="no-sitemaps-in-robots"
        )
    children = []
    for url in policy.sitemaps:
        children.append(
            SitemapJob(
                run_id=job.run_id,
                source=job.source,
                url=url,
                depth=job.depth + 1,
                cdif_agent=url in policy.cdif_sitemaps,
                parent=job.url,
            )
        )
    ports.queue.send(SITEMAP_QUEUE, [encode(child) for child in children])
    return ExpansionResult(sitemap_jobs=len(children))


def _emit_children(ports: Ports, job: SitemapJob, urls: list[str]) -> ExpansionResult:
    if job.depth + 1 > ports.settings.max_sitemap_depth:
        raise SitemapFetchError(
            f"sitemap index nesting deeper than {ports.settings.max_sitemap_depth}",
            reason="sitemap-depth-exceeded",
        )
    seen = {job.url, job.parent}
    children = [
        SitemapJob(
            run_id=job.run_id,
            source=job.source,
            url=url,
            depth=job.depth + 1,
            cdif_agent=job.cdif_agent,
            parent=job.url,
        )
        for url in dict.fromkeys(urls)
        if url not in seen  # an index that lists itself or its parent would never end
    ]
    ports.queue.send(SITEMAP_QUEUE, [encode(child) for child in children])
    return ExpansionResult(sitemap_jobs=len(children))


def _emit_urls(
    ports: Ports, job: SitemapJob, locations: list[tuple[str, str | None]]
) -> ExpansionResult:
    bodies = []
    disallowed = 0
    agent = ports.settings.robots_user_agent
    for url, lastmod in dict.fromkeys(locations):
        if not _robots_for(ports, url).allows(url, agent):
            disallowed += 1
            record_outcome(
                ports,
                run_id=job.run_id,
                source=job.source,
                url=url,
                outcome=Outcome.DISALLOWED,
                reason=f"robots-txt: disallowed for {agent}",
            )
            continue
        bodies.append(
            encode(
                UrlJob(
                    run_id=job.run_id,
                    source=job.source,
                    url=url,
                    sitemap=job.url,
                    lastmod=lastmod,
                    cdif_agent=job.cdif_agent,
                )
            )
        )
    ports.queue.send(URL_QUEUE, bodies)
    return ExpansionResult(url_jobs=len(bodies), disallowed=disallowed)


def _robots_for(ports: Ports, url: str) -> RobotsPolicy:
    parts = urlsplit(url)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    cached = ports.robots.get(origin)
    if cached is not None:
        return cached
    robots_url = f"{origin}/robots.txt"
    response = ports.fetcher.fetch(robots_url, max_bytes=512 * 1024)
    if response.status >= 500:
        # RFC 9309 2.3.1.4: an unreachable robots.txt means "do not crawl now"; try later.
        raise FetchFailed(f"{robots_url} answered {response.status}", reason="robots-unavailable")
    if response.status == 200:
        policy = parse_robots(response.body, robots_url=robots_url)
    else:
        # RFC 9309 2.3.1.3: robots.txt unavailable (4xx) means everything is allowed.
        policy = allow_all(robots_url)
    ports.robots[origin] = policy
    return policy
