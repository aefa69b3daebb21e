"""The DynamoDB host gate with slots kept for a batch (``keep_host_slots``), under moto on the
catalogue table of template.yaml: one write to take a host's slot and one to give it back per
batch, and the same promises as a slot taken per request: N in flight, the Crawl-delay between
starts, Retry-After holds (the holder's own and another worker's), a lease that never lapses
while the slot is reused, and the slot given back whatever ends the batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoHostGate
from cdif_harvester.adapters.local import DirectoryObjectStore
from cdif_harvester.adapters.politeness import GatedFetcher, keep_host_slots
from cdif_harvester.errors import Deferred
from cdif_harvester.model import FetchResponse
from cdif_harvester.ports import HostSlot, Wait
from tests.support.aws import ProvisionedStack

A = "https://a.example.org"
B = "https://b.example.org"


class Clock:
    """Wall-clock seconds that move only when someone sleeps (or a test says so)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Host:
    """Answers 200 (or from ``answers``, by URL) and records each request and its start."""

    def __init__(
        self,
        clock: Callable[[], float],
        answers: Mapping[str, tuple[int, dict[str, str]]] | None = None,
    ) -> None:
        self.clock = clock
        self.answers = dict(answers or {})
        self.asked: list[tuple[str, float]] = []

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        self.asked.append((url, self.clock()))
        status, head = self.answers.get(url, (200, {}))
        return FetchResponse(url=url, status=status, headers=tuple(head.items()), body=b"x")


def _first(choices: Sequence[int]) -> int:
    return choices[0]


@pytest.fixture
def table(stack: ProvisionedStack) -> Any:
    return boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)


class AtomicTable:
    """A table whose calls run one at a time: DynamoDB applies a conditional write atomically,
    moto in steps that threads can interleave."""

    def __init__(self, table: Any, lock: threading.Lock) -> None:
        self.table = table
        self.lock = lock

    def update_item(self, **kwargs: Any) -> Any:
        with self.lock:
            return self.table.update_item(**kwargs)

    def get_item(self, **kwargs: Any) -> Any:
        with self.lock:
            return self.table.get_item(**kwargs)


@contextmanager
def gate_calls(table: Any, operation: str = "UpdateItem") -> Iterator[list[str]]:
    """The ``operation`` calls ``table``'s client makes on gate items (their update, if any)."""
    calls: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("sk") in ("GATE", {"S": "GATE"}):
            calls.append(str(params.get("UpdateExpression", "")))

    events = table.meta.client.meta.events
    events.register(f"provide-client-params.dynamodb.{operation}", count)
    try:
        yield calls
    finally:
        events.unregister(f"provide-client-params.dynamodb.{operation}", count)


def _gate(table: Any, clock: Clock, **kwargs: Any) -> DynamoHostGate:
    return DynamoHostGate(table, clock=clock, choose=kwargs.pop("choose", _first), **kwargs)


def _fetcher(
    host: Host, gate: DynamoHostGate, clock: Clock, *, slots: int = 2, **kwargs: Any
) -> GatedFetcher:
    return GatedFetcher(
        host,
        gate,
        slots_for=lambda origin: slots,
        sleep=clock.sleep,
        jitter=lambda w: 0.0,
        **kwargs,
    )


def _slots_taken(table: Any, host: str) -> list[str]:
    item = table.get_item(Key={"pk": f"HOST#{host}", "sk": "GATE"}, ConsistentRead=True)["Item"]
    return sorted(name for name in item if name.startswith("slot"))


def test_a_batch_takes_each_hosts_slot_once_and_gives_it_back_once(table: Any) -> None:
    clock = Clock()
    host = Host(clock)
    fetcher = _fetcher(host, _gate(table, clock), clock)
    # Given a batch of five jobs on one host and one on another
    with gate_calls(table) as writes:
        with keep_host_slots():
            for n in range(5):
                fetcher.fetch(f"{A}/{n}")
                clock.now += 0.5  # (the rest of the job's work)
            fetcher.fetch(f"{B}/0")
            # Then while the batch runs each host's slot is taken once and kept
            assert len(writes) == 2
            assert _slots_taken(table, A) == ["slot0"] and _slots_taken(table, B) == ["slot0"]
        # And at its end each is given back once
        assert len(writes) == 4
    assert len(host.asked) == 6
    assert _slots_taken(table, A) == [] and _slots_taken(table, B) == []


