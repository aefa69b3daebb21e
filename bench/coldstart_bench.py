"""Cold start of the Lambda handlers: import time from the built layer, and the layer's size.

Usage (from the repository root; needs python3.11 and the package index pip is set up for):

    .venv/bin/python bench/coldstart_bench.py [--runs 7] [--layer DIR] [--baseline]

The layer is built by its Makefile (layers/core/Makefile, what ``sam build`` runs) into a
temporary directory, or taken from ``--layer`` (e.g. .aws-sam/build/CoreLayer). ``--baseline``
builds it instead the way the python3.11 builder of ``sam build`` did: requirements.txt
pip-installed, no bytecode. Each handler (functions/*/app.py) is imported in a fresh
``python3.11 -I -S -B`` whose path is the function's directory, the layer's ``python/`` and the
runtime's boto3 (pip-installed once into the scratch directory), as on Lambda; no bytecode is
written (the layer is read-only there). Import time is perf_counter around ``import app``, the
median of ``--runs`` runs, with tracing on (LAMBDA_TASK_ROOT set, the template's
``Tracing: Active``) and off (POWERTOOLS_TRACE_DISABLED=true).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "layers" / "core"
PYTHON = "python3.11"

# The function environment of template.yaml (values are placeholders; nothing is called).
ENVIRONMENT = {
    "RECORDS_BUCKET": "bench-records",
    "CATALOG_TABLE": "bench-catalog",
    "IDEMPOTENCY_TABLE": "bench-idempotency",
    "SITEMAP_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/sitemap",
    "URL_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/url",
    "DOCUMENT_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/document",
    "INDEX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/index",
    "ALLOW_LOOPBACK": "false",
    "OPERATOR_CONTACT": "",
    "POWERTOOLS_SERVICE_NAME": "cdif-harvester",
    "POWERTOOLS_METRICS_NAMESPACE": "CDIFHarvester",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}

TIMED_IMPORT = """
import sys, time
sys.path[:0] = {paths!r}
start = time.perf_counter()
import app
print(time.perf_counter() - start)
"""


def build_layer(target: Path, *, baseline: bool) -> Path:
    """Build the layer into ``target``; return its ``python/`` directory."""
    python = target / "python"
    if baseline:
        subprocess.run(
            [PYTHON, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(python)]
            + ["-r", str(CORE / "requirements.txt")],
            check=True,
        )
        subprocess.run(["cp", "-R", str(CORE / "cdif_harvester"), str(python)], check=True)
        for cache in python.rglob("__pycache__"):
            subprocess.run(["rm", "-rf", str(cache)], check=True)
    else:
        subprocess.run(
            ["make", "-s", "-C", str(CORE), "build-CoreLayer", f"ARTIFACTS_DIR={target}"],
            check=True,
        )
    return python


def runtime_packages(target: Path) -> Path:
    """boto3 and botocore as the Lambda runtime provides them (outside the layer)."""
    if not (target / "boto3").is_dir():
        subprocess.run(
            [PYTHON, "-m", "pip", "install", "--quiet", "--target", str(target), "boto3"],
            check=True,
        )
    return target


def size_of(directory: Path) -> int:
    """Bytes of the files under ``directory`` (the layer unzipped)."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def import_time(function: Path, paths: list[str], *, tracing: bool) -> float:
    """Seconds to import one handler in a fresh interpreter."""
    environment = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT}
    if tracing:
        environment["LAMBDA_TASK_ROOT"] = str(function)
    else:
        environment["POWERTOOLS_TRACE_DISABLED"] = "true"
    code = TIMED_IMPORT.format(paths=[str(function), *paths])
    done = subprocess.run(
        # -B: -I ignores PYTHONDONTWRITEBYTECODE, and a layer is read-only on Lambda.
        [PYTHON, "-I", "-S", "-B", "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Build (or take) the layer, then time every handler's import; print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--layer", type=Path, help="a built layer (the directory holding python/)")
    parser.add_argument("--baseline", action="store_true", help="build as sam's python builder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        layer = (
            args.layer / "python"
            if args.layer
            else build_layer(scratch / "layer", baseline=args.baseline)
        )
        runtime = runtime_packages(scratch / "runtime")
        paths = [str(layer), str(runtime)]
        size = size_of(layer)
        botocore = (layer / "botocore").is_dir()
        print(f"layer: {size / 1e6:.1f} MB unzipped ({size} bytes); botocore in layer: {botocore}")
        print()
        print("| handler | tracing on: median ms (min-max) | tracing off: median ms (min-max) |")
        print("| --- | ---: | ---: |")
        for app in sorted(REPO.glob("functions/*/app.py")):
            cells = []
            for tracing in (True, False):
                times = [
                    import_time(app.parent, paths, tracing=tracing) * 1000 for _ in range(args.runs)
                ]
                cells.append(f"{statistics.median(times):.0f} ({min(times):.0f}-{max(times):.0f})")
            print(f"| {app.parent.name} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
