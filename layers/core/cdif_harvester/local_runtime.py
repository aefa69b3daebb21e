"""The local composition root: configuration from the command line, adapters, the wiring.

The counterpart of :mod:`cdif_harvester.aws_runtime` for a harvest on one machine with no AWS
account. :class:`LocalConfig` holds what the command's options set (as ``AwsConfig`` holds what a
function's environment sets); :func:`wiring` reads it, builds the local adapters, connects the
Crawl-delay recorder to the gate and returns the :class:`~cdif_harvester.wiring.Wiring`, with the
local parts the runner (:mod:`cdif_harvester.cli.runner`) drives itself: the in-process queue,
the SQLite catalogue, the politeness gate.

The output directory is the object store (same key layout as the S3 bucket), wrapped so that a
record written plays the S3 notification that triggers the crosswalk; ``catalog.sqlite`` in it is
the catalogue; every fetch goes through one in-memory host gate in ``sleep`` mode (waiting is free
on one machine) over the HTTP cache kept in the directory. :func:`check_wiring` is the wiring of
a check (``cdif-harvest check``, ``POST /check``): everything in memory, nothing kept.

See docs/decisions/0010-local-runner.md, docs/decisions/0043-state-on-the-wiring.md and
docs/decisions/0072-the-publisher-checker.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.httpcache import RevalidatingFetcher
from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    MemoryObjectStore,
    NotifyingObjectStore,
    OfflineFetcher,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.adapters.politeness import GatedFetcher, MemoryHostGate
from cdif_harvester.adapters.render import ChromiumRenderer
from cdif_harvester.contact import CONTACT_ENV, InvalidContact, user_agent
from cdif_harvester.contracts import CROSSWALK_QUEUE
from cdif_harvester.domain.records.shacl import check_shacl_available
from cdif_harvester.keys import RECORDS_PREFIX
from cdif_harvester.ports import Fetcher
from cdif_harvester.settings import Settings
from cdif_harvester.wiring import Wiring

__all__ = ["CATALOG_FILE", "LocalConfig", "LocalWiring", "check_wiring", "wiring"]

#: The catalogue's file in the output directory.
CATALOG_FILE = "catalog.sqlite"


@dataclass(frozen=True)
class LocalConfig:
    """Settings of a local harvest, as the command's options give them.

    ``host_overrides`` gives some hosts (by origin or host name) another number of request slots
    than ``requests_per_host``; ``crawl_delays`` are registered sources' own Crawl-delays by
    host, below which a robots.txt cannot bring a host's interval. ``contact`` is the operator's
    (the User-Agent names it); without one, ``CDIF_OPERATOR_CONTACT`` is read.
    """

    allow_loopback: bool = False
    requests_per_host: int | None = None
    host_overrides: Mapping[str, int] | None = None
    trusted_contexts: tuple[str, ...] = ()
    incremental: bool = True
    shacl: bool = False
    crawl_delays: Mapping[str, float] | None = None
    contact: str | None = None
    render: str | None = None
    keep_bodies: bool = False

    def user_agent(self) -> str:
        """The User-Agent of every request. Raises InvalidContact (naming where it came from)."""
        if self.contact:
            return user_agent(self.contact)
        try:
            return user_agent(os.environ.get(CONTACT_ENV) or None)
        except InvalidContact as exc:
            raise InvalidContact(f"{CONTACT_ENV}: {exc}") from exc

    def settings(self) -> Settings:
        """The stage settings these options change.

        Raises ShaclUnavailable when SHACL validation is asked for and pyshacl is not installed
        (before anything is fetched: one clear error, not one failure per record).
        """
        settings = Settings()
        if self.requests_per_host is not None:
            settings = replace(settings, requests_per_host=max(1, self.requests_per_host))
        if self.host_overrides:
            settings = replace(settings, requests_per_host_overrides=dict(self.host_overrides))
        if self.trusted_contexts:
            settings = replace(settings, trusted_contexts=tuple(self.trusted_contexts))
        if not self.incremental:
            settings = replace(settings, incremental=False)
        if self.render:
            settings = replace(settings, render=self.render)
        if self.keep_bodies:
            settings = replace(settings, keep_bodies=True)
        if self.shacl:
            check_shacl_available()
            settings = replace(settings, shacl=True)
        return settings


@dataclass
class LocalWiring:
    """The wiring of a local harvest, and the local adapters the runner drives itself.

    ``fetcher`` is the network fetcher under the HTTP cache and the gate; ``own_fetcher`` says
    whether it was built here (and so is closed here). ``sleep`` and ``monotonic`` are the
    gate's: the runner waits out a retry's backoff with them, on the same clock as the gate.
    """

    wiring: Wiring
    queue: InProcessQueue
    catalog: SqliteCatalog
    gate: MemoryHostGate
    fetcher: Fetcher
    own_fetcher: bool
    renderer: ChromiumRenderer | None = None
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic

    def close(self) -> None:
        """Release the catalogue and the connections of a fetcher built here."""
        self.catalog.close()
        if self.renderer is not None:
            self.renderer.close()
        if self.own_fetcher and isinstance(self.fetcher, SafeFetcher):
            self.fetcher.close()


class _GateClock:
    """The politeness gate's clock, kept in step with how the runner sleeps.

    With real sleeping, real time passes. A ``sleep`` that does not really wait (a test's)
    moves this clock on by what it was asked to wait, as real sleeping would have: the gate then
    sees the wait done instead of answering "wait" again and again.
    """

    def __init__(self, sleep: Callable[[float], None]) -> None:
        self._sleep = sleep
        self._real = sleep is time.sleep
        self._offset = 0.0
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)
        if not self._real:
            with self._lock:
                self._offset += seconds

    def monotonic(self) -> float:
        return time.monotonic() + self._offset


def wiring(
    out_dir: Path,
    config: LocalConfig,
    *,
    fetcher: Fetcher | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> LocalWiring:
    """Build the wiring of local harvests into ``out_dir`` (created if missing).

    ``fetcher`` replaces the network fetcher (which is otherwise built here, and closed by
    :meth:`LocalWiring.close`); ``sleep`` is how the politeness gate waits. Raises
    ShaclUnavailable as :meth:`LocalConfig.settings` does, InvalidContact as
    :meth:`LocalConfig.user_agent` does.
    """
    agent = config.user_agent()
    settings = config.settings()
    out_dir.mkdir(parents=True, exist_ok=True)
    queue = InProcessQueue()
    catalog = SqliteCatalog(out_dir / CATALOG_FILE)
    network = fetcher or SafeFetcher(
        FetchPolicy(allow_loopback=config.allow_loopback, user_agent=agent)
    )
    directory = DirectoryObjectStore(out_dir)
    store = NotifyingObjectStore(
        directory,
        queue,
        prefix=RECORDS_PREFIX,
        target=CROSSWALK_QUEUE,
    )
    clock = _GateClock(sleep)
    gate = MemoryHostGate(lease=settings.host_slot_lease, monotonic=clock.monotonic)
    bundle = Wiring(
        store=store,
        catalog=catalog,
        queue=queue,
        fetcher=GatedFetcher(
            # Conditional requests for the answers kept from earlier runs (cache/ in the output
            # directory: robots.txt and sitemaps, and documents only when bodies are kept; the
            # resolver otherwise keeps their validators in the catalogue): an unchanged site
            # answers 304 and sends no bodies.
            RevalidatingFetcher(network, directory),
            gate,
            slots_for=settings.slots_for,
            mode="sleep",
            max_retry_after=settings.max_retry_after,
            sleep=clock.sleep,
        ),
        clock=SystemClock(),
        settings=settings,
        sources=catalog,
    )
    # Chromium starts only when a page is first rendered (a source or the run asks for it); its
    # requests go through the same gate and cache as every other fetch.
    renderer = ChromiumRenderer(bundle.fetcher, allow_loopback=config.allow_loopback)
    bundle.renderer = renderer
    floors = dict(config.crawl_delays or {})

    def floor_of(origin: str) -> float:
        return max(floors.get(origin, 0.0), floors.get(urlsplit(origin).hostname or "", 0.0))

    # The Crawl-delay of every robots.txt the expander reads goes to the gate at once (never
    # below a registered source's own delay for that host).
    bundle.record_crawl_delay = lambda origin, policy: gate.set_interval(
        origin, max(settings.crawl_delay_of(policy), floor_of(origin))
    )
    return LocalWiring(
        wiring=bundle,
        queue=queue,
        catalog=catalog,
        gate=gate,
        fetcher=network,
        own_fetcher=fetcher is None,
        renderer=renderer,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )


@contextmanager
def check_wiring(*, fetcher: Fetcher | None = None, shacl: bool = False) -> Iterator[Wiring]:
    """The wiring of one check: a store, queue and catalogue in memory, gone when it closes.

    ``fetcher`` reads URLs (None: nothing is fetched, for a document given whole). Incremental
    harvesting is off (a check compares with no earlier harvest). Raises ShaclUnavailable when
    ``shacl`` is asked for and pyshacl is not installed.
    """
    settings = LocalConfig(incremental=False, shacl=shacl).settings()
    # (An SQLite database in memory: the stages record outcomes as they would in a harvest.)
    catalog = SqliteCatalog(Path(":memory:"))
    try:
        yield Wiring(
            store=MemoryObjectStore(),
            catalog=catalog,
            queue=InProcessQueue(),
            fetcher=fetcher or OfflineFetcher(),
            clock=SystemClock(),
            settings=settings,
        )
    finally:
        catalog.close()
