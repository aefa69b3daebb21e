"""``POST /check`` through the intake function's real handler, under moto.

The answer is the report ``cdif-harvest check --json`` prints for the same document; the check
reads no bucket, table or queue of the stack and writes none (see
docs/decisions/0072-the-publisher-checker.md).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.api.models import CheckAnswer
from cdif_harvester.cli.main import main
from tests.e2e.test_check_cli import nameless_10, page_of, record_10, record_11
from tests.integration.test_intake_api import (
    PUBLISHER,
    STRANGER,
    Answer,
    api_stack,  # noqa: F401 - the fixture
    call,
    queued,
)
from tests.support.aws import ProvisionedStack

pytestmark = [pytest.mark.aws]

URL = "https://soil.example.org/meta/4.jsonld"
LD = {"Content-Type": "application/ld+json"}


def check(stack: ProvisionedStack, text: str, headers: dict[str, str], **kwargs: Any) -> Answer:
    return call(stack, "POST", "/check", raw_body=text, headers=headers, **kwargs)


def cli_report(path: Path, url: str) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["check", str(path), "--json", "--url", url])
    report = json.loads(out.getvalue())
    assert isinstance(report, dict)
    return report


def test_a_posted_record_gets_the_report_the_cli_prints(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    text = json.dumps(record_10())
    # Given a publisher's key (any key may check: nothing of the API is read or kept)
    answer = check(api_stack, text, LD, key=STRANGER, query={"url": URL})
    assert answer.status == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.shaped(CheckAnswer)
    assert body["verdict"] == "valid"
    assert body["records"][0]["warnings"]
    path = tmp_path / "record.jsonld"
    path.write_text(text, encoding="utf-8")
    assert body == cli_report(path, URL)


@pytest.mark.parametrize("media_type", ["application/json", "application/ld+json; charset=utf-8"])
def test_a_broken_profile_answers_200_with_the_invalid_verdict(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
    media_type: str,
) -> None:
    text = json.dumps(record_11("https://soil.example.org/11.html"))
    answer = check(api_stack, text, {"Content-Type": media_type}, key=PUBLISHER)
    body = answer.shaped(CheckAnswer)
    assert answer.status == 200
    assert body["verdict"] == "invalid"
    (record,) = body["records"]
    assert [p["summary"] for p in record["profiles"]] == [
        "core 1.1 valid",
        "discovery 1.1: 1 error",
    ]


def test_an_html_page_is_read_for_its_embedded_record(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
) -> None:
    answer = check(api_stack, page_of(nameless_10()), {"Content-Type": "text/html"})
    body = answer.shaped(CheckAnswer)
    assert body["verdict"] == "invalid"
    (error,) = body["records"][0]["errors"]
    assert error["message"].startswith("schema:name is required")
    assert error["fix"]


def test_what_is_not_a_document_is_refused(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
) -> None:
    answer = check(api_stack, "name: x", {"Content-Type": "text/plain"})
    answer.error(415, "unsupported-media-type")
    broken = check(api_stack, '{"@type": "Dataset",,', LD)
    assert broken.status == 200
    assert broken.shaped(CheckAnswer)["verdict"] == "malformed"


def test_the_body_cap_is_a_documents_not_a_requests(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
) -> None:
    # A record of some tens of KiB is taken (other routes take 8 KiB) ...
    record = record_10()
    record["schema:description"] = "Soil moisture. " * 2000
    text = json.dumps(record)
    assert 16 * 1024 < len(text) < 1024 * 1024
    assert check(api_stack, text, LD).shaped(CheckAnswer)["verdict"] == "valid"
    # ... one over 1 MiB is refused before it is parsed
    record["schema:description"] = "x" * (1024 * 1024)
    check(api_stack, json.dumps(record), LD).error(413, "payload-too-large")
    # ... and the other routes keep their cap
    big = {"url": "https://data.example.org/robots.txt", "pad": "x" * 9000}
    call(api_stack, "POST", "/harvests", body=big).error(413, "payload-too-large")


def test_a_check_writes_nothing_to_the_stack(
    api_stack: ProvisionedStack,  # noqa: F811 - the fixture
) -> None:
    for queue in api_stack.queue_urls:
        queued(api_stack, queue)  # (S3's test event of the notification set up)
    check(api_stack, json.dumps(record_10()), LD).shaped(CheckAnswer)
    listed = boto3.client("s3", region_name=api_stack.region).list_objects_v2(
        Bucket=api_stack.bucket_name
    )
    assert listed.get("KeyCount", 0) == 0
    scan = boto3.client("dynamodb", region_name=api_stack.region).scan(
        TableName=api_stack.table_name
    )
    assert scan["Count"] == 0
    for queue in api_stack.queue_urls:
        assert queued(api_stack, queue) == []
