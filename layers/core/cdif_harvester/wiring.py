"""The wiring of a stage: the adapter behind each port, the settings and the per-process state.

The protocols themselves are in :mod:`cdif_harvester.ports`; the two composition roots that build a
:class:`Wiring` are :mod:`cdif_harvester.aws_runtime` (Lambda) and
:mod:`cdif_harvester.local_runtime` (one machine), each with a ``wiring()`` builder. State that
depends on configuration or on what ran before (parsed robots.txt, the JSON-LD contexts learnt)
lives on the Wiring, never in a module.

See docs/decisions/0043-state-on-the-wiring.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from cdif_harvester.domain.discovery.robots import RobotsPolicy
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.ports import (
    CatalogIndex,
    Clock,
    CrawlDelayRecorder,
    Fetcher,
    JobQueue,
    ObjectStore,
    OutcomeSink,
    Renderer,
    SourceRegistry,
)
from cdif_harvester.settings import Settings

__all__ = ["RobotsCache", "Wiring"]


class RobotsCache(Mapping[str, RobotsPolicy]):
    """Parsed robots.txt policies by origin, read-only but for :meth:`remember`.

    Storing a policy writes nowhere else: telling the host gate the host's Crawl-delay is the
    expander's own, separate call (``Wiring.record_crawl_delay``).
    """

    def __init__(self) -> None:
        self._policies: dict[str, RobotsPolicy] = {}

    def remember(self, origin: str, policy: RobotsPolicy) -> None:
        """Keep ``policy`` as the robots.txt policy of ``origin`` (replacing any before)."""
        self._policies[origin] = policy

    def __getitem__(self, origin: str) -> RobotsPolicy:
        return self._policies[origin]

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)


@dataclass
class Wiring:
    """Everything a stage talks to. ``robots`` caches parsed robots.txt by origin;
    ``sources`` is the registry of publishers (None where no registry is used);
    ``record_crawl_delay`` tells the host gate a robots.txt's Crawl-delay (None: nothing paces
    by it); ``contexts`` serves the JSON-LD contexts (the shipped ones and the trusted ones
    registered) and remembers the trusted ones that failed; ``renderer`` renders pages in a browser
    for the sources and runs that ask for it (None: no browser here); ``outcomes`` holds the
    outcomes settled while a batch of jobs runs, written when it ends (None: each is written at
    once, with its run's counters; see :func:`cdif_harvester.stages.outcomes.put_outcome`)."""

    store: ObjectStore
    catalog: CatalogIndex
    queue: JobQueue
    fetcher: Fetcher
    clock: Clock
    settings: Settings = field(default_factory=Settings)
    robots: RobotsCache = field(default_factory=RobotsCache)
    sources: SourceRegistry | None = None
    record_crawl_delay: CrawlDelayRecorder | None = None
    contexts: JsonLdContexts = field(default_factory=JsonLdContexts)
    renderer: Renderer | None = None
    outcomes: OutcomeSink | None = None
