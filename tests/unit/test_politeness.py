"""Politeness per host: the in-memory gate, the gated fetcher (sleep and defer modes), the
journal that lets a deferred job resume, Retry-After, and the settings that size it all."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import DirectoryObjectStore, InProcessQueue, SqliteCatalog
from cdif_harvester.adapters.politeness import GatedFetcher, MemoryHostGate, keep_host_slots
from cdif_harvester.contracts import UrlJob
from cdif_harvester.domain.discovery.robots import parse_robots
from cdif_harvester.domain.resolution.rules import parse_retry_after
from cdif_harvester.errors import Deferred
from cdif_harvester.keys import journal_key
from cdif_harvester.model import FetchResponse
from cdif_harvester.ports import HostSlot, Wait
from cdif_harvester.settings import Settings
from cdif_harvester.stages import jobs
from cdif_harvester.stages.jobs import job_key, run_job
from cdif_harvester.wiring import Wiring

A = "https://a.example.org"
B = "https://b.example.org:8443"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """Monotonic seconds that move only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeFetcher:
    """Answers every URL 200 (or from ``answers``), records what was asked and when."""

    def __init__(
        self,
        clock: FakeClock | None = None,
        answers: Mapping[str, list[tuple[int, dict[str, str]]]] | None = None,
    ) -> None:
        self.clock = clock
        self.answers = {url: list(queue) for url, queue in (answers or {}).items()}
        self.asked: list[tuple[str, str, float]] = []

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        self.asked.append((method, url, self.clock.now if self.clock else 0.0))
        status, head = 200, {"content-type": "text/html"}
        if self.answers.get(url):
            status, head = self.answers[url].pop(0)
        body = f"{method} {url}".encode()
        return FetchResponse(url=url, status=status, headers=tuple(head.items()), body=body)


def _gated(
    inner: FakeFetcher, clock: FakeClock, gate: MemoryHostGate | None = None, **kwargs: Any
) -> GatedFetcher:
    return GatedFetcher(
        inner,
        gate or MemoryHostGate(monotonic=clock.monotonic),
        slots_for=kwargs.pop("slots_for", lambda origin: 2),
        sleep=clock.sleep,
        now=lambda: NOW,
        **kwargs,
    )


# --------------------------------------------------------------------------- the gate


def test_gate_lets_n_requests_in_flight_per_host_and_no_more() -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic, busy_wait=0.05)
    first = gate.acquire(A, slots=2)
    second = gate.acquire(A, slots=2)
    assert isinstance(first, HostSlot) and isinstance(second, HostSlot)
    assert first.index != second.index
    assert gate.acquire(A, slots=2) == Wait(0.05, "busy")
    assert isinstance(gate.acquire(B, slots=2), HostSlot)  # another host is not held up
    gate.release(first)
    assert isinstance(gate.acquire(A, slots=2), HostSlot)


def test_gate_spaces_starts_by_the_interval_and_counts_the_last_start() -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic)
    robots = gate.acquire(A, slots=2)  # robots.txt: no interval known yet
    assert isinstance(robots, HostSlot)
    gate.release(robots)
    clock.now += 0.25
    gate.set_interval(A, 1.0)  # learnt from that robots.txt
    assert gate.acquire(A, slots=2) == Wait(pytest.approx(0.75), "interval")
    clock.now += 0.75
    assert isinstance(gate.acquire(A, slots=2), HostSlot)
    assert gate.acquire(A, slots=2) == Wait(pytest.approx(1.0), "interval")


def test_gate_hold_closes_a_host_and_never_shortens() -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.hold(A, 30.0)
    gate.hold(A, 5.0)
    assert gate.acquire(A, slots=2) == Wait(pytest.approx(30.0), "held")
    clock.now += 30.0
    assert isinstance(gate.acquire(A, slots=2), HostSlot)


def test_a_slot_never_given_back_frees_itself_after_its_lease() -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic, lease=60.0)
    lost = gate.acquire(A, slots=1)  # its worker dies holding it
    assert isinstance(lost, HostSlot)
    clock.now += 59.0
    assert isinstance(gate.acquire(A, slots=1), Wait)
    clock.now += 1.5
    taken = gate.acquire(A, slots=1)
    assert isinstance(taken, HostSlot)
    gate.release(lost)  # late: must not free the slot taken since
    assert gate.acquire(A, slots=1) == Wait(0.05, "busy")
    assert gate.in_flight(A) == 1


