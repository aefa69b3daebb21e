"""Exact accounting under faults on AWS (moto, the stack built from template.yaml): a small harvest
driven through the real handlers, with a transient fault at each write of a clean run in turn,
before the write (nothing written) and after it (written, but the caller sees an error), and with
every message delivered twice. Each time, once the queues drain, every URL has the clean run's
outcome, the run's counters settle exactly and the run is finished.

The crash points are not chosen by hand: a clean run is counted first (tests/faults/injection.py
numbers every S3, DynamoDB and SQS write the handlers make), and the suite is parametrized over
every one of them. Powertools idempotency is off here, so that the stages' own writes have to be
idempotent (with it on, a redelivered message that had succeeded is not even run). A first
harvest is run in both layouts of the records: a batch's segment (the default) and an object per
record (``RECORD_SEGMENTS=false``; docs/decisions/0086-record-segments.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog, S3ObjectStore
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.keys import content_hash
from cdif_harvester.model import RunState, Source
from tests.faults.conftest import PAGES
from tests.faults.injection import WriteFaults, drain, installed
from tests.support.aws import ProvisionedStack, mocked_stack
from tests.support.pipeline import invoke, routes

pytestmark = [pytest.mark.aws, pytest.mark.network]

EVENTS = Path(__file__).resolve().parents[2] / "infrastructure/events"
INTAKE_EVENT = EVENTS / "intake-post-harvest.json"
TICK = json.loads((EVENTS / "scheduler.json").read_text())
# The handlers may fetch 127.0.0.1 (the test site); idempotency off (see the module docstring).
OVERRIDES = {"ALLOW_LOOPBACK": "true", "IDEMPOTENCY_TABLE": ""}
#: RECORD_SEGMENTS of each layout of the records.
LAYOUTS = {"segments": "true", "per-record-objects": "false"}
# Upper bound on the crash points the parametrization enumerates; the clean run's count is
# checked against it, so a pipeline that grows more writes fails loudly here instead of
# silently leaving crash points out.
MAX_WRITES = 60
#: Every crash point: each write, failed before it is made or after.
POINTS: list[tuple[int, Literal["before", "after"]]] = [
    (at, when) for at in range(1, MAX_WRITES + 1) for when in ("before", "after")
]


@dataclass(frozen=True)
class Result:
    """What a harvest left: each URL's outcome and reason, the run's counters, the records
    (each record id with the digest of what its catalogue entry names)."""

    outcomes: dict[str, tuple[str, str]]
    counters: tuple[int, int, int, str]
    per_outcome: dict[str, int]
    records: frozenset[tuple[str, str]]
    writes: tuple[str, ...]
    dead_letters: int
    segments: str


def _harvest(
    site: PublisherSite,
    faults: WriteFaults,
    *,
    twice: bool = False,
    again: bool = False,
    segments: str = LAYOUTS["segments"],
) -> Result:
    """Start a run of the site (no faults), drain the pipeline under ``faults``; the result.
    ``again``: a first run drained without faults before, the faults in the second (a
    re-harvest of an unchanged site). ``segments``: the indexer's RECORD_SEGMENTS."""
    overrides = {**OVERRIDES, "RECORD_SEGMENTS": segments}
    with mocked_stack() as stack:
        catalog = DynamoCatalog(
            boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        )
        sqs = boto3.client("sqs", region_name=stack.region)
        catalog.put_source(
            Source(source_id="small", entry_url=site.url("/robots.txt"), schedule="1d")
        )
        started = invoke(stack, "SchedulerFunction", TICK)
        run_id = started["started"][0]["run_id"]
        if again:
            drain(sqs, routes(stack, **overrides))
            # the second run asked for by an operator (the source is not due again)
            event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
            event["body"] = json.dumps({"url": site.url("/robots.txt")})
            operator = event["requestContext"]["identity"]["apiKeyId"]
            response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
            assert response["statusCode"] == 202, response
            run_id = json.loads(response["body"])["run_id"]
        with installed(faults):
            drain(sqs, routes(stack, **overrides), twice=twice)
        run = catalog.get_run(run_id)
        assert run is not None
        return Result(
            outcomes={
                o.url: (o.outcome.value, (o.reason or "").split(":")[0])
                for o in catalog.outcomes(run_id)
            },
            counters=(run.entered, run.settled, run.sitemaps, run.state.value),
            per_outcome={kind: n for kind, n in run.outcomes.items() if n},
            records=_records(stack, catalog),
            writes=tuple(faults.writes),
            dead_letters=_dead_letters(stack, sqs),
            segments=segments,
        )


