"""Ports: the protocols every stage is written against.

Stages take these as arguments and never import an adapter. Adapters live in
:mod:`cdif_harvester.adapters`: ``aws`` (S3, DynamoDB, SQS, the DynamoDB host gate), ``local`` (a
directory, SQLite, an in-process queue), ``http`` (the one safe fetcher) and ``politeness`` (the
in-memory host gate and the fetcher that goes through a gate).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Protocol, cast, runtime_checkable

from cdif_harvester.domain.discovery.robots import RobotsPolicy
from cdif_harvester.model import (
    CatalogEntry,
    FetchResponse,
    Page,
    ProfileQuery,
    RunState,
    RunStatus,
    Source,
    UrlOutcome,
    UrlState,
)

__all__ = [
    "CatalogIndex",
    "Clock",
    "CrawlDelayRecorder",
    "EventualReads",
    "Fetcher",
    "HostGate",
    "HostSlot",
    "JobQueue",
    "KeptSignposts",
    "ObjectStore",
    "OutcomeSink",
    "RenderedPage",
    "Renderer",
    "SourceRegistry",
    "Wait",
    "eventual",
    "keeping_signposts",
]


class Fetcher(Protocol):
    """Fetches a URL safely (address policy, size and time caps, redirects handled)."""

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """Fetch ``url``; any HTTP status is returned as a response, its body whole unless
        ``truncate`` asks for a body over ``max_bytes`` to be cut at the cap instead of refused.

        A body over ``max_bytes`` (on the wire or once decoded) raises BodyTooLarge, which
        carries the response's status and headers; with ``truncate``, such a body is instead cut
        at the cap and returned marked ``truncated``. No other response is ever a cut body.

        Raises AddressRefused, BodyTooLarge, RedirectError, TooSlow, PermanentError (permanent)
        or FetchTimeout, FetchFailed (retryable).
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
    """The catalogue: one entry per record, one outcome per URL and run, and the harvest runs
    with their counters (kept atomically as the run goes, so any worker can tell when a run is
    finished)."""

    def put_record(self, entry: CatalogEntry) -> None:
        """Insert or replace the entry of ``entry.record_id``."""
        ...

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        ...

    def put_outcome(
        self, outcome: UrlOutcome, *, state: UrlState | None = None
    ) -> RunStatus | None:
        """Record the outcome of one URL in one run (replacing an earlier one for that pair).

        When the run is tracked (:meth:`start_run`), its counters move with it: a URL settled
        for the first time counts once (and enters the run if it had not), a changed outcome
        moves from one count to the other. Returns the run's status after the write, or None
        for a run that is not tracked.

        ``state``, when given, is the URL's harvest state the job that settled it leaves (the
        indexer's): stored as :meth:`put_url` would, together with the URL's latest outcome
        (on DynamoDB in the same write of the URL's item). It is written whenever it is given,
        even when the latest outcome is the one held already, so that a retry after a crash
        between the run's write and the URL's still leaves it. Raises ValueError when its URL
        is not the outcome's.
        """
        ...

    def put_outcomes(
        self, outcomes: Sequence[UrlOutcome], *, states: Sequence[UrlState] = ()
    ) -> RunStatus | None:
        """Record the outcomes of many URLs of one run, as :meth:`put_outcome` does each, with
        the run's counters moved once for all of them; ``states`` are harvest states of some of
        their URLs, each written with its URL's latest outcome (the last given for a URL
        wins). Returns the run's status after the writes (None for an untracked run or no
        outcomes). Raises ValueError when a state's URL has no outcome among ``outcomes``."""
        ...

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield every recorded outcome of ``run_id``, ordered by URL (closing a run reads
        them alongside :meth:`urls`, in the same order, rather than holding either)."""
        ...

    def outcomes_page(
        self, run_id: str, *, limit: int, after: str | None = None, outcome: str | None = None
    ) -> Page[UrlOutcome]:
        """One page of :meth:`outcomes` for a caller that pages (the API): up to ``limit``
        outcomes (only those that are ``outcome``, when given), in the catalogue's order of the
        run's URLs, starting after the position ``after`` a page before gave. What one page
        reads is bounded by its size and a read budget, not by its place in the run. Raises
        ValueError for an ``after`` this catalogue did not give."""
        ...

    def get_url(self, url: str) -> UrlState | None:
        """Return what is known about ``url`` across runs, or None for a URL never seen."""
        ...

    def get_urls(self, urls: Sequence[str]) -> dict[str, UrlState]:
        """Return what is known about each of ``urls`` (batched reads), by URL; URLs never
        seen are left out."""
        ...

    def put_url(self, state: UrlState) -> None:
        """Store the harvest state of ``state.url`` (lastmod, fingerprint, blocks, record ids,
        withdrawal). The outcome fields are left as :meth:`put_outcome` last set them. A state
        that goes with an outcome is better given to :meth:`put_outcome` (one write, not
        two)."""
        ...

    def urls(self, source: str, *, outcome: str | None = None) -> Iterable[UrlState]:
        """Yield the state of every URL of ``source`` (whose latest outcome is ``outcome``,
        when given), ordered by URL."""
        ...

    def source_urls(self, source: str) -> Iterable[str]:
        """Yield every URL of ``source``, ordered by URL: the listing of :meth:`urls` without
        the states (which cost a read each on DynamoDB)."""
        ...

    def records(
        self,
        source: str,
        *,
        changed_since: str | None = None,
        query: ProfileQuery | None = None,
    ) -> Iterable[CatalogEntry]:
        """Yield the entries of ``source`` (changed at or after the ISO date or datetime
        ``changed_since``, and kept by the profile ``query``, when given), ordered by record
        id."""
        ...

    def records_page(
        self,
        source: str,
        *,
        limit: int,
        after: str | None = None,
        changed_since: str | None = None,
        query: ProfileQuery | None = None,
    ) -> Page[CatalogEntry]:
        """One page of :meth:`records` for a caller that pages (the API): up to ``limit``
        entries, in the catalogue's listing order (by date of change, then an order of its
        own) rather than by id, starting after the position ``after`` a page before gave.

        What one page reads is bounded by its size (and by a budget of entries read when a
        filter keeps few: :data:`~cdif_harvester.model.PAGE_READ_BUDGET`), whatever the size of
        the source. Raises ValueError for an ``after`` this catalogue did not give for this
        listing.
        """
        ...

    def start_run(self, run: RunStatus) -> None:
        """Record a new run and its first counters (a run id that exists is left as it is)."""
        ...

    def get_run(self, run_id: str) -> RunStatus | None:
        """Return the status of ``run_id``, or None."""
        ...

    def runs(
        self, source_id: str | None = None, *, state: RunState | None = None, limit: int = 100
    ) -> list[RunStatus]:
        """Return runs, newest first: of one registered source, and in one state, when given."""
        ...

    def enter_urls(
        self,
        run_id: str,
        urls: Sequence[str],
        *,
        step: str,
        settled: Sequence[UrlOutcome] = (),
    ) -> list[str]:
        """Note that ``urls`` enter the run; return the ones to hand on, in order.

        A URL is handed on when it is new to the run, or when this same ``step`` (a sitemap
        job's part) entered it before: a job run again after a crash sends its jobs again
        without counting them twice. A URL another step entered is left out (it is already on
        its way). Each URL counts once in ``entered``.

        The URLs of ``settled`` (outcomes of this run known at once, such as ``unchanged`` by
        the sitemap's lastmod) enter the run with their outcome, as :meth:`put_outcomes` would
        record it, and are never handed on; one another step entered is left to it. A URL of
        ``settled`` this step entered queued before is settled now.
        """
        ...

    def count_sitemaps(
        self, run_id: str, delta: int, *, step: str, sitemap: str | None = None
    ) -> RunStatus | None:
        """Add ``delta`` to the run's pending sitemap jobs, once per ``step`` (a repeated step
        changes nothing); ``sitemap`` is remembered as read by the run. Returns the status
        after the change, or None for a run that is not tracked."""
        ...

    def run_sitemaps(self, run_id: str) -> list[str]:
        """Return the sitemaps (and robots.txt files) the run has read, sorted."""
        ...

    def finish_run(self, run_id: str, *, at: str, state: RunState = RunState.FINISHED) -> bool:
        """Mark a running (or stalled) run ``state``; True only for the one call that did it,
        so the end of a run is dealt with once."""
        ...

    def close_run(self, run_id: str, *, at: str, report_key: str | None) -> None:
        """Note that the end of the run was dealt with (tombstones, Signmap, report)."""
        ...

    def recount_run(self, run_id: str, *, at: str) -> RunStatus | None:
        """Set the run's URL counters from its outcome items (repairs counts a crash between
        two writes left behind); returns the new status, or None for an unknown run."""
        ...


@runtime_checkable
class EventualReads(Protocol):
    """What a catalogue that can read at half the price (DynamoDB's eventually consistent
    reads, which may return a value up to about a second old) offers beside
    :class:`CatalogIndex`: for reads where such a value is harmless, as each caller says. A
    catalogue without it is read by the :class:`CatalogIndex` methods."""

    def peek_url(self, url: str) -> UrlState | None:
        """:meth:`CatalogIndex.get_url`, eventually consistent."""
        ...

    def peek_urls(self, urls: Sequence[str]) -> dict[str, UrlState]:
        """:meth:`CatalogIndex.get_urls`, eventually consistent."""
        ...

    def peek_record(self, record_id: str) -> CatalogEntry | None:
        """:meth:`CatalogIndex.get_record`, eventually consistent."""
        ...


@runtime_checkable
class KeptSignposts(Protocol):
    """What a catalogue that keeps, with each record's entry, what the source's Signmap lists
    of the record offers beside :class:`CatalogIndex` (the local SQLite catalogue): the Signmap
    then reads them all at once instead of each record and report (decision 0100). The text
    is the crosswalk's (:func:`~cdif_harvester.stages.crosswalk.signposts_text`), kept as
    given. A catalogue without it has the Signmap read each record, or its segment's
    signposts."""

    def put_record_with_signposts(self, entry: CatalogEntry, signposts: str) -> None:
        """:meth:`CatalogIndex.put_record`, keeping ``signposts`` with the entry for as long
        as the entry stays (an entry put again by ``put_record`` has none)."""
        ...

    def kept_signposts(self, source: str) -> Iterator[tuple[str, str]]:
        """Yield the record id and the kept signposts of each entry of ``source`` that has
        them, by record id."""
        ...


class SourceRegistry(Protocol):
    """The publishers registered for harvesting, and the one run each may have under way."""

    def put_source(self, source: Source) -> None:
        """Insert or replace ``source``."""
        ...

    def add_source(self, source: Source) -> bool:
        """Insert ``source`` unless its id is registered already (atomically); True when it
        was inserted."""
        ...

    def get_source(self, source_id: str) -> Source | None:
        """Return the source named ``source_id``, or None."""
        ...

    def sources(self) -> list[Source]:
        """Return every registered source, by id."""
        ...

    def delete_source(self, source_id: str) -> bool:
        """Remove a source (its records and runs stay); False when there was none."""
        ...

    def claim_source(self, source_id: str, run_id: str, *, at: str) -> bool:
        """Make ``run_id`` the source's run under way, unless another one is: True when it
        did (atomically: two schedulers never both start a run of one source)."""
        ...

    def release_source(self, source_id: str, run_id: str) -> None:
        """End ``run_id`` as the source's run under way (a no-op when another run holds it)."""
        ...