def test_gate_is_safe_under_threads() -> None:
    gate = MemoryHostGate(busy_wait=0.001)
    in_flight = 0
    peak = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal in_flight, peak
        for _ in range(30):
            while not isinstance(slot := gate.acquire(A, slots=3), HostSlot):
                time.sleep(0.0005)
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            time.sleep(0.0005)
            with lock:
                in_flight -= 1
            gate.release(slot)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 3


# --------------------------------------------------------------------------- sleep mode


def test_sleep_mode_waits_out_the_crawl_delay_per_host() -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.set_interval(A, 3.0)
    fetcher = _gated(inner, clock, gate)
    fetcher.fetch(f"{A}/1")
    fetcher.fetch(f"{B}/1")  # another host: no wait
    clock.now += 1.0
    fetcher.fetch(f"{A}/2")
    assert clock.slept == [pytest.approx(2.0)]
    starts = [when for _, url, when in inner.asked if url.startswith(A)]
    assert starts[1] - starts[0] == pytest.approx(3.0)


class CountingGate(MemoryHostGate):
    """The memory gate, also keeping the slots each acquire asked for."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(monotonic=clock.monotonic, busy_wait=0.5)
        self.asked_slots: list[int] = []

    def acquire(self, host: str, *, slots: int) -> HostSlot | Wait:
        self.asked_slots.append(slots)
        return super().acquire(host, slots=slots)


def test_a_jobs_source_limits_tighten_the_host_for_its_requests_only() -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = CountingGate(clock)
    fetcher = _gated(inner, clock, gate, slots_for=lambda origin: 4)
    # Given a job of a source that asks for 1 request at a time and 2.5 s between starts
    with fetcher.job_scope(run_id="r", job_key="k", requests_per_host=1, crawl_delay=2.5):
        fetcher.fetch(f"{A}/1")
        fetcher.fetch(f"{A}/2")
        fetcher.fetch(f"{B}/1")  # another host: its own clock
    # Then its requests take one slot at most and start 2.5 s apart on each host
    assert gate.asked_slots[:3] == [1, 1, 1]
    starts = [when for _, url, when in inner.asked if url.startswith(A)]
    assert starts[1] - starts[0] == pytest.approx(2.5)
    assert clock.slept == [pytest.approx(2.5)]
    # And outside the job the deployment's limits apply again
    fetcher.fetch(f"{B}/2")
    assert gate.asked_slots[-1] == 4
    assert clock.slept[-1:] == [pytest.approx(2.5)]  # B's hold from inside the job still counts


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_seconds_holds_the_host(status: int) -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock, {f"{A}/busy": [(status, {"retry-after": "7"})]})
    fetcher = _gated(inner, clock)
    response = fetcher.fetch(f"{A}/busy")
    assert response.status == status  # the stage decides what the status means
    fetcher.fetch(f"{A}/busy")
    assert clock.slept == [pytest.approx(7.0)]


def test_retry_after_http_date_is_read_and_capped() -> None:
    clock = FakeClock()
    later = format_datetime(NOW + timedelta(hours=5), usegmt=True)
    inner = FakeFetcher(clock, {f"{A}/x": [(429, {"retry-after": later})]})
    fetcher = _gated(inner, clock, max_retry_after=900.0)
    fetcher.fetch(f"{A}/x")
    fetcher.fetch(f"{A}/x")
    assert clock.slept == [pytest.approx(900.0)]


def test_no_hold_without_retry_after_or_on_other_statuses() -> None:
    clock = FakeClock()
    inner = FakeFetcher(
        clock,
        {f"{A}/x": [(503, {}), (404, {"retry-after": "60"}), (429, {"retry-after": "soon"})]},
    )
    fetcher = _gated(inner, clock)
    for _ in range(4):
        fetcher.fetch(f"{A}/x")
    assert clock.slept == []


def test_parse_retry_after() -> None:
    assert parse_retry_after("120", now=NOW) == 120.0
    assert parse_retry_after(" 0 ", now=NOW) == 0.0
    date = format_datetime(NOW + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(date, now=NOW) == pytest.approx(90.0)
    past = format_datetime(NOW - timedelta(days=1), usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0
    assert parse_retry_after("-5", now=NOW) is None
    assert parse_retry_after("tomorrow", now=NOW) is None


# --------------------------------------------------------------------------- slots kept per batch


class RecordingGate(MemoryHostGate):
    """The memory gate, also recording which slot each call took, reused or gave back."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(monotonic=clock.monotonic)
        self.calls: list[tuple[str, int]] = []

    def acquire(self, host: str, *, slots: int) -> HostSlot | Wait:
        taken = super().acquire(host, slots=slots)
        if isinstance(taken, HostSlot):
            self.calls.append(("acquire", taken.index))
        return taken

    def reuse(self, slot: HostSlot, *, slots: int) -> HostSlot | Wait | None:
        self.calls.append(("reuse", slot.index))
        return super().reuse(slot, slots=slots)

    def release(self, slot: HostSlot) -> None:
        self.calls.append(("release", slot.index))
        super().release(slot)


