"""The README is a short tour that links the reference pages under docs/, and every link holds.

Reference moved out of the README (the command line, resolution rules, validation, output) must
stay reachable: each relative link of the README and of docs/*.md names a file that exists, and
the README links every reference page.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE = ("cli", "resolution", "validation", "conformance", "incremental", "output", "api")


def _links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if not re.match(r"^(https?:|mailto:|#)", target)
    ]


def test_every_relative_link_of_the_readme_and_docs_names_a_file() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        (page.name, target)
        for page in pages
        for target in _links(page)
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert broken == []


def test_the_readme_is_a_tour_that_links_every_reference_page() -> None:
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 250
    linked = set(_links(readme))
    assert [name for name in REFERENCE if f"docs/{name}.md" not in linked] == []
    # the two commands stay in the README
    assert "make demo" in readme.read_text() and "make test" in readme.read_text()
