"""The JSON bodies of the catalogue's DynamoDB items, kept under 1 KB for a realistic record.

A write costs one unit per started KB (twice in a transaction), so the bodies hold only what
the item's attributes and keys do not: no field twice, no key that :mod:`cdif_harvester.keys`
derives (a record's ``records/`` and ``reports/`` keys and its views' keys come from its source
and record id), no null and no empty list, short field names in entries and harvest states. A
derived key is left out only when it is exactly what the derivation gives back, so a reader
always gets the value that was written.

Readers take both shapes: items written before these bodies (an outcome body with its
``run_id``, an entry body with its ``record_id``, a state under full names) read as they were.
See docs/decisions/0082-smaller-catalogue-writes.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from cdif_harvester.keys import normalised_record_key, record_hash, record_report_key, view_keys
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RecordRef,
    UrlOutcome,
    UrlState,
    entry_from_dict,
    entry_to_dict,
    outcome_from_dict,
    url_state_from_dict,
    url_state_to_dict,
)

__all__ = [
    "OUTCOME_ATTRIBUTES",
    "entry_body",
    "entry_of",
    "entry_url",
    "outcome_body",
    "outcome_of",
    "record_item",
    "state_body",
    "state_of",
]

# The URL state fields the LATEST item keeps as attributes of their own, outside its ``state``.
OUTCOME_ATTRIBUTES = ("url", "source", "outcome", "last_run", "last_seen")
_ENTRY_DEFAULTS: dict[str, Any] = {"extra": {}, "profiles": {}}
_ENTRY_FIELDS = tuple(f.name for f in fields(CatalogEntry))
# Short names of the entry's fields in a RECORD body: a record's names would take a tenth of
# its write unit (the index entry, the same body plus 100 bytes, must fit in one as well).
_ENTRY_NAMES = {
    "resource_id": "res",
    "url": "url",
    "title": "title",
    "pattern": "pat",
    "valid": "ok",
    "conformance": "conf",
    "date_modified": "mod",
    "sd_date_published": "sdp",
    "content_hash": "hash",
    "record_key": "rec",
    "report_key": "rep",
    "run_id": "run",
    "harvested_at": "at",
    "extra": "x",
    "changed_at": "chg",
    "withdrawn_at": "wd",
    "profiles": "prof",
}
_ENTRY_FIELD_OF = {short: name for name, short in _ENTRY_NAMES.items()}
# Short names of the harvest state's fields in a LATEST item's ``state`` (none is a field name,
# so a state of the earlier shape, under its full names, reads as it is).
_STATE_NAMES = {
    "sitemap": "sm",
    "lastmod": "lm",
    "fingerprint": "fp",
    "blocks": "bl",
    "sd_dates": "sd",
    "record_ids": "ids",
    "withdrawn_at": "wd",
    "harvest_run": "run",
    "validators": "val",
}
_STATE_FIELD_OF = {short: name for name, short in _STATE_NAMES.items()}


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def outcome_body(outcome: UrlOutcome) -> str:
    """The ``body`` of a run's URL item: the outcome less its run (the item's key), URL and
    outcome (attributes of their own), with each record's derivable keys left out."""
    data: dict[str, Any] = {"source": outcome.source}
    if outcome.reason is not None:
        data["reason"] = outcome.reason
    if outcome.pattern is not None:
        data["pattern"] = outcome.pattern
    if outcome.recorded_at is not None:
        data["at"] = outcome.recorded_at
    if outcome.records:
        data["records"] = [_ref_dict(ref, outcome.source) for ref in outcome.records]
    return _dumps(data)


def _ref_dict(ref: RecordRef, source: str) -> dict[str, Any]:
    rhash = record_hash(ref.record_id)
    data: dict[str, Any] = {"id": ref.record_id, "resource": ref.resource_id, "valid": ref.valid}
    if ref.errors:
        data["errors"] = list(ref.errors)
    if ref.profiles:
        data["profiles"] = list(ref.profiles)
    if ref.record_key != normalised_record_key(source, rhash):
        data["record"] = ref.record_key  # null (not normalised) or a key of another source
    if ref.report_key != record_report_key(source, rhash):
        data["report"] = ref.report_key
    if ref.view_keys:
        # true: every view, at the keys keys.view_keys gives
        derived = ref.view_keys == view_keys(source, rhash)
        data["views"] = True if derived else dict(ref.view_keys)
    return data


def outcome_of(item: Mapping[str, Any], run_id: str) -> UrlOutcome:
    """The outcome a run's URL item (or an older LATEST item) holds, of either shape.

    Raises KeyError or ValueError on a malformed item.
    """
    data: dict[str, Any] = json.loads(str(item["body"]))
    if "run_id" in data:  # written before the compact bodies: the whole outcome
        return outcome_from_dict(data)
    source = str(data["source"])
    return UrlOutcome(
        run_id=run_id,
        source=source,
        url=str(item["url"]),
        outcome=Outcome(str(item["outcome"])),
        reason=data.get("reason"),
        pattern=data.get("pattern"),
        records=tuple(_ref_of(ref, source) for ref in data.get("records") or ()),
        recorded_at=data.get("at"),
    )


