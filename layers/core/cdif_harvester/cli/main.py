"""``cdif-harvest``: harvest CDIF metadata on one machine, or serve and harvest the demo site.

Commands (``cdif-harvest COMMAND --help`` lists the options of each):

* ``harvest URL [URL ...] --out DIR``, or ``harvest --source ID --out DIR [URL]``: harvest
  robots.txt, sitemap or single page URLs, or a registered source, into DIR in one run.
* ``catalog --out DIR record ID | records | urls``: query the catalogue of DIR (JSON lines).
* ``source add|update|list|show|remove``, ``run status|list``, ``schedule``: the sources
  registry, harvest runs and scheduled harvests of DIR (see :mod:`.sources`).
* ``dlq redrive --queue STAGE --stack NAME``: move a stage's (or the renderer's) dead-lettered
  jobs back to its queue on AWS (see :mod:`.dlq` and docs/deploy.md).
* ``invoke FUNCTION --event FILE``: run one Lambda handler against moto (see :mod:`.invoke`).
* ``check FILE|URL [--json]``: judge one document or landing page, writing nothing.
* ``view --out DIR ID [--view NAME]``, ``history --out DIR ID``: a record's views, versions.
* ``demo [--out DIR]``: serve the bundled demo publisher site on 127.0.0.1 and harvest it.

Exit status of a harvest: 0 ran, 1 by ``--fail-on``, 2 usage error, 3 entry URL unreadable or
nothing harvested (:mod:`.exit_status`); ``catalog record`` exits 1 when there is no such record;
130 after Ctrl-C (SIGINT) and 143 after SIGTERM, with one line on stderr and the run marked
``interrupted``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from cdif_harvester import __version__
from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.cli import check, dlq, invoke, view
from cdif_harvester.cli.exit_status import DEFAULT_FAIL_ON, EPILOG, FAIL_ON, harvest_status
from cdif_harvester.cli.options import add_out, check_out, iso_date, source_keys
from cdif_harvester.cli.processes import MAX_PROCESSES, default_processes
from cdif_harvester.cli.progress import LiveProgress, ProgressOut, progress_for
from cdif_harvester.cli.runner import (
    DEFAULT_WORKERS,
    HarvestInterrupted,
    HarvestSummary,
    LocalHarvester,
    Terminated,
)
from cdif_harvester.cli.sources import add_parsers as add_source_parsers
from cdif_harvester.cli.sources import run_command as run_source_command
from cdif_harvester.cli.sources import source_harvest_settings
from cdif_harvester.contact import CONTACT_ENV, InvalidContact, check_contact
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.records.shacl import ShaclUnavailable
from cdif_harvester.domain.records.validation import profile_query
from cdif_harvester.errors import PermanentError
from cdif_harvester.local_runtime import CATALOG_FILE
from cdif_harvester.model import (
    VERDICTS,
    Outcome,
    entry_to_dict,
    url_state_to_dict,
)
from cdif_harvester.settings import Settings
from cdif_harvester.stages.intake import InvalidEntryUrl, InvalidOptions

__all__ = ["main"]

DEMO_PORT = 8765


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdif-harvest",
        description="Harvest CDIF dataset metadata: discover, resolve, normalise, validate, "
        "store, and publish PID Kernel and Signposting views.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    harvest = commands.add_parser(
        "harvest",
        help="harvest robots.txt, sitemap or page URLs (several hosts in parallel)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    harvest.add_argument(
        "urls",
        metavar="URL",
        nargs="*",
        help="robots.txt, sitemap (index) or landing page URL; several are harvested together "
        "in one run",
    )
    harvest.add_argument(
        "--source",
        metavar="ID",
        help="harvest this registered source of --out (see 'cdif-harvest source'); a URL given "
        "as well must be on one of its hosts and is harvested instead of its entry URL",
    )
    harvest.add_argument("--out", required=True, type=Path, help="output directory")
    harvest.add_argument(
        "--allow-loopback",
        action="store_true",
        help="allow fetching from 127.0.0.0/8 and ::1 (for local test sites only)",
    )
    harvest.add_argument(
        "--per-host",
        type=_positive,
        default=Settings.requests_per_host,
        metavar="N",
        help="requests in flight at once per host (default %(default)s)",
    )
    harvest.add_argument(
        "--host-slots",
        type=_host_slots,
        action="append",
        default=[],
        metavar="HOST=N",
        help="another --per-host for one host (host name or origin); may be repeated",
    )
    harvest.add_argument(
        "--workers",
        type=_positive,
        default=DEFAULT_WORKERS,
        metavar="N",
        help="fetching jobs running at once, over all hosts (default %(default)s)",
    )
    harvest.add_argument(
        "--processes",
        type=_processes,
        default=default_processes(),
        metavar="N",
        help="processes reading the documents (extraction and validation): 1 reads them in "
        f"this one, N from 2 to {MAX_PROCESSES} in N others (default %(default)s: the cores)",
    )
    harvest.add_argument(
        "--format-parameter",
        nargs="?",
        const="format=CDIF1.0",
        metavar="NAME=VALUE",
        help="the publisher is a metadata server that answers CDIF for this query parameter "
        "(CDIF metadata publication, Option 2): ask each URL with it first "
        "(default when given without a value: %(const)s)",
    )
    harvest.add_argument(
        "--trust-context",
        action="append",
        default=[],
        metavar="URL",
        help="a remote JSON-LD context that may be fetched (a URL, or a prefix ending in /); "
        "may be repeated. Others are never fetched",
    )
    harvest.add_argument(
        "--operator-contact",
        type=_contact,
        metavar="URL",
        help="your contact, named in the User-Agent so that publishers can reach you: an "
        f"http(s) URL or e-mail address (default: ${CONTACT_ENV}, else the project's page)",
    )
    harvest.add_argument(
        "--full-refresh",
        action="store_true",
        help="ignore what earlier harvests into --out hold: fetch, normalise and rewrite every "
        "record (by default unchanged URLs and records are skipped, each with the outcome "
        "'unchanged' and its reason)",
    )
    harvest.add_argument(
        "--shacl",
        action="store_true",
        help="also validate every record with our SHACL shapes (needs pyshacl, the 'shacl' "
        "extra: pip install 'pyshacl>=0.26'); violations count as errors",
    )
    harvest.add_argument(
        "--render",
        choices=("fallback", "always"),
        help="render landing pages in headless Chromium (every request through the address "
        "policy and the host gate) when they yield no metadata as served (fallback) or always; "
        "by default only sources whose 'render' option asks for it are rendered",
    )
    harvest.add_argument(
        "--keep-bodies",
        action="store_true",
        help="keep every document fetched under raw/ (with its provenance) and every answer "
        "with a validator under cache/; by default neither is kept (only sources whose "
        "'keep_bodies' option asks for it), and conditional requests use the validators in "
        "the catalogue",
    )
    harvest.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default=DEFAULT_FAIL_ON,
        help="what makes the exit status non-zero: 'empty' (default) an unreadable entry URL or "
        "nothing harvested (3); 'failed' also a URL that failed or was blocked (1); 'invalid' "
        "also an invalid record (1); 'never' exit 0 whenever the harvest ran",
    )
    _output_options(harvest)

    catalog = commands.add_parser(
        "catalog",
        help="query the catalogue of an output directory (JSON lines on stdout)",
    )
    add_out(catalog)
    queries = catalog.add_subparsers(dest="query", required=True)
    record = queries.add_parser(
        "record", help="one record's entry, by metadata record id or by the resource's DOI/id"
    )
    add_out(record)
    record.add_argument("record_id", metavar="ID")
    records = queries.add_parser(
        "records", help="record entries, by source, change date, CDIF profile and verdict"
    )
    add_out(records)
    records.add_argument("--source", help=_SOURCE_HELP)
    records.add_argument(
        "--changed-since",
        metavar="DATE",
        type=iso_date,
        help="only records changed at or after this ISO 8601 date or date-time",
    )
    records.add_argument(
        "--profile",
        metavar="PROFILE",
        help="only records judged by this CDIF profile: discovery/1.1, discovery (any version) "
        "or a conformance URI",
    )
    records.add_argument(
        "--verdict",
        choices=VERDICTS,
        help="only records with this verdict (of --profile when given, else the record's own)",
    )
    urls = queries.add_parser("urls", help="harvested URLs of a source, by latest outcome")
    add_out(urls)
    urls.add_argument("--source", required=True, help=_SOURCE_HELP)
    urls.add_argument("--outcome", choices=[o.value for o in Outcome], help="latest outcome")

    add_source_parsers(commands)
    dlq.add_parser(commands)
    invoke.add_parser(commands)
    check.add_parser(commands)
    view.add_parsers(commands)

    demo = commands.add_parser("demo", help="serve the bundled demo site and harvest it")
    demo.add_argument("--out", type=Path, default=Path("demo-out"), help="output directory")
    demo.add_argument(
        "--port",
        type=int,
        default=DEMO_PORT,
        help=f"port of the demo site on 127.0.0.1 (default {DEMO_PORT}, so record ids stay the "
        "same from one demo run to the next; 0 picks a free port)",
    )
    _output_options(demo)
    return parser


_SOURCE_HELP = "the source: host, host:port, origin URL, or a registered source's id"
# The commands that read or write an output directory.
_WITH_OUT = frozenset({"harvest", "catalog", "source", "run", "schedule", "demo", *view.COMMANDS})


def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--views",
        action="store_true",
        help="also write each valid record's views as files under views/ (by default they are "
        "made when asked for: 'cdif-harvest view')",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="stderr only for errors (stdout: the summary)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also every URL's outcome as it settles"
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _processes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if not 1 <= value <= MAX_PROCESSES:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_PROCESSES}, not {value}")
    return value


def _contact(text: str) -> str:
    try:
        return check_contact(text)
    except InvalidContact as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _host_slots(text: str) -> tuple[str, int]:
    host, sep, count = text.rpartition("=")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST=N, not {text!r}")
    try:
        return host, _positive(count)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected HOST=N, not {text!r}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Ctrl-C (SIGINT) and SIGTERM stop it with one line on stderr, no traceback, and the status
    130 or 143; a harvest under way is marked ``interrupted`` first.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in _WITH_OUT and (problem := check_out(parser, args)):
        print(f"cdif-harvest: {problem}", file=sys.stderr)
        return 2
    progress: ProgressOut | None = None
    if not getattr(args, "quiet", True):
        progress = progress_for(sys.stderr, verbose=getattr(args, "verbose", False))
    with _sigterm_stops():
        try:
            return _command(args, progress)
        except HarvestInterrupted as stop:
            _close(progress)
            print(f"cdif-harvest: {stop}", file=sys.stderr)
            return stop.exit_status
        except KeyboardInterrupt as stop:
            _close(progress)
            print("cdif-harvest: interrupted", file=sys.stderr)
            return 143 if isinstance(stop, Terminated) else 130
        finally:
            _close(progress)


def _close(progress: ProgressOut | None) -> None:
    """Clear a live progress line, so what is printed next starts on a clean line."""
    if isinstance(progress, LiveProgress):
        progress.close()


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """Have SIGTERM raise Terminated in the main thread (as SIGINT raises KeyboardInterrupt)
    while the command runs; the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command(args: argparse.Namespace, progress: Any) -> int:
    """Run the command ``args`` names; return its exit status."""
    if args.command == "harvest":
        return _harvest(args, progress)
    if args.command in ("source", "run", "schedule"):
        return run_source_command(args)
    if args.command == dlq.COMMAND:
        return dlq.run(args)
    if args.command == invoke.COMMAND:
        return invoke.run(args)
    if args.command == check.COMMAND:
        return check.run(args)
    if args.command in view.COMMANDS:
        return view.run(args)
    if args.command == "catalog":
        return _query_catalog(args)
    if args.command == "demo":
        try:
            site = PublisherSite(demo_site_dir(), port=args.port).start()
        except OSError as exc:
            print(
                f"cdif-harvest: port {args.port} unavailable ({exc}); using a free port",
                file=sys.stderr,
            )
            site = PublisherSite(demo_site_dir(), port=0).start()
        with site:
            if progress is not None:
                print(f"demo publisher site serving at {site.base_url}", file=progress)
            with LocalHarvester(
                args.out, allow_loopback=True, progress=progress, views=args.views
            ) as harvester:
                summary = harvester.harvest(site.url("/robots.txt"))
                status = harvest_status(harvester.catalog, summary.run_id, summary.entry_urls)
                shown = view.hint(harvester.catalog, args.out) if progress else None
        code = _print_summary(summary, args.out, progress, status.code, status.reason)
        if shown:
            print(shown, file=sys.stderr)
        return code
    return 2  # pragma: no cover - argparse enforces the commands