class JobQueue(Protocol):
    """Sends messages to the queue of a stage, named logically: sitemap, url, document, index,
    render."""

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


class CrawlDelayRecorder(Protocol):
    """Records the Crawl-delay a host's robots.txt sets where every fetcher pacing that host
    reads it: the host gate (on AWS the host's item in the DynamoDB table, seen by every
    resolver; in the local runner the in-memory gate)."""

    def __call__(self, origin: str, policy: RobotsPolicy) -> None:
        """Record the Crawl-delay ``policy`` (the robots.txt of ``origin``) sets for us. Raises
        StorageError when the gate's store fails."""
        ...


class OutcomeSink(Protocol):
    """Holds the outcomes the jobs of a batch settle, to be written together when the batch
    ends (on AWS: one catalogue transaction per run instead of one per job, decision 0089)."""

    def add(self, outcome: UrlOutcome, *, state: UrlState | None = None) -> None:
        """Hold ``outcome`` (of the job now running), and the URL's harvest ``state`` to write
        with it (see :meth:`CatalogIndex.put_outcome`), until the batch's end."""
        ...


@dataclass(frozen=True)
class HostSlot:
    """A request slot taken on a host: hand it back with :meth:`HostGate.release`.

    ``token`` identifies this taking of the slot, so a late release never frees a slot that has
    since been taken again (after its lease ran out).
    """

    host: str
    index: int
    token: str


