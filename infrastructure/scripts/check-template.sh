#!/usr/bin/env bash
# Check template.yaml: `sam validate --lint`, `cfn-lint`, and a container-free `sam build`;
# the renderer's template (functions/renderer/template.yaml): `sam validate --lint`, `cfn-lint`.
#
# Usage: infrastructure/scripts/check-template.sh [--no-build]
#
#   SAM       the sam binary (default: `sam` on PATH, else .tools/sam/bin/sam in the repository)
#   CFN_LINT  the cfn-lint binary (default: .venv/bin/cfn-lint, else `cfn-lint` on PATH)
#   BUILD_DIR where `sam build` writes (default: a temporary directory, removed afterwards)
#
# No AWS account is needed: fake credentials and region are set for this script only.
# `sam build` runs layers/core/Makefile, which pip-installs layers/core/requirements.lock (x86_64
# wheels): it needs make, python3.11 and the package index pip is set up for.
# Prints one "check <name>: ok|FAILED (<seconds> s)" line per step; exits non-zero if any failed.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 2

build=1
for arg in "$@"; do
    case "$arg" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

if [[ -z "${SAM:-}" ]]; then
    if command -v sam >/dev/null 2>&1; then
        SAM="$(command -v sam)"
    elif [[ -x .tools/sam/bin/sam ]]; then
        SAM=.tools/sam/bin/sam
    else
        echo "sam not found: put it on PATH or set SAM=/path/to/sam" >&2
        exit 2
    fi
fi
if [[ -z "${CFN_LINT:-}" ]]; then
    if [[ -x .venv/bin/cfn-lint ]]; then
        CFN_LINT=.venv/bin/cfn-lint
    else
        CFN_LINT=cfn-lint
    fi
fi

# Never use real credentials, never phone home.
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_SESSION_TOKEN=testing
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
unset AWS_PROFILE
export SAM_CLI_TELEMETRY=0

failures=0
run_check() {
    local name="$1"
    shift
    local start elapsed status=ok
    start=${EPOCHREALTIME/./}
    if ! "$@"; then
        status=FAILED
        failures=$((failures + 1))
    fi
    elapsed=$((${EPOCHREALTIME/./} - start))
    printf 'check %s: %s (%d.%d s)\n' "$name" "$status" $((elapsed / 1000000)) \
        $((elapsed / 100000 % 10))
}

run_check "sam validate --lint" "$SAM" validate --lint --template-file template.yaml --region us-east-1
run_check "cfn-lint" "$CFN_LINT" template.yaml
# The renderer's own stack (an image: built with Docker, so never here; linted all the same).
renderer=functions/renderer/template.yaml
run_check "sam validate --lint (renderer)" "$SAM" validate --lint --template-file "$renderer" \
    --region us-east-1
run_check "cfn-lint (renderer)" "$CFN_LINT" "$renderer"

if [[ $build -eq 1 ]]; then
    missing=()
    for uri in $(sed -n 's/^ *CodeUri: *\(functions\/[^ ]*\) *$/\1/p' template.yaml); do
        [[ -f "$uri/app.py" ]] || missing+=("$uri")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        echo "sam build: missing handler(s): ${missing[*]}" >&2
        failures=$((failures + 1))
    else
        scratch="$(mktemp -d)"
        trap 'rm -rf "$scratch"' EXIT
        run_check "sam build" "$SAM" build --template-file template.yaml --base-dir . \
            --build-dir "${BUILD_DIR:-$scratch/build}" --cache-dir "$scratch/cache" --no-cached
    fi
fi

if [[ $failures -gt 0 ]]; then
    echo "template checks: $failures failed" >&2
    exit 1
fi
echo "template checks: all passed"
