"""template.yaml: provisioned in moto from its own properties, and held to the house rules.

The moto tests create the queues, bucket and table from the template (tests/support/aws.py) and
check behaviour (S3 -> SQS notifications, redrive, environments). The property tests read the
template and fail when someone breaks a rule: partial batch failures, dead-letter queues,
visibility timeouts, a private encrypted bucket, an on-demand table with PITR, API keys on every
method, and least-privilege policies.
"""

from __future__ import annotations

import importlib.util
import json
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import boto3
import pytest

from cdif_harvester.api import openapi_document
from cdif_harvester.aws_runtime import AwsConfig
from cdif_harvester.external_sort import sorted_pairs
from cdif_harvester.model import CatalogEntry
from tests.support.aws import (
    CATALOG_TABLE_ID,
    RECORDS_BUCKET_ID,
    ProvisionedStack,
    function_ids,
    load_template,
    mocked_stack,
)

pytestmark = pytest.mark.aws

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
GLOBALS: dict[str, Any] = TEMPLATE.get("Globals", {}).get("Function", {})
FUNCTIONS = function_ids(TEMPLATE)
QUEUES = [lid for lid, res in RESOURCES.items() if res["Type"] == "AWS::SQS::Queue"]
DEAD_LETTER_QUEUES = [
    res["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    for lid, res in RESOURCES.items()
    if lid in QUEUES and "RedrivePolicy" in res.get("Properties", {})
]
# The scheduler's failed ticks: a dead-letter queue that no work queue redrives to.
SCHEDULER_DEAD_LETTERS = "SchedulerDeadLetterQueue"
WORK_QUEUES = [lid for lid in QUEUES if lid not in {*DEAD_LETTER_QUEUES, SCHEDULER_DEAD_LETTERS}]

# The pipeline of docs/architecture.md: who may send to which queue, and which queue feeds whom.
SENDS_TO = {
    "SchedulerFunction": {"SitemapExpanderQueue"},
    "IntakeFunction": {"SitemapExpanderQueue"},
    "SitemapExpanderFunction": {"UrlResolverQueue", "SitemapExpanderQueue"},
    # its own queue too: a job deferred by politeness goes back to it, delayed
    "UrlResolverFunction": {"ExtractorQueue", "UrlResolverQueue"},
    "ExtractorFunction": {"IndexerQueue"},
    "IndexerFunction": set(),
    "CrosswalkFunction": set(),
}
FEEDS = {
    "SitemapExpanderQueue": "SitemapExpanderFunction",
    "UrlResolverQueue": "UrlResolverFunction",
    "ExtractorQueue": "ExtractorFunction",
    "IndexerQueue": "IndexerFunction",
    "CrosswalkQueue": "CrosswalkFunction",
}
# (The intake writes the sources registry and the run a started harvest records.)
READS_ONLY_CATALOG = {"CrosswalkFunction"}
SHARED_ENV = {
    "RECORDS_BUCKET",
    "CATALOG_TABLE",
    "SITEMAP_QUEUE_URL",
    "URL_QUEUE_URL",
    "DOCUMENT_QUEUE_URL",
    "INDEX_QUEUE_URL",
    "ALLOW_LOOPBACK",
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
    "LOG_LEVEL",
}
DATA_SERVICES = ("s3:", "sqs:", "dynamodb:")
# Powertools idempotency, only when asked for (docs/decisions/0087): the parameter, the table,
# and the stages that run their jobs under it.
IDEMPOTENCY_PARAMETER = "IdempotencyTableEnabled"
IDEMPOTENCY_TABLE_ID = "IdempotencyTable"
JOB_STAGES = (
    "SitemapExpanderFunction",
    "UrlResolverFunction",
    "ExtractorFunction",
    "IndexerFunction",
)
POLICY_TEMPLATE_TARGETS = {
    "SQSSendMessagePolicy": "QueueName",
    "S3ReadPolicy": "BucketName",
    "S3WritePolicy": "BucketName",
    "S3CrudPolicy": "BucketName",
    "DynamoDBReadPolicy": "TableName",
    "DynamoDBWritePolicy": "TableName",
    "DynamoDBCrudPolicy": "TableName",
}


def props(logical_id: str) -> dict[str, Any]:
    properties: dict[str, Any] = RESOURCES[logical_id].get("Properties", {})
    return properties


def function_setting(function: str, name: str) -> Any:
    return props(function).get(name, GLOBALS.get(name))


def sqs_events(function: str) -> list[dict[str, Any]]:
    events = props(function).get("Events", {}).values()
    return [event["Properties"] for event in events if event["Type"] == "SQS"]


def getatt_target(value: Any) -> str:
    assert isinstance(value, dict) and "Fn::GetAtt" in value, value
    target = value["Fn::GetAtt"]
    return str(target[0])


@pytest.fixture
def stack() -> Iterator[ProvisionedStack]:
    with mocked_stack() as provisioned:
        yield provisioned


def drain(queue_url: str) -> list[dict[str, Any]]:
    """Receive and delete every visible message; return their parsed bodies."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    bodies: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            return bodies
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


# ----------------------------------------------------------------------------- under moto


def test_records_put_notifies_the_crosswalk_queue_and_raw_put_does_not(
    stack: ProvisionedStack,
) -> None:
    # Given the stack, with S3's configuration test event cleared from the queue
    s3 = boto3.client("s3", region_name="us-east-1")
    crosswalk_queue = stack.sqs_event_sources["CrosswalkFunction"].queue_url
    assert [body.get("Event") for body in drain(crosswalk_queue)] == ["s3:TestEvent"]
    record_key = "records/example.org/" + "0" * 32 + ".jsonld"

    # When a raw document and then a record land in the bucket
    s3.put_object(Bucket=stack.bucket_name, Key="raw/example.org/abc/def.html", Body=b"<html/>")
    after_raw = drain(crosswalk_queue)
    s3.put_object(Bucket=stack.bucket_name, Key=record_key, Body=b"{}")
    after_record = drain(crosswalk_queue)

    # Then only the record reaches the queue that feeds the crosswalk
    assert after_raw == []
    assert len(after_record) == 1
    (notification,) = after_record[0]["Records"]
    assert notification["eventName"].startswith("ObjectCreated:")
    assert notification["s3"]["bucket"]["name"] == stack.bucket_name
    # Keys arrive URL-encoded (AWS keeps '/', moto encodes it too): handlers must unquote_plus.
    assert unquote_plus(notification["s3"]["object"]["key"]) == record_key
    assert stack.consumer_of("CrosswalkQueue") == "CrosswalkFunction"


def test_bucket_is_versioned_encrypted_private_and_tls_only(stack: ProvisionedStack) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = stack.bucket_name
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    (rule,) = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert block == {
        "BlockPublicAcls": True,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True,
    }
    ownership = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
    assert ownership["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # moto cannot evaluate aws:SecureTransport: the TLS rule is checked in the template.
    policy = stack.resolve(props("RecordsBucketPolicy"))
    assert policy["Bucket"] == bucket
    denials = [
        statement
        for statement in policy["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny"
        and statement["Principal"] == "*"
        and statement.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
    ]
    assert denials, "the bucket policy must deny requests without TLS"
    denied = {resource for statement in denials for resource in statement["Resource"]}
    assert {f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"} <= denied
    assert stack.moto_omissions == (
        "RecordsBucketPolicy: statement DenyInsecureTransport not applied "
        "(moto ignores its condition and would deny every request)",
    )
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert any(
        r.get("Filter", {}).get("Prefix") == "staging/" and r["Expiration"]["Days"] == 7
        for r in rules
    )


def test_table_is_on_demand_encrypted_with_point_in_time_recovery(
    stack: ProvisionedStack,
) -> None:
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    table = dynamodb.describe_table(TableName=stack.table_name)["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["SSEDescription"]["Status"] in {"ENABLED", "ENABLING"}
    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
        ("pk", "HASH"),
        ("sk", "RANGE"),
    }
    (gsi1,) = table["GlobalSecondaryIndexes"]
    assert gsi1["IndexName"] == "gsi1"
    # only what the listings read: a write that changes none of it is not written there
    assert gsi1["Projection"]["ProjectionType"] == "INCLUDE"
    projected = set(gsi1["Projection"]["NonKeyAttributes"])
    assert {"record_id", "body", "url", "source_id"} <= projected
    # not what every job moves: a run's counters and state, a URL's outcome and harvest state
    assert projected.isdisjoint({"entered", "settled", "updated_at", "state", "outcome"})
    backups = dynamodb.describe_continuous_backups(TableName=stack.table_name)
    pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


def test_work_queues_redrive_to_their_own_dead_letter_queue(stack: ProvisionedStack) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    for queue in WORK_QUEUES:
        attributes = sqs.get_queue_attributes(
            QueueUrl=stack.queue_urls[queue], AttributeNames=["All"]
        )["Attributes"]
        redrive = json.loads(attributes["RedrivePolicy"])
        dead_letters = queue.removesuffix("Queue") + "DeadLetterQueue"
        assert redrive["deadLetterTargetArn"] == stack.queue_arns[dead_letters], queue
        assert 1 <= int(redrive["maxReceiveCount"]) <= 10, queue
        assert attributes["SqsManagedSseEnabled"] == "true", queue


def test_every_function_sees_the_complete_resolved_environment(stack: ProvisionedStack) -> None:
    for function in FUNCTIONS:
        env = stack.function_env(function)
        assert set(env) >= SHARED_ENV, function
        assert env["RECORDS_BUCKET"] == stack.bucket_name
        assert env["CATALOG_TABLE"] == stack.table_name
        assert env["SITEMAP_QUEUE_URL"] == stack.queue_urls["SitemapExpanderQueue"]
        assert env["URL_QUEUE_URL"] == stack.queue_urls["UrlResolverQueue"]
        assert env["DOCUMENT_QUEUE_URL"] == stack.queue_urls["ExtractorQueue"]
        assert env["INDEX_QUEUE_URL"] == stack.queue_urls["IndexerQueue"]
        assert env["ALLOW_LOOPBACK"] == "false"
        assert all(isinstance(value, str) and "${" not in value for value in env.values())


def test_crosswalk_queue_policy_admits_only_the_records_bucket(stack: ProvisionedStack) -> None:
    policy = props("CrosswalkQueuePolicy")
    assert [getatt_target(q) if "Fn::GetAtt" in q else q["Ref"] for q in policy["Queues"]] == [
        "CrosswalkQueue"
    ]
    (statement,) = stack.resolve(policy["PolicyDocument"])["Statement"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == stack.queue_arns["CrosswalkQueue"]
    conditions = statement["Condition"]
    source_arn = conditions.get("ArnEquals", conditions.get("ArnLike", {}))["aws:SourceArn"]
    assert source_arn == f"arn:aws:s3:::{stack.bucket_name}"
    assert conditions["StringEquals"]["aws:SourceAccount"] == stack.account_id
    depends = RESOURCES[RECORDS_BUCKET_ID].get("DependsOn", [])
    assert "CrosswalkQueuePolicy" in ([depends] if isinstance(depends, str) else depends)


@pytest.mark.parametrize("idempotency_table", ["false", "true"])
def test_policies_name_only_provisioned_resources(idempotency_table: str) -> None:
    """No S3, SQS or DynamoDB action is granted on '*' or on anything outside the stack."""
    with mocked_stack(parameters={IDEMPOTENCY_PARAMETER: idempotency_table}) as stack:
        _assert_policies_name_only_provisioned_resources(stack)


def _assert_policies_name_only_provisioned_resources(stack: ProvisionedStack) -> None:
    queue_names = {stack.resolve({"Fn::GetAtt": [q, "QueueName"]}) for q in QUEUES}
    table_arn = stack.resolve({"Fn::GetAtt": [CATALOG_TABLE_ID, "Arn"]})
    bucket_arn = f"arn:aws:s3:::{stack.bucket_name}"
    tables = set(stack.tables.values())
    for function in FUNCTIONS:
        # Resolved: a conditional policy (!If) is there or not, as in the deployed stack.
        for policy in stack.resolve(props(function).get("Policies", [])):
            assert isinstance(policy, dict), f"{function}: managed policy {policy!r}"
            if "Statement" not in policy:
                ((name, arguments),) = policy.items()
                target = stack.resolve(arguments[POLICY_TEMPLATE_TARGETS[name]])
                assert target in queue_names | {stack.bucket_name} | tables, function
                continue
            for statement in stack.resolve(policy["Statement"]):
                actions = statement["Action"]
                actions = [actions] if isinstance(actions, str) else actions
                if not any(a == "*" or a.startswith(DATA_SERVICES) for a in actions):
                    continue
                resources = statement["Resource"]
                for resource in [resources] if isinstance(resources, str) else resources:
                    assert resource != "*", f"{function}: {actions} on '*'"
                    assert resource in {bucket_arn, table_arn, *stack.queue_arns.values()} or (
                        resource.startswith((bucket_arn + "/", table_arn + "/index/"))
                    ), f"{function}: {actions} on {resource}"


# ----------------------------------------------------------------------------- template rules


def test_every_sqs_consumer_reports_batch_item_failures() -> None:
    consumers = [f for f in FUNCTIONS if sqs_events(f)]
    assert consumers, "no function consumes a queue"
    for function in consumers:
        for event in sqs_events(function):
            assert "ReportBatchItemFailures" in event.get("FunctionResponseTypes", []), function


def test_batch_sizes_are_what_sqs_allows_and_what_each_stage_can_finish_in_time() -> None:
    """docs/decisions/0096-bigger-batches.md."""
    for function in [f for f in FUNCTIONS if sqs_events(f)]:
        timeout = function_setting(function, "Timeout")
        for event in sqs_events(function):
            least, most = number_range(event["BatchSize"])
            window = event.get("MaximumBatchingWindowInSeconds", 0)
            assert 1 <= least <= most <= 10_000, function  # noqa: PLR2004
            # AWS refuses a batch of more than 10 without a batching window
            assert most <= 10 or window >= 1, function  # noqa: PLR2004
            if function == "SitemapExpanderFunction":  # one sitemap (part) at a time
                assert most == 1
            elif function == "UrlResolverFunction":  # each job may wait on a publisher
                assert most <= 10  # noqa: PLR2004
            elif function != "CrosswalkFunction":  # (which only acknowledges notifications)
                # at least a second per job at the largest batch an operator may choose
                assert timeout / most >= 1, function


def number_range(value: Any) -> tuple[int, int]:
    """The smallest and largest value a Number property may take: itself, or the bounds of the
    parameter it refers to."""
    if isinstance(value, dict):
        spec = TEMPLATE["Parameters"][value["Ref"]]
        assert spec["Type"] == "Number"
        assert spec["MinValue"] <= spec["Default"] <= spec["MaxValue"]
        return int(spec["MinValue"]), int(spec["MaxValue"])
    return int(value), int(value)


def test_every_work_queue_feeds_exactly_its_stage() -> None:
    feeds = {
        getatt_target(event["Queue"]): function
        for function in FUNCTIONS
        for event in sqs_events(function)
    }
    assert feeds == FEEDS
    assert set(WORK_QUEUES) == set(FEEDS)


def test_every_queue_has_its_own_dead_letter_queue() -> None:
    assert len(DEAD_LETTER_QUEUES) == len(set(DEAD_LETTER_QUEUES)) == len(WORK_QUEUES)
    for queue in WORK_QUEUES:
        redrive = props(queue)["RedrivePolicy"]
        dead_letters = getatt_target(redrive["deadLetterTargetArn"])
        assert dead_letters == queue.removesuffix("Queue") + "DeadLetterQueue"
        assert isinstance(redrive["maxReceiveCount"], int)
        assert 1 <= redrive["maxReceiveCount"] <= 10
        # A standard queue keeps the enqueue time on redrive: dead letters must outlive it.
        retention = props(queue).get("MessageRetentionPeriod", 345600)
        assert props(dead_letters)["MessageRetentionPeriod"] == 1209600
        assert props(dead_letters)["MessageRetentionPeriod"] > retention
        assert "RedrivePolicy" not in props(dead_letters)
    for queue in QUEUES:
        assert props(queue).get("SqsManagedSseEnabled") is True or props(queue).get(
            "KmsMasterKeyId"
        ), f"{queue} is not encrypted"


def test_visibility_timeout_is_at_least_six_function_timeouts() -> None:
    for function in FUNCTIONS:
        timeout = function_setting(function, "Timeout")
        for event in sqs_events(function):
            queue = getatt_target(event["Queue"])
            window = event.get("MaximumBatchingWindowInSeconds", 0)
            assert props(queue)["VisibilityTimeout"] >= 6 * timeout + window, (function, queue)


def _typical_entries() -> Callable[[int], CatalogEntry]:
    """The closing-memory benchmark's entries of a harvest's sizes (bench/close_memory_bench.py:
    ``typical_entry``)."""
    path = Path(__file__).resolve().parents[2] / "bench" / "close_memory_bench.py"
    spec = importlib.util.spec_from_file_location("close_memory_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    typical: Callable[[int], CatalogEntry] = bench.typical_entry
    return typical


def test_the_function_that_closes_runs_has_local_disk_for_a_million_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closing orders a source's record entries on local disk past 10,000 (external_sort): the
    # spill of 2,000 entries as the catalogue holds them, measured, sets what a million need.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    entries = map(_typical_entries(), range(2_000))
    ordered = sorted_pairs(((e.record_id, e) for e in entries), spill_after=100)
    next(ordered)  # (all of them written, the first read back)
    (spill,) = tmp_path.glob("cdif-sort-*")
    per_record = spill.stat().st_size / 2_000
    ordered.close()
    size_mb = props("SchedulerFunction")["EphemeralStorage"]["Size"]
    assert 500 < per_record < 2_000  # (a sanity check of the measure: about 1 KB)
    assert size_mb * 2**20 >= 1_000_000 * per_record * 1.5  # (a source's URLs spill too)


def test_bucket_properties_keep_it_private_versioned_and_encrypted() -> None:
    bucket = props(RECORDS_BUCKET_ID)
    assert bucket["VersioningConfiguration"]["Status"] == "Enabled"
    (sse,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(bucket["PublicAccessBlockConfiguration"]) == 4
    assert RESOURCES[RECORDS_BUCKET_ID]["DeletionPolicy"] == "Retain"
    (queue_config,) = bucket["NotificationConfiguration"]["QueueConfigurations"]
    assert getatt_target(queue_config["Queue"]) == "CrosswalkQueue"
    assert queue_config["Filter"]["S3Key"]["Rules"] == [{"Name": "prefix", "Value": "records/"}]


def test_table_properties_keep_it_on_demand_with_pitr() -> None:
    table = props(CATALOG_TABLE_ID)
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert RESOURCES[CATALOG_TABLE_ID]["DeletionPolicy"] == "Retain"


def test_every_api_method_requires_an_api_key() -> None:
    apis = {lid for lid, res in RESOURCES.items() if res["Type"] == "AWS::Serverless::Api"}
    assert not [lid for lid, res in RESOURCES.items() if res["Type"] == "AWS::Serverless::HttpApi"]
    for api in apis:
        auth = props(api)["Auth"]
        assert auth["ApiKeyRequired"] is True, api
        plan = auth["UsagePlan"]
        assert plan["CreateUsagePlan"] in {"PER_API", "SHARED"}, api
        assert {"RateLimit", "BurstLimit"} <= set(plan["Throttle"]), api
        assert {"Limit", "Period"} <= set(plan["Quota"]), api
        settings = props(api)["MethodSettings"]
        assert any("ThrottlingRateLimit" in s and "ThrottlingBurstLimit" in s for s in settings)
    routes = set()
    for function in FUNCTIONS:
        assert "FunctionUrlConfig" not in props(function), f"{function} has an open function URL"
        for event in props(function).get("Events", {}).values():
            assert event["Type"] != "HttpApi", function
            if event["Type"] != "Api":
                continue
            api_event = event["Properties"]
            # An Api event without RestApiId would create an implicit API without keys.
            assert api_event.get("RestApiId", {}).get("Ref") in apis, function
            assert api_event.get("Auth", {}).get("ApiKeyRequired", True) is True, function
            routes.add((api_event["Method"].upper(), api_event["Path"]))
    # Exactly the routes of the intake API (its OpenAPI document is generated from the code),
    # and on each of its paths ANY, for the function to answer other methods 405.
    paths = openapi_document()["paths"]
    assert routes == {(method.upper(), path) for path, ops in paths.items() for method in ops} | {
        ("ANY", path) for path in paths
    }


def test_functions_send_only_to_the_next_stage_and_read_only_where_they_read() -> None:
    sends = {
        function: {
            getatt_target(policy["SQSSendMessagePolicy"]["QueueName"])
            for policy in props(function).get("Policies", [])
            if isinstance(policy, dict) and "SQSSendMessagePolicy" in policy
        }
        for function in FUNCTIONS
    }
    assert sends == SENDS_TO
    for function in READS_ONLY_CATALOG:
        names = {name for policy in props(function)["Policies"] for name in policy}
        assert "DynamoDBReadPolicy" in names
        assert not names & {"DynamoDBCrudPolicy", "DynamoDBWritePolicy"}, function


def test_functions_share_runtime_tracing_and_a_layer_built_for_their_architecture() -> None:
    layer = RESOURCES["CoreLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"].rstrip("/") == "layers/core"
    # Built by layers/core/Makefile (bytecode, locked wheels): its target, runtime and platform.
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (REPO_ROOT / "layers" / "core" / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^build-CoreLayer:", makefile, flags=re.MULTILINE)
    assert "--python-version 3.11" in makefile
    assert f"_{layer['Metadata']['BuildArchitecture']} " in makefile
    for function in FUNCTIONS:
        assert function_setting(function, "Runtime") == "python3.11"
        assert function_setting(function, "Tracing") == "Active"
        assert {"Ref": "CoreLayer"} in function_setting(function, "Layers")
        (architecture,) = function_setting(function, "Architectures")
        assert layer["Metadata"].get("BuildArchitecture", "x86_64") == architecture
        assert architecture in layer["Properties"]["CompatibleArchitectures"]
        assert props(function)["CodeUri"].startswith("functions/")


# ----------------------------------------------------------------------------- hardening


def test_the_scheduler_s_failed_ticks_land_in_its_own_dead_letter_queue(
    stack: ProvisionedStack,
) -> None:
    scheduler = props("SchedulerFunction")
    # Its tick is invoked asynchronously: a failure after Lambda's retries goes to the queue
    on_failure = scheduler["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]
    assert on_failure["Type"] == "SQS"
    assert getatt_target(on_failure["Destination"]) == SCHEDULER_DEAD_LETTERS
    assert 0 <= scheduler["EventInvokeConfig"]["MaximumRetryAttempts"] <= 2
    # and so does a tick EventBridge could not deliver at all
    (tick,) = [e["Properties"] for e in scheduler["Events"].values() if e["Type"] == "Schedule"]
    assert getatt_target(tick["DeadLetterConfig"]["Arn"]) == SCHEDULER_DEAD_LETTERS
    # which only that rule may send to (the rule is named, so the policy can name it)
    policies = [
        p
        for p in RESOURCES.values()
        if p["Type"] == "AWS::SQS::QueuePolicy"
        and p["Properties"]["Queues"] == [{"Ref": SCHEDULER_DEAD_LETTERS}]
    ]
    (policy,) = policies
    (statement,) = stack.resolve(policy["Properties"]["PolicyDocument"])["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == stack.queue_arns[SCHEDULER_DEAD_LETTERS]
    rule = f"arn:aws:events:{stack.region}:{stack.account_id}:rule/{stack.resolve(tick['Name'])}"
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == rule
    # Kept as long as the stages' dead letters, encrypted, and never redriven anywhere
    sqs = boto3.client("sqs", region_name="us-east-1")
    attributes = sqs.get_queue_attributes(
        QueueUrl=stack.queue_urls[SCHEDULER_DEAD_LETTERS], AttributeNames=["All"]
    )["Attributes"]
    assert attributes["MessageRetentionPeriod"] == "1209600"
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert "RedrivePolicy" not in attributes
    assert json.loads(attributes["Policy"])["Statement"][0]["Principal"] == statement["Principal"]


def test_the_fetching_stages_reserve_the_concurrency_their_pollers_may_use() -> None:
    parameters = TEMPLATE["Parameters"]
    for function in ("SitemapExpanderFunction", "UrlResolverFunction"):
        reserved = props(function)["ReservedConcurrentExecutions"]
        (event,) = sqs_events(function)
        # Pollers bounded by the same parameter: never throttled by their own reservation
        assert event["ScalingConfig"]["MaximumConcurrency"] == reserved, function
        parameter = parameters[reserved["Ref"]]
        # 0 would stop the stage; SQS's pollers need at least 2
        assert parameter["MinValue"] >= 2 and parameter["Default"] >= parameter["MinValue"]
        assert parameter["Default"] <= 50, "a default that leaves the account its concurrency"
    for function in FUNCTIONS:
        reserved = props(function).get("ReservedConcurrentExecutions")
        for event in sqs_events(function) if reserved is not None else []:
            assert event.get("ScalingConfig", {}).get("MaximumConcurrency") == reserved


def test_stages_that_only_read_and_write_objects_cannot_delete_them() -> None:
    for function in ("ExtractorFunction", "IndexerFunction", "CrosswalkFunction"):
        policies = props(function)["Policies"]
        assert not [p for p in policies if "S3CrudPolicy" in p or "S3WritePolicy" in p], function
        actions = {
            action
            for policy in policies
            for statement in policy.get("Statement", [])
            for action in (
                [statement["Action"]]
                if isinstance(statement["Action"], str)
                else statement["Action"]
            )
        }
        assert {a for a in actions if a.startswith("s3:")} <= {
            "s3:GetObject",
            "s3:PutObject",
            "s3:ListBucket",
        }, function


def test_the_operators_contact_parameter_reaches_every_function() -> None:
    # (the User-Agent names it: publishers use it to reach the operator)
    assert TEMPLATE["Parameters"]["OperatorContact"]["Default"] == ""
    with mocked_stack(parameters={"OperatorContact": "mailto:ops@example.org"}) as stack:
        for function in FUNCTIONS:
            assert stack.function_env(function)["OPERATOR_CONTACT"] == "mailto:ops@example.org"


def _dynamodb_crud_targets(stack: ProvisionedStack, function: str) -> set[str]:
    """The tables a function's DynamoDBCrudPolicy entries name, as the deployed stack has them."""
    return {
        stack.resolve(policy["DynamoDBCrudPolicy"]["TableName"])
        for policy in stack.resolve(props(function).get("Policies", []))
        if isinstance(policy, dict) and "DynamoDBCrudPolicy" in policy
    }


def test_no_idempotency_table_unless_asked_for() -> None:
    # A redelivered job runs again; the stages' writes are idempotent (decisions 0054, 0087)
    assert TEMPLATE["Parameters"][IDEMPOTENCY_PARAMETER]["Default"] == "false"
    with mocked_stack() as stack:
        assert set(stack.tables) == {CATALOG_TABLE_ID}
        names = set(boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"])
        assert names == {stack.table_name}
        for function in FUNCTIONS:
            env = stack.function_env(function)
            assert AwsConfig.from_env(env).idempotency_table is None, function
            assert _dynamodb_crud_targets(stack, function) <= {stack.table_name}, function


def test_the_idempotency_table_when_asked_for_reaches_every_job_stage() -> None:
    with mocked_stack(parameters={IDEMPOTENCY_PARAMETER: "true"}) as stack:
        table = stack.tables[IDEMPOTENCY_TABLE_ID]
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        described = dynamodb.describe_table(TableName=table)["Table"]
        # Powertools' item: its key "id", expiring through TTL on "expiration"
        assert [(k["AttributeName"], k["KeyType"]) for k in described["KeySchema"]] == [
            ("id", "HASH")
        ]
        assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == "expiration"
        assert ttl["TimeToLiveStatus"] in {"ENABLED", "ENABLING"}
        for function in FUNCTIONS:
            env = stack.function_env(function)
            assert AwsConfig.from_env(env).idempotency_table == table, function
        for function in JOB_STAGES:
            assert table in _dynamodb_crud_targets(stack, function), function
