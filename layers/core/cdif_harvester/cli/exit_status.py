"""The exit status of ``cdif-harvest harvest`` (and ``demo``, ``schedule``): what cron and CI read.

0 the harvest ran and nothing ``--fail-on`` names happened; 1 what ``--fail-on failed|invalid``
names happened; 2 usage or configuration error; 3 an entry URL could not be read or nothing was
harvested (unless ``--fail-on never``); 130/143 interrupted. :func:`harvest_status` decides it
from the run's outcomes in the catalogue; :data:`EPILOG` is what ``--help`` says.

See docs/decisions/0069-cli-exit-codes-and-progress.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cdif_harvester.model import Outcome, UrlOutcome
from cdif_harvester.ports import CatalogIndex

__all__ = [
    "DEFAULT_FAIL_ON",
    "EPILOG",
    "EXIT_FAIL_ON",
    "EXIT_NOTHING_HARVESTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAIL_ON",
    "HarvestStatus",
    "harvest_status",
]

EXIT_OK = 0
EXIT_FAIL_ON = 1
EXIT_USAGE = 2
EXIT_NOTHING_HARVESTED = 3

# From the most lenient to the strictest; each level includes what the ones before it check.
FAIL_ON = ("never", "empty", "failed", "invalid")
DEFAULT_FAIL_ON = "empty"

EPILOG = """\
exit status:
  0    the harvest ran; nothing --fail-on names happened
  1    --fail-on failed: some URL ended failed or blocked;
       --fail-on invalid: that, or some record the run's URLs hold is invalid
  2    usage or configuration error (bad option or URL, unknown source, --out not a directory)
  3    an entry URL could not be read (failed, blocked, disallowed) or the run harvested
       nothing (no URL gave a record or was unchanged); not with --fail-on never
  130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM (the run is marked interrupted)
"""

# An entry URL with one of these outcomes was never read: nothing behind it was harvested.
_UNREAD = frozenset({Outcome.FAILED, Outcome.BLOCKED, Outcome.DISALLOWED})
_FAILED = frozenset({Outcome.FAILED, Outcome.BLOCKED})
_HARVESTED = frozenset({Outcome.RECORD, Outcome.UNCHANGED})


@dataclass(frozen=True)
class HarvestStatus:
    """The exit status of a run and, when not 0, the one line that says why."""

    code: int
    reason: str | None = None


def harvest_status(
    catalog: CatalogIndex, run_id: str, entry_urls: list[str], fail_on: str = DEFAULT_FAIL_ON
) -> HarvestStatus:
    """Decide the exit status of run ``run_id`` by the level ``fail_on`` (one of
    :data:`FAIL_ON`). Raises ValueError for an unknown level."""
    level = FAIL_ON.index(fail_on)
    if level == 0:
        return HarvestStatus(EXIT_OK)
    # One pass over the run's outcomes, keeping counts and the entry URLs' outcomes only.
    wanted = set(entry_urls)
    by_url: dict[str, UrlOutcome] = {}
    counts: Counter[str] = Counter()
    failed, first_failed = 0, ""
    for outcome in catalog.outcomes(run_id):
        counts[outcome.outcome.value] += 1
        if outcome.url in wanted:
            by_url[outcome.url] = outcome
        if outcome.outcome in _FAILED:
            failed += 1
            first_failed = first_failed or outcome.url
    for url in entry_urls:
        entry = by_url.get(url)
        if entry is not None and entry.outcome in _UNREAD:
            return HarvestStatus(
                EXIT_NOTHING_HARVESTED,
                f"entry URL {url} could not be read: {entry.outcome.value} ({entry.reason})",
            )
    if not any(counts[kind.value] for kind in _HARVESTED):
        said = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no URLs"
        return HarvestStatus(
            EXIT_NOTHING_HARVESTED, f"nothing harvested: no URL gave a record ({said})"
        )
    if level < FAIL_ON.index("failed"):
        return HarvestStatus(EXIT_OK)
    if failed:
        return HarvestStatus(
            EXIT_FAIL_ON,
            f"--fail-on {fail_on}: {failed} URL{'s' if failed != 1 else ''} failed "
            f"or blocked (first: {first_failed})",
        )
    if level < FAIL_ON.index("invalid"):
        return HarvestStatus(EXIT_OK)
    harvested = (o for o in catalog.outcomes(run_id) if o.outcome in _HARVESTED)
    invalid = _invalid_records(catalog, harvested)
    if invalid:
        return HarvestStatus(
            EXIT_FAIL_ON,
            f"--fail-on invalid: {len(invalid)} invalid record{'s' if len(invalid) != 1 else ''} "
            f"(first: {invalid[0]})",
        )
    return HarvestStatus(EXIT_OK)


def _invalid_records(catalog: CatalogIndex, outcomes: Iterable[UrlOutcome]) -> list[str]:
    """The ids of the invalid records the URLs hold now: those a URL wrote in this run, and
    those an ``unchanged`` URL still holds from an earlier run (unchanged is not fixed)."""
    invalid: list[str] = []
    for outcome in outcomes:
        if outcome.records:
            invalid += [r.record_id for r in outcome.records if not r.valid]
            continue
        state = catalog.get_url(outcome.url)
        for record_id in state.record_ids if state else ():
            entry = catalog.get_record(record_id)
            if entry is not None and not entry.valid:
                invalid.append(record_id)
    return sorted(set(invalid))
