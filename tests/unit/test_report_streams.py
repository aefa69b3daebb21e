"""The publisher report reads its inputs once, as they come, holding a bounded number of them.

The outcomes and the records held are given as generators whose items are tracked by weak
reference: the report must hold at most the rows it lists (and as many again while choosing
them), never the run's, and say the same as it says of the same inputs given as lists.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from cdif_harvester.report import build_report
from cdif_harvester.report.model import MAX_RECORD_ROWS, MAX_URL_ROWS, HeldRecord

T = TypeVar("T")
N = 3000


class _Outcome(dict[str, Any]):
    """An outcome dict that can be referred to weakly."""


class _Alive:
    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    def track(self, items: Iterable[T]) -> Iterator[T]:
        for item in items:
            self.now += 1
            self.most = max(self.most, self.now)
            weakref.finalize(item, self._gone)
            yield item

    def _gone(self) -> None:
        self.now -= 1


def _outcomes() -> Iterator[_Outcome]:
    for n in range(N):
        url = f"https://data.example.org/d/{n:05d}.html"
        if n % 3 == 0:
            yield _Outcome(url=url, outcome="failed", reason=f"http-404: {url}", records=[])
        else:
            record = {
                "record_id": f"r{n}",
                "valid": n % 2 == 0,
                "errors": ["schema:name is required"],
            }
            yield _Outcome(url=url, outcome="record", pattern="http-link", records=[record])


def _held() -> Iterator[HeldRecord]:
    for n in range(N):
        url = f"https://data.example.org/d/{n:05d}.html"
        read = n < 500
        yield HeldRecord(
            record_id=f"r{n}",
            url=url,
            valid=n % 2 == 0,
            change="new" if n % 5 else "unchanged",
            errors=("schema:name is required",) if read and n % 2 else (),
            warnings=(("recommended", "schema:keywords is recommended"),) if read else (),
            profiles=(("core 1.1", "valid" if n % 2 == 0 else "invalid", n % 2),),
            read=read,
        )


SUMMARY = {"run_id": "r", "entry_urls": ["https://data.example.org/robots.txt"], "urls": N}


def test_the_report_of_a_run_holds_at_most_the_rows_it_lists() -> None:
    alive = _Alive()
    report = build_report(SUMMARY, alive.track(_outcomes()))
    assert alive.most <= 2 * MAX_URL_ROWS + 2
    assert report == build_report(SUMMARY, list(_outcomes()))
    assert report.urls == N and report.urls_not_listed > 0


def test_the_report_with_records_held_holds_a_few_outcomes_and_the_rows_it_lists() -> None:
    outcomes, held = _Alive(), _Alive()
    report = build_report(SUMMARY, outcomes.track(_outcomes()), held=held.track(_held()))
    assert outcomes.most <= 2
    assert held.most <= 2 * MAX_RECORD_ROWS + 2
    assert report == build_report(SUMMARY, list(_outcomes()), held=list(_held()))
    assert report.records == N and report.records_not_listed > 0 and report.urls_not_listed > 0
