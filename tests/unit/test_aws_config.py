"""The AWS composition root reads its settings from the environment, and says what is wrong."""

from __future__ import annotations

import pytest

from cdif_harvester.aws_runtime import AwsConfig, ConfigError

BASE = {"RECORDS_BUCKET": "b", "CATALOG_TABLE": "t", "URL_QUEUE_URL": "https://sqs/url"}


def test_missing_variables_are_all_named() -> None:
    with pytest.raises(ConfigError, match="RECORDS_BUCKET, CATALOG_TABLE"):
        AwsConfig.from_env({})


def test_optional_settings_reach_the_stage_settings() -> None:
    config = AwsConfig.from_env(
        {
            **BASE,
            "REQUESTS_PER_HOST": "1",
            "REQUESTS_PER_HOST_OVERRIDES": "data.example.org=3",
            "TRUSTED_CONTEXTS": " https://w3id.org/example/context.jsonld , https://voc.example/ ,",
            "SHACL_VALIDATION": "TRUE",
            "IDEMPOTENCY_TABLE": "idem",
        }
    )
    settings = config.settings()
    assert settings.requests_per_host == 1
    assert settings.requests_per_host_overrides == {"data.example.org": 3}
    assert settings.trusted_contexts == (
        "https://w3id.org/example/context.jsonld",
        "https://voc.example/",
    )
    assert config.queue_urls == {"url": "https://sqs/url"}
    assert settings.shacl and config.idempotency_table == "idem"


def test_defaults_trust_no_remote_context() -> None:
    settings = AwsConfig.from_env(BASE).settings()
    assert settings.trusted_contexts == ()
    assert settings.requests_per_host == 2
    assert not settings.shacl and settings.incremental


@pytest.mark.parametrize(
    "env", [{"REQUESTS_PER_HOST": "0"}, {"REQUESTS_PER_HOST_OVERRIDES": "nohost"}]
)
def test_bad_politeness_settings_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="REQUESTS_PER_HOST"):
        AwsConfig.from_env({**BASE, **env})


def test_a_render_queue_url_makes_the_render_queue_and_the_hand_over() -> None:
    config = AwsConfig.from_env({**BASE, "RENDER_QUEUE_URL": "https://sqs/render"})
    assert config.queue_urls == {"url": "https://sqs/url", "render": "https://sqs/render"}
    assert config.settings().render_queue


def test_without_a_render_queue_url_nothing_is_handed_to_a_renderer() -> None:
    config = AwsConfig.from_env({**BASE, "RENDER_QUEUE_URL": ""})
    assert "render" not in config.queue_urls
    assert not config.settings().render_queue


@pytest.mark.parametrize(
    ("value", "segments"),
    [(None, True), ("", True), ("true", True), ("TRUE", True), ("false", False), ("False", False)],
)
def test_record_segments_are_on_unless_turned_off(value: str | None, segments: bool) -> None:
    # (the template's RecordSegments is "true" by default: docs/decisions/0086-record-segments.md)
    env = BASE if value is None else {**BASE, "RECORD_SEGMENTS": value}
    assert AwsConfig.from_env(env).settings().record_segments is segments
