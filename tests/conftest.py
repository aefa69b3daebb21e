"""Shared test set-up: no test may reach beyond loopback, and AWS credentials are fake."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from tests.support.aws import ProvisionedStack, mocked_stack
from tests.support.netguard import guard_network

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT.parent / "shared" / "corpus"
CDIF_11 = REPO_ROOT.parent / "shared" / "cdif-1.1"


@pytest.fixture(autouse=True, scope="session")
def _no_network_beyond_loopback() -> Iterator[None]:
    """Every test runs with the loopback-only guard (see tests/support/netguard.py)."""
    with guard_network():
        yield


@pytest.fixture(autouse=True, scope="session")
def _fake_aws_credentials() -> None:
    """boto3 must never find real credentials or a real region in tests."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        os.environ[name] = value
    os.environ.pop("AWS_PROFILE", None)


@pytest.fixture(autouse=True)
def _fresh_metrics() -> Iterator[None]:
    """Each test leaves Powertools' metrics empty. The handlers' ``Metrics`` (in
    ``aws_runtime``) lives as long as the process, as in a warm Lambda container where
    ``log_metrics`` flushes it after every invocation; a test that calls a stage without that
    decorator would leave its dimensions to whichever test runs next in this process (and
    which test that is differs when the tests are spread over workers)."""
    yield
    runtime = sys.modules.get("cdif_harvester.aws_runtime")
    if runtime is not None:
        runtime.metrics.clear_metrics()


@pytest.fixture
def corpus() -> Path:
    """The reference corpus beside the repository; tests using it skip when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip("reference corpus (../shared/corpus) not present")
    return CORPUS


@pytest.fixture
def cdif_11() -> Path:
    """The CDIF 1.1 building blocks beside the repository; tests using them skip when absent."""
    if not CDIF_11.is_dir():
        pytest.skip("CDIF 1.1 building blocks (../shared/cdif-1.1) not present")
    return CDIF_11


@pytest.fixture
def site() -> Iterator[PublisherSite]:
    """The bundled demo publisher site, served on 127.0.0.1 for the length of one test."""
    with PublisherSite(demo_site_dir()) as served:
        yield served


@pytest.fixture
def stack() -> Iterator[ProvisionedStack]:
    """The data resources of template.yaml (queues, bucket, table), provisioned in moto."""
    with mocked_stack() as provisioned:
        yield provisioned
