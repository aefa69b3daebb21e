"""The cost benchmark's model: item sizes and units by AWS's rules, prices on known counts, and
the call counter counting what a moto client does (bench/cost_model.py)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

pytestmark = [pytest.mark.aws]

MODULE = Path(__file__).resolve().parents[2] / "bench" / "cost_model.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("cost_model", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cost_model"] = module
    spec.loader.exec_module(module)
    return module


cost_model = _module()


def test_item_size_follows_the_published_rules() -> None:
    # names and strings by their UTF-8 bytes; a list is 3 bytes plus 1 per element
    item = {"pk": {"S": "abc"}, "é": {"S": "xy"}, "l": {"L": [{"S": "a"}, {"BOOL": True}]}}
    assert cost_model.item_size(item) == (2 + 3) + (2 + 2) + (1 + 3 + (1 + 1) + (1 + 1))
    assert cost_model.item_size(None) == 0


def test_units_round_up_per_kilobyte_and_per_four_kilobytes() -> None:
    assert [cost_model.write_units(s) for s in (0, 1024, 1025, 3000)] == [1, 1, 2, 3]
    assert cost_model.read_units(4096, consistent=True) == 1
    assert cost_model.read_units(4097, consistent=True) == 2
    assert cost_model.read_units(4097, consistent=False) == 1


def test_prices_on_known_counts() -> None:
    tally = cost_model.Tally(
        calls=Counter({"s3.PutObject": 2000, "s3.GetObject": 10_000, "s3.DeleteObject": 50}),
        sqs_chunks=1_000_000,
        wru=Counter({"t": 2_000_000}),
        rru=Counter({"t": 4_000_000}),
    )
    usage = cost_model.Usage(
        tally=tally,
        lambda_requests=5_000_000,
        gb_seconds=60_000.0,
        log_bytes=2 * 1024**3,
        sqs_delivery_requests=500_000,
    )
    dollars = cost_model.price(usage, cost_model.Prices())
    assert dollars["S3 PUT-class requests"] == pytest.approx(2000 / 1000 * 0.005)
    assert dollars["S3 GET-class requests"] == pytest.approx(10_000 / 1000 * 0.0004)
    assert dollars["SQS requests (handlers)"] == pytest.approx(0.40)
    assert dollars["SQS requests (event source mapping)"] == pytest.approx(0.20)
    assert dollars["DynamoDB writes"] == pytest.approx(2 * 0.625)
    assert dollars["DynamoDB reads"] == pytest.approx(4 * 0.125)
    assert dollars["Lambda requests"] == pytest.approx(5 * 0.20)
    assert dollars["Lambda duration (estimated)"] == pytest.approx(60_000 * 0.0000166667)
    assert dollars["CloudWatch Logs ingestion"] == pytest.approx(2 * 0.50)


def test_the_counter_counts_the_calls_of_a_moto_client() -> None:
    from moto import mock_aws

    with mock_aws():
        setup = boto3.client("dynamodb", region_name="us-east-1")
        setup.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "gsi1",
                    "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bench-bucket")
        counter = cost_model.CallCounter()
        with counter.installed():
            s3 = boto3.client("s3", region_name="us-east-1")
            dynamo = boto3.client("dynamodb", region_name="us-east-1")
        outside = boto3.client("s3", region_name="us-east-1")  # made after: not counted
        s3.put_object(Bucket="bench-bucket", Key="a", Body=b"x" * 100)
        s3.put_object(Bucket="bench-bucket", Key="b", Body=b"y")
        s3.get_object(Bucket="bench-bucket", Key="a")
        outside.get_object(Bucket="bench-bucket", Key="a")
        # 1,500 bytes: two write units, and two more in the index it is projected into
        dynamo.put_item(TableName="t", Item={"pk": {"S": "k"}, "g": {"S": "x" * 1497}})
        # without the index key: the index entry is deleted (two units, its old size)
        dynamo.put_item(TableName="t", Item={"pk": {"S": "k"}, "v": {"S": "small"}})
        dynamo.get_item(TableName="t", Key={"pk": {"S": "k"}}, ConsistentRead=True)
        dynamo.get_item(TableName="t", Key={"pk": {"S": "k"}})

    tally = counter.tally
    assert tally.calls == Counter(
        {"s3.PutObject": 2, "s3.GetObject": 1, "dynamodb.PutItem": 2, "dynamodb.GetItem": 2}
    )
    assert tally.s3_put_class() == 2 and tally.s3_get_class() == 1
    assert tally.s3_put_bytes == 101
    assert tally.wru["t"] == 2 + 2  # the second write is charged the larger (old) size
    assert tally.wru["t/gsi1"] == 2 + 2
    assert tally.rru["t"] == 1 + 0.5
    # the same units, by call and item kind (a key without a sort key is of kind "?")
    assert tally.wru_by_kind == Counter({"PutItem t:?": 4, "index t/gsi1:?": 4})


def test_an_include_index_is_written_only_when_its_keys_or_projected_attributes_change() -> None:
    from moto import mock_aws

    with mock_aws():
        setup = boto3.client("dynamodb", region_name="us-east-1")
        setup.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "gsi1",
                    "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["p"]},
                }
            ],
        )
        counter = cost_model.CallCounter()
        with counter.installed():
            dynamo = boto3.client("dynamodb", region_name="us-east-1")
        big = "x" * 1500  # not projected: two units in the table, none of it in the index
        dynamo.put_item(
            TableName="t",
            Item={"pk": {"S": "k"}, "g": {"S": "a"}, "p": {"S": "1"}, "n": {"S": big}},
        )
        # an attribute the index does not hold: no index write
        dynamo.update_item(
            TableName="t",
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"S": big + "y"}},
        )
        # a projected attribute: one index write of the entry's size (keys and "p")
        dynamo.update_item(
            TableName="t",
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET p = :p",
            ExpressionAttributeValues={":p": {"S": "2"}},
        )

    tally = counter.tally
    assert tally.wru["t"] == 2 + 2 + 2
    assert tally.wru["t/gsi1"] == 1 + 0 + 1
    assert tally.wru_by_kind == Counter(
        {"PutItem t:?": 2, "UpdateItem t:?": 4, "index t/gsi1:?": 2}
    )


def test_reads_are_counted_by_call_and_item_kind() -> None:
    from moto import mock_aws

    with mock_aws():
        setup = boto3.client("dynamodb", region_name="us-east-1")
        setup.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
        )
        big = "x" * 5000  # over 4 KB: two units strongly consistent, one eventually
        setup.put_item(TableName="t", Item={"pk": {"S": "URL#a"}, "sk": {"S": "LATEST"}})
        setup.put_item(
            TableName="t", Item={"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}, "b": {"S": big}}
        )
        counter = cost_model.CallCounter()
        with counter.installed():
            dynamo = boto3.client("dynamodb", region_name="us-east-1")
        latest = {"pk": {"S": "URL#a"}, "sk": {"S": "LATEST"}}
        missing = {"pk": {"S": "URL#b"}, "sk": {"S": "LATEST"}}
        run = {"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}}
        dynamo.get_item(TableName="t", Key=run, ConsistentRead=True)
        dynamo.get_item(TableName="t", Key=run)
        dynamo.get_item(TableName="t", Key=missing, ConsistentRead=True)  # charged all the same
        # each table of a batch has its own consistency; a key not found is charged too
        dynamo.batch_get_item(
            RequestItems={"t": {"Keys": [latest, missing, run], "ConsistentRead": True}}
        )
        dynamo.batch_get_item(RequestItems={"t": {"Keys": [latest]}})
        dynamo.query(
            TableName="t",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "RUN#r"}},
        )

    tally = counter.tally
    assert tally.rru_by_kind == Counter(
        {
            "GetItem t:RUN": 2 + 1,
            "GetItem t:LATEST": 1,
            "BatchGetItem t:LATEST": 1 + 1 + 0.5,
            "BatchGetItem t:RUN": 2,
            "Query t:RUN": 1,
        }
    )
    assert tally.rru["t"] == sum(tally.rru_by_kind.values())
    assert tally.copy().rru_by_kind == tally.rru_by_kind
