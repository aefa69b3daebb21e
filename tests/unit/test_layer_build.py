"""The Lambda layer as its Makefile builds it (what ``sam build`` runs): CPython 3.11 bytecode for
every module, the locked wheels only, and no boto3 or botocore (the runtime provides them).

The build runs for real into a temporary directory (a few seconds); it needs python3.11, make and
the package index pip is set up for, and skips when python3.11 or make is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CORE = REPO_ROOT / "layers" / "core"
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("python3.11") is None or shutil.which("make") is None:
        pytest.skip("the layer build needs python3.11 and make")
    artifacts = tmp_path_factory.mktemp("CoreLayer")
    done = subprocess.run(
        ["make", "-s", "-C", str(CORE), "build-CoreLayer", f"ARTIFACTS_DIR={artifacts}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return artifacts / "python"


def test_every_module_of_the_product_has_bytecode_for_the_runtime(layer: Path) -> None:
    sources = sorted((CORE / "cdif_harvester").rglob("*.py"))
    assert sources
    for source in sources:
        relative = source.relative_to(CORE)
        built = layer / relative
        assert built.is_file(), relative
        pyc = built.parent / "__pycache__" / f"{built.stem}.cpython-311.pyc"
        assert pyc.is_file(), relative
        # flags word of the pyc header: 0b01 hash-based, 0b10 check_source; unchecked = 0b01
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, relative


def test_third_party_modules_ship_as_bytecode(layer: Path) -> None:
    for package in ("httpx", "aws_lambda_powertools", "jinja2"):
        assert (layer / package / "__init__.pyc").is_file(), package
        assert not list((layer / package).rglob("*.py")), package


def test_the_layer_carries_no_runtime_provided_package(layer: Path) -> None:
    for name in RUNTIME_PROVIDED:
        assert not (layer / name).exists(), name
        assert not list(layer.glob(f"{name}-*.dist-info")), name


def test_the_layer_installs_exactly_the_lock(layer: Path) -> None:
    lock = (CORE / "requirements.lock").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+) \\$", lock, flags=re.MULTILINE))
    assert lock.count("--hash=sha256:") == len(pinned) > 0
    installed = {}
    for info in layer.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[re.sub(r"[._]", "-", name.lower())] = version
    assert installed == pinned
