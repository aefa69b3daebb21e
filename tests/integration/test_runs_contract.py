"""Harvest runs and the sources registry, the same for SQLite and DynamoDB (moto).

The counters are what tells any worker that a run is finished, so both adapters must count alike:
a URL once however often it enters, an outcome once however often it is written, a sitemap step
once however often its job runs; and a source never has two runs under way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.adapters.local import SqliteCatalog
from cdif_harvester.model import Outcome, RunState, RunStatus, Source, UrlOutcome
from tests.support.aws import ProvisionedStack

AT = "2026-03-01T10:00:00+00:00"


def _atomic_writes(catalog: Any) -> None:
    """Make moto apply each DynamoDB call whole before the next starts, as DynamoDB applies a
    conditional write to an item: moto checks a condition and writes in two steps, and two
    threads can both pass the check between them (a race of the emulator, not of ours)."""
    if not isinstance(catalog, DynamoCatalog):
        return
    lock = threading.Lock()
    events = catalog.table.meta.client.meta.events

    def take(**_: Any) -> None:
        lock.acquire()

    def give(**_: Any) -> None:
        lock.release()

    events.register("before-call.dynamodb", take)
    events.register("after-call.dynamodb", give)
    events.register("after-call-error.dynamodb", give)


@pytest.fixture(params=["sqlite", "dynamodb"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        local = SqliteCatalog(tmp_path / "catalog.sqlite")
        yield local
        local.close()
        return
    stack: ProvisionedStack = request.getfixturevalue("stack")
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    dynamo = DynamoCatalog(table)
    # (every test here that races threads on one item needs it: a run finishing once, a
    # source registered once)
    _atomic_writes(dynamo)
    yield dynamo


def _run(run_id: str = "run-1", **fields: Any) -> RunStatus:
    return RunStatus(
        run_id=run_id,
        entry_urls=("https://a.org/robots.txt",),
        started_at=fields.pop("started_at", "2026-03-01T09:00:00+00:00"),
        sitemaps=fields.pop("sitemaps", 1),
        **fields,
    )


def _outcome(url: str, outcome: Outcome, run_id: str = "run-1") -> UrlOutcome:
    return UrlOutcome(run_id=run_id, source="a.org", url=url, outcome=outcome, recorded_at=AT)


def test_urls_enter_once_and_settle_once(catalog: Any) -> None:
    catalog.start_run(_run())
    urls = [f"https://a.org/d/{i}" for i in range(130)]  # more than one DynamoDB transaction
    # Given a sitemap part entering its URLs, and another part listing some of them again
    assert catalog.enter_urls("run-1", urls, step="part-1") == urls
    again = catalog.enter_urls("run-1", [urls[5], "https://a.org/new"], step="part-2")
    # Then only the new URL is handed on by the second part; a rerun of the first part hands
    # all of its URLs on again without counting them twice
    assert again == ["https://a.org/new"]
    assert catalog.enter_urls("run-1", urls[:3], step="part-1") == urls[:3]
    run = catalog.get_run("run-1")
    assert (run.entered, run.settled) == (131, 0)

    # When outcomes are recorded, one of them twice and one changed
    for url in urls[:100]:
        catalog.put_outcome(_outcome(url, Outcome.RECORD))
    catalog.put_outcome(_outcome(urls[0], Outcome.RECORD))
    status = catalog.put_outcome(_outcome(urls[1], Outcome.FAILED))
    # Then each URL counts once, under its latest outcome
    assert status.entered == 131
    assert status.settled == 100
    assert status.outcomes["record"] == 99
    assert status.outcomes["failed"] == 1
    # Queued URLs are not outcomes yet
    assert len(list(catalog.outcomes("run-1"))) == 100


def test_urls_settled_at_entry_count_once_in_one_write(catalog: Any) -> None:
    catalog.start_run(_run())
    queued = [f"https://a.org/q/{i}" for i in range(60)]
    settled = [_outcome(f"https://a.org/s/{i}", Outcome.UNCHANGED) for i in range(60)]
    # Given a URL another part entered already, and one this part entered queued before
    catalog.enter_urls("run-1", [settled[0].url], step="part-2")
    catalog.enter_urls("run-1", [settled[1].url], step="part-1")
    # When a sitemap part enters its URLs, those unchanged by their lastmod with their outcome
    # (more than one DynamoDB transaction in all)
    handed = catalog.enter_urls("run-1", queued, step="part-1", settled=settled)
    # Then only the queued ones are handed on; the others count entered and settled at once
    assert handed == queued
    status = catalog.get_run("run-1")
    assert (status.entered, status.settled, status.outcomes["unchanged"]) == (120, 59, 59)
    assert {o.url: o for o in catalog.outcomes("run-1")} == {o.url: o for o in settled[1:]}
    assert catalog.get_url(settled[2].url).outcome == "unchanged"  # the URL's latest outcome
    assert catalog.get_url(settled[0].url) is None  # the other part's: left to it
    # and the same part run again (a redelivered job) counts nothing twice
    assert catalog.enter_urls("run-1", queued, step="part-1", settled=settled) == queued
    again = catalog.get_run("run-1")
    assert (again.entered, again.settled, again.outcomes["unchanged"]) == (120, 59, 59)


def test_a_batch_of_outcomes_settles_like_single_ones(catalog: Any) -> None:
    catalog.start_run(_run())
    urls = [f"https://a.org/u/{i}" for i in range(120)]
    catalog.enter_urls("run-1", urls, step="part-1")
    # Given the outcomes of 110 entered URLs and 2 that never entered, written as one batch
    batch = [_outcome(url, Outcome.UNCHANGED) for url in urls[:110]]
    batch += [_outcome(f"https://a.org/x/{i}", Outcome.DISALLOWED) for i in range(2)]
    status = catalog.put_outcomes(batch)
    # Then every URL counts once, as put_outcome would have counted it
    assert (status.entered, status.settled) == (122, 112)
    assert (status.outcomes["unchanged"], status.outcomes["disallowed"]) == (110, 2)
    # and writing the same batch again (a redelivered job) changes no counter
    again = catalog.put_outcomes(batch)
    assert (again.entered, again.settled, again.outcomes["unchanged"]) == (122, 112, 110)
    # while a batch that changes one outcome moves it from one count to the other
    moved = catalog.put_outcomes([_outcome(urls[0], Outcome.RECORD)])
    assert (moved.settled, moved.outcomes["unchanged"], moved.outcomes["record"]) == (112, 109, 1)
    assert len(list(catalog.outcomes("run-1"))) == 112
    assert catalog.put_outcomes([]) is None


def test_outcome_of_a_url_that_never_entered_counts_as_entered(catalog: Any) -> None:
    catalog.start_run(_run())
    # e.g. a sitemap that failed, or a URL robots.txt disallows: recorded by the expander
    status = catalog.put_outcome(_outcome("https://a.org/sitemap.xml", Outcome.FAILED))
    assert (status.entered, status.settled, status.outcomes["failed"]) == (1, 1, 1)


def test_untracked_run_records_outcomes_without_counters(catalog: Any) -> None:
    assert catalog.put_outcome(_outcome("https://a.org/x", Outcome.RECORD, "other")) is None
    assert [o.url for o in catalog.outcomes("other")] == ["https://a.org/x"]


def test_sitemap_steps_count_once_and_remember_sitemaps(catalog: Any) -> None:
    catalog.start_run(_run(sitemaps=1))
    catalog.count_sitemaps("run-1", 2, step="robots:children")
    catalog.count_sitemaps("run-1", 2, step="robots:children")  # a redelivered job
    status = catalog.count_sitemaps(
        "run-1", -1, step="robots:done", sitemap="https://a.org/robots.txt"
    )
    assert status.sitemaps == 2
    catalog.count_sitemaps("run-1", -1, step="s1:done", sitemap="https://a.org/s1.xml")
    status = catalog.count_sitemaps("run-1", -1, step="s2:done", sitemap="https://a.org/s2.xml")
    assert status.sitemaps == 0
    assert status.done
    assert catalog.run_sitemaps("run-1") == [
        "https://a.org/robots.txt",
        "https://a.org/s1.xml",
        "https://a.org/s2.xml",
    ]
    assert catalog.count_sitemaps("nope", 1, step="x") is None


def test_a_run_finishes_once(catalog: Any) -> None:
    catalog.start_run(_run())
    with ThreadPoolExecutor(4) as pool:
        wins = list(pool.map(lambda _: catalog.finish_run("run-1", at=AT), range(8)))
    assert wins.count(True) == 1
    run = catalog.get_run("run-1")
    assert (run.state, run.finished_at) == (RunState.FINISHED, AT)
    assert not catalog.finish_run("run-1", at=AT, state=RunState.STALLED)
    catalog.close_run("run-1", at=AT, report_key="reports/runs/run-1/a.org.html")
    assert catalog.get_run("run-1").report_key == "reports/runs/run-1/a.org.html"


def test_a_stalled_run_can_still_finish(catalog: Any) -> None:
    catalog.start_run(_run())
    assert catalog.finish_run("run-1", at=AT, state=RunState.STALLED)
    assert catalog.get_run("run-1").state is RunState.STALLED
    assert catalog.finish_run("run-1", at=AT)


def test_recount_repairs_counters(catalog: Any) -> None:
    catalog.start_run(_run())
    catalog.enter_urls("run-1", ["https://a.org/1", "https://a.org/2"], step="p")
    catalog.put_outcome(_outcome("https://a.org/1", Outcome.NO_METADATA))
    status = catalog.recount_run("run-1", at=AT)
    assert (status.entered, status.settled, status.outcomes["no-metadata"]) == (2, 1, 1)
    assert catalog.recount_run("nope", at=AT) is None


def test_runs_listed_newest_first_by_source_and_state(catalog: Any) -> None:
    catalog.start_run(_run("r1", source_id="alpha", started_at="2026-03-01T01:00:00+00:00"))
    catalog.start_run(_run("r2", source_id="beta", started_at="2026-03-01T02:00:00+00:00"))
    catalog.start_run(_run("r3", source_id="alpha", started_at="2026-03-01T03:00:00+00:00"))
    catalog.finish_run("r3", at=AT)
    assert [r.run_id for r in catalog.runs()] == ["r3", "r2", "r1"]
    assert [r.run_id for r in catalog.runs("alpha")] == ["r3", "r1"]
    assert [r.run_id for r in catalog.runs(state=RunState.RUNNING)] == ["r2", "r1"]
    assert [r.run_id for r in catalog.runs(limit=1)] == ["r3"]


def test_sources_registry(catalog: Any) -> None:
    source = Source(
        source_id="alpha",
        entry_url="https://a.org/robots.txt",
        hosts=("a.org", "data.a.org"),
        schedule="1d",
        options={"format_parameter": "format=CDIF1.0"},
        contact="data@a.org",
        publisher_keys=("key-1",),
        created_at=AT,
    )
    with ThreadPoolExecutor(4) as pool:  # registered once, however many try at once
        added = list(pool.map(lambda _: catalog.add_source(source), range(6)))
    assert added.count(True) == 1
    catalog.put_source(Source(source_id="beta", entry_url="https://b.org/sitemap.xml"))
    assert catalog.get_source("alpha") == source
    assert [s.source_id for s in catalog.sources()] == ["alpha", "beta"]

    # One run under way per source, claimed atomically
    with ThreadPoolExecutor(4) as pool:
        claims = list(
            pool.map(lambda i: catalog.claim_source("alpha", f"run-{i}", at=AT), range(6))
        )
    assert claims.count(True) == 1
    holder = catalog.get_source("alpha").active_run
    assert catalog.get_source("alpha").last_run_at == AT
    # Updating the source keeps its run under way
    catalog.put_source(source)
    assert catalog.get_source("alpha").active_run == holder
    catalog.release_source("alpha", "someone-else")
    assert catalog.get_source("alpha").active_run == holder
    catalog.release_source("alpha", holder)
    assert catalog.get_source("alpha").active_run is None
    assert catalog.claim_source("alpha", "run-9", at=AT)
    assert not catalog.claim_source("nope", "run-9", at=AT)

    assert catalog.delete_source("beta")
    assert not catalog.delete_source("beta")
    assert catalog.get_source("beta") is None


def test_untracked_run_hands_every_url_on_and_counts_nothing(catalog: Any) -> None:
    urls = ["https://a.org/1", "https://a.org/2", "https://a.org/1"]
    assert catalog.enter_urls("untracked", urls, step="p") == ["https://a.org/1", "https://a.org/2"]
    assert catalog.count_sitemaps("untracked", -1, step="done") is None
    assert catalog.get_run("untracked") is None
