"""Stage 2: the sitemap expander turns robots.txt, sitemaps and sitemap indexes into URL jobs.

Specs: CDIF discoverability, the sitemaps.org protocol, RFC 9309 (robots.txt) and Signposting
Signmaps. Sitemaps are read as streams and handed on in parts; a location disallowed by
robots.txt, or on another host that does not announce the sitemap, ends ``disallowed``; one whose
``<lastmod>`` is not newer ends ``unchanged``; Crawl-delay spreads a host's URL jobs over time.
A location that cannot be fetched, or whose host's robots.txt cannot be read, ends with its own
outcome; the rest of its sitemap goes on. Index children on another host follow the same
cross-submission rule as locations. An entry URL that is not a sitemap is a URL job; a site
root is first asked for the site's sitemaps (robots.txt's, then a few well-known paths).

See docs/decisions/0016-sitemap-expansion.md,
docs/decisions/0046-isolated-locations-and-url-identity.md,
docs/decisions/0067-what-an-entry-url-is.md,
docs/decisions/0070-site-roots-backoff-and-contact.md and
docs/decisions/0084-expander-speed.md.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from cdif_harvester.contracts import SITEMAP_QUEUE, URL_QUEUE, SitemapJob, UrlJobEncoder, encode
from cdif_harvester.domain.discovery.entry import (
    ROBOTS,
    SITEMAP_STATUSES,
    WELL_KNOWN,
    WELL_KNOWN_SITEMAP_PATHS,
    SiteDiscovery,
    entry_sitemap,
    is_site_root,
)
from cdif_harvester.domain.discovery.incremental import lastmod_not_newer, lastmod_reason
from cdif_harvester.domain.discovery.lastmod import normalise_lastmod
from cdif_harvester.domain.discovery.robots import (
    MAX_ROBOTS_BYTES,
    RobotsPolicy,
    allow_all,
    parse_robots,
)
from cdif_harvester.domain.discovery.sitemap import (
    CompactEntry,
    LinkRow,
    SitemapEntry,
    SitemapError,
    SitemapStream,
    iter_sitemap,
)
from cdif_harvester.domain.discovery.urls import canonical_origin, canonical_url
from cdif_harvester.errors import (
    AddressRefused,
    FetchFailed,
    HarvestError,
    PermanentError,
    RetryableError,
)
from cdif_harvester.keys import origin_of, site_discovery_key, sitemap_part_key
from cdif_harvester.model import (
    FetchResponse,
    Outcome,
    TypedLink,
    UrlOutcome,
)
from cdif_harvester.stages.jobs import retry_after_of
from cdif_harvester.stages.outcomes import (
    held_states,
    outcome_now,
    record_outcome,
    record_outcomes,
    settle,
)
from cdif_harvester.stages.runs import enter_urls, expect_sitemaps, sitemap_done
from cdif_harvester.wiring import Wiring

__all__ = ["ExpansionResult", "SitemapFetchError", "expand_sitemap"]

logger = logging.getLogger(__name__)

# At most this many robots.txt files of other hosts are fetched per job (each fetch may take
# the whole fetch deadline: a part listing thousands of dead hosts must still end well inside
# the expander's timeout). Locations on further hosts end ``failed robots-unavailable``.
MAX_OTHER_ROBOTS_PER_JOB = 6

# The statuses of an entry URL handed to the resolver rather than failed here: those it reads
# (RFC 9110: 203 as 200, 204 by its headers, 410 as a tombstone). Any other 4xx ends the entry
# here, as the resolver would end it (``http-<status>``), without asking for it twice.
RESOLVED_STATUSES = frozenset({203, 204, 410})


class SitemapFetchError(PermanentError):
    """The sitemap or robots.txt could not be had (4xx, not a sitemap, too deep)."""

    reason = "sitemap"


@dataclass(frozen=True)
class ExpansionResult:
    """What one sitemap job produced."""

    url_jobs: int = 0
    sitemap_jobs: int = 0
    disallowed: int = 0
    unchanged: int = 0  # URLs skipped by their sitemap lastmod (no job made)
    follow_up: bool = False


def expand_sitemap(wiring: Wiring, job: SitemapJob) -> ExpansionResult | UrlOutcome:
    """Expand one robots.txt, sitemap, sitemap index, or single page into queued jobs.

    A document that is unusable (a permanent error: 4xx, not a sitemap, too deep...) ends in
    the sitemap URL's recorded outcome, which is returned. Either way the job counts as done
    in its run (:mod:`cdif_harvester.stages.runs`). Raises FetchFailed (retryable) on a 5xx
    answer, and whatever retryable error the fetcher raises: the job is then tried again.
    """
    try:
        result: ExpansionResult | UrlOutcome = _expand(wiring, job)
    except PermanentError as error:
        result = settle(wiring, run_id=job.run_id, source=job.source, url=job.url, error=error)
    sitemap_done(wiring, job)
    return result


def _expand(wiring: Wiring, job: SitemapJob) -> ExpansionResult:
    if job.body_key is not None:
        return _expand_part(wiring, job, job.body_key)
    if urlsplit(job.url).path == "/robots.txt":
        return _expand_robots(wiring, job)
    entry = job.depth == 0
    if entry and is_site_root(job.url):
        site = _expand_site_root(wiring, job)
        if site is not None:
            return site
        # No sitemap anywhere: the site root is an entry URL like any other (the page itself).
    response = _fetch(wiring, job.url, max_bytes=wiring.settings.max_sitemap_bytes, entry=entry)
    settings = wiring.settings
    if entry:
        found = entry_sitemap(
            response.status,
            response.media_type,
            response.body,
            url=response.url,
            max_urls=settings.max_sitemap_urls,
            max_bytes=settings.max_sitemap_bytes,
            compact=True,  # (most entries go to stored parts as they are: see _emit_in_parts)
        )
        if found is None:
            # Not a sitemap: the entry is a URL to resolve, exactly as if a sitemap listed it
            # (same checks, same URL job, same outcomes). The resolver asks for it again.
            return _emit_urls(wiring, job, [SitemapEntry(loc=job.url, lastmod=None)])
        stream = found
    else:
        stream = iter_sitemap(
            response.body,
            sitemap_url=response.url,
            max_urls=settings.max_sitemap_urls,
            max_bytes=settings.max_sitemap_bytes,
            compact=True,
        )
    for note in stream.notes:  # read leniently (a broken XML declaration): said, not failed
        logger.warning("sitemap %s of run %s: %s", job.url, job.run_id, note)
    if stream.kind == "sitemapindex":
        result = _emit_children(wiring, job, [entry.loc for entry in stream])
    else:
        result = _emit_in_parts(wiring, job, stream)
    _record_partial(wiring, job, stream)
    return result


def _fetch(wiring: Wiring, url: str, *, max_bytes: int, entry: bool = False) -> FetchResponse:
    """The answer of a sitemap (or of the entry URL, when ``entry``), or the error it ends in.

    An entry URL may also answer what the resolver reads (203, 204, 410): it is then a URL to
    resolve, not a failed sitemap. Raises FetchFailed (retryable) on 429 and 5xx, and
    SitemapFetchError on any other status.
    """
    response = wiring.fetcher.fetch(url, max_bytes=max_bytes)
    if response.status >= 500 or response.status == 429:
        raise FetchFailed(
            f"{url} answered {response.status}",
            reason=f"http-{response.status}",
            retry_after=retry_after_of(wiring, response),
        )
    if response.status != 200 and not (entry and response.status in RESOLVED_STATUSES):
        raise SitemapFetchError(
            f"{url} answered {response.status}", reason=f"http-{response.status}"
        )
    return response


def _expand_robots(wiring: Wiring, job: SitemapJob) -> ExpansionResult:
    policy = _robots_for(wiring, job.url, entry=True)
    if not policy.sitemaps:
        raise SitemapFetchError(
            f"{job.url} announces no Sitemap: lines", reason="no-sitemaps-in-robots"
        )
    children = [_child(job, url, cdif_agent=url in policy.cdif_sitemaps) for url in policy.sitemaps]
    _send_sitemaps(wiring, job, children, what="children")
    return ExpansionResult(sitemap_jobs=len(children))


def _expand_site_root(wiring: Wiring, job: SitemapJob) -> ExpansionResult | None:
    """The sitemaps of the site whose root ``job`` names, as child jobs, or None when it has
    none (the page itself is then resolved).

    robots.txt's Sitemap lines first; when it announces none, each of
    :data:`WELL_KNOWN_SITEMAP_PATHS` that robots.txt allows, until one answers a sitemap. A
    probe that answers anything else (404, an HTML "not found" page, a refused or failed
    fetch) is noted, never failed. Raises the retryable errors of the site's robots.txt (RFC
    9309 section 2.3.1.4: not now) and Deferred. What was found is kept for the run's summary.
    """
    policy = _robots_for(wiring, job.url)
    if policy.sitemaps:
        discovery = SiteDiscovery(site=job.url, found_by=ROBOTS, sitemaps=tuple(policy.sitemaps))
        children = [
            _child(job, url, cdif_agent=url in policy.cdif_sitemaps) for url in policy.sitemaps
        ]
    else:
        home = _origin(job.url)
        probed: list[tuple[str, str]] = []
        found: str | None = None
        for path in WELL_KNOWN_SITEMAP_PATHS:
            url = home + path
            answer = _probe(wiring, url, policy)
            if answer is None:
                found = url
                break
            probed.append((url, answer))
        discovery = SiteDiscovery(
            site=job.url,
            found_by=WELL_KNOWN if found else None,
            sitemaps=(found,) if found else (),
            probed=tuple(probed),
        )
        children = [_child(job, found, cdif_agent=False)] if found else []
    logger.info("run %s: %s", job.run_id, discovery.describe())
    wiring.store.put(
        site_discovery_key(job.run_id, job.url),
        json.dumps(discovery.to_dict()).encode("utf-8"),
        content_type="application/json",
    )
    if not children:
        return None
    _send_sitemaps(wiring, job, children, what="children")
    return ExpansionResult(sitemap_jobs=len(children))


def _probe(wiring: Wiring, url: str, policy: RobotsPolicy) -> str | None:
    """None when the well-known ``url`` answers a sitemap (one the reader takes, or a sitemap
    it cannot read, which its own job then reports), else what it answered instead."""
    settings = wiring.settings
    if not policy.allows(url, settings.robots_user_agent):
        return f"robots-txt: disallowed for {settings.robots_user_agent}"
    try:
        response = wiring.fetcher.fetch(url, max_bytes=settings.max_sitemap_bytes)
    except (PermanentError, RetryableError) as error:  # a probe, not a failure of the run
        return error.reason
    if response.status not in SITEMAP_STATUSES:
        return f"http-{response.status}"
    try:
        stream = entry_sitemap(
            response.status,
            response.media_type,
            response.body,
            url=response.url,
            max_urls=settings.max_sitemap_urls,
            max_bytes=settings.max_sitemap_bytes,
        )
    except SitemapError:
        return None
    return None if stream is not None else f"not a sitemap ({response.media_type or 'no type'})"


def _child(job: SitemapJob, url: str, *, cdif_agent: bool) -> SitemapJob:
    """The job of a sitemap that ``job`` announces, one level deeper, remembering the way."""
    return SitemapJob(
        run_id=job.run_id,
        source=job.source,
        url=url,
        depth=job.depth + 1,
        cdif_agent=cdif_agent,
        parent=job.url,
        ancestors=(*job.ancestors, job.url),
        options=job.options,
        requests_per_host=job.requests_per_host,
        crawl_delay=job.crawl_delay,
    )


def _emit_children(wiring: Wiring, job: SitemapJob, urls: list[str]) -> ExpansionResult:
    """Send a job for each child sitemap of an index, each once and never back to an ancestor.

    A child that cannot be fetched (an invalid URL) or sits on another host whose robots.txt
    does not announce it (sitemaps.org, "Sitemaps & Cross Submits", as for locations) is not
    followed: it ends with its own outcome, and its siblings are followed.
    """
    if job.depth + 1 > wiring.settings.max_sitemap_depth:
        raise SitemapFetchError(
            f"sitemap index nesting deeper than {wiring.settings.max_sitemap_depth} levels",
            reason="sitemap-depth-exceeded",
        )
    lineage = _canonical_set((*job.ancestors, job.url))
    robots = _RobotsLookup(wiring, job)
    problems: list[UrlOutcome] = []
    children: list[SitemapJob] = []
    seen: set[str] = set()
    disallowed = 0
    for listed in dict.fromkeys(urls):
        try:
            url = canonical_url(listed)
        except PermanentError as error:
            problems.append(_error_outcome(wiring, job, listed, error))
            continue
        if url in lineage or url in seen:
            continue  # an index listing one of its ancestors would never end
        seen.add(url)
        origin = canonical_origin(url)
        if origin != robots.home:
            policy = robots.policy(origin)
            if not isinstance(policy, RobotsPolicy):
                problems.append(_robots_failure(wiring, job, url, origin, policy))
                continue
            if not (lineage | {url}) & _canonical_set(policy.sitemaps):
                disallowed += 1
                problems.append(
                    _outcome(
                        wiring,
                        job,
                        url,
                        Outcome.DISALLOWED,
                        f"cross-host-sitemap: the sitemap index on {robots.home} may not list "
                        f"sitemaps of {origin} (that host's robots.txt does not announce them)",
                    )
                )
                continue
        children.append(_child(job, url, cdif_agent=job.cdif_agent))
    record_outcomes(wiring, problems)
    _send_sitemaps(wiring, job, children, what="children")
    return ExpansionResult(sitemap_jobs=len(children), disallowed=disallowed)


def _send_sitemaps(wiring: Wiring, job: SitemapJob, jobs: list[SitemapJob], *, what: str) -> None:
    """Send sitemap jobs, counted in the run first (so the run cannot look finished while
    they are on their way)."""
    expect_sitemaps(wiring, job, len(jobs), what=what)
    if jobs:
        wiring.queue.send(SITEMAP_QUEUE, [encode(item) for item in jobs])


def _emit_in_parts(
    wiring: Wiring, job: SitemapJob, stream: SitemapStream[CompactEntry]
) -> ExpansionResult:
    """Hand on the first part of the sitemap now; write the others out for follow-up jobs.

    Parts are written as the stream is read, each once the next entry proves it is not the
    last, so at most three parts are held at a time, whatever the size of the sitemap. The
    first part's URL jobs go out only once the whole document has been read: a sitemap that
    turns out too large is refused whole. Entries are read compact, and taken a part at a time
    (without a step of Python per entry): a stored part is written as read.
    """
    size = wiring.settings.max_urls_per_job
    entries = iter(stream)
    # (A size below 1 never fills a part: the rest of the sitemap goes into one.)
    first = list(itertools.islice(entries, max(size, 0)))
    rest_of_part = size - 1 if size > 0 else None
    done: list[CompactEntry] | None = None  # a full part, written once another entry comes
    written = 0
    while (head := next(entries, None)) is not None:
        if done is not None:
            written += 1
            _write_part(wiring, job, written, done, last=False)
        done = [head, *itertools.islice(entries, rest_of_part)]
    if done is not None:
        written += 1
        _write_part(wiring, job, written, done, last=True)
    result = _emit_urls(wiring, job, first)
    if not written:
        return result
    follow_up = replace(job, offset=len(first), body_key=sitemap_part_key(job.run_id, job.url, 1))
    _send_sitemaps(wiring, job, [follow_up], what="follow-up")
    return replace(result, sitemap_jobs=1, follow_up=True)


def _write_part(
    wiring: Wiring, job: SitemapJob, index: int, entries: list[CompactEntry], *, last: bool
) -> None:
    """Store a part: each entry's links as the reader gives them, ``[href, rel, type, profile]``
    (see :func:`_link_of_part`), encoded as they are. A large Signmap's parts hold hundreds of
    thousands of links: made TypedLink values, then lists or named fields, they took about as
    long as the rest of the expander but the parse (docs/decisions/0084-expander-speed.md)."""
    part = {
        "sitemap": job.url,
        "entries": [{"loc": e.loc, "lastmod": e.lastmod, "links": e.links} for e in entries],
        "next": None if last else sitemap_part_key(job.run_id, job.url, index + 1),
    }
    wiring.store.put(
        sitemap_part_key(job.run_id, job.url, index),
        # (No containers but the part's own: the check for circular ones is a fifth of the time.)
        json.dumps(part, separators=(",", ":"), check_circular=False).encode("utf-8"),
        content_type="application/json",
    )


def _link_of_part(kept: list[str | None] | dict[str, Any], loc: str) -> TypedLink:
    """The link a stored part keeps: ``[href, rel, type, profile]``, a Signmap link of the
    entry of ``loc`` (see :func:`_write_part`), or, in parts written before that short form,
    the link whole, by field name."""
    if isinstance(kept, dict):
        return TypedLink(**kept)
    href, rel, media_type, profile = _row_of_part(kept)
    return TypedLink(href, rel, type=media_type, profile=profile, anchor=loc, found_in="signmap")


def _row_of_part(kept: list[str | None]) -> LinkRow:
    """A link a stored part keeps short, as the row it was written from."""
    href, rel, media_type, profile = kept
    if href is None or rel is None:
        raise ValueError(f"a stored link without href or rel: {kept!r}")
    return (href, rel, media_type, profile)


def _entry_of_part(item: dict[str, Any]) -> SitemapEntry | CompactEntry:
    """An entry a stored part keeps: compact when its links are all short (as written since
    the short form: its URL job is encoded from the rows), else with its links whole."""
    loc, links = item["loc"], item["links"]
    if all(isinstance(link, list) for link in links):
        return CompactEntry(loc, item["lastmod"], tuple(_row_of_part(link) for link in links))
    return SitemapEntry(loc, item["lastmod"], tuple(_link_of_part(link, loc) for link in links))


def _expand_part(wiring: Wiring, job: SitemapJob, key: str) -> ExpansionResult:
    """A follow-up job: hand on one stored part, then start the job of the next part."""
    try:
        part = json.loads(wiring.store.get(key))
    except KeyError as exc:
        raise SitemapFetchError(
            f"sitemap part {key} is gone", reason="sitemap-part-missing"
        ) from exc
    entries = [_entry_of_part(item) for item in part["entries"]]
    result = _emit_urls(wiring, job, entries)
    if part["next"] is None:
        return result
    follow_up = replace(job, offset=job.offset + len(entries), body_key=part["next"])
    # Sent after this part's URL jobs: a redelivered job repeats only its own part.
    _send_sitemaps(wiring, job, [follow_up], what="follow-up")
    return replace(result, sitemap_jobs=1, follow_up=True)


def _emit_urls(
    wiring: Wiring, job: SitemapJob, entries: Sequence[SitemapEntry | CompactEntry]
) -> ExpansionResult:
    """Hand on one URL job per allowed, new location of ``entries`` (their links anchored at
    the location as listed).

    Locations are taken in canonical form (:mod:`cdif_harvester.domain.discovery.urls`), so
    variants of one URL are handed on once. A location refused by robots.txt (or the
    cross-host rule) ends ``disallowed``; one that cannot be fetched (``invalid-url``,
    ``scheme-not-allowed``) or whose host's robots.txt cannot be read ends ``failed`` or
    ``blocked`` with its reason, and the others go on; one whose ``lastmod`` is not newer than
    what its held records came from ends ``unchanged`` here, in one batch of catalogue reads
    and one of writes, so no URL job is ever made for it.
    """
    disallowed = 0
    seen: set[str] = set()
    refused: list[UrlOutcome] = []
    allowed: list[_Allowed] = []
    robots = _RobotsLookup(wiring, job)
    for entry in entries:
        if entry.loc in seen:
            continue
        seen.add(entry.loc)
        try:
            url = canonical_url(entry.loc)
        except PermanentError as error:
            refused.append(_error_outcome(wiring, job, entry.loc, error))
            continue
        if url != entry.loc:
            if url in seen:
                continue
            seen.add(url)
        origin = canonical_origin(url)
        policy = robots.policy(origin)
        if not isinstance(policy, RobotsPolicy):
            refused.append(_robots_failure(wiring, job, url, origin, policy))
            continue
        refusal = _refusal(wiring, job, url, policy, home=robots.home, origin=origin)
        if refusal is not None:
            disallowed += 1
            refused.append(_outcome(wiring, job, url, Outcome.DISALLOWED, refusal))
            continue
        allowed.append(_Allowed(url, entry, policy, origin))
    record_outcomes(wiring, refused)
    # Normalised once: compared with the held lastmod, then carried on the URL job.
    lastmods = {item.url: normalise_lastmod(item.entry.lastmod) for item in allowed}
    unchanged = _unchanged_by_lastmod(wiring, job, lastmods)
    # A URL another sitemap of the run already handed on is not sent again; one unchanged by
    # its lastmod enters the run with its outcome (one catalogue write, not two).
    to_send = enter_urls(
        wiring,
        job,
        [item.url for item in allowed if item.url not in unchanged],
        settled=list(unchanged.values()),
    )
    jobs = [item for item in allowed if item.url in to_send]
    _send_urls(wiring, job, jobs, lastmods)
    return ExpansionResult(url_jobs=len(jobs), disallowed=disallowed, unchanged=len(unchanged))


class _Allowed(NamedTuple):
    """A location that may be handed on: canonical, as listed, its host's policy and origin."""

    url: str
    entry: SitemapEntry | CompactEntry
    policy: RobotsPolicy
    origin: str