def _harvest(args: argparse.Namespace, progress: Any) -> int:
    """``harvest``: entry URLs, or a registered source (with its politeness and options)."""
    if not args.urls and not args.source:
        print("cdif-harvest: give at least one URL, or --source ID", file=sys.stderr)
        return 2
    if args.source and len(args.urls) > 1:
        print("cdif-harvest: --source takes at most one URL", file=sys.stderr)
        return 2
    source_settings: dict[str, Any] = {}
    if args.source:
        catalog = SqliteCatalog(args.out / CATALOG_FILE)
        try:
            source = catalog.get_source(args.source)
        finally:
            catalog.close()
        if source is None:
            print(f"cdif-harvest: no source {args.source!r} in {args.out}", file=sys.stderr)
            return 2
        source_settings = source_harvest_settings(source)
    overrides = {**source_settings.pop("host_overrides", {}), **dict(args.host_slots)}
    try:
        with LocalHarvester(
            args.out,
            allow_loopback=args.allow_loopback,
            progress=progress,
            workers=args.workers,
            processes=args.processes,
            requests_per_host=args.per_host,
            host_overrides=overrides,
            trusted_contexts=args.trust_context,
            incremental=not args.full_refresh,
            shacl=args.shacl,
            contact=args.operator_contact,
            render=args.render,
            keep_bodies=args.keep_bodies,
            views=args.views,
            **source_settings,
        ) as harvester:
            if args.source:
                summary = harvester.harvest_source(
                    args.source, entry_url=args.urls[0] if args.urls else None
                )
            else:
                options = {"format_parameter": args.format_parameter}
                summary = harvester.harvest(
                    args.urls, options=options if args.format_parameter else None
                )
            status = harvest_status(
                harvester.catalog, summary.run_id, summary.entry_urls, args.fail_on
            )
    except (
        InvalidEntryUrl,
        InvalidOptions,
        ShaclUnavailable,
        PermanentError,
        InvalidContact,
    ) as exc:
        _close(progress)
        print(f"cdif-harvest: {exc}", file=sys.stderr)
        return 2
    return _print_summary(summary, args.out, progress, status.code, status.reason)


