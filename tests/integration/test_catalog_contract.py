"""The catalogue's operator queries and URL state, the same for SQLite and DynamoDB (moto).

Both adapters must answer alike: by record id, by source, changed since a date, URLs by latest
outcome, and a URL's harvest state surviving the outcome writes that follow it (and vice versa).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.domain.records.validation import profile_query
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RequestValidator,
    RunStatus,
    UrlOutcome,
    UrlState,
)
from tests.support.aws import ProvisionedStack


@pytest.fixture(params=["sqlite", "dynamodb"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        local = SqliteCatalog(tmp_path / "catalog.sqlite")
        yield local
        local.close()
        return
    stack: ProvisionedStack = request.getfixturevalue("stack")
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    yield DynamoCatalog(table)


def _entry(record_id: str, source: str, changed_at: str) -> CatalogEntry:
    return CatalogEntry(
        record_id=record_id,
        resource_id=record_id + "/resource",
        source=source,
        url=f"https://{source}/{record_id}",
        title=None,
        pattern="embedded-script",
        valid=True,
        conformance=None,
        date_modified=None,
        sd_date_published=None,
        content_hash="h-" + record_id,
        record_key=None,
        report_key=f"reports/{source}/{record_id}.json",
        run_id="run-1",
        harvested_at=changed_at,
        changed_at=changed_at,
    )


def _outcome(url: str, outcome: Outcome, run_id: str = "run-1") -> UrlOutcome:
    return UrlOutcome(
        run_id=run_id,
        source="a.org",
        url=url,
        outcome=outcome,
        reason=None if outcome is Outcome.RECORD else "lastmod: not newer",
        recorded_at="2026-03-01T10:00:00+00:00",
    )


def test_records_by_source_and_changed_since(catalog: Any) -> None:
    catalog.put_record(_entry("r1", "a.org", "2026-01-05T00:00:00+00:00"))
    catalog.put_record(_entry("r2", "a.org", "2026-02-10T12:00:00+00:00"))
    catalog.put_record(_entry("r3", "b.org", "2026-03-01T00:00:00+00:00"))
    assert [e.record_id for e in catalog.records("a.org")] == ["r1", "r2"]
    assert [e.record_id for e in catalog.records("a.org", changed_since="2026-02-01")] == ["r2"]
    assert [e.record_id for e in catalog.records("a.org", changed_since="2026-03-01")] == []
    assert [e.record_id for e in catalog.records("b.org", changed_since="2026-03-01")] == ["r3"]
    # a rewrite moves the entry in time, it is not duplicated
    catalog.put_record(_entry("r1", "a.org", "2026-04-01T00:00:00+00:00"))
    assert [e.record_id for e in catalog.records("a.org", changed_since="2026-02-01")] == [
        "r1",
        "r2",
    ]
    assert len(list(catalog.records("a.org"))) == 2
    assert catalog.get_record("r1").changed_at == "2026-04-01T00:00:00+00:00"


def test_records_by_profile_and_verdict(catalog: Any) -> None:
    def judged(record_id: str, valid: bool, profiles: dict[str, str]) -> CatalogEntry:
        entry = _entry(record_id, "a.org", "2026-01-05T00:00:00+00:00")
        return replace(entry, valid=valid, profiles=profiles)

    catalog.put_record(judged("r1", True, {"core/1.1": "valid", "discovery/1.1": "invalid"}))
    catalog.put_record(judged("r2", True, {"core/1.1": "valid", "discovery/1.1": "valid"}))
    catalog.put_record(judged("r3", False, {"core/1.0": "invalid"}))
    catalog.put_record(judged("r4", True, {"core/1.0": "valid", "manifest/1.0": "unknown"}))
    catalog.put_record(_entry("r5", "a.org", "2026-01-05T00:00:00+00:00"))  # written before

    def ids(profile: str | None = None, verdict: str | None = None, **kw: Any) -> list[str]:
        query = profile_query(profile, verdict)
        return [e.record_id for e in catalog.records("a.org", query=query, **kw)]

    assert ids("discovery/1.1", "invalid") == ["r1"]
    assert ids("discovery/1.1") == ["r1", "r2"]
    assert ids("https://w3id.org/cdif/discovery/1.1", "valid") == ["r2"]
    assert ids("core") == ["r1", "r2", "r3", "r4"]
    assert ids("core/1.0", "invalid") == ["r3"]
    assert ids("manifest", "unknown") == ["r4"]
    assert ids(None, "invalid") == ["r3"]
    assert ids(None, "valid") == ["r1", "r2", "r4", "r5"]
    assert ids("core 1.1", "valid", changed_since="2026-02-01") == []
    assert ids() == ["r1", "r2", "r3", "r4", "r5"]


def test_url_state_and_outcomes_do_not_overwrite_each_other(catalog: Any) -> None:
    url = "https://a.org/page"
    assert catalog.get_url(url) is None
    catalog.put_outcome(_outcome(url, Outcome.RECORD))
    state = UrlState(
        url=url,
        source="a.org",
        sitemap="https://a.org/sitemap.xml",
        lastmod="2026-02-01",
        fingerprint="f1",
        blocks=("b1", "b2"),
        sd_dates=("2026-01-31",),
        record_ids=("r1",),
        # the validators of the harvest's answers, for its next conditional requests
        validators=(
            RequestValidator("GET", "", "text/html", '"e1"', ""),
            RequestValidator("GET", "https://a.org/m.json", "", "", "Sun, 01 Feb 2026 0:00:00 GMT"),
        ),
    )
    catalog.put_url(state)
    seen = catalog.get_url(url)
    assert seen == replace(
        state, outcome="record", last_run="run-1", last_seen="2026-03-01T10:00:00+00:00"
    )
    # a later outcome keeps the harvest state
    catalog.put_outcome(_outcome(url, Outcome.UNCHANGED, run_id="run-2"))
    later = catalog.get_url(url)
    assert later.fingerprint == "f1" and later.blocks == ("b1", "b2")
    assert later.outcome == "unchanged" and later.last_run == "run-2"
    # and a later harvest state keeps the outcome
    catalog.put_url(replace(state, fingerprint="f2", withdrawn_at="2026-05-01T00:00:00+00:00"))
    last = catalog.get_url(url)
    assert last.fingerprint == "f2" and last.withdrawn_at is not None
    assert last.outcome == "unchanged" and last.last_run == "run-2"


def test_a_state_given_with_its_outcome_is_written_with_it(catalog: Any) -> None:
    url, other = "https://a.org/page", "https://a.org/other"
    catalog.put_url(UrlState(url=other, source="a.org", fingerprint="kept"))
    state = UrlState(
        url=url, source="a.org", fingerprint="f1", record_ids=("r1",), harvest_run="run-1"
    )
    # A state given with the outcome is stored with it (the URL's latest outcome beside it)
    catalog.put_outcome(_outcome(url, Outcome.RECORD), state=state)
    assert catalog.get_url(url) == replace(
        state, outcome="record", last_run="run-1", last_seen="2026-03-01T10:00:00+00:00"
    )
    # and a new state with the outcome the URL holds already is written all the same
    again = replace(state, fingerprint="f2", record_ids=("r2",), harvest_run="run-2")
    catalog.put_outcomes(
        [_outcome(url, Outcome.RECORD, run_id="run-2"), _outcome(other, Outcome.RECORD, "run-2")],
        states=[again],
    )
    seen = catalog.get_url(url)
    assert (seen.fingerprint, seen.record_ids, seen.harvest_run) == ("f2", ("r2",), "run-2")
    assert seen.outcome == "record"
    # while a URL given no state keeps the one it holds
    assert catalog.get_url(other).fingerprint == "kept"
    assert catalog.get_url(other).outcome == "record"
    # A state whose URL has no outcome among those given is refused, and nothing written
    stray = UrlState(url="https://a.org/stray", source="a.org", fingerprint="x")
    with pytest.raises(ValueError, match="stray"):
        catalog.put_outcomes([_outcome(url, Outcome.UNCHANGED, run_id="run-3")], states=[stray])
    assert catalog.get_url("https://a.org/stray") is None
    assert catalog.get_url(url).outcome == "record"


def test_urls_by_source_and_outcome(catalog: Any) -> None:
    catalog.put_outcome(_outcome("https://a.org/1", Outcome.RECORD))
    catalog.put_outcome(_outcome("https://a.org/2", Outcome.UNCHANGED))
    catalog.put_outcome(_outcome("https://a.org/3", Outcome.RECORD))
    catalog.put_outcome(replace(_outcome("https://b.org/1", Outcome.RECORD), source="b.org"))
    assert [s.url for s in catalog.urls("a.org")] == [
        "https://a.org/1",
        "https://a.org/2",
        "https://a.org/3",
    ]
    assert [s.url for s in catalog.urls("a.org", outcome="record")] == [
        "https://a.org/1",
        "https://a.org/3",
    ]
    assert [s.url for s in catalog.urls("a.org", outcome="unchanged")] == ["https://a.org/2"]
    # the latest outcome decides
    catalog.put_outcome(_outcome("https://a.org/1", Outcome.UNCHANGED, run_id="run-2"))
    assert [s.url for s in catalog.urls("a.org", outcome="record")] == ["https://a.org/3"]
    assert [s.url for s in catalog.urls("b.org")] == ["https://b.org/1"]
    # the URLs alone, in the same order
    assert list(catalog.source_urls("a.org")) == [s.url for s in catalog.urls("a.org")]
    assert list(catalog.source_urls("b.org")) == ["https://b.org/1"]
    assert list(catalog.source_urls("c.org")) == []


def test_url_states_are_read_in_batches(catalog: Any) -> None:
    urls = [f"https://a.org/b/{i}" for i in range(230)]  # more than two DynamoDB batches
    for i, url in enumerate(urls):
        catalog.put_url(UrlState(url=url, source="a.org", lastmod=f"2024-01-{i % 28 + 1:02d}"))
    catalog.put_outcome(_outcome(urls[7], Outcome.UNCHANGED))
    asked = [*urls, "https://a.org/never-seen", urls[3]]

    found = catalog.get_urls(asked)

    assert set(found) == set(urls)  # a URL never seen is left out; one asked twice is one
    assert found[urls[9]] == catalog.get_url(urls[9])
    assert found[urls[9]].lastmod == "2024-01-10"
    assert found[urls[7]].outcome == "unchanged"  # the outcome and the state, together
    assert catalog.get_urls([]) == {}


def _pages(catalog: Any, source: str, limit: int, **kw: Any) -> list[list[str]]:
    """The record ids of every page of ``records_page``, following each page's ``after``."""
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        page = catalog.records_page(source, limit=limit, after=after, **kw)
        assert len(page.items) <= limit
        pages.append([entry.record_id for entry in page.items])
        if page.after is None:
            return pages
        after = page.after