def test_within_a_batch_a_hosts_slot_stays_taken_and_keeps_the_interval() -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = RecordingGate(clock)
    gate.set_interval(A, 1.0)
    fetcher = _gated(inner, clock, gate)
    with keep_host_slots():
        fetcher.fetch(f"{A}/1")
        assert gate.in_flight(A) == 1  # kept between requests: one in flight
        fetcher.fetch(f"{A}/2")
        gate.hold(A, 5.0)
        fetcher.fetch(f"{A}/3")
    assert gate.in_flight(A) == 0
    # (each request after the first asks to reuse the slot twice: told to wait, then again)
    assert gate.calls == [("acquire", 0), *[("reuse", 0)] * 4, ("release", 0)]
    assert clock.slept == [pytest.approx(1.0), pytest.approx(5.0)]


def test_a_kept_slot_beyond_a_jobs_own_limit_is_given_back_for_one_within_it() -> None:
    clock = FakeClock()
    gate = RecordingGate(clock)
    fetcher = _gated(FakeFetcher(clock), clock, gate, slots_for=lambda origin: 4)
    elsewhere = gate.acquire(A, slots=4)  # another worker's request on slot 0
    assert isinstance(elsewhere, HostSlot)
    with keep_host_slots():
        fetcher.fetch(f"{A}/1")  # slot 1, kept
        gate.release(elsewhere)
        # Then a job whose source allows one request in flight does not use slot 1
        with fetcher.job_scope(run_id="r", job_key="k", requests_per_host=1):
            fetcher.fetch(f"{A}/2")
    assert gate.calls[1:] == [
        ("acquire", 1),
        ("release", 0),
        ("release", 1),
        ("acquire", 0),
        ("release", 0),
    ]


def test_a_slot_whose_lease_ran_out_is_not_reused() -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic, lease=10.0)
    slot = gate.acquire(A, slots=1)
    assert isinstance(slot, HostSlot)
    clock.now += 5.0
    assert gate.reuse(slot, slots=1) == slot  # and its lease starts again
    clock.now += 9.0
    assert gate.reuse(slot, slots=1) == slot
    clock.now += 11.0
    assert gate.reuse(slot, slots=1) is None


# --------------------------------------------------------------------------- defer mode


def _wiring(tmp_path: Path, fetcher: GatedFetcher) -> Wiring:
    return Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=fetcher,
        clock=_WallClock(),
    )


class _WallClock:
    def now(self) -> datetime:
        return NOW


def two_requests(wiring: Wiring, job: UrlJob) -> list[int]:
    """A stage that asks the host twice per job (as the resolver does: HEAD, then GET)."""
    head = wiring.fetcher.fetch(job.url, method="HEAD", headers={"Accept": "text/html"})
    page = wiring.fetcher.fetch(job.url, headers={"Accept": "text/html"})
    return [head.status, page.status]


