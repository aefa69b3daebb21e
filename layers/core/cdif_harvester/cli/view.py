"""``cdif-harvest view`` and ``cdif-harvest history``: one record of an output directory.

``view --out DIR ID [--view NAME]`` prints one view of a valid record (PID Kernel, the linkset
as JSON or text, the ``Link`` header value, HTML ``<link>`` elements, N-Quads), made from the
stored record and report exactly as the API makes it, or the record itself (``record``) or its
report (``report``). ``ID`` is the metadata record id, the resource's identifier (a DOI in any
spelling) or the URL it was harvested from. ``history --out DIR ID`` lists the versions of the
record kept, the earlier ones by key, the latest last (one JSON object per line).

Exit status: 0 printed; 1 no such record, or no such view of it (an invalid record has none);
2 no catalogue in DIR. See docs/decisions/0081-views-derived-on-read.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cdif_harvester.adapters.local import DirectoryObjectStore, SqliteCatalog
from cdif_harvester.cli.options import add_out, resource_ids
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.errors import HarvestError
from cdif_harvester.local_runtime import CATALOG_FILE
from cdif_harvester.model import CatalogEntry
from cdif_harvester.stages.crosswalk import VIEW_MEDIA_TYPES, stored_record_view
from cdif_harvester.stages.records import record_versions

__all__ = [
    "COMMANDS",
    "HISTORY",
    "VIEW",
    "add_parsers",
    "find_entries",
    "hint",
    "record_entries",
    "run",
]

VIEW = "view"
HISTORY = "history"
COMMANDS = frozenset({VIEW, HISTORY})
# What ``--view`` names besides the views: the stored documents themselves.
_DOCUMENTS = ("record", "report")


def add_parsers(subparsers: Any) -> None:
    """Add ``view`` and ``history`` to ``subparsers`` of the main parser."""
    view: argparse.ArgumentParser = subparsers.add_parser(
        VIEW,
        help="print one view of a record (made from the stored record), or the record itself",
        description="Print one view of a harvested record to stdout, made now from the stored "
        "record and its report (the same bytes the API answers), or the stored record or "
        "report. Views are not stored unless the harvest was run with --views.",
    )
    add_out(view)
    view.add_argument("record", metavar="ID", help=_ID_HELP)
    view.add_argument(
        "--view",
        choices=[*VIEW_MEDIA_TYPES, *_DOCUMENTS],
        default="pid-kernel",
        help="what to print (default %(default)s)",
    )
    history: argparse.ArgumentParser = subparsers.add_parser(
        HISTORY,
        help="list the versions of a record kept (JSON lines, the latest last)",
    )
    add_out(history)
    history.add_argument("record", metavar="ID", help=_ID_HELP)


_ID_HELP = "metadata record id, the resource's identifier (DOI) or the URL harvested"


def record_entries(catalog: SqliteCatalog, wanted: str) -> list[CatalogEntry]:
    """The entry of record ``wanted``; else those of the records of the resource ``wanted``."""
    entry = catalog.get_record(wanted)
    if entry is not None:
        return [entry]
    for resource_id in resource_ids(wanted):
        if entries := catalog.records_of_resource(resource_id):
            return entries
    return []


def find_entries(catalog: SqliteCatalog, wanted: str) -> list[CatalogEntry]:
    """:func:`record_entries`; else the entries of the records harvested from the URL
    ``wanted``."""
    if entries := record_entries(catalog, wanted):
        return entries
    state = catalog.get_url(wanted)
    found = (catalog.get_record(rid) for rid in state.record_ids) if state else ()
    return [entry for entry in found if entry is not None]


def hint(catalog: SqliteCatalog, out: Path) -> str | None:
    """One line saying how to print a view of a valid record of ``catalog`` (None if none)."""
    valid = sorted(entry.record_id for entry in catalog.records() if entry.valid)
    if not valid:
        return None
    return f"a record's views: cdif-harvest view --out {out} {valid[0]} --view linkset-json"


def run(args: argparse.Namespace) -> int:
    """Run ``view`` or ``history``; return the exit status."""
    out: Path = args.out
    if not (out / CATALOG_FILE).is_file():
        print(f"cdif-harvest: no catalogue in {out} (harvest into it first)", file=sys.stderr)
        return 2
    catalog = SqliteCatalog(out / CATALOG_FILE)
    try:
        entries = find_entries(catalog, args.record)
    finally:
        catalog.close()
    if not entries:
        print(f"cdif-harvest: no record {args.record!r} in {out}", file=sys.stderr)
        return 1
    if len(entries) > 1:
        print(
            f"cdif-harvest: {args.record!r} names {len(entries)} records; ask by record id: "
            + ", ".join(entry.record_id for entry in entries),
            file=sys.stderr,
        )
        return 1
    store = DirectoryObjectStore(out)
    if args.command == HISTORY:
        for key, digest, latest in record_versions(store, entries[0]):
            line = {"key": key, "digest": digest, "latest": latest}
            print(json.dumps(line, ensure_ascii=False, sort_keys=True))
        return 0
    return _print_view(store, entries[0], args.view)


def _print_view(store: DirectoryObjectStore, entry: CatalogEntry, view: str) -> int:
    """Write the bytes of ``view`` of ``entry`` to stdout; return the exit status."""
    try:
        if view in _DOCUMENTS:
            key = entry.record_key if view == "record" else entry.report_key
            body = store.get(key) if key else None
        else:
            body = stored_record_view(store, JsonLdContexts(), entry, view)
    except KeyError as exc:
        print(f"cdif-harvest: {exc.args[0]} is missing from the output", file=sys.stderr)
        return 1
    except HarvestError as exc:  # a record that cannot become RDF
        print(f"cdif-harvest: {exc}", file=sys.stderr)
        return 1
    if body is None:
        print(
            f"cdif-harvest: record {entry.record_id!r} is not valid: it has no {view} view "
            "(its report says why: --view report)",
            file=sys.stderr,
        )
        return 1
    sys.stdout.buffer.write(body)
    sys.stdout.buffer.flush()
    return 0
