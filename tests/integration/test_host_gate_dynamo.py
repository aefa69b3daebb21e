"""The DynamoDB host gate under moto, on the catalogue table of template.yaml: slots per host
shared by every worker, Crawl-delay spacing, Retry-After holds and lease expiry, driven by an
injectable clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog, DynamoHostGate
from cdif_harvester.model import Outcome, UrlOutcome
from cdif_harvester.ports import HostSlot, Wait
from tests.support.aws import ProvisionedStack

A = "https://a.example.org"
B = "http://127.0.0.1:8080"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _first(choices: Sequence[int]) -> int:
    return choices[0]


@pytest.fixture
def table(stack: ProvisionedStack) -> Any:
    return boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)


def _gate(table: Any, clock: Clock, **kwargs: Any) -> DynamoHostGate:
    return DynamoHostGate(table, clock=clock, choose=kwargs.pop("choose", _first), **kwargs)


def test_workers_share_the_slots_of_a_host(table: Any) -> None:
    clock = Clock()
    # Two Lambdas, each with its own gate object, on the same table
    one, two = _gate(table, clock, busy_wait=2.0), _gate(table, clock, busy_wait=2.0)
    first = one.acquire(A, slots=2)
    second = two.acquire(A, slots=2)  # tries slot 0, finds it taken, takes slot 1
    assert isinstance(first, HostSlot) and isinstance(second, HostSlot)
    assert {first.index, second.index} == {0, 1}
    assert one.acquire(A, slots=2) == Wait(2.0, "busy")
    assert isinstance(two.acquire(B, slots=2), HostSlot)  # another host
    two.release(second)
    third = one.acquire(A, slots=2)
    assert isinstance(third, HostSlot) and third.index == second.index


def test_crawl_delay_spaces_starts_and_counts_the_last_one(table: Any) -> None:
    clock = Clock()
    gate = _gate(table, clock)
    robots = gate.acquire(A, slots=2)
    assert isinstance(robots, HostSlot)
    gate.release(robots)
    clock.now += 0.4
    gate.set_interval(A, 1.5)  # the expander has just read the Crawl-delay
    waited = gate.acquire(A, slots=2)
    assert isinstance(waited, Wait) and waited.reason == "interval"
    assert waited.seconds == pytest.approx(1.1)
    clock.now += 1.1
    assert isinstance(gate.acquire(A, slots=2), HostSlot)
    clock.now += 1.0
    assert gate.acquire(A, slots=2) == Wait(pytest.approx(0.5), "interval")


def test_retry_after_holds_the_host_and_never_shortens(table: Any) -> None:
    clock = Clock()
    gate = _gate(table, clock)
    gate.hold(A, 120.0)
    gate.hold(A, 10.0)
    assert gate.acquire(A, slots=2) == Wait(pytest.approx(120.0), "held")
    clock.now += 120.0
    assert isinstance(gate.acquire(A, slots=2), HostSlot)


def test_a_crashed_workers_slot_frees_itself_after_the_lease(table: Any) -> None:
    clock = Clock()
    crashed = _gate(table, clock, lease=60.0)
    other = _gate(table, clock, lease=60.0)
    lost = crashed.acquire(A, slots=1)
    assert isinstance(lost, HostSlot)
    clock.now += 30.0
    assert isinstance(other.acquire(A, slots=1), Wait)
    clock.now += 31.0
    taken = other.acquire(A, slots=1)
    assert isinstance(taken, HostSlot)
    crashed.release(lost)  # a late release must not free the slot taken since
    assert isinstance(other.acquire(A, slots=1), Wait)
    other.release(taken)
    assert isinstance(other.acquire(A, slots=1), HostSlot)


def test_gate_items_never_mix_with_the_catalogue(table: Any) -> None:
    clock = Clock()
    gate = _gate(table, clock)
    catalog = DynamoCatalog(table)
    outcome = UrlOutcome(run_id="r", source="a", url=f"{A}/x", outcome=Outcome.NO_METADATA)
    catalog.put_outcome(outcome)
    gate.set_interval(A, 1.0)
    slot = gate.acquire(A, slots=2)
    assert isinstance(slot, HostSlot)
    assert list(catalog.outcomes("r")) == [outcome]
    item = table.get_item(Key={"pk": f"HOST#{A}", "sk": "GATE"})["Item"]
    assert item["origin"] == A and float(item["crawl_delay"]) == 1.0
    assert "gsi1pk" not in item  # invisible to the by-source index
