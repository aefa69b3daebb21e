"""W3C datetime parsing of sitemap <lastmod> values."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from cdif_harvester.domain.discovery.lastmod import normalise_lastmod, parse_lastmod

CASES = [
    ("1997", "1997-01-01T00:00:00Z"),
    ("1997-07", "1997-07-01T00:00:00Z"),
    ("1997-07-16", "1997-07-16T00:00:00Z"),
    ("1997-07-16T19:20+01:00", "1997-07-16T18:20:00Z"),
    ("1997-07-16T19:20:30+01:00", "1997-07-16T18:20:30Z"),
    ("1997-07-16T19:20:30.45+01:00", "1997-07-16T18:20:30Z"),
    ("1997-07-16T19:20:30Z", "1997-07-16T19:20:30Z"),
    ("1997-07-16T19:20:30.123456789Z", "1997-07-16T19:20:30Z"),
    ("1997-07-16T19:20:30-05:30", "1997-07-17T00:50:30Z"),
    # what publishers write beside the standard
    ("  2024-05-01 \n", "2024-05-01T00:00:00Z"),
    ("2024-05-01 10:00:00", "2024-05-01T10:00:00Z"),
    ("2024-05-01t10:00:00z", "2024-05-01T10:00:00Z"),
    ("2024-05-01T10:00:00+0200", "2024-05-01T08:00:00Z"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_every_w3c_form_is_read(text: str, expected: str) -> None:
    assert normalise_lastmod(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "yesterday",
        "2024-13-01",
        "2024-02-30",
        "2024-05-01T25:00Z",
        "24-05-01",
        "2024-05-01T10",
        "2024-05-01T10:00+25:00",
        "2024/05/01",
    ],
)
def test_anything_else_is_not_a_lastmod(text: str | None) -> None:
    assert normalise_lastmod(text) is None


@pytest.mark.parametrize(
    ("text", "microsecond"),
    [
        ("2024-05-01T10:00:00.5Z", 500_000),
        ("2024-05-01T10:00:00.45Z", 450_000),
        ("2024-05-01T10:00:00.000001Z", 1),
        ("2024-05-01T10:00:00.123456789Z", 123_456),  # beyond microseconds: cut, not rounded
        ("2024-05-01T10:00:00Z", 0),
    ],
)
def test_sub_second_precision_is_kept(text: str, microsecond: int) -> None:
    # A sitemap that rewrites lastmod twice a second must still read as newer.
    assert parse_lastmod(text) == datetime(2024, 5, 1, 10, 0, 0, microsecond, tzinfo=UTC)


@pytest.fixture
def kathmandu_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone set to UTC+05:45 (a POSIX TZ rule: no tz database)."""
    monkeypatch.setenv("TZ", "NPT-05:45")
    time.tzset()
    try:
        yield
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.usefixtures("kathmandu_clock")
@pytest.mark.parametrize(("text", "expected"), CASES)
def test_the_machine_time_zone_does_not_matter(text: str, expected: str) -> None:
    assert time.strftime("%z", time.localtime(0)) == "+0545"
    assert normalise_lastmod(text) == expected
    moment = parse_lastmod(text)
    assert moment is not None
    assert moment.utcoffset() == timedelta(0)


# -- RFC 822 dates (an RSS item's pubDate) ---------------------------------------------------------

RFC822_CASES = [
    ("Tue, 10 Jun 2003 04:00:00 GMT", datetime(2003, 6, 10, 4, tzinfo=UTC)),
    ("Tue, 10 Jun 2003 04:00:00 +0000", datetime(2003, 6, 10, 4, tzinfo=UTC)),
    ("Tue, 10 Jun 2003 04:00:00 -0000", datetime(2003, 6, 10, 4, tzinfo=UTC)),
    ("Wed, 02 Oct 2002 08:00:00 EST", datetime(2002, 10, 2, 8, tzinfo=UTC) + timedelta(hours=5)),
    ("Wed, 02 Oct 2002 15:00:00 +0200", datetime(2002, 10, 2, 13, tzinfo=UTC)),
    ("Wed, 02 Oct 2002 15:00:00 -0930", datetime(2002, 10, 3, 0, 30, tzinfo=UTC)),
    ("Sat, 01 Jan 2000 23:30 PDT", datetime(2000, 1, 2, 6, 30, tzinfo=UTC)),  # no seconds
    # obsolete and sloppy forms: two-digit years, no weekday, full names, no zone, no time
    ("2 Oct 02 08:00:00 GMT", datetime(2002, 10, 2, 8, tzinfo=UTC)),
    ("2 Oct 99 08:00:00 UT", datetime(1999, 10, 2, 8, tzinfo=UTC)),
    ("Thursday, 5 September 2024 12:00:00 Z", datetime(2024, 9, 5, 12, tzinfo=UTC)),
    ("thu, 05 sep 2024 12:00:00 gmt", datetime(2024, 9, 5, 12, tzinfo=UTC)),
    ("  Thu,05 Sep 2024 12:00:00 GMT\n", datetime(2024, 9, 5, 12, tzinfo=UTC)),
    ("05 Sep 2024 12:00:00", datetime(2024, 9, 5, 12, tzinfo=UTC)),
    ("05 Sep 2024", datetime(2024, 9, 5, tzinfo=UTC)),
    ("Thu, 05 Sep 2024 12:00:00 CEST", datetime(2024, 9, 5, 12, tzinfo=UTC)),  # unknown: UTC
]


@pytest.mark.parametrize(("text", "expected"), RFC822_CASES)
def test_rfc_822_dates_are_read(text: str, expected: datetime) -> None:
    assert parse_lastmod(text) == expected
    assert normalise_lastmod(text) == expected.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("text", "mended"),
    [
        ("Sun, 31 Feb 2024 10:00:00 GMT", "Sun, 29 Feb 2024 10:00:00 GMT"),
        ("Thu, 05 Sep 2024 25:00:00 GMT", "Thu, 05 Sep 2024 23:00:00 GMT"),
        ("Thu, 05 Foo 2024 12:00:00 GMT", "Thu, 05 Oct 2024 12:00:00 GMT"),
        ("Thu, 05 Sep 2024 12:00:00 +2400", "Thu, 05 Sep 2024 12:00:00 +2359"),
        ("Thu, 05 Sep 12:00:00 GMT", "Thu, 05 Sep 2024 12:00:00 GMT"),
        ("Thu, 05 Sep 2024 12:00:00 GMT and more", "Thu, 05 Sep 2024 12:00:00 GMT"),
    ],
)
def test_broken_rfc_822_dates_are_not_lastmods(text: str, mended: str) -> None:
    assert normalise_lastmod(text) is None
    assert normalise_lastmod(mended) is not None  # what makes it broken is just that
