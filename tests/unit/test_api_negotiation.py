"""Content negotiation of the intake API (RFC 9110, section 12.5.1)."""

from __future__ import annotations

import pytest

from cdif_harvester.api.negotiation import negotiate

OFFERED = ("application/linkset+json", "application/linkset")


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "application/linkset+json"),
        ("", "application/linkset+json"),
        ("nonsense", "application/linkset+json"),  # no media range at all: as if absent
        ("*/*", "application/linkset+json"),
        ("application/linkset", "application/linkset"),
        ("APPLICATION/LINKSET", "application/linkset"),
        ("application/linkset; charset=utf-8", "application/linkset"),
        ("application/linkset+json;q=0.4, application/linkset;q=0.6", "application/linkset"),
        # the most specific range decides: */* at 1 does not lift an explicit q=0
        ("application/linkset+json;q=0, */*", "application/linkset"),
        ("application/linkset;q=0.5, application/*;q=0.5", "application/linkset+json"),
        ("application/linkset;q=1.7", "application/linkset"),  # clamped, still accepted
        ("text/html", None),
        ("application/linkset;q=0, application/linkset+json;q=0", None),
        ("application/linkset;q=bad", None),
    ],
)
def test_negotiate_picks_the_preferred_offered_type(accept: str | None, chosen: str | None) -> None:
    assert negotiate(accept, OFFERED) == chosen


def test_nothing_offered_is_nothing_chosen() -> None:
    assert negotiate("*/*", ()) is None
