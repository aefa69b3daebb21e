"""The renderer's stack (functions/renderer/template.yaml) and how the main stack is wired to it.

The renderer's template is linted (cfn-lint, as `make check-template` does) and held to the
rules of the main stack's stages: a queue with its own dead-letter queue, a visibility timeout
of six function timeouts, partial batch failures, the environment the AWS composition root
reads, grants on the main stack's data only, and alarms on the main stack's topic. The main
stack hands pages to it only when given its queue's ARN (``RenderQueueArn``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.aws_runtime import MAX_RECEIVES, AwsConfig
from cdif_harvester.contracts import RENDER_QUEUE
from tests.support.aws import ACCOUNT_ID, REGION, load_template, mocked_stack, provision

pytestmark = pytest.mark.aws

REPO = Path(__file__).resolve().parents[2]
RENDERER_TEMPLATE = REPO / "functions" / "renderer" / "template.yaml"
TEMPLATE = load_template(RENDERER_TEMPLATE)
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTION = RESOURCES["RendererFunction"]["Properties"]
MAIN = {
    "HarvestTable": "cdif-test-CatalogTable",
    "HarvestBucket": "cdif-test-records",
    "DocumentQueueUrl": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/cdif-test-ExtractorQueue",
    "DocumentQueueArn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:cdif-test-ExtractorQueue",
    "AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:cdif-test-alarms",
}


def _cfn_lint() -> str:
    found = Path(sys.executable).with_name("cfn-lint")
    if found.exists():
        return str(found)
    on_path = shutil.which("cfn-lint")
    if on_path is None:
        pytest.skip("cfn-lint is not installed (make setup installs it)")
    return on_path


def test_the_renderer_template_passes_cfn_lint() -> None:
    result = subprocess.run(
        [_cfn_lint(), str(RENDERER_TEMPLATE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_render_queue_redrives_to_its_own_dead_letter_queue_after_the_last_try() -> None:
    redrive = RESOURCES["RenderQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["RenderDeadLetterQueue", "Arn"]}
    assert redrive["maxReceiveCount"] == MAX_RECEIVES
    visibility = RESOURCES["RenderQueue"]["Properties"]["VisibilityTimeout"]
    assert visibility >= 6 * FUNCTION["Timeout"]
    (event,) = FUNCTION["Events"].values()
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["RenderQueue", "Arn"]}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_renderer_gets_the_environment_the_aws_composition_root_reads() -> None:
    with mocked_stack():
        stack = provision(RENDERER_TEMPLATE, stack_name="cdif-render", parameters=MAIN)
        env = stack.function_env("RendererFunction")
        config = AwsConfig.from_env(env)  # raises for a missing variable
        assert config.records_bucket == MAIN["HarvestBucket"]
        assert config.catalog_table == MAIN["HarvestTable"]
        # its own queue (for deferred jobs and delayed retries) and the extractor's
        assert config.queue_urls == {
            "document": MAIN["DocumentQueueUrl"],
            RENDER_QUEUE: stack.queue_urls["RenderQueue"],
        }
        assert env["ALLOW_LOOPBACK"] == "false"


def test_the_renderer_is_granted_only_the_main_stack_s_data_and_its_own_queue() -> None:
    with mocked_stack():
        stack = provision(RENDERER_TEMPLATE, stack_name="cdif-render", parameters=MAIN)
        bucket = f"arn:aws:s3:::{MAIN['HarvestBucket']}"
        queues = {MAIN["DocumentQueueArn"], stack.queue_arns["RenderQueue"]}
        sends = set()
        for policy in stack.resolve(FUNCTION["Policies"]):
            if "SQSSendMessagePolicy" in policy:
                sends.add(policy["SQSSendMessagePolicy"]["QueueName"])
            elif "DynamoDBCrudPolicy" in policy:
                assert policy["DynamoDBCrudPolicy"]["TableName"] == MAIN["HarvestTable"]
            else:
                for statement in policy["Statement"]:
                    actions = statement["Action"]
                    actions = [actions] if isinstance(actions, str) else actions
                    assert "s3:DeleteObject" not in actions
                    resource = statement["Resource"]
                    assert (
                        resource in queues
                        or resource == bucket
                        or (resource.startswith(f"{bucket}/"))
                    ), resource
        assert sends == {"cdif-test-ExtractorQueue", "cdif-render-RenderQueue"}


def _alarms() -> dict[str, dict[str, Any]]:
    return {
        lid: res["Properties"]
        for lid, res in RESOURCES.items()
        if res["Type"] == "AWS::CloudWatch::Alarm"
    }


def _watched(alarm: dict[str, Any]) -> set[tuple[str, str]]:
    if "MetricName" in alarm:
        return {(alarm["MetricName"], str(alarm["Dimensions"][0]["Value"]))}
    return {
        (query["MetricStat"]["Metric"]["MetricName"], str(dimension["Value"]))
        for query in alarm["Metrics"]
        if "MetricStat" in query
        for dimension in query["MetricStat"]["Metric"]["Dimensions"]
    }


def test_the_renderer_has_the_alarms_of_a_fetching_stage_on_the_main_stack_s_topic() -> None:
    alarms = _alarms()
    watched = set().union(*(_watched(alarm) for alarm in alarms.values()))
    dead_letters = str({"Fn::GetAtt": ["RenderDeadLetterQueue", "QueueName"]})
    queue = str({"Fn::GetAtt": ["RenderQueue", "QueueName"]})
    function = str({"Ref": "RendererFunction"})
    assert {
        ("ApproximateNumberOfMessagesVisible", dead_letters),
        ("ApproximateAgeOfOldestMessage", queue),
        ("Errors", function),
        ("Invocations", function),
        ("Throttles", function),
    } <= watched
    for lid, alarm in alarms.items():
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopicArn"}], lid
        assert alarm["OKActions"] == [{"Ref": "AlarmTopicArn"}], lid


def test_the_main_stack_hands_pages_to_the_render_queue_only_when_given_its_arn() -> None:
    main_template = load_template()
    policies = main_template["Resources"]["UrlResolverFunction"]["Properties"]["Policies"]
    with mocked_stack() as alone:
        # Without the parameter: no render queue anywhere, no grant.
        for function, env in alone.environments.items():
            assert "RENDER_QUEUE_URL" not in env, function
        assert not [p for p in alone.resolve(policies) if "Statement" in p and _renders(p)]

        # With it: the resolver, and only the resolver, gets the queue's URL and a send grant.
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="cdif-render-RenderQueue")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        queue_arn = arn["Attributes"]["QueueArn"]
        wired = provision(stack_name="cdif-wired", parameters={"RenderQueueArn": queue_arn})
        assert wired.function_env("UrlResolverFunction")["RENDER_QUEUE_URL"] == url
        for function, env in wired.environments.items():
            if function != "UrlResolverFunction":
                assert "RENDER_QUEUE_URL" not in env, function
        (grant,) = [p for p in wired.resolve(policies) if "Statement" in p and _renders(p)]
        (statement,) = [s for s in grant["Statement"] if s["Resource"] == queue_arn]
        assert statement["Action"] == "sqs:SendMessage"


def _renders(policy: dict[str, Any]) -> bool:
    return any("RenderQueue" in str(s.get("Resource")) for s in policy["Statement"])