def test_records_page_lists_each_entry_once_by_date_of_change(catalog: Any) -> None:
    # eleven entries over four dates of change (ties included), and another source's
    dates = [f"2026-01-0{1 + n % 4}T00:00:00+00:00" for n in range(11)]
    for number, changed_at in enumerate(dates):
        catalog.put_record(_entry(f"r{number:02d}", "a.org", changed_at))
    catalog.put_record(_entry("other", "b.org", dates[0]))
    everything = sorted(e.record_id for e in catalog.records("a.org"))
    by_change = sorted(everything, key=lambda rid: dates[int(rid[1:])])
    for limit in (1, 2, 3, 5, 11, 12, 100):
        pages = _pages(catalog, "a.org", limit)
        listed = [rid for page in pages for rid in page]
        assert sorted(listed) == everything  # each once, none of b.org's
        # by date of change (ties in the catalogue's own order)
        assert [dates[int(rid[1:])] for rid in listed] == [dates[int(r[1:])] for r in by_change]
        assert all(len(page) == limit for page in pages[:-1])
        assert len(pages) == max(1, -(-len(everything) // limit))  # no empty page at the end
    since = [
        rid for page in _pages(catalog, "a.org", 2, changed_since="2026-01-03") for rid in page
    ]
    assert sorted(since) == sorted(r for r in everything if dates[int(r[1:])] >= "2026-01-03")
    # a rewrite moves the entry to the end; it is still listed once
    catalog.put_record(_entry("r00", "a.org", "2026-05-01T00:00:00+00:00"))
    listed = [rid for page in _pages(catalog, "a.org", 4) for rid in page]
    assert sorted(listed) == everything and listed[-1] == "r00"


def test_records_page_filters_and_stops_at_its_read_budget(
    catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(9):
        entry = _entry(f"r{number}", "a.org", f"2026-01-0{number + 1}T00:00:00+00:00")
        catalog.put_record(replace(entry, valid=number in (1, 7)))
    invalid = profile_query(None, "invalid")
    valid = profile_query(None, "valid")
    assert _pages(catalog, "a.org", 5, query=valid) == [["r1", "r7"]]
    assert [rid for page in _pages(catalog, "a.org", 3, query=invalid) for rid in page] == [
        "r0",
        "r2",
        "r3",
        "r4",
        "r5",
        "r6",
        "r8",
    ]
    # a sparse filter: each page reads at most the budget and says where to go on
    monkeypatch.setattr("cdif_harvester.model.PAGE_READ_BUDGET", 3)
    assert _pages(catalog, "a.org", 5, query=valid) == [["r1"], [], ["r7"]]


def test_records_page_refuses_a_position_it_did_not_give(catalog: Any) -> None:
    catalog.put_record(_entry("r1", "a.org", "2026-01-05T00:00:00+00:00"))
    catalog.put_record(_entry("r2", "a.org", "2026-02-05T00:00:00+00:00"))
    for after in ("", "abc", "[1, 2]", '["x"]', "{}", '[null, "r1"]'):
        with pytest.raises(ValueError, match="position"):
            catalog.records_page("a.org", limit=1, after=after)
    with pytest.raises(ValueError, match="at least one"):
        catalog.records_page("a.org", limit=0)


def test_outcomes_page_lists_each_settled_url_once(catalog: Any) -> None:
    catalog.start_run(RunStatus("run-1", ("https://a.org/robots.txt",), "2026-03-01T10:00:00"))
    urls = [f"https://a.org/{n:02d}" for n in range(13)]
    catalog.enter_urls("run-1", urls, step="sitemap")
    for number, url in enumerate(urls[:10]):  # three left queued: never listed
        kind = Outcome.UNCHANGED if number % 4 == 0 else Outcome.RECORD
        catalog.put_outcome(_outcome(url, kind))
    everything = [outcome.url for outcome in catalog.outcomes("run-1")]
    assert sorted(everything) == urls[:10]

    def pages(limit: int, outcome: str | None = None) -> list[list[str]]:
        found: list[list[str]] = []
        after: str | None = None
        while True:
            page = catalog.outcomes_page("run-1", limit=limit, after=after, outcome=outcome)
            assert len(page.items) <= limit
            found.append([item.url for item in page.items])
            if page.after is None:
                return found
            after = page.after

    for limit in (1, 3, 4, 10, 50):
        listed = [url for page in pages(limit) for url in page]
        assert listed == everything  # the order of outcomes(), each once
    unchanged = [url for page in pages(2, "unchanged") for url in page]
    assert sorted(unchanged) == [urls[0], urls[4], urls[8]]
    assert [url for page in pages(5, "failed") for url in page] == []
    assert catalog.outcomes_page("run-2", limit=5).items == ()


def test_outcomes_page_on_dynamodb_refuses_a_position_it_did_not_give(
    stack: ProvisionedStack,
) -> None:
    # (a SQLite position is a URL: any text is a place to start from)
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = DynamoCatalog(table)
    for after in ("", "URL#x", "RECORD#" + "0" * 32, "URL#" + "0" * 31):
        with pytest.raises(ValueError, match="position"):
            catalog.outcomes_page("run-1", limit=1, after=after)


def test_url_states_of_a_source_are_read_a_batch_at_a_time(
    stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    catalog = DynamoCatalog(table)
    urls = [f"https://a.org/{n:02d}" for n in range(10)]
    for number, url in enumerate(reversed(urls)):
        catalog.put_outcome(_outcome(url, Outcome.RECORD if number % 2 else Outcome.UNCHANGED))
    monkeypatch.setattr("cdif_harvester.adapters.aws._URL_STATE_CHUNK", 3)
    reads: list[int] = []
    table.meta.client.meta.events.register(
        "after-call.dynamodb.BatchGetItem", lambda **_: reads.append(1)
    )
    states = catalog.urls("a.org")
    first = next(states)
    assert first.url == urls[0] and len(reads) == 1  # the first batch alone, not every state
    assert [first.url, *(state.url for state in states)] == urls
    assert len(reads) == 4
    kept = [state.url for state in catalog.urls("a.org", outcome="record")]
    assert kept == [url for number, url in enumerate(reversed(urls)) if number % 2][::-1]
