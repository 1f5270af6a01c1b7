# Strom: the two commands are `make up` (a local cluster) and `make test` (the whole suite).
# Both create .venv at the repository root when it is missing and install every dependency,
# an etcd server binary included, from the pins in constraints.txt.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
SOURCES := constraints.txt requirements-dev.txt clients/pyproject.toml clients/setup.py \
	services/common/pyproject.toml $(wildcard services/*/pyproject.toml) spark_connector/pyproject.toml \
	$(wildcard clients/src/strom/*/_native/*.c)

NODE_DIR := clients/node
NODE_STAMP := $(NODE_DIR)/node_modules/.package-lock.json

.PHONY: up test compose-test test-slow lint bench bench-quick proto chaos chaos-seeds clean node

$(STAMP): $(SOURCES)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Strom needs Python >= 3.11, found " + sys.version' 
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt pip setuptools wheel
	$(PIP) install --no-build-isolation -c constraints.txt -r requirements-dev.txt
	@$(BIN)/python -m strom_server.etcd.binary --check
	@touch $(STAMP)

up: $(STAMP)
	$(BIN)/strom cluster up

# The Node.js client's dependencies (pinned by package-lock.json), for its tests and for the
# compose-spec schema the docker-compose.yml test validates against.
$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	@touch $(NODE_STAMP)

node: $(NODE_STAMP)

test: $(STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest -m "not slow and not compose" $(PYTEST_ARGS)

# docker-compose.yml and docker-compose.secure.yml run for real in a container engine (started
# when none runs; skips where containers cannot run). Not part of `make test`.
compose-test: $(STAMP)
	$(BIN)/python -m pytest -m compose tests/integration/compose $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

bench-quick: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b --quick || exit 1; done

# Regenerate the protocol stubs from proto/ into clients/src/strom/protocol/v1.
proto: $(STAMP)
	$(BIN)/python proto/generate.py

chaos: $(STAMP)
	$(BIN)/python -m pytest -m slow -s tests/chaos $(PYTEST_ARGS)

# One fault-harness workload over many seeds (one clean run proves little): every anomaly count
# per seed and summed; fails if any is not 0. WORKLOAD=txn|replication|partition.
WORKLOAD ?= txn
CHAOS_SEEDS ?= 20
CHAOS_SECONDS ?= 240
chaos-seeds: $(STAMP)
	$(BIN)/python tests/chaos/seeds.py --workload $(WORKLOAD) --seeds $(CHAOS_SEEDS) --seconds $(CHAOS_SECONDS)

# The slow integration tests outside the fault harness (e.g. the streaming driver killed five
# times): too long for every CI run.
test-slow: $(STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest -m slow tests/integration $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build clients/build .strom $(NODE_DIR)/node_modules