def _outcome(
    wiring: Wiring, job: SitemapJob, url: str, outcome: Outcome, reason: str
) -> UrlOutcome:
    return outcome_now(
        wiring, run_id=job.run_id, source=job.source, url=url, outcome=outcome, reason=reason
    )


def _error_outcome(wiring: Wiring, job: SitemapJob, url: str, error: HarvestError) -> UrlOutcome:
    """The outcome of a location (as listed) that can never be fetched."""
    return _outcome(wiring, job, url, Outcome(error.outcome), f"{error.reason}: {error}")


def _robots_failure(
    wiring: Wiring, job: SitemapJob, url: str, origin: str, error: HarvestError
) -> UrlOutcome:
    """The outcome of a location whose host's robots.txt could not be read: ``blocked`` when
    the address policy refused the host (the page would be refused too), else ``failed
    robots-unavailable`` (RFC 9309 section 2.3.1.4: an unreachable robots.txt means the host
    is not crawled now; the next run asks again)."""
    if isinstance(error, AddressRefused):
        return _outcome(wiring, job, url, Outcome.BLOCKED, f"{error.reason}: {error}")
    return _outcome(
        wiring,
        job,
        url,
        Outcome.FAILED,
        f"robots-unavailable: {origin}/robots.txt could not be read ({error.reason}: {error}); "
        "not fetched",
    )


