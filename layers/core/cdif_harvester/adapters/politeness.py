"""Politeness per host: the in-memory host gate and the fetcher that goes through a gate.

The :class:`~cdif_harvester.ports.HostGate` port promises, per origin, at most N requests in
flight, starts at least the Crawl-delay apart and no request while ``Retry-After`` holds.
:class:`MemoryHostGate` keeps it in one process (for every Lambda at once:
:class:`~cdif_harvester.adapters.aws.DynamoHostGate`). :class:`GatedFetcher` takes a slot per
request and, told to wait, sleeps (``sleep`` mode) or saves the job's fetch journal and raises
:class:`~cdif_harvester.errors.Deferred` (``defer`` mode). Within :func:`keep_host_slots` (an SQS
batch on AWS) a slot taken on a host is kept and reused by the following requests to that host,
and given back once at the end.

See docs/decisions/0008-politeness-per-host.md, docs/decisions/0009-fetch-journal.md and
docs/decisions/0088-host-gate-per-batch.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from cdif_harvester.domain.resolution.rules import parse_retry_after
from cdif_harvester.errors import Deferred, HarvestError
from cdif_harvester.keys import journal_body_key, journal_key, origin_of
from cdif_harvester.model import FetchResponse
from cdif_harvester.ports import Fetcher, HostGate, HostSlot, ObjectStore, Wait

__all__ = [
    "RETRY_AFTER_STATUSES",
    "FetchJournal",
    "GatedFetcher",
    "MemoryHostGate",
    "keep_host_slots",
]

logger = logging.getLogger(__name__)

#: The answers whose ``Retry-After`` closes the host for a while (RFC 6585, RFC 9110 15.6.4).
RETRY_AFTER_STATUSES = frozenset({429, 503})

Mode = Literal["sleep", "defer"]
RequestKey = tuple[str, str, tuple[tuple[str, str], ...]]


# --------------------------------------------------------------------------- the memory gate


@dataclass
class _HostState:
    leases: dict[int, tuple[str, float]] = field(default_factory=dict)  # index -> token, until
    interval: float = 0.0
    next_at: float = -math.inf  # earliest start allowed by the interval
    held_until: float = -math.inf  # earliest start allowed by a Retry-After
    last_start: float | None = None


class MemoryHostGate:
    """A :class:`~cdif_harvester.ports.HostGate` in memory, for the threads of one process.

    ``busy_wait`` is how long to wait when every slot is taken (slots come back within a second
    or so); ``monotonic`` is its clock.
    """

    def __init__(
        self,
        *,
        lease: float = 60.0,
        busy_wait: float = 0.05,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease = lease
        self.busy_wait = busy_wait
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._hosts: dict[str, _HostState] = {}

    def acquire(self, host: str, *, slots: int) -> HostSlot | Wait:
        """Take a slot on ``host`` (see :class:`~cdif_harvester.ports.HostGate`)."""
        with self._lock:
            now = self._monotonic()
            state = self._hosts.setdefault(host, _HostState())
            live = {i: lease for i, lease in state.leases.items() if lease[1] > now}
            state.leases = live
            if len(live) >= max(1, slots):
                return Wait(self.busy_wait, "busy")
            start = max(now, state.next_at, state.held_until)
            if start > now:
                reason = "held" if state.held_until >= state.next_at else "interval"
                return Wait(start - now, reason)
            index = next(i for i in range(len(live) + 1) if i not in live)
            token = uuid.uuid4().hex
            live[index] = (token, now + self.lease)
            state.last_start = now
            state.next_at = now + state.interval
            return HostSlot(host=host, index=index, token=token)

    def reuse(self, slot: HostSlot, *, slots: int) -> HostSlot | Wait | None:
        """Start another request within ``slot`` (see :class:`~cdif_harvester.ports.HostGate`);
        its lease starts again."""
        with self._lock:
            now = self._monotonic()
            state = self._hosts.get(slot.host)
            lease = state.leases.get(slot.index) if state is not None else None
            if state is None or lease is None or lease[0] != slot.token or lease[1] <= now:
                return None
            start = max(now, state.next_at, state.held_until)
            if start > now:
                reason = "held" if state.held_until >= state.next_at else "interval"
                return Wait(start - now, reason)
            state.leases[slot.index] = (slot.token, now + self.lease)
            state.last_start = now
            state.next_at = now + state.interval
            return slot

    def release(self, slot: HostSlot) -> None:
        """Give ``slot`` back, unless its lease ran out and it was taken again."""
        with self._lock:
            state = self._hosts.get(slot.host)
            if state is not None and state.leases.get(slot.index, ("", 0.0))[0] == slot.token:
                del state.leases[slot.index]

    def hold(self, host: str, seconds: float) -> None:
        """Start no request on ``host`` for ``seconds`` (a longer hold already set stays)."""
        with self._lock:
            state = self._hosts.setdefault(host, _HostState())
            state.held_until = max(state.held_until, self._monotonic() + max(0.0, seconds))

    def set_interval(self, host: str, seconds: float) -> None:
        """Space starts on ``host`` ``seconds`` apart, counting from its last start."""
        with self._lock:
            state = self._hosts.setdefault(host, _HostState())
            state.interval = max(0.0, seconds)
            if state.last_start is not None:
                state.next_at = max(state.next_at, state.last_start + state.interval)

    def in_flight(self, host: str) -> int:
        """Slots of ``host`` taken now (for progress reports and tests)."""
        with self._lock:
            state = self._hosts.get(host)
            now = self._monotonic()
            return sum(1 for _, until in state.leases.values() if until > now) if state else 0


# --------------------------------------------------------------------------- the journal


def _request_key(method: str, url: str, headers: Mapping[str, str] | None) -> RequestKey:
    pairs = tuple(sorted((name.lower(), value) for name, value in (headers or {}).items()))
    return (method.upper(), url, pairs)


@dataclass
class _Entry:
    request: RequestKey
    response: FetchResponse | None  # None: loaded, body still in the store
    meta: dict[str, Any]


class FetchJournal:
    """The answers one job got, in order, kept in the object store while the job is deferred.

    Layout (:mod:`cdif_harvester.keys`): ``journal.json`` lists each request (method, URL,
    request headers) with its answer (final URL, status, headers, redirects, body digest); each
    body is a separate object named by its SHA-256, written once, so a 10 MB document is neither
    inlined in JSON nor stored twice when the job is deferred again.
    """

    def __init__(self, store: ObjectStore, run_id: str, job: str) -> None:
        self.store = store
        self.run_id = run_id
        self.job = job
        self._entries: list[_Entry] = []
        self._replayable: dict[RequestKey, deque[_Entry]] = {}
        self._stored: set[str] = set()

    @property
    def key(self) -> str:
        """Object key of the journal's index."""
        return journal_key(self.run_id, self.job)

    def load(self) -> int:
        """Read the saved journal (none saved is an empty one); return how many answers."""
        try:
            data = json.loads(self.store.get(self.key))
        except KeyError:
            return 0
        for item in data.get("entries", []):
            request = item["request"]
            key: RequestKey = (
                request["method"],
                request["url"],
                tuple((str(k), str(v)) for k, v in request["headers"]),
            )
            entry = _Entry(request=key, response=None, meta=item["response"])
            self._replayable.setdefault(key, deque()).append(entry)
            self._stored.add(entry.meta["body"])
        return sum(len(queue) for queue in self._replayable.values())

    def replay(self, request: RequestKey, max_bytes: int | None) -> FetchResponse | None:
        """The saved answer to ``request`` (its next unanswered occurrence), or None."""
        waiting = self._replayable.get(request)
        if not waiting:
            return None
        entry = waiting.popleft()
        meta = entry.meta
        if max_bytes is not None and int(meta["length"]) > max_bytes:
            return None  # asked with a smaller cap now: ask the host, and let the cap speak
        try:
            body = self.store.get(journal_body_key(self.run_id, self.job, meta["body"]))
        except KeyError:
            return None
        response = FetchResponse(
            url=meta["url"],
            status=int(meta["status"]),
            headers=tuple((str(k), str(v)) for k, v in meta["headers"]),
            body=body,
            redirects=tuple(meta["redirects"]),
            elapsed=float(meta.get("elapsed", 0.0)),
            revalidated=bool(meta.get("revalidated", False)),
            truncated=bool(meta.get("truncated", False)),
        )
        self._entries.append(_Entry(request=request, response=None, meta=meta))
        return response

    def record(self, request: RequestKey, response: FetchResponse) -> None:
        """Add an answer the host just gave."""
        digest = hashlib.sha256(response.body).hexdigest()
        meta = {
            "url": response.url,
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "redirects": list(response.redirects),
            "elapsed": response.elapsed,
            "revalidated": response.revalidated,
            "truncated": response.truncated,
            "body": digest,
            "length": len(response.body),
        }
        self._entries.append(_Entry(request=request, response=response, meta=meta))

    def save(self) -> None:
        """Write the bodies not yet stored, then the index; nothing when this try got no answer
        from a host (the journal saved before, if any, holds every answer replayed: two S3
        writes saved on each job deferred before its first request). Raises StorageError."""
        if all(entry.response is None for entry in self._entries):
            return
        for entry in self._entries:
            digest = entry.meta["body"]
            if entry.response is not None and digest not in self._stored:
                self.store.put(
                    journal_body_key(self.run_id, self.job, digest),
                    entry.response.body,
                )
                self._stored.add(digest)
        index = {
            "run_id": self.run_id,
            "job": self.job,
            "entries": [
                {
                    "request": {
                        "method": entry.request[0],
                        "url": entry.request[1],
                        "headers": [list(pair) for pair in entry.request[2]],
                    },
                    "response": entry.meta,
                }
                for entry in self._entries
            ],
        }
        self.store.put(
            self.key,
            json.dumps(index, sort_keys=True).encode("utf-8"),
            content_type="application/json",
        )