def _query_catalog(args: argparse.Namespace) -> int:
    """Print the entries a catalogue query selects, one JSON object per line."""
    path = args.out / CATALOG_FILE
    if not path.is_file():
        print(f"cdif-harvest: no catalogue in {args.out} (harvest into it first)", file=sys.stderr)
        return 2
    catalog = SqliteCatalog(path)
    try:
        if args.query == "record":
            entries = view.record_entries(catalog, args.record_id)
            if not entries:
                print(
                    f"cdif-harvest: no record with id or resource identifier {args.record_id!r}",
                    file=sys.stderr,
                )
                return 1
            rows: list[dict[str, Any]] = [entry_to_dict(entry) for entry in entries]
        else:
            try:
                sources = _sources(catalog, args.source)
                query = (
                    profile_query(args.profile, args.verdict) if args.query == "records" else None
                )
            except ValueError as exc:
                print(f"cdif-harvest: {exc}", file=sys.stderr)
                return 2
            if args.query == "records":
                found = {
                    e.record_id: e
                    for source in sources
                    for e in catalog.records(source, changed_since=args.changed_since, query=query)
                }
                rows = [entry_to_dict(found[key]) for key in sorted(found)]
            else:
                states = {
                    s.url: s
                    for source in sources
                    if source is not None  # (--source is required here)
                    for s in catalog.urls(source, outcome=args.outcome)
                }
                rows = [url_state_to_dict(states[key]) for key in sorted(states)]
    finally:
        catalog.close()
    for row in rows:
        print(json.dumps(row, ensure_ascii=False, sort_keys=True))
    return 0


