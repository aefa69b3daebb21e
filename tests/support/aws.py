"""The stack of template.yaml in moto, for tests: :mod:`cdif_harvester.cli.moto_stack` with the
repository's template as the default (the product module reads ./template.yaml), and the
reading of a catalogue entry's record or report from the stack's bucket."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from cdif_harvester.adapters.aws import S3ObjectStore
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
from cdif_harvester.keys import parse_segment_ref

__all__ = [
    "ACCOUNT_ID",
    "CATALOG_TABLE_ID",
    "PROVISIONED_TYPES",
    "RECORDS_BUCKET_ID",
    "REGION",
    "STACK_NAME",
    "TEMPLATE_PATH",
    "ProvisionedStack",
    "Resolver",
    "SqsEventSource",
    "UnsupportedTemplate",
    "function_ids",
    "load_template",
    "mocked_stack",
    "object_of",
    "provision",
    "read_stored",
    "sqs_event",
]

TEMPLATE_PATH = Path(__file__).resolve().parents[2] / "template.yaml"


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
