"""``cdif-harvest dlq``: the dead-letter queues of a deployed harvester.

``cdif-harvest dlq redrive --queue STAGE --stack NAME [--max N] [--dry-run]`` moves the dead
letters of one stage back to its queue (see :mod:`cdif_harvester.adapters.dlq` for why nothing is
lost); ``--queue renderer --stack NAME`` those of the renderer, NAME being the renderer's own
stack (functions/renderer/template.yaml); ``--dlq-url URL --target-url URL`` names the two queues
instead of a stack. ``--dry-run`` only counts. Progress goes to stderr, the JSON result to stdout.

Exit status: 0 when every message received was moved (or, with ``--dry-run``, the queues were
read), 1 when some stayed behind or AWS could not be asked, 2 for usage errors (no such stack
or queue, a target that is not the dead-letter queue's source).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from cdif_harvester.errors import StorageError

__all__ = ["COMMAND", "RENDERER_QUEUES", "STAGE_QUEUES", "add_parser", "run"]

COMMAND = "dlq"

#: Default long-poll time of each receive (seconds).
WAIT_SECONDS = 2

# The adapter needs botocore (the 'aws' extra); it is imported when the command runs, so the
# rest of the command line works on a laptop without the AWS stack.
_INSTALL_HINT = (
    "cdif-harvest dlq needs boto3 (the 'aws' extra): pip install '.[aws]' in a checkout of the "
    "harvester, or pip install the wheel with [aws]"
)

#: Stage name on the command line -> the prefix of its queues' logical ids in template.yaml
#: (``<prefix>Queue`` and ``<prefix>DeadLetterQueue``).
STAGE_QUEUES = {
    "sitemap-expander": "SitemapExpander",
    "url-resolver": "UrlResolver",
    "extractor": "Extractor",
    "indexer": "Indexer",
    "crosswalk": "Crosswalk",
}

#: The same for the renderer, whose queues are in its own stack (functions/renderer/template.yaml):
#: with ``--queue renderer``, ``--stack`` names that stack.
RENDERER_QUEUES = {"renderer": "Render"}


#: Makes the AWS client of a service for a region (None: the configured one).
ClientFactory = Callable[[str, str | None], Any]


class UsageError(Exception):
    """The command line names no usable queues."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dlq`` (and its ``redrive`` action) to ``subparsers`` of the main parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        COMMAND, help="dead-letter queues of a deployed stack: count them, redrive them"
    )
    actions = parser.add_subparsers(dest="dlq_command", required=True)
    move = actions.add_parser(
        "redrive",
        help="move one stage's dead letters back to its queue (deletes only what was sent)",
    )
    move.add_argument(
        "--queue",
        choices=sorted(STAGE_QUEUES | RENDERER_QUEUES),
        metavar="STAGE",
        help=f"the stage whose dead letters to move: {', '.join(STAGE_QUEUES | RENDERER_QUEUES)} "
        "(needed with --stack)",
    )
    move.add_argument(
        "--stack",
        metavar="NAME",
        help="the CloudFormation stack of the harvester (with --queue renderer: the renderer's)",
    )
    move.add_argument("--dlq-url", metavar="URL", help="the dead-letter queue (instead of --stack)")
    move.add_argument(
        "--target-url", metavar="URL", help="the queue it dead-letters from (with --dlq-url)"
    )
    move.add_argument(
        "--max", type=_positive, metavar="N", help="move at most N messages (default: all)"
    )
    move.add_argument(
        "--dry-run", action="store_true", help="only count the messages; change nothing"
    )
    move.add_argument("--region", help="AWS region (default: that of the AWS configuration)")
    move.add_argument(
        "--wait",
        type=int,
        default=WAIT_SECONDS,
        choices=range(21),
        metavar="SECONDS",
        help="long-poll time of each receive, 0-20 (default %(default)s)",
    )
    return parser


