"""``cdif-harvest source|run|schedule``: the sources registry and harvest runs of a local
output directory (the same registry and runs the intake API serves on AWS).

* ``source add ID --entry-url URL [--host H ...] [--schedule 1d] [--per-host N]
  [--crawl-delay S] [--format-parameter NAME=VALUE] [--contact C] [--publisher-key K ...]``,
  ``source update ID ...`` (the same options; what is not given is kept), ``source list``,
  ``source show ID``, ``source remove ID``;
* ``run status ID`` (the run's state and counts by outcome), ``run list [--source ID]``;
* ``schedule``: harvest every registered source that is due by its schedule, one after another
  (run it from cron for scheduled harvests on one machine).

Everything prints JSON on stdout; errors go to stderr with exit status 2 (1 for "not found");
``schedule`` exits 3 when a due source's run could not read its entry URL or harvested nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from cdif_harvester.adapters.local import SqliteCatalog, SystemClock
from cdif_harvester.cli.exit_status import EXIT_OK, harvest_status
from cdif_harvester.cli.options import add_out
from cdif_harvester.cli.progress import LiveProgress, progress_for
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.errors import PermanentError
from cdif_harvester.local_runtime import CATALOG_FILE
from cdif_harvester.model import Source, run_to_dict, source_to_dict
from cdif_harvester.stages.sources import check_source, is_due

__all__ = ["add_parsers", "run_command", "source_harvest_settings"]


def add_parsers(commands: Any) -> None:
    """Add the ``source``, ``run`` and ``schedule`` commands to ``commands`` (argparse
    subparsers)."""
    source = commands.add_parser("source", help="manage the registered sources of DIR")
    add_out(source)
    source_commands = source.add_subparsers(dest="source_command", required=True)
    for name, text in (("add", "register a source"), ("update", "change a source")):
        sub = source_commands.add_parser(name, help=text)
        _out(sub)
        sub.add_argument("source_id", metavar="ID", help="the source's name (a-z, 0-9, . _ -)")
        _source_options(sub, required=name == "add")
    for name, text in (
        ("list", "list the sources"),
        ("show", "show one source"),
        ("remove", "remove a source (its records and runs stay)"),
    ):
        sub = source_commands.add_parser(name, help=text)
        _out(sub)
        if name != "list":
            sub.add_argument("source_id", metavar="ID")

    run = commands.add_parser("run", help="harvest runs of DIR: status and list")
    add_out(run)
    run_commands = run.add_subparsers(dest="run_command", required=True)
    status = run_commands.add_parser("status", help="a run's state and counts by outcome")
    _out(status)
    status.add_argument("run_id", metavar="ID")
    listing = run_commands.add_parser("list", help="runs, newest first")
    _out(listing)
    listing.add_argument("--source", help="only the runs of this registered source")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")

    schedule = commands.add_parser(
        "schedule", help="harvest every registered source that is due by its schedule"
    )
    _out(schedule)
    schedule.add_argument(
        "--allow-loopback",
        action="store_true",
        help="allow fetching from 127.0.0.0/8 and ::1 (for local test sites only)",
    )
    schedule.add_argument(
        "-q", "--quiet", action="store_true", help="stderr only for errors (stdout: the result)"
    )
    schedule.add_argument(
        "-v", "--verbose", action="store_true", help="also every URL's outcome as it settles"
    )


def _out(parser: argparse.ArgumentParser) -> None:
    add_out(parser)


def _source_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--entry-url", required=required, help="robots.txt, sitemap or page URL to start from"
    )
    parser.add_argument(
        "--host",
        action="append",
        dest="hosts",
        metavar="HOST",
        help="a host the source may announce (the entry URL's host always counts); repeatable",
    )
    parser.add_argument(
        "--schedule", help="how often to harvest it: 30m, 6h, 1d, 1w... ('none': on demand only)"
    )
    parser.add_argument("--per-host", type=int, help="requests in flight per host (1-16)")
    parser.add_argument("--crawl-delay", type=float, help="seconds between requests (0-60)")
    parser.add_argument("--format-parameter", metavar="NAME=VALUE", help="e.g. format=CDIF1.0")
    parser.add_argument("--contact", help="the publisher's e-mail address or contact URL")
    parser.add_argument(
        "--publisher-key",
        action="append",
        dest="publisher_keys",
        metavar="KEY_ID",
        help="an API key id the publisher calls the intake API with (AWS); repeatable",
    )


def source_harvest_settings(source: Source) -> dict[str, Any]:
    """The LocalHarvester settings a source's politeness asks for, on each of its hosts."""
    hosts = [source.entry_url, *source.hosts]
    names = {_host_name(h) for h in hosts} - {""}
    settings: dict[str, Any] = {}
    if source.requests_per_host is not None:
        settings["host_overrides"] = dict.fromkeys(sorted(names), source.requests_per_host)
    if source.crawl_delay:
        settings["crawl_delays"] = dict.fromkeys(sorted(names), source.crawl_delay)
    return settings


def _host_name(text: str) -> str:
    return (urlsplit(text if "//" in text else f"//{text}").hostname or "").lower()