class _RobotsLookup:
    """The robots.txt policies one job needs, by canonical origin. A failure to read one is
    kept for the job, so the URLs of a dead host cost one attempt, not one each; at most
    :data:`MAX_OTHER_ROBOTS_PER_JOB` robots.txt files of other hosts are fetched."""

    def __init__(self, wiring: Wiring, job: SitemapJob) -> None:
        self.wiring = wiring
        self.home = _origin(job.url)
        self.failures: dict[str, HarvestError] = {}
        self.fetched = 0

    def policy(self, origin: str) -> RobotsPolicy | HarvestError:
        """The policy of ``origin``, or the error that kept it from being read. Raises the
        retryable errors of the job's own host: its sitemap depends on it whole, so the job is
        tried again, as for a 5xx robots.txt of the entry (RFC 9309 section 2.3.1.4)."""
        known = self.failures.get(origin)
        if known is not None:
            return known
        cached = self.wiring.robots.get(origin)
        if cached is not None:
            return cached
        if origin != self.home:
            if self.fetched >= MAX_OTHER_ROBOTS_PER_JOB:
                failure: HarvestError = PermanentError(
                    f"not read: this sitemap part already needed the robots.txt of "
                    f"{MAX_OTHER_ROBOTS_PER_JOB} other hosts",
                    reason="too-many-hosts",
                )
                self.failures[origin] = failure
                return failure
            self.fetched += 1
        try:
            return _robots_for(self.wiring, origin)
        except (PermanentError, RetryableError) as error:
            if origin == self.home and isinstance(error, RetryableError):
                raise
            self.failures[origin] = error
            return error


