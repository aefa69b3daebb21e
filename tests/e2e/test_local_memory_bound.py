"""The local runner holds a bounded number of decoded URL jobs, whatever the site's size.

The bound is lowered for the test (the real one is a few hundred); the site announces many more
URLs than that in one sitemap, so the expander sends them all at once, and the runner must still
hold at most the bound in its host lines while every URL is settled.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdif_harvester.cli import runner
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

URLS = 60
BOUND = 7


def _site(root: Path) -> None:
    root.mkdir()
    entries = "".join(f"<url><loc>{{{{BASE}}}}/missing/{i}.html</loc></url>\n" for i in range(URLS))
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{entries}</urlset>\n",
        encoding="utf-8",
    )


def test_the_runner_holds_at_most_the_bound_of_url_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _site(tmp_path / "site")
    monkeypatch.setattr(runner, "_LINED_UP", BOUND, raising=False)
    held: list[int] = []
    line_up = LocalHarvester._line_up

    def counting(self: LocalHarvester, work: object) -> None:
        line_up(self, work)  # type: ignore[arg-type]
        held.append(sum(len(line) for line in self._lines.values()))

    monkeypatch.setattr(LocalHarvester, "_line_up", counting)
    with (
        PublisherSite(tmp_path / "site") as site,
        LocalHarvester(tmp_path / "out", allow_loopback=True, max_attempts=1) as harvester,
    ):
        summary = harvester.harvest(site.url("/sitemap.xml"))
    assert summary.urls == URLS
    assert len(held) >= URLS  # every URL job went through the lines
    assert max(held) <= BOUND
