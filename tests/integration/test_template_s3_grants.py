"""The S3 grants of the extractor, indexer and crosswalk are what they use: no more, no less.

A harvest of the demo publisher runs through the real handlers under moto, with a hook on every
S3 call the handlers' boto3 clients make, noted with the function that made it. Each call must
be allowed by that function's statements in template.yaml (moto does not enforce IAM, so this
is where a too narrow grant shows), and each grant of those functions must be used (so a
broader grant, such as S3CrudPolicy's delete, shows too).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from tests.support import pipeline
from tests.support.aws import ProvisionedStack, load_template

pytestmark = [pytest.mark.aws, pytest.mark.network]

RESOURCES: dict[str, Any] = load_template()["Resources"]
#: The stages whose S3 grants are narrowed to the prefixes they read and write.
NARROWED = ("ExtractorFunction", "IndexerFunction")
#: The stages that need no S3 at all (the crosswalk: views are made on read).
WITHOUT_S3 = ("CrosswalkFunction",)
#: The IAM action each S3 operation of the object store needs; a read of a missing key needs
#: s3:ListBucket too, or S3 answers 403 instead of 404.
ACTIONS = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "ListObjectsV2": "s3:ListBucket",
}
#: Grants a harvest of the demo does not exercise, each with why it is there.
UNEXERCISED = {
    ("IndexerFunction", "s3:ListBucket", ""): "a lost hand-over must answer 404, not 403",
}
# A landing page too large for a document job's message (its document waits in staging/).
BIG_DATASET = {
    "@context": "https://schema.org/",
    "@type": "Dataset",
    "@id": "https://example.org/big#dataset",
    "name": "A dataset with a long description",
    "description": "x" * (300 * 1024),
}
BIG_PAGE = (
    '<!doctype html><html><head><script type="application/ld+json">'
    f"{json.dumps(BIG_DATASET)}</script></head><body></body></html>"
)
INTAKE_EVENT = (
    Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
)

Call = tuple[str, str, str]  # (function, action, key or "" for the bucket)


@pytest.fixture
def s3_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Call]]:
    """Every S3 call the handlers make while the test runs, as (function, action, key)."""
    calls: list[Call] = []
    current: list[str] = []
    invoke = pipeline.invoke

    def invoke_noted(
        stack: ProvisionedStack, function: str, event: dict[str, Any], **overrides: str
    ) -> dict[str, Any]:
        current.append(function)
        try:
            return invoke(stack, function, event, **overrides)
        finally:
            current.pop()

    def note(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["noted_key"] = str(params.get("Key", ""))

    def after(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not current or model.name not in ACTIONS:
            return
        key = context.get("noted_key", "")
        calls.append((current[-1], ACTIONS[model.name], key))
        if http_response.status_code == 404:  # noqa: PLR2004 - a missing key
            calls.append((current[-1], "s3:ListBucket", ""))

    monkeypatch.setattr(pipeline, "invoke", invoke_noted)
    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    events = session._session  # the botocore session whose emitter every new client copies
    events.register("before-parameter-build.s3", note)
    events.register("after-call.s3", after)
    yield calls
    events.unregister("before-parameter-build.s3", note)
    events.unregister("after-call.s3", after)


def _grants(stack: ProvisionedStack, function: str) -> set[tuple[str, str]]:
    """The (action, resource pattern) pairs ``function``'s statements allow on the bucket, the
    bucket as "" and an object pattern as the key pattern after the bucket's ARN."""
    bucket_arn = f"arn:aws:s3:::{stack.bucket_name}"
    found: set[tuple[str, str]] = set()
    for policy in RESOURCES[function]["Properties"]["Policies"]:
        assert "S3CrudPolicy" not in policy, f"{function}: S3CrudPolicy may delete anything"
        for statement in stack.resolve(policy.get("Statement", [])):
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                if not action.startswith("s3:"):
                    continue
                for resource in [resources] if isinstance(resources, str) else resources:
                    assert statement["Effect"] == "Allow"
                    assert resource == bucket_arn or resource.startswith(bucket_arn + "/")
                    found.add((action, resource.removeprefix(bucket_arn).removeprefix("/")))
    return found


