"""Measure what a piece of work costs: peak memory and CPU time, in a process of its own.

Hostile-input tests assert bounds ("this page costs under 256 MB and 10 s of CPU"), and a bound on
memory means nothing inside the test process (pytest, moto and every earlier test are already in
its peak RSS). :func:`measure` runs a snippet of Python in a fresh interpreter, with the same
loopback-only network guard as the test session; the child reports its own peak resident set
size (``VmHWM``) and CPU time (``getrusage``) as it exits, so the figures are the work's own
(plus the interpreter and the imports, some 15-60 MiB).

The snippet prints what the test wants to check (JSON is convenient) on standard output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Measured", "measure"]

REPO_ROOT = Path(__file__).resolve().parents[2]

# Installed first in the child: the same guard as the test session (tests/support/netguard.py),
# and a report of the child's own resource use, written when it exits. Peak memory is the kernel's
# high-water mark of this process image (VmHWM), not getrusage's ru_maxrss: Linux carries
# ru_maxrss across exec, so a child forked from a large pytest process would report the parent's.
_PRELUDE = """\
import atexit as _atexit, json as _json, os as _os, resource as _resource
from tests.support.netguard import guard_network as _guard_network
_guard = _guard_network()
_guard.__enter__()
def _report_usage():
    usage = _resource.getrusage(_resource.RUSAGE_SELF)
    with open("/proc/self/status") as status:
        hwm = [line.split()[1] for line in status if line.startswith("VmHWM:")]
    with open(_os.environ["BOUNDS_USAGE_FILE"], "w") as out:
        _json.dump({"rss_kib": int(hwm[0]), "cpu": usage.ru_utime + usage.ru_stime}, out)
_atexit.register(_report_usage)
"""


@dataclass(frozen=True)
class Measured:
    """What one run of a snippet printed and cost."""

    stdout: str
    stderr: str
    returncode: int
    peak_rss_mib: float
    cpu_seconds: float
    wall_seconds: float


def measure(source: str, *, timeout: float = 120.0, env: dict[str, str] | None = None) -> Measured:
    """Run ``source`` (Python code) in a fresh interpreter and measure it.

    The child runs from the repository root with the network guard on. Raises
    :class:`subprocess.TimeoutExpired` (after killing the child) when it runs past ``timeout``
    seconds of wall-clock time (``subprocess.run`` kills it): an unbounded piece of work fails
    its test instead of hanging it. Raises AssertionError when the child died before reporting.
    """
    code = _PRELUDE + textwrap.dedent(source)
    with tempfile.TemporaryDirectory() as scratch:
        usage_file = Path(scratch) / "usage.json"
        child_env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "BOUNDS_USAGE_FILE": str(usage_file),
            **(env or {}),
        }
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        wall = time.monotonic() - started
        usage = json.loads(usage_file.read_text()) if usage_file.exists() else None
    if usage is None:
        raise AssertionError(f"the child reported no resource use:\n{done.stderr[-4000:]}")
    return Measured(
        stdout=done.stdout,
        stderr=done.stderr,
        returncode=done.returncode,
        peak_rss_mib=usage["rss_kib"] / 1024,
        cpu_seconds=usage["cpu"],
        wall_seconds=wall,
    )
