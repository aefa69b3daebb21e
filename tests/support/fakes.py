"""Fakes of our own ports for unit tests (never of an SDK: AWS is moto, publishers are real
servers on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Mapping

from cdif_harvester.errors import HarvestError
from cdif_harvester.model import CatalogEntry, FetchResponse

__all__ = ["Answer", "TableFetcher"]

#: What a URL answers: (status, headers, body), or an error the fetch raises.
Answer = tuple[int, Mapping[str, str], bytes] | HarvestError


class TableFetcher:
    """A Fetcher answering from a table; unknown URLs are 404. Records every URL asked, raises
    the error a URL maps to, and cuts a body at ``max_bytes`` when asked to truncate, as the
    real fetcher does."""

    def __init__(self, pages: Mapping[str, Answer]) -> None:
        self.pages = dict(pages)
        self.asked: list[str] = []

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """The table's answer for ``url``; raises the HarvestError it maps to, if any."""
        self.asked.append(url)
        answer = self.pages.get(url, (404, {}, b"not found"))
        if isinstance(answer, HarvestError):
            raise answer
        status, head, body = answer
        cut = truncate and max_bytes is not None and len(body) > max_bytes
        if cut and max_bytes is not None:
            body = body[:max_bytes]
        return FetchResponse(
            url=url, status=status, headers=tuple(head.items()), body=body, truncated=cut
        )


def catalog_entry(
    record_id: str, url: str, *, source: str, run_id: str = "run-1", **fields: object
) -> CatalogEntry:
    """A catalogue entry for ``record_id`` naming ``url``: plain values for every field the
    test does not care about (``fields`` override them)."""
    values: dict[str, object] = {
        "resource_id": record_id,
        "title": "t",
        "pattern": "embedded",
        "valid": True,
        "conformance": None,
        "date_modified": None,
        "sd_date_published": None,
        "content_hash": "h",
        "record_key": "k",
        "report_key": "r",
        "harvested_at": "2026-12-01T10:00:00+00:00",
        **fields,
    }
    return CatalogEntry(record_id=record_id, url=url, source=source, run_id=run_id, **values)  # type: ignore[arg-type]
