"""The AWS composition root: configuration from the environment, adapters, batch processing.

Lambda handlers import from here and stay thin. Configuration is read and validated once per
cold start; boto3 clients and the idempotency machinery are built lazily on first use and cached;
:func:`wiring` builds the :class:`~cdif_harvester.wiring.Wiring` every stage takes, with the
Crawl-delay recorder writing to the host's gate item. Both batch handlers share one skeleton
(:func:`_process_batch`); each names only how one record is handled. Fetches go through the
DynamoDB host gate in ``defer`` mode (a deferred job is sent again with a message delay), and
Powertools idempotency keys each job on its work (:func:`work_key`), never on the SQS message id.
The outcomes a batch's jobs settle are written together when the batch ends, and the batch
logs one summary line (docs/decisions/0089-settle-once-per-batch.md); the messages they send
to the next stage are held too, and sent first, packed
(docs/decisions/0093-sends-once-per-batch.md).

See docs/decisions/0008-politeness-per-host.md,
docs/decisions/0007-idempotency-keyed-on-work.md and
docs/decisions/0043-state-on-the-wiring.md.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from cdif_harvester.adapters.batch_sends import BatchSends
from cdif_harvester.adapters.local import SystemClock
from cdif_harvester.contact import InvalidContact, user_agent
from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    INDEX_QUEUE,
    RENDER_QUEUE,
    SITEMAP_QUEUE,
    URL_QUEUE,
    DocumentJob,
    IndexJob,
    SitemapJob,
    UrlJob,
    decode,
)
from cdif_harvester.errors import (
    ContractError,
    Deferred,
    HarvestError,
    PermanentError,
    RetryableError,
)
from cdif_harvester.keys import staging_key
from cdif_harvester.settings import Settings
from cdif_harvester.stages.crosswalk import keys_from_s3_event
from cdif_harvester.stages.jobs import Jitter, give_up, retry_delay, run_job
from cdif_harvester.stages.outcomes import BatchOutcomes
from cdif_harvester.wiring import Wiring

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    from cdif_harvester.adapters.aws import SqsQueue
    from cdif_harvester.adapters.render import ChromiumRenderer

__all__ = [
    "AwsConfig",
    "ConfigError",
    "browser",
    "handle_s3_notifications",
    "handle_sqs_batch",
    "logger",
    "metrics",
    "wiring",
    "reset",
    "tracer",
    "tracing_on",
    "Untraced",
    "work_key",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class Untraced:
    """The tracer when tracing is off: its decorators return the function unchanged.

    Powertools' Tracer imports the X-Ray SDK and builds its recorder even when disabled, which
    costs every cold start; this stands in for it (docs/decisions/0078).
    """

    def capture_lambda_handler(self, function: _F) -> _F:
        """Return ``function`` unchanged."""
        return function

    def capture_method(self, function: _F) -> _F:
        """Return ``function`` unchanged."""
        return function


def tracing_on(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether X-Ray tracing is on: in Lambda (not SAM local), unless POWERTOOLS_TRACE_DISABLED.

    The same conditions as Powertools' own, so nothing changes where traces were written.
    """
    disabled = environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower()
    if disabled in ("1", "true", "yes", "on", "y", "t"):
        return False
    return bool(environ.get("LAMBDA_TASK_ROOT")) and not environ.get("AWS_SAM_LOCAL")


def _make_tracer() -> Untraced:
    """Powertools' Tracer (X-Ray SDK imported, clients patched) only when tracing is on."""
    if not tracing_on():
        return Untraced()
    from aws_lambda_powertools import Tracer  # noqa: PLC0415 - only when tracing is on

    # The same two decorators, typed as the stand-in's (Powertools' are untyped).
    return cast(Untraced, Tracer())


logger = Logger()
metrics = Metrics()
tracer = _make_tracer()

_J = TypeVar("_J")

#: How long a unit of work is remembered as done: the queues' message retention (4 days).
IDEMPOTENCY_SECONDS = 4 * 24 * 3600

#: Deliveries of one message before SQS dead-letters it: the queues' ``maxReceiveCount`` in
#: template.yaml (a unit test holds them equal). The last one settles a retryable failure.
MAX_RECEIVES = 5