def _sources(catalog: SqliteCatalog, wanted: str | None) -> list[str | None]:
    """The catalogue's source keys ``--source`` names (every source when not given)."""
    if wanted is None:
        return [None]
    known = catalog.source_names()
    keys = source_keys(wanted, catalog.get_source(wanted), known)
    if not set(keys) & set(known):  # a typo, most likely: say what there is
        print(
            f"cdif-harvest: no URLs of source {wanted!r} in the catalogue "
            f"(sources: {', '.join(known) or 'none'})",
            file=sys.stderr,
        )
    return list(keys)


def _print_summary(
    summary: HarvestSummary,
    out: Path,
    progress: ProgressOut | None,
    code: int,
    reason: str | None,
) -> int:
    """Print the summary (JSON on stdout; one human line on stderr unless quiet) and why the
    exit status is not 0 (even when quiet: it is an error); return ``code``."""
    _close(progress)
    data = summary.to_dict()
    print(json.dumps(data, indent=2))
    if progress is not None:
        print(
            f"\n{summary.urls} URLs: "
            + ", ".join(f"{n} {k}" for k, n in data["outcomes"].items() if n)
            + f"; {summary.records} records ({summary.valid_records} valid, "
            f"{summary.invalid_records} invalid); details in {out / 'outcomes.jsonl'}",
            file=sys.stderr,
        )
    if reason:
        print(f"cdif-harvest: {reason}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
