"""Runs the real Lambda handlers of every stage against a moto stack made from template.yaml."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.aws import ProvisionedStack
from tests.support.lambda_driver import FakeLambdaContext, Handler, PumpStats, Route, pump

# The order in which a driver offers work: later stages first, as the local runner does.
STAGE_FUNCTIONS = [
    "CrosswalkFunction",
    "IndexerFunction",
    "ExtractorFunction",
    "UrlResolverFunction",
    "SitemapExpanderFunction",
]


@contextmanager
def function_environment(
    stack: ProvisionedStack, function: str, **overrides: str
) -> Iterator[None]:
    """Give the process exactly the environment ``function`` has on Lambda (plus overrides), and
    a fresh execution environment (the cached wiring is rebuilt)."""
    from cdif_harvester import aws_runtime

    saved = dict(os.environ)
    os.environ.update(stack.function_env(function))
    os.environ.update(overrides)
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    aws_runtime.reset()
    # Powertools reads these when the module is first imported, i.e. at a Lambda cold start;
    # one test process hosts every function, so give each its own, as separate processes would.
    aws_runtime.metrics.namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE")
    aws_runtime.metrics.service = os.environ.get("POWERTOOLS_SERVICE_NAME")
    try:
        yield
    finally:
        aws_runtime.reset()
        os.environ.clear()
        os.environ.update(saved)


def handler_of(stack: ProvisionedStack, function: str) -> Callable[..., dict[str, Any]]:
    """Import the handler module of ``function`` from its CodeUri (functions/<stage>/app.py)."""
    package = stack.code_uris[function].strip("/").replace("/", ".")
    module = importlib.import_module(f"{package}.app")
    handler: Callable[..., dict[str, Any]] = module.handler
    return handler


def invoke(
    stack: ProvisionedStack, function: str, event: dict[str, Any], **overrides: str
) -> dict[str, Any]:
    """Invoke one function's handler with ``event`` in that function's environment."""
    with function_environment(stack, function, **overrides):
        return handler_of(stack, function)(event, FakeLambdaContext(function_name=function))


def routes(stack: ProvisionedStack, **overrides: str) -> list[Route]:
    """One route per SQS-fed stage: its queue, its handler in its own environment, and the batch
    size of its event source mapping in the template."""
    result = []
    for function in STAGE_FUNCTIONS:
        source = stack.sqs_event_sources[function]

        def run(event: dict[str, Any], context: Any, _function: str = function) -> dict[str, Any]:
            return invoke(stack, _function, event, **overrides)

        handler: Handler = run
        result.append(
            Route(
                source.queue_url,
                source.queue_arn,
                handler,
                name=function,
                batch_size=source.batch_size,
            )
        )
    return result


def run_pipeline(sqs: Any, stack: ProvisionedStack, **overrides: str) -> PumpStats:
    """Deliver every queued message to its stage until all queues are empty."""
    return pump(sqs, routes(stack, **overrides))
