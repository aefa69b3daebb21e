"""What a handler's cold start imports: the heavy libraries only where the handler needs them.

pyld (JSON-LD processing) and jsonschema (the reference validation engine, asked only for the
messages of an invalid record) are imported where they are used, not with the modules that
use them: every handler imports, through closing a run and the composition root, modules that
can process JSON-LD, and most never do. Each case imports a real handler (functions/*/app.py)
in a fresh interpreter with the environment a Lambda function has, and lists what it loaded.
"""

from __future__ import annotations

import pytest

from tests.support.handler_import import FUNCTIONS, probe_handler

pytest.importorskip("aws_lambda_powertools")

HANDLERS = sorted(path.parent.name for path in FUNCTIONS.glob("*/app.py"))
#: The handlers that normalise records, and so import pyld with their stage.
NORMALISING = {"extractor"}

PROBE = """
import json, sys
import app
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def _loaded(handler: str) -> set[str]:
    return set(probe_handler(handler, PROBE, POWERTOOLS_TRACE_DISABLED="true"))


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
