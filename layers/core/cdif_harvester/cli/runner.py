"""The local runner: every stage, in process, against the local adapters.

A harvest on one machine with no AWS account: the output directory is the object store (same
key layout as the S3 bucket), ``catalog.sqlite`` in it is the catalogue, and in-process queues
link the stages in the same order as the SQS queues on AWS. Running again on the same directory
continues the same catalogue.

Retryable errors (a 5xx answer, a timeout) are retried up to ``max_attempts`` times, then the URL
is recorded as ``failed`` with the last reason: every URL that enters ends in one outcome.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    NotifyingObjectStore,
    PoliteFetcher,
    SqliteCatalog,
    SystemClock,
)
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
    decode,
)
from cdif_harvester.errors import ContractError, HarvestError, RetryableError
from cdif_harvester.keys import RECORDS_PREFIX, origin_of
from cdif_harvester.model import Outcome, UrlOutcome, outcome_to_dict
from cdif_harvester.ports import Fetcher
from cdif_harvester.stages import Ports, run_job, settle
from cdif_harvester.stages.crosswalk import build_views, keys_from_s3_event
from cdif_harvester.stages.expand import expand_sitemap
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.index import index_records
from cdif_harvester.stages.intake import start_harvest
from cdif_harvester.stages.resolve import resolve_url

__all__ = ["HarvestSummary", "LocalHarvester"]

CATALOG_FILE = "catalog.sqlite"
SUMMARY_FILE = "summary.json"
OUTCOMES_FILE = "outcomes.jsonl"

# Later stages first: work already under way finishes before new work is started, which keeps
# the queues short and makes progress visible early.
_STAGES: list[tuple[str, type[Any], Callable[[Ports, Any], Any]]] = [
    (INDEX_QUEUE, IndexJob, index_records),
    (DOCUMENT_QUEUE, DocumentJob, extract_documents),
    (URL_QUEUE, UrlJob, resolve_url),
    (SITEMAP_QUEUE, SitemapJob, expand_sitemap),
]


@dataclass
class HarvestSummary:
    """The figures of one local run, as written to summary.json."""

    run_id: str
    entry_url: str
    started_at: str
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

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form written to summary.json."""
        return {
            "run_id": self.run_id,
            "entry_url": self.entry_url,
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
            "files": {"outcomes": OUTCOMES_FILE, "catalog": CATALOG_FILE},
        }


