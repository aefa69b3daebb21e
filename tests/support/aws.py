"""The stack of template.yaml in moto, for tests: :mod:`cdif_harvester.cli.moto_stack` with the
repository's template as the default (the product module reads ./template.yaml), and the
reading of a catalogue entry's record or report from the stack's bucket."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3

from cdif_harvester.adapters.aws import DynamoCatalog, S3ObjectStore
from cdif_harvester.cli import moto_stack
from cdif_harvester.cli.moto_stack import (
    ACCOUNT_ID,
    CATALOG_TABLE_ID,
    PROVISIONED_TYPES,
    RECORDS_BUCKET_ID,
    REGION,
    STACK_NAME,
    ProvisionedStack,
    Resolver,
    SqsEventSource,
    Template,
    UnsupportedTemplate,
    function_ids,
    sqs_event,
)
from cdif_harvester.contracts import IndexJob, UrlJob, decode_staged, encode, encode_staged
from cdif_harvester.keys import parse_segment_ref
from cdif_harvester.model import RunStatus

__all__ = [
    "ACCOUNT_ID",
    "CATALOG_TABLE_ID",
    "GOLDEN_STAGED",
    "PROVISIONED_TYPES",
    "RECORDS_BUCKET_ID",
    "REGION",
    "STACK_NAME",
    "TEMPLATE_PATH",
    "ProvisionedStack",
    "Resolver",
    "SqsEventSource",
    "UnsupportedTemplate",
    "catalog_of",
    "function_ids",
    "golden_index_jobs",
    "load_template",
    "mocked_stack",
    "object_of",
    "provision",
    "read_stored",
    "session_hooks",
    "sqs_event",
    "waiting_url_jobs",
]

TEMPLATE_PATH = Path(__file__).resolve().parents[2] / "template.yaml"
#: A golden extractor hand-over: records and reports of one page (tests/unit/golden).
GOLDEN_STAGED = (
    Path(__file__).resolve().parents[1] / "unit" / "golden" / "staged" / "v1.staged.json"
)


def load_template(path: Path = TEMPLATE_PATH) -> Template:
    """The template at ``path`` (the repository's by default) as plain data."""
    return moto_stack.load_template(path)


def provision(
    template_path: Path = TEMPLATE_PATH,
    *,
    stack_name: str = STACK_NAME,
    account_id: str = ACCOUNT_ID,
    region: str = REGION,
    parameters: Mapping[str, str] | None = None,
) -> ProvisionedStack:
    """:func:`cdif_harvester.cli.moto_stack.provision` of the repository's template."""
    return moto_stack.provision(
        template_path,
        stack_name=stack_name,
        account_id=account_id,
        region=region,
        parameters=parameters,
    )


@contextmanager
def mocked_stack(
    template_path: Path = TEMPLATE_PATH, *, parameters: Mapping[str, str] | None = None
) -> Iterator[ProvisionedStack]:
    """:func:`cdif_harvester.cli.moto_stack.mocked_stack` of the repository's template."""
    with moto_stack.mocked_stack(template_path, parameters=parameters) as stack:
        yield stack


def object_of(ref: str) -> str:
    """The key of the bucket object that holds ``ref``, a catalogue entry's ``record_key`` or
    ``report_key``: the key itself, or the segment it names a range of
    (docs/decisions/0086-record-segments.md)."""
    ranged = parse_segment_ref(ref)
    return ranged[0] if ranged else ref


def read_stored(stack: ProvisionedStack, ref: str) -> bytes:
    """The bytes ``ref`` names in the stack's bucket, read as the product reads them (one GET,
    ranged for a segment reference)."""
    client = boto3.client("s3", region_name=stack.region)
    return S3ObjectStore(client, stack.bucket_name).get(ref)


@contextmanager
def session_hooks(hooks: Sequence[tuple[str, Callable[..., Any]]]) -> Iterator[None]:
    """Register ``hooks`` (botocore event name, handler) on boto3's default session for the
    ``with`` block: every client built meanwhile (the handlers' own) copies them. Call it once
    a moto mock has started, as the mock replaces the default session."""
    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    events = session._session  # the botocore session whose emitter every new client copies
    for name, hook in hooks:
        events.register(name, hook)
    try:
        yield
    finally:
        for name, hook in hooks:
            events.unregister(name, hook)


def own_index_urls(stack: ProvisionedStack, source: str) -> set[str]:
    """The URLs of ``source`` that their LATEST items' own ``gsi1`` entries list (decision
    0102: a URL one of whose record entries names it has none)."""
    table = boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    items = table.query(
        IndexName="gsi1",
        KeyConditionExpression="gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
        ExpressionAttributeValues={":pk": f"SOURCE#{source}", ":prefix": "URL#"},
    )["Items"]
    return {str(item["url"]) for item in items}


def catalog_of(stack: ProvisionedStack) -> DynamoCatalog:
    """The DynamoDB catalogue of ``stack`` (its table, as the handlers see it)."""
    return DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )


def golden_index_jobs(run_id: str, source: str, count: int) -> list[IndexJob]:
    """``count`` index jobs of ``https://<source>/page-<n>``, each carrying the golden
    hand-over's records in its message, renamed for its page (ids ``<id>-<n>``, names
    ``Page <n>``) so that no two jobs write the same record."""
    golden = decode_staged(GOLDEN_STAGED.read_bytes())
    jobs = []
    for n in range(count):
        url = f"https://{source}/page-{n}"
        records = []
        for item in golden.records:
            record = copy.deepcopy(item.record)
            if record is not None:
                record["schema:name"] = f"Page {n}"
            records.append(replace(item, record_id=f"{item.record_id}-{n}", record=record))
        staged = replace(golden, url=url, records=tuple(records))
        jobs.append(
            IndexJob(
                run_id=run_id,
                source=source,
                url=url,
                pattern="embedded-script",
                staged=encode_staged(staged).decode("utf-8"),
            )
        )
    return jobs


def waiting_url_jobs(
    stack: ProvisionedStack,
    urls: Sequence[str],
    *,
    run_id: str,
    entry_url: str,
    started_at: str,
    source: str,
) -> DynamoCatalog:
    """A tracked run that ``urls`` entered, their URL jobs waiting on the resolver's queue;
    returns the stack's catalogue."""
    catalog = catalog_of(stack)
    catalog.start_run(RunStatus(run_id=run_id, entry_urls=(entry_url,), started_at=started_at))
    catalog.enter_urls(run_id, urls, step="test")
    sqs = boto3.client("sqs", region_name=stack.region)
    queue = stack.sqs_event_sources["UrlResolverFunction"].queue_url
    for url in urls:
        sqs.send_message(
            QueueUrl=queue, MessageBody=encode(UrlJob(run_id=run_id, source=source, url=url))
        )
    return catalog
