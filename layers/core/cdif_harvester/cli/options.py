"""Options several commands share, read the same way everywhere.

``--out`` is accepted on a command group and on each of its subcommands (:func:`add_out`,
:func:`check_out`); a source is named by host, host:port, origin URL, internal key or registered
source id (:func:`source_keys`); a date is checked before it is used (:func:`iso_date`); a record
is found by its id or by its resource's identifier (:func:`resource_ids`).

See docs/decisions/0069-cli-exit-codes-and-progress.md.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Collection
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import urlsplit

from cdif_harvester.keys import source_of
from cdif_harvester.model import Source

__all__ = ["add_out", "check_out", "iso_date", "resource_ids", "source_keys"]

OUT_HELP = "output directory (may be given before or after the subcommand)"
_DOI_RESOLVER = "https://doi.org/"
_ANY_PORT = re.compile(r"(?:_[0-9]+)?")


def add_out(parser: argparse.ArgumentParser) -> None:
    """Add ``--out DIR`` to ``parser``, not required there: a group and its subcommands each
    take it, and :func:`check_out` requires it once the whole line is parsed."""
    # SUPPRESS: a subcommand that was not given --out must not reset the group's value.
    parser.add_argument("--out", type=Path, default=argparse.SUPPRESS, help=OUT_HELP)


def check_out(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """Require ``--out`` (argparse's usage error, exit status 2); return why the ``--out``
    given cannot be an output directory (it, or a folder above it, is a file), or None."""
    out: Path | None = getattr(args, "out", None)
    if out is None:
        parser.error("the following arguments are required: --out")
    for folder in (out, *out.parents):
        if folder.exists():
            if folder.is_dir():
                return None
            return f"--out {out}: {folder} is a file, not a directory"
    return None


def iso_date(text: str) -> str:
    """An argparse type: an ISO 8601 date or date-time, returned in the form the catalogue
    compares (a date as given; a date-time in UTC, to the second; a naive one is UTC)."""
    try:
        if len(text) == 10:
            return date.fromisoformat(text).isoformat()
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 date or date-time: {text!r} (e.g. 2026-11-01 or 2026-11-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def source_keys(
    text: str, registered: Source | None = None, known: Collection[str] = ()
) -> list[str]:
    """The catalogue's source keys ``text`` names: a host, host:port, origin URL or internal
    key (``127.0.0.1_8765``); a host without a port also names that host on any port among the
    ``known`` keys (as a source's host without a port allows any port); when ``registered``
    (the source of that id) is given, its hosts too. Raises ValueError for text that names no
    host."""
    text = text.strip()
    key = _host_key(text)
    keys = {key}
    if "://" not in text and urlsplit(f"//{text}").port is None:
        keys |= {k for k in known if k.startswith(key) and _ANY_PORT.fullmatch(k[len(key) :])}
    if registered is not None:
        keys |= {_host_key(host) for host in (registered.entry_url, *registered.hosts)}
    return sorted(keys)


def _host_key(text: str) -> str:
    if "://" in text:
        return source_of(text)
    try:
        port = urlsplit(f"//{text}").port
    except ValueError as exc:
        raise ValueError(f"not a host, host:port or URL: {text!r}") from exc
    # Keys drop the scheme's default port; without a scheme, 80 and 443 are both defaults.
    scheme = "http" if port == 80 else "https"
    return source_of(f"{scheme}://{text}")


def resource_ids(text: str) -> list[str]:
    """The spellings of a resource identifier to look up: as given, and a DOI given as
    ``doi:10...``, ``10...`` or through another resolver address also as ``https://doi.org/10...``
    (the form records carry)."""
    ids = [text]
    lowered = text.lower()
    for prefix in ("doi:", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", ""):
        rest = text[len(prefix) :] if lowered.startswith(prefix) else None
        if rest is not None and rest.startswith("10.") and "/" in rest:
            ids.append(_DOI_RESOLVER + rest)
            break
    return list(dict.fromkeys(ids))