def _harvest(
    stack: ProvisionedStack,
    site: PublisherSite,
    *,
    keep_bodies: bool = False,
    path: str = "",
    segments: bool = False,
) -> None:
    event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
    event["body"] = json.dumps({"url": site.url(path or "/robots.txt")})
    operator = event["requestContext"]["identity"]["apiKeyId"]
    answer = pipeline.invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
    assert answer["statusCode"] == 202, answer
    sqs = boto3.client("sqs", region_name=stack.region)
    keep = str(keep_bodies).lower()
    stats = pipeline.run_pipeline(
        sqs,
        stack,
        ALLOW_LOOPBACK="true",
        KEEP_BODIES=keep,
        RECORD_SEGMENTS=str(segments).lower(),
    )
    assert stats.failures == []


def _change_a_record(site: PublisherSite, words: str = "Yearly", day: str = "2025-06-01") -> None:
    """Serve the kelp survey changed (``words`` diver transects), and its sitemap saying so
    (a newer lastmod, ``day``)."""
    demo = demo_site_dir()
    page = (demo / "datasets" / "kelp-forest-survey.html").read_text(encoding="utf-8")
    changed = page.replace("Annual diver transects", f"{words} diver transects")
    assert changed != page
    html = {"Content-Type": "text/html; charset=utf-8"}
    site.add_route("/datasets/kelp-forest-survey.html", headers=html, body=changed)
    sitemap = (demo / "sitemap-datasets.xml").read_text(encoding="utf-8")
    newer = sitemap.replace("<lastmod>2025-01-27</lastmod>", f"<lastmod>{day}</lastmod>")
    assert newer != sitemap
    site.add_route("/sitemap-datasets.xml", headers={"Content-Type": "application/xml"}, body=newer)


def s3_objects(stack: ProvisionedStack, prefix: str) -> list[str]:
    """The keys under ``prefix`` in the records bucket."""
    s3 = boto3.client("s3", region_name=stack.region)
    found = s3.list_objects_v2(Bucket=stack.bucket_name, Prefix=prefix).get("Contents", [])
    return [str(item["Key"]) for item in found]


def test_narrowed_stages_use_exactly_their_s3_grants(
    stack: ProvisionedStack, site: PublisherSite, s3_calls: list[Call]
) -> None:
    # Given a harvest of the demo site keeping its documents (the extractor reads them from
    # raw/), then another with one record changed in between (the indexer keeps the version it
    # replaces), then a page too large for its message (its document goes through staging/)
    _harvest(stack, site, keep_bodies=True)
    _change_a_record(site)
    _harvest(stack, site)
    assert s3_objects(stack, "versions/"), "the changed record's first version was not kept"
    site.add_route("/big.html", headers={"Content-Type": "text/html"}, body=BIG_PAGE)
    _harvest(stack, site, path="/big.html")
    # and, with record segments, the record changed twice more (the indexer writes a segment,
    # then keeps the version it replaces from that segment)
    for words, day in (("Biannual", "2025-07-01"), ("Monthly", "2025-08-01")):
        _change_a_record(site, words, day)
        _harvest(stack, site, segments=True)
    assert s3_objects(stack, "segments/"), "no segment was written"

    for function in NARROWED:
        grants = _grants(stack, function)
        used = {(action, key) for who, action, key in s3_calls if who == function}
        assert used, f"{function} made no S3 call"
        # Then every call is allowed by a grant of the function
        for action, key in used:
            assert any(
                granted == action and fnmatchcase(key, pattern) for granted, pattern in grants
            ), f"{function}: {action} on {key or 'the bucket'} is not granted"
        # And every grant is used (or is listed with its reason)
        for action, pattern in grants:
            exercised = any(a == action and fnmatchcase(k, pattern) for a, k in used)
            assert exercised or (function, action, pattern) in UNEXERCISED, (
                f"{function}: {action} on {pattern or 'the bucket'} is granted but never used"
            )
    for function in WITHOUT_S3:
        assert _grants(stack, function) == set(), f"{function} needs no S3 grant"
        assert not [call for call in s3_calls if call[0] == function], f"{function} used S3"
