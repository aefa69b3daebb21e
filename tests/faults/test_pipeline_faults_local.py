"""Exact accounting under faults on the local adapters (the SQLite catalogue, the directory store,
the in-process queue): the same small harvest as on AWS, with a transient fault at each write
the stages make through our ports in turn, before the write and after it.

Faults go through wrappers of the ports (:class:`FaultyPort`): the n-th write raises the
retryable StorageError before calling the adapter, or after it returned. The runner retries
(three attempts), so each URL must still end with the clean run's outcome and the run's counters
must settle without the runner's repair (which would say so in its progress output). The fetching
stages run on a worker thread beside the main one, so the n-th write is not always the same one
from run to run; enumerating every n still fails every kind of write at some point.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pytest

from cdif_harvester.cli import runner
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.errors import StorageError
from cdif_harvester.model import RunState
from tests.faults.conftest import PAGES

pytestmark = pytest.mark.network

MAX_WRITES = 32
#: Every crash point: each write, failed before it is made or after.
POINTS: list[tuple[int, Literal["before", "after"]]] = [
    (at, when) for at in range(1, MAX_WRITES + 1) for when in ("before", "after")
]
# What our ports offer that only reads: every other method is a write that can fail.
_UNCOUNTED = frozenset(
    {
        "get",
        "exists",
        "list",
        "receive",
        "get_record",
        "records",
        "outcomes",
        "get_url",
        "get_urls",
        "urls",
        "get_run",
        "runs",
        "run_sitemaps",
        "get_source",
        "sources",
    }
)


@dataclass
class PortFaults:
    """Numbers the writes made through the wrapped ports and fails the ``at``-th one."""

    at: int | None = None
    when: Literal["before", "after"] = "before"
    writes: list[str] = field(default_factory=list)
    fired: str | None = None
    armed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def number(self, name: str) -> bool:
        """Count the write ``name``; True when it is the one to fail."""
        with self.lock:
            if not self.armed:
                return False
            self.writes.append(name)
            hit = len(self.writes) == self.at
            if hit:
                self.fired = name
            return hit


class FaultyPort:
    """A port whose writes go through :class:`PortFaults` (reads pass untouched)."""

    def __init__(self, name: str, inner: Any, faults: PortFaults) -> None:
        self._name, self._inner, self._faults = name, inner, faults

    def __getattr__(self, attribute: str) -> Any:
        method = getattr(self._inner, attribute)
        if attribute.startswith("_") or attribute in _UNCOUNTED or not callable(method):
            return method
        return self._faulty(f"{self._name}.{attribute}", method)

    def _faulty(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            hit = self._faults.number(name)
            if hit and self._faults.when == "before":
                raise StorageError(f"{name} failed: injected before the write")
            result = method(*args, **kwargs)
            if hit:
                raise StorageError(f"{name} failed: injected after the write")
            return result

        return call


class TwiceQueue:
    """A queue that delivers every message it is given twice (as SQS may)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._inner, attribute)

    def send(self, queue: str, bodies: Any, *, delays: Any = None) -> None:
        twice = None if delays is None else [*delays, *delays]
        self._inner.send(queue, [*bodies, *bodies], delays=twice)


@dataclass(frozen=True)
class Result:
    outcomes: dict[str, tuple[str, str]]
    counters: tuple[int, int, int, str]
    per_outcome: dict[str, int]
    records: frozenset[str]
    writes: tuple[str, ...]
    progress: str


def _armed(faults: PortFaults, armed: bool, work: Callable[..., Any]) -> Callable[..., Any]:
    """``work``, after which faults are ``armed`` (or disarmed before it runs)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if not armed:
            faults.armed = False
        result = work(*args, **kwargs)
        faults.armed = armed
        return result

    return run


def _harvest(
    site: PublisherSite,
    out: Path,
    faults: PortFaults,
    monkeypatch: pytest.MonkeyPatch,
    *,
    twice: bool = False,
) -> Result:
    """Harvest the site under ``faults``: armed once the run has started (starting it is the
    command itself, which fails as a whole, as the scheduler's tick does on AWS) and until the
    queues are empty (closing the run comes after the accounting)."""
    progress = io.StringIO()
    monkeypatch.setattr(runner, "start_run", _armed(faults, True, runner.start_run))
    monkeypatch.setattr(runner, "close_run", _armed(faults, False, runner.close_run))
    # (the retries' backoff is waited on a clock that moves without real sleeping)
    with LocalHarvester(
        out, allow_loopback=True, progress=progress, workers=1, sleep=lambda seconds: None
    ) as harvester:
        wiring = harvester.wiring
        harvester.wiring = replace(
            wiring,
            store=FaultyPort("store", wiring.store, faults),
            catalog=FaultyPort("catalog", wiring.catalog, faults),
            queue=FaultyPort("queue", TwiceQueue(wiring.queue) if twice else wiring.queue, faults),
        )
        summary = harvester.harvest(site.url("/robots.txt"))
        run = harvester.catalog.get_run(summary.run_id)
        assert run is not None
        outcomes = {
            o.url: (o.outcome.value, (o.reason or "").split(":")[0])
            for o in harvester.catalog.outcomes(summary.run_id)
        }
    return Result(
        outcomes=outcomes,
        counters=(run.entered, run.settled, run.sitemaps, run.state.value),
        per_outcome={kind: n for kind, n in run.outcomes.items() if n},
        records=frozenset(p.name for p in (out / "records").rglob("*.jsonld")),
        writes=tuple(faults.writes),
        progress=progress.getvalue(),
    )


@pytest.fixture(scope="module")
def clean(small_site: PublisherSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Result]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        result = _harvest(small_site, tmp_path_factory.mktemp("clean"), PortFaults(), monkeypatch)
    assert result.counters[3] == RunState.FINISHED.value
    assert len(result.outcomes) == len(PAGES)
    assert 0 < len(result.writes) <= MAX_WRITES, result.writes
    yield result


@pytest.mark.parametrize("point", POINTS, ids=[f"{when}-{at}" for at, when in POINTS])
def test_a_fault_at_any_write_leaves_the_clean_runs_accounting(
    small_site: PublisherSite,
    clean: Result,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    point: tuple[int, Literal["before", "after"]],
) -> None:
    at, when = point
    if at > len(clean.writes):
        pytest.skip(f"the clean run makes {len(clean.writes)} writes")
    faults = PortFaults(at=at, when=when)
    result = _harvest(small_site, tmp_path, faults, monkeypatch)
    fault = f"{when} write {at} (fired at {faults.fired})"
    assert faults.fired, fault
    assert result.outcomes == clean.outcomes, fault
    entered, settled, sitemaps, state = result.counters
    assert entered == settled == clean.counters[0], fault
    assert (sitemaps, state) == (0, RunState.FINISHED.value), fault
    assert result.per_outcome == clean.per_outcome, fault
    assert result.records == clean.records, fault
    assert "run counters say" not in result.progress, fault  # finished by its counters


def test_every_message_sent_twice_leaves_the_clean_runs_accounting(
    small_site: PublisherSite, clean: Result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _harvest(small_site, tmp_path, PortFaults(), monkeypatch, twice=True)
    assert result.outcomes == clean.outcomes
    entered, settled, sitemaps, state = result.counters
    assert entered == settled == clean.counters[0]
    assert (sitemaps, state) == (0, RunState.FINISHED.value)
    assert result.per_outcome == clean.per_outcome
    assert result.records == clean.records
    assert "run counters say" not in result.progress