# --------------------------------------------------------------------------- slots kept per batch


class _KeptSlots(threading.local):
    """The slots kept on this thread (None: outside :func:`keep_host_slots`), by gate and host."""

    slots: dict[tuple[int, str], tuple[HostGate, HostSlot]] | None = None


_kept = _KeptSlots()


@contextmanager
def keep_host_slots() -> Iterator[None]:
    """Keep the host slots every :class:`GatedFetcher` takes on this thread until the block ends.

    Within the block a slot taken on a host serves the following requests to that host (through
    :meth:`~cdif_harvester.ports.HostGate.reuse`, which keeps the interval and the holds) and
    is given back once when the block ends, however it ends. A nested block belongs to the
    outer one. A slot that cannot be given back (the gate's store fails) is logged and frees
    itself when its lease runs out.
    """
    if _kept.slots is not None:
        yield
        return
    kept: dict[tuple[int, str], tuple[HostGate, HostSlot]] = {}
    _kept.slots = kept
    try:
        yield
    finally:
        _kept.slots = None
        for gate, slot in kept.values():
            try:
                gate.release(slot)
            except HarvestError as exc:  # its lease frees it; the batch's work stands
                logger.warning("host slot of %s not given back: %s", slot.host, exc)


# --------------------------------------------------------------------------- the fetcher


