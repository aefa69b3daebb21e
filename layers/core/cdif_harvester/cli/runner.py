"""The local runner: every stage, in process, against the local adapters.

The output directory is the object store (the key layout of the S3 bucket), ``catalog.sqlite`` in
it the catalogue, and in-process queues link the stages in the order of the SQS queues; running
again on the same directory continues the same catalogue. The adapters are built by the local
composition root, :mod:`cdif_harvester.local_runtime`; this module holds the loop that drives
them. Retryable errors are retried up to ``max_attempts`` times, each after a backoff
(:func:`~cdif_harvester.stages.jobs.retry_delay`, as on AWS), then the URL ends ``failed``; any
other error ends it at once (:func:`~cdif_harvester.stages.jobs.verdict`, as on AWS).
The stages that fetch run on a pool of ``workers`` threads spread across hosts, every request
through one in-memory host gate; with ``processes`` above 1 the extractor reads documents in
that many other processes (:mod:`cdif_harvester.cli.processes`), this one writing what they find.

See docs/decisions/0010-local-runner.md, 0090-local-stages-in-processes.md and
0095-index-work-prepared-in-processes.md.
"""

from __future__ import annotations

import heapq
import json
import random
import shutil
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from cdif_harvester import local_runtime
from cdif_harvester.cli.processes import (
    MAX_PROCESSES,
    Answer,
    StagePool,
    WorkerDied,
    task_message,
)
from cdif_harvester.cli.progress import ProgressOut, ProgressSnapshot, StatusView
from cdif_harvester.contracts import (
    CROSSWALK_QUEUE,
    DOCUMENT_QUEUE,
    INDEX_QUEUE,
    SITEMAP_QUEUE,
    URL_QUEUE,
    DocumentJob,
    IndexJob,
    SitemapJob,
    UrlJob,
    carries_state,
    decode,
)
from cdif_harvester.domain.discovery.entry import SiteDiscovery
from cdif_harvester.errors import ContractError, Deferred, HarvestError
from cdif_harvester.keys import origin_of, record_hash, site_discovery_key, view_keys
from cdif_harvester.local_runtime import CATALOG_FILE, LocalConfig
from cdif_harvester.model import Outcome, RunState, UrlOutcome, UrlState, outcome_to_dict
from cdif_harvester.ports import Fetcher
from cdif_harvester.stages.crosswalk import build_views, keys_from_s3_event
from cdif_harvester.stages.expand import expand_sitemap
from cdif_harvester.stages.extract import (
    carried_state,
    comparable_state,
    extract_documents,
    held_blocks,
    settle_read,
)
from cdif_harvester.stages.finish import (
    REPORT_NAME,
    RunCounts,
    close_run,
    held_records,
    run_files_prefix,
)
from cdif_harvester.stages.index import PreparedIndex, index_prepared, index_records
from cdif_harvester.stages.intake import new_run_id, start_run
from cdif_harvester.stages.jobs import Jitter, give_up, retry_delay, run_job, verdict
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.stages.sources import claim_source_run
from cdif_harvester.wiring import Wiring

__all__ = ["HarvestInterrupted", "HarvestSummary", "LocalHarvester", "Terminated"]

SUMMARY_FILE = "summary.json"
OUTCOMES_FILE = "outcomes.jsonl"

Stage = Callable[[Wiring, Any], Any]

# The stages run on the main thread, later stages first: work already under way finishes before
# new work is started, which keeps the queues short and makes progress visible early.
_MAIN_STAGES: list[tuple[str, type[Any], Stage]] = [
    (INDEX_QUEUE, IndexJob, index_records),
    (DOCUMENT_QUEUE, DocumentJob, extract_documents),
]
# The stages that fetch, run by the worker pool per host; URL jobs before sitemap jobs.
_FETCH_STAGES: list[tuple[str, type[Any], Stage]] = [
    (URL_QUEUE, UrlJob, resolve_url),
    (SITEMAP_QUEUE, SitemapJob, expand_sitemap),
]
_STAGES = _MAIN_STAGES + _FETCH_STAGES

DEFAULT_WORKERS = 4
# Decoded fetch jobs held in the host lines at most: enough for the round-robin to find work for
# every worker across many hosts, few enough that memory does not grow with the site (a
# sitemap's part of 5,000 URL jobs waits in the queue as message bodies). Delayed jobs coming
# due are lined up whatever the count (there are at most as many as jobs that failed).
_LINED_UP = 512
# Fetched documents and found records waiting for the stages that read and index them, at most
# (per document process): the fetch workers outrun those stages, and what they fetch waits in
# memory as messages with the documents inside. Past this, no new fetch starts until they
# catch up, so memory does not grow with the site.
_WAITING_PER_PROCESS = 16
_OUTCOME_NAMES = frozenset(kind.value for kind in Outcome)