def _ref_of(data: Mapping[str, Any], source: str) -> RecordRef:
    record_id = str(data["id"])
    rhash = record_hash(record_id)
    views = data.get("views") or {}
    return RecordRef(
        record_id=record_id,
        resource_id=str(data["resource"]),
        valid=bool(data["valid"]),
        errors=tuple(str(e) for e in data.get("errors") or ()),
        record_key=data["record"] if "record" in data else normalised_record_key(source, rhash),
        report_key=str(data["report"]) if "report" in data else record_report_key(source, rhash),
        view_keys=view_keys(source, rhash) if views is True else dict(views),
        profiles=tuple(str(p) for p in data.get("profiles") or ()),
    )


def entry_body(entry: CatalogEntry) -> str:
    """The ``body`` of a RECORD item, under short field names: the entry less its record id (an
    attribute) and source (in the index key), its derivable keys, ``changed_at`` when it is
    ``harvested_at``, nulls and empty maps."""
    rhash = record_hash(entry.record_id)
    data = entry_to_dict(entry)
    del data["record_id"], data["source"]
    if entry.record_key == normalised_record_key(entry.source, rhash):
        del data["record_key"]
    if entry.report_key == record_report_key(entry.source, rhash):
        del data["report_key"]
    if entry.changed_at == entry.harvested_at:
        del data["changed_at"]
    elif entry.changed_at is None:
        data["changed_at"] = None  # kept: a missing one says "when harvested"
    for name, value in list(data.items()):
        if name in ("record_key", "changed_at"):
            continue  # null here says "none": a missing one says "derived"
        if value is None or (name in _ENTRY_DEFAULTS and not value):
            del data[name]
    return _dumps({_ENTRY_NAMES[name]: value for name, value in data.items()})


def record_item(entry: CatalogEntry) -> dict[str, str]:
    """The ``RECORD`` item of ``entry`` (what ``DynamoCatalog.put_record`` puts)."""
    return {
        "pk": f"RECORD#{record_hash(entry.record_id)}",
        "sk": "RECORD",
        "record_id": entry.record_id,
        "gsi1pk": f"SOURCE#{entry.source}",
        # (the index needs no record hash to tell entries apart: its keys need not be unique;
        # records() sorts by record id, and a page of records_page starts after the last
        # entry's whole key, its table key included)
        "gsi1sk": f"RECORD#{entry.changed_at or entry.harvested_at}",
        # Stored as a JSON document: DynamoDB cannot hold floats or empty strings everywhere,
        # and the entry is read whole anyway (less what the item's keys say).
        "body": entry_body(entry),
    }


def entry_of(item: Mapping[str, Any]) -> CatalogEntry:
    """The entry a RECORD item holds, of either shape. Raises TypeError, KeyError or ValueError
    on a malformed item."""
    body: dict[str, Any] = json.loads(str(item["body"]))
    if "record_id" in body:  # written before the compact bodies: the whole entry
        return entry_from_dict(body)
    data = {_ENTRY_FIELD_OF[short]: value for short, value in body.items()}
    record_id = str(item["record_id"])
    source = str(item["gsi1pk"]).removeprefix("SOURCE#")
    rhash = record_hash(record_id)
    data["record_id"] = record_id
    data["source"] = source
    data.setdefault("record_key", normalised_record_key(source, rhash))
    data.setdefault("report_key", record_report_key(source, rhash))
    data.setdefault("changed_at", data.get("harvested_at"))
    for name in _ENTRY_FIELDS:
        if name not in data:
            default = _ENTRY_DEFAULTS.get(name)
            data[name] = dict(default) if default is not None else None
    return entry_from_dict(data)


def entry_url(item: Mapping[str, Any]) -> str | None:
    """The URL a RECORD item's entry names (either shape), without reading the rest of it;
    None when the item names none or cannot be read."""
    try:
        body = json.loads(str(item["body"]))
    except (KeyError, ValueError):
        return None
    url = body.get("url") if isinstance(body, dict) else None
    return url if isinstance(url, str) and url else None


def state_body(state: UrlState) -> str:
    """The ``state`` of a LATEST item, under short field names: the harvest state less the
    outcome attributes, nulls and empty lists (read back as their defaults, see
    :func:`state_of`)."""
    return _dumps(
        {
            _STATE_NAMES[name]: value
            for name, value in url_state_to_dict(state).items()
            if name not in OUTCOME_ATTRIBUTES and value not in (None, (), [])
        }
    )


def state_of(item: Mapping[str, Any]) -> UrlState:
    """The state of a LATEST item (either shape: its ``state`` read with defaults, its outcome
    attributes beside it)."""
    stored: dict[str, Any] = json.loads(str(item.get("state") or "{}"))
    harvest = {_STATE_FIELD_OF.get(name, name): value for name, value in stored.items()}
    # (the source is the index key's, for an item written without it)
    source = item.get("source") or str(item.get("gsi1pk") or "").removeprefix("SOURCE#")
    return url_state_from_dict(
        {
            **harvest,
            "url": str(item["url"]),
            "source": str(source),
            "outcome": item.get("outcome"),
            "last_run": item.get("last_run"),
            "last_seen": item.get("last_seen") or None,
        }
    )
