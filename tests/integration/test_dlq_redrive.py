"""Dead-letter redrive under moto, on the queues of template.yaml.

Messages reach a dead-letter queue the way they do on AWS (received maxReceiveCount times and not
deleted), or are put there directly; the redrive must move every one back to its stage queue with
body and attributes intact, and leave in the dead-letter queue whatever it could not send.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdif_harvester.adapters import dlq
from cdif_harvester.adapters.dlq import NotItsSource, check_source, redrive
from cdif_harvester.cli import dlq as dlq_cli
from cdif_harvester.contracts import MAX_MESSAGE_BYTES, UrlJob, encode
from tests.support.aws import ACCOUNT_ID, ProvisionedStack, load_template, provision

pytestmark = pytest.mark.aws

TEMPLATE = load_template()
RENDERER_TEMPLATE = Path(__file__).resolve().parents[2] / "functions" / "renderer" / "template.yaml"
RENDERER = load_template(RENDERER_TEMPLATE)
SOURCE = "UrlResolverQueue"
DEAD_LETTERS = "UrlResolverDeadLetterQueue"


@pytest.fixture
def sqs(stack: ProvisionedStack) -> Any:
    return boto3.client("sqs", region_name=stack.region)


def _message(number: int) -> tuple[str, dict[str, Any]]:
    """A body and message attributes of every kind SQS has, different per message."""
    job = UrlJob(
        run_id="20260301T120000Z-dlq",
        source="data.example.org",
        url=f"https://data.example.org/datasets/{number}?q=a b&é=ü",
    )
    body = encode(job) + ("  \n\t" if number % 2 else "")  # trailing whitespace kept too
    attributes = {
        "cdif-resume": {"DataType": "String", "StringValue": "1"},
        "attempt": {"DataType": "Number", "StringValue": str(number)},
        "digest": {"DataType": "Binary", "BinaryValue": hashlib.sha256(body.encode()).digest()},
        "note": {"DataType": "String.custom", "StringValue": f"Übertrag {number} ✓"},
    }
    return body, attributes


def _put(sqs: Any, queue_url: str, count: int) -> dict[str, dict[str, Any]]:
    """Send ``count`` distinct messages to ``queue_url``; return their attributes by body."""
    sent = {}
    for number in range(count):
        body, attributes = _message(number)
        sqs.send_message(QueueUrl=queue_url, MessageBody=body, MessageAttributes=attributes)
        sent[body] = attributes
    return sent


def _drain(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Receive and delete every message of ``queue_url``."""
    found: list[dict[str, Any]] = []
    while messages := sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    ).get("Messages", []):
        for message in messages:
            found.append(message)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return found