@dataclass
class HarvestSummary:
    """The figures of one local run, as written to summary.json.

    A run may harvest several entry URLs together (one run id): ``entry_urls`` lists them all,
    ``entry_url`` is the first, and every count covers the whole run.
    """

    run_id: str
    entry_url: str
    started_at: str
    entry_urls: list[str] = field(default_factory=list)
    finished_at: str = ""
    elapsed_seconds: float = 0.0
    urls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    patterns: dict[str, int] = field(default_factory=dict)
    records: int = 0
    valid_records: int = 0
    invalid_records: int = 0
    views: int = 0
    crosswalk_errors: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    signmaps: list[str] = field(default_factory=list)
    # What each site root among the entry URLs led to: its sitemaps and how they were found.
    sites: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form written to summary.json."""
        return {
            "run_id": self.run_id,
            "entry_url": self.entry_url,
            "entry_urls": self.entry_urls or [self.entry_url],
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "urls": self.urls,
            "outcomes": self.outcomes,
            "patterns": self.patterns,
            "records": self.records,
            "valid_records": self.valid_records,
            "invalid_records": self.invalid_records,
            "views": self.views,
            "crosswalk_errors": self.crosswalk_errors,
            "withdrawn": self.withdrawn,
            "signmaps": self.signmaps,
            "sites": self.sites,
            "files": {"outcomes": OUTCOMES_FILE, "catalog": CATALOG_FILE, "report": "report.html"},
        }


class Terminated(KeyboardInterrupt):  # noqa: N818 - named for the signal, as KeyboardInterrupt
    """SIGTERM, raised in the main thread by the command line's signal handler: it stops a
    local run as Ctrl-C does (a KeyboardInterrupt, so no ``except Exception`` swallows it)."""


class HarvestInterrupted(Exception):  # noqa: N818 - what happened, not a fault
    """A local run stopped by Ctrl-C (SIGINT) or SIGTERM: it is marked ``interrupted`` in the
    catalogue; ``exit_status`` is 130 or 143 (128 + the signal's number)."""

    def __init__(self, run_id: str, *, terminated: bool, entered: int, settled: int) -> None:
        signal = "SIGTERM" if terminated else "SIGINT"
        super().__init__(
            f"{signal}: run {run_id} interrupted after {settled} of {entered} URLs settled; "
            "harvest again to continue"
        )
        self.run_id = run_id
        self.exit_status = 143 if terminated else 130


@dataclass
class _Work:
    """One decoded job waiting for, or running on, a worker."""

    body: str
    job: Any
    contract: type[Any]
    stage: Stage
    host: str


class _JobHead:
    """Whose URL a job that goes to another process is: its message is parsed only when that
    is asked (its reading failed), as it holds a whole page."""

    def __init__(self, body: str) -> None:
        self._body = body

    @cached_property
    def _head(self) -> dict[str, Any]:
        head: dict[str, Any] = json.loads(self._body)
        return head

    @property
    def run_id(self) -> str:
        """The job's run."""
        return str(self._head["run_id"])

    @property
    def source(self) -> str:
        """The job's source."""
        return str(self._head["source"])

    @property
    def url(self) -> str:
        """The job's URL."""
        return str(self._head["url"])


@dataclass
class _HostLine:
    """The fetch jobs of one host waiting for a worker, URL jobs first."""

    urls: deque[_Work] = field(default_factory=deque)
    sitemaps: deque[_Work] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self.urls) + len(self.sitemaps)