def _origin(url: str) -> str:
    """The canonical origin of ``url``, or as :func:`origin_of` reads it when it has none."""
    try:
        return canonical_origin(url)
    except PermanentError:
        return origin_of(url)


def _canonical_set(urls: tuple[str, ...] | list[str]) -> set[str]:
    """The canonical forms of ``urls`` (those that have one)."""
    found = set()
    for url in urls:
        try:
            found.add(canonical_url(url))
        except PermanentError:
            continue
    return found


def _unchanged_by_lastmod(
    wiring: Wiring, job: SitemapJob, lastmods: dict[str, str | None]
) -> dict[str, UrlOutcome]:
    """The ``unchanged`` outcomes of the URLs whose sitemap lastmod (normalised, by URL) is not
    newer than the one their held records came from
    (:mod:`cdif_harvester.domain.discovery.incremental`)."""
    dated = {url: lastmod for url, lastmod in lastmods.items() if lastmod}
    held = held_states(wiring, list(dated), run_id=job.run_id)
    return {
        url: outcome_now(
            wiring,
            run_id=job.run_id,
            source=job.source,
            url=url,
            outcome=Outcome.UNCHANGED,
            reason=lastmod_reason(lastmod, held[url].lastmod),
        )
        for url, lastmod in dated.items()
        if url in held and lastmod_not_newer(lastmod, held[url].lastmod)
    }


