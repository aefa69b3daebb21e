"""X-Ray only when tracing is on: with POWERTOOLS_TRACE_DISABLED a handler's import neither
loads the X-Ray SDK nor patches botocore, so a cold start does not pay for either.

Each case imports a real handler (functions/crosswalk/app.py) in a fresh interpreter, with the
environment a Lambda function has (LAMBDA_TASK_ROOT set).
"""

from __future__ import annotations

import pytest

from tests.support.handler_import import probe_handler

pytest.importorskip("aws_lambda_powertools")


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
    result: dict[str, object] = probe_handler("crosswalk", PROBE, **environment)
    return result


def test_tracing_off_loads_no_xray_and_patches_nothing() -> None:
    off = _import_handler(POWERTOOLS_TRACE_DISABLED="true")
    assert off == {"xray": [], "patched": False}


def test_tracing_on_loads_the_xray_tracer() -> None:
    """The probe sees X-Ray when it is there: tracing on (the template's default) still traces."""
    on = _import_handler()
    assert "aws_xray_sdk.core" in on["xray"]  # type: ignore[operator]
