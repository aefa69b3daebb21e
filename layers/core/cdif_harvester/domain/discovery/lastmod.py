"""W3C datetime (the sitemap ``<lastmod>`` format) parsing.

:func:`parse_lastmod` reads the six granularities of https://www.w3.org/TR/NOTE-datetime, and the
sloppy forms publishers also write, as a UTC datetime; anything else is not a lastmod (None).

See docs/decisions/0017-lenient-lastmod.md.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

__all__ = ["normalise_lastmod", "parse_lastmod"]

_PATTERN = re.compile(
    r"""
    (?P<year>\d{4})
    (?:-(?P<month>\d{2})
      (?:-(?P<day>\d{2})
        (?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})
          (?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?
          (?P<zone>[Zz]|[+-]\d{2}:?\d{2})?
        )?
      )?
    )?
    """,
    re.VERBOSE,
)


def parse_lastmod(text: str | None) -> datetime | None:
    """Parse a W3C datetime into an aware UTC datetime; None when ``text`` is not one."""
    if text is None:
        return None
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        return None
    parts = match.groupdict()
    fraction = (parts["fraction"] or "0")[:6].ljust(6, "0")
    try:
        moment = datetime(
            int(parts["year"]),
            int(parts["month"] or 1),
            int(parts["day"] or 1),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            int(fraction),
            tzinfo=_zone(parts["zone"]),
        )
    except ValueError:  # month 13, 25 o'clock, a zone beyond +-24h ...
        return None
    return moment.astimezone(UTC)


def normalise_lastmod(text: str | None) -> str | None:
    """Return ``text`` as an ISO 8601 UTC timestamp (``2024-05-01T00:00:00Z``), or None."""
    moment = parse_lastmod(text)
    if moment is None:
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _zone(text: str | None) -> timezone:
    if text is None or text in ("Z", "z"):
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