class LocalHarvester:
    """Runs harvests into one output directory with the local adapters.

    ``workers`` threads run the fetching stages, at most ``requests_per_host`` of them (and at
    most that many requests in flight) per host; ``host_overrides`` sets another number for
    some hosts (by origin or host name). ``sleep`` is how the politeness gate and a retry's
    backoff wait; ``jitter`` draws each backoff within its bounds. ``contact`` is the
    operator's, named in the User-Agent (``CDIF_OPERATOR_CONTACT`` when not given); an invalid
    one raises InvalidContact. ``views`` also writes each valid record's views as files under
    ``views/`` (by default they are made when asked for: ``cdif-harvest view``). ``processes``
    above 1 reads documents (extraction, normalisation, validation) in that many other
    processes; 1 reads them here. Raises ValueError for a number of processes out of range.
    """

    def __init__(
        self,
        out_dir: Path,
        *,
        allow_loopback: bool = False,
        fetcher: Fetcher | None = None,
        progress: ProgressOut | None = None,
        max_attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        workers: int = DEFAULT_WORKERS,
        requests_per_host: int | None = None,
        host_overrides: Mapping[str, int] | None = None,
        trusted_contexts: Sequence[str] = (),
        incremental: bool = True,
        shacl: bool = False,
        crawl_delays: Mapping[str, float] | None = None,
        jitter: Jitter = random.uniform,
        contact: str | None = None,
        render: str | None = None,
        keep_bodies: bool = False,
        views: bool = False,
        processes: int = 1,
    ) -> None:
        if not 1 <= processes <= MAX_PROCESSES:
            raise ValueError(f"processes must be from 1 to {MAX_PROCESSES}, not {processes}")
        self.out_dir = out_dir
        self.jitter = jitter
        # Views are made on read (``cdif-harvest view``); as files only when asked for.
        self.write_views = views
        local = local_runtime.wiring(
            out_dir,
            LocalConfig(
                allow_loopback=allow_loopback,
                requests_per_host=requests_per_host,
                host_overrides=host_overrides,
                trusted_contexts=tuple(trusted_contexts),
                incremental=incremental,
                shacl=shacl,
                crawl_delays=crawl_delays,
                contact=contact,
                render=render,
                keep_bodies=keep_bodies,
            ),
            fetcher=fetcher,
            sleep=sleep,
        )
        self._local = local
        self.wiring = local.wiring
        self.queue = local.queue
        self.catalog = local.catalog
        self.progress = progress
        self.max_attempts = max_attempts
        self.workers = max(1, workers)
        self._attempts: Counter[str] = Counter()
        self._last_progress = 0.0
        self._lines: dict[str, _HostLine] = {}
        self._running: dict[Future[Any], _Work] = {}
        self._delayed: list[tuple[float, int, _Work]] = []
        self._delayed_seq = 0
        # Documents are read elsewhere only without trusted contexts: fetching one goes through
        # this process's host gate (see 0090).
        self.processes = 1 if trusted_contexts else processes
        self._pool: StagePool | None = None
        self._reading: dict[int, tuple[_Work, UrlState | None]] = {}
        # With processes, index jobs run on a thread of their own, one at a time in their order
        # (as here without them), so that their files' writes overlap this thread's work.
        self._indexer: ThreadPoolExecutor | None = None
        self._indexing: dict[Future[Any], _Work] = {}
        # What the processes did ahead of the index jobs they sent (by the job's message, as
        # the index queue holds it): only the catalogue's part is left to do here.
        self._prepared: dict[str, PreparedIndex] = {}
        self._task_ids = 0
        # Set when a fetch job or a process's answer comes back: what a pause waits for.
        self._wake = threading.Event()

    def close(self) -> None:
        """Release the catalogue, the fetcher's connections and any processes left."""
        self._stop_processes()
        self._local.close()

    def _stop_processes(self) -> None:
        """Stop the document processes now, and the index thread after its job."""
        if self._indexer is not None:
            self._indexer.shutdown(wait=False, cancel_futures=True)
            self._indexer = None
            self._indexing.clear()
            self._prepared.clear()
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    def __enter__(self) -> LocalHarvester:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def harvest(
        self,
        entry_urls: str | Sequence[str],
        *,
        options: Mapping[str, str] | None = None,
        trigger: str = "manual",
        source_id: str | None = None,
        run_id: str | None = None,
    ) -> HarvestSummary:
        """Harvest robots.txt, sitemap or page URLs together in one run (one run id); write
        summary.json and outcomes.jsonl.

        ``options`` are resolution options for every URL of the run (``format_parameter``);
        ``source_id`` names the registered source harvested (whose run ``run_id`` was claimed).
        Raises InvalidEntryUrl when a URL can never be harvested and InvalidOptions for unusable
        options (before anything is fetched); HarvestInterrupted when Ctrl-C or SIGTERM stops
        the run (marked ``interrupted``; nothing is written for it but what its URLs settled).
        """
        urls = [entry_urls] if isinstance(entry_urls, str) else list(entry_urls)
        started = time.monotonic()
        run, jobs = start_run(
            self.wiring,
            urls,
            run_id=run_id or new_run_id(self.wiring.clock),
            options=options,
            trigger=trigger,
            source_id=source_id,
        )
        run_id = run.run_id
        summary = HarvestSummary(
            run_id=run_id,
            entry_url=jobs[0].url,
            entry_urls=[job.url for job in jobs],
            started_at=self.wiring.clock.now().isoformat(timespec="seconds"),
        )
        self._say(f"harvest {run_id}: {', '.join(summary.entry_urls)} -> {self.out_dir}")
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="cdif-fetch")
        if self.processes > 1:
            self._pool = StagePool(
                self.processes, self.out_dir, shacl=self.wiring.settings.shacl, wake=self._wake
            )
            self._indexer = ThreadPoolExecutor(1, thread_name_prefix="cdif-index")
        try:
            views = self._drive(pool, summary)
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (Terminated)
            # Jobs not started are dropped; a fetch or an index job under way ends (a fetch
            # within its deadline); the documents being read are dropped with their processes.
            pool.shutdown(wait=False, cancel_futures=True)
            self._stop_processes()
            raise self._interrupted(run_id, terminated=isinstance(stop, Terminated)) from None
        except BaseException:  # (a fault of the runner itself): no process outlives it
            pool.shutdown(wait=False, cancel_futures=True)
            self._stop_processes()
            raise
        pool.shutdown()
        if self._indexer is not None:
            self._indexer.shutdown()
            self._indexer = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._check_finished(run_id)
        # Tombstones, the Signmaps of the sources whose records changed, the source freed.
        closure = close_run(self.wiring, run_id, publish=False)
        summary.withdrawn = closure.withdrawn
        summary.signmaps = closure.signmaps
        summary.sites = closure.sites
        summary.crosswalk_errors.extend(closure.errors)
        if summary.withdrawn:
            self._say(f"  {len(summary.withdrawn)} URLs no longer announced: marked withdrawn")
        self._finish(summary, closure.counts, views, started)
        # The report is written after the run was closed: note where, as closing does on AWS.
        closed = self.catalog.get_run(run_id)
        self.catalog.close_run(
            run_id,
            at=(closed.closed_at if closed else None) or summary.finished_at,
            report_key=f"{run_files_prefix(run_id)}{REPORT_NAME}",
        )
        return summary

    def _drive(self, pool: ThreadPoolExecutor, summary: HarvestSummary) -> int:
        """Run every stage until every queue is empty; return the views made."""
        views = 0
        while True:
            views += self._drain_crosswalk(summary)
            read = self._settle_reading()
            ran = self._run_one_main_job()
            sent = self._send_documents()
            indexed = self._index_elsewhere()
            self._collect()
            self._take_fetch_jobs()
            started_work = self._dispatch(pool)
            if not (read or ran or sent or indexed or started_work):
                if self._finished():
                    return views
                self._pause()
            self._report_progress(summary.run_id)

    def _interrupted(self, run_id: str, *, terminated: bool) -> HarvestInterrupted:
        """Mark the run ``interrupted`` (never withdrawing anything: it was not read whole)."""
        at = self.wiring.clock.now().isoformat(timespec="seconds")
        self.catalog.finish_run(run_id, at=at, state=RunState.INTERRUPTED)
        run = self.catalog.get_run(run_id)
        return HarvestInterrupted(
            run_id,
            terminated=terminated,
            entered=run.entered if run else 0,
            settled=run.settled if run else 0,
        )

    def harvest_source(
        self, source_id: str, *, trigger: str = "manual", entry_url: str | None = None
    ) -> HarvestSummary:
        """Harvest a registered source of this directory (from its entry URL, or from
        ``entry_url`` on one of its hosts) with its resolution options, as one run that holds
        the source until it ends. Raises UnknownSource, HostNotAllowed or SourceBusy."""
        source, url, run_id = claim_source_run(self.wiring, source_id, entry_url=entry_url)
        try:
            return self.harvest(
                [url], options=source.options, trigger=trigger, source_id=source_id, run_id=run_id
            )
        finally:
            # (closing the run frees the source; this covers a harvest that raised)
            self.catalog.release_source(source_id, run_id)

    def _check_finished(self, run_id: str) -> None:
        """Every queue is empty: the run's counters must say it finished. If they do not (a
        bug in the counting), say so and mark it finished: the work really is done."""
        run = self.catalog.get_run(run_id)
        if run is None or run.state is RunState.FINISHED:
            return
        self._say(
            f"  warning: run counters say {run.entered} URLs entered, {run.settled} settled, "
            f"{run.sitemaps} sitemap jobs left; marking the run finished"
        )
        self.catalog.recount_run(run_id, at=self.wiring.clock.now().isoformat(timespec="seconds"))
        self.catalog.finish_run(run_id, at=self.wiring.clock.now().isoformat(timespec="seconds"))

    # -- the main thread's work -----------------------------------------------------------------

    def _run_one_main_job(self) -> bool:
        for name, contract, stage in _MAIN_STAGES:
            if (self._pool if contract is DocumentJob else self._indexer) is not None:
                continue  # (documents read by the processes, index jobs on their thread)
            body = self.queue.receive(name)
            if body is not None:
                work = self._decode(body, contract, stage)
                try:
                    # (the indexer never fetches: no job scope, whose key hashes the message)
                    run_job(self.wiring, work.job, stage, scoped=contract is not IndexJob)
                except Exception as exc:  # noqa: BLE001 - every error ends in an outcome
                    self._after_failure(work, exc)
                else:
                    self._attempts.pop(body, None)  # (a job retried that now succeeded)
                return True
        return False

    def _decode(self, body: str, contract: type[Any], stage: Stage) -> _Work:
        try:
            job = decode(body, contract)
        except ContractError as exc:  # our own queue: a broken message is a bug, say so
            raise RuntimeError(f"internal message broke its contract: {exc}") from exc
        try:
            host = origin_of(job.url)
        except ValueError:  # a malformed URL: its stage settles it (run_job), in a line of its own
            host = job.url
        return _Work(body=body, job=job, contract=contract, stage=stage, host=host)

    def _after_failure(self, work: _Work, exc: BaseException) -> None:
        """Decide what becomes of a job that raised: later turn, retry, or recorded outcome."""
        if isinstance(exc, Deferred):  # not an attempt: back in line after the delay
            self._later(work, exc.delay)
        elif not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: the run stops
            raise exc
        elif (error := verdict(exc)) is not None:  # (run_job settles these itself)
            self._attempts.pop(work.body, None)
            give_up(self.wiring, work.job, error)
        else:  # retryable (SQS would redeliver it): another attempt, up to max_attempts
            self._attempts[work.body] += 1
            failures = self._attempts[work.body]
            if failures < self.max_attempts:
                retry_after = getattr(exc, "retry_after", None)
                delay = retry_delay(failures, retry_after, self.wiring.settings, jitter=self.jitter)
                self._say(
                    f"  retrying {work.job.url} in {delay:.1f} s "
                    f"({_reason_of(exc)}; attempt {failures + 1} of {self.max_attempts})"
                )
                self._later(work, delay)
            else:
                del self._attempts[work.body]  # settled: its count is needed no more
                give_up(self.wiring, work.job, _given_up(exc))

    def _later(self, work: _Work, delay: float) -> None:
        """Put ``work`` back in line once ``delay`` seconds have passed (on the gate's clock)."""
        self._delayed_seq += 1
        ready = self._local.monotonic() + delay
        heapq.heappush(self._delayed, (ready, self._delayed_seq, work))

    @staticmethod
    def _queue_of(contract: type[Any]) -> str:
        return next(name for name, kind, _ in _STAGES if kind is contract)

    # -- documents read in other processes ------------------------------------------------------

    def _send_documents(self) -> bool:
        """Send queued document jobs to the processes with room for them."""
        pool = self._pool
        if pool is None:
            return False
        sent = False
        while pool.room() > 0 and (body := self.queue.receive(DOCUMENT_QUEUE)) is not None:
            # Decoded whole only when this process needs more than whose URL it is (an outcome
            # to write but the index job's): the processes decode it. A job that carries its
            # URL's state is compared with it there; for another the state is read here.
            job = _JobHead(body)
            work = _Work(body, job, DocumentJob, extract_documents, host="")
            held = None
            if not carries_state(body):
                held = comparable_state(self.wiring, job.url, job.run_id)
            self._task_ids += 1
            self._reading[self._task_ids] = (work, held)
            pool.submit(self._task_ids, task_message(self._task_ids, body, held_blocks(held)))
            sent = True
        return sent

    def _index_elsewhere(self) -> bool:
        """Settle the index jobs done on the index thread; give it the next ones."""
        indexer = self._indexer
        if indexer is None:
            return False
        moved = False
        for future in [f for f in self._indexing if f.done()]:
            work = self._indexing.pop(future)
            moved = True
            exc = future.exception()
            if exc is not None:
                self._after_failure(work, exc)
            else:
                self._attempts.pop(work.body, None)
        # Two at most: one running, one waiting, so that the thread does not wait for this one.
        while len(self._indexing) < 2 and (body := self.queue.receive(INDEX_QUEUE)) is not None:
            prepared = self._prepared.pop(body, None)
            if prepared is None:  # (a job retried, or one a process could not prepare)
                work = self._decode(body, IndexJob, index_records)
                stage: Stage = index_records
            else:  # no decoding, no digests, no JSON to write: done in the process
                work = _Work(body, prepared.job, IndexJob, index_records, host="")
                stage = _index_prepared(prepared)
            future = indexer.submit(run_job, self.wiring, work.job, stage, scoped=False)
            future.add_done_callback(self._wake_up)
            self._indexing[future] = work
            moved = True
        return moved

    def _settle_reading(self) -> bool:
        """Write what the processes found; a job lost with its process is tried again."""
        pool = self._pool
        if pool is None:
            return False
        settled = False
        for answer in pool.answers():
            settled = True
            self._settle_answer(answer)
        if pool.broken:
            # Its processes die before they can start: read here, from now on.
            self._say("  warning: the extraction processes cannot start; reading documents here")
            pool.terminate()
            self._pool = None
            for work, _held in self._reading.values():
                self.queue.send(DOCUMENT_QUEUE, [work.body])
            self._reading.clear()
        return settled

    def _settle_answer(self, answer: Answer) -> None:
        work, held = self._reading.pop(answer.task_id)
        if answer.lost:
            if answer.blamed:  # it was being read when its process died: an attempt
                self._after_failure(work, WorkerDied(f"{work.job.url}: its process died"))
            else:  # it never started: back in the queue, no attempt counted
                self.queue.send(DOCUMENT_QUEUE, [work.body])
            return
        if answer.error is not None:
            self._failed_reading(work, answer.error)
            return
        if answer.index is not None:  # records found: on to the indexer
            if answer.prepared is not None:
                self._prepared[answer.index] = answer.prepared
            self.queue.send(INDEX_QUEUE, [answer.index])
            self._attempts.pop(work.body, None)
            return
        extraction = answer.extraction
        assert extraction is not None

        def settle(wiring: Wiring, job: DocumentJob) -> Any:
            # (compared with the state the job carries, as its process did, or the one read)
            compared = carried_state(job) if held is None else held
            return settle_read(wiring, job, extraction, compared)

        try:
            run_job(self.wiring, decode(work.body, DocumentJob), settle, scoped=False)
        except Exception as exc:  # noqa: BLE001 - every error ends in an outcome
            self._after_failure(work, exc)
        else:
            self._attempts.pop(work.body, None)

    def _failed_reading(self, work: _Work, error: HarvestError) -> None:
        """A process's verdict on reading ``work``: a recorded outcome or a retry, as
        :func:`run_job` and :meth:`_after_failure` decide for an error raised here."""
        if verdict(error) is None:
            self._after_failure(work, error)
            return
        self._attempts.pop(work.body, None)
        try:
            give_up(self.wiring, work.job, error)
        except Exception as exc:  # noqa: BLE001 - (the catalogue failed): try again
            self._after_failure(work, exc)

    # -- the fetching stages, per host ---------------------------------------------------------

    def _take_fetch_jobs(self) -> None:
        """Move queued fetch jobs (and delayed ones whose time has come) into host lines.

        At most ``_LINED_UP`` jobs are held decoded in the lines; the rest wait in the queue as
        the message bodies they are (see :func:`lined_up`)."""
        held = self.lined_up()
        for name, contract, stage in _FETCH_STAGES:
            while held < _LINED_UP and (body := self.queue.receive(name)) is not None:
                self._line_up(self._decode(body, contract, stage))
                held += 1
        now = self._local.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            work = heapq.heappop(self._delayed)[2]
            if work.contract in (UrlJob, SitemapJob):
                self._line_up(work)
            else:  # a main-thread stage's job, retried: back on its queue
                self.queue.send(self._queue_of(work.contract), [work.body])

    def lined_up(self) -> int:
        """How many decoded fetch jobs the host lines hold (not counting those running)."""
        return sum(len(line) for line in self._lines.values())

    def _line_up(self, work: _Work) -> None:
        line = self._lines.setdefault(work.host, _HostLine())
        (line.urls if work.contract is UrlJob else line.sitemaps).append(work)

    def _dispatch(self, pool: ThreadPoolExecutor) -> bool:
        """Start jobs on free workers, round-robin over hosts, each host within its slots;
        none while too many fetched documents wait to be read and indexed."""
        waiting = self.queue.pending(DOCUMENT_QUEUE) + self.queue.pending(INDEX_QUEUE)
        if waiting >= _WAITING_PER_PROCESS * self.processes:
            return False  # (the main loop reads and indexes them meanwhile: they always drain)
        started = False
        progress = True
        while progress and len(self._running) < self.workers:
            progress = False
            for host in list(self._lines):
                if len(self._running) >= self.workers:
                    break
                work = self._next_of(host)
                if work is None:
                    continue
                future = pool.submit(self._work, work)
                future.add_done_callback(self._wake_up)
                self._running[future] = work
                started = progress = True
        return started

    def _wake_up(self, _done: object) -> None:
        # (a set while the main loop is awake is skipped: it clears the event before it looks
        # at what is done, so it finds this too; setting it would wake nobody and take a lock)
        if not self._wake.is_set():
            self._wake.set()

    def _next_of(self, host: str) -> _Work | None:
        line = self._lines[host]
        running = [w for w in self._running.values() if w.host == host]
        if len(running) >= self.wiring.settings.slots_for(host):
            return None
        if line.urls:
            work = line.urls.popleft()
        elif line.sitemaps and not any(w.contract is SitemapJob for w in running):
            # One expansion per host at a time: it reads the host's robots.txt once.
            work = line.sitemaps.popleft()
        else:
            return None
        if not line:
            del self._lines[host]
        return work

    def _work(self, work: _Work) -> None:
        run_job(self.wiring, work.job, work.stage)

    def _collect(self) -> None:
        """Settle the jobs the workers have finished."""
        for future in [f for f in self._running if f.done()]:
            work = self._running.pop(future)
            exc = future.exception()
            if exc is not None:
                self._after_failure(work, exc)
                continue
            self._attempts.pop(work.body, None)  # (a job retried that now succeeded)
            if isinstance(work.job, SitemapJob) and work.job.depth == 0:
                self._say_site(work.job)

    def _say_site(self, job: SitemapJob) -> None:
        """Say which sitemaps a site root led to, and how they were found."""
        try:
            kept = json.loads(self.wiring.store.get(site_discovery_key(job.run_id, job.url)))
        except (KeyError, ValueError):  # not a site root
            return
        self._say(f"  {SiteDiscovery.from_dict(kept).describe()}")

    def _pause(self) -> None:
        """Nothing to start: wait for a worker to finish or a delayed job to come due.

        With no worker busy only a delayed job can bring work: its wait is slept whole, with
        the runner's ``sleep``, which is what a backoff's wait is made of."""
        due = max(0.0, self._delayed[0][0] - self._local.monotonic()) if self._delayed else None
        if self._reading or self._indexing:  # a fetch or index job or an answer wakes it
            self._wake.wait(0.25 if due is None else min(0.25, due))
            self._wake.clear()
        elif self._running:
            timeout = 0.25 if due is None else min(0.25, due)
            wait(list(self._running), timeout=timeout, return_when=FIRST_COMPLETED)
        elif due is not None and due > 0:
            self._local.sleep(due)
        elif due is None:
            time.sleep(0.25)  # (nothing running, nothing delayed: not reached while work is left)

    def _finished(self) -> bool:
        return not (
            self.queue.pending()
            or self._lines
            or self._running
            or self._delayed
            or self._reading
            or self._indexing
        )

    def _view_files(self, source: str, record_id: str) -> dict[str, str]:
        """The view files of a record this harvest wrote (``--views``), by view name."""
        if not self.write_views:
            return {}
        keys = view_keys(source, record_hash(record_id))
        return {name: key for name, key in keys.items() if (self.out_dir / key).is_file()}

    def _drain_crosswalk(self, summary: HarvestSummary) -> int:
        made = 0
        while (body := self.queue.receive(CROSSWALK_QUEUE)) is not None:
            if not self.write_views:  # made on read: the notification has nothing to ask
                continue
            for key in keys_from_s3_event(json.loads(body)):
                try:
                    made += len(build_views(self.wiring, key))
                except (HarvestError, KeyError) as exc:
                    summary.crosswalk_errors.append(f"{key}: {exc}")
        return made

    # -- reporting ------------------------------------------------------------------------------

    def _report_progress(self, run_id: str, *, force: bool = False) -> None:
        if self.progress is None:
            return
        view = self.progress if isinstance(self.progress, StatusView) else None
        now = time.monotonic()
        if not force and now - self._last_progress < (view.interval if view else 1.0):
            return
        self._last_progress = now
        run = self.catalog.get_run(run_id)
        outcomes = list(self.catalog.outcomes(run_id)) if view and view.verbose else []
        waiting = {name: self.queue.pending(name) for name, _, _ in _STAGES}
        held = [work for *_, work in self._delayed]
        urls = waiting[URL_QUEUE] + sum(len(line.urls) for line in self._lines.values())
        urls += sum(1 for work in held if work.contract is UrlJob)
        sitemaps = waiting[SITEMAP_QUEUE] + sum(len(line.sitemaps) for line in self._lines.values())
        sitemaps += sum(1 for work in held if work.contract is SitemapJob)
        snapshot = ProgressSnapshot(
            done={k: n for k, n in (run.outcomes if run else {}).items() if k in _OUTCOME_NAMES},
            entered=run.entered if run else 0,
            waiting_sitemaps=sitemaps,
            waiting_urls=urls,
            waiting_documents=waiting[DOCUMENT_QUEUE]
            + waiting[INDEX_QUEUE]
            + len(self._reading)
            + len(self._indexing),
            running=len(self._running),
            hosts=len({w.host for w in self._running.values()}),
            outcomes=outcomes,
        )
        if view is not None:
            view.status(snapshot)
        else:
            self._say(snapshot.line())

    def _finish(
        self, summary: HarvestSummary, counts: RunCounts, views: int, started: float
    ) -> None:
        summary.urls = counts.urls
        summary.outcomes = counts.outcome_counts()
        summary.patterns = counts.pattern_counts()
        summary.records = counts.records
        summary.valid_records = counts.valid_records
        summary.invalid_records = counts.invalid_records
        summary.views = views
        summary.finished_at = self.wiring.clock.now().isoformat(timespec="seconds")
        summary.elapsed_seconds = time.monotonic() - started
        written = summary.to_dict()
        run_id = summary.run_id
        run_dir = self.out_dir / "runs" / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        # Each outcome is read from the catalogue as its line is written: a run's outcomes are
        # never all in memory (the report reads them again the same way).
        with (run_dir / OUTCOMES_FILE).open("w", encoding="utf-8") as lines:
            for outcome in self.catalog.outcomes(run_id):
                line = json.dumps(
                    _outcome_line(outcome, self._view_files), ensure_ascii=False, sort_keys=True
                )
                lines.write(line + "\n")
        (run_dir / SUMMARY_FILE).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
        # The publisher report: what summary.json and outcomes.jsonl say of this run, and the
        # sources' records as the catalogue now holds them.
        from cdif_harvester.report import render_report  # noqa: PLC0415 - end of run only

        held = held_records(self.wiring, run_id, counts.sources, summary.withdrawn)
        outcomes = (outcome_to_dict(o) for o in self.catalog.outcomes(run_id))
        report = render_report(written, outcomes, held=held)
        (run_dir / written["files"]["report"]).write_text(report, encoding="utf-8")
        for name in (OUTCOMES_FILE, SUMMARY_FILE, written["files"]["report"]):
            shutil.copyfile(run_dir / name, self.out_dir / name)
        self._say(f"  report for publishers: {self.out_dir / written['files']['report']}")
        # The hand-over objects served their purpose (on AWS a lifecycle rule expires them).
        staging = self.out_dir / "staging"
        shutil.rmtree(staging / summary.run_id, ignore_errors=True)
        if staging.is_dir() and not any(staging.iterdir()):
            staging.rmdir()
        self._report_progress(summary.run_id, force=True)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            print(text, file=self.progress, flush=True)