#: Draws a retry's backoff within its bounds (:func:`~cdif_harvester.stages.jobs.retry_delay`).
retry_jitter: Jitter = random.uniform

#: Message attribute of a job sent again after Deferred: replay its fetch journal.
RESUME_ATTRIBUTE = "cdif-resume"

# The queue each job kind arrives on (a deferred job goes back to where it came from).
_QUEUE_OF: dict[type[Any], str] = {
    SitemapJob: SITEMAP_QUEUE,
    UrlJob: URL_QUEUE,
    DocumentJob: DOCUMENT_QUEUE,
    IndexJob: INDEX_QUEUE,
}

# The stage each job kind feeds: the ``Stage`` dimension of every metric and the ``stage`` log
# key (the same names as the functions' log groups, /aws/lambda/<stack>/<stage>).
_STAGE_OF: dict[type[Any], str] = {
    SitemapJob: "sitemap-expander",
    UrlJob: "url-resolver",
    DocumentJob: "extractor",
    IndexJob: "indexer",
}
# A stage fed by another queue than its contract's own: the renderer takes URL jobs.
_STAGE_OF_QUEUE: dict[str, str] = {RENDER_QUEUE: "renderer"}
CROSSWALK_STAGE = "crosswalk"


class ConfigError(RuntimeError):
    """The function's environment is missing a setting (a deployment error, not a data one)."""


@dataclass(frozen=True)
class AwsConfig:
    """Settings every function reads from its environment (see template.yaml)."""

    records_bucket: str
    catalog_table: str
    queue_urls: Mapping[str, str]
    allow_loopback: bool
    requests_per_host: int = Settings.requests_per_host
    requests_per_host_overrides: Mapping[str, int] | None = None
    trusted_contexts: tuple[str, ...] = ()
    idempotency_table: str | None = None
    shacl: bool = False
    # The operator's contact, named in the User-Agent (OPERATOR_CONTACT; the product's page
    # when empty).
    contact: str | None = None
    # KEEP_BODIES: keep documents under raw/ and answers under cache/ (Settings.keep_bodies).
    keep_bodies: bool = False
    # RECORD_SEGMENTS: the indexer writes a batch's records and reports as one segment
    # (Settings.record_segments). On by default on AWS, unlike locally (decision 0086).
    record_segments: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AwsConfig:
        """Read and validate the settings. Raises ConfigError naming every missing variable."""
        required = ["RECORDS_BUCKET", "CATALOG_TABLE"]
        missing = [name for name in required if not env.get(name)]
        if missing:
            raise ConfigError(f"missing environment variable(s): {', '.join(missing)}")
        queues = {
            SITEMAP_QUEUE: env.get("SITEMAP_QUEUE_URL", ""),
            URL_QUEUE: env.get("URL_QUEUE_URL", ""),
            DOCUMENT_QUEUE: env.get("DOCUMENT_QUEUE_URL", ""),
            INDEX_QUEUE: env.get("INDEX_QUEUE_URL", ""),
            # Set for the resolver (and the renderer itself) when a renderer stack is deployed.
            RENDER_QUEUE: env.get("RENDER_QUEUE_URL", ""),
        }
        try:
            per_host = int(env.get("REQUESTS_PER_HOST") or Settings.requests_per_host)
            overrides = _host_overrides(env.get("REQUESTS_PER_HOST_OVERRIDES", ""))
        except ValueError as exc:
            raise ConfigError(f"REQUESTS_PER_HOST(_OVERRIDES): {exc}") from exc
        if per_host < 1:
            raise ConfigError("REQUESTS_PER_HOST must be at least 1")
        contact = env.get("OPERATOR_CONTACT", "").strip() or None
        try:
            user_agent(contact)
        except InvalidContact as exc:
            raise ConfigError(f"OPERATOR_CONTACT: {exc}") from exc
        return cls(
            records_bucket=env["RECORDS_BUCKET"],
            catalog_table=env["CATALOG_TABLE"],
            queue_urls={name: url for name, url in queues.items() if url},
            allow_loopback=env.get("ALLOW_LOOPBACK", "false").lower() == "true",
            requests_per_host=per_host,
            requests_per_host_overrides=overrides,
            trusted_contexts=tuple(
                item.strip() for item in env.get("TRUSTED_CONTEXTS", "").split(",") if item.strip()
            ),
            idempotency_table=env.get("IDEMPOTENCY_TABLE") or None,
            # Needs pyshacl in the layer (the "shacl" extra); without it every record's
            # extraction fails with a clear, recorded reason.
            shacl=env.get("SHACL_VALIDATION", "false").lower() == "true",
            contact=contact,
            keep_bodies=env.get("KEEP_BODIES", "false").lower() == "true",
            # On unless "false" (empty or absent: the default, as in the template).
            record_segments=(env.get("RECORD_SEGMENTS") or "true").lower() == "true",
        )

    def settings(self) -> Settings:
        """The stage settings this configuration changes."""
        return replace(
            Settings(),
            requests_per_host=self.requests_per_host,
            requests_per_host_overrides=dict(self.requests_per_host_overrides or {}),
            trusted_contexts=self.trusted_contexts,
            shacl=self.shacl,
            keep_bodies=self.keep_bodies,
            record_segments=self.record_segments,
            render_queue=RENDER_QUEUE in self.queue_urls,
        )


