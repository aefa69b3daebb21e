"""The end of a harvest run: URLs that vanished from a source's sitemaps become tombstones.

A URL is *withdrawn* (``withdrawn_at`` set on its state, on the catalogue entries of its
records and in their validation reports, which is how the source's Signmap leaves them out;
nothing is deleted) when the run shows that the publisher no longer announces it:

* the sitemap it was last listed in was read whole in this run and no longer lists it; or
* the run started from the source's robots.txt and every sitemap of the run was read whole,
  so a URL of that source not met at all is no longer announced anywhere (its sitemap was
  dropped from the index or from robots.txt).

Nothing is withdrawn on the strength of a sitemap that failed or was cut short: a publisher's
broken sitemap must not look like a mass withdrawal. A withdrawn URL that comes back is
harvested again and its records lose the mark. URLs harvested as entry pages (no sitemap) are
never withdrawn this way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from urllib.parse import urlsplit

from cdif_harvester.keys import source_of
from cdif_harvester.model import Outcome
from cdif_harvester.stages import Ports

__all__ = ["withdraw_vanished"]

_SITEMAP_FAILURES = frozenset({Outcome.FAILED, Outcome.BLOCKED, Outcome.DISALLOWED})


def withdraw_vanished(
    ports: Ports, run_id: str, *, sitemaps: Iterable[str], entry_urls: Iterable[str]
) -> list[str]:
    """Mark the URLs the run shows as vanished withdrawn; return them, sorted.

    ``sitemaps`` are the URLs of every sitemap job the run processed, ``entry_urls`` the run's
    entry URLs.
    """
    outcomes = {o.url: o for o in ports.catalog.outcomes(run_id)}
    processed = set(sitemaps)
    failed = {
        url for url in processed if url in outcomes and outcomes[url].outcome in _SITEMAP_FAILURES
    }
    whole = processed - failed
    entry_sources = {
        source_of(url) for url in entry_urls if urlsplit(url).path == "/robots.txt" and not failed
    }
    sources = {o.source for o in outcomes.values()} | entry_sources
    now = ports.clock.now().isoformat(timespec="seconds")
    withdrawn: list[str] = []
    for source in sorted(sources):
        for state in ports.catalog.urls(source):
            if state.url in outcomes or state.withdrawn_at or not state.sitemap:
                continue
            if state.sitemap not in whole and source not in entry_sources:
                continue
            ports.catalog.put_url(replace(state, withdrawn_at=now))
            for record_id in state.record_ids:
                entry = ports.catalog.get_record(record_id)
                if entry is not None and entry.url == state.url and not entry.withdrawn_at:
                    _mark_report(ports, entry.report_key, now)
                    ports.catalog.put_record(replace(entry, withdrawn_at=now))
            withdrawn.append(state.url)
    return sorted(withdrawn)


def _mark_report(ports: Ports, key: str, when: str) -> None:
    try:
        report = json.loads(ports.store.get(key))
    except (KeyError, ValueError):
        return  # no readable report: the catalogue entry still carries the mark
    report["withdrawn_at"] = when
    body = json.dumps(report, indent=2, sort_keys=True).encode("utf-8")
    ports.store.put(key, body, content_type="application/json")