def _default_jitter(seconds: float) -> float:
    # Jobs deferred together must not all come back together: spread them over a second plus a
    # quarter of their wait.
    return random.uniform(0.0, 1.0 + seconds / 4)  # noqa: S311 - spreading, not security


class GatedFetcher:
    """A :class:`~cdif_harvester.ports.Fetcher` that takes a host slot for every request.

    ``slots_for(origin)`` says how many requests may be in flight on a host. ``mode`` is
    ``sleep`` (wait in the process) or ``defer`` (raise Deferred; needs ``journal_store``).
    ``jitter(wait)`` is added to a deferral's delay so jobs deferred together come back spread
    out (by default up to 1 s plus a quarter of the wait).
    Redirects are followed inside the first host's slot. Within :func:`keep_host_slots` a slot
    is kept for the following requests to its host. Thread-safe: the job scope is per thread.
    """

    def __init__(
        self,
        inner: Fetcher,
        gate: HostGate,
        *,
        slots_for: Callable[[str], int],
        mode: Mode = "sleep",
        journal_store: ObjectStore | None = None,
        max_retry_after: float = 900.0,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        jitter: Callable[[float], float] = _default_jitter,
    ) -> None:
        if mode == "defer" and journal_store is None:
            raise ValueError("defer mode keeps a journal: give it a journal_store")
        self.inner = inner
        self.gate = gate
        self.slots_for = slots_for
        self.mode = mode
        self.journal_store = journal_store
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._now = now
        self.jitter = jitter
        self._local = threading.local()

    @contextmanager
    def job_scope(
        self,
        *,
        run_id: str,
        job_key: str | Callable[[], str],
        resume: bool = False,
        requests_per_host: int | None = None,
        crawl_delay: float | None = None,
    ) -> Iterator[None]:
        """Run one job: journal its requests (``defer`` mode) and apply its source's limits.

        With ``resume`` the journal saved when the job was deferred is loaded first, and its
        answers are replayed. ``job_key`` names the job's journal (a callable is called only
        when there is a journal to name: the key hashes the whole message).
        ``requests_per_host`` lowers the host's slots for this job's requests; ``crawl_delay``
        holds the host for that long after each request starts (as a Crawl-delay does, for
        every worker). Raises StorageError when the journal cannot be read.
        """
        previous = getattr(self._local, "limits", None)
        self._local.limits = (requests_per_host, crawl_delay)
        try:
            with self._journal_scope(run_id, job_key, resume=resume):
                yield
        finally:
            self._local.limits = previous

    @contextmanager
    def _journal_scope(
        self, run_id: str, job_key: str | Callable[[], str], *, resume: bool
    ) -> Iterator[None]:
        if self.mode != "defer" or self.journal_store is None:
            yield
            return
        key = job_key() if callable(job_key) else job_key
        journal = FetchJournal(self.journal_store, run_id, key)
        if resume:
            journal.load()
        previous = getattr(self._local, "journal", None)
        self._local.journal = journal
        try:
            yield
        finally:
            self._local.journal = previous

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """Fetch ``url`` within a slot of its host (or from the job's journal).

        Raises Deferred in ``defer`` mode when the host cannot take the request now (after
        saving the job's journal), and whatever the wrapped fetcher raises.
        """
        journal: FetchJournal | None = getattr(self._local, "journal", None)
        request = _request_key(method, url, headers)
        if journal is not None:
            replayed = journal.replay(request, max_bytes)
            if replayed is not None:
                return replayed
        host = origin_of(url)
        slot, kept = self._take_slot(host, journal)
        try:
            response = self.inner.fetch(
                url, method=method, headers=headers, max_bytes=max_bytes, truncate=truncate
            )
        finally:
            if not kept:
                self.gate.release(slot)
        self._honour_retry_after(response)
        if journal is not None:
            journal.record(request, response)
        return response

    def _take_slot(self, host: str, journal: FetchJournal | None) -> tuple[HostSlot, bool]:
        """A slot to start a request on ``host`` now, and whether it is kept for the batch."""
        own_slots, own_delay = getattr(self._local, "limits", None) or (None, None)
        slots = self.slots_for(host)
        if own_slots:
            slots = min(slots, own_slots)
        kept = _kept.slots
        key = (id(self.gate), host)
        while True:
            admission = self._admission(host, slots, kept, key)
            if isinstance(admission, HostSlot):
                if kept is not None:
                    kept[key] = (self.gate, admission)
                if own_delay:
                    # The source's crawl delay, from this start: every worker sees the hold.
                    try:
                        self.gate.hold(host, own_delay)
                    except BaseException:
                        if kept is None:
                            self.gate.release(admission)
                        raise
                return admission, kept is not None
            if self.mode == "defer":
                delay = admission.seconds + self.jitter(admission.seconds)
                if journal is not None:
                    journal.save()
                raise Deferred(
                    f"{host} cannot take a request now ({admission.reason}); "
                    f"try again in {delay:.1f} s",
                    delay=delay,
                )
            self._sleep(admission.seconds)

    def _admission(
        self,
        host: str,
        slots: int,
        kept: dict[tuple[int, str], tuple[HostGate, HostSlot]] | None,
        key: tuple[int, str],
    ) -> HostSlot | Wait:
        """Reuse the slot kept on ``host`` when there is one, else take one."""
        held = kept.get(key) if kept is not None else None
        if kept is not None and held is not None:
            slot = held[1]
            if slot.index >= slots:  # a job whose source allows fewer slots than it holds
                del kept[key]
                self.gate.release(slot)
            else:
                admission = self.gate.reuse(slot, slots=slots)
                if admission is not None:
                    return admission
                del kept[key]  # no longer ours: its lease ran out and it was taken again
        return self.gate.acquire(host, slots=slots)

    def _honour_retry_after(self, response: FetchResponse) -> None:
        if response.status not in RETRY_AFTER_STATUSES:
            return
        value = response.header("retry-after")
        seconds = parse_retry_after(value, now=self._now()) if value is not None else None
        if seconds is not None and seconds > 0:
            self.gate.hold(origin_of(response.url), min(seconds, self.max_retry_after))
