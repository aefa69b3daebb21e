"""The outcome sink of a batch (stages/outcomes.BatchOutcomes, decision 0089): the outcomes its
jobs settle are held until the batch's end, written run by run, those of a job that failed
dropped, and the jobs whose outcomes could not be written named for SQS to deliver again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import InProcessQueue, MemoryObjectStore, SqliteCatalog
from cdif_harvester.errors import StorageError
from cdif_harvester.model import Outcome, RunState, RunStatus, UrlOutcome, UrlState
from cdif_harvester.stages.outcomes import BatchOutcomes, outcome_now, put_outcome, record_outcome
from cdif_harvester.wiring import Wiring

RUNS = ("run-a", "run-b")
URLS = [f"https://example.org/{n}.html" for n in range(3)]


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


class _NoFetcher:
    def fetch(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("no fetch here")


class _FailingRun(SqliteCatalog):
    """A catalogue whose writes of the outcomes of one run fail (a storage fault)."""

    failing: str | None = None

    def put_outcomes(
        self, outcomes: Sequence[UrlOutcome], *, states: Sequence[UrlState] = ()
    ) -> RunStatus | None:
        if outcomes and outcomes[0].run_id == self.failing:
            raise StorageError("injected")
        return super().put_outcomes(outcomes, states=states)


def _wiring(tmp_path: Path) -> tuple[Wiring, _FailingRun, BatchOutcomes]:
    catalog = _FailingRun(tmp_path / "catalog.sqlite")
    for run_id in RUNS:
        catalog.start_run(RunStatus(run_id=run_id, entry_urls=(), started_at="2026-11-25"))
        catalog.enter_urls(run_id, URLS, step="test")
    held = BatchOutcomes()
    wiring = Wiring(
        store=MemoryObjectStore(),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=_NoFetcher(),  # type: ignore[arg-type]
        clock=_Clock(),
    )
    return replace(wiring, outcomes=held), catalog, held


def _settle(wiring: Wiring, run_id: str, url: str) -> None:
    record_outcome(wiring, run_id=run_id, source="s", url=url, outcome=Outcome.NO_METADATA)


def _settled(catalog: SqliteCatalog, run_id: str) -> tuple[int, RunState]:
    run = catalog.get_run(run_id)
    assert run is not None
    return run.settled, run.state


def test_outcomes_are_held_until_the_batch_ends_and_a_failed_jobs_are_dropped(
    tmp_path: Path,
) -> None:
    wiring, catalog, held = _wiring(tmp_path)
    # Given the jobs of a batch settling URLs of two runs, one of them failing after it settled
    for number, url in enumerate(URLS):
        with held.job(f"m{number}"):
            _settle(wiring, "run-a", url)
    with pytest.raises(StorageError), held.job("m-failed"):
        _settle(wiring, "run-b", URLS[0])
        raise StorageError("the job failed after its outcome")
    with held.job("m-b"):
        _settle(wiring, "run-b", URLS[1])
    # Then nothing is written while the batch runs
    assert [_settled(catalog, run_id) for run_id in RUNS] == [(0, RunState.RUNNING)] * 2

    # When the batch ends
    assert held.flush(wiring) == []

    # Then each run has the outcomes of the jobs that went well, and a done run is finished
    assert _settled(catalog, "run-a") == (len(URLS), RunState.FINISHED)
    assert _settled(catalog, "run-b") == (1, RunState.RUNNING)
    assert [o.url for o in catalog.outcomes("run-b") if o.outcome is Outcome.NO_METADATA] == [
        URLS[1]
    ]
    assert held.flush(wiring) == []  # (nothing is held after a flush)


def test_a_runs_failed_write_names_its_jobs_and_leaves_the_other_runs_written(
    tmp_path: Path,
) -> None:
    wiring, catalog, held = _wiring(tmp_path)
    catalog.failing = "run-b"
    with held.job("m-a"):
        _settle(wiring, "run-a", URLS[0])
    with held.job("m-both"):
        _settle(wiring, "run-a", URLS[1])
        _settle(wiring, "run-b", URLS[1])
    with held.job("m-b"):
        _settle(wiring, "run-b", URLS[2])

    (unsettled,) = held.flush(wiring)

    assert (unsettled.run_id, unsettled.keys) == ("run-b", frozenset({"m-both", "m-b"}))
    assert isinstance(unsettled.error, StorageError)
    assert _settled(catalog, "run-a")[0] == 2
    assert _settled(catalog, "run-b")[0] == 0


def test_an_outcome_outside_a_job_is_refused(tmp_path: Path) -> None:
    wiring, _catalog, _held = _wiring(tmp_path)
    with pytest.raises(RuntimeError, match="outside a job"):
        _settle(wiring, "run-a", URLS[0])


def test_a_state_added_with_its_outcome_is_written_with_it_at_the_batch_end(
    tmp_path: Path,
) -> None:
    wiring, catalog, held = _wiring(tmp_path)
    states = [UrlState(url=url, source="s", fingerprint=f"f{n}") for n, url in enumerate(URLS)]
    outcomes = [
        outcome_now(wiring, run_id="run-a", source="s", url=url, outcome=Outcome.RECORD)
        for url in URLS
    ]
    # Given jobs settling their URLs with the states they leave, the last one failing after it
    for number in range(2):
        with held.job(f"m{number}"):
            put_outcome(wiring, outcomes[number], states[number])
    with pytest.raises(StorageError), held.job("m-failed"):
        put_outcome(wiring, outcomes[2], states[2])
        raise StorageError("the job failed after its outcome")
    # Then no state is written while the batch runs
    assert catalog.get_urls(URLS) == {}

    # When the batch ends, the states of the jobs that went well are written with their outcomes
    assert held.flush(wiring) == []
    found = catalog.get_urls(URLS)
    assert [(found[url].fingerprint, found[url].outcome) for url in URLS[:2]] == [
        ("f0", "record"),
        ("f1", "record"),
    ]
    assert URLS[2] not in found
