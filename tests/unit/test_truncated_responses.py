"""A body cut at its cap (``fetch(truncate=True)``) stays marked as cut through the fetcher
wrappers: the politeness journal replays the mark, the revalidating cache never keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cdif_harvester.adapters.httpcache import RevalidatingFetcher
from cdif_harvester.adapters.local import DirectoryObjectStore
from cdif_harvester.adapters.politeness import FetchJournal
from cdif_harvester.model import FetchResponse

CUT = FetchResponse(
    url="https://pub.example.org/big",
    status=200,
    headers=(("content-type", "text/html"), ("etag", '"v1"')),
    body=b"<html><head>",
    truncated=True,
)


class CuttingFetcher:
    """Answers every request with the cut page; records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[Mapping[str, str] | None, bool]] = []

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        self.asked.append((headers, truncate))
        return CUT


def test_the_journal_replays_the_cut_mark(tmp_path: Path) -> None:
    store = DirectoryObjectStore(tmp_path)
    request = ("GET", CUT.url, (("Accept", "text/html"),))
    journal = FetchJournal(store, "run-1", "job-1")
    journal.record(request, CUT)
    journal.save()
    resumed = FetchJournal(store, "run-1", "job-1")
    assert resumed.load() == 1
    assert resumed.replay(request, 5_000_000) == CUT


def test_a_cut_answer_is_never_kept_nor_asked_for_conditionally(tmp_path: Path) -> None:
    store = DirectoryObjectStore(tmp_path)
    inner = CuttingFetcher()
    fetcher = RevalidatingFetcher(inner, store)
    for _ in range(2):
        answer = fetcher.fetch(CUT.url, headers={"Accept": "text/html"}, truncate=True)
        assert answer.truncated
    assert inner.asked == [({"Accept": "text/html"}, True)] * 2
    assert list(store.list("")) == []