def _index_prepared(prepared: PreparedIndex) -> Stage:
    """The index stage for the job ``prepared`` was made for, with that work done."""

    def stage(wiring: Wiring, _job: IndexJob) -> Any:
        return index_prepared(wiring, prepared)

    return stage


def _reason_of(exc: Exception) -> str:
    """A short reason for a retry's progress line."""
    return exc.reason if isinstance(exc, HarvestError) else type(exc).__name__


def _given_up(exc: Exception) -> HarvestError:
    """The error a URL ends with after its last attempt failed with ``exc``."""
    if isinstance(exc, HarvestError):
        return exc
    return HarvestError(f"{type(exc).__name__}: {exc}", reason="internal-error")


def _outcome_line(
    outcome: UrlOutcome, view_files: Callable[[str, str], dict[str, str]]
) -> dict[str, Any]:
    """One line of outcomes.jsonl: each valid record names its view files (``view_files``: those
    written, by view name; none unless the harvest wrote them)."""
    data = outcome_to_dict(outcome)
    line = {key: data[key] for key in ("url", "outcome", "reason", "pattern", "records")}
    for record in line["records"]:
        files = view_files(outcome.source, record["record_id"]) if record["valid"] else {}
        if files and "views" not in record:
            record["views"] = files
    if outcome.outcome is Outcome.RECORD:
        line.pop("reason")
    return line


def default_progress() -> TextIO:
    """Progress goes to stderr so stdout stays machine-readable."""
    return sys.stderr
