"""Incremental harvesting: how a harvest tells that a URL or a record has not changed.

A URL that has not changed ends ``unchanged`` with the first reason that applies, each checked as
early in the pipeline as it can be known: ``lastmod``, ``not-modified``, ``content-hash``
(:func:`fingerprint`, :func:`block_hash`) or ``sd-date-published``. A record whose
:func:`record_digest` matches the held entry is not rewritten.

See docs/decisions/0018-incremental-harvesting.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cdif_harvester.domain.discovery.lastmod import parse_lastmod

__all__ = [
    "block_hash",
    "fingerprint",
    "lastmod_not_newer",
    "lastmod_reason",
    "record_digest",
    "sd_dates",
]

_SD_DATE_KEYS = frozenset(
    {"sdDatePublished", "schema:sdDatePublished", "http://schema.org/sdDatePublished"}
)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def fingerprint(pattern: str, document_keys: Iterable[str]) -> str:
    """Return the fingerprint of what a URL resolved to: the pattern and the documents' keys.

    Raw document keys are content-addressed (:func:`cdif_harvester.keys.raw_key`), so equal
    fingerprints mean the same pattern found byte-identical documents at the same URLs.
    """
    text = "\n".join([pattern, *document_keys])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lastmod_not_newer(new: str | None, held: str | None) -> bool:
    """Whether sitemap lastmod ``new`` is known and not later than ``held``.

    False when either is missing or unreadable: without both dates nothing can be skipped.
    """
    new_time, held_time = parse_lastmod(new), parse_lastmod(held)
    if new_time is None or held_time is None:
        return False
    return new_time <= held_time


def lastmod_reason(new: str | None, held: str | None) -> str:
    """The reason recorded for a URL skipped because its sitemap lastmod is not newer."""
    return (
        f"lastmod: the sitemap's lastmod {new} is not newer than {held}, when its records "
        "were harvested (nothing fetched)"
    )


def block_hash(data: Any) -> str:
    """Return the SHA-256 of a parsed JSON-LD block in canonical form (sorted keys, no spaces)."""
    return hashlib.sha256(_canonical(data)).hexdigest()


def sd_dates(data: Any) -> tuple[str, ...]:
    """Return every ``sdDatePublished`` value in a parsed JSON-LD block (any prefix), sorted."""
    found: set[str] = set()
    # A walk with a list of nodes still to visit, leaves skipped where they are met: a block is
    # mostly strings, and a call (or an abstract-class check) per string was most of the cost.
    pending = [data]
    while pending:
        value = pending.pop()
        if type(value) in _LEAVES:
            continue
        if isinstance(value, list):
            pending.extend(item for item in value if type(item) not in _LEAVES)
        elif type(value) is dict or isinstance(value, Mapping):
            for key, item in value.items():
                if key in _SD_DATE_KEYS:
                    found.update(_dates_of(item))
                elif type(item) not in _LEAVES:
                    pending.append(item)
    return tuple(sorted(found))


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _dates_of(item: Any) -> Iterator[str]:
    for entry in item if isinstance(item, list) else [item]:
        date = entry.get("@value") if isinstance(entry, Mapping) else entry
        if isinstance(date, str) and date.strip():
            yield date.strip()


def record_digest(record: Any, report: Mapping[str, Any], links: Any, authority: Any) -> str:
    """Return the hash of everything a stored record and its views are made from.

    The record, the verdict parts of its report (validity, conformance, errors, warnings) and
    the links the resolver saw (the Signposting views merge them in): when this is unchanged,
    nothing the harvest would write differs from what is stored.
    """
    verdict = {
        key: report.get(key)
        for key in ("valid", "conformance", "errors", "warnings", "rules")
        if key in report
    }
    return hashlib.sha256(_canonical([record, verdict, links, authority])).hexdigest()
