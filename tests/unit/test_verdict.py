"""The one verdict on an error (stages/jobs.py): deterministic errors end the URL at once,
transient ones are tried again; both drivers follow it."""

from __future__ import annotations

import sqlite3

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from cdif_harvester.aws_runtime import MAX_RECEIVES
from cdif_harvester.errors import (
    Deferred,
    FetchTimeout,
    HarvestError,
    PermanentError,
    StorageError,
)
from cdif_harvester.stages.jobs import verdict
from tests.support.aws import load_template


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (RecursionError("maximum recursion depth exceeded"), "RecursionError"),
        (ValueError("Invalid IPv6 URL"), "ValueError"),
        (KeyError("x"), "KeyError"),
        (TypeError("unhashable"), "TypeError"),
        (sqlite3.IntegrityError("UNIQUE"), "IntegrityError"),
    ],
)
def test_a_deterministic_error_ends_the_url_at_once(exc: Exception, reason: str) -> None:
    error = verdict(exc)
    assert isinstance(error, PermanentError)
    assert error.reason == "internal-error"
    assert str(error) == f"{reason}: {exc}"


def test_a_permanent_error_is_its_own_verdict() -> None:
    error = PermanentError("bad", reason="http-404")
    assert verdict(error) is error
    base = verdict(HarvestError("odd", reason="odd"))
    assert isinstance(base, PermanentError) and base.reason == "odd"


@pytest.mark.parametrize(
    "exc",
    [
        FetchTimeout("slow"),
        StorageError("s3 put_object: SlowDown"),
        Deferred("busy", delay=3),
        MemoryError(),
        KeyboardInterrupt(),
        SystemExit(1),
        OSError(28, "No space left on device"),
        ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem"),
        EndpointConnectionError(endpoint_url="https://s3.amazonaws.com"),
        sqlite3.OperationalError("database is locked"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_a_transient_fault_is_tried_again(exc: BaseException) -> None:
    assert verdict(exc) is None


def test_a_long_message_is_cut_in_the_reason() -> None:
    error = verdict(ValueError("x" * 10_000))
    assert error is not None and len(str(error)) < 600


def test_the_last_delivery_is_the_queues_max_receive_count() -> None:
    template = load_template()
    counts = {
        props["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        for props in template["Resources"].values()
        if props["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in props.get("Properties", {})
    }
    assert counts == {MAX_RECEIVES}