def _host_overrides(text: str) -> dict[str, int]:
    """Parse ``host=N,https://other.example=N`` (optional; empty means none)."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition("=")
        if not sep or not host or int(count) < 1:
            raise ValueError(f"expected host=N with N >= 1, got {item!r}")
        overrides[host.strip()] = int(count)
    return overrides


# What the cached wiring opened and must close when it is forgotten (see reset()).
_closers: list[Callable[[], None]] = []


@cache
def wiring() -> Wiring:
    """Build (once per execution environment) the wiring of a Lambda function."""
    # Imported on first use, not at module import: keeps the handler's cold start light.
    import boto3  # noqa: PLC0415

    from cdif_harvester.adapters.aws import (  # noqa: PLC0415
        DynamoCatalog,
        DynamoHostGate,
        S3ObjectStore,
        SqsQueue,
    )
    from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher  # noqa: PLC0415
    from cdif_harvester.adapters.httpcache import RevalidatingFetcher  # noqa: PLC0415
    from cdif_harvester.adapters.politeness import GatedFetcher  # noqa: PLC0415

    config = AwsConfig.from_env(os.environ)
    settings = config.settings()
    table = boto3.resource("dynamodb").Table(config.catalog_table)
    store = S3ObjectStore(boto3.client("s3"), config.records_bucket)
    network = SafeFetcher(
        FetchPolicy(allow_loopback=config.allow_loopback, user_agent=user_agent(config.contact))
    )
    # A slot kept for a batch is renewed while its lease could lapse during one more fetch.
    gate = DynamoHostGate(
        table, lease=settings.host_slot_lease, renew_within=network.policy.total_timeout
    )
    _closers.append(network.close)
    fetcher = GatedFetcher(
        # Conditional requests for the answers kept under cache/ (an unchanged page: a 304):
        # robots.txt and sitemaps, and documents only when bodies are kept.
        RevalidatingFetcher(network, store),
        gate,
        slots_for=settings.slots_for,
        mode="defer",
        journal_store=store,
        max_retry_after=settings.max_retry_after,
    )
    catalog = DynamoCatalog(table)
    bundle = Wiring(
        store=store,
        catalog=catalog,
        queue=SqsQueue(boto3.client("sqs"), config.queue_urls),
        fetcher=fetcher,
        clock=SystemClock(),
        settings=settings,
        sources=catalog,
    )
    # A Crawl-delay read by the expander is recorded on the host's gate item, where every
    # resolver sees it.
    bundle.record_crawl_delay = lambda origin, policy: gate.set_interval(
        origin, settings.crawl_delay_of(policy)
    )
    return bundle


@cache
def browser() -> ChromiumRenderer:
    """The browser of the renderer function (built once per execution environment; Chromium
    starts at the first page and stays warm), answering its requests through
    :func:`wiring`'s fetcher under the function's address policy. Raises ConfigError."""
    from cdif_harvester.adapters.render import ChromiumRenderer  # noqa: PLC0415

    config = AwsConfig.from_env(os.environ)
    renderer = ChromiumRenderer(wiring().fetcher, allow_loopback=config.allow_loopback)
    _closers.append(renderer.close)
    return renderer


def handle_sqs_batch(
    event: dict[str, Any],
    context: Any,
    contract: type[_J],
    stage: Callable[[Wiring, _J], Any],
    *,
    queue: str | None = None,
    prepare: Callable[[Wiring, list[_J]], Callable[[Wiring, _J], Any]] | None = None,
) -> dict[str, Any]:
    """Run ``stage`` on every SQS record of ``event``, reporting partial batch failures.

    ``queue`` is the logical queue the records come from, when not their contract's own (the
    renderer's URL jobs come from ``render``): a deferred job goes back there, a retry is
    delayed there, and the metrics and logs name that queue's stage.

    ``prepare``, when given, sees every job of the batch that keeps its contract before any
    runs, and returns the stage to run on each instead of ``stage`` (the indexer writes a
    batch's records as one segment: :mod:`cdif_harvester.stages.segments`). When it raises,
    every record of the batch fails and is delivered again.

    A record whose body breaks its contract is logged and consumed (retrying cannot fix it);
    permanent errors become the URL's outcome; retryable errors fail only that record, which SQS
    redelivers and finally dead-letters. Raises ContractError when ``event`` is not an SQS
    event at all (a dict without ``Records`` is not an empty batch).

    The outcomes of the URL stages' jobs (not the expander's, whose sitemap is counted done
    after its outcome), and the messages they send, are written and sent together when the
    batch ends (:func:`_process_batch`).

    Every metric of the invocation carries the dimension ``Stage``; each job's outcome is
    counted in ``Outcomes`` (dimensions ``Stage`` and ``Outcome``); every log line of a job
    carries its ``run_id`` (also the correlation id), ``url`` and ``message_id``.
    """

    source = queue or _QUEUE_OF[contract]
    prepared: list[Callable[[Wiring, _J], Any] | Exception] = []

    def handle(bundle: Wiring, record: SQSRecord) -> _Processed | None:
        run = stage
        if prepare is not None:
            if not prepared:  # (the first record: the batch is prepared once, before any runs)
                try:
                    prepared.append(prepare(bundle, _jobs_of(event, contract)))
                except Exception as exc:
                    prepared.append(exc)
            if isinstance(prepared[0], Exception):
                logger.warning("batch not prepared; SQS redelivers it", error=str(prepared[0]))
                raise prepared[0]
            run = prepared[0]
        return _handle_job(bundle, record, contract, run, context, queue=source)

    name = _STAGE_OF_QUEUE.get(source) or _STAGE_OF.get(contract, contract.__name__)
    with _host_slots_per_batch(source):
        return _process_batch(event, context, name, handle, settle=contract is not SitemapJob)


@contextmanager
def _host_slots_per_batch(queue: str) -> Iterator[None]:
    """For the resolver (URL jobs), keep a slot taken on a host for the rest of the batch and
    give it back once at its end, errors included: one gate write each way per host and batch
    rather than per request (docs/decisions/0088-host-gate-per-batch.md)."""
    if queue != URL_QUEUE:
        yield
        return
    from cdif_harvester.adapters.politeness import keep_host_slots  # noqa: PLC0415

    with keep_host_slots():
        yield


def _jobs_of(event: dict[str, Any], contract: type[_J]) -> list[_J]:
    """The jobs of the SQS batch ``event`` whose bodies keep their contract."""
    jobs: list[_J] = []
    for record in event.get("Records", []):
        try:
            jobs.append(decode(str(record.get("body", "")), contract))
        except ContractError:  # logged and counted when its turn comes
            continue
    return jobs


def handle_s3_notifications(
    event: dict[str, Any], context: Any, stage: Callable[[Wiring, str], Any]
) -> dict[str, Any]:
    """Run ``stage`` on every object key of the S3 notifications carried by an SQS batch.

    A notification that names no record (the ``s3:TestEvent``, a key outside ``records/``) is
    logged and consumed. Metrics carry ``Stage=crosswalk``; every log line of a key carries it
    (``key``) and the SQS ``message_id``. Raises ContractError when ``event`` is not an SQS event.
    """

    def handle(bundle: Wiring, record: SQSRecord) -> _Processed | None:
        return _handle_notification(bundle, record, stage)

    return _process_batch(event, context, CROSSWALK_STAGE, handle)


@dataclass(frozen=True)
class _Processed:
    """A record its handler processed, the outcome it ended in (None: no outcome yet) and the
    run of its job."""

    outcome: str | None = None
    run_id: str | None = None


def _process_batch(
    event: dict[str, Any],
    context: Any,
    stage_name: str,
    handle: Callable[[Wiring, SQSRecord], _Processed | None],
    *,
    settle: bool = False,
) -> dict[str, Any]:
    """Run ``handle`` on every record of the SQS batch ``event`` for the stage ``stage_name``,
    and return the partial batch response.

    A record ``handle`` raised on is reported failed (SQS redelivers it); one it returned None
    for was consumed without being processed (it logged and counted why). With ``settle``, the
    messages the jobs send and the outcomes they settle are held, and sent and written together
    once every record was handled (:class:`~cdif_harvester.adapters.batch_sends.BatchSends`,
    :class:`~cdif_harvester.stages.outcomes.BatchOutcomes`); the records whose messages could
    not be sent (their outcomes then dropped) or whose outcomes could not be written are
    reported failed too. Each processed record counts in ``JobsProcessed``,
    its outcome in ``Outcomes``; the batch counts in ``Batches`` and its failed records in
    ``JobsFailed``, and logs one summary line. Raises ContractError when ``event`` is not an
    SQS event.
    """
    _label_stage(stage_name)
    _require_sqs_event(event)
    processor = BatchProcessor(event_type=EventType.SQS)
    # Powertools idempotency remembers a job done when its stage returns: an outcome still held
    # would be lost if the batch's end failed (the redelivery is answered without running), so
    # with an idempotency table each job settles its own outcome, as before; and its hand-over.
    held = BatchOutcomes() if settle and _idempotency_store() is None else None
    sends = None if held is None else _batch_sends(wiring())
    bundle = wiring() if sends is None else replace(wiring(), outcomes=held, queue=sends)
    done: dict[str, _Processed] = {}  # by message id
    unsettled: set[str] = set()

    def record_handler(record: SQSRecord) -> None:
        with ExitStack() as scope:
            for sink in (held, sends):
                if sink is not None:
                    scope.enter_context(sink.job(record.message_id))
            processed = handle(bundle, record)
        if processed is not None:
            done[record.message_id] = processed

    metrics.add_metric(name="Batches", unit=MetricUnit.Count, value=1)
    try:
        response: dict[str, Any] = dict(
            process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        )
        if held is not None and sends is not None:
            unsettled = _settle_batch(bundle, held, sends)
            response["batchItemFailures"] = [
                *response["batchItemFailures"],
                *({"itemIdentifier": key} for key in sorted(unsettled)),
            ]
    finally:
        failed = len(processor.fail_messages) + len(unsettled)
        kept = [item for key, item in done.items() if key not in unsettled]
        _count_batch(stage_name, kept, failed)
    return response


def _batch_sends(base: Wiring) -> BatchSends:
    """The job queue of one batch: holds its jobs' messages, sent in packs as SQS takes them."""
    from cdif_harvester.adapters.aws import SQS_BATCH_ENTRIES, SQS_REQUEST_BYTES  # noqa: PLC0415

    return BatchSends(base.queue, entries=SQS_BATCH_ENTRIES, request_bytes=SQS_REQUEST_BYTES)


