"""The stack of template.yaml in moto, for tests: :mod:`cdif_harvester.cli.moto_stack` with the
repository's template as the default (the product module reads ./template.yaml)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

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
    "provision",
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