def test_concurrent_batches_on_a_one_slot_host_never_overlap(stack: ProvisionedStack) -> None:
    # Two Lambdas (a gate, a table client and a fetcher each, real time) run a batch each on a
    # host allowed one request in flight; between requests each does a little other work
    in_flight: list[str] = []
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()
    overlaps: list[tuple[str, ...]] = []

    class SlowHost(Host):
        def fetch(self, url: str, **kwargs: Any) -> FetchResponse:
            name = threading.current_thread().name
            with lock:
                in_flight.append(name)
                if len(in_flight) > 1:
                    overlaps.append(tuple(in_flight))
            started = time.monotonic()
            time.sleep(0.01)
            with lock:
                in_flight.remove(name)
                spans.append((name, started, time.monotonic()))
            return super().fetch(url, **kwargs)

    moto = threading.Lock()

    def batch(fetcher: GatedFetcher) -> None:
        with keep_host_slots():
            for n in range(4):
                fetcher.fetch(f"{A}/{n}")
                time.sleep(0.03)

    workers = [
        threading.Thread(
            target=batch,
            args=(
                GatedFetcher(
                    SlowHost(time.time),
                    DynamoHostGate(AtomicTable(_table(stack), moto), busy_wait=0.005),
                    slots_for=lambda origin: 1,
                ),
            ),
            name=name,
        )
        for name in ("one", "two")
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers)
    # Then no two requests were ever in flight together, and the batches did not interleave:
    # the slot a batch kept between its requests was in flight all along
    assert overlaps == []
    order = [name for name, _, _ in sorted(spans, key=lambda span: span[1])]
    assert len(order) == 8
    assert order in (["one"] * 4 + ["two"] * 4, ["two"] * 4 + ["one"] * 4)


def test_a_crawl_delay_spaces_the_starts_within_a_batch_for_every_worker(table: Any) -> None:
    clock = Clock()
    _gate(table, clock).set_interval(A, 2.0)  # the expander read the host's Crawl-delay
    host = Host(clock)
    gate = _gate(table, clock)
    fetcher = _fetcher(host, gate, clock)  # sleep mode: waiting is sleeping
    other = _gate(_table_of(table), clock)  # another Lambda, on the host's second slot
    with gate_calls(table) as writes, keep_host_slots():
        fetcher.fetch(f"{A}/0")
        clock.now += 0.5
        fetcher.fetch(f"{A}/1")  # waits 1.5 s more, within the slot it kept
        # Another worker sees that start: its own must wait the delay from it
        assert other.acquire(A, slots=2) == Wait(pytest.approx(2.0), "interval")
        fetcher.fetch(f"{A}/2")
        # (each start after the first is one write, which records it for every worker)
        assert len(writes) == 3 and not any("REMOVE" in write for write in writes)
    starts = [when for _, when in host.asked]
    assert [b - a for a, b in zip(starts, starts[1:], strict=False)] == [
        pytest.approx(2.0),
        pytest.approx(2.0),
    ]
    assert clock.slept == [pytest.approx(1.5), pytest.approx(2.0)]
    item = table.get_item(Key={"pk": f"HOST#{A}", "sk": "GATE"})["Item"]
    assert float(item["next_at"]) == pytest.approx(starts[-1] + 2.0)


def _table_of(table: Any) -> Any:
    """Another client's resource for ``table`` (another Lambda's)."""
    return boto3.resource("dynamodb", region_name=table.meta.client.meta.region_name).Table(
        table.name
    )


def _table(stack: ProvisionedStack) -> Any:
    return boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)


