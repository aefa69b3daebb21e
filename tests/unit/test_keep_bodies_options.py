"""Keeping bodies is asked for by the run (``--keep-bodies``, ``KEEP_BODIES``) or by a source's
``keep_bodies`` resolution option; nothing is kept by default."""

from __future__ import annotations

import pytest

from cdif_harvester.aws_runtime import AwsConfig
from cdif_harvester.cli.main import _parser
from cdif_harvester.local_runtime import LocalConfig
from cdif_harvester.settings import Settings
from cdif_harvester.stages.intake import InvalidOptions, check_options


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_source_may_ask_to_keep_bodies_or_not(value: str) -> None:
    assert check_options({"keep_bodies": value}) == {"keep_bodies": value}


@pytest.mark.parametrize("value", ["", "yes", "True", "1"])
def test_another_keep_bodies_value_is_refused(value: str) -> None:
    with pytest.raises(InvalidOptions, match="keep_bodies must be"):
        check_options({"keep_bodies": value})


def test_nothing_is_kept_unless_the_run_asks() -> None:
    assert Settings().keep_bodies is False
    parser = _parser()
    base = ["harvest", "http://x.example/", "--out", "o"]
    assert parser.parse_args(base).keep_bodies is False
    assert parser.parse_args([*base, "--keep-bodies"]).keep_bodies is True
    assert LocalConfig().settings().keep_bodies is False
    assert LocalConfig(keep_bodies=True).settings().keep_bodies is True
    env = {"RECORDS_BUCKET": "b", "CATALOG_TABLE": "t"}
    assert AwsConfig.from_env(env).settings().keep_bodies is False
    kept = AwsConfig.from_env({**env, "KEEP_BODIES": "true"}).settings()
    assert kept.keep_bodies is True
