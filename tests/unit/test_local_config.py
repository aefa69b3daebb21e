"""The local composition root's configuration: the command's options reach the stage settings."""

from __future__ import annotations

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
    assert LocalConfig().settings() == on_aws == Settings()