@dataclass(frozen=True)
class Wait:
    """No slot now: ask again in ``seconds``.

    ``reason`` is ``busy`` (every slot is taken), ``interval`` (the Crawl-delay since the last
    request start has not passed) or ``held`` (the host asked us to stay away: Retry-After).
    """

    seconds: float
    reason: str


class HostGate(Protocol):
    """Politeness per host (an origin, ``scheme://host:port``), shared by every worker.

    At most ``slots`` requests are in flight per host, successive request starts on one host
    are at least the host's interval (its robots.txt Crawl-delay) apart, and a host can be held
    closed until a time (an HTTP ``Retry-After``). A slot whose holder never releases it (a
    worker that died) is free again once its lease has run out, so no crash wedges a host. A
    slot may be kept between requests and reused (:meth:`reuse`): kept, it counts as a request
    in flight, and every start within it keeps the interval and the holds.
    """

    def acquire(self, host: str, *, slots: int) -> HostSlot | Wait:
        """Take one of the ``slots`` request slots of ``host`` and start a request now, or say
        how long to wait before asking again. Raises StorageError when the gate's store fails.
        """
        ...

    def reuse(self, slot: HostSlot, *, slots: int) -> HostSlot | Wait | None:
        """Start another request within ``slot``, kept since its last request ended: the slot
        to use now (its lease renewed when needed, perhaps under a new token), how long to wait (the
        interval since the slot's last start, a hold), or None when the slot is no longer ours
        (its lease ran out and another worker took it; acquire again). Raises StorageError.
        """
        ...

    def release(self, slot: HostSlot) -> None:
        """Give ``slot`` back (a no-op when its lease ran out and it was taken again)."""
        ...

    def hold(self, host: str, seconds: float) -> None:
        """Start no request on ``host`` for ``seconds`` from now (never shortens a hold)."""
        ...

    def set_interval(self, host: str, seconds: float) -> None:
        """Space request starts on ``host`` at least ``seconds`` apart from now on (Crawl-delay);
        the start of the last request already counts."""
        ...


