"""What entering URLs into a run writes on DynamoDB (moto): a plain conditional put per URL
(one write unit) and one small transaction per chunk for the counts, not a transactional put
per URL (two write units). See docs/decisions/0091-urls-enter-at-one-write-unit.md."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.model import Outcome, RunStatus, UrlOutcome
from tests.support.aws import ProvisionedStack

pytestmark = pytest.mark.aws

_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
_CHUNK = 99  # URLs counted by one transaction (a marker and the run's counters)


class _Writes:
    """The writes a DynamoDB client makes: calls by operation, items per transaction."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.transactions: list[int] = []
        self._lock = threading.Lock()  # the puts of a chunk may go out from several threads

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            if model.name in _WRITES:
                self.calls[model.name] += 1
            if model.name == "TransactWriteItems":
                self.transactions.append(len(params["TransactItems"]))


def test_entering_urls_costs_a_put_each_and_a_small_transaction_per_chunk(
    stack: ProvisionedStack,
) -> None:
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    catalog.start_run(RunStatus(run_id="r1", entry_urls=("http://h/robots.txt",), started_at="t"))
    urls = [f"https://a.org/d/{i}" for i in range(2 * _CHUNK + 12)]
    writes = _Writes()
    events = catalog.table.meta.client.meta.events
    events.register("before-parameter-build.dynamodb", writes)
    # When a part enters its URLs
    assert catalog.enter_urls("r1", urls, step="p1") == urls
    # Then each URL is one put, and each chunk's count one transaction of two items
    chunks = -(-len(urls) // _CHUNK)
    assert writes.calls == Counter(PutItem=len(urls), TransactWriteItems=chunks)
    assert writes.transactions == [2] * chunks
    # and the run's counters are exact
    status = catalog.get_run("r1")
    assert status is not None and (status.entered, status.settled) == (len(urls), 0)

    # When the same part runs again (a redelivered job): refused puts, no count
    events.unregister("before-parameter-build.dynamodb", writes)
    again = _Writes()
    events.register("before-parameter-build.dynamodb", again)
    assert catalog.enter_urls("r1", urls, step="p1") == urls
    assert again.calls == Counter(PutItem=len(urls))
    status = catalog.get_run("r1")
    assert status is not None and status.entered == len(urls)


def test_settling_outcomes_costs_a_put_each_and_a_small_transaction_per_chunk(
    stack: ProvisionedStack,
) -> None:
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    catalog.start_run(RunStatus(run_id="r1", entry_urls=("http://h/robots.txt",), started_at="t"))
    urls = [f"https://a.org/d/{i}" for i in range(2 * _CHUNK + 12)]
    catalog.enter_urls("r1", urls, step="p1")
    kinds = [Outcome.RECORD, Outcome.DISALLOWED, Outcome.NO_METADATA]
    outcomes = [
        UrlOutcome(run_id="r1", source="s", url=url, outcome=kinds[i % 3], recorded_at="t2")
        for i, url in enumerate(urls)
    ]
    writes = _Writes()
    events = catalog.table.meta.client.meta.events
    events.register("before-parameter-build.dynamodb", writes)
    # When the URLs' outcomes are recorded
    status = catalog.put_outcomes(outcomes)
    # Then each run item is one put, each chunk's count one transaction of two items (its
    # marker, the run's counters), and each URL's latest outcome one update
    chunks = -(-len(urls) // _CHUNK)
    assert writes.calls == Counter(
        PutItem=len(urls), TransactWriteItems=chunks, UpdateItem=len(urls)
    )
    assert writes.transactions == [2] * chunks
    # and the run's counters are exact
    expected = Counter(outcome.outcome.value for outcome in outcomes)
    assert status is not None and (status.entered, status.settled) == (len(urls), len(urls))
    assert {kind: n for kind, n in status.outcomes.items() if n} == expected
    assert status.done
