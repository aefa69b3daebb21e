"""What a laptop installs: the core runs without the AWS stack (the ``aws`` extra), and the Lambda
layer's requirements are the core's plus that extra's (less boto3, which the runtime provides)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
AWS_STACK = ("boto3", "botocore", "aws_lambda_powertools", "aws_xray_sdk", "moto", "s3transfer")

# Run in a fresh interpreter: a meta path finder refuses the AWS stack, as if it were not
# installed, then the command line runs with the arguments given.
WITHOUT_AWS = f"""
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {AWS_STACK!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
for name in list(sys.modules):
    if name.split(".")[0] in {AWS_STACK!r}:
        del sys.modules[name]
from cdif_harvester.cli.main import main
code = main(sys.argv[1:])
loaded = sorted({{n.split(".")[0] for n in sys.modules}} & set({AWS_STACK!r}))
print("LOADED=" + ",".join(loaded), file=sys.stderr)
sys.exit(code)
"""


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement.strip())
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def _without_aws(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_AWS, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_core_dependencies_hold_no_aws_stack() -> None:
    core = {_name(item) for item in PROJECT["dependencies"]}
    aws = {_name(item) for item in PROJECT["optional-dependencies"]["aws"]}
    assert aws == {"boto3", "aws-lambda-powertools", "aws-xray-sdk"}
    assert core & aws == set()


def test_the_layer_installs_the_core_and_the_aws_extra_but_boto3() -> None:
    lines = (REPO_ROOT / "layers" / "core" / "requirements.txt").read_text().splitlines()
    layer = {item.strip() for item in lines if item.strip() and not item.startswith("#")}
    wanted = set(PROJECT["dependencies"]) | set(PROJECT["optional-dependencies"]["aws"])
    assert layer == {item for item in wanted if _name(item) != "boto3"}


@pytest.mark.network
def test_demo_and_harvest_run_without_the_aws_stack(tmp_path: Path) -> None:
    done = _without_aws("demo", "--out", str(tmp_path / "demo"), "--port", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["records"] > 0
    assert "LOADED=\n" in done.stderr
    # harvest: the demo site served by a parent process, harvested by a child without the stack
    script = (
        "from cdif_harvester.demo.server import PublisherSite, demo_site_dir\n"
        "import subprocess, sys\n"
        "with PublisherSite(demo_site_dir()) as site:\n"
        "    done = subprocess.run([sys.executable, '-c', sys.argv[1], 'harvest',"
        " site.url('/robots.txt'), '--out', sys.argv[2], '--allow-loopback', '--quiet'])\n"
        "sys.exit(done.returncode)\n"
    )
    harvested = subprocess.run(
        [sys.executable, "-c", script, WITHOUT_AWS, str(tmp_path / "harvest")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert harvested.returncode == 0, harvested.stderr[-3000:]
    assert json.loads(harvested.stdout)["records"] > 0
    assert "LOADED=\n" in harvested.stderr


def test_the_aws_commands_say_what_to_install_without_it(tmp_path: Path) -> None:
    done = _without_aws("invoke", "SchedulerFunction", "--event", "scheduler.json", cwd=tmp_path)
    assert done.returncode == 2
    assert "missing boto3, aws-lambda-powertools, moto" in done.stderr
    assert "pip install -e '.[aws,dev]'" in done.stderr
    done = _without_aws("dlq", "redrive", "--dlq-url", "x", "--target-url", "y", cwd=tmp_path)
    assert done.returncode == 2
    assert "pip install '.[aws]'" in done.stderr


def _pins(path: Path) -> dict[str, str]:
    """``name == version`` lines of a pip requirements or constraints file, by normalised name."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==([^\s;\\]+)", line.strip())
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def test_the_tests_run_the_versions_the_layer_ships() -> None:
    # The test environment's constraints pin every package the Lambda layer's lock ships at
    # the lock's version, so the tests exercise what is deployed (the tests and the layer once
    # ran two lxml releases that read a broken document differently).
    layer = _pins(REPO_ROOT / "layers" / "core" / "requirements.lock")
    dev = _pins(REPO_ROOT / "infrastructure" / "constraints" / "dev.txt")
    assert layer, "the layer's lock pins nothing"
    assert {name: dev.get(name) for name in layer} == layer


def test_every_environment_is_installed_with_its_constraints() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    installs = [
        line for line in makefile.splitlines() if re.search(r"pip install .*(-e|sam)", line)
    ]
    assert installs
    assert all(" -c $(" in line for line in installs), installs