@pytest.mark.parametrize("mode", ["wait", "defer"])
def test_the_job_key_is_worked_out_only_to_name_a_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    # The key hashes the whole message (2% of a local harvest's main process): a fetcher that
    # waits keeps no journal, so it never asks for one; one that defers asks once per job.
    keys: list[str] = []

    def counted(stage: Any, job: object) -> str:
        keys.append(job_key(stage, job))
        return keys[-1]

    monkeypatch.setattr(jobs, "job_key", counted)
    clock = FakeClock()
    store = DirectoryObjectStore(tmp_path / "journals")
    fetcher = _gated(FakeFetcher(clock), clock, mode=mode, journal_store=store)
    job = UrlJob(run_id="run-1", source="a.example.org", url=f"{A}/page")
    assert run_job(_wiring(tmp_path, fetcher), job, two_requests) == [200, 200]
    assert keys == ([] if mode == "wait" else [job_key(two_requests, job)])


def test_defer_mode_raises_deferred_instead_of_sleeping(tmp_path: Path) -> None:
    clock = FakeClock()
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.set_interval(A, 5.0)
    fetcher = _gated(
        FakeFetcher(clock),
        clock,
        gate,
        mode="defer",
        journal_store=DirectoryObjectStore(tmp_path),
        jitter=lambda wait: 0.5,
    )
    fetcher.fetch(f"{A}/1")
    with pytest.raises(Deferred) as raised:
        fetcher.fetch(f"{A}/2")
    assert raised.value.delay == pytest.approx(5.5)  # the wait plus the jitter
    assert clock.slept == []


def test_a_deferred_job_resumes_from_its_journal_without_asking_again(tmp_path: Path) -> None:
    # Given a host with a Crawl-delay, and a job that asks it twice
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.set_interval(A, 2.0)
    fetcher = _gated(
        inner,
        clock,
        gate,
        mode="defer",
        journal_store=DirectoryObjectStore(tmp_path),
        jitter=lambda wait: 0.0,
    )
    wiring = _wiring(tmp_path, fetcher)
    job = UrlJob(run_id="run-1", source="a.example.org", url=f"{A}/page")

    # When it first runs, the second request must wait: the job is deferred
    with pytest.raises(Deferred):
        run_job(wiring, job, two_requests)
    assert [(m, u) for m, u, _ in inner.asked] == [("HEAD", f"{A}/page")]
    key = journal_key("run-1", job_key(two_requests, job))
    assert wiring.store.exists(key)

    # Then, run again after the delay, it replays the HEAD and sends only the GET
    clock.now += 2.0
    assert run_job(wiring, job, two_requests, resume=True) == [200, 200]
    assert [(m, u) for m, u, _ in inner.asked] == [("HEAD", f"{A}/page"), ("GET", f"{A}/page")]


def test_a_resumed_job_deferred_again_keeps_every_answer(tmp_path: Path) -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.set_interval(A, 2.0)
    store = DirectoryObjectStore(tmp_path)
    fetcher = _gated(inner, clock, gate, mode="defer", journal_store=store, jitter=lambda wait: 0.0)
    wiring = _wiring(tmp_path, fetcher)
    job = UrlJob(run_id="run-1", source="a.example.org", url=f"{A}/page")

    def three_requests(wiring: Wiring, job: UrlJob) -> int:
        for path in ("/a", "/b", "/c"):
            wiring.fetcher.fetch(f"{A}{path}")
        return len(inner.asked)

    with pytest.raises(Deferred):
        run_job(wiring, job, three_requests)
    clock.now += 2.0
    with pytest.raises(Deferred):
        run_job(wiring, job, three_requests, resume=True)
    clock.now += 2.0
    assert run_job(wiring, job, three_requests, resume=True) == 3
    assert [u for _, u, _ in inner.asked] == [f"{A}/a", f"{A}/b", f"{A}/c"]
    # every body stored once, beside the journal's index
    bodies = [k for k in store.list("staging/run-1/journal/") if k.endswith(".body")]
    assert len(bodies) == 2


class _CountingStore(DirectoryObjectStore):
    """A directory store that counts its writes."""

    puts = 0

    def put(self, key: str, body: bytes, **kwargs: Any) -> None:
        self.puts += 1
        super().put(key, body, **kwargs)