class LocalHarvester:
    """Runs harvests into one output directory with the local adapters."""

    def __init__(
        self,
        out_dir: Path,
        *,
        allow_loopback: bool = False,
        fetcher: Fetcher | None = None,
        progress: TextIO | None = None,
        max_attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.queue = InProcessQueue()
        self.catalog = SqliteCatalog(out_dir / CATALOG_FILE)
        self._own_fetcher = fetcher is None
        self.fetcher: Fetcher = fetcher or SafeFetcher(FetchPolicy(allow_loopback=allow_loopback))
        store = NotifyingObjectStore(
            DirectoryObjectStore(out_dir),
            self.queue,
            prefix=RECORDS_PREFIX,
            target=CROSSWALK_QUEUE,
        )
        self.ports = Ports(
            store=store,
            catalog=self.catalog,
            queue=self.queue,
            fetcher=self.fetcher,
            clock=SystemClock(),
        )
        # Crawl-delay from the robots.txt files the expander has read, per origin.
        self.ports.fetcher = PoliteFetcher(
            self.fetcher,
            self._crawl_delay,
            max_delay=self.ports.settings.max_crawl_delay,
            sleep=sleep,
        )
        self.progress = progress
        self.max_attempts = max_attempts
        self._attempts: Counter[str] = Counter()
        self._last_progress = 0.0

    def _crawl_delay(self, url: str) -> float | None:
        policy = self.ports.robots.get(origin_of(url))
        return policy.crawl_delay(self.ports.settings.robots_user_agent) if policy else None

    def close(self) -> None:
        """Release the catalogue and the fetcher's connections."""
        self.catalog.close()
        if self._own_fetcher and isinstance(self.fetcher, SafeFetcher):
            self.fetcher.close()

    def __enter__(self) -> LocalHarvester:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def harvest(self, entry_url: str) -> HarvestSummary:
        """Harvest a robots.txt, sitemap or page URL; write summary.json and outcomes.jsonl.

        Raises InvalidEntryUrl when the URL can never be harvested.
        """
        started = time.monotonic()
        job = start_harvest(self.ports, entry_url)
        summary = HarvestSummary(
            run_id=job.run_id,
            entry_url=job.url,
            started_at=self.ports.clock.now().isoformat(timespec="seconds"),
        )
        self._say(f"harvest {job.run_id}: {job.url} -> {self.out_dir}")
        views = 0
        while self.queue.pending():
            views += self._drain_crosswalk(summary)
            for name, contract, stage in _STAGES:
                body = self.queue.receive(name)
                if body is not None:
                    self._run(body, contract, stage)
                    break
            self._report_progress(job.run_id)
        outcomes = list(self.catalog.outcomes(job.run_id))
        self._finish(summary, outcomes, views, started)
        return summary

    def _run(self, body: str, contract: type[Any], stage: Callable[[Ports, Any], Any]) -> None:
        try:
            job = decode(body, contract)
        except ContractError as exc:  # our own queue: a broken message is a bug, say so
            raise RuntimeError(f"internal message broke its contract: {exc}") from exc
        try:
            run_job(self.ports, job, stage)
        except RetryableError as exc:
            self._attempts[body] += 1
            if self._attempts[body] < self.max_attempts:
                self.queue.send(self._queue_of(contract), [body])
            else:
                settle(self.ports, run_id=job.run_id, source=job.source, url=job.url, error=exc)
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the URL or stop the batch
            error = HarvestError(f"{type(exc).__name__}: {exc}", reason="internal-error")
            settle(self.ports, run_id=job.run_id, source=job.source, url=job.url, error=error)

    @staticmethod
    def _queue_of(contract: type[Any]) -> str:
        return next(name for name, kind, _ in _STAGES if kind is contract)

    def _drain_crosswalk(self, summary: HarvestSummary) -> int:
        made = 0
        while (body := self.queue.receive(CROSSWALK_QUEUE)) is not None:
            for key in keys_from_s3_event(json.loads(body)):
                try:
                    made += len(build_views(self.ports, key))
                except (HarvestError, KeyError) as exc:
                    summary.crosswalk_errors.append(f"{key}: {exc}")
        return made

    def _report_progress(self, run_id: str, *, force: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last_progress < 1.0:
            return
        self._last_progress = now
        done = Counter(o.outcome.value for o in self.catalog.outcomes(run_id))
        waiting = {name: self.queue.pending(name) for name, _, _ in _STAGES}
        counts = ", ".join(f"{k} {v}" for k, v in sorted(done.items())) or "-"
        self._say(
            f"  {sum(done.values())} URLs done ({counts}); "
            f"waiting: {waiting[SITEMAP_QUEUE]} sitemaps, {waiting[URL_QUEUE]} URLs, "
            f"{waiting[DOCUMENT_QUEUE] + waiting[INDEX_QUEUE]} documents"
        )

    def _finish(
        self, summary: HarvestSummary, outcomes: list[UrlOutcome], views: int, started: float
    ) -> None:
        counts = Counter(o.outcome.value for o in outcomes)
        summary.urls = len(outcomes)
        summary.outcomes = {kind.value: counts.get(kind.value, 0) for kind in Outcome}
        summary.patterns = dict(sorted(Counter(o.pattern for o in outcomes if o.pattern).items()))
        records = [r for o in outcomes for r in o.records]
        summary.records = len(records)
        summary.valid_records = sum(1 for r in records if r.valid)
        summary.invalid_records = summary.records - summary.valid_records
        summary.views = views
        summary.finished_at = self.ports.clock.now().isoformat(timespec="seconds")
        summary.elapsed_seconds = time.monotonic() - started
        lines = "".join(
            json.dumps(_outcome_line(o), ensure_ascii=False, sort_keys=True) + "\n"
            for o in outcomes
        )
        summary_text = json.dumps(summary.to_dict(), indent=2) + "\n"
        run_dir = self.out_dir / "runs" / summary.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.out_dir, run_dir):
            (folder / OUTCOMES_FILE).write_text(lines, encoding="utf-8")
            (folder / SUMMARY_FILE).write_text(summary_text, encoding="utf-8")
        # The hand-over objects served their purpose (on AWS a lifecycle rule expires them).
        staging = self.out_dir / "staging"
        shutil.rmtree(staging / summary.run_id, ignore_errors=True)
        if staging.is_dir() and not any(staging.iterdir()):
            staging.rmdir()
        self._report_progress(summary.run_id, force=True)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            print(text, file=self.progress, flush=True)


def _outcome_line(outcome: UrlOutcome) -> dict[str, Any]:
    data = outcome_to_dict(outcome)
    line = {key: data[key] for key in ("url", "outcome", "reason", "pattern", "records")}
    if outcome.outcome is Outcome.RECORD:
        line.pop("reason")
    return line


def default_progress() -> TextIO:
    """Progress goes to stderr so stdout stays machine-readable."""
    return sys.stderr