def _settle_batch(bundle: Wiring, held: BatchOutcomes, sends: BatchSends) -> set[str]:
    """Send the messages ``sends`` holds for the batch, then write the outcomes ``held`` but
    those of the records whose messages could not be sent; the message ids of the records
    whose messages or outcomes failed (SQS redelivers them, and they hand over and settle
    again, counted once)."""
    unsettled: set[str] = set()
    for unsent in sends.flush():
        logger.append_keys(message_id=None, run_id=None, url=None)
        logger.set_correlation_id(None)
        logger.warning(
            "messages not sent; SQS redelivers their jobs",
            queue=unsent.queue,
            jobs=len(unsent.keys),
            error=str(unsent.error),
        )
        unsettled |= unsent.keys
    held.drop(unsettled)
    for failure in held.flush(bundle):
        logger.append_keys(message_id=None, run_id=failure.run_id, url=None)
        logger.set_correlation_id(failure.run_id)
        logger.warning(
            "outcomes not written; SQS redelivers their jobs",
            jobs=len(failure.keys),
            error=str(failure.error),
        )
        unsettled |= failure.keys
    return unsettled


def _handle_job(
    bundle: Wiring,
    record: SQSRecord,
    contract: type[_J],
    stage: Callable[[Wiring, _J], Any],
    context: Any,
    *,
    queue: str,
) -> _Processed | None:
    """Decode one job (received from ``queue``) and run its stage, once per unit of work
    (:func:`work_key`).

    Returns None for a record consumed without being run: it breaks its contract, or its host
    cannot take a request now (Deferred: the job is sent again, delayed). Errors get the verdict
    the local runner gives them (:func:`~cdif_harvester.stages.jobs.verdict`): a deterministic
    one is the URL's outcome at once (``run_job``); a RetryableError is raised (after asking SQS
    to hold the record for the backoff the local runner would wait, or its ``Retry-After``:
    :func:`~cdif_harvester.stages.jobs.retry_delay`) for SQS to redeliver it, except on its last
    delivery
    (:data:`MAX_RECEIVES`), when it becomes the URL's ``failed`` outcome instead of a
    dead-letter. A transient error of no known kind is raised on every delivery.
    """
    # The keys of the batch's previous record must not leak into this record's lines.
    logger.append_keys(message_id=record.message_id, run_id=None, url=None)
    logger.set_correlation_id(None)
    try:
        job = decode(record.body, contract)
    except ContractError as exc:
        logger.error("message breaks its contract", error=str(exc))
        metrics.add_metric(name="BadMessages", unit=MetricUnit.Count, value=1)
        return None
    run_id = getattr(job, "run_id", None)
    logger.append_keys(run_id=run_id, url=getattr(job, "url", None))
    # The run id is the correlation id: one filter follows a harvest through every stage.
    logger.set_correlation_id(run_id)
    resume = record.message_attributes.get(RESUME_ATTRIBUTE) is not None

    def run() -> dict[str, Any]:
        result = run_job(bundle, job, stage, resume=resume)  # type: ignore[type-var]
        return {"outcome": str(getattr(result, "outcome", "") or "") or None}

    try:
        done = _run_once(run, work_key(job), context)
    except Deferred as deferred:
        _send_again(bundle, queue, record, deferred.delay)
        logger.info("job deferred (politeness)", delay=deferred.delay, reason=str(deferred))
        metrics.add_metric(name="Deferred", unit=MetricUnit.Count, value=1)
        return None
    except RetryableError as error:
        if _receives(record) >= MAX_RECEIVES:  # the last try: the URL ends failed, not lost
            logger.warning("job failed on its last delivery", error=str(error))
            settled = give_up(bundle, job, error)  # type: ignore[type-var]
            return _Processed(settled.outcome.value, run_id)
        delay = retry_delay(
            _receives(record), error.retry_after, bundle.settings, jitter=retry_jitter
        )
        logger.warning(
            "job failed; SQS redelivers it",
            error=str(error),
            retry_after=error.retry_after,
            retry_in=delay,
        )
        _retry_later(bundle, queue, record, delay, asked=error.retry_after is not None)
        raise
    except Exception:  # a transient fault no adapter mapped (run_job settled the rest)
        logger.exception("job failed unexpectedly; SQS redelivers it")
        raise
    return _Processed(done.get("outcome"), run_id)


