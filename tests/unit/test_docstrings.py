"""Module docstrings stay summaries, and the decision records they point to exist.

A module docstring says what the module is for, its entry points and the spec it implements, and
links to docs/decisions/ for the reasoning. These tests keep essays from growing back into the
code and keep every link, index entry and page header of docs/decisions/ sound.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import cdif_harvester
from cdif_harvester.contracts import CONTRACT_VERSION, STAGED_VERSION

PACKAGE = Path(cdif_harvester.__file__).parent
DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions"

# A summary is a few lines plus a list of entry points and a link; past this it is an essay.
MAX_DOCSTRING_LINES = 20
# Module docstrings that are reference listings, not essays, by path under the package.
# errors.py's docstring is the tree of every exception class of the package: cutting it to a
# summary would lose the listing, and tests/unit/test_error_tree.py keeps it complete and exact.
REFERENCE_LISTINGS = frozenset({"errors.py"})

DECISION_LINK = re.compile(r"docs/decisions/([\w.-]+\.md)")
PAGE_NAME = re.compile(r"(\d{4})-[a-z0-9-]+\.md")
PAGE_LINK = re.compile(r"\]\(([^)#\s]+\.md)\)")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _pages() -> list[Path]:
    return sorted(p for p in DECISIONS.glob("*.md") if p.name != "README.md")


def _docstring_lines(path: Path) -> int:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return len(docstring.splitlines()) if docstring else 0


def test_module_docstrings_are_summaries() -> None:
    essays = {
        str(path.relative_to(PACKAGE)): lines
        for path in _modules()
        if str(path.relative_to(PACKAGE)) not in REFERENCE_LISTINGS
        and (lines := _docstring_lines(path)) > MAX_DOCSTRING_LINES
    }
    assert not essays, (
        f"module docstrings over {MAX_DOCSTRING_LINES} lines: keep a summary and move the "
        f"reasoning to docs/decisions/ ({essays})"
    )


def test_every_module_has_a_docstring() -> None:
    missing = [str(p.relative_to(PACKAGE)) for p in _modules() if _docstring_lines(p) == 0]
    assert not missing


def test_decision_links_in_the_code_exist() -> None:
    links = {
        (str(path.relative_to(PACKAGE)), name)
        for path in _modules()
        for name in DECISION_LINK.findall(path.read_text(encoding="utf-8"))
    }
    assert links, "no module links to docs/decisions/"
    broken = sorted(link for link in links if not (DECISIONS / link[1]).is_file())
    assert not broken


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_decision_page_has_its_header_and_sections(page: Path) -> None:
    match = PAGE_NAME.fullmatch(page.name)
    assert match, "pages are named NNNN-slug.md"
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith(f"# {match.group(1)}. ")
    assert re.search(r"^Date: \d{4}-\d{2}-\d{2}$", text, re.M)
    assert re.search(r"^Status: (accepted|superseded by \d{4})$", text, re.M)
    assert re.search(r"^Modules: `", text, re.M)
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Context", "## Decision", "## Consequences"]


def test_decision_pages_are_numbered_in_order_and_indexed() -> None:
    numbers = [int(p.name[:4]) for p in _pages()]
    # Unique and in order from 1; a number may be missing while pages reserved for parallel
    # changes are still to be merged.
    assert numbers[0] == 1
    assert numbers == sorted(set(numbers))
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    unindexed = [p.name for p in _pages() if f"]({p.name})" not in index]
    assert not unindexed


def test_links_between_decision_pages_exist() -> None:
    broken = [
        (page.name, link)
        for page in [*_pages(), DECISIONS / "README.md"]
        for link in PAGE_LINK.findall(page.read_text(encoding="utf-8"))
        if not (page.parent / link).resolve().is_file()
    ]
    assert not broken


def test_contract_version_history_is_up_to_date() -> None:
    # contracts.py points here for its version history; a bump must add its line.
    history = (DECISIONS / "0002-message-contracts.md").read_text(encoding="utf-8")
    assert f"- v{CONTRACT_VERSION}: " in history


def test_staged_object_history_is_up_to_date() -> None:
    # The extractor's hand-over has a version of its own; a bump must add its line here.
    history = (DECISIONS / "0041-staged-records-handover.md").read_text(encoding="utf-8")
    assert f"- v{STAGED_VERSION}: " in history


def test_reference_listings_exist() -> None:
    # An exemption for a module that is gone or renamed would silently exempt nothing.
    missing = sorted(name for name in REFERENCE_LISTINGS if not (PACKAGE / name).is_file())
    assert not missing
