"""W3C datetime (the sitemap ``<lastmod>`` format) parsing, and RFC 822 dates (RSS ``pubDate``).

:func:`parse_lastmod` reads the six granularities of https://www.w3.org/TR/NOTE-datetime, and the
sloppy forms publishers also write, as a UTC datetime; an RSS feed read as a sitemap dates its
items the RFC 822 way (``Tue, 10 Jun 2003 04:00:00 GMT``, RFC 5322 section 3.3 with its obsolete
forms), which is read too; anything else is not a lastmod (None).

See docs/decisions/0017-lenient-lastmod.md and 0068-feeds-as-sitemaps.md.
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
# RFC 5322 section 3.3 date-time, with the obsolete forms of section 4.3 (two-digit years, zone
# names) and the slips feeds make (a full day or month name, no seconds, no zone, no time).
_RFC822 = re.compile(
    r"""
    (?:[A-Za-z]{3,9}\.?\s*,?\s*)?                      # day of week: not checked
    (?P<day>\d{1,2})\s*[\s-]\s*(?P<month>[A-Za-z]{3,9})\.?\s*[\s-]\s*(?P<year>\d{4}|\d{2})
    (?:\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?
      (?:\s*(?P<offset>[+-]\d{4})|\s+(?P<name>[A-Za-z]{1,5}))?
    )?
    """,
    re.VERBOSE,
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
# RFC 5322 section 4.3: the zone names it knows; any other name (military letters included,
# which it says to read as -0000) says nothing about the offset, read as UTC.
_ZONE_HOURS = {"ut": 0, "gmt": 0, "z": 0, "edt": -4, "est": -5, "cdt": -5, "cst": -6}
_ZONE_HOURS |= {"mdt": -6, "mst": -7, "pdt": -7, "pst": -8}


def parse_lastmod(text: str | None) -> datetime | None:
    """Parse a W3C datetime, or an RFC 822 date-time (RSS ``pubDate``), into an aware UTC
    datetime; None when ``text`` is neither."""
    if text is None:
        return None
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        return _parse_rfc822(text)
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


def _parse_rfc822(text: str) -> datetime | None:
    """An RFC 822 (5322) date-time as an aware UTC datetime; None when ``text`` is not one."""
    match = _RFC822.fullmatch(text.strip())
    if match is None:
        return None
    parts = match.groupdict()
    month = _MONTHS.get(parts["month"][:3].lower())
    if month is None:
        return None
    year = int(parts["year"])
    if len(parts["year"]) == 2:  # RFC 5322 section 4.3: 00-49 are 2000-2049, 50-99 1950-1999
        year += 2000 if year < 50 else 1900
    offset = parts["offset"]
    try:
        if offset is not None:
            minutes = int(offset[1:3]) * 60 + int(offset[3:])
            zone = timezone(timedelta(minutes=-minutes if offset[0] == "-" else minutes))
        else:
            zone = timezone(timedelta(hours=_ZONE_HOURS.get((parts["name"] or "").lower(), 0)))
        moment = datetime(
            year,
            month,
            int(parts["day"]),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            tzinfo=zone,
        )
    except ValueError:  # 31 Feb, 25 o'clock, an offset of a day or more ...
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