def _receives(record: SQSRecord) -> int:
    """How many times SQS has delivered ``record`` (1 on the first delivery)."""
    try:
        return int(record.attributes.approximate_receive_count or 1)
    except (TypeError, ValueError):
        return 1


def _handle_notification(
    bundle: Wiring, record: SQSRecord, stage: Callable[[Wiring, str], Any]
) -> _Processed | None:
    """Run the crosswalk on every record an S3 notification names.

    Returns None for a body that is not JSON (logged). A key whose record cannot be crosswalked
    (PermanentError) is logged and skipped; any other error is raised, for SQS to redeliver the
    notification.
    """
    logger.append_keys(message_id=record.message_id, key=None)
    try:
        notification = json.loads(record.body)
    except ValueError:
        logger.error("notification is not JSON")
        return None
    keys = keys_from_s3_event(notification)
    if not keys:  # the s3:TestEvent sent when the notification was set up
        event_name = notification.get("Event") if isinstance(notification, dict) else None
        logger.info("notification names no object", event=event_name)
    for key in keys:
        logger.append_keys(key=key)
        try:
            stage(bundle, key)
        except PermanentError as exc:
            logger.warning("record not crosswalked", error=str(exc))
            continue
        except Exception:
            logger.exception("crosswalk failed; SQS redelivers the notification")
            raise
    return _Processed()


