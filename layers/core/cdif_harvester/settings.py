"""Settings: the tunables every stage reads, with their documented defaults (one frozen value,
built by each composition root from its configuration)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from cdif_harvester.domain.discovery.robots import RobotsPolicy

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """Tunables shared by the stages, with their documented defaults."""

    robots_user_agent: str = "cdif-harvester"
    # The token of the robots.txt group that announces CDIF sitemaps (CDIF discoverability,
    # "Find metadata"); its rules apply to the locations of those sitemaps too.
    cdif_user_agent: str = "CDIF1.0"
    max_sitemap_depth: int = 5
    # The sitemaps.org protocol limits: 50,000 URLs and 50 MiB uncompressed per sitemap.
    max_sitemap_urls: int = 50_000
    # URL jobs handed on per sitemap job; a bigger sitemap continues in follow-up jobs, so one
    # invocation always finishes well inside the expander's timeout.
    max_urls_per_job: int = 5_000
    # Crawl-delay is honoured up to this many seconds (a larger value is read as this).
    max_crawl_delay: float = 10.0
    max_document_bytes: int = 10 * 1024 * 1024
    max_sitemap_bytes: int = 50 * 1024 * 1024
    # Requests in flight at once per host (origin). Two: a person's browser opens up to six
    # connections to a site, so two keeps a harvest well below one visitor's load, yet a large
    # harvest takes half the time it would with one (a slow answer does not stall the host's
    # queue). Crawl-delay, when a host sets one, spaces the starts whatever this says.
    requests_per_host: int = 2
    # Per-host exceptions, keyed by origin (``https://data.example.org``) or by host name
    # (``data.example.org``, any scheme and port): e.g. 1 for a fragile publisher.
    requests_per_host_overrides: Mapping[str, int] = field(default_factory=dict)
    # A slot taken by a worker that never gives it back (a crashed Lambda) is free again after
    # this many seconds: longer than the fetcher's 30 s total limit on one request.
    host_slot_lease: float = 60.0
    # A Retry-After (429, 503) holds the host closed for at most this long: 15 minutes, the
    # longest SQS message delay, so one answer cannot park a host for days.
    max_retry_after: float = 900.0
    # A job that failed with a retryable error (a 503 without Retry-After, a timeout) is tried
    # again after an exponential backoff with jitter: about retry_base seconds after the first
    # failure, doubling with each, never more than retry_cap
    # (stages.jobs.retry_delay; docs/decisions/0070-site-roots-backoff-and-contact.md).
    retry_base: float = 1.0
    retry_cap: float = 30.0
    # Anti-spoofing (1997 metadata-linking draft): a self-asserted metadata document that claims
    # a resource on another origin is checked against that resource's own metadata links. It
    # costs one or two requests per such document; operators of trusted sources may turn it off.
    verify_claims: bool = True
    # Remote JSON-LD contexts that may be fetched (through the safe fetcher, at most
    # max_context_bytes, once per process): exact URLs, or prefixes ending in "/". Every other
    # remote context is never fetched; the record is processed without it and the report says so.
    trusted_contexts: tuple[str, ...] = ()
    max_context_bytes: int = 1024 * 1024
    # Incremental harvesting (cdif_harvester.domain.discovery.incremental): skip what has not
    # changed since the last harvest. Off means a full refresh: everything is fetched, normalised
    # and rewritten (conditional requests are still sent; a 304 is then read as the kept answer).
    incremental: bool = True
    # Optional SHACL validation (domain/records/shacl.py, needs the ``shacl`` extra): its violations
    # join the record's errors. Off by default: it costs far more per record than JSON Schema.
    shacl: bool = False
    # The publisher report shows a source's records as they stand: at the close of a run the
    # catalogue entries of its sources are read (one query), and the stored reports of at most
    # this many of them (one object read each, the invalid first) for their errors and
    # warnings; the rest are counted from their entries. 1,000 reads of a few KiB each stay
    # well inside the finisher's time (docs/decisions/0071-the-report-shows-the-current-state.md).
    report_max_reports: int = 1_000
    # The run's rendering mode (``fallback`` or ``always``; None: each source's ``render``
    # option, ``never`` by default): pages are rendered in a browser only when asked for
    # (docs/decisions/0075-rendering-pages-in-a-browser.md).
    render: str | None = None
    # Whether a renderer elsewhere takes the URL jobs that need a browser (the render queue is
    # configured): a resolver without a browser then hands such a job on, whole, instead of
    # ending it without rendering. Off by default: only the AWS resolver with a renderer stack
    # deployed sets it (docs/decisions/0079-rendering-on-aws-hand-over.md).
    render_queue: bool = False
    # Keep every document fetched under raw/ (with its provenance) and every answer with a
    # validator under cache/. Off by default: they were four of a record's eight S3 writes and
    # two thirds of its disk; conditional requests work from the validators kept in the URL's
    # state instead (docs/decisions/0080-bodies-kept-only-when-asked.md). A source may ask for
    # it with its ``keep_bodies`` option.
    keep_bodies: bool = False
    # Write the records and reports of a batch of index jobs as one segment object, the
    # catalogue naming a range of it, instead of one object each. Off by default (locally the
    # layout stays browsable, and a request costs nothing); on AWS the indexer's RECORD_SEGMENTS
    # (docs/decisions/0086-record-segments.md).
    record_segments: bool = False

    def slots_for(self, origin: str) -> int:
        """Requests allowed in flight at once on ``origin`` (``scheme://host[:port]``)."""
        overrides = self.requests_per_host_overrides
        if overrides:
            for key in (origin, urlsplit(origin).hostname or ""):
                if key in overrides:
                    return max(1, int(overrides[key]))
        return max(1, self.requests_per_host)

    def crawl_delay_of(self, policy: RobotsPolicy) -> float:
        """The Crawl-delay ``policy`` sets for our user agent, capped (0 when it sets none)."""
        return min(policy.crawl_delay(self.robots_user_agent) or 0.0, self.max_crawl_delay)