def _visible(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
    return int(attributes["ApproximateNumberOfMessages"])


def _dead_letter(sqs: Any, stack: ProvisionedStack, count: int) -> dict[str, dict[str, Any]]:
    """Send ``count`` messages to the source queue and receive each maxReceiveCount times
    without deleting it (a visibility timeout of 0 gives it back at once), so SQS moves them to
    the dead-letter queue itself."""
    source = stack.queue_urls[SOURCE]
    sent = _put(sqs, source, count)
    limit = TEMPLATE["Resources"][SOURCE]["Properties"]["RedrivePolicy"]["maxReceiveCount"]
    receives = 0
    while batch := sqs.receive_message(
        QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", []):
        receives += len(batch)
    assert receives == count * limit
    assert _visible(sqs, source) == 0
    assert _visible(sqs, stack.queue_urls[DEAD_LETTERS]) == count
    return sent


def _assert_intact(found: list[dict[str, Any]], sent: dict[str, dict[str, Any]]) -> None:
    assert sorted(message["Body"] for message in found) == sorted(sent)
    for message in found:
        attributes = {
            name: {
                key: value[key]
                for key in ("DataType", "StringValue", "BinaryValue")
                if key in value
            }
            for name, value in message["MessageAttributes"].items()
        }
        assert attributes == sent[message["Body"]]
        assert message["MD5OfBody"] == hashlib.md5(message["Body"].encode()).hexdigest()


# ----------------------------------------------------------------------------- the adapter


def test_redrive_moves_every_dead_letter_back_intact_and_empties_the_queue(
    stack: ProvisionedStack, sqs: Any
) -> None:
    # Given 23 jobs that SQS dead-lettered after maxReceiveCount failed receives
    sent = _dead_letter(sqs, stack, 23)
    lines: list[str] = []

    # When they are redriven to the queue they came from
    result = redrive(
        sqs,
        stack.queue_urls[DEAD_LETTERS],
        stack.queue_urls[SOURCE],
        progress=lines.append,
        wait_seconds=0,
    )

    # Then every one is back, byte for byte with its attributes, and the dead letters are gone
    assert result.to_dict() == {
        "moved": 23,
        "failed": 0,
        "not_deleted": 0,
        "batches": 3,
        "stopped": "empty",
        "failures": [],
    }
    assert result.complete
    assert len(lines) == 3 and lines[-1].startswith("batch 3: 3 received")
    assert _visible(sqs, stack.queue_urls[DEAD_LETTERS]) == 0
    _assert_intact(_drain(sqs, stack.queue_urls[SOURCE]), sent)


def test_batches_too_big_for_one_send_are_split(stack: ProvisionedStack, sqs: Any) -> None:
    # Given six messages as big as a job may be: more than one batch may carry (1 MiB)
    dead_letters = stack.queue_urls[DEAD_LETTERS]
    bodies = {str(number) * MAX_MESSAGE_BYTES for number in range(6)}
    for body in bodies:
        sqs.send_message(QueueUrl=dead_letters, MessageBody=body)

    # When they are redriven
    result = redrive(sqs, dead_letters, stack.queue_urls[SOURCE], wait_seconds=0)

    # Then all six arrive (a single batch would have been refused as a whole)
    assert (result.moved, result.failed, result.stopped) == (6, 0, "empty")
    assert {message["Body"] for message in _drain(sqs, stack.queue_urls[SOURCE])} == bodies
    assert _visible(sqs, dead_letters) == 0


def test_a_failed_send_leaves_the_messages_in_the_dead_letter_queue(
    stack: ProvisionedStack, sqs: Any
) -> None:
    # Given dead letters, and a target queue that does not exist (deleted, or a wrong URL)
    dead_letters = stack.queue_urls[DEAD_LETTERS]
    sent = _put(sqs, dead_letters, 4)
    missing = stack.queue_urls[SOURCE].rsplit("/", 1)[0] + "/no-such-queue"

    # When they are redriven there
    result = redrive(sqs, dead_letters, missing, wait_seconds=0)

    # Then none is lost: each is counted, reported, and visible in the dead-letter queue again
    assert (result.moved, result.failed, result.stopped) == (0, 4, "send-error")
    assert not result.complete
    assert len(result.failures) == 4
    assert {failure.code for failure in result.failures} == {
        "AWS.SimpleQueueService.NonExistentQueue"
    }
    assert _visible(sqs, dead_letters) == 4
    _assert_intact(_drain(sqs, dead_letters), sent)


def test_max_messages_moves_that_many_and_leaves_the_rest(
    stack: ProvisionedStack, sqs: Any
) -> None:
    dead_letters = stack.queue_urls[DEAD_LETTERS]
    _put(sqs, dead_letters, 15)

    result = redrive(sqs, dead_letters, stack.queue_urls[SOURCE], max_messages=12, wait_seconds=0)

    assert (result.moved, result.batches, result.stopped) == (12, 2, "max")
    assert _visible(sqs, dead_letters) == 3
    assert len(_drain(sqs, stack.queue_urls[SOURCE])) == 12


def test_a_queue_that_does_not_dead_letter_there_is_refused(
    stack: ProvisionedStack, sqs: Any
) -> None:
    check_source(sqs, stack.queue_urls[DEAD_LETTERS], stack.queue_urls[SOURCE])
    # Sent to another stage, a URL job would break that stage's contract and be dropped.
    with pytest.raises(NotItsSource):
        check_source(sqs, stack.queue_urls[DEAD_LETTERS], stack.queue_urls["ExtractorQueue"])
    with pytest.raises(NotItsSource):
        check_source(sqs, stack.queue_urls[DEAD_LETTERS], stack.queue_urls[DEAD_LETTERS])


# ----------------------------------------------------------------------------- the command


def _parse(*argv: str) -> argparse.Namespace:
    """Parse ``argv`` the way ``cdif-harvest`` does once ``dlq`` is registered."""
    parser = argparse.ArgumentParser(prog="cdif-harvest")
    commands = parser.add_subparsers(dest="command", required=True)
    dlq_cli.add_parser(commands)
    return parser.parse_args(argv)


@pytest.fixture
def cloudformation(stack: ProvisionedStack) -> Iterator[tuple[Any, Stubber]]:
    """A CloudFormation client answering for the stack: moto provisions the queues of
    template.yaml, the stub tells their logical ids (moto's CloudFormation needs extras the
    project does not install)."""
    client = boto3.client("cloudformation", region_name=stack.region)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _describes(
    stubber: Stubber,
    stack: ProvisionedStack,
    *logical_ids: str,
    template: dict[str, Any] = TEMPLATE,
) -> None:
    for logical_id in logical_ids:
        stubber.add_response(
            "describe_stack_resource",
            {
                "StackResourceDetail": {
                    "StackName": stack.stack_name,
                    "LogicalResourceId": logical_id,
                    "PhysicalResourceId": stack.queue_urls[logical_id],
                    "ResourceType": template["Resources"][logical_id]["Type"],
                    "LastUpdatedTimestamp": datetime(2026, 3, 1, tzinfo=UTC),
                    "ResourceStatus": "CREATE_COMPLETE",
                }
            },
            {"StackName": stack.stack_name, "LogicalResourceId": logical_id},
        )


def _clients(sqs: Any, cloudformation: Any) -> dlq_cli.ClientFactory:
    return lambda service, region: {"sqs": sqs, "cloudformation": cloudformation}[service]


def test_the_command_finds_the_queues_of_a_stack_and_redrives(
    stack: ProvisionedStack,
    sqs: Any,
    cloudformation: tuple[Any, Stubber],
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, stubber = cloudformation
    _describes(stubber, stack, DEAD_LETTERS, SOURCE)
    sent = _put(sqs, stack.queue_urls[DEAD_LETTERS], 12)
    args = _parse(
        "dlq", "redrive", "--queue", "url-resolver", "--stack", stack.stack_name, "--wait", "0"
    )

    status = dlq_cli.run(args, make_client=_clients(sqs, client))

    out, err = capsys.readouterr()
    assert status == 0, err
    summary = json.loads(out)
    assert summary["dead_letter_queue"] == stack.queue_urls[DEAD_LETTERS]
    assert summary["target"] == stack.queue_urls[SOURCE]
    assert summary["dead_letter_queue_before"]["visible"] == 12
    assert (summary["moved"], summary["failed"], summary["stopped"]) == (12, 0, "empty")
    assert "batch 2: 2 received" in err
    assert _visible(sqs, stack.queue_urls[DEAD_LETTERS]) == 0
    _assert_intact(_drain(sqs, stack.queue_urls[SOURCE]), sent)


def test_the_renderer_queues_are_found_in_the_renderer_stack_and_redriven(
    stack: ProvisionedStack,
    sqs: Any,
    cloudformation: tuple[Any, Stubber],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the renderer's stack beside the main one, with dead-lettered render jobs
    renderer = provision(
        RENDERER_TEMPLATE,
        stack_name="cdif-render",
        parameters={
            "HarvestTable": "cdif-test-CatalogTable",
            "HarvestBucket": stack.bucket_name,
            "DocumentQueueUrl": stack.queue_urls["ExtractorQueue"],
            "DocumentQueueArn": sqs.get_queue_attributes(
                QueueUrl=stack.queue_urls["ExtractorQueue"], AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"],
            "AlarmTopicArn": f"arn:aws:sns:{stack.region}:{ACCOUNT_ID}:cdif-test-alarms",
        },
    )
    dead_letters, source = (
        renderer.queue_urls["RenderDeadLetterQueue"],
        renderer.queue_urls["RenderQueue"],
    )
    sent = _put(sqs, dead_letters, 4)
    client, stubber = cloudformation
    _describes(stubber, renderer, "RenderDeadLetterQueue", "RenderQueue", template=RENDERER)
    args = _parse("dlq", "redrive", "--queue", "renderer", "--stack", "cdif-render", "--wait", "0")

    status = dlq_cli.run(args, make_client=_clients(sqs, client))

    out, err = capsys.readouterr()
    assert status == 0, err
    summary = json.loads(out)
    assert (summary["dead_letter_queue"], summary["target"]) == (dead_letters, source)
    assert (summary["moved"], summary["failed"]) == (4, 0)
    assert _visible(sqs, dead_letters) == 0
    _assert_intact(_drain(sqs, source), sent)


def test_the_main_stack_named_for_the_renderer_is_a_usage_error_that_says_so(
    stack: ProvisionedStack,
    sqs: Any,
    cloudformation: tuple[Any, Stubber],
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, stubber = cloudformation
    stubber.add_client_error(
        "describe_stack_resource",
        service_error_code="ValidationError",
        service_message="Resource RenderDeadLetterQueue does not exist for stack cdif-test",
        http_status_code=400,
    )
    args = _parse("dlq", "redrive", "--queue", "renderer", "--stack", stack.stack_name)

    status = dlq_cli.run(args, make_client=_clients(sqs, client))

    assert status == 2
    assert "--queue renderer takes the renderer's stack" in capsys.readouterr().err


def test_a_dry_run_only_counts(
    stack: ProvisionedStack, sqs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_letters, source = stack.queue_urls[DEAD_LETTERS], stack.queue_urls[SOURCE]
    _put(sqs, dead_letters, 7)
    args = _parse("dlq", "redrive", "--dlq-url", dead_letters, "--target-url", source, "--dry-run")

    status = dlq_cli.run(args, make_client=lambda service, region: sqs)

    summary = json.loads(capsys.readouterr().out)
    assert status == 0
    assert summary["dry_run"] is True
    assert summary["dead_letter_queue_before"] == {"visible": 7, "in_flight": 0, "delayed": 0}
    assert summary["would_move"] == 7
    assert "moved" not in summary
    assert _visible(sqs, dead_letters) == 7
    assert _visible(sqs, source) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--dlq-url", "DLQ", "--target-url", "ExtractorQueue"],  # another stage's queue
        ["--dlq-url", "DLQ"],  # no target
        ["--queue", "url-resolver"],  # neither stack nor URLs
    ],
)
def test_the_command_refuses_queues_that_do_not_belong_together(
    stack: ProvisionedStack, sqs: Any, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    dead_letters = stack.queue_urls[DEAD_LETTERS]
    _put(sqs, dead_letters, 2)
    urls = {"DLQ": dead_letters, "ExtractorQueue": stack.queue_urls["ExtractorQueue"]}
    args = _parse("dlq", "redrive", *(urls.get(item, item) for item in argv), "--wait", "0")

    status = dlq_cli.run(args, make_client=lambda service, region: sqs)

    assert status == 2
    assert capsys.readouterr().out == ""
    assert _visible(sqs, dead_letters) == 2
    assert _visible(sqs, stack.queue_urls["ExtractorQueue"]) == 0


def test_an_unknown_stack_is_a_usage_error(
    stack: ProvisionedStack,
    sqs: Any,
    cloudformation: tuple[Any, Stubber],
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, stubber = cloudformation
    stubber.add_client_error(
        "describe_stack_resource",
        service_error_code="ValidationError",
        service_message="Stack 'nope' does not exist",
        http_status_code=400,
    )
    args = _parse("dlq", "redrive", "--queue", "indexer", "--stack", "nope")

    status = dlq_cli.run(args, make_client=_clients(sqs, client))

    assert status == 2
    assert "Stack 'nope' does not exist" in capsys.readouterr().err


def test_the_stages_of_the_command_are_the_queues_of_the_template() -> None:
    work_queues = {
        lid
        for lid, res in TEMPLATE["Resources"].items()
        if res["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in res.get("Properties", {})
    }
    assert {f"{prefix}Queue" for prefix in dlq_cli.STAGE_QUEUES.values()} == work_queues
    for prefix in dlq_cli.STAGE_QUEUES.values():
        redrive_policy = TEMPLATE["Resources"][f"{prefix}Queue"]["Properties"]["RedrivePolicy"]
        assert redrive_policy["deadLetterTargetArn"]["Fn::GetAtt"][0] == f"{prefix}DeadLetterQueue"
    assert dlq.VISIBILITY_TIMEOUT >= 60


def test_the_renderer_of_the_command_is_the_queue_of_the_renderer_template() -> None:
    ((name, prefix),) = dlq_cli.RENDERER_QUEUES.items()
    assert name not in dlq_cli.STAGE_QUEUES
    redrive_policy = RENDERER["Resources"][f"{prefix}Queue"]["Properties"]["RedrivePolicy"]
    assert redrive_policy["deadLetterTargetArn"]["Fn::GetAtt"][0] == f"{prefix}DeadLetterQueue"