def run_command(args: argparse.Namespace) -> int:
    """Run ``source``, ``run`` or ``schedule``; return the exit status."""
    path = args.out / CATALOG_FILE
    if args.command == "schedule":
        return _schedule(args)
    if args.command == "run" and not path.is_file():
        print(f"cdif-harvest: no catalogue in {args.out} (harvest into it first)", file=sys.stderr)
        return 2
    catalog = SqliteCatalog(path)
    try:
        if args.command == "source":
            return _source(catalog, args)
        return _run(catalog, args)
    except PermanentError as exc:
        print(f"cdif-harvest: {exc}", file=sys.stderr)
        return 2
    finally:
        catalog.close()


def _source(catalog: SqliteCatalog, args: argparse.Namespace) -> int:
    command = args.source_command
    if command == "list":
        for source in catalog.sources():
            _print(source_to_dict(source))
        return 0
    existing = catalog.get_source(args.source_id)
    if command in ("show", "remove", "update") and existing is None:
        print(f"cdif-harvest: no source {args.source_id!r}", file=sys.stderr)
        return 1
    if command == "show":
        assert existing is not None
        _print(source_to_dict(existing))
        return 0
    if command == "remove":
        catalog.delete_source(args.source_id)
        print(f"removed source {args.source_id}", file=sys.stderr)
        return 0
    if command == "add" and existing is not None:
        print(
            f"cdif-harvest: source {args.source_id!r} exists (use 'source update')", file=sys.stderr
        )
        return 2
    now = SystemClock().now().isoformat(timespec="seconds")
    base = existing or Source(source_id=args.source_id, entry_url=args.entry_url, created_at=now)
    source = check_source(_with_options(base, args, now))
    if existing is None:
        if not catalog.add_source(source):
            print(f"cdif-harvest: source {args.source_id!r} exists", file=sys.stderr)
            return 2
    else:
        catalog.put_source(source)
    _print(source_to_dict(source))
    return 0


def _with_options(source: Source, args: argparse.Namespace, now: str) -> Source:
    changes: dict[str, Any] = {"updated_at": now}
    if args.entry_url is not None:
        changes["entry_url"] = args.entry_url
    if args.hosts is not None:
        changes["hosts"] = tuple(args.hosts)
    if args.schedule is not None:
        changes["schedule"] = None if args.schedule.lower() == "none" else args.schedule
    if args.per_host is not None:
        changes["requests_per_host"] = args.per_host
    if args.crawl_delay is not None:
        changes["crawl_delay"] = args.crawl_delay
    if args.format_parameter is not None:
        changes["options"] = {"format_parameter": args.format_parameter}
    if args.contact is not None:
        changes["contact"] = args.contact
    if args.publisher_keys is not None:
        changes["publisher_keys"] = tuple(args.publisher_keys)
    return replace(source, **changes)


def _run(catalog: SqliteCatalog, args: argparse.Namespace) -> int:
    if args.run_command == "list":
        for listed in catalog.runs(args.source, limit=max(1, args.limit)):
            _print(run_to_dict(listed))
        return 0
    run = catalog.get_run(args.run_id)
    if run is None:
        print(f"cdif-harvest: no run {args.run_id!r} in {args.out}", file=sys.stderr)
        return 1
    _print(run_to_dict(run))
    return 0


def _schedule(args: argparse.Namespace) -> int:
    """Harvest each due source in turn (a source busy with another run is left for later)."""
    path = args.out / CATALOG_FILE
    if not path.is_file():
        print(f"cdif-harvest: no sources in {args.out} (add one first)", file=sys.stderr)
        return 2
    catalog = SqliteCatalog(path)
    try:
        now = SystemClock().now()
        due = [source for source in catalog.sources() if is_due(source, now)]
    finally:
        catalog.close()
    progress = None if args.quiet else progress_for(sys.stderr, verbose=args.verbose)
    results: list[dict[str, Any]] = []
    code = EXIT_OK
    for source in due:
        if isinstance(progress, LiveProgress):
            progress.close()  # each source's run draws its own line
        with LocalHarvester(
            args.out,
            allow_loopback=args.allow_loopback,
            progress=progress,
            **source_harvest_settings(source),
        ) as harvester:
            try:
                summary = harvester.harvest_source(source.source_id, trigger="schedule")
            except PermanentError as exc:
                results.append({"source_id": source.source_id, "error": str(exc)})
                continue
            status = harvest_status(harvester.catalog, summary.run_id, summary.entry_urls)
        result: dict[str, Any] = {"source_id": source.source_id, "run_id": summary.run_id}
        if status.reason:
            # The worst run decides the exit status (3: some source harvested nothing).
            code = max(code, status.code)
            result["error"] = status.reason
            print(f"cdif-harvest: {source.source_id}: {status.reason}", file=sys.stderr)
        results.append(result)
    if isinstance(progress, LiveProgress):
        progress.close()
    _print({"due": [s.source_id for s in due], "runs": results})
    return code


def _print(data: dict[str, Any]) -> None:
    print(json.dumps(data, ensure_ascii=False, sort_keys=True))
