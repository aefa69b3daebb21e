"""The local composition root's configuration: the command's options reach the stage settings."""

from __future__ import annotations

from dataclasses import replace

from cdif_harvester.aws_runtime import AwsConfig
from cdif_harvester.local_runtime import LocalConfig
from cdif_harvester.settings import Settings


def test_options_reach_the_stage_settings() -> None:
    settings = LocalConfig(
        requests_per_host=0,
        host_overrides={"data.example.org": 3},
        trusted_contexts=("https://w3id.org/example/context.jsonld",),
        incremental=False,
    ).settings()
    assert settings.requests_per_host == 1  # never fewer than one request slot
    assert settings.requests_per_host_overrides == {"data.example.org": 3}
    assert settings.trusted_contexts == ("https://w3id.org/example/context.jsonld",)
    assert not settings.incremental and not settings.shacl


def test_both_roots_default_to_the_same_settings() -> None:
    on_aws = AwsConfig.from_env({"RECORDS_BUCKET": "b", "CATALOG_TABLE": "t"}).settings()
    # The one intended difference: on AWS a batch's records and reports go into one segment
    # object (each PUT is billed), locally each is a file a person can open (decision 0086)
    assert on_aws.record_segments and not LocalConfig().settings().record_segments
    assert LocalConfig().settings() == replace(on_aws, record_segments=False) == Settings()
