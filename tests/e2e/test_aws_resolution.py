"""Every resolution pattern on AWS (moto): v3 messages through real SQS queues, records and
Signposting views in S3, outcomes with their pattern in DynamoDB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.model import Outcome
from tests.support.aws import ProvisionedStack
from tests.support.pipeline import invoke, run_pipeline
from tests.support.signposting_site import EXPECTED_PATTERNS, signposting_site

INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)
pytestmark = [pytest.mark.aws, pytest.mark.network]


@pytest.fixture
def publisher() -> Iterator[PublisherSite]:
    with signposting_site() as served:
        yield served


def test_every_pattern_resolves_on_aws(stack: ProvisionedStack, publisher: PublisherSite) -> None:
    sqs = boto3.client("sqs", region_name=stack.region)
    s3 = boto3.client("s3", region_name=stack.region)
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["body"] = json.dumps({"url": publisher.url("/robots.txt")})
    # POST /harvests is an operator's: the event file's key id is one (OPERATOR_API_KEY_IDS)
    operator = event["requestContext"]["identity"]["apiKeyId"]
    response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert response["statusCode"] == 202, response
    run_id = json.loads(response["body"])["run_id"]

    stats = run_pipeline(sqs, stack, ALLOW_LOOPBACK="true")

    assert stats.failures == []
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    outcomes = {o.url.removeprefix(publisher.base_url): o for o in catalog.outcomes(run_id)}
    assert {path: o.pattern for path, o in outcomes.items()} == EXPECTED_PATTERNS
    assert {o.outcome for o in outcomes.values()} == {Outcome.RECORD}

    def s3_json(key: str) -> Any:
        return json.loads(s3.get_object(Bucket=stack.bucket_name, Key=key)["Body"].read())

    # The links the resolver saw (an HTTP Link header, a linkset, a Signmap) reach the views.
    for path, href in {
        "/resource/hl": "https://doi.org/10.5072/hl",
        "/resource/ls": "https://orcid.org/0000-0002-1825-0097",
        "/resource/sm": "https://doi.org/10.5072/sm",
    }.items():
        (ref,) = outcomes[path].records
        assert ref.valid, (path, ref.errors)
        assert href in json.dumps(s3_json(ref.view_keys["linkset-json"])), path
        provenance = s3_json(ref.report_key)["provenance"]
        assert provenance["pattern"] == EXPECTED_PATTERNS[path]