@dataclass(frozen=True)
class RenderedPage:
    """A page as a browser left it: the final ``url``, the DOM serialised (``html``, empty when
    it could not be read), the ``seconds`` it took, the requests and bytes the fetcher answered
    for it, the requests ``refused`` (``<url>: <why>``) and what ``stopped`` it early (a cap, a
    crash), None when it settled."""

    url: str
    html: bytes
    seconds: float
    requests: int = 0
    bytes: int = 0
    refused: tuple[str, ...] = ()
    stopped: str | None = None


class Renderer(Protocol):
    """Loads a page in a browser whose every request goes through the safe fetcher, and returns
    the DOM once the page has settled (docs/decisions/0075-rendering-pages-in-a-browser.md)."""

    def render(self, url: str, *, page: FetchResponse | None = None) -> RenderedPage:
        """Render ``url``; ``page`` is its answer already fetched (not asked for again).
        Raises BrowserUnavailable (permanent) when no browser can run."""
        ...


def eventual(catalog: CatalogIndex) -> EventualReads | None:
    """``catalog`` as :class:`EventualReads` when it offers them, else None (see
    :func:`_offers`)."""
    return cast(EventualReads, catalog) if _offers(type(catalog), EventualReads) else None


def keeping_signposts(catalog: CatalogIndex) -> KeptSignposts | None:
    """``catalog`` as :class:`KeptSignposts` when it keeps them, else None (see
    :func:`_offers`)."""
    return cast(KeptSignposts, catalog) if _offers(type(catalog), KeptSignposts) else None


@cache
def _offers(kind: type, protocol: type) -> bool:
    # Asked per job and per record: ``isinstance`` against a runtime-checkable protocol lists
    # the protocol's members on every call (tens of microseconds on Python 3.11), and these
    # protocols are met by a catalogue's class, never by an attribute set on one instance, so
    # the answer is the class's, kept.
    return issubclass(kind, protocol)