def _records(stack: ProvisionedStack, catalog: DynamoCatalog) -> frozenset[tuple[str, str]]:
    """Every record entry of the catalogue, with the digest of the record it names, read from
    where the entry says (an object of its own or a range of a segment)."""
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    ids = {str(item["record_id"]) for item in table.scan()["Items"] if item.get("record_id")}
    store = S3ObjectStore(boto3.client("s3", region_name=stack.region), stack.bucket_name)
    found = set()
    for record_id in ids:
        entry = catalog.get_record(record_id)
        assert entry is not None and entry.record_key is not None, record_id
        found.add((record_id, content_hash(store.get(entry.record_key))))
    return frozenset(found)


def _dead_letters(stack: ProvisionedStack, sqs: Any) -> int:
    total = 0
    for name, url in stack.queue_urls.items():
        if "Dlq" in name or "DeadLetter" in name:
            attributes = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            total += int(attributes["ApproximateNumberOfMessages"])
    return total


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def clean(request: pytest.FixtureRequest, small_site: PublisherSite) -> Result:
    """The harvest without faults, in each layout of the records: what every faulty one must
    end as, and its writes counted."""
    result = _harvest(small_site, WriteFaults(), segments=LAYOUTS[request.param])
    assert result.records
    assert result.counters[3] == RunState.FINISHED.value
    assert len(result.outcomes) == len(PAGES)
    assert {outcome for outcome, _reason in result.outcomes.values()} >= {"record", "disallowed"}
    assert 0 < len(result.writes) <= MAX_WRITES, result.writes
    return result


def _assert_same(result: Result, clean: Result, fault: str) -> None:
    assert result.outcomes == clean.outcomes, fault
    entered, settled, sitemaps, state = result.counters
    assert entered == settled == clean.counters[0], fault
    assert (sitemaps, state) == (0, RunState.FINISHED.value), fault
    assert result.per_outcome == clean.per_outcome, fault
    assert result.records == clean.records, fault
    assert result.dead_letters == 0, fault


@pytest.mark.parametrize("point", POINTS, ids=[f"{when}-{at}" for at, when in POINTS])
def test_a_fault_at_any_write_leaves_the_clean_runs_accounting(
    small_site: PublisherSite, clean: Result, point: tuple[int, Literal["before", "after"]]
) -> None:
    at, when = point
    if at > len(clean.writes):
        pytest.skip(f"the clean run makes {len(clean.writes)} writes")
    faults = WriteFaults(at=at, when=when)
    result = _harvest(small_site, faults, segments=clean.segments)
    fault = f"{when} write {at} ({clean.writes[at - 1]}), fired at {faults.fired}"
    assert faults.fired, fault
    _assert_same(result, clean, fault)


def test_every_message_delivered_twice_leaves_the_clean_runs_accounting(
    small_site: PublisherSite, clean: Result
) -> None:
    result = _harvest(small_site, WriteFaults(), twice=True, segments=clean.segments)
    _assert_same(result, clean, "twice")


@pytest.fixture(scope="module")
def clean_again(dated_site: PublisherSite) -> Result:
    """The unchanged re-harvest without faults: the record's page settled by its lastmod."""
    result = _harvest(dated_site, WriteFaults(), again=True)
    assert result.counters[3] == RunState.FINISHED.value
    assert {outcome for outcome, _reason in result.outcomes.values()} >= {"unchanged"}
    assert 0 < len(result.writes) <= MAX_WRITES, result.writes
    return result


@pytest.mark.parametrize("point", POINTS, ids=[f"{when}-{at}" for at, when in POINTS])
def test_a_fault_at_any_write_of_an_unchanged_reharvest_leaves_its_accounting(
    dated_site: PublisherSite, clean_again: Result, point: tuple[int, Literal["before", "after"]]
) -> None:
    at, when = point
    if at > len(clean_again.writes):
        pytest.skip(f"the clean re-harvest makes {len(clean_again.writes)} writes")
    faults = WriteFaults(at=at, when=when)
    result = _harvest(dated_site, faults, again=True)
    fault = f"{when} write {at} ({clean_again.writes[at - 1]}), fired at {faults.fired}"
    assert faults.fired, fault
    _assert_same(result, clean_again, fault)