def test_a_job_deferred_before_any_new_answer_writes_no_journal(tmp_path: Path) -> None:
    # Given a host that must wait, and a job whose first request is deferred
    clock = FakeClock()
    inner = FakeFetcher(clock)
    gate = MemoryHostGate(monotonic=clock.monotonic)
    gate.set_interval(A, 2.0)
    store = _CountingStore(tmp_path)
    fetcher = _gated(inner, clock, gate, mode="defer", journal_store=store, jitter=lambda w: 0.0)
    wiring = _wiring(tmp_path, fetcher)
    fetcher.fetch(f"{A}/other")  # another job's request: the host's next start is 2 s away
    job = UrlJob(run_id="run-1", source="a.example.org", url=f"{A}/page")
    key = journal_key("run-1", job_key(two_requests, job))

    # When it is deferred before its host answered it anything, nothing is written
    with pytest.raises(Deferred):
        run_job(wiring, job, two_requests)
    assert store.puts == 0
    assert not store.exists(key)

    # Then it gets its HEAD answered and is deferred: the answer is kept (body and index)
    clock.now += 2.0
    with pytest.raises(Deferred):
        run_job(wiring, job, two_requests, resume=True)
    assert store.puts == 2

    # And resumed, it replays the HEAD and is deferred again at once: nothing new to write
    with pytest.raises(Deferred):
        run_job(wiring, job, two_requests, resume=True)
    assert store.puts == 2
    clock.now += 2.0
    assert run_job(wiring, job, two_requests, resume=True) == [200, 200]
    assert [m for m, u, _ in inner.asked if u == f"{A}/page"] == ["HEAD", "GET"]


def test_without_resume_a_job_asks_afresh_and_a_sleeping_fetcher_keeps_no_journal(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    inner = FakeFetcher(clock)
    store = DirectoryObjectStore(tmp_path)
    job = UrlJob(run_id="run-1", source="a.example.org", url=f"{A}/page")
    sleeping = _gated(inner, clock, journal_store=store)
    assert run_job(_wiring(tmp_path, sleeping), job, two_requests) == [200, 200]
    assert list(store.list("staging/")) == []
    deferring = _gated(inner, clock, mode="defer", journal_store=store)
    run_job(_wiring(tmp_path, deferring), job, two_requests)
    assert len(inner.asked) == 4


def test_defer_mode_needs_a_journal_store() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="journal_store"):
        _gated(FakeFetcher(clock), clock, mode="defer")


# --------------------------------------------------------------------------- settings


def test_slots_per_host_default_and_overrides() -> None:
    settings = Settings(
        requests_per_host=2,
        requests_per_host_overrides={"a.example.org": 1, B: 4},
    )
    assert settings.slots_for(A) == 1  # by host name, any scheme and port
    assert settings.slots_for("http://a.example.org:8080") == 1
    assert settings.slots_for(B) == 4  # by origin
    assert settings.slots_for("https://c.example.org") == 2
    assert Settings().slots_for(A) == 2


def test_remembering_a_robots_policy_writes_nowhere_else(tmp_path: Path) -> None:
    heard: list[str] = []
    wiring = _wiring(tmp_path, _gated(FakeFetcher(), FakeClock()))
    wiring.record_crawl_delay = lambda origin, policy: heard.append(origin)
    policy = parse_robots(b"User-agent: *\nCrawl-delay: 60\n", robots_url=f"{A}/robots.txt")
    wiring.robots.remember(A, policy)
    assert heard == []  # telling the gate is the expander's own call, never a side effect
    assert dict(wiring.robots) == {A: policy}
    with pytest.raises(TypeError):
        wiring.robots[B] = policy  # type: ignore[index]  # no write by assignment


def test_the_crawl_delay_a_policy_sets_is_capped_by_the_settings() -> None:
    settings = Settings(max_crawl_delay=10.0)
    slow = parse_robots(b"User-agent: *\nCrawl-delay: 60\n", robots_url=f"{A}/robots.txt")
    none = parse_robots(b"User-agent: *\nDisallow:\n", robots_url=f"{B}/robots.txt")
    assert (settings.crawl_delay_of(slow), settings.crawl_delay_of(none)) == (10.0, 0.0)
