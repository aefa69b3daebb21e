"""``model.fill_page``: how a page of a listing is cut, whatever catalogue lists it.

The listing is a stream of (position after the entry, entry); the tests count what the page
takes of it, since a page must read no more than it needs (decision 0105).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from cdif_harvester.model import CatalogEntry, Page, ProfileQuery, fill_page
from tests.support.fakes import catalog_entry

VALID_ONLY = ProfileQuery(verdict="valid")


def _listing(valid: str, taken: list[str]) -> Iterator[tuple[str, CatalogEntry]]:
    """Entries e0, e1, ... valid where ``valid`` says "v", each position "p<n>"; every entry
    taken is noted in ``taken``."""
    for number, flag in enumerate(valid):
        taken.append(f"e{number}")
        entry = catalog_entry(f"e{number}", f"https://a.org/{number}", source="a.org")
        yield f"p{number}", entry if flag == "v" else _invalid(entry)


def _invalid(entry: CatalogEntry) -> CatalogEntry:
    return replace(entry, valid=False)


def _ids(page: Page) -> list[str]:
    return [entry.record_id for entry in page.items]


def test_a_full_page_reads_one_more_entry_and_starts_the_next_before_it() -> None:
    taken: list[str] = []
    page = fill_page(_listing("vvvvv", taken), limit=2)
    assert (_ids(page), page.after, taken) == (["e0", "e1"], "p1", ["e0", "e1", "e2"])


def test_the_last_page_says_nothing_follows() -> None:
    taken: list[str] = []
    page = fill_page(_listing("vvv", taken), limit=3)
    assert (_ids(page), page.after) == (["e0", "e1", "e2"], None)
    assert fill_page(_listing("", []), limit=3) == Page((), None)


def test_entries_left_out_before_the_next_kept_one_are_not_read_again() -> None:
    taken: list[str] = []
    page = fill_page(_listing("vxvxxvv", taken), limit=2, keep=VALID_ONLY.matches)
    # e5 says more follow; the next page starts just before it, after e3 and e4 (left out)
    assert (_ids(page), page.after) == (["e0", "e2"], "p4")
    assert taken == ["e0", "e1", "e2", "e3", "e4", "e5"]


def test_a_sparse_filter_ends_the_page_at_its_read_budget() -> None:
    taken: list[str] = []
    page = fill_page(_listing("xvxxxxv", taken), limit=5, keep=VALID_ONLY.matches, budget=3)
    # three read (e0 to e2), the fourth only seen: the next page starts after e2
    assert (_ids(page), page.after, len(taken)) == (["e1"], "p2", 4)
    empty = fill_page(_listing("xxxxxxv", []), limit=5, keep=VALID_ONLY.matches, budget=3)
    assert empty == Page((), "p2")
    # exactly the budget left: nothing follows, no empty page after it
    assert fill_page(_listing("xvx", []), limit=5, keep=VALID_ONLY.matches, budget=3).after is None


def test_the_default_budget_is_read_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cdif_harvester.model.PAGE_READ_BUDGET", 2)
    assert fill_page(_listing("xxxv", []), limit=1, keep=VALID_ONLY.matches) == Page((), "p1")


def test_a_page_holds_at_least_one_entry() -> None:
    for limit in (0, -1):
        with pytest.raises(ValueError, match="at least one item"):
            fill_page(_listing("v", []), limit=limit)
