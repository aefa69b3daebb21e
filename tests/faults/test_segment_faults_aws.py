"""Record segments under faults on AWS (moto, the stack of template.yaml, ``RECORD_SEGMENTS``):
a transient fault at the segment's PUT and at each write after it in the indexer's batch,
before the write and after it, loses nothing. Each time, once the queues drain, every URL has
the clean run's outcome, the run is finished, and every record's catalogue entry names a
segment range that holds the clean run's record and report (a retried job writes a new
segment; the old one, if written, is left unreferenced).
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
from cdif_harvester.keys import parse_segment_ref
from cdif_harvester.model import RunState, Source
from tests.faults.injection import WriteFaults, drain, installed
from tests.support.aws import mocked_stack
from tests.support.pipeline import invoke, routes

pytestmark = [pytest.mark.aws, pytest.mark.network]

TICK = json.loads(
    (Path(__file__).resolve().parents[2] / "infrastructure/events/scheduler.json").read_text()
)
OVERRIDES = {"ALLOW_LOOPBACK": "true", "IDEMPOTENCY_TABLE": "", "RECORD_SEGMENTS": "true"}
#: The writes after the segment's PUT that the faults follow (its catalogue entries, the URL's
#: state and outcome, the run's counters).
AFTER_SEGMENT = 6


class KeyedFaults(WriteFaults):
    """WriteFaults that also note the S3 path of each write (None for other services)."""

    def __init__(self, at: int | None = None, when: Literal["before", "after"] = "before"):
        super().__init__(at=at, when=when)
        self.keys: list[str | None] = []

    def before_call(self, model: Any, context: dict[str, Any], **kwargs: Any) -> Any:
        count = len(self.writes)
        answer = super().before_call(model, context, **kwargs)
        if len(self.writes) > count:
            # (before-call sees the request: an S3 key is in its path, after the bucket's name)
            request = kwargs.get("params") or {}
            path = request.get("url_path") if isinstance(request, dict) else None
            self.keys.append(path if model.service_model.service_name == "s3" else None)
        return answer


@dataclass(frozen=True)
class Result:
    """What a harvest left: each URL's outcome, the run's state, each record as stored."""

    outcomes: dict[str, str]
    state: str
    records: dict[str, tuple[Any, bool]]
    dead_letters: int


def _harvest(site: PublisherSite, faults: WriteFaults) -> Result:
    with mocked_stack() as stack:
        catalog = DynamoCatalog(
            boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
        )
        store = S3ObjectStore(boto3.client("s3", region_name=stack.region), stack.bucket_name)
        sqs = boto3.client("sqs", region_name=stack.region)
        catalog.put_source(
            Source(source_id="small", entry_url=site.url("/robots.txt"), schedule="1d")
        )
        run_id = invoke(stack, "SchedulerFunction", TICK)["started"][0]["run_id"]
        with installed(faults):
            drain(sqs, routes(stack, **OVERRIDES))
        run = catalog.get_run(run_id)
        assert run is not None
        records: dict[str, tuple[Any, bool]] = {}
        for outcome in catalog.outcomes(run_id):
            for ref in outcome.records:
                entry = catalog.get_record(ref.record_id)
                assert entry is not None and entry.record_key is not None
                assert parse_segment_ref(entry.record_key) is not None, entry.record_key
                report = json.loads(store.get(entry.report_key))
                assert report["record_id"] == ref.record_id
                records[ref.record_id] = (json.loads(store.get(entry.record_key)), report["valid"])
        dead = 0
        for name, url in stack.queue_urls.items():
            if "DeadLetter" in name or "Dlq" in name:
                attributes = sqs.get_queue_attributes(
                    QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"]
                dead += int(attributes["ApproximateNumberOfMessages"])
        return Result(
            outcomes={o.url: o.outcome.value for o in catalog.outcomes(run_id)},
            state=run.state.value,
            records=records,
            dead_letters=dead,
        )


def test_a_fault_at_the_segment_or_after_it_loses_no_record(small_site: PublisherSite) -> None:
    clean_faults = KeyedFaults()
    clean = _harvest(small_site, clean_faults)
    assert clean.state == RunState.FINISHED.value and clean.records
    segment_puts = [
        n for n, path in enumerate(clean_faults.keys, 1) if path and "/segments/" in path
    ]
    # (the segment, then what the Signmap lists of its records, beside it: decision 0098)
    assert len(segment_puts) == 2, clean_faults.keys  # noqa: PLR2004
    first = segment_puts[0]
    points = [
        (at, when)
        for at in range(first, min(first + AFTER_SEGMENT, len(clean_faults.writes)) + 1)
        for when in ("before", "after")
    ]
    for at, when in points:
        faults = KeyedFaults(at=at, when=when)
        result = _harvest(small_site, faults)
        fault = f"{when} write {at} ({clean_faults.writes[at - 1]}), fired at {faults.fired}"
        assert faults.fired, fault
        assert result.outcomes == clean.outcomes, fault
        assert result.state == RunState.FINISHED.value, fault
        assert result.records == clean.records, fault
        assert result.dead_letters == 0, fault
