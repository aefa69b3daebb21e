#!/usr/bin/env bash
# Refresh infrastructure/constraints/{dev,sam}.txt: the newest versions that install, frozen.
#
# Usage (from the repository root): make constraints   (PYTHON: the interpreter, as for make setup)
#
# Each environment is installed afresh into a temporary directory without constraints, then
# frozen. Afterwards run `make test` (the tests meet the new versions) and, when a package the
# Lambda layer ships moved, refresh the layer's lock too (python3.11
# infrastructure/scripts/lock-layer.py): tests/unit/test_packaging.py holds the two in step.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3.11}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$python" -m venv "$scratch/dev"
"$scratch/dev/bin/pip" install --quiet --upgrade pip
"$scratch/dev/bin/pip" install --quiet -e '.[aws,dev,bench]'
{
    echo "# The test and development environment (make setup: .venv), pinned so that every run of the"
    echo "# tests installs the same versions; packages the Lambda layer ships must match"
    echo "# layers/core/requirements.lock (tests/unit/test_packaging.py checks). Refresh: make constraints"
    "$scratch/dev/bin/pip" freeze --exclude-editable
} > infrastructure/constraints/dev.txt

"$python" -m venv "$scratch/sam"
"$scratch/sam/bin/pip" install --quiet --upgrade pip
"$scratch/sam/bin/pip" install --quiet aws-sam-cli
{
    echo "# The SAM CLI's own environment (make sam-tools: .tools/sam), pinned as dev.txt is."
    echo "# Refresh: make constraints"
    "$scratch/sam/bin/pip" freeze | grep -v '^pip=='
} > infrastructure/constraints/sam.txt
echo "constraints refreshed: $(grep -c '==' infrastructure/constraints/dev.txt) dev," \
    "$(grep -c '==' infrastructure/constraints/sam.txt) SAM packages"
