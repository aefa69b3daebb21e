"""The bounds helper measures the child's own memory and CPU, and stops runaway work."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.bounds import measure


def test_a_child_that_holds_memory_reports_it() -> None:
    small = measure("print('ok')")
    big = measure("block = bytearray(200 * 1024 * 1024)\nblock[::4096] = b'x' * len(block[::4096])")
    assert small.stdout.strip() == "ok"
    assert small.peak_rss_mib < 120
    assert big.peak_rss_mib - small.peak_rss_mib > 150


def test_a_child_that_burns_cpu_reports_it() -> None:
    spent = measure(
        "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    )
    assert spent.cpu_seconds >= 0.5


def test_a_child_that_runs_too_long_is_stopped() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        measure("import time\ntime.sleep(30)", timeout=1.0)


def test_the_child_cannot_reach_beyond_loopback() -> None:
    out = measure(
        """
        import socket
        try:
            socket.create_connection(("192.0.2.1", 80), timeout=1)
        except AssertionError:
            print("refused")
        """
    )
    assert out.stdout.strip() == "refused"