def test_in_defer_mode_the_delay_within_a_batch_defers_the_job(table: Any, tmp_path: Any) -> None:
    clock = Clock()
    _gate(table, clock).set_interval(A, 2.0)
    host = Host(clock)
    fetcher = _fetcher(
        host, _gate(table, clock), clock, mode="defer", journal_store=DirectoryObjectStore(tmp_path)
    )
    with keep_host_slots():
        fetcher.fetch(f"{A}/0")
        clock.now += 0.5
        # As an acquire that finds the interval running: the job goes back, delayed, and the
        # slot, known to have started 0.5 s ago, asks nothing of DynamoDB to know it
        with (
            gate_calls(table) as writes,
            gate_calls(table, "GetItem") as reads,
            pytest.raises(Deferred) as deferred,
        ):
            fetcher.fetch(f"{A}/1")
        assert (writes, reads) == ([], [])
        assert deferred.value.delay == pytest.approx(1.5)
        clock.now += 1.5
        fetcher.fetch(f"{A}/1")
    assert [url for url, _ in host.asked] == [f"{A}/0", f"{A}/1"]


def test_a_retry_after_stops_the_rest_of_the_batch_on_that_host(table: Any, tmp_path: Any) -> None:
    clock = Clock()
    host = Host(clock, {f"{A}/busy": (429, {"retry-after": "30"})})
    fetcher = _fetcher(
        host, _gate(table, clock), clock, mode="defer", journal_store=DirectoryObjectStore(tmp_path)
    )
    with keep_host_slots():
        assert fetcher.fetch(f"{A}/busy").status == 429
        clock.now += 1.0
        # Then the batch's next job on that host is deferred until the hold is over: the
        # holder knows its own hold without asking DynamoDB
        with (
            gate_calls(table) as writes,
            gate_calls(table, "GetItem") as reads,
            pytest.raises(Deferred) as deferred,
        ):
            fetcher.fetch(f"{A}/next")
        assert (writes, reads) == ([], [])
        assert deferred.value.delay == pytest.approx(29.0)
        fetcher.fetch(f"{B}/other")  # another host is not held
    assert [url for url, _ in host.asked] == [f"{A}/busy", f"{B}/other"]


def test_another_workers_hold_stops_a_batch_that_kept_its_slot(table: Any, tmp_path: Any) -> None:
    clock = Clock()
    host = Host(clock)
    fetcher = _fetcher(
        host, _gate(table, clock), clock, mode="defer", journal_store=DirectoryObjectStore(tmp_path)
    )
    other = _gate(_table_of(table), clock)  # the Lambda on the host's other slot
    with keep_host_slots():
        fetcher.fetch(f"{A}/0")
        other.hold(A, 20.0)  # its answer said Retry-After: 20
        clock.now += 1.0
        # Then the next start within the kept slot reads the host's item and sees the hold
        with gate_calls(table) as writes, pytest.raises(Deferred) as deferred:
            fetcher.fetch(f"{A}/1")
        assert writes == []  # (the slot is kept: no acquire)
        assert deferred.value.delay == pytest.approx(19.0)
    assert [url for url, _ in host.asked] == [f"{A}/0"]
    assert _slots_taken(table, A) == []


def test_the_kept_slots_lease_is_renewed_before_it_could_lapse(table: Any, tmp_path: Any) -> None:
    clock = Clock()
    host = Host(clock)
    gate = _gate(table, clock, lease=60.0, renew_within=30.0)
    fetcher = _fetcher(
        host, gate, clock, slots=1, mode="defer", journal_store=DirectoryObjectStore(tmp_path)
    )
    other = _gate(_table_of(table), clock, lease=60.0)
    with gate_calls(table) as writes, keep_host_slots():
        fetcher.fetch(f"{A}/0")
        clock.now += 20.0
        fetcher.fetch(f"{A}/1")  # 40 s of lease left: more than one fetch needs, kept as is
        assert len(writes) == 1
        clock.now += 20.0
        fetcher.fetch(f"{A}/2")  # 20 s left, less than one fetch may take: renewed
        assert len(writes) == 2
        clock.now += 45.0  # past the first lease, within the renewed one
        assert isinstance(other.acquire(A, slots=1), Wait)
        fetcher.fetch(f"{A}/3")
    assert len(host.asked) == 4
    assert isinstance(other.acquire(A, slots=1), HostSlot)  # given back at the batch's end