def _send_urls(
    wiring: Wiring,
    job: SitemapJob,
    entries: list[_Allowed],
    lastmods: dict[str, str | None],
) -> None:
    """Send one URL job per allowed location, a host's jobs spaced by its (capped) Crawl-delay
    or the source's own crawl delay, whichever is longer."""
    bodies: list[str] = []
    delays: list[int] = []
    per_origin: Counter[str] = Counter()
    own_delay = job.crawl_delay or 0.0
    # Every job of this sitemap shares all but its URL, lastmod and links: written once.
    encoder = UrlJobEncoder(
        run_id=job.run_id,
        source=job.source,
        sitemap=job.url,
        cdif_agent=job.cdif_agent,
        options=job.options,
        requests_per_host=job.requests_per_host,
        crawl_delay=job.crawl_delay,
    )
    for url, entry, policy, origin in entries:
        delay = max(wiring.settings.crawl_delay_of(policy), own_delay)
        delays.append(int(per_origin[origin] * delay))
        per_origin[origin] += 1
        bodies.append(encoder.encode(url, lastmods[url], entry.links, anchor=entry.loc))
    wiring.queue.send(URL_QUEUE, bodies, delays=delays if any(delays) else None)


def _refusal(
    wiring: Wiring, job: SitemapJob, url: str, policy: RobotsPolicy, *, home: str, origin: str
) -> str | None:
    """Why the canonical ``url`` (of canonical ``origin``) may not be harvested from this
    sitemap (of canonical origin ``home``), or None when it may."""
    settings = wiring.settings
    if origin != home and not (
        _canonical_set((job.url, *job.ancestors)) & _canonical_set(policy.sitemaps)
    ):
        # sitemaps.org, "Sitemaps & Cross Submits": a sitemap may list another host's URLs
        # only when that host's robots.txt announces the sitemap.
        return (
            f"cross-host-location: the sitemap on {home} may not list URLs of "
            f"{origin} (that host's robots.txt does not announce it)"
        )
    # The path refused travels with the reason: the publisher report's fix names it.
    if not policy.allows(url, settings.robots_user_agent):
        return f"robots-txt: disallowed for {settings.robots_user_agent}: {_path_of(url)}"
    if job.cdif_agent and not policy.allows(url, settings.cdif_user_agent):
        return f"robots-txt: disallowed for {settings.cdif_user_agent}: {_path_of(url)}"
    return None


