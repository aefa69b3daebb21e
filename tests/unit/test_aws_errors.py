"""The one mapper from AWS SDK errors to the harvester's errors, on real botocore exceptions."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from cdif_harvester.adapters.aws_errors import (
    CONDITION_FAILED,
    SDK_ERRORS,
    TRANSACTION_CANCELED,
    aws_errors,
    error_code,
)
from cdif_harvester.errors import HarvestError, RetryableError, StorageError


def _client_error(code: str, operation: str = "PutItem", **extra: Any) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": f"{code} happened"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **extra,
    }
    return ClientError(response, operation)


@pytest.mark.parametrize(
    "error",
    [
        _client_error("ProvisionedThroughputExceededException"),
        _client_error("ResourceNotFoundException", "GetItem"),
        _client_error("AccessDenied", "GetObject"),
        _client_error(CONDITION_FAILED),  # a failed condition nobody asked about is a fault
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://s3.amazonaws.com"),
    ],
    ids=["throttled", "no-table", "access-denied", "condition", "no-endpoint", "read-timeout"],
)
def test_every_sdk_error_becomes_a_retryable_storage_error(error: Exception) -> None:
    assert isinstance(error, SDK_ERRORS)
    with pytest.raises(StorageError) as raised, aws_errors("DynamoDB put RUN#r"):
        raise error
    mapped = raised.value
    assert isinstance(mapped, RetryableError) and mapped.reason == "storage"
    assert mapped.__cause__ is error
    assert str(mapped) == f"DynamoDB put RUN#r failed: {error}"


def test_a_code_the_site_asked_about_passes_unchanged() -> None:
    error = _client_error(CONDITION_FAILED, "UpdateItem")
    with pytest.raises(ClientError) as raised, aws_errors("op", passing={CONDITION_FAILED}):
        raise error
    assert raised.value is error


def test_codes_not_asked_about_are_mapped_even_next_to_one_that_is() -> None:
    error = _client_error("ThrottlingException", "UpdateItem")
    with pytest.raises(StorageError) as raised, aws_errors("op", passing={CONDITION_FAILED}):
        raise error
    assert raised.value.__cause__ is error


def test_s3_missing_key_codes_pass_when_asked_for() -> None:
    for code in ("NoSuchKey", "404"):
        error = _client_error(code, "GetObject")
        with pytest.raises(ClientError) as raised, aws_errors("S3 get k", passing={code}):
            raise error
        assert raised.value is error


def test_a_cancelled_transaction_passes_only_with_its_reasons() -> None:
    reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    said = _client_error(TRANSACTION_CANCELED, "TransactWriteItems", CancellationReasons=reasons)
    with pytest.raises(ClientError) as raised, aws_errors("op", passing={TRANSACTION_CANCELED}):
        raise said
    assert raised.value is said

    # Without the reasons the caller cannot tell which condition failed: it is a fault.
    silent = _client_error(TRANSACTION_CANCELED, "TransactWriteItems")
    with pytest.raises(StorageError) as mapped, aws_errors("op", passing={TRANSACTION_CANCELED}):
        raise silent
    assert mapped.value.__cause__ is silent


@pytest.mark.parametrize(
    "error",
    [ValueError("not from the SDK"), KeyError("k"), HarvestError("already ours")],
    ids=["ValueError", "KeyError", "HarvestError"],
)
def test_other_exceptions_pass_untouched(error: Exception) -> None:
    with pytest.raises(type(error)) as raised, aws_errors("op"):
        raise error
    assert raised.value is error and raised.value.__cause__ is None


def test_no_error_no_change() -> None:
    with aws_errors("op"):
        value = 1
    assert value == 1


def test_error_code_reads_the_answer() -> None:
    assert error_code(_client_error("NoSuchKey")) == "NoSuchKey"
    assert error_code(ClientError({}, "GetObject")) == ""
