"""The small publisher site both fault-injection suites harvest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.demo.server import PublisherSite, demo_site_dir

#: Three pages of the demo site, one per kind of outcome a first harvest gives: a record, no
#: metadata, disallowed (few, to keep the enumeration of crash points within a few minutes).
PAGES = (
    "datasets/north-atlantic-ctd-2021.html",
    "datasets/glider-mission-notes.html",
    "private/whale-acoustics-embargoed.html",
)


def _serve(root: Path, *, lastmod: str | None) -> PublisherSite:
    """Write :data:`PAGES` under ``root``, in one sitemap announced by robots.txt (each entry
    with ``lastmod`` when given), and serve them on 127.0.0.1 (not started yet)."""
    for page in PAGES:
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        (root / page).write_bytes((demo_site_dir() / page).read_bytes())
    (root / "robots.txt").write_text(
        "User-agent: *\nAllow: /\nDisallow: /private/\n\nSitemap: {{BASE}}/sitemap.xml\n"
    )
    dated = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
    urls = "".join(f"<url><loc>{{{{BASE}}}}/{page}</loc>{dated}</url>" for page in PAGES)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    )
    return PublisherSite(root)


@pytest.fixture(scope="module")
def small_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    """:data:`PAGES` in one sitemap announced by robots.txt, served on 127.0.0.1."""
    with _serve(tmp_path_factory.mktemp("site"), lastmod=None) as served:
        yield served


@pytest.fixture(scope="module")
def dated_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    """:data:`PAGES` as :func:`small_site` serves them, the sitemap giving each a lastmod (so a
    re-harvest settles the record's page as unchanged by its lastmod, in the sitemap stage)."""
    with _serve(tmp_path_factory.mktemp("dated-site"), lastmod="2025-01-16") as served:
        yield served
