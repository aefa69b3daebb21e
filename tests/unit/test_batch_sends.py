"""The held sends of a batch (adapters/batch_sends.BatchSends, decision 0093): the messages its
jobs send are held until the batch's end and sent in packs of at most ten and at most the
request size, those of a job that failed dropped, a delayed send not held, and the jobs whose
messages could not be sent named for SQS to deliver again (their outcomes not written)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cdif_harvester.adapters.batch_sends import BatchSends, packs
from cdif_harvester.adapters.local import InProcessQueue, MemoryObjectStore, SqliteCatalog
from cdif_harvester.errors import StorageError
from cdif_harvester.model import Outcome, RunStatus
from cdif_harvester.stages.outcomes import BatchOutcomes, record_outcome
from cdif_harvester.wiring import Wiring


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 11, 25, 11, 0, tzinfo=UTC)


class _Requests:
    """A job queue that records each request it is asked to send, failing those that carry a
    given body."""

    def __init__(self, failing: str | None = None) -> None:
        self.requests: list[tuple[str, list[str], list[int] | None]] = []
        self.failing = failing

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        if self.failing in bodies:
            raise StorageError("injected")
        self.requests.append((queue, list(bodies), None if delays is None else list(delays)))


def test_packs_hold_at_most_ten_messages_and_the_request_size() -> None:
    # Ten messages to a pack at most
    assert [len(pack) for pack in packs([1] * 23, entries=10, request_bytes=100)] == [10, 10, 3]
    # and no more bytes than a request takes; a message too large alone is a pack of its own
    sizes = [40, 40, 40, 150, 10, 60]
    cut = packs(sizes, entries=10, request_bytes=100)
    assert [list(pack) for pack in cut] == [[0, 1], [2], [3], [4, 5]]
    assert [sum(sizes[i] for i in pack) for pack in cut] == [80, 40, 150, 70]
    assert packs([], entries=10, request_bytes=100) == []


def test_sends_are_held_until_the_batch_ends_and_a_failed_jobs_are_dropped() -> None:
    inner = _Requests()
    sends = BatchSends(inner, entries=10, request_bytes=1000)
    # Given the jobs of a batch handing over to two queues, one job failing after it sent
    for number in range(12):
        with sends.job(f"m{number}"):
            sends.send("document", [f"doc-{number}"])
    with sends.job("m-render"):
        sends.send("render", ["page"])
    with pytest.raises(StorageError), sends.job("m-failed"):
        sends.send("document", ["doc-failed"])
        raise StorageError("the job failed")
    # (nothing has gone yet)
    assert inner.requests == []

    # When the batch ends
    assert sends.flush() == []

    # Then the messages went in packs of ten, queue by queue, the failed job's not at all
    assert inner.requests == [
        ("document", [f"doc-{n}" for n in range(10)], None),
        ("document", ["doc-10", "doc-11"], None),
        ("render", ["page"], None),
    ]
    # and nothing is held after
    assert sends.flush() == [] and len(inner.requests) == 3


def test_a_delayed_send_goes_at_once_and_an_undelayed_one_outside_a_job_is_refused() -> None:
    inner = _Requests()
    sends = BatchSends(inner, entries=10, request_bytes=1000)
    sends.send("url", ["later"], delays=[30])
    assert inner.requests == [("url", ["later"], [30])]
    with pytest.raises(RuntimeError):
        sends.send("url", ["now"])


def test_a_pack_not_sent_names_its_jobs_and_their_outcomes_are_not_written(
    tmp_path: Path,
) -> None:
    # Given a batch of jobs, each handing over one message and settling a URL, and the
    # request that carries the message "doc-3" failing
    inner = _Requests(failing="doc-3")
    sends = BatchSends(inner, entries=2, request_bytes=1000)
    held = BatchOutcomes()
    catalog = SqliteCatalog(tmp_path / "catalog.sqlite")
    urls = [f"https://example.org/{n}.html" for n in range(5)]
    catalog.start_run(RunStatus(run_id="run", entry_urls=(), started_at="2026-11-25"))
    catalog.enter_urls("run", urls, step="test")
    wiring = Wiring(
        store=MemoryObjectStore(),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=None,  # type: ignore[arg-type]
        clock=_Clock(),
    )
    wiring = replace(wiring, outcomes=held, queue=sends)
    for number, url in enumerate(urls):
        with held.job(f"m{number}"), sends.job(f"m{number}"):
            wiring.queue.send("document", [f"doc-{number}"])
            record_outcome(wiring, run_id="run", source="s", url=url, outcome=Outcome.NO_METADATA)

    # When the batch ends: its messages sent first, then the outcomes of the jobs that were
    unsent = sends.flush()
    held.drop({key for item in unsent for key in item.keys})
    assert held.flush(wiring) == []

    # Then the jobs whose messages shared the failed request are named, and only theirs
    assert [(item.queue, item.keys) for item in unsent] == [("document", {"m2", "m3"})]
    assert [body for _queue, bodies, _delays in inner.requests for body in bodies] == [
        "doc-0",
        "doc-1",
        "doc-4",
    ]
    # and their URLs are not settled: the redelivery settles them
    assert sorted(o.url for o in catalog.outcomes("run")) == [urls[0], urls[1], urls[4]]
