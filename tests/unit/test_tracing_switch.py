"""X-Ray only when tracing is on: with POWERTOOLS_TRACE_DISABLED a handler's import neither
loads the X-Ray SDK nor patches botocore, so a cold start does not pay for either.

Each case imports a real handler (functions/crosswalk/app.py) in a fresh interpreter, with the
environment a Lambda function has (LAMBDA_TASK_ROOT set).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aws_lambda_powertools")

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLER = REPO_ROOT / "functions" / "crosswalk"

PROBE = """
import json, sys, types
import app
import botocore.client
call = botocore.client.BaseClient.__dict__["_make_api_call"]
print(json.dumps({
    "xray": sorted(name for name in sys.modules if name.startswith("aws_xray_sdk")),
    "patched": not isinstance(call, types.FunctionType),
}))
"""


def _import_handler(**environment: str) -> dict[str, object]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERTOOLS_", "AWS_", "LAMBDA_"))
    }
    env.update(
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        LAMBDA_TASK_ROOT=str(HANDLER),
        AWS_LAMBDA_FUNCTION_NAME="crosswalk",
        **environment,
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=HANDLER,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_tracing_off_loads_no_xray_and_patches_nothing() -> None:
    off = _import_handler(POWERTOOLS_TRACE_DISABLED="true")
    assert off == {"xray": [], "patched": False}


def test_tracing_on_loads_the_xray_tracer() -> None:
    """The probe sees X-Ray when it is there: tracing on (the template's default) still traces."""
    on = _import_handler()
    assert "aws_xray_sdk.core" in on["xray"]  # type: ignore[operator]