def run(args: argparse.Namespace, *, make_client: ClientFactory | None = None) -> int:
    """Run ``cdif-harvest dlq ...`` as parsed by the parser of :func:`add_parser`; return the
    exit status. ``make_client`` builds the SQS and CloudFormation clients (default: boto3's).
    """
    try:
        from cdif_harvester.adapters.dlq import (  # noqa: PLC0415 - see _INSTALL_HINT
            NotItsSource,
            check_source,
            count,
            redrive,
        )
    except ImportError:
        print(f"cdif-harvest dlq: {_INSTALL_HINT}", file=sys.stderr)
        return 2
    make_client = make_client or _boto3_client
    try:
        sqs = make_client("sqs", args.region)
        dlq_url, target_url = _queue_urls(args, make_client)
        check_source(sqs, dlq_url, target_url)
    except (UsageError, NotItsSource) as exc:
        print(f"cdif-harvest dlq: {exc}", file=sys.stderr)
        return 2
    except StorageError as exc:
        print(f"cdif-harvest dlq: {exc}", file=sys.stderr)
        return 1
    summary: dict[str, Any] = {
        "queue": args.queue,
        "dead_letter_queue": dlq_url,
        "target": target_url,
        "dry_run": args.dry_run,
    }
    try:
        before = count(sqs, dlq_url)
        summary["dead_letter_queue_before"] = before.to_dict()
        _progress(
            f"{dlq_url}: about {before.visible} message(s) waiting, {before.in_flight} in flight"
        )
        if args.dry_run:
            summary["would_move"] = min(before.visible, args.max or before.visible)
            print(json.dumps(summary))
            return 0
        _progress(f"moving them to {target_url}")
        result = redrive(
            sqs,
            dlq_url,
            target_url,
            max_messages=args.max,
            progress=_progress,
            wait_seconds=args.wait,
        )
    except StorageError as exc:
        print(f"cdif-harvest dlq: {exc}", file=sys.stderr)
        return 1
    summary.update(result.to_dict())
    _progress(
        f"done ({result.stopped}): {result.moved} moved, {result.failed} left in the "
        f"dead-letter queue, {result.not_deleted} sent but not deleted"
    )
    print(json.dumps(summary))
    return 0 if result.complete else 1


def _boto3_client(service: str, region: str | None) -> Any:
    import boto3  # noqa: PLC0415 - only this command needs boto3 on a laptop
    from botocore.exceptions import NoRegionError  # noqa: PLC0415

    try:
        return boto3.client(service, region_name=region)  # type: ignore[call-overload]
    except NoRegionError as exc:  # an answer, not a fault: the operator named no region
        raise UsageError(
            "no AWS region: give --region, or set AWS_REGION (or a region in the AWS configuration)"
        ) from exc


def _queue_urls(args: argparse.Namespace, make_client: ClientFactory) -> tuple[str, str]:
    """The dead-letter queue and its source, from the stack or from the command line."""
    if args.stack:
        if args.dlq_url or args.target_url:
            raise UsageError("give either --stack or --dlq-url and --target-url, not both")
        if not args.queue:
            raise UsageError("--stack needs --queue STAGE")
        prefix = (STAGE_QUEUES | RENDERER_QUEUES)[args.queue]
        cloudformation = make_client("cloudformation", args.region)
        try:
            return (
                _stack_queue_url(cloudformation, args.stack, f"{prefix}DeadLetterQueue"),
                _stack_queue_url(cloudformation, args.stack, f"{prefix}Queue"),
            )
        except UsageError as exc:
            if args.queue in RENDERER_QUEUES:  # the likely slip: the main stack's name
                raise UsageError(f"{exc} (--queue renderer takes the renderer's stack)") from exc
            raise
    if not (args.dlq_url and args.target_url):
        raise UsageError("give --stack NAME (with --queue), or both --dlq-url and --target-url")
    return str(args.dlq_url), str(args.target_url)


def _stack_queue_url(cloudformation: Any, stack: str, logical_id: str) -> str:
    """The URL of the stack's queue ``logical_id`` (an SQS queue's physical id is its URL)."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    try:
        detail = cloudformation.describe_stack_resource(
            StackName=stack, LogicalResourceId=logical_id
        )["StackResourceDetail"]
    except ClientError as exc:
        if exc.response["Error"].get("Code") == "ValidationError":  # no such stack or resource
            raise UsageError(f"stack {stack}: {exc.response['Error'].get('Message')}") from exc
        raise StorageError(f"cannot read stack {stack}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot read stack {stack}: {exc}") from exc
    if detail.get("ResourceType") != "AWS::SQS::Queue" or not detail.get("PhysicalResourceId"):
        raise UsageError(f"stack {stack}: {logical_id} is not a queue")
    return str(detail["PhysicalResourceId"])


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
