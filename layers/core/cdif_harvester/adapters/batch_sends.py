"""The job queue of one batch of jobs: the messages its jobs send are held, and sent together
when the batch ends, packed into as few requests as the queue's limits allow.

On AWS each job of an SQS batch handed its work to the next stage in a ``SendMessageBatch`` of
one entry; held, the ten hand-overs of a batch go in one or two requests. A pack that cannot be
sent fails every job whose messages were in it (docs/decisions/0093-sends-once-per-batch.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from cdif_harvester.ports import JobQueue

__all__ = ["BatchSends", "Unsent", "packs"]


def packs(sizes: Sequence[int], *, entries: int, request_bytes: int) -> list[range]:
    """Cut the messages of ``sizes`` (bytes each), in their order, into consecutive packs of at
    most ``entries`` messages and at most ``request_bytes`` bytes together (a message larger
    than that alone is a pack of its own, for the queue to refuse)."""
    result: list[range] = []
    start = total = 0
    for index, size in enumerate(sizes):
        if index > start and (index - start >= entries or total + size > request_bytes):
            result.append(range(start, index))
            start, total = index, 0
        total += size
    if start < len(sizes):
        result.append(range(start, len(sizes)))
    return result


@dataclass(frozen=True)
class Unsent:
    """Messages to ``queue`` that :meth:`BatchSends.flush` could not send: those of the jobs
    ``keys`` in one pack, and the error it met."""

    queue: str
    keys: frozenset[str]
    error: Exception


class BatchSends:
    """A :class:`~cdif_harvester.ports.JobQueue` that holds what the jobs of a batch send, each
    job named by a key (on AWS its SQS message id), until :meth:`flush` sends it through
    ``queue`` in packs of at most ``entries`` messages and ``request_bytes`` bytes, queue by
    queue.

    A send with delays is not held: it goes to ``queue`` at once (a job spread over time, or
    put back for later, is not a hand-over to pack).
    """

    def __init__(self, queue: JobQueue, *, entries: int, request_bytes: int) -> None:
        self.queue = queue
        self.entries = entries
        self.request_bytes = request_bytes
        self._held: dict[str, list[tuple[str, str]]] = {}
        self._running: list[tuple[str, str]] | None = None

    @contextmanager
    def job(self, key: str) -> Iterator[None]:
        """Hold the messages sent inside the block as those of the job ``key``. When the block
        raises they are dropped: the job failed, and the attempt that hands it over is another."""
        sent: list[tuple[str, str]] = []
        self._running = sent
        try:
            yield
        finally:
            self._running = None
        if sent:  # (not reached when the block raised)
            self._held.setdefault(key, []).extend(sent)

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        """Hold ``bodies`` for ``queue`` as the running job's; with ``delays``, send them now.
        Raises RuntimeError when a message without delay is sent outside :meth:`job`, and
        what ``queue`` raises for a delayed send."""
        if delays is not None and any(delays):
            self.queue.send(queue, bodies, delays=delays)
            return
        if self._running is None:
            raise RuntimeError(f"message to {queue} sent outside a job of the batch")
        self._running.extend((queue, body) for body in bodies)

    def flush(self) -> list[Unsent]:
        """Send every held message, queue by queue in packs, and return what could not be sent
        (nothing is held after). The jobs of an :class:`Unsent` must be done again; the other
        messages of their packs may have been sent, and a stage takes a message sent twice as
        once (decisions 0054 and 0087)."""
        by_queue: dict[str, list[tuple[str, str]]] = {}
        for key, messages in self._held.items():
            for queue, body in messages:
                by_queue.setdefault(queue, []).append((key, body))
        self._held = {}
        unsent: list[Unsent] = []
        for queue, held in by_queue.items():
            sizes = [len(body.encode("utf-8")) for _key, body in held]
            for pack in packs(sizes, entries=self.entries, request_bytes=self.request_bytes):
                try:
                    self.queue.send(queue, [held[i][1] for i in pack])
                except Exception as exc:  # noqa: BLE001 - whatever failed, the jobs are done again
                    unsent.append(Unsent(queue, frozenset(held[i][0] for i in pack), exc))
        return unsent
