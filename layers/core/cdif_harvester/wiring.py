"""The wiring of a stage: the adapter behind each port, the settings and the per-process state.

The protocols themselves are in :mod:`cdif_harvester.ports`; the two composition roots that build a
:class:`Wiring` are :mod:`cdif_harvester.aws_runtime` (Lambda) and
:mod:`cdif_harvester.cli.runner` (one machine). State that depends on configuration or on what ran
before (parsed robots.txt, the JSON-LD contexts learnt) lives on the Wiring, never in a module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cdif_harvester.domain.discovery.robots import RobotsPolicy
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.ports import (
    CatalogIndex,
    Clock,
    Fetcher,
    JobQueue,
    ObjectStore,
    SourceRegistry,
)
from cdif_harvester.settings import Settings

__all__ = ["RobotsCache", "Wiring"]


class RobotsCache(dict[str, RobotsPolicy]):
    """Parsed robots.txt policies by origin; listeners hear of every policy stored.

    That is how a host's Crawl-delay reaches the politeness gate the moment the expander has
    read it, whichever process reads it (on AWS the resolver never parses robots.txt itself).
    """

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[str, RobotsPolicy], None]] = []

    def subscribe(self, listener: Callable[[str, RobotsPolicy], None]) -> None:
        """Call ``listener(origin, policy)`` whenever a policy is stored from now on."""
        self._listeners.append(listener)

    def __setitem__(self, origin: str, policy: RobotsPolicy) -> None:
        super().__setitem__(origin, policy)
        for listener in self._listeners:
            listener(origin, policy)


@dataclass
class Wiring:
    """Everything a stage talks to. ``robots`` caches parsed robots.txt by origin;
    ``sources`` is the registry of publishers (None where no registry is used); ``contexts``
    serves the JSON-LD contexts (the shipped ones and the trusted ones registered) and
    remembers the trusted ones that failed."""

    store: ObjectStore
    catalog: CatalogIndex
    queue: JobQueue
    fetcher: Fetcher
    clock: Clock
    settings: Settings = field(default_factory=Settings)
    robots: RobotsCache = field(default_factory=RobotsCache)
    sources: SourceRegistry | None = None
    contexts: JsonLdContexts = field(default_factory=JsonLdContexts)
