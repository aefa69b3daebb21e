"""The two composition roots: what they build, and how often.

``aws_runtime`` builds a Lambda function's wiring and, when the stack has the idempotency table
(docs/decisions/0087-no-idempotency-table-by-default.md), its idempotency machinery once per
execution environment (a cold start), not once per record; ``local_runtime`` builds the same
ports for a harvest on one machine, so that the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester import aws_runtime, local_runtime
from cdif_harvester.contracts import UrlJob, encode
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.local_runtime import LocalConfig
from cdif_harvester.wiring import Wiring
from tests.support.aws import ProvisionedStack, mocked_stack, sqs_event
from tests.support.lambda_driver import FakeLambdaContext
from tests.support.pipeline import function_environment, handler_of

pytestmark = [pytest.mark.aws, pytest.mark.network]

RESOLVER = "UrlResolverFunction"
PAGES = [
    "/datasets/glider-mission-notes.html",  # no metadata
    "/datasets/retired-mooring-2009.html",  # gone: failed
    "/datasets/kelp-forest-survey.html",  # handed to the extractor
]
PORTS = {"store", "catalog", "queue", "fetcher", "clock", "settings", "robots", "sources"}
BUILDERS = ("IdempotencyConfig", "idempotent_function", "DynamoDBPersistenceLayer")


@pytest.fixture
def remembering() -> Iterator[ProvisionedStack]:
    """The stack of template.yaml with the idempotency table asked for."""
    with mocked_stack(parameters={"IdempotencyTableEnabled": "true"}) as stack:
        yield stack


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each piece of Powertools' idempotency is constructed while the test runs."""
    from aws_lambda_powertools.utilities import idempotency

    counts: Counter[str] = Counter()

    def counting(name: str, build: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return build(*args, **kwargs)

        return counted

    for name in BUILDERS:
        monkeypatch.setattr(idempotency, name, counting(name, getattr(idempotency, name)))
    return counts


def _batch(stack: ProvisionedStack, site: PublisherSite, run_id: str, count: int) -> Any:
    """An SQS event of ``count`` URL jobs of ``run_id``, as Lambda would deliver it."""
    sqs = boto3.client("sqs", region_name=stack.region)
    source = stack.sqs_event_sources[RESOLVER]
    for path in PAGES[:count]:
        job = UrlJob(run_id=run_id, source="127.0.0.1", url=site.url(path))
        sqs.send_message(QueueUrl=source.queue_url, MessageBody=encode(job))
    messages: list[dict[str, Any]] = []
    while received := sqs.receive_message(
        QueueUrl=source.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(received)
    assert len(messages) == count
    return sqs_event(messages, source.queue_arn)


def _remembered(stack: ProvisionedStack) -> list[str]:
    """The ids of the units of work the idempotency table remembers."""
    table = stack.function_env(RESOLVER)["IDEMPOTENCY_TABLE"]
    items = boto3.resource("dynamodb", region_name=stack.region).Table(table).scan()["Items"]
    return [str(item["id"]) for item in items]


def test_idempotency_is_built_once_per_execution_environment(
    remembering: ProvisionedStack, site: PublisherSite, built: Counter[str]
) -> None:
    stack = remembering
    context = FakeLambdaContext(function_name=RESOLVER)
    with function_environment(stack, RESOLVER, ALLOW_LOOPBACK="true"):
        handler = handler_of(stack, RESOLVER)

        # Two batches in one execution environment: built for the first record, then reused
        assert handler(_batch(stack, site, "run-one", 3), context) == {"batchItemFailures": []}
        assert handler(_batch(stack, site, "run-two", 2), context) == {"batchItemFailures": []}
        assert built == dict.fromkeys(BUILDERS, 1)

        # A cold start builds it again, once
        aws_runtime.reset()
        assert handler(_batch(stack, site, "run-three", 2), context) == {"batchItemFailures": []}
        assert built == dict.fromkeys(BUILDERS, 2)

    # Every job was still run under idempotency: each unit of work is remembered
    assert len(_remembered(stack)) == 3 + 2 + 2


def test_remembered_work_keeps_its_key(remembering: ProvisionedStack, site: PublisherSite) -> None:
    """Powertools names a remembered unit of work after the decorated function (module and
    qualified name): renaming it would make every job of a deployment in flight run again."""
    stack = remembering
    context = FakeLambdaContext(function_name=RESOLVER)
    with function_environment(stack, RESOLVER, ALLOW_LOOPBACK="true"):
        handler_of(stack, RESOLVER)(_batch(stack, site, "run-key", 1), context)
    (key,) = _remembered(stack)
    assert key.startswith("test-func.cdif_harvester.aws_runtime._once.<locals>.once#"), key


def test_without_the_table_no_idempotency_is_built(
    stack: ProvisionedStack, site: PublisherSite, built: Counter[str]
) -> None:
    # The stack as deployed by default: every job simply runs (the stages' writes are idempotent)
    context = FakeLambdaContext(function_name=RESOLVER)
    with function_environment(stack, RESOLVER, ALLOW_LOOPBACK="true"):
        handler = handler_of(stack, RESOLVER)
        assert handler(_batch(stack, site, "run-plain", 3), context) == {"batchItemFailures": []}
    assert not built
    assert "IDEMPOTENCY_TABLE" not in {k for k, v in stack.function_env(RESOLVER).items() if v}


def _filled(bundle: Wiring) -> set[str]:
    """The parts of a wiring its root filled (a part left None is not wired)."""
    return {part.name for part in fields(Wiring) if getattr(bundle, part.name) is not None}


def test_both_roots_fill_the_same_ports(stack: ProvisionedStack, tmp_path: Path) -> None:
    with function_environment(stack, RESOLVER):
        on_aws = _filled(aws_runtime.wiring())
    local = local_runtime.wiring(tmp_path, LocalConfig())
    try:
        on_one_machine = _filled(local.wiring)
    finally:
        local.close()

    # The one difference: a page is rendered in process locally, while on AWS rendering is the
    # renderer function's, fed by its own queue (docs/decisions/0075), so no renderer is wired.
    assert on_one_machine - on_aws == {"renderer"}
    assert on_aws <= on_one_machine
    assert on_aws >= PORTS


def test_forgetting_the_aws_environment_closes_its_connections(
    stack: ProvisionedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdif_harvester.adapters.http import SafeFetcher

    closed: list[SafeFetcher] = []
    close = SafeFetcher.close

    def counted(self: SafeFetcher) -> None:
        closed.append(self)
        close(self)

    monkeypatch.setattr(SafeFetcher, "close", counted)
    with function_environment(stack, RESOLVER):
        aws_runtime.wiring()
        aws_runtime.wiring()  # cached: one fetcher per environment
        aws_runtime.reset()
        assert len(closed) == 1
        aws_runtime.reset()  # nothing left to close
    assert len(closed) == 1
