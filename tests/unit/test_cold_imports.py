"""What a handler's cold start imports: the heavy libraries only where the handler needs them.

pyld (JSON-LD processing) and jsonschema (the reference validation engine, asked only for the
messages of an invalid record) are imported where they are used, not with the modules that
use them: every handler imports, through closing a run and the composition root, modules that
can process JSON-LD, and most never do. Each case imports a real handler (functions/*/app.py)
in a fresh interpreter with the environment a Lambda function has, and lists what it loaded.
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
HANDLERS = sorted(path.parent.name for path in (REPO_ROOT / "functions").glob("*/app.py"))
#: The handlers that normalise records, and so import pyld with their stage.
NORMALISING = {"extractor"}

PROBE = """
import json, sys
import app
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def _loaded(handler: str) -> set[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERTOOLS_", "AWS_", "LAMBDA_"))
    }
    env.update(
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        LAMBDA_TASK_ROOT=str(REPO_ROOT / "functions" / handler),
        AWS_LAMBDA_FUNCTION_NAME=handler,
        POWERTOOLS_TRACE_DISABLED="true",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT / "functions" / handler,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_every_handler_is_probed() -> None:
    assert len(HANDLERS) >= 8 and set(HANDLERS) >= NORMALISING


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_cold_start_loads_pyld_and_jsonschema_only_where_the_stage_needs_them(
    handler: str,
) -> None:
    loaded = _loaded(handler)
    assert "cdif_harvester" in loaded  # (the probe sees the product's own imports)
    assert "jsonschema" not in loaded
    assert ("pyld" in loaded) == (handler in NORMALISING)
