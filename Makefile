# The two commands of the README:
#   make demo   set everything up, serve the bundled demo publisher site and harvest it
#   make test   set everything up, then lint, type-check, test and check the SAM template
# Everything is installed into ./.venv (the product and its dev tools) and ./.tools/sam (the SAM
# CLI, kept apart because it pins its own versions of boto3 and friends).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
SAM_VENV := .tools/sam
BIN := $(VENV)/bin
DEMO_OUT ?= demo-out

.PHONY: setup demo test lint typecheck pytest check-template sam-tools openapi clean browser report-screenshot \
	mutation constraints

# Both environments install the versions pinned in infrastructure/constraints/ (every run of the
# tests meets the same packages; `make constraints` moves them on).
DEV_CONSTRAINTS := infrastructure/constraints/dev.txt
SAM_CONSTRAINTS := infrastructure/constraints/sam.txt

$(VENV)/.installed: pyproject.toml layers/core/requirements.txt $(DEV_CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(DEV_CONSTRAINTS) -e '.[aws,dev]'
	touch $@

$(SAM_VENV)/.installed: $(SAM_CONSTRAINTS)
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/pip install --quiet -c $(SAM_CONSTRAINTS) aws-sam-cli
	touch $@

setup: $(VENV)/.installed

sam-tools: $(SAM_VENV)/.installed

demo: setup
	$(BIN)/cdif-harvest demo --out $(DEMO_OUT)

test: setup sam-tools lint typecheck pytest check-template

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# The tests run on every core (pytest-xdist; a test file stays on one worker, so its module
# fixtures are made once), then the few that bound wall-clock time (marked `serial`) run alone,
# where no other test competes for the machine. TEST_JOBS=0 runs them all in one process.
TEST_JOBS ?= auto

pytest: setup browser
	$(BIN)/pytest -q -n $(TEST_JOBS) --dist loadfile -m "not serial"
	$(BIN)/pytest -q -m serial

# The publisher report is tested in a real browser: Debian's chromium, installed when missing.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	elif command -v sudo >/dev/null 2>&1; then \
		sudo DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || \
		{ sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	else \
		echo "chromium is needed by the browser test of the publisher report:" >&2; \
		echo "install Debian's chromium package (apt-get install chromium, as root)." >&2; \
		exit 1; \
	fi

report-screenshot: setup browser
	$(BIN)/python -m tests.support.browser docs/report.png

openapi: setup
	$(BIN)/python -m cdif_harvester.api > docs/openapi.json

check-template: setup sam-tools
	SAM=$(SAM_VENV)/bin/sam CFN_LINT=$(BIN)/cfn-lint bash infrastructure/scripts/check-template.sh

# Mutation testing of the modules that decide outcomes (docs/mutation.md), one module at a time;
# minutes, not part of `make test`. MODULES="discovery.robots" runs one; MUTATION_JOBS workers.
$(VENV)/.mutation-installed: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet -c $(DEV_CONSTRAINTS) -e '.[aws,dev,mutation]'
	touch $@

mutation: $(VENV)/.mutation-installed
	bash infrastructure/scripts/mutation.sh $(MODULES)

# Move the pinned versions of both environments on to the newest that install (then: make test).
constraints:
	PYTHON=$(PYTHON) bash infrastructure/scripts/freeze-constraints.sh

clean:
	rm -rf $(VENV) .tools .aws-sam $(DEMO_OUT) .mypy_cache .ruff_cache .pytest_cache .mutation
