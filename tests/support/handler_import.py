"""Import one real handler (functions/<name>/app.py) in a fresh interpreter, as Lambda does on a
cold start, and read what a probe printed about it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["FUNCTIONS", "probe_handler"]

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def probe_handler(handler: str, probe: str, **environment: str) -> Any:
    """Run ``probe`` (Python that imports ``app`` and prints JSON as its last line) in the
    directory of the handler ``handler``, with the environment a Lambda function has (no
    Powertools, AWS or Lambda settings of this process; ``environment`` added); return the
    JSON. Fails the test when the probe fails."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERTOOLS_", "AWS_", "LAMBDA_"))
    }
    env.update(
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        LAMBDA_TASK_ROOT=str(FUNCTIONS / handler),
        AWS_LAMBDA_FUNCTION_NAME=handler,
        **environment,
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=FUNCTIONS / handler,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