def _label_stage(stage_name: str) -> None:
    """Name the stage on every metric of this invocation and on every log line.

    A function runs one stage, so a dimension that holds for the whole invocation is right;
    Powertools clears it with the other dimensions when ``log_metrics`` flushes.
    """
    metrics.add_dimension(name="Stage", value=stage_name)
    logger.append_keys(stage=stage_name)


def _count_batch(stage_name: str, done: list[_Processed], failed: int) -> None:
    """Emit the batch's processed and failed records and its outcomes, one EMF document per
    outcome kind, and log them in one line (the run's id its correlation id when every job of
    the batch was of one run; warnings and errors stay per job).

    ``Outcomes`` needs a dimension (``Outcome``) that differs between the records of one batch,
    which the invocation's shared dimension set cannot hold: each kind gets its own document.
    """
    outcomes = Counter(item.outcome for item in done if item.outcome is not None)
    runs = sorted({item.run_id for item in done if item.run_id is not None})
    # The keys of the batch's last record must not be this line's.
    logger.append_keys(message_id=None, run_id=None, url=None, key=None)
    logger.set_correlation_id(runs[0] if len(runs) == 1 else None)
    logger.info(
        "batch done", jobs=len(done), outcomes=dict(sorted(outcomes.items())), failed=failed
    )
    if done:
        metrics.add_metric(name="JobsProcessed", unit=MetricUnit.Count, value=len(done))
    metrics.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=failed)
    for outcome, count in sorted(outcomes.items()):
        with single_metric(
            name="Outcomes",
            unit=MetricUnit.Count,
            value=count,
            namespace=metrics.namespace,
            default_dimensions=dict(metrics.default_dimensions),
        ) as metric:
            metric.add_dimension(name="Stage", value=stage_name)
            metric.add_dimension(name="Outcome", value=outcome)


