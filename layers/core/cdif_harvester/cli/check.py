"""``cdif-harvest check FILE|URL``: judge one metadata document or landing page before publishing.

A FILE (``-`` for standard input) is read whole and sniffed (JSON-LD or HTML with embedded
JSON-LD); a URL is fetched and resolved as a harvest would (Signposting, linksets, describedby,
embedded scripts), through the same safe fetcher: private addresses are refused unless
``--allow-loopback`` lets 127.0.0.0/8 and ::1 through. Nothing is written anywhere. Prints the
verdict, every record's errors, warnings and per-profile verdicts with their fixes as text, or
as JSON with ``--json`` (the body ``POST /check`` answers too).

Exit status: 0 valid; 1 invalid, no metadata or malformed JSON; 2 when nothing could be judged
(usage errors, an unreadable file, a URL that could not be read, SHACL without pyshacl).
See docs/decisions/0072-the-publisher-checker.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.domain.records.shacl import ShaclUnavailable
from cdif_harvester.local_runtime import check_wiring
from cdif_harvester.report.model import PATTERN_MEANINGS, printable
from cdif_harvester.stages.check import (
    FAILED,
    VALID,
    CheckedIssue,
    CheckReport,
    check_document,
    check_url,
)

__all__ = [
    "COMMAND",
    "EXIT_INVALID",
    "EXIT_UNCHECKED",
    "EXIT_VALID",
    "UnreadableFile",
    "add_parser",
    "render_text",
    "run",
]

COMMAND = "check"
EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNCHECKED = 2
# A file larger than the harvester's document cap would not be read by a harvest either.
_MAX_FILE_BYTES = 10 * 1024 * 1024


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``check`` to ``subparsers`` of the main parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        COMMAND,
        help="check one metadata document or landing page as the harvester would read it",
        description="Validate one JSON-LD document, HTML page or URL as a harvest would, and "
        "print the verdict, errors, warnings and fixes. Writes nothing. Exit status: 0 valid, "
        "1 invalid, no metadata or malformed, 2 nothing judged (usage, unreadable file or URL).",
    )
    parser.add_argument(
        "target",
        metavar="FILE|URL",
        help="a JSON-LD or HTML file ('-' for standard input), or an http(s) URL",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--url",
        dest="base",
        metavar="URL",
        help="for a FILE: the URL it will be published at (relative ids resolve against it)",
    )
    parser.add_argument(
        "--allow-loopback",
        action="store_true",
        help="allow fetching from 127.0.0.0/8 and ::1 (for local test sites only)",
    )
    parser.add_argument(
        "--shacl",
        action="store_true",
        help="also validate with our SHACL shapes (needs the 'shacl' extra)",
    )
    return parser


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``check`` with the parsed ``args``; print to ``out`` (stdout); return the status."""
    out = out or sys.stdout
    try:
        report = _check(args)
    except UnreadableFile as exc:
        print(f"cdif-harvest check: {exc}", file=sys.stderr)
        return EXIT_UNCHECKED
    except ShaclUnavailable as exc:
        print(f"cdif-harvest check: {exc}", file=sys.stderr)
        return EXIT_UNCHECKED
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False), file=out)
    else:
        out.write(render_text(report))
    if report.verdict == VALID:
        return EXIT_VALID
    return EXIT_UNCHECKED if report.verdict == FAILED else EXIT_INVALID


class UnreadableFile(Exception):
    """The FILE cannot be read."""


def _check(args: argparse.Namespace) -> CheckReport:
    target: str = args.target
    if target.lower().startswith(("http://", "https://")):
        policy = FetchPolicy(allow_loopback=args.allow_loopback)
        with SafeFetcher(policy) as fetcher, check_wiring(fetcher=fetcher, shacl=args.shacl) as w:
            return check_url(w, target)
    body, url = _read(target)
    with check_wiring(shacl=args.shacl) as wiring:
        return check_document(wiring, body, url=args.base or url)


def _read(target: str) -> tuple[bytes, str]:
    """The bytes of FILE (or standard input) and the URL it is judged at."""
    try:
        if target == "-":
            body = sys.stdin.buffer.read(_MAX_FILE_BYTES + 1)
            url = "stdin:"
        else:
            path = Path(target)
            with path.open("rb") as handle:
                body = handle.read(_MAX_FILE_BYTES + 1)
            url = path.resolve().as_uri()
    except OSError as exc:
        raise UnreadableFile(f"cannot read {target}: {exc.strerror or exc}") from exc
    if len(body) > _MAX_FILE_BYTES:
        raise UnreadableFile(
            f"{target} is larger than {_MAX_FILE_BYTES} bytes, the harvester's document cap"
        )
    return body, url


def render_text(report: CheckReport) -> str:
    """The report for people: the verdict first, then each record, then what was noted."""
    data = report.to_dict()
    counts = data["counts"]
    lines = [f"{printable(report.target)}: {report.verdict}"]
    if report.pattern:
        meaning = PATTERN_MEANINGS.get(report.pattern, "")
        lines.append(f"  found by: {report.pattern}" + (f" ({meaning})" if meaning else ""))
    if report.reason:
        lines.append(f"  why: {printable(report.reason)}")
    if report.fix:
        lines.append(f"  fix: {printable(report.fix)}")
    for record in report.records:
        lines.append("")
        lines.append(f"record {printable(record.record_id)}: {record.verdict}")
        if record.resource_id != record.record_id:
            lines.append(f"  describes: {printable(record.resource_id)}")
        for profile in record.profiles:
            lines.append(f"  {profile.summary}")
            if profile is not record.profiles[0]:
                lines.extend(_issues(profile.errors, "    "))
        if record.errors:
            lines.append(f"  errors ({len(record.errors)}):")
            lines.extend(_issues(record.errors, "    "))
        if record.warnings:
            lines.append(f"  warnings ({len(record.warnings)}):")
            lines.extend(_issues(record.warnings, "    "))
        lines.extend(f"  repaired: {printable(text)}" for text in record.repairs)
        lines.extend(f"  note: {printable(text)}" for text in record.notes)
    if report.skipped:
        lines.append("")
        lines.extend(f"skipped block: {printable(text)}" for text in report.skipped)
    if report.notes:
        lines.append("")
        lines.extend(f"note: {printable(text)}" for text in report.notes)
    lines.append("")
    lines.append(
        f"verdict: {report.verdict} ({counts['records']} record(s), {counts['invalid']} "
        f"invalid; {counts['errors']} error(s), {counts['profile_errors']} profile error(s), "
        f"{counts['warnings']} warning(s))"
    )
    return "\n".join(lines) + "\n"


def _issues(issues: tuple[CheckedIssue, ...], indent: str) -> list[str]:
    lines: list[str] = []
    for issue in issues:
        where = f"{issue.pointer}: " if issue.pointer else ""
        lines.append(f"{indent}{printable(where + issue.message)}")
        if issue.fix:
            lines.append(f"{indent}  fix: {printable(issue.fix)}")
    return lines
