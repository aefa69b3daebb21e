"""A URL's harvest state written with its latest outcome on AWS (the template's stack in moto, the
real indexer handler): indexing a URL's records writes its ``LATEST`` item once, state and
outcome together, and a crash after the run's transaction still leaves the state on the retry
(docs/decisions/0092-state-with-latest-outcome.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.contracts import IndexJob, encode
from cdif_harvester.model import Outcome, RunStatus, UrlOutcome, UrlState
from tests.support import pipeline
from tests.support.aws import (
    ProvisionedStack,
    catalog_of,
    golden_index_jobs,
    mocked_stack,
    session_hooks,
)

pytestmark = [pytest.mark.aws]

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "infrastructure" / "events"
RUN_ID = "20261125T100000Z-0000e0e0"
SOURCE = "pub.example.org"
JOBS = 3
PER_BATCH = {"IDEMPOTENCY_TABLE": ""}


def _key_value(value: Any) -> Any:
    return value.get("S") if isinstance(value, dict) else value


@dataclass
class Writes:
    """The DynamoDB writes the handlers make: each ``UpdateItem`` of a ``LATEST`` item (its
    ``pk``), and, when ``fail_settle`` is set, the first transaction that moves a run's
    counters fails after it was applied (the caller sees an error for a write that happened)."""

    latest: list[str] = field(default_factory=list)
    fail_settle: bool = False
    fired: bool = False

    def params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        key = params.get("Key") or {}  # (the idempotency table's keys are others)
        if model.name == "UpdateItem" and _key_value(key.get("sk")) == "LATEST":
            self.latest.append(str(_key_value(key["pk"])))
        if model.name == "TransactWriteItems":
            items = params.get("TransactItems", [])
            updates = [item["Update"] for item in items if "Update" in item]
            context["settles_run"] = any(_key_value(u["Key"]["sk"]) == "RUN" for u in updates)

    def after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not (self.fail_settle and context.get("settles_run")) or self.fired:
            return
        self.fired = True
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
        raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, model.name)


@pytest.fixture(params=["per-batch", "per-job"])
def either_stack(request: pytest.FixtureRequest) -> Iterator[ProvisionedStack]:
    """The template's stack in moto, as deployed by default (the jobs of a batch hold their
    outcomes) or with the Powertools idempotency table (each job settles its own: 0089)."""
    table = "true" if request.param == "per-job" else "false"
    with mocked_stack(parameters={"IdempotencyTableEnabled": table}) as provisioned:
        yield provisioned


@contextmanager
def _watched() -> Iterator[Writes]:
    """:class:`Writes` on every DynamoDB client the handlers build (in a started stack)."""
    seen = Writes()
    hooks = [
        ("provide-client-params.dynamodb", seen.params),
        ("after-call.dynamodb.TransactWriteItems", seen.after),
    ]
    with session_hooks(hooks):
        yield seen


@pytest.fixture
def writes(stack: ProvisionedStack) -> Iterator[Writes]:
    """:class:`Writes` in the ``stack`` fixture's stack."""
    with _watched() as seen:
        yield seen


def _start(catalog: DynamoCatalog, jobs: list[IndexJob]) -> None:
    catalog.start_run(
        RunStatus(
            run_id=RUN_ID,
            entry_urls=(f"https://{SOURCE}/robots.txt",),
            started_at="2026-11-25T10:00:00+00:00",
        )
    )
    catalog.enter_urls(RUN_ID, [job.url for job in jobs], step="test")


def _index(stack: ProvisionedStack, jobs: list[IndexJob], **env: str) -> dict[str, Any]:
    """Deliver ``jobs`` to the indexer as one SQS batch."""
    template = json.loads((EVENTS / "indexer.json").read_text(encoding="utf-8"))["Records"][0]
    arn = stack.sqs_event_sources["IndexerFunction"].queue_arn
    records = []
    for n, job in enumerate(jobs):
        body = encode(job)
        records.append(
            {
                **template,
                "messageId": f"m-{n}",
                "body": body,
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
                "eventSourceARN": arn,
            }
        )
    return pipeline.invoke(stack, "IndexerFunction", {"Records": records}, **env)


def test_indexing_a_url_writes_its_latest_item_once_with_state_and_outcome(
    either_stack: ProvisionedStack,
) -> None:
    # Given a tracked run whose URLs' records wait in the indexer's queue
    stack = either_stack
    catalog = catalog_of(stack)
    jobs = golden_index_jobs(RUN_ID, SOURCE, JOBS)
    _start(catalog, jobs)

    # When the indexer runs them as one batch
    with _watched() as writes:
        assert _index(stack, jobs) == {"batchItemFailures": []}

    # Then each URL's LATEST item was written by one UpdateItem
    assert sorted(writes.latest) == sorted(set(writes.latest))
    assert len(writes.latest) == JOBS
    # holding both the URL's harvest state and its latest outcome
    for job in jobs:
        state = catalog.get_url(job.url)
        assert state is not None
        assert (state.outcome, state.last_run, state.harvest_run) == ("record", RUN_ID, RUN_ID)
        ids = {entry.record_id for entry in catalog.records(SOURCE) if entry.url == job.url}
        assert ids and set(state.record_ids) == ids
        assert state.fingerprint


def test_a_crash_after_the_runs_transaction_leaves_the_state_on_the_retry(
    stack: ProvisionedStack, writes: Writes
) -> None:
    # Given URLs whose LATEST items hold an earlier harvest's records (the same latest outcome
    # as this run's will be), and this run's index jobs
    catalog = catalog_of(stack)
    jobs = golden_index_jobs(RUN_ID, SOURCE, JOBS)
    for job in jobs:
        earlier = UrlOutcome(
            run_id="earlier", source=SOURCE, url=job.url, outcome=Outcome.RECORD, recorded_at="t"
        )
        held = UrlState(
            url=job.url, source=SOURCE, fingerprint="old", record_ids=("r",), harvest_run="earlier"
        )
        catalog.put_outcome(earlier, state=held)
    _start(catalog, jobs)
    # and the transaction that writes the batch's outcomes failing after it was applied
    writes.fail_settle = True

    # When the indexer runs the batch
    failed = _index(stack, jobs, **PER_BATCH)

    # Then the batch's records fail, the run's items written but not the URLs' states
    assert writes.fired
    assert {item["itemIdentifier"] for item in failed["batchItemFailures"]} == {
        f"m-{n}" for n in range(JOBS)
    }
    assert {o.url for o in catalog.outcomes(RUN_ID)} == {job.url for job in jobs}
    assert all(catalog.get_url(job.url).harvest_run == "earlier" for job in jobs)  # type: ignore[union-attr]

    # And when SQS delivers them again, each URL's state is this run's
    assert _index(stack, jobs, **PER_BATCH) == {"batchItemFailures": []}
    for job in jobs:
        state = catalog.get_url(job.url)
        assert state is not None
        assert (state.outcome, state.harvest_run) == ("record", RUN_ID)
        assert state.fingerprint != "old" and "r" not in state.record_ids
    run = catalog.get_run(RUN_ID)
    assert run is not None and (run.entered, run.settled) == (JOBS, JOBS)