def work_key(job: Any) -> str:
    """What defines a job's work: its kind and the fields that say what it does (not the
    message it came in), e.g. ``url-job|<run id>|<url>``."""
    kind = getattr(job, "KIND", type(job).__name__)
    if isinstance(job, SitemapJob):
        parts = [job.run_id, job.url, str(job.offset), job.body_key or ""]
    elif isinstance(job, DocumentJob):
        parts = [job.run_id, job.url, *(ref.key for ref in job.documents)]
    elif isinstance(job, IndexJob):
        # (the staging key names the run and URL whether or not the records were staged there)
        parts = [job.run_id, job.staged_key or staging_key(job.run_id, job.url)]
    else:
        parts = [str(getattr(job, "run_id", "")), str(getattr(job, "url", ""))]
    return "|".join([kind, *parts])


def _run_once(run: Callable[[], dict[str, Any]], key: str, context: Any) -> dict[str, Any]:
    """Run ``run`` once per ``key`` (Powertools idempotency), or simply run it when no
    idempotency table is configured (the template's default: a redelivery runs again, and the
    stages' writes are idempotent; docs/decisions/0087). Raises what ``run`` raises (and then
    nothing is remembered: the work runs again)."""
    idempotency = _once()
    if idempotency is None:
        return run()
    # The configuration outlives the invocation; the context it reads (how long this invocation
    # has left, which bounds a unit of work "in progress") is this invocation's.
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        idempotency.config.register_lambda_context(context)
    else:
        idempotency.config.lambda_context = None
    return idempotency.once(work={"work": key}, run=run)