def _path_of(url: str) -> str:
    """The path (and query) of ``url``, as robots.txt rules match it."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _record_partial(wiring: Wiring, job: SitemapJob, parsed: SitemapStream[CompactEntry]) -> None:
    """A sitemap that broke part-way or went over the limit is recorded as failed, with how
    many of its URLs were still handed on."""
    if parsed.error is None and parsed.limit_hit is None:
        return
    problem = parsed.error or (
        f"{parsed.limit_hit}: more than {wiring.settings.max_sitemap_urls} URLs (the sitemaps.org "
        "limit); the rest were ignored"
    )
    record_outcome(
        wiring,
        run_id=job.run_id,
        source=job.source,
        url=job.url,
        outcome=Outcome.FAILED,
        reason=f"{problem} ({parsed.count} URLs before it were harvested)",
    )


def _robots_for(wiring: Wiring, url: str, *, entry: bool = False) -> RobotsPolicy:
    """The robots.txt policy of ``url``'s (canonical) origin, fetched once per origin and cached.

    RFC 9309 2.3.1: 4xx means no restrictions; 5xx or an unreachable file means "not now",
    which is a retryable error. When the robots.txt is itself the entry URL, a 4xx is an error.
    """
    origin = _origin(url)
    cached = wiring.robots.get(origin)
    if cached is not None:
        return cached
    robots_url = f"{origin}/robots.txt"
    # RFC 9309 section 2.5: a robots.txt over the limit is read up to it (one byte more is
    # asked, so that parse_robots knows to cut at the last complete line), never refused.
    response = wiring.fetcher.fetch(robots_url, max_bytes=MAX_ROBOTS_BYTES + 1, truncate=True)
    if response.status >= 500 or response.status == 429:
        # (429 is read as "not now" too, as the major crawlers do, not as a 4xx "allow all".)
        raise FetchFailed(
            f"{robots_url} answered {response.status}",
            reason="robots-unavailable",
            retry_after=retry_after_of(wiring, response),
        )
    if response.status == 200:
        policy = parse_robots(response.body, robots_url=robots_url)
    elif entry:
        raise SitemapFetchError(
            f"{robots_url} answered {response.status}", reason=f"http-{response.status}"
        )
    else:
        policy = allow_all(robots_url)
    wiring.robots.remember(origin, policy)
    if wiring.record_crawl_delay is not None:
        # The host's Crawl-delay goes to its gate now, whichever process fetches from the host
        # next (on AWS: a write to the host's DynamoDB item; the resolver never reads robots.txt).
        wiring.record_crawl_delay(origin, policy)
    return policy
