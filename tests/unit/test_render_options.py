"""The ``render`` resolution option and the run's ``--render``: checked values, and the mode
the resolver uses (the run's over the source's, ``never`` by default)."""

from __future__ import annotations

import pytest

from cdif_harvester.cli.main import _parser
from cdif_harvester.stages.intake import InvalidOptions, check_options


@pytest.mark.parametrize("mode", ["never", "fallback", "always"])
def test_the_render_modes_are_accepted(mode: str) -> None:
    assert check_options({"render": mode}) == {"render": mode}


@pytest.mark.parametrize("mode", ["", "yes", "ALWAYS", "sometimes"])
def test_another_render_value_is_refused(mode: str) -> None:
    with pytest.raises(InvalidOptions, match="render must be one of"):
        check_options({"render": mode})


def test_the_harvest_command_takes_render_fallback_or_always() -> None:
    parser = _parser()
    base = ["harvest", "http://x.example/", "--out", "o"]
    assert parser.parse_args([*base, "--render", "always"]).render == "always"
    assert parser.parse_args(base).render is None
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--render", "never-ever"])
