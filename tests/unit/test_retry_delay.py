"""The backoff before a retry (stages.jobs.retry_delay): exponential, jittered, bounded, and
the wait a Retry-After asked for when there was one."""

from __future__ import annotations

import random

from cdif_harvester.settings import Settings
from cdif_harvester.stages.jobs import retry_delay


def _top(low: float, high: float) -> float:
    return high


def _bottom(low: float, high: float) -> float:
    return low


def test_the_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    settings = Settings(retry_base=1.0, retry_cap=30.0)
    tops = [retry_delay(n, None, settings, jitter=_top) for n in range(1, 9)]
    bottoms = [retry_delay(n, None, settings, jitter=_bottom) for n in range(1, 9)]
    assert tops == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    # at least half of each step is always waited: never a retry at once
    assert bottoms == [top / 2 for top in tops]


def test_the_jitter_draws_within_the_step() -> None:
    settings = Settings()
    draws = random.Random(7)
    delays = [retry_delay(3, None, settings, jitter=draws.uniform) for _ in range(200)]
    assert all(2.0 <= delay <= 4.0 for delay in delays)
    assert len(set(delays)) > 100  # spread, not one value


def test_a_retry_after_is_waited_capped() -> None:
    settings = Settings(max_retry_after=900.0)
    assert retry_delay(1, 7.0, settings, jitter=_top) == 7.0
    assert retry_delay(4, 0.0, settings, jitter=_top) == 0.0
    assert retry_delay(1, 5000.0, settings, jitter=_top) == 900.0