@dataclass(frozen=True)
class _Idempotency:
    """Powertools' idempotency configuration and the function it makes idempotent."""

    config: IdempotencyConfig
    once: Callable[..., dict[str, Any]]


def reset() -> None:
    """Forget the cached execution environment (wiring, idempotency store and configuration):
    the next call builds them again from the environment, as a cold start would."""
    # The connections the forgotten environment pooled are closed, not leaked: a frozen Lambda
    # environment never gets here, but every simulated cold start in the tests does.
    while _closers:
        _closers.pop()()
    wiring.cache_clear()
    browser.cache_clear()
    _once.cache_clear()
    _idempotency_store.cache_clear()


@cache
def _once() -> _Idempotency | None:
    """Build (once per execution environment) the idempotent runner of a unit of work; None
    when no idempotency table is configured. Raises ConfigError for an incomplete environment."""
    persistence = _idempotency_store()
    if persistence is None:
        return None
    from aws_lambda_powertools.utilities.idempotency import (  # noqa: PLC0415
        IdempotencyConfig,
        idempotent_function,
    )

    config = IdempotencyConfig(event_key_jmespath="work", expires_after_seconds=IDEMPOTENCY_SECONDS)

    # Powertools names each remembered unit of work after this function's module and qualified
    # name (cdif_harvester.aws_runtime._once.<locals>.once): renaming either would make every
    # unit of work remembered by the deployed version run again.
    # (Powertools' decorator is not typed; the function's own signature is.)
    @idempotent_function(  # type: ignore[untyped-decorator]
        data_keyword_argument="work", persistence_store=persistence, config=config
    )
    def once(work: dict[str, str], run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return run()

    return _Idempotency(config=config, once=once)


@cache
def _idempotency_store() -> Any:
    """The idempotency table's persistence layer (None when no table is configured)."""
    table = AwsConfig.from_env(os.environ).idempotency_table
    if not table:
        return None
    from aws_lambda_powertools.utilities.idempotency import (  # noqa: PLC0415
        DynamoDBPersistenceLayer,
    )

    return DynamoDBPersistenceLayer(table_name=table)


def _send_again(bundle: Wiring, queue: str, record: SQSRecord, delay: float) -> None:
    """Put a deferred job back on ``queue``, delayed, marked to resume from its journal."""
    # (sent now, not held with the batch's: the record is consumed only once it is sent)
    sqs = _sqs_of(bundle)
    if sqs is not None:
        sqs.send_later(queue, record.body, delay=delay, attributes={RESUME_ATTRIBUTE: "1"})
    else:  # a queue without attributes: the job then starts afresh, which is slower, not wrong
        bundle.queue.send(queue, [record.body], delays=[min(900, math.ceil(delay))])


def _sqs_of(bundle: Wiring) -> SqsQueue | None:
    """The SQS queue behind ``bundle``'s (the batch's held sends wrap it), when it is one."""
    from cdif_harvester.adapters.aws import SqsQueue  # noqa: PLC0415

    queue = bundle.queue.queue if isinstance(bundle.queue, BatchSends) else bundle.queue
    return queue if isinstance(queue, SqsQueue) else None


def _retry_later(
    bundle: Wiring, queue: str, record: SQSRecord, delay: float, *, asked: bool
) -> None:
    """Have SQS redeliver a failed record only after ``delay`` seconds (its backoff, or the
    Retry-After the answer ``asked`` for) rather than after the queue's visibility timeout."""
    sqs = _sqs_of(bundle)
    if sqs is None:
        return
    try:
        sqs.retry_later(queue, record.receipt_handle, delay=delay)
        metrics.add_metric(
            name="RetryAfter" if asked else "RetryBackoff", unit=MetricUnit.Count, value=1
        )
    except HarvestError as exc:  # the record still fails; SQS redelivers it after its timeout
        logger.warning("could not delay the retry", error=str(exc))


def _require_sqs_event(event: Any) -> None:
    """Refuse an event that is not an SQS batch (a dict without Records is not an empty batch)."""
    if not isinstance(event, dict) or not isinstance(event.get("Records"), list):
        metrics.add_metric(name="BadEvents", unit=MetricUnit.Count, value=1)
        raise ContractError("not an SQS event: no Records list")
