"""``cdif-harvest invoke FUNCTION --event FILE``: run one Lambda handler locally, without Docker.

The queues, buckets and tables of ``template.yaml`` are made in moto (:mod:`.moto_stack`), the
function gets the environment Lambda would give it, its handler (``Handler`` in its ``CodeUri``)
runs once with the event, and a JSON document on stdout tells its result and what it wrote:
objects put, messages sent, items written; its own logs go to stderr. ``--put KEY=FILE`` and
``--before FUNCTION=FILE`` prepare the stack: objects to hold, events to handle first.

The handler may reach loopback addresses only (a local publisher, or the bundled demo site with
``--demo-site``, which stands in for the event files' publisher ``https://data.example.org``);
``--allow-network`` lifts that, and the harvester's network policy then applies as on Lambda.

Exit status: 0 when the handler returned (whatever its result), 1 when it raised, 2 for usage
errors (no such function, an unreadable event, moto missing). See
docs/decisions/0073-handlers-without-docker-and-the-aws-extra.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import ipaddress
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["COMMAND", "EVENT_PUBLISHER", "INSTALL_HINT", "add_parser", "run"]

COMMAND = "invoke"

#: The publisher the event files of infrastructure/events/ name; ``--demo-site`` serves it.
EVENT_PUBLISHER = "https://data.example.org"

INSTALL_HINT = (
    "cdif-harvest invoke needs boto3 and Powertools (the 'aws' extra) and moto and PyYAML "
    "(the 'dev' extra); in a checkout of the harvester: pip install -e '.[aws,dev]'"
)

# What must be importable; the distribution to name when it is not.
_NEEDED = {
    "boto3": "boto3",
    "aws_lambda_powertools": "aws-lambda-powertools",
    "moto": "moto",
    "yaml": "PyYAML",
}

# Fake credentials: moto needs some, and none of the user's may ever be read.
_FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
}


def add_parser(commands: Any) -> None:
    """Add the ``invoke`` subcommand to ``commands`` (the subparsers of the main parser)."""
    parser = commands.add_parser(
        COMMAND,
        help="run one Lambda handler with an event against moto (no Docker, no AWS account)",
        description="Run one function of template.yaml with an event, against the template's "
        "queues, buckets and tables made in moto; print the handler's result and what it wrote "
        "(JSON on stdout). Needs the 'aws' and 'dev' extras. Exit status: 0 when the handler "
        "returned, 1 when it raised, 2 for usage errors.",
    )
    parser.add_argument("function", metavar="FUNCTION", help="logical id, e.g. UrlResolverFunction")
    parser.add_argument(
        "--event", required=True, type=Path, metavar="FILE", help="the event (JSON)"
    )
    parser.add_argument(
        "--template",
        type=Path,
        default=Path("template.yaml"),
        metavar="FILE",
        help="the SAM template (default: template.yaml of the current directory)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set one more environment variable of the function; may be repeated",
    )
    parser.add_argument(
        "--put",
        action="append",
        default=[],
        metavar="KEY=FILE",
        help="put FILE into the records bucket under KEY first; may be repeated",
    )
    parser.add_argument(
        "--before",
        action="append",
        default=[],
        metavar="FUNCTION=FILE",
        help="invoke FUNCTION with the event FILE first, in the same stack (its writes and "
        "messages are not reported); may be repeated, run in order",
    )
    parser.add_argument(
        "--demo-site",
        action="store_true",
        help=f"serve the bundled demo publisher site on 127.0.0.1 and send {EVENT_PUBLISHER} "
        "of the event to it",
    )
    parser.add_argument(
        "--allow-network",
        action="store_true",
        help="let the handler reach addresses beyond loopback (by default it may not)",
    )


def run(args: argparse.Namespace) -> int:
    """Invoke the handler; print the report (stdout) and a one-line summary (stderr)."""
    missing = [dist for module, dist in _NEEDED.items() if not _importable(module)]
    if missing:
        print(f"cdif-harvest: missing {', '.join(missing)}. {INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        overrides = dict(_pair(item, "--env", "NAME=VALUE") for item in args.env)
        puts = [
            (key, Path(path).read_bytes())
            for key, path in (_pair(item, "--put", "KEY=FILE") for item in args.put)
        ]
        invocations = [
            (name, Path(path).read_text(encoding="utf-8"))
            for name, path in (_pair(item, "--before", "FUNCTION=FILE") for item in args.before)
        ]
        invocations.append((args.function, args.event.read_text(encoding="utf-8")))
        for _, text in invocations:
            json.loads(text)
    except (OSError, ValueError) as exc:
        print(f"cdif-harvest: {exc}", file=sys.stderr)
        return 2
    template = args.template.resolve()
    if not template.is_file():
        print(
            f"cdif-harvest: no template at {args.template}: run in a checkout of the harvester "
            "or give --template",
            file=sys.stderr,
        )
        return 2
    guard = _LoopbackGuard()
    with (
        _saved_environment(),
        contextlib.ExitStack() as stack,
        # The handler logs and prints metrics on stdout, as on Lambda: send them to stderr so
        # that stdout holds the report alone.
        contextlib.redirect_stdout(sys.stderr),
    ):
        if not args.allow_network:
            stack.enter_context(guard.active())
        report = _invoke(invocations, puts, template, overrides, args.demo_site)
    if report is None:
        return 2
    report["network"] = "any allowed by the network policy" if args.allow_network else "loopback"
    if guard.refused:
        report["refused"] = sorted(set(guard.refused))
    print(json.dumps(report, indent=2, ensure_ascii=False, sort_keys=True, default=str))
    wrote = report["wrote"]
    print(
        f"cdif-harvest: {args.function} "
        + ("raised" if "error" in report else "returned")
        + f"; wrote {len(wrote['objects'])} objects, {len(wrote['messages'])} messages, "
        f"{len(wrote['items'])} items"
        + (
            f"; refused {', '.join(report['refused'])} (loopback only: see --allow-network)"
            if guard.refused
            else ""
        ),
        file=sys.stderr,
    )
    return 1 if "error" in report else 0


def _invoke(
    invocations: list[tuple[str, str]],
    puts: list[tuple[str, bytes]],
    template: Path,
    overrides: dict[str, str],
    demo_site: bool,
) -> dict[str, Any] | None:
    """Provision, run the handlers in order, and return the report of the last one (None after
    a usage error)."""
    from moto import mock_aws  # noqa: PLC0415 - a dev dependency, checked by run()

    from cdif_harvester.cli import moto_stack  # noqa: PLC0415 - needs boto3, moto, PyYAML
    from cdif_harvester.demo.server import PublisherSite, demo_site_dir  # noqa: PLC0415

    os.environ.update(_FAKE_AWS_ENV)
    os.environ["AWS_DEFAULT_REGION"] = moto_stack.REGION
    base = dict(os.environ)
    with mock_aws(), contextlib.ExitStack() as resources:
        stack = moto_stack.provision(template)
        unknown = sorted({name for name, _ in invocations} - set(stack.environments))
        if unknown:
            print(
                f"cdif-harvest: no function {', '.join(unknown)} in {template.name}; functions: "
                + ", ".join(sorted(stack.environments)),
                file=sys.stderr,
            )
            return None
        publisher = EVENT_PUBLISHER
        if demo_site:
            publisher = resources.enter_context(PublisherSite(demo_site_dir())).base_url
        _put(stack, puts)
        *earlier, (function, event_text) = invocations
        for name, text in earlier:
            outcome = _run_handler(
                template.parent,
                stack,
                name,
                text,
                publisher=publisher,
                base=base,
                overrides=overrides,
            )
            if "error" in outcome:
                print(f"cdif-harvest: --before {name} raised: {outcome['error']}", file=sys.stderr)
        _drain(stack)  # what the earlier ones sent, and S3's test event of the notification
        before = _Snapshot.take(stack)
        report = _run_handler(
            template.parent,
            stack,
            function,
            event_text,
            publisher=publisher,
            base=base,
            overrides=overrides,
        )
        report["wrote"] = _Snapshot.take(stack).since(before, stack)
        return report


def _run_handler(
    root: Path,
    stack: Any,
    function: str,
    event_text: str,
    *,
    publisher: str,
    base: dict[str, str],
    overrides: dict[str, str],
) -> dict[str, Any]:
    """Run ``function`` once, as a cold start of its own; its result or the error it raised."""
    event = json.loads(event_text.replace(EVENT_PUBLISHER, publisher))
    os.environ.clear()
    os.environ.update(base)
    os.environ.update(stack.function_env(function))
    # Loopback is where a developer's test publisher lives; X-Ray has no daemon here.
    os.environ.update({"ALLOW_LOOPBACK": "true", "POWERTOOLS_TRACE_DISABLED": "true"})
    os.environ.update(overrides)
    report: dict[str, Any] = {"function": function}
    try:
        handler = _handler(root, stack, function)
        context = _Context(function, stack.region, stack.function_timeouts[function])
        report["result"] = handler(event, context)
    except Exception as exc:  # the handler's failure is the report, not a crash
        traceback.print_exc(file=sys.stderr)
        report["error"] = f"{type(exc).__name__}: {exc}"
    return report


def _put(stack: Any, puts: list[tuple[str, bytes]]) -> None:
    import boto3  # noqa: PLC0415

    s3 = boto3.client("s3", region_name=stack.region)
    for key, body in puts:
        s3.put_object(Bucket=stack.bucket_name, Key=key, Body=body)


def _handler(root: Path, stack: Any, function: str) -> Any:
    """The handler of ``function``: ``Handler`` (module.attribute) imported from its CodeUri."""
    spec = stack.resolve(
        stack.resolver.template["Resources"][function].get("Properties", {}).get("Handler")
        or stack.resolver.template.get("Globals", {}).get("Function", {}).get("Handler")
    )
    module_name, _, attribute = str(spec).rpartition(".")
    # A cold start of its own: the handler module (every function's is app.py) and the cached
    # wiring of the previous function are forgotten.
    from cdif_harvester import aws_runtime  # noqa: PLC0415

    aws_runtime.reset()
    aws_runtime.metrics.namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE")
    aws_runtime.metrics.service = os.environ.get("POWERTOOLS_SERVICE_NAME")
    sys.modules.pop(module_name, None)
    # As Lambda does: the code directory is the first entry of the import path.
    code = str(root / stack.code_uris[function])
    sys.path.insert(0, code)
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(code)
    return getattr(module, attribute)


@dataclass
class _Context:
    """The Lambda context object, with the function's timeout as its deadline."""

    function_name: str
    region: str
    timeout: int
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_stream_name: str = "local"
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        """The function's ARN in moto's account."""
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        """The log group Lambda would write to."""
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout."""
        return max(0, int((self.started + self.timeout - time.monotonic()) * 1000))


@dataclass
class _Snapshot:
    """The objects (key -> ETag) and items (table -> items) of a stack at one moment."""

    objects: dict[tuple[str, str], str]
    items: dict[str, list[dict[str, Any]]]

    @classmethod
    def take(cls, stack: Any) -> _Snapshot:
        """Read every bucket and table of ``stack``."""
        import boto3  # noqa: PLC0415
        from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415

        s3 = boto3.client("s3", region_name=stack.region)
        objects: dict[tuple[str, str], str] = {}
        for bucket in stack.buckets.values():
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for item in page.get("Contents", []):
                    objects[(bucket, item["Key"])] = item["ETag"]
        dynamodb = boto3.client("dynamodb", region_name=stack.region)
        plain = TypeDeserializer()
        items: dict[str, list[dict[str, Any]]] = {}
        for table in stack.tables.values():
            rows: list[dict[str, Any]] = []
            for scanned in dynamodb.get_paginator("scan").paginate(TableName=table):
                rows.extend(
                    {key: plain.deserialize(value) for key, value in row.items()}
                    for row in scanned.get("Items", [])
                )
            items[table] = rows
        return cls(objects, items)

    def since(self, before: _Snapshot, stack: Any) -> dict[str, list[dict[str, Any]]]:
        """What was written between ``before`` and this snapshot, and the messages sent."""
        import boto3  # noqa: PLC0415

        s3 = boto3.client("s3", region_name=stack.region)
        objects = []
        for (bucket, key), etag in sorted(self.objects.items()):
            if before.objects.get((bucket, key)) != etag:
                head = s3.head_object(Bucket=bucket, Key=key)
                objects.append(
                    {
                        "bucket": bucket,
                        "key": key,
                        "size": head["ContentLength"],
                        "content_type": head.get("ContentType"),
                    }
                )
        items = [
            {"table": table, "item": row}
            for table, rows in sorted(self.items.items())
            for row in rows
            if row not in before.items.get(table, [])
        ]
        return {"objects": objects, "messages": _drain(stack), "items": items}


def _drain(stack: Any) -> list[dict[str, Any]]:
    """Receive and delete every message of every queue; delayed ones are counted, not read."""
    import boto3  # noqa: PLC0415

    sqs = boto3.client("sqs", region_name=stack.region)
    found: list[dict[str, Any]] = []
    for queue, url in sorted(stack.queue_urls.items()):
        while batch := sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages"):
            for message in batch:
                body: Any = message["Body"]
                with contextlib.suppress(ValueError):
                    body = json.loads(body)
                entry = {"queue": queue, "body": body}
                if message.get("MessageAttributes"):
                    entry["attributes"] = message["MessageAttributes"]
                found.append(entry)
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        delayed = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"].get("ApproximateNumberOfMessagesDelayed", "0")
        if int(delayed):
            found.append({"queue": queue, "delayed": int(delayed)})
    return found


class _LoopbackGuard:
    """Refuses, in this process, every DNS lookup and connection beyond loopback."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def _check(self, host: Any) -> None:
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        text = "" if host is None else str(host).strip("[]").split("%", 1)[0]
        if text in {"", "localhost"}:
            return
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(text).is_loopback:
                return
        self.refused.append(text)
        raise ConnectionRefusedError(
            f"cdif-harvest invoke: {text} is not loopback; the handler may reach it only "
            "with --allow-network"
        )

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Within the block, lookups and connections beyond loopback raise ConnectionRefused."""
        real_getaddrinfo = socket.getaddrinfo
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            self._check(host)
            return real_getaddrinfo(host, *args, **kwargs)

        def connect(sock: socket.socket, address: Any) -> None:
            if isinstance(address, tuple):
                self._check(address[0])
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if isinstance(address, tuple):
                self._check(address[0])
            return real_connect_ex(sock, address)

        socket.getaddrinfo = getaddrinfo
        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            socket.getaddrinfo = real_getaddrinfo
            socket.socket.connect = real_connect  # type: ignore[method-assign]
            socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]


@contextlib.contextmanager
def _saved_environment() -> Iterator[None]:
    """Restore ``os.environ`` after the block (the function's environment is set inside)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _pair(text: str, option: str, form: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or (not value and option != "--env"):
        raise ValueError(f"{option} expects {form}, not {text!r}")
    return name, value


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
