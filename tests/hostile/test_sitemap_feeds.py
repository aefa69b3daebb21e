"""Hostile feeds read as sitemaps: huge, deep, entity bombs, endless declarations.

Each input is read in a fresh process (tests/support/bounds.py) the way the expander reads a
sitemap: entry by entry, none held. A feed is held to what a urlset is: flat memory (a huge
feed costs little more than its own bytes), linear time, the same caps on URLs and sizes.
"""

from __future__ import annotations

import json

import pytest

from tests.support.bounds import measure

# The input is built in the child and counted in its peak: these bounds leave room for the
# interpreter, lxml and the input itself (about 40 MiB), and nothing for a tree of the entries.
MAX_RSS_MIB = 160
MAX_CPU_SECONDS = 10

_READ = """
import json, time
from cdif_harvester.domain.discovery.sitemap import SitemapError, iter_sitemap

body = {build}
out = {{"input_mib": len(body) / 1048576}}
try:
    stream = iter_sitemap(body, sitemap_url="https://data.example.org/feed", max_urls=10**7)
    last = None
    for entry in stream:
        last = entry
    out.update(kind=stream.kind, count=stream.count, error=stream.error, notes=stream.notes,
               last=last and [last.loc, last.lastmod])
except SitemapError as exc:
    out.update(reason=exc.reason)
print(json.dumps(out))
"""

_HUGE_RSS = """(
    b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
    + b"<category>noise</category>" * 300_000
    + b"".join(
        b"<item><title>Dataset %d</title><link>https://data.example.org/d/%d</link>"
        b"<pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate><guid>urn:%d</guid></item>" % (n, n, n)
        for n in range(200_000)
    )
    + b"</channel></rss>"
)"""

_HUGE_ATOM = """(
    b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
    + b"".join(
        b"<entry><title>Dataset %d</title><id>urn:%d</id><link rel='edit' href='/api/%d'/>"
        b"<link href='https://data.example.org/d/%d'/><updated>2025-01-01T00:00:00Z</updated>"
        b"</entry>" % (n, n, n, n)
        for n in range(200_000)
    )
    + b"</feed>"
)"""

_DEEP_RSS = """(
    b"<rss><channel><item><link>https://data.example.org/d/0</link></item><item>"
    + b"<x>" * 1_000_000 + b"</x>" * 1_000_000
    + b"<link>https://data.example.org/d/1</link></item></channel></rss>"
)"""

_LAUGHS = """(
    b'<?xml version="null"?><!DOCTYPE rss [<!ENTITY l0 "lol">'
    + b"".join(b'<!ENTITY l%d "%s">' % (n, (b"&l%d;" % (n - 1)) * 10) for n in range(1, 10))
    + b"]><rss><channel>"
    + b"<item><link>https://x.example/&l9;</link></item>" * 1000
    + b"</channel></rss>"
)"""

_ENDLESS_DECLARATION = """(
    b'<?xml version="null" ' + b" " * (40 * 1048576) + b'?><rss><channel/></rss>'
)"""

_BROKEN_DECLARATION_HUGE = """(
    b'<?xml version="null" encoding="null"?><urlset>'
    + b"".join(b"<url><loc>https://data.example.org/d/%d</loc></url>" % n for n in range(400_000))
    + b"</urlset>"
)"""


def _read(build: str) -> dict[str, object]:
    measured = measure(_READ.format(build=build), timeout=120)
    assert measured.returncode == 0, measured.stderr[-3000:]
    assert measured.peak_rss_mib < MAX_RSS_MIB, measured
    assert measured.cpu_seconds < MAX_CPU_SECONDS, measured
    result: dict[str, object] = json.loads(measured.stdout)
    return result


@pytest.mark.parametrize(
    ("build", "kind", "last"),
    [
        pytest.param(
            _HUGE_RSS,
            "rss",
            ["https://data.example.org/d/199999", "Tue, 10 Jun 2003 04:00:00 GMT"],
            id="rss",
        ),
        pytest.param(
            _HUGE_ATOM,
            "atom",
            ["https://data.example.org/d/199999", "2025-01-01T00:00:00Z"],
            id="atom",
        ),
    ],
)
def test_a_huge_feed_is_read_in_flat_memory(build: str, kind: str, last: list[str]) -> None:
    result = _read(build)
    assert float(str(result["input_mib"])) > 35  # most of the 50 MiB a sitemap may have
    assert (result["kind"], result["count"], result["error"]) == (kind, 200_000, None)
    assert result["last"] == last


def test_a_huge_urlset_behind_a_broken_declaration_is_read_in_flat_memory() -> None:
    result = _read(_BROKEN_DECLARATION_HUGE)
    assert (result["kind"], result["count"]) == ("urlset", 400_000)
    assert len(result["notes"]) == 1  # type: ignore[arg-type]


def test_a_deep_item_breaks_the_feed_after_the_items_before_it() -> None:
    result = _read(_DEEP_RSS)
    assert (result["kind"], result["count"]) == ("rss", 1)
    assert str(result["error"]).startswith("malformed-xml")


@pytest.mark.parametrize(
    ("build", "reason", "tame"),
    [
        # the same feed without its entities is read, declaration and all
        pytest.param(
            _LAUGHS,
            "xml-entities-refused",
            _LAUGHS.replace("&l9;", "").replace("!DOCTYPE", "!-- ").replace("]>", "]-->"),
            id="billion-laughs",
        ),
        # a broken declaration that ends near the start is left out
        pytest.param(
            _ENDLESS_DECLARATION,
            "malformed-xml",
            _ENDLESS_DECLARATION.replace("40 * 1048576", "40"),
            id="endless-declaration",
        ),
    ],
)
def test_hostile_feeds_are_refused_cheaply(build: str, reason: str, tame: str) -> None:
    assert _read(build)["reason"] == reason
    assert _read(tame)["kind"] == "rss"