def test_a_slot_lost_while_kept_is_neither_used_nor_freed(table: Any, tmp_path: Any) -> None:
    clock = Clock()
    host = Host(clock)
    fetcher = _fetcher(host, _gate(table, clock, lease=60.0), clock, slots=2)
    other = _gate(_table_of(table), clock, lease=60.0)
    with keep_host_slots():
        fetcher.fetch(f"{A}/0")  # slot 0
        clock.now += 61.0  # (a job that ran longer than the lease)
        taken = other.acquire(A, slots=2)  # slot 0 again: its lease ran out
        assert isinstance(taken, HostSlot) and taken.index == 0
        # Then the batch's next request takes the host's other slot rather than slot 0
        fetcher.fetch(f"{A}/1")
        assert _slots_taken(table, A) == ["slot0", "slot1"]
    # And the batch's end gives back its own slot, not the one the other worker holds now
    assert _slots_taken(table, A) == ["slot0"]
    other.release(taken)
    assert _slots_taken(table, A) == []
    assert [url for url, _ in host.asked] == [f"{A}/0", f"{A}/1"]


def test_a_start_only_the_holder_knew_counts_for_a_delay_recorded_meanwhile(table: Any) -> None:
    clock = Clock()
    host = Host(clock)
    fetcher = _fetcher(host, _gate(table, clock), clock)
    expander = _gate(_table_of(table), clock)
    with keep_host_slots():
        fetcher.fetch(f"{A}/0")
        clock.now += 3.0
        fetcher.fetch(f"{A}/1")  # no crawl delay: checked with a read, the start not written
        clock.now += 1.0
        expander.set_interval(A, 5.0)  # robots.txt read meanwhile: Crawl-delay 5
    # Then once the slot is given back the next start is 5 s after the batch's last one
    clock.now += 1.5
    assert expander.acquire(A, slots=2) == Wait(pytest.approx(2.5), "interval")


def test_a_failing_job_and_a_failing_batch_still_give_the_slot_back(table: Any) -> None:
    clock = Clock()
    fetcher = _fetcher(Host(clock), _gate(table, clock), clock)
    with pytest.raises(RuntimeError), keep_host_slots():
        fetcher.fetch(f"{A}/0")
        raise RuntimeError("the batch broke")
    assert _slots_taken(table, A) == []


class StaleTable:
    """A table whose eventually consistent reads of gate items answer as the item was before
    any write (nothing), as a read a moment after a write may; other calls pass through."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.reads: list[bool] = []  # ConsistentRead of each gate read

    def update_item(self, **kwargs: Any) -> Any:
        return self.table.update_item(**kwargs)

    def get_item(self, **kwargs: Any) -> Any:
        self.reads.append(bool(kwargs.get("ConsistentRead")))
        if not kwargs.get("ConsistentRead"):
            return {}
        return self.table.get_item(**kwargs)


def test_a_kept_slot_is_checked_by_an_eventually_consistent_read(table: Any) -> None:
    clock = Clock()
    host = Host(clock)
    fetcher = _fetcher(host, _gate(table, clock), clock)
    reads: list[bool] = []

    def read(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("sk") in ("GATE", {"S": "GATE"}):
            reads.append(bool(params.get("ConsistentRead")))

    events = table.meta.client.meta.events
    events.register("provide-client-params.dynamodb.GetItem", read)
    try:
        # Given a batch of five jobs on one host (no Crawl-delay)
        with keep_host_slots():
            for n in range(5):
                fetcher.fetch(f"{A}/{n}")
                clock.now += 0.5
    finally:
        events.unregister("provide-client-params.dynamodb.GetItem", read)
    # Then each start within the kept slot read the host's item once, eventually consistent
    assert reads == [False] * 4
    assert len(host.asked) == 5


def test_a_read_older_than_the_gates_own_write_is_made_again_strongly(table: Any) -> None:
    clock = Clock()
    host = Host(clock)
    stale = StaleTable(table)
    fetcher = _fetcher(host, _gate(stale, clock), clock)
    with gate_calls(table) as writes, keep_host_slots():
        fetcher.fetch(f"{A}/0")
        clock.now += 0.5
        # When the next start's read shows an item without the slot this gate took
        fetcher.fetch(f"{A}/1")
        # Then it read again, strongly, found the slot its own and started within it
        assert stale.reads == [False, True]
        assert len(writes) == 1  # (no second acquire)
    assert [url for url, _ in host.asked] == [f"{A}/0", f"{A}/1"]
    assert _slots_taken(table, A) == []
